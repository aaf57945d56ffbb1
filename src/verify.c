/*
 * gf_verify: decodes every sample of a data set through a loader and lists
 * what cannot be used. The one implementation behind `gpufeed verify` and
 * gpufeed.verify(), so the two cannot disagree on what is bad or on when
 * the list ends. Runs on the caller's thread; the lists are filled by the
 * loader's callbacks (gf_open's thread for damaged shards, before any
 * loader thread starts; then the controller, the one thread that runs
 * on_sample_error and on_sample_warning, so no two calls overlap). Uses
 * the public API only: a client of the loader like any trainer.
 */
#include "common.h"
#include "grow.h"
#include "loader_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry_list {
    gf_verify_entry *v;
    size_t n, cap;
    uint64_t calls; /* every report, stored or not */
} entry_list;

typedef struct collector {
    entry_list bad, warned, damaged, skipped;
    entry_list keys;    /* shard keys without a declared field's member */
    uint64_t keys_total;
    int oom;
} collector;

static void add(collector *c, entry_list *el, int64_t sample, const char *path, int code,
                const char *reason)
{
    el->calls++;
    if (gf__grow((void **)&el->v, &el->cap, el->n + 1, sizeof *el->v, 16) < 0) {
        c->oom = 1;
        return;
    }
    gf_verify_entry *e = &el->v[el->n];
    e->sample = sample;
    e->code = code;
    e->path = strdup(path ? path : "");
    e->reason = strdup(reason && *reason ? reason : gf_strerror(code));
    if (!e->path || !e->reason) {
        free(e->path);
        free(e->reason);
        c->oom = 1;
        return;
    }
    el->n++;
}

/* on_sample_error: a bad sample, or (sample -1, from gf_open) a damaged
 * shard, named by its whole path. */
static void on_error(void *user, int64_t sample, const char *path, int code, const char *reason)
{
    collector *c = user;
    add(c, sample < 0 ? &c->damaged : &c->bad, sample, path, code, reason);
}

static void on_warning(void *user, int64_t sample, const char *path, int code,
                       const char *reason)
{
    collector *c = user;
    add(c, &c->warned, sample, path, code, reason);
}

/* gf_next's GF_EDATASET for an epoch that delivered no batch because every
 * sample failed: for verify that is the answer (each failure was reported,
 * in sampler order, before gf_next saw the epoch end), not an error. Only
 * then: a GF_EDATASET with a batch delivered, or with samples that did not
 * fail, is a real failure. */
static int every_sample_bad(const gf_stats *st)
{
    return st->samples == 0 && st->epoch_samples > 0 && st->errors == st->epoch_samples;
}

static void free_entries(entry_list *el)
{
    for (size_t i = 0; i < el->n; i++) {
        free(el->v[i].path);
        free(el->v[i].reason);
    }
    free(el->v);
}

/* The loader's message into r->error ("" when it has none). */
static void failed(gf_verify_result *r, const gf_loader *l)
{
    snprintf(r->error, sizeof r->error, "%s", l ? gf_last_error(l) : "");
}

static int cancelled(const int *cancel)
{
    return cancel && __atomic_load_n(cancel, __ATOMIC_ACQUIRE);
}

static int run(gf_verify_result *r, const gf_settings *in, collector *c, const int *cancel)
{
    gf_settings s = *in;
    /* Decoding is the check: one unshuffled epoch, cheap output, every bad
     * sample skipped and reported, on the CPU (a device ring would be
     * opened and never used). */
    s.transform = GF_TRANSFORM_EVAL;
    s.shuffle = 0;
    s.epochs = 1;
    s.on_error = GF_ON_ERROR_SKIP;
    s.height = s.width = 32;
    s.batch_size = 64;
    s.device = GF_DEVICE_CPU;
    s.dtype = GF_DTYPE_UINT8;
    s.flip_on_device = 0;
    s.autotune = 0;
    s.drop_last = 0;
    if (s.world == 0) { /* the whole data set, not a launcher's share */
        s.rank = 0;
        s.world = 1;
    }
    s.on_sample_error = on_error;
    s.on_sample_error_user = c;
    s.on_sample_warning = on_warning;
    s.on_sample_warning_user = c;

    gf_loader *l = NULL;
    int rc = gf__open_joined(&l, &s); /* a mix: every source once, not by weight */
    if (rc == GF_EDATASET && c->damaged.n > 0) {
        /* No shard kept a sample: the damage is the finding. */
        failed(r, l);
        gf_close(&l);
        return 0;
    }
    if (rc < 0) {
        failed(r, l);
        gf_close(&l);
        return rc;
    }
    r->opened = 1;
    gf_batch *b;
    /* In slices, so that a cancel is seen while a batch decodes. */
    while (!cancelled(cancel) &&
           ((rc = gf_next_timed(l, &b, cancel ? 50 * 1000 * 1000 : -1)) == 0 || rc == GF_EAGAIN))
        if (rc == 0)
            gf_release(l, b);
    if (cancelled(cancel)) {
        snprintf(r->error, sizeof r->error, "cancelled");
        gf_close(&l);
        return GF_EAGAIN;
    }
    if (gf_get_stats(l, &r->stats) < 0 && rc == GF_EOF)
        rc = GF_EINVAL;
    /* Named while the loader is open (the paths live until gf_close). A
     * shard key without a declared field's member is a finding, as a bad
     * sample is; what a folder walk left out is not. */
    uint64_t n_skipped = gf_skipped_entry(l, 0, NULL, NULL);
    int keys = r->stats.shards > 0;
    if (keys)
        c->keys_total = n_skipped;
    else
        r->skipped_entries_total = n_skipped;
    for (uint64_t i = 0; i < n_skipped && i < GF_SKIPPED_NAMED_MAX; i++) {
        const char *path = "", *reason = "";
        gf_skipped_entry(l, i, &path, &reason);
        if (keys)
            add(c, &c->keys, -1, path, GF_EDATASET, reason);
        else
            add(c, &c->skipped, -1, path, 0, reason);
    }
    if (rc == GF_EOF || (rc == GF_EDATASET && every_sample_bad(&r->stats)))
        rc = 0;
    else
        failed(r, l);
    /* Closing joins the loader's threads: the lists are final. */
    gf_close(&l);
    return rc;
}

int gf_verify(const gf_settings *s, gf_verify_result **out)
{
    return gf_verify_cancellable(s, out, NULL);
}

int gf_verify_cancellable(const gf_settings *s, gf_verify_result **out, const int *cancel)
{
    if (!out)
        return GF_EINVAL;
    gf_verify_result *r = *out = calloc(1, sizeof *r);
    if (!r)
        return GF_ENOMEM;
    if (!s || !s->data) {
        snprintf(r->error, sizeof r->error, "invalid settings: s != NULL and s->data != NULL");
        return GF_EINVAL;
    }
    collector c = {.oom = 0};
    int rc = run(r, s, &c, cancel);
    const gf_stats *st = &r->stats;
    r->samples = st->epoch_samples ? st->epoch_samples : st->dataset_samples;
    r->bad = c.bad.calls > st->errors ? c.bad.calls : st->errors;
    /* The keys after the samples: the list is the bad ones, then these. */
    r->samples += c.keys_total;
    r->bad += c.keys_total;
    if (c.keys.n && gf__grow((void **)&c.bad.v, &c.bad.cap, c.bad.n + c.keys.n,
                             sizeof *c.bad.v, 16) == 0) {
        memcpy(c.bad.v + c.bad.n, c.keys.v, c.keys.n * sizeof *c.keys.v);
        c.bad.n += c.keys.n;
        free(c.keys.v);
    } else if (c.keys.n) {
        free_entries(&c.keys);
        c.oom = 1;
    }
    r->bad_samples = c.bad.v;
    r->n_bad_samples = c.bad.n;
    r->warned_samples = c.warned.v;
    r->n_warned_samples = c.warned.n;
    r->damaged_shards = c.damaged.v;
    r->n_damaged_shards = c.damaged.n;
    r->skipped_entries = c.skipped.v;
    r->n_skipped_entries = c.skipped.n;
    r->incomplete = c.oom || c.bad.n != r->bad;
    return rc;
}

void gf_verify_free(gf_verify_result **r)
{
    if (!r || !*r)
        return;
    gf_verify_result *v = *r;
    free_entries(&(entry_list){.v = v->bad_samples, .n = v->n_bad_samples});
    free_entries(&(entry_list){.v = v->warned_samples, .n = v->n_warned_samples});
    free_entries(&(entry_list){.v = v->damaged_shards, .n = v->n_damaged_shards});
    free_entries(&(entry_list){.v = v->skipped_entries, .n = v->n_skipped_entries});
    free(v);
    *r = NULL;
}
