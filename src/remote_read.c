/* The cell reader of whole remote shards (cell_reader.h), the shard
 * order's, on gf-control; built with `remote` only. A scan runs ahead of the
 * cursor through the epoch's order (its own copy of the cursor, so the
 * cursor's permutation is not disturbed) and counts, for each shard, the
 * positions scanned and not yet taken (`need`); a shard the scan meets is
 * fetched when a buffer is free, or when one can be freed: a shard no
 * cell reads (`pins`), no scanned position needs and no cell waits for,
 * the least recently used first. So with the shard order, whose window
 * of W shards is read together, the default 2W buffers (prefetch_shards)
 * hold the window being read and fetch the next window meanwhile: a
 * window's shards are all needed until its end, so W + 2 left the next
 * window half fetched when it began. A buffer freed is a shard not needed
 * again until the scan meets it (a later epoch). The scan goes on into the
 * next epoch (its own tables of the shard order), so an epoch's first
 * shards arrive while the last one is read; never further. A cell whose
 * shard has not arrived waits on the shard's list; the shard's arrival
 * makes jobs of them, or, if it failed, errors naming the URL (and a
 * later epoch tries it again). A shard is checked whole on arrival
 * against its sidecar's size and shard_crc32c= (a sidecar swapped with
 * another shard's of the same layout passes every member check): a
 * mismatch is its failure, before any of it is decoded.
 *
 * With a cache (settings.cache_dir, remote_cache.h) a shard is first
 * looked for there under its URL and ETag: a hit maps the file and the
 * shard is READY at once. The ETag is the fetcher's, learned this run by
 * a whole fetch or, for a shard the cache may hold, by a one-byte ranged
 * GET first (so a changed object is never served from an old copy). A
 * shard fetched whole is handed to the cache's writer, its buffer pinned
 * until written. */
#include "cell_reader.h"

#include "crc32c.h"
#include "dataset_indexers.h"
#include "remote_cache.h"

#include <stdlib.h>
#include <string.h>

/* WANTED: absent, cells wait for it, no buffer was free (in `want`). */
enum { SH_ABSENT, SH_WANTED, SH_FETCHING, SH_READY, SH_FAILED };

typedef struct rshard {
    uint8_t state;
    uint32_t pins;       /* decode jobs reading its buffer */
    uint32_t need;       /* positions scanned, not yet taken */
    uint32_t waiting;    /* first waiting cell + 1, 0: none */
    uint64_t used;       /* LRU tick */
    bool cached_copy;    /* buf maps the cache's file (cap 0) */
    bool validating;     /* FETCHING one byte, to learn the ETag */
    bool to_cache;       /* READY, fetched, not yet taken by the cache */
    uint64_t failed_epoch; /* FAILED: the cursor's epoch then */
    gf__buf buf;
    int err;
    char *why;
} rshard;

typedef struct shard_reader {
    gf_loader *l;
    gf__fetcher *f;      /* this run's, from start to stop */
    gf__reader_hooks hooks;
    gf__read_done reaped[GF__REAP_BATCH];
    gf__cell_out *out;   /* the outcomes of the op running */
    int n_out, max_out;
    rshard *sh;
    uint32_t *wait_next; /* per cell (slot * B + c): the next waiting + 1 */
    uint32_t *live;      /* shards FETCHING or READY, at most `buffers` */
    unsigned n_live, buffers;
    uint32_t *want;      /* WANTED shards, oldest first (n_shards room) */
    uint32_t n_want;
    uint32_t n_waiting;  /* cells on the shards' waiting lists */
    uint64_t budget, bytes, tick;
    gf__buf spare;       /* the buffer of the shard room_for_one dropped */
    gf__cursor scan;     /* the scan's own cursor */
    gf__shard_epoch scan_tables; /* its shard order tables (the cursor's
                            are for the cursor's epoch) */
    bool has_tables, scanning;
    uint64_t scan_epoch, scan_pos;
    gf__shard_cache *cache; /* NULL: none */
} shard_reader;

/* Shard k's fetch: the fetcher's `user` (a cell's is below this bit). */
#define SHARD_FETCH (1ull << 63)

static void release(rshard *s)
{
    if (s->cached_copy)
        gf__shard_cache_unmap(s->buf.data, s->buf.len);
    else
        gf__buf_free(&s->buf);
    s->buf = (gf__buf){0};
    s->cached_copy = s->validating = s->to_cache = false;
}

static bool offer(shard_reader *r, uint32_t k);

/* The buffers the cache's writer is done with: unpinned. */
static void take_back(shard_reader *r)
{
    uint32_t ks[8];
    unsigned n;
    while ((n = gf__shard_cache_done(r->cache, ks, 8)) > 0)
        for (unsigned i = 0; i < n; i++)
            if (r->sh[ks[i]].pins)
                r->sh[ks[i]].pins--;
}

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

/* Frees k's buffer and takes it off the live list (state is the caller's).
 * `bytes` counts a buffer from its shard's arrival: a FETCHING one (a
 * restart drops it) was never added. */
static void unlive(shard_reader *r, uint32_t k)
{
    rshard *s = &r->sh[k];
    if (s->state != SH_FETCHING)
        r->bytes -= s->buf.cap;
    release(s);
    for (unsigned i = 0; i < r->n_live; i++)
        if (r->live[i] == k) {
            r->live[i] = r->live[--r->n_live];
            break;
        }
}

static void drop(shard_reader *r, uint32_t k)
{
    unlive(r, k);
    r->sh[k].state = SH_ABSENT;
}

static void destroy(void *self)
{
    shard_reader *r = self;
    gf_loader *l = r->l;
    gf__fetcher_destroy(r->f);
    /* Shards fetched and not yet written: a short run's last ones. */
    for (uint32_t k = 0; r->cache && k < l->ds.n_shards; k++)
        while (r->sh[k].to_cache && r->sh[k].state == SH_READY && !offer(r, k)) {
            gf__shard_cache_flush(r->cache);
            take_back(r);
        }
    gf__shard_cache_close(r->cache); /* first: its writer reads the buffers */
    for (uint32_t k = 0; r->sh && k < l->ds.n_shards; k++) {
        release(&r->sh[k]);
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
        take_back(r);
    }
    for (unsigned i = 0; i < r->n_live;) {
        uint32_t k = r->live[i];
        rshard *s = &r->sh[k];
        s->pins = s->need = s->waiting = 0;
        if (s->state == SH_FETCHING) /* its transfer went with the fetcher */
            drop(r, k);
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

/* A buffer for one more shard: free, or made free by dropping the least
 * recently used shard nobody needs. */
static bool room_for_one(shard_reader *r)
{
    if (r->n_live < r->buffers && (r->bytes < r->budget || r->n_live == 0))
        return true;
    int best = -1;
    for (unsigned i = 0; i < r->n_live; i++) {
        rshard *s = &r->sh[r->live[i]];
        if (s->state == SH_READY && !s->pins && !s->need && !s->waiting &&
            (best < 0 || s->used < r->sh[r->live[best]].used))
            best = (int)i;
    }
    if (best < 0)
        return false;
    /* Its buffer goes to the shard that takes its place: pages already
     * mapped, where a fresh one faults each page in as the body arrives. */
    rshard *old = &r->sh[r->live[best]];
    if (!old->cached_copy) { /* a cache file's mapping stays the cache's */
        r->spare = old->buf;
        old->buf.data = NULL; /* drop takes its cap off `bytes`, frees nothing */
    }
    drop(r, r->live[best]);
    if (r->n_live < r->buffers && (r->bytes < r->budget || r->n_live == 0))
        return true;
    gf__buf_free(&r->spare);
    return false;
}

/* Hands the op running cell c of sl's outcome. */
static void emit(shard_reader *r, gf__slot *sl, int c, int err, char *why)
{
    assert(r->n_out < r->max_out);
    gf__cell_out *o = &r->out[r->n_out++];
    *o = gf__cell_out_of(r->l, sl, c);
    o->err = err;
    o->why = why;
}

/* Cell c of sl reads shard s: its bytes, or an error if the shard failed
 * or does not hold the member. */
static void serve(shard_reader *r, gf__slot *sl, int c, uint32_t k)
{
    gf_loader *l = r->l;
    rshard *s = &r->sh[k];
    uint64_t sample = (uint64_t)sl->indices[c];
    if (s->state == SH_FAILED) {
        const char *url = l->ds.shard_paths[k], *reason = s->why ? s->why : "out of memory";
        size_t n = strlen(url) + strlen(reason) + 3;
        char *why = malloc(n);
        if (why)
            snprintf(why, n, "%s: %s", url, reason);
        emit(r, sl, c, s->err, why);
        return;
    }
    if (l->ds.data_off[sample] + l->ds.data_len[sample] > s->buf.len) {
        emit(r, sl, c, GF_ETRUNC, strdup("shard ended inside member"));
        return;
    }
    if (l->ds.data_len[sample] > l->s.max_file_bytes) { /* as a local member's read refuses it */
        char why[96];
        snprintf(why, sizeof why, "%u bytes, over max_file_bytes (%llu)", l->ds.data_len[sample],
                 (unsigned long long)l->s.max_file_bytes);
        emit(r, sl, c, GF_ETOOBIG, strdup(why));
        return;
    }
    s->pins++;
    s->used = ++r->tick;
    emit(r, sl, c, 0, NULL);
    /* With its header block, as every member read: run_decode checks it. */
    r->out[r->n_out - 1].bytes = s->buf.data + l->ds.data_off[sample] - GF__TAR_BLOCK;
    r->out[r->n_out - 1].n_bytes = l->ds.data_len[sample] + GF__TAR_BLOCK;
}

/* Shard k has arrived (or failed): its waiting cells become jobs or errors. */
static void arrived(shard_reader *r, uint32_t k)
{
    gf_loader *l = r->l;
    rshard *s = &r->sh[k];
    for (uint32_t w = s->waiting; w;) {
        uint32_t cell = w - 1;
        w = r->wait_next[cell];
        r->n_waiting--;
        serve(r, &l->slots[cell / (uint32_t)l->B], (int)(cell % (uint32_t)l->B), k);
    }
    s->waiting = 0;
}

/* Whether shard k's bytes (len of them, crc their CRC32C) are the ones
 * its sidecar was written for: its index says where each sample is, so a
 * sidecar beside another shard of the same size would serve that shard's
 * bytes under this one's labels. 0, or GF_ECORRUPT with why. */
static int tied(const gf_loader *l, uint32_t k, size_t len, uint32_t crc, char *why,
                size_t why_len)
{
    int64_t want_crc = l->ds.shard_crc32c ? l->ds.shard_crc32c[k] : -1;
    uint64_t want_len = l->ds.remote[k].size;
    const char *url = l->ds.shard_paths[k];
    size_t n = strlen(url);
    int tar = n >= 4 && strcmp(url + n - 4, ".tar") == 0;
    if (want_len && len != want_len)
        snprintf(why, why_len, "%llu bytes, but its index sidecar %.*s%s records %llu: "
                 "written for another shard, not used",
                 (unsigned long long)len, (int)(tar ? n - 4 : n), url, tar ? ".idx" : "'s .idx",
                 (unsigned long long)want_len);
    else if (want_crc >= 0 && crc != (uint32_t)want_crc)
        snprintf(why, why_len, "CRC32C %08x, but its index sidecar %.*s%s records "
                 "shard_crc32c=%08x: written for another shard, not used",
                 (unsigned)crc, (int)(tar ? n - 4 : n), url, tar ? ".idx" : "'s .idx",
                 (unsigned)want_crc);
    else
        return 0;
    return GF_ECORRUPT;
}

/* Shard k's copy in the cache, under the ETag this run learned: READY. */
static bool from_cache(shard_reader *r, uint32_t k)
{
    gf_loader *l = r->l;
    rshard *s = &r->sh[k];
    const gf__fetch_target *t = &l->ds.remote[k];
    uint8_t *data;
    size_t len;
    uint32_t crc;
    char why[8];
    if (!r->cache || !gf__shard_cache_map(r->cache, k, t->etag, t->size, &data, &len, &crc))
        return false;
    if (tied(l, k, len, crc, why, sizeof why) < 0) { /* the fetch says why */
        gf__shard_cache_unmap(data, len);
        return false;
    }
    s->buf = (gf__buf){.data = data, .len = len};
    s->cached_copy = true;
    s->state = SH_READY;
    return true;
}

static void fetch_whole(shard_reader *r, uint32_t k)
{
    gf_loader *l = r->l;
    rshard *s = &r->sh[k];
    gf__fetch_target *t = &l->ds.remote[k];
    /* A shard of known size: the buffer room_for_one freed if it fits,
     * else a mapping an eighth larger (the next shard likely fits too);
     * without one (ENOMEM, size unknown) the fetcher mallocs. */
    gf__buf_free(&s->buf);
    if (t->size && r->spare.cap >= t->size) {
        s->buf = r->spare;
        r->spare = (gf__buf){0};
    }
    gf__buf_free(&r->spare);
    if (t->size && !s->buf.data)
        (void)gf__buf_map(&s->buf, t->size + t->size / 8);
    /* The shard's size, as the index recorded it; else learned from the
     * first response (an index without shard_bytes). */
    uint64_t len = t->size ? t->size : GF__WHOLE_FILE;
    gf__fetcher_submit(r->f, t, 0, len, &s->buf, NULL, SHARD_FETCH | k);
}

/* Hands fetched shard k to the cache's writer. False when its queue is
 * full: offer it again later. */
static bool offer(shard_reader *r, uint32_t k)
{
    gf_loader *l = r->l;
    rshard *s = &r->sh[k];
    int rc = gf__shard_cache_put(r->cache, k, l->ds.remote[k].etag, s->buf.data, s->buf.len);
    if (rc > 0)
        return false;
    s->to_cache = false;
    if (rc == 0)
        s->pins++; /* until the writer is done with it */
    return true;
}

/* Starts shard k into a buffer: from the cache (READY now, its waiting
 * cells served), or a fetch. False when no buffer or request is free. */
static bool start(shard_reader *r, uint32_t k)
{
    gf_loader *l = r->l;
    const gf__fetch_target *t = &l->ds.remote[k];
    bool known = r->cache && t->etag[0];
    if (!known && (!r->f || !gf__fetcher_room(r->f)))
        return false;
    if (!room_for_one(r))
        return false;
    rshard *s = &r->sh[k];
    if (known && from_cache(r, k)) {
        gf__buf_free(&r->spare);
        s->used = ++r->tick;
        r->live[r->n_live++] = k;
        arrived(r, k);
        return true;
    }
    if (!r->f || !gf__fetcher_room(r->f)) {
        gf__buf_free(&r->spare);
        return false;
    }
    s->state = SH_FETCHING;
    s->used = ++r->tick;
    r->live[r->n_live++] = k;
    if (!known && r->cache && gf__shard_cache_may_hold(r->cache, k)) {
        s->validating = true;
        gf__fetcher_submit(r->f, &l->ds.remote[k], 0, 1, &s->buf, NULL, SHARD_FETCH | k);
    } else {
        fetch_whole(r, k);
    }
    gf__buf_free(&r->spare); /* a validation's fetch_whole maps anew */
    return true;
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
        serve(r, sl, c, k);
        return r->n_out;
    }
    uint32_t cell = (uint32_t)(sl - l->slots) * (uint32_t)l->B + (uint32_t)c;
    r->wait_next[cell] = s->waiting;
    s->waiting = cell + 1;
    r->n_waiting++;
    if (s->state == SH_ABSENT && !start(r, k)) {
        s->state = SH_WANTED; /* ahead starts it once a buffer is free */
        r->want[r->n_want++] = k;
    }
    return r->n_out;
}

/* A shard's fetch finished: its waiting cells' outcomes. */
static void shard_done(shard_reader *r, const gf__read_done *d)
{
    gf_loader *l = r->l;
    uint32_t k = (uint32_t)(d->user & ~SHARD_FETCH);
    rshard *s = &r->sh[k];
    if (s->validating) { /* the ETag is known now: the cache's copy, or the shard */
        gf__buf_free(&s->buf);
        s->validating = false;
        if (!d->err) {
            if (from_cache(r, k)) {
                arrived(r, k);
                return;
            }
            fetch_whole(r, k); /* this request's place is free */
            return;
        }
    }
    r->bytes += s->buf.cap;
    s->state = SH_READY;
    /* Checked whole before any of it is decoded: its cells wait until now. */
    char untied[512] = "";
    int err = d->err;
    if (!err) {
        bool has_crc = l->ds.shard_crc32c && l->ds.shard_crc32c[k] >= 0;
        err = tied(l, k, s->buf.len, has_crc ? gf__crc32c(s->buf.data, s->buf.len) : 0, untied,
                   sizeof untied);
    }
    if (err) {
        const char *why = untied[0] ? untied : d->why;
        unlive(r, k);
        s->state = SH_FAILED;
        s->failed_epoch = l->cur.epoch;
        s->err = err;
        s->why = strdup(why[0] ? why : gf_strerror(err));
        if (!s->why)
            s->err = GF_ENOMEM;
        if (l->s.on_shard_error == GF_SHARD_FAIL) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s: %s", l->ds.shard_paths[k], s->why ? s->why : "");
            gf__halt(l, s->err, msg);
        }
    } else if (r->cache) {
        gf__shard_cache_count_miss(r->cache);
        s->to_cache = true;
        offer(r, k);
    }
    arrived(r, k);
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
            shard_done(r, &r->reaped[i]);
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
        take_back(r);
        /* Those the writer's queue had no room for, while they are held. */
        for (unsigned i = 0; i < r->n_live; i++) {
            rshard *s = &r->sh[r->live[i]];
            if (s->to_cache && s->state == SH_READY && !offer(r, r->live[i]))
                break;
        }
    }
    /* Shards cells wait for come first. */
    uint32_t started = 0;
    while (started < r->n_want && start(r, r->want[started]))
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
                         r->has_tables ? &r->scan_tables : NULL, l->cur.epoch, l->cur.pos);
        r->scan_epoch = r->scan.epoch;
        r->scan_pos = r->scan.pos;
        r->scanning = true;
    }
    for (;;) {
        if (r->scan_pos >= l->cur.len) {
            if (l->cur.order) /* the caller's order is one epoch */
                return;
            r->scan_epoch++;
            r->scan_pos = 0;
        }
        if (r->scan_epoch > l->cur.epoch + 1 ||
            !gf__cursor_epoch_live(&l->cur, r->scan_epoch, l->s.epochs))
            return;
        uint64_t sample = gf__cursor_sample(&r->scan, r->scan_epoch, r->scan_pos);
        uint32_t k = l->ds.shard[sample];
        rshard *s = &r->sh[k];
        again_if_older(s, r->scan_epoch);
        if (s->state == SH_ABSENT && !start(r, k))
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
    .counts = counts,
    .uses_buffers = uses_buffers,
    .cache_stats = cache_stats,
};

const gf__cell_reader_ops *const gf__shard_reader = &ops;
