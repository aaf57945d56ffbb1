/* One remote shard's buffer (the shard reader's, remote_read_impl.h), on
 * gf-control: a buffer for it, freed from the least recently used shard
 * nobody needs; its bytes from the cache or a fetch; its check on
 * arrival; its waiting cells served. A shard is checked whole on arrival
 * against its sidecar's size and shard_crc32c= (a sidecar swapped with
 * another shard's of the same layout passes every member check): a
 * mismatch is its failure, before any of it is decoded; a failed shard's
 * cells are holes naming the URL.
 *
 * With a cache (settings.cache_dir, remote_cache.h) a shard is first
 * looked for there under its URL and ETag: a hit maps the file and the
 * shard is READY at once. The ETag is the fetcher's, learned this run by
 * a whole fetch or, for a shard the cache may hold, by a one-byte ranged
 * GET first (so a changed object is never served from an old copy). A
 * shard fetched whole is handed to the cache's writer, its buffer pinned
 * until written. */
#include "remote_read_impl.h"

#include "crc32c.h"

#include <stdlib.h>
#include <string.h>

void gf__rr_release(rshard *s)
{
    if (s->cached_copy)
        gf__shard_cache_unmap(s->buf.data, s->buf.len);
    else
        gf__buf_free(&s->buf);
    s->buf = (gf__buf){0};
    s->cached_copy = s->validating = s->to_cache = false;
}

/* The buffers the cache's writer is done with: unpinned. */
void gf__rr_take_back(shard_reader *r)
{
    uint32_t ks[8];
    unsigned n;
    while ((n = gf__shard_cache_done(r->cache, ks, 8)) > 0)
        for (unsigned i = 0; i < n; i++)
            if (r->sh[ks[i]].pins)
                r->sh[ks[i]].pins--;
}

/* Frees k's buffer and takes it off the live list (state is the caller's).
 * `bytes` counts a buffer from its shard's arrival: a FETCHING one (a
 * restart drops it) was never added. */
static void unlive(shard_reader *r, uint32_t k)
{
    rshard *s = &r->sh[k];
    if (s->state != SH_FETCHING)
        r->bytes -= s->buf.cap;
    gf__rr_release(s);
    for (unsigned i = 0; i < r->n_live; i++)
        if (r->live[i] == k) {
            r->live[i] = r->live[--r->n_live];
            break;
        }
}

void gf__rr_drop(shard_reader *r, uint32_t k)
{
    unlive(r, k);
    r->sh[k].state = SH_ABSENT;
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
    gf__rr_drop(r, r->live[best]);
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
void gf__rr_serve(shard_reader *r, gf__slot *sl, int c, uint32_t k)
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
    const char *rel;
    uint64_t off, len; /* the sample's members and their headers (fields too) */
    gf__dataset_extent(&l->ds, sample, &rel, &off, &len);
    if (off + len > s->buf.len) {
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
    /* With its header blocks, as every member read: run_decode checks them. */
    r->out[r->n_out - 1].bytes = s->buf.data + off;
    r->out[r->n_out - 1].n_bytes = len;
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
        gf__rr_serve(r, &l->slots[cell / (uint32_t)l->B], (int)(cell % (uint32_t)l->B), k);
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
bool gf__rr_offer(shard_reader *r, uint32_t k)
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
bool gf__rr_start(shard_reader *r, uint32_t k)
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

/* A shard's fetch finished: its waiting cells' outcomes. */
void gf__rr_shard_done(shard_reader *r, const gf__read_done *d)
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
        gf__rr_offer(r, k);
    }
    arrived(r, k);
}
