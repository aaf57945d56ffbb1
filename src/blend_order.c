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
    gf__blend_split_free(o->split);
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

/* Whether epoch is the split one. */
static const gf__blend_split *split_of(const gf__blend_order *o, uint64_t epoch)
{
    return o->split && o->split->epoch == epoch ? o->split : NULL;
}

uint64_t gf__blend_order_len(const gf__blend_order *o, uint64_t epoch)
{
    const gf__blend_split *sp = split_of(o, epoch);
    if (sp) { /* until the first rest is exhausted */
        uint64_t end = UINT64_MAX;
        for (int s = 0; s < o->n; s++)
            end = GF__MIN(end, sp->rest_len[s] ? until_draws(o, epoch, s,
                                                             sp->taken0[s] + sp->rest_len[s])
                                               : sp->pos0);
        return end > sp->pos0 ? end - sp->pos0 : 0;
    }
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

/* Source s's sample at its own (se, sp), through its tables. */
static uint64_t sample_of(gf__mix_source *src, const gf__sampler *sampler, uint64_t se,
                          uint64_t sp)
{
    if (sampler->shards) {
        if (!src->tables.valid || src->tables.epoch != se)
            gf__shard_epoch_set(&src->tables, sampler, se);
        return src->first +
               gf__shard_at(&src->tables, sampler, gf__sampler_global(sampler, se, sp));
    }
    if (!src->perm_valid || src->perm_epoch != se) {
        gf__perm_init(&src->perm, sampler, se);
        src->perm_epoch = se;
        src->perm_valid = true;
    }
    return src->first + gf__sampler_at(sampler, &src->perm, sp);
}

uint64_t gf__blend_order_at(gf__blend_order *o, uint64_t epoch, uint64_t pos,
                            uint64_t *source_epoch)
{
    const gf__blend_split *split = split_of(o, epoch);
    uint64_t q = split ? split->pos0 + pos : pos; /* the schedule's position */
    if (!o->walk_valid || o->walk.epoch != epoch || o->walk.q != q) {
        gf__blend_walk_start(&o->walk, &o->b, epoch, q);
        o->walk_valid = true;
    }
    if (split) {
        int s;
        uint64_t k;
        gf__blend_walk_next(&o->walk, &s, &k);
        gf__sampler sampler = o->src[s].sampler;
        sampler.rest = split->rest[s];
        *source_epoch = epoch;
        return sample_of(&o->src[s], &sampler, epoch, k - split->taken0[s]);
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
    *source_epoch = se;
    return sample_of(&o->src[s], &o->src[s].sampler, se, sp);
}

void gf__blend_order_where(const gf__blend_order *o, int s, uint64_t epoch, uint64_t pos,
                           uint64_t *source_epoch, uint64_t *source_pos)
{
    uint64_t before[GF__BLEND_MAX] = {0};
    if (!o->first)
        draws_before(o, epoch, 0, before);
    const gf__blend_split *split = split_of(o, epoch);
    gf__blend_walk w;
    gf__blend_walk_start(&w, &o->b, epoch, split ? split->pos0 + pos : pos);
    own(o, s, epoch, before, w.taken[s] - (split ? split->taken0[s] : 0), source_epoch,
        source_pos);
}

void gf__blend_split_free(gf__blend_split *sp)
{
    if (!sp)
        return;
    free(sp->taken0);
    free(sp->rest);
    free(sp->rest_len);
    free(sp);
}

static gf__blend_split *split_alloc(int n)
{
    gf__blend_split *sp = calloc(1, sizeof *sp);
    if (!sp)
        return NULL;
    sp->n = n;
    sp->taken0 = calloc((size_t)n, sizeof *sp->taken0);
    sp->rest = calloc((size_t)n, sizeof *sp->rest);
    sp->rest_len = calloc((size_t)n, sizeof *sp->rest_len);
    if (!sp->taken0 || !sp->rest || !sp->rest_len) {
        gf__blend_split_free(sp);
        return NULL;
    }
    return sp;
}

gf__blend_split *gf__blend_split_copy(const gf__blend_split *from)
{
    gf__blend_split *sp = from ? split_alloc(from->n) : NULL;
    if (!sp)
        return NULL;
    gf__blend_split keep = *sp;
    *sp = *from;
    sp->taken0 = keep.taken0;
    sp->rest = keep.rest;
    sp->rest_len = keep.rest_len;
    memcpy(sp->taken0, from->taken0, (size_t)from->n * sizeof *sp->taken0);
    memcpy(sp->rest, from->rest, (size_t)from->n * sizeof *sp->rest);
    memcpy(sp->rest_len, from->rest_len, (size_t)from->n * sizeof *sp->rest_len);
    return sp;
}

int gf__blend_split_make(const gf__blend_order *o, uint64_t epoch, uint32_t first_world,
                         uint64_t pos0, gf__blend_split **out, char *why, size_t why_len)
{
    *out = NULL;
    /* The first world's epoch: its own shares of each source. */
    gf__blend_order first = *o;
    first.split = NULL;
    first.src = calloc((size_t)o->n, sizeof *first.src);
    if (!first.src)
        return GF_ENOMEM;
    for (int s = 0; s < o->n; s++) {
        const gf__sampler *own_s = &o->src[s].sampler;
        first.src[s].sampler = *own_s;
        if (gf__sampler_init(&first.src[s].sampler, own_s->n, own_s->seed, own_s->shuffle, 0,
                             first_world, own_s->drop_last) < 0) {
            free(first.src);
            gf__why(why, why_len, "source %d: %llu samples cannot be split into %u shares",
                    s + 1, (unsigned long long)own_s->n, first_world);
            return GF_EINVAL;
        }
        first.src[s].sampler.shards = own_s->shards;
    }
    uint64_t first_len = gf__blend_order_len(&first, epoch);
    free(first.src);
    if (pos0 > first_len) {
        gf__why(why, why_len, "position %llu is past the mix's epoch %llu on %u ranks (%llu)",
                (unsigned long long)pos0, (unsigned long long)epoch, first_world,
                (unsigned long long)first_len);
        return GF_EINVAL;
    }
    gf__blend_split *sp = split_alloc(o->n);
    if (!sp)
        return GF_ENOMEM;
    *sp = (gf__blend_split){.epoch = epoch, .world = first_world, .pos0 = pos0,
                            .first_len = first_len, .taken0 = sp->taken0, .rest = sp->rest,
                            .rest_len = sp->rest_len, .n = o->n};
    gf__blend_walk w;
    gf__blend_walk_start(&w, &o->b, epoch, pos0);
    for (int s = 0; s < o->n; s++) {
        gf__sampler sampler = o->src[s].sampler;
        sp->taken0[s] = w.taken[s];
        int rc = gf__sampler_rest(&sampler, epoch, first_world, w.taken[s], 0);
        if (rc < 0) {
            gf__blend_split_free(sp);
            gf__why(why, why_len, "source %d: its rest does not fit", s + 1);
            return GF_EINVAL;
        }
        sp->rest[s] = sampler.rest;
        sp->rest_len[s] = rc == 1 ? 0 : gf__sampler_len(&sampler, epoch);
    }
    *out = sp;
    return 0;
}

void gf__blend_order_set_split(gf__blend_order *o, gf__blend_split *sp)
{
    if (o->split != sp)
        gf__blend_split_free(o->split);
    o->split = sp;
    o->walk_valid = false;
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
