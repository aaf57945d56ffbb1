/*
 * prepare's writer (prepare.h): workers decode and encode samples in
 * parallel; the command's thread writes them, in source index order, into
 * OUT/<name>-NNNNNN.tar with an index sidecar beside each, so the output
 * is the same bytes whatever the thread count.
 *
 * Reorder window: a worker takes index i only while i < base + window
 * (base: the next index the writer needs), into slot i % window, so at
 * most `window` encoded samples wait in memory and the lowest index is
 * never kept waiting. The writer owns slot base once it is DONE.
 *
 * A sample is three members: KEY.<jpg|ppm|pgm> (the image), KEY.cls (its
 * label, decimal) and KEY.key (the source's path for it, as gf_index_path
 * names it); with --fields, then each field's KEY.<ext> as the source
 * spells it (prepare_fields.c), in the fields' order. A shard is cut before a sample that would take its tar past
 * --shard-bytes (a larger sample gets a shard alone), or after
 * --shard-samples samples.
 *
 * The sidecar's text is the library's sidecar_text.c's, which `gpufeed
 * index` writes with too, so indexing a prepared shard gives its bytes.
 *
 * Kills and resumes: a shard is written as NAME.tar.partial, its sidecar
 * as NAME.idx.partial (each made afresh: prep_create); both are synced and renamed into place (sidecar
 * first, so it is never older than its shard), and only then is the shard
 * recorded in OUT/.prepare-journal (appended and synced): its source range,
 * counts, size and SHA-256, after the bad samples of that range. A rerun
 * with the same fingerprint keeps the shards the journal records (their
 * sizes checked, the records against the source: a damaged journal is
 * refused), regenerates the keys before them, and goes on from the
 * last one's range: a killed run and an unkilled one write the same bytes,
 * and no partial shard ever has a final name. The journal's format and
 * checks are prepare_journal.c's.
 *
 * The index is read through gf_index_read, which takes one caller at a
 * time (it keeps the last failure), so reads go one at a time under
 * read_mu; the decode and encode, most of the work, run in parallel.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../crc32c.h"
#include "../sidecar_text.h"
#include "cli.h"
#include "prepare.h"
#include "sha256.h"
#include "sysinfo.h"
#include "tar_write.h"

/* Member mtime: fixed, so the shards are a function of the settings and
 * the source alone (make-dataset's too). */
#define TAR_MTIME 1700000000ull

enum { SLOT_EMPTY, SLOT_BUSY, SLOT_DONE };

typedef struct slot {
    int state;
    int code;        /* 0, or the sample's error */
    char *why;       /* "path: reason" when code */
    uint8_t *data;
    size_t len, cap;
    const char *ext;
    int kind;
    prep_member fields[PREP_FIELDS_MAX]; /* --fields: the sample's other members */
} slot;

typedef struct run {
    const prep_opts *o;
    gf_index *ix;
    pthread_mutex_t mu;      /* the window: slots' states, next, base, stop */
    pthread_cond_t work;     /* base moved on, or stop */
    pthread_cond_t done;     /* a slot became DONE, or stop */
    pthread_mutex_t read_mu; /* gf_index_read: one caller at a time */
    slot *slots;
    uint64_t window, next, base, end;
    int n_fields;            /* gf_index_fields: 0 without --fields */
    int stop;
    char err[1024];          /* why a worker stopped the run */
} run;

static void run_fail(run *r, const char *msg)
{
    pthread_mutex_lock(&r->mu);
    if (!r->err[0])
        snprintf(r->err, sizeof r->err, "%s", msg);
    r->stop = 1;
    pthread_cond_broadcast(&r->work);
    pthread_cond_broadcast(&r->done);
    pthread_mutex_unlock(&r->mu);
}

static void *worker(void *arg)
{
    run *r = arg;
    char why[512], msg[1024];
    const char *reason = why;
    prep_encoder *e = prep_encoder_new(r->o, why, sizeof why);
    prep_fields *fe = e && r->n_fields ? prep_fields_new(r->ix, why, sizeof why) : NULL;
    if (!e || (r->n_fields && !fe)) {
        run_fail(r, why);
        prep_encoder_free(e);
        return NULL;
    }
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (!r->stop && r->next < r->end && r->next >= r->base + r->window)
            pthread_cond_wait(&r->work, &r->mu);
        if (r->stop || r->next >= r->end)
            break;
        uint64_t i = r->next++;
        slot *s = &r->slots[i % r->window];
        s->state = SLOT_BUSY;
        pthread_mutex_unlock(&r->mu);

        reason = why;
        void *src = NULL;
        size_t src_len = 0;
        const uint8_t *member = NULL;
        /* with fields, the sample's members at at[], the image's at[0] */
        size_t at[1 + PREP_FIELDS_MAX] = {0}, size[1 + PREP_FIELDS_MAX];
        const char *ext[1 + PREP_FIELDS_MAX];
        prep_fit fit;
        pthread_mutex_lock(&r->read_mu);
        int rc = r->n_fields ? gf_index_read_fields(r->ix, i, &src, &src_len, at, size, ext,
                                                    1 + PREP_FIELDS_MAX, why, sizeof why)
                             : gf_index_read(r->ix, i, &src, &src_len, why, sizeof why);
        pthread_mutex_unlock(&r->read_mu);
        if (rc == 0) {
            const uint8_t *img = (const uint8_t *)src + at[0];
            rc = prep_encode(e, img, r->n_fields ? size[0] : src_len, &member, &s->len, &s->ext,
                             &s->kind, &fit, why, sizeof why);
            if (rc == 0 && fe)
                rc = prep_fields_take(fe, src, at, size, ext, &fit, s->fields, why, sizeof why);
            if (rc < 0) { /* the decoder's reason names no file */
                snprintf(msg, sizeof msg, "%s: %s", gf_index_path(r->ix, i), why);
                reason = msg;
            }
        }
        if (rc == 0 && s->len > s->cap) {
            uint8_t *p = realloc(s->data, s->len);
            if (!p)
                rc = GF_ENOMEM, snprintf(why, sizeof why, "out of memory");
            else
                s->data = p, s->cap = s->len;
        }
        if (rc == 0)
            memcpy(s->data, member, s->len);
        gf_free(src);
        free(s->why);
        s->why = NULL;
        s->code = rc;
        if (rc < 0 && gf_sample_error_kind(rc) < 0) { /* not the sample's fault */
            run_fail(r, reason);
            pthread_mutex_lock(&r->mu);
            break;
        }
        if (rc < 0 && !(s->why = strdup(reason))) {
            run_fail(r, "out of memory");
            pthread_mutex_lock(&r->mu);
            break;
        }
        pthread_mutex_lock(&r->mu);
        s->state = SLOT_DONE;
        pthread_cond_broadcast(&r->done);
    }
    pthread_mutex_unlock(&r->mu);
    prep_fields_free(fe);
    prep_encoder_free(e);
    return NULL;
}

/* ---- shards ---- */

typedef struct shard_out {
    FILE *f;
    uint64_t k, off;
    cli_sha256 sha;
    uint32_t crc;            /* the shard's CRC32C so far (its sidecar's shard_crc32c=) */
    gf__sidecar_text idx;    /* its sidecar, a sample a line */
    prep_shard rec;
    int io_errno;
} shard_out;

static void put(shard_out *w, const void *p, size_t n)
{
    if (n && fwrite(p, 1, n, w->f) != n && !w->io_errno)
        w->io_errno = errno ? errno : EIO;
    cli_sha256_update(&w->sha, p, n);
    w->crc = gf__crc32c_extend(w->crc, p, n);
    w->off += n;
}

/* One member: header, data, padding; its data offset for the sidecar. */
static uint64_t put_member(shard_out *w, const char *name, const void *data, size_t len)
{
    static const uint8_t zeros[512];
    uint8_t h[512];
    tar_write_header(h, name, '0', len, TAR_MTIME, NULL);
    put(w, h, 512);
    uint64_t at = w->off;
    put(w, data, len);
    put(w, zeros, (512 - len % 512) % 512);
    return at;
}

static uint64_t member_bytes(size_t len)
{
    return 512 + (len + 511) / 512 * 512;
}

/* Writes the shard's end, syncs, writes its sidecar, renames both into
 * place. Returns 0 or -1 with the message printed. */
static int shard_finish(const prep_opts *o, shard_out *w)
{
    static const uint8_t end[1024];
    char tar[4096], tmp[4200], idx[4096], itmp[4200];
    prep_shard_path(o, w->k, "tar", tar, sizeof tar);
    prep_shard_path(o, w->k, "idx", idx, sizeof idx);
    snprintf(tmp, sizeof tmp, "%s.partial", tar);
    snprintf(itmp, sizeof itmp, "%s.partial", idx);
    put(w, end, sizeof end);
    int e = w->io_errno;
    if (!e && prep_sync(w->f) != 0)
        e = errno;
    if (fclose(w->f) != 0 && !e)
        e = errno;
    w->f = NULL;
    if (e) {
        cli_error("prepare", "%s: %s", tmp, strerror(e));
        return -1;
    }
    /* labels= and the CRCs let a remote open index the shard from this
     * file alone, so a prepared set uploaded to an object store opens as is */
    char *text = NULL;
    size_t text_len = 0;
    if (gf__sidecar_text_finish(&w->idx, w->off, w->crc, &text, &text_len) < 0) {
        cli_error("prepare", "%s: out of memory", itmp);
        return -1;
    }
    FILE *f = prep_create(itmp);
    e = f && fwrite(text, 1, text_len, f) == text_len && prep_sync(f) == 0 ? 0
        : errno ? errno : EIO;
    free(text);
    if (e) {
        cli_error("prepare", "%s: %s", itmp, strerror(e));
        if (f)
            fclose(f);
        return -1;
    }
    if (fclose(f) != 0 || rename(itmp, idx) != 0 || rename(tmp, tar) != 0) {
        cli_error("prepare", "%s: %s", tar, strerror(errno));
        return -1;
    }
    w->rec.bytes = w->off;
    cli_sha256_hex(&w->sha, w->rec.sha256);
    return 0;
}

static int shard_open(const prep_opts *o, shard_out *w, uint64_t k, uint64_t first)
{
    char tar[4096], tmp[4200];
    prep_shard_path(o, k, "tar", tar, sizeof tar);
    snprintf(tmp, sizeof tmp, "%s.partial", tar);
    if (!(w->f = prep_create(tmp))) {
        cli_error("prepare", "%s: %s", tmp, strerror(errno));
        return -1;
    }
    setvbuf(w->f, NULL, _IOFBF, 1 << 20);
    w->k = k;
    w->off = 0;
    gf__sidecar_text_clear(&w->idx);
    w->io_errno = 0;
    cli_sha256_init(&w->sha);
    w->crc = 0;
    memset(&w->rec, 0, sizeof w->rec);
    w->rec.first = first;
    return 0;
}

/* ---- progress ---- */

static void progress(uint64_t done, uint64_t total, double secs, int last)
{
    double rate = secs > 0 ? (double)done / secs : 0;
    double eta = rate > 0 ? (double)(total - done) / rate : 0;
    int width = 30, fill = total ? (int)((double)done * width / (double)total) : width;
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[width] = '\0';
    fprintf(stderr, "\rprepare [%s] %llu/%llu %.0f samples/s ETA %d:%02d:%02d ", bar,
            (unsigned long long)done, (unsigned long long)total, rate, (int)(eta / 3600),
            (int)eta / 60 % 60, (int)eta % 60);
    if (last)
        fputc('\n', stderr);
    fflush(stderr);
}

/* ---- the run ---- */

/* The run's locks, and its workers on [rr->next, rr->end), nt at most.
 * Returns how many started; none for a run with nothing left, and a run
 * with samples left but no thread started is stopped with its reason. */
static int run_start(run *rr, pthread_t *tids, int nt)
{
    pthread_mutex_init(&rr->mu, NULL);
    pthread_mutex_init(&rr->read_mu, NULL);
    pthread_cond_init(&rr->work, NULL);
    pthread_cond_init(&rr->done, NULL);
    int started = 0;
    if (rr->next < rr->end)
        for (; started < nt; started++)
            if (pthread_create(&tids[started], NULL, worker, rr) != 0)
                break;
    if (rr->next < rr->end && started == 0)
        snprintf(rr->err, sizeof rr->err, "could not start a thread"), rr->stop = 1;
    return started;
}

/* What run_start and prep_write made, after the workers are joined. */
static void run_free(run *rr, pthread_t *tids, shard_out *w, prep_keys *keys)
{
    for (uint64_t k = 0; k < rr->window; k++) {
        free(rr->slots[k].data);
        free(rr->slots[k].why);
        for (int f = 0; f < PREP_FIELDS_MAX; f++)
            free(rr->slots[k].fields[f].data);
    }
    free(rr->slots);
    free(tids);
    gf__sidecar_text_free(&w->idx);
    prep_keys_free(keys);
    pthread_cond_destroy(&rr->work);
    pthread_cond_destroy(&rr->done);
    pthread_mutex_destroy(&rr->mu);
    pthread_mutex_destroy(&rr->read_mu);
}

/* Finishes w before source index i (it would pass --shard-bytes or
 * --shard-samples) and records it: the bad samples of its range, from
 * *bad_from on, then its line. Returns 0, or -2 with the message printed. */
static int cut_shard(const prep_opts *o, shard_out *w, prep_result *r, FILE *j,
                     const char *jpath, uint64_t i, size_t *bad_from)
{
    char line[256];
    int failed = 0;
    w->rec.next = i;
    if (shard_finish(o, w) < 0)
        failed = -2;
    else {
        prep_shard_line(line, sizeof line, &w->rec);
        /* the bad samples of its range, then it */
        size_t upto = r->n_bad;
        while (upto > *bad_from && r->bad[upto - 1].index >= i)
            upto--;
        prep_result part = *r;
        part.n_bad = upto;
        if (prep_journal_record(j, &part, *bad_from, line) != 0 ||
            prep_add_shard(r, &w->rec) < 0) {
            cli_error("prepare", "%s: %s", jpath, strerror(errno ? errno : ENOMEM));
            failed = -2;
        }
        *bad_from = upto;
    }
    return failed;
}

/* After the last sample: the open shard finished and recorded, then the
 * journal's "done". Returns 0, -1 out of memory, or -2 with the message
 * printed. */
static int finish_last(const prep_opts *o, shard_out *w, prep_result *r, FILE *j,
                       uint64_t total, size_t bad_from)
{
    char line[256];
    int failed = 0;
    if (w->f) {
        w->rec.next = total;
        if (shard_finish(o, w) < 0)
            failed = -2;
        else if (prep_add_shard(r, &w->rec) < 0)
            failed = -1;
        else {
            prep_shard_line(line, sizeof line, &w->rec);
            if (prep_journal_record(j, r, bad_from, line) != 0)
                failed = -2;
            bad_from = r->n_bad;
        }
    }
    if (!failed) {
        snprintf(line, sizeof line, "done %llu\n", (unsigned long long)total);
        if (prep_journal_record(j, r, bad_from, line) != 0)
            failed = -2;
    }
    return failed;
}

/* One member into w and into its sidecar line. */
static int put_listed(shard_out *w, const char *key, const char *ext, const void *data,
                      size_t len)
{
    char name[160];
    snprintf(name, sizeof name, "%s.%s", key, ext);
    uint64_t at = put_member(w, name, data, len);
    return gf__sidecar_text_member(&w->idx, ext, strlen(ext), at, len, name, strlen(name));
}

/* A good sample's three members, and its n_fields fields', into the open
 * shard w, with its sidecar line, label and CRC; counted in w. Returns 0,
 * or -1 out of memory for the sidecar's text (the members are written). */
static int put_sample(shard_out *w, const slot *s, int n_fields, const char *key, int32_t label,
                      const char *cls, int cn, const char *path, size_t pn)
{
    int bad_idx = put_listed(w, key, s->ext, s->data, s->len);
    bad_idx |= put_listed(w, key, "cls", cls, (size_t)cn);
    bad_idx |= put_listed(w, key, "key", path, pn);
    for (int k = 0; k < n_fields; k++)
        bad_idx |= put_listed(w, key, s->fields[k].ext, s->fields[k].data, s->fields[k].len);
    if (!bad_idx)
        bad_idx = gf__sidecar_text_sample(&w->idx, label, gf__crc32c(s->data, s->len));
    w->rec.samples++;
    w->rec.kinds[s->kind]++;
    return bad_idx ? -1 : 0;
}

static uint64_t stop_after(void)
{
    const char *s = getenv("GF_PREPARE_STOP_AFTER"); /* tests: a kill -9 after K samples */
    return s && *s ? strtoull(s, NULL, 10) : 0;
}

/* The tests' kill (GF_PREPARE_STOP_AFTER=K, stop_after): SIGKILL once
 * this run has written its Kth sample, the open shard flushed but left
 * .partial and unrecorded, as a real kill leaves it. */
static void kill_hook(shard_out *w, uint64_t this_run, uint64_t kill_at)
{
    if (kill_at && this_run == kill_at) {
        fflush(w->f);
        raise(SIGKILL);
    }
}

int prep_write(const prep_opts *o, gf_index *ix, const char *fingerprint, prep_result *r)
{
    memset(r, 0, sizeof *r);
    char jpath[4096];
    snprintf(jpath, sizeof jpath, "%s/%s", o->out, PREP_JOURNAL);
    uint64_t start, total = gf_index_count(ix);
    int done = prep_journal_load(o, jpath, fingerprint, total, r, &start);
    if (done < 0)
        return -1;
    r->resumed_shards = r->n_shards;
    r->resumed_at = start;
    for (size_t k = 0; k < r->n_shards; k++)
        r->samples += r->shards[k].samples;
    if (done)
        return 0;

    FILE *j = prep_journal_open(jpath, fingerprint);
    if (!j)
        return -1;

    /* the keys before the start, as the first run made them */
    prep_keys *keys = prep_keys_new();
    int shards_src = gf_index_shards(ix) > 0;
    char key[128];
    for (uint64_t i = 0; keys && i < start; i++)
        if (prep_key_next(keys, gf_index_path(ix, i), shards_src, i, key, sizeof key) < 0)
            prep_keys_free(keys), keys = NULL;

    run rr = {.o = o, .ix = ix, .next = start, .base = start, .end = total,
              .n_fields = gf_index_fields(ix)};
    int nt = o->threads ? o->threads : cli_cores();
    if ((uint64_t)nt > total - start)
        nt = (int)(total - start > 0 ? total - start : 1);
    rr.window = 4 * (uint64_t)nt + 4;
    rr.slots = calloc(rr.window, sizeof *rr.slots);
    pthread_t *tids = calloc((size_t)nt, sizeof *tids);
    if (!keys || !rr.slots || !tids) {
        cli_error("prepare", "out of memory");
        prep_keys_free(keys);
        free(rr.slots);
        free(tids);
        fclose(j);
        return -1;
    }
    int started = run_start(&rr, tids, nt);
    r->threads = started;

    shard_out w = {0};
    int failed = 0, tty = isatty(2) && !getenv("GF_NO_PROGRESS");
    uint64_t kill_at = stop_after(), this_run = 0;
    size_t bad_from = r->n_bad; /* bad samples not yet in the journal */
    double t0 = cli_now(), shown = 0;
    for (uint64_t i = start; i < total && !failed; i++) {
        slot *s = &rr.slots[i % rr.window];
        pthread_mutex_lock(&rr.mu);
        while (!rr.stop && s->state != SLOT_DONE)
            pthread_cond_wait(&rr.done, &rr.mu);
        int stopped = rr.stop && s->state != SLOT_DONE;
        pthread_mutex_unlock(&rr.mu);
        if (stopped) {
            failed = -1;
            break;
        }
        const char *path = gf_index_path(ix, i);
        if (prep_key_next(keys, path, shards_src, i, key, sizeof key) < 0) {
            snprintf(rr.err, sizeof rr.err, "out of memory");
            failed = -1;
        } else if (s->code < 0) {
            if (prep_add_bad(r, i, s->code, s->why) < 0) {
                snprintf(rr.err, sizeof rr.err, "out of memory");
                failed = -1;
            } else if (o->s.on_error == GF_ON_ERROR_FAIL) {
                r->failed = 1;
                failed = 1;
            }
        } else {
            char cls[16];
            int32_t label = gf_index_label(ix, i);
            int cn = snprintf(cls, sizeof cls, "%d", label);
            size_t pn = strlen(path);
            uint64_t need = member_bytes(s->len) + member_bytes((size_t)cn) + member_bytes(pn);
            for (int k = 0; k < rr.n_fields; k++)
                need += member_bytes(s->fields[k].len);
            int cut = w.f && ((o->shard_samples && w.rec.samples >= o->shard_samples) ||
                              (o->shard_bytes && w.off + need + 1024 > o->shard_bytes));
            if (cut)
                failed = cut_shard(o, &w, r, j, jpath, i, &bad_from);
            if (!failed && !w.f &&
                shard_open(o, &w, r->n_shards, r->n_shards ? r->shards[r->n_shards - 1].next
                                                           : 0) < 0)
                failed = -2;
            if (!failed) {
                if (put_sample(&w, s, rr.n_fields, key, label, cls, cn, path, pn) < 0) {
                    snprintf(rr.err, sizeof rr.err, "out of memory");
                    failed = -1;
                }
                r->samples++;
                this_run++;
                kill_hook(&w, this_run, kill_at);
            }
        }
        pthread_mutex_lock(&rr.mu);
        s->state = SLOT_EMPTY;
        rr.base = i + 1;
        pthread_cond_broadcast(&rr.work);
        pthread_mutex_unlock(&rr.mu);
        double now = cli_now() - t0;
        if (tty && now - shown > 0.25) {
            progress(i + 1 - start, total - start, now, 0);
            shown = now;
        }
    }
    if (!failed)
        failed = finish_last(o, &w, r, j, total, bad_from);
    pthread_mutex_lock(&rr.mu);
    rr.stop = 1;
    pthread_cond_broadcast(&rr.work);
    pthread_mutex_unlock(&rr.mu);
    for (int t = 0; t < started; t++)
        pthread_join(tids[t], NULL);
    if (w.f)
        fclose(w.f); /* a stopped run's partial shard stays .partial */
    if (tty && this_run)
        progress(total - start, total - start, cli_now() - t0, 1);
    r->samples_this_run = this_run;
    r->seconds = cli_now() - t0;
    run_free(&rr, tids, &w, keys);
    if (fclose(j) != 0 && !failed) {
        cli_error("prepare", "%s: %s", jpath, strerror(errno));
        return -1;
    }
    if (failed == -1)
        cli_error("prepare", "%s", rr.err[0] ? rr.err : "stopped");
    return failed < 0 ? -1 : 0;
}
