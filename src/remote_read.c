/* The cell reader of whole remote shards (cell_reader.h), the shard
 * order's, on gf-control; built with `remote` only; a shard's buffer is
 * remote_shard.c's. A scan runs ahead of the cursor through the epoch's
 * order (its own copy of the cursor, so the cursor's permutation is not
 * disturbed) and counts, for each shard, the positions scanned and not
 * yet taken (`need`); a shard the scan meets is fetched when a buffer is
 * free, or when one can be freed: a shard no cell reads (`pins`), no
 * scanned position needs and no cell waits for, the least recently used
 * first. So with the shard order, whose window of W shards is read
 * together, the default 2W buffers (prefetch_shards) hold the window
 * being read and fetch the next window meanwhile: a window's shards are
 * all needed until its end, so W + 2 left the next window half fetched
 * when it began. A buffer freed is a shard not needed again until the
 * scan meets it (a later epoch). The scan goes on into the next epoch
 * (its own tables of the shard order), so an epoch's first shards arrive
 * while the last one is read; never further. A cell whose shard has not
 * arrived waits on the shard's list until the shard's arrival hands back
 * its outcome (a failed shard is tried again a later epoch). */
#include "remote_read_impl.h"

#include "dataset_indexers.h"

#include <stdlib.h>
#include <string.h>

/* What create allocates; GF_ENOMEM leaves it for destroy. */
static int alloc(shard_reader *r, unsigned buffers, uint64_t budget)
{
    gf_loader *l = r->l;
    r->buffers = buffers;
    r->budget = budget;
    r->sh = calloc(l->ds.n_shards, sizeof *r->sh);
    r->wait_next = calloc((size_t)l->max_slots * (size_t)l->B, sizeof *r->wait_next);
    r->live = calloc(buffers, sizeof *r->live);
    r->want = calloc(l->ds.n_shards, sizeof *r->want);
    if (!r->sh || !r->wait_next || !r->live || !r->want)
        return GF_ENOMEM;
    if (l->sampler.shards) {
        if (gf__shard_epoch_alloc(&r->scan_tables, l->sampler.shards) < 0)
            return GF_ENOMEM;
        r->has_tables = true;
    }
    if (l->s.cache_dir &&
        gf__shard_cache_open(&r->cache, l->s.cache_dir, l->s.cache_bytes,
                             (const char *const *)l->ds.shard_paths, l->ds.n_shards) < 0)
        return GF_ENOMEM;
    return 0;
}

static void destroy(void *self);

static int create(gf_loader *l, void **self)
{
    shard_reader *r = calloc(1, sizeof *r);
    if (r)
        r->l = l;
    if (!r || alloc(r, (unsigned)l->s.prefetch_shards, l->s.remote_buffer_bytes) < 0) {
        if (r)
            destroy(r);
        return gf__fail(l, GF_ENOMEM, "out of memory allocating the shard buffers");
    }
    *self = r;
    return 0;
}

static void destroy(void *self)
{
    shard_reader *r = self;
    gf_loader *l = r->l;
    gf__fetcher_destroy(r->f);
    /* Shards fetched and not yet written: a short run's last ones. */
    for (uint32_t k = 0; r->cache && k < l->ds.n_shards; k++)
        while (r->sh[k].to_cache && r->sh[k].state == SH_READY && !gf__rr_offer(r, k)) {
            gf__shard_cache_flush(r->cache);
            gf__rr_take_back(r);
        }
    gf__shard_cache_close(r->cache); /* first: its writer reads the buffers */
    for (uint32_t k = 0; r->sh && k < l->ds.n_shards; k++) {
        gf__rr_release(&r->sh[k]);
        free(r->sh[k].why);
    }
    free(r->sh);
    free(r->wait_next);
    free(r->live);
    free(r->want);
    gf__buf_free(&r->spare);
    if (r->has_tables)
        gf__shard_epoch_free(&r->scan_tables);
    free(r);
}

/* The pipeline stopped: transfers were dropped, cells no longer wait,
 * nothing is pinned; shards read stay (a seek reuses them). */
static int restart(void *self)
{
    shard_reader *r = self;
    gf_loader *l = r->l;
    if (r->cache) { /* the writes pinned their buffers: done before pins go */
        gf__shard_cache_flush(r->cache);
        gf__rr_take_back(r);
    }
    for (unsigned i = 0; i < r->n_live;) {
        uint32_t k = r->live[i];
        rshard *s = &r->sh[k];
        s->pins = s->need = s->waiting = 0;
        if (s->state == SH_FETCHING) /* its transfer went with the fetcher */
            gf__rr_drop(r, k);
        else
            i++;
    }
    for (uint32_t k = 0; k < l->ds.n_shards; k++) {
        rshard *s = &r->sh[k];
        s->need = s->pins = s->waiting = 0;
        if (s->state == SH_FAILED || s->state == SH_WANTED) {
            free(s->why);
            s->why = NULL;
            s->state = SH_ABSENT;
        }
    }
    r->n_want = 0;
    r->n_waiting = 0;
    r->scanning = false;
    return 0;
}

/* A shard that failed in an earlier epoch is tried again (an outage may
 * have passed): at most a try an epoch. */
static void again_if_older(rshard *s, uint64_t epoch)
{
    if (s->state == SH_FAILED && epoch > s->failed_epoch) {
        free(s->why);
        s->why = NULL;
        s->state = SH_ABSENT;
    }
}

/* The op running hands its outcomes to out[0, max). */
static void sink(shard_reader *r, gf__cell_out *out, int max)
{
    r->out = out;
    r->max_out = max;
    r->n_out = 0;
}

/* Cell c of sl is decoded from its shard's buffer: now, or once the
 * shard has arrived. */
static int take(void *self, gf__slot *sl, int c, uint64_t pos, gf__cell_out *out, int max)
{
    shard_reader *r = self;
    gf_loader *l = r->l;
    sink(r, out, max);
    uint64_t sample = (uint64_t)sl->indices[c];
    uint32_t k = l->ds.shard[sample];
    rshard *s = &r->sh[k];
    /* A position the scan passed was counted in need. */
    bool scanned = r->scanning && (sl->epoch < r->scan_epoch ||
                                   (sl->epoch == r->scan_epoch && pos < r->scan_pos));
    if (scanned && s->need)
        s->need--;
    again_if_older(s, sl->epoch);
    if (s->state == SH_READY || s->state == SH_FAILED) {
        gf__rr_serve(r, sl, c, k);
        return r->n_out;
    }
    uint32_t cell = (uint32_t)(sl - l->slots) * (uint32_t)l->B + (uint32_t)c;
    r->wait_next[cell] = s->waiting;
    s->waiting = cell + 1;
    r->n_waiting++;
    if (s->state == SH_ABSENT && !gf__rr_start(r, k)) {
        s->state = SH_WANTED; /* ahead starts it once a buffer is free */
        r->want[r->n_want++] = k;
    }
    return r->n_out;
}

static int reap(void *self, gf__cell_out *out, int max, uint64_t *bytes)
{
    shard_reader *r = self;
    sink(r, out, max);
    int k;
    while (r->n_out == 0 && (k = gf__fetcher_reap(r->f, r->reaped, GF__REAP_BATCH)) > 0)
        for (int i = 0; i < k; i++) {
            assert(r->reaped[i].user & SHARD_FETCH); /* a cell never has a request */
            *bytes += r->reaped[i].buf->got;
            gf__rr_shard_done(r, &r->reaped[i]);
        }
    return r->n_out;
}

/* A decode from the shard's buffer is done: it no longer reads it. */
static bool decoded(void *self, gf__slot *sl, int c, uint8_t page_cache)
{
    shard_reader *r = self;
    (void)page_cache;
    rshard *s = &r->sh[r->l->ds.shard[sl->indices[c]]];
    if (s->pins)
        s->pins--;
    return false;
}

/* Takes back the buffers the cache's writer is done with, scans the order
 * ahead of the cursor and starts the fetches the buffers have room for (a
 * shard found in the cache is READY at once: its waiting cells served). */
static void read_ahead(shard_reader *r)
{
    gf_loader *l = r->l;
    if (r->cache) {
        gf__rr_take_back(r);
        /* Those the writer's queue had no room for, while they are held. */
        for (unsigned i = 0; i < r->n_live; i++) {
            rshard *s = &r->sh[r->live[i]];
            if (s->to_cache && s->state == SH_READY && !gf__rr_offer(r, r->live[i]))
                break;
        }
    }
    /* Shards cells wait for come first. */
    uint32_t started = 0;
    while (started < r->n_want && gf__rr_start(r, r->want[started]))
        started++;
    if (started) {
        memmove(r->want, r->want + started, (r->n_want - started) * sizeof *r->want);
        r->n_want -= started;
    }
    if (r->n_want)
        return;
    /* The cursor went past the scan (buffers were short): start again
     * from it. */
    if (!r->scanning || r->scan_epoch < l->cur.epoch ||
        (r->scan_epoch == l->cur.epoch && r->scan_pos < l->cur.pos)) {
        gf__cursor_start(&r->scan, l->cur.sampler, l->cur.order,
                         r->has_tables ? &r->scan_tables : NULL, NULL, l->cur.epoch, l->cur.pos);
        r->scan_epoch = r->scan.epoch;
        r->scan_pos = r->scan.pos;
        r->scanning = true;
    }
    for (;;) {
        if (r->scan_pos >= gf__cursor_len(&l->cur, r->scan_epoch)) {
            if (l->cur.order) /* the caller's order is one epoch */
                return;
            r->scan_epoch++;
            r->scan_pos = 0;
        }
        if (r->scan_epoch > l->cur.epoch + 1 ||
            !gf__cursor_epoch_live(&l->cur, r->scan_epoch, l->s.epochs))
            return;
        uint64_t sample = gf__cursor_sample(&r->scan, r->scan_epoch, r->scan_pos, NULL);
        uint32_t k = l->ds.shard[sample];
        rshard *s = &r->sh[k];
        again_if_older(s, r->scan_epoch);
        if (s->state == SH_ABSENT && !gf__rr_start(r, k))
            return;
        s->need++;
        r->scan_pos++;
    }
}

static int ahead(void *self, gf__cell_out *out, int max)
{
    shard_reader *r = self;
    sink(r, out, max);
    read_ahead(r);
    return r->n_out;
}

/* The cache's writer wakes the loop when a pinned buffer is free again. */
static int start_(void *self, const gf__reader_hooks *h)
{
    shard_reader *r = self;
    gf_loader *l = r->l;
    if (r->cache)
        gf__shard_cache_set_notify(r->cache, h->wake, h->ctx);
    char why[192] = "";
    gf__fetch_opts o = gf__remote_fetch_opts(&l->s, &l->ds);
    o.progress = h->ready;
    o.progress_ctx = h->ctx;
    /* Whole shards: max_file_bytes bounds a sample, not a shard (a 1 GiB
     * shard is common); the shard's size, from its sidecar, bounds it, and
     * one of unknown size (a sidecar without shard_bytes) is cut at the
     * larger of the shard buffers' budget and max_file_bytes. */
    o.max_bytes = (size_t)GF__MAX(l->s.remote_buffer_bytes, l->s.max_file_bytes);
    int rc = gf__fetcher_create(&r->f, h->loop, &o, why, sizeof why);
    if (rc == 0)
        return 0;
    if (r->cache)
        gf__shard_cache_set_notify(r->cache, NULL, NULL);
    return gf__fail_locking(l, rc, "remote reads: %s", why);
}

static void close_(void *self)
{
    shard_reader *r = self;
    gf__fetcher_close(r->f);
    if (r->cache)
        gf__shard_cache_set_notify(r->cache, NULL, NULL);
}

static void stop(void *self)
{
    shard_reader *r = self;
    gf__fetcher_destroy(r->f);
    r->f = NULL;
}

static bool has_done(void *self)
{
    return gf__fetcher_has_done(((shard_reader *)self)->f);
}

static bool waiting(void *self)
{
    return ((shard_reader *)self)->n_waiting > 0;
}

/* Queued to the cache's writer, or waiting for room in its queue. A shard
 * dropped from its buffer unwritten (the writer fell behind) is simply
 * not cached, as remote_cache.c says. */
static unsigned unwritten(void *self)
{
    shard_reader *r = self;
    if (!r->cache)
        return 0;
    unsigned n = gf__shard_cache_unwritten(r->cache);
    for (unsigned i = 0; i < r->n_live; i++)
        n += r->sh[r->live[i]].to_cache && r->sh[r->live[i]].state == SH_READY;
    return n;
}

static void counts(void *self, gf__fetch_counts *c)
{
    shard_reader *r = self;
    if (r->f)
        gf__fetcher_counts(r->f, c);
    else
        *c = (gf__fetch_counts){0};
}

static bool uses_buffers(void *self)
{
    (void)self;
    return true;
}

static void cache_stats(void *self, uint64_t *hits, uint64_t *misses, char *warning,
                        size_t warning_len)
{
    shard_reader *r = self;
    gf__cache_counts c = {0};
    if (warning_len)
        warning[0] = '\0';
    if (r->cache) {
        gf__shard_cache_counts(r->cache, &c);
        gf__shard_cache_warning(r->cache, warning, warning_len);
    }
    *hits = c.hits;
    *misses = c.misses;
}

static const gf__cell_reader_ops ops = {
    .create = create,
    .destroy = destroy,
    .restart = restart,
    .start = start_,
    .close = close_,
    .stop = stop,
    .take = take,
    .decoded = decoded,
    .reap = reap,
    .ahead = ahead,
    .has_done = has_done,
    .waiting = waiting,
    .unwritten = unwritten,
    .counts = counts,
    .uses_buffers = uses_buffers,
    .cache_stats = cache_stats,
};

const gf__cell_reader_ops *const gf__shard_reader = &ops;
