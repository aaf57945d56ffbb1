/*
 * A mix's order: this rank's position q of an epoch draws the source
 * blend.c's schedule says (the same schedule on every rank), and that
 * source's k-th draw reads its own position k, in the order the source
 * gives alone (its sampler: its shuffle, shard windows and rank split,
 * keyed by the loader's seed). So a one-source mix is that source's order,
 * each source's samples come in its own order (a shard order's windows
 * stay one read per epoch per rank), and ranks never share a sample of a
 * source's epoch.
 *
 * The epoch (gf_mix_epoch): CYCLE, the sources' shares summed, each
 * source's draws counted across epochs (its position k of all its draws
 * so far is its epoch k / len and position k % len there); FIRST, every
 * source in its epoch E, which ends with the draw that exhausts one.
 *
 * Pure functions of (seed, epoch, position) but for two caches the
 * controller keeps: the schedule's walk (sequential positions O(1)) and
 * each source's draws in the epochs before the walk's (CYCLE: O(epochs)
 * at a seek, O(1) an epoch after).
 */
#include "blend_order.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(GF__BLEND_MAX == 64, "dataset_builder.h's GF__MIX_SOURCES_MAX");

int gf__blend_order_init(gf__blend_order *o, int n, const uint64_t *sizes,
                         const uint64_t *firsts, const double *weights, const uint32_t *shard,
                         uint32_t window, uint64_t seed, int shuffle, uint32_t rank,
                         uint32_t world, int drop_last, bool first, char *why, size_t why_len)
{
    *o = (gf__blend_order){.n = n, .first = first};
    int rc = gf__blend_init(&o->b, weights, n, seed, shuffle != 0, why, why_len);
    if (rc < 0)
        return rc;
    o->src = calloc((size_t)n, sizeof *o->src);
    o->before = calloc((size_t)n, sizeof *o->before);
    if (!o->src || !o->before)
        return GF_ENOMEM;
    for (int s = 0; s < n; s++) {
        gf__mix_source *src = &o->src[s];
        src->first = firsts[s];
        rc = gf__sampler_init(&src->sampler, sizes[s], seed, shuffle, rank, world, drop_last);
        if (rc < 0) {
            gf__why(why, why_len, "source %d: %llu samples cannot be split into %u shares%s",
                    s + 1, (unsigned long long)sizes[s], world,
                    drop_last ? " (drop_last)" : "");
            return rc;
        }
        /* A source of files (GF__NOT_A_MEMBER) has its global order only. */
        if (!shard || shard[firsts[s]] == UINT32_MAX)
            continue;
        rc = gf__shards_init(&src->shards, shard + firsts[s], sizes[s], window);
        if (rc == 0)
            rc = gf__shard_epoch_alloc(&src->tables, &src->shards);
        if (rc < 0) {
            gf__why(why, why_len, "source %d: the shard order's tables: %s", s + 1,
                    rc == GF_ENOMEM ? "out of memory" : "a shard's samples are not contiguous");
            return rc;
        }
        src->sampler.shards = &src->shards;
    }
    return 0;
}

void gf__blend_order_free(gf__blend_order *o)
{
    for (int s = 0; o->src && s < o->n; s++) {
        gf__shard_epoch_free(&o->src[s].tables);
        gf__shards_free(&o->src[s].shards);
    }
    free(o->src);
    free(o->before);
    memset(o, 0, sizeof *o);
}

/* Positions of epoch until source s's `need`-th draw, that one
 * included: the schedule's counts are exact at block ends, so a search
 * over blocks, then a walk within one. */
static uint64_t until_draws(const gf__blend_order *o, uint64_t epoch, int s, uint64_t need)
{
    const uint64_t B = GF__BLEND_BLOCK;
    uint64_t lo = 0, hi = 1; /* blocks: count(lo * B) < need <= count(hi * B) */
    while (gf__blend_count(&o->b, epoch, s, hi * B) < need) {
        lo = hi;
        hi *= 2;
    }
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (gf__blend_count(&o->b, epoch, s, mid * B) < need)
            lo = mid;
        else
            hi = mid;
    }
    uint64_t have = gf__blend_count(&o->b, epoch, s, lo * B);
    for (uint64_t q = lo * B;; q++)
        if (gf__blend_source(&o->b, epoch, q) == s && ++have == need)
            return q + 1;
}

uint64_t gf__blend_order_len(const gf__blend_order *o, uint64_t epoch)
{
    uint64_t len = 0;
    if (!o->first) {
        for (int s = 0; s < o->n; s++)
            len += o->src[s].sampler.len;
        return len;
    }
    len = UINT64_MAX;
    for (int s = 0; s < o->n; s++)
        len = GF__MIN(len, until_draws(o, epoch, s, o->src[s].sampler.len));
    return len;
}

/* Each source's draws in the epochs before `epoch` (CYCLE) into out. */
static void draws_before(const gf__blend_order *o, uint64_t epoch, uint64_t from,
                         uint64_t *out)
{
    uint64_t len = gf__blend_order_len(o, 0);
    for (uint64_t e = from; e < epoch; e++) {
        gf__blend_walk w;
        gf__blend_walk_start(&w, &o->b, e, len);
        for (int s = 0; s < o->n; s++)
            out[s] += w.taken[s];
    }
}

/* Source s's own (epoch, position) for its k-th draw of epoch. */
static void own(const gf__blend_order *o, int s, uint64_t epoch, const uint64_t *before,
                uint64_t k, uint64_t *se, uint64_t *sp)
{
    if (o->first) {
        *se = epoch;
        *sp = k;
        return;
    }
    uint64_t t = before[s] + k, len = o->src[s].sampler.len;
    *se = t / len;
    *sp = t % len;
}

uint64_t gf__blend_order_at(gf__blend_order *o, uint64_t epoch, uint64_t pos,
                            uint64_t *source_epoch)
{
    if (!o->walk_valid || o->walk.epoch != epoch || o->walk.q != pos) {
        gf__blend_walk_start(&o->walk, &o->b, epoch, pos);
        o->walk_valid = true;
    }
    if (!o->first && (!o->before_valid || o->before_epoch != epoch)) {
        uint64_t from = 0;
        if (o->before_valid && o->before_epoch < epoch) {
            from = o->before_epoch;
        } else {
            memset(o->before, 0, (size_t)o->n * sizeof *o->before);
        }
        draws_before(o, epoch, from, o->before);
        o->before_epoch = epoch;
        o->before_valid = true;
    }
    int s;
    uint64_t k, se, sp;
    gf__blend_walk_next(&o->walk, &s, &k);
    own(o, s, epoch, o->before, k, &se, &sp);
    gf__mix_source *src = &o->src[s];
    *source_epoch = se;
    if (src->sampler.shards) {
        if (!src->tables.valid || src->tables.epoch != se)
            gf__shard_epoch_set(&src->tables, &src->sampler, se);
        return src->first +
               gf__shard_at(&src->tables, &src->sampler, gf__sampler_global(&src->sampler, se, sp));
    }
    if (!src->perm_valid || src->perm_epoch != se) {
        gf__perm_init(&src->perm, &src->sampler, se);
        src->perm_epoch = se;
        src->perm_valid = true;
    }
    return src->first + gf__sampler_at(&src->sampler, &src->perm, sp);
}

void gf__blend_order_where(const gf__blend_order *o, int s, uint64_t epoch, uint64_t pos,
                           uint64_t *source_epoch, uint64_t *source_pos)
{
    uint64_t before[GF__BLEND_MAX] = {0};
    if (!o->first)
        draws_before(o, epoch, 0, before);
    gf__blend_walk w;
    gf__blend_walk_start(&w, &o->b, epoch, pos);
    own(o, s, epoch, before, w.taken[s], source_epoch, source_pos);
}

int gf__blend_order_source_of(const gf__blend_order *o, uint64_t i)
{
    int lo = 0, hi = o->n - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (o->src[mid].first <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}
