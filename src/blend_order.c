/*
 * A mix's order. Each epoch is one sequence, the same for every world:
 * its position g draws the source blend.c's schedule says, and that
 * source's k-th draw is its own position k, in the order it gives alone
 * (its shuffle and shard windows, keyed by the loader's seed, as on one
 * rank). The ranks split that sequence as they split a lone data set's
 * epoch (the loader's sampler over the sequence's length): interleaved in
 * the global order, in contiguous spans in the shard order, so a rank's
 * span holds a contiguous run of each source's order (about 1/world of
 * its shards). A one-source mix is that source's order.
 *
 * The sequence does not depend on the world, so elastic resume is the
 * sampler's (its rest, sampler.c): the samples the old world left of the
 * sequence, taken interleaved by the new one, each once; and a position
 * is a pure function of (seed, epoch, position) on any world.
 *
 * The epoch (gf_mix_epoch): CYCLE, the sources' sizes summed, each
 * source's draws counted across epochs (its k-th draw of all is its epoch
 * k / size, position k % size there); FIRST, every source in its epoch E,
 * which ends with the draw that exhausts one.
 *
 * Caches, the controller's: the schedule's block last read (a rank reads
 * positions world apart: a block serves 256 / world of its samples) and,
 * CYCLE, each source's draws before the epoch (O(epochs) at a seek, O(1)
 * an epoch after).
 */
#include "blend_order.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(GF__BLEND_MAX == 64, "dataset_builder.h's GF__MIX_SOURCES_MAX");
_Static_assert(GF__BLEND_BLOCK <= 256, "blk_k is a byte");

int gf__blend_order_init(gf__blend_order *o, int n, const uint64_t *sizes,
                         const uint64_t *firsts, const double *weights, const uint32_t *shard,
                         uint32_t window, uint64_t seed, int shuffle, bool first,
                         const gf__sampler *ranks, char *why, size_t why_len)
{
    *o = (gf__blend_order){.n = n, .first = first, .ranks = ranks};
    int rc = gf__blend_init(&o->b, weights, n, seed, shuffle != 0, why, why_len);
    if (rc < 0)
        return rc;
    o->src = calloc((size_t)n, sizeof *o->src);
    o->before = calloc((size_t)n, sizeof *o->before);
    if (!o->src || !o->before)
        return GF_ENOMEM;
    if (first) {
        if (!(o->sizes = calloc(1, sizeof *o->sizes)))
            return GF_ENOMEM;
        pthread_mutex_init(&o->sizes->mu, NULL);
    }
    for (int s = 0; s < n; s++) {
        gf__mix_source *src = &o->src[s];
        src->first = firsts[s];
        if ((rc = gf__sampler_init(&src->sampler, sizes[s], seed, shuffle, 0, 1, 0)) < 0)
            return rc;
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
    if (o->sizes) {
        pthread_mutex_destroy(&o->sizes->mu);
        free(o->sizes);
    }
    memset(o, 0, sizeof *o);
}

/* Positions of epoch's sequence until source s's `need`-th draw, that
 * one included: the schedule's counts are exact at block ends, so a
 * search over blocks, then a walk within one. */
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

uint64_t gf__blend_order_size(const gf__blend_order *o, uint64_t epoch)
{
    uint64_t size = 0;
    if (!o->first) {
        for (int s = 0; s < o->n; s++)
            size += o->src[s].sampler.n;
        return size;
    }
    /* FIRST: a search per source, so once an epoch (gf_next and gf-control
     * ask each batch, the remote scan each position). */
    gf__blend_sizes *c = o->sizes;
    pthread_mutex_lock(&c->mu);
    for (int k = 0; k < 2; k++)
        if (c->valid[k] && c->epoch[k] == epoch) {
            size = c->size[k];
            pthread_mutex_unlock(&c->mu);
            return size;
        }
    pthread_mutex_unlock(&c->mu);
    size = UINT64_MAX;
    for (int s = 0; s < o->n; s++)
        size = GF__MIN(size, until_draws(o, epoch, s, o->src[s].sampler.n));
    pthread_mutex_lock(&c->mu);
    c->epoch[c->next] = epoch;
    c->size[c->next] = size;
    c->valid[c->next] = true;
    c->next ^= 1;
    pthread_mutex_unlock(&c->mu);
    return size;
}

/* ranks splitting a sequence of n. */
static gf__sampler ranks_of(const gf__sampler *ranks, uint64_t n)
{
    gf__sampler r = *ranks;
    r.n = n;
    r.len = n / r.world + (!r.drop_last && n % r.world);
    return r;
}

gf__sampler gf__blend_order_ranks(const gf__blend_order *o, const gf__sampler *ranks,
                                  uint64_t epoch)
{
    /* FIRST: each epoch its own length, the split's recomputed */
    return o->first ? ranks_of(ranks, gf__blend_order_size(o, epoch)) : *ranks;
}

uint64_t gf__blend_order_len(const gf__blend_order *o, uint64_t epoch)
{
    gf__sampler r = gf__blend_order_ranks(o, o->ranks, epoch);
    return gf__sampler_len(&r, epoch);
}

/* Each source's draws in the sequences of epochs [from, epoch) (CYCLE),
 * added to out. */
static void draws_before(const gf__blend_order *o, uint64_t epoch, uint64_t from,
                         uint64_t *out)
{
    uint64_t size = gf__blend_order_size(o, 0);
    for (uint64_t e = from; e < epoch; e++) {
        gf__blend_walk w;
        gf__blend_walk_start(&w, &o->b, e, size);
        for (int s = 0; s < o->n; s++)
            out[s] += w.taken[s];
    }
}

/* Sequence position g's source and its draws before g. */
static void locate(gf__blend_order *o, uint64_t epoch, uint64_t g, int *s, uint64_t *k)
{
    uint64_t no = g / GF__BLEND_BLOCK;
    if (!o->blk_valid || o->blk_epoch != epoch || o->blk_no != no) {
        uint64_t start = no * GF__BLEND_BLOCK;
        uint8_t seen[GF__BLEND_MAX] = {0};
        for (int t = 0; t < o->n; t++)
            o->blk_base[t] = gf__blend_count(&o->b, epoch, t, start);
        for (int x = 0; x < GF__BLEND_BLOCK; x++) {
            int t = gf__blend_source(&o->b, epoch, start + (uint64_t)x);
            o->blk_src[x] = (uint8_t)t;
            o->blk_k[x] = seen[t]++;
        }
        o->blk_epoch = epoch;
        o->blk_no = no;
        o->blk_valid = true;
    }
    int x = (int)(g % GF__BLEND_BLOCK);
    *s = o->blk_src[x];
    *k = o->blk_base[*s] + o->blk_k[x];
}

/* Source s's sample at its own (se, sp), through its tables. */
static uint64_t sample_of(gf__mix_source *src, uint64_t se, uint64_t sp)
{
    const gf__sampler *sampler = &src->sampler;
    if (sampler->shards) {
        if (!src->tables.valid || src->tables.epoch != se)
            gf__shard_epoch_set(&src->tables, sampler, se);
        return src->first + gf__shard_at(&src->tables, sampler, sp);
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
    /* FIRST's size kept here, the controller's: no lock a sample */
    if (o->first && (!o->at_valid || o->at_epoch != epoch)) {
        o->at_size = gf__blend_order_size(o, epoch);
        o->at_epoch = epoch;
        o->at_valid = true;
    }
    gf__sampler r = o->first ? ranks_of(o->ranks, o->at_size) : *o->ranks;
    uint64_t g = gf__sampler_global(&r, epoch, pos);
    int s;
    uint64_t k;
    locate(o, epoch, g, &s, &k);
    gf__mix_source *src = &o->src[s];
    if (o->first) {
        *source_epoch = epoch;
        return sample_of(src, epoch, k);
    }
    if (!o->before_valid || o->before_epoch != epoch) {
        uint64_t from = 0;
        if (o->before_valid && o->before_epoch < epoch)
            from = o->before_epoch;
        else
            memset(o->before, 0, (size_t)o->n * sizeof *o->before);
        draws_before(o, epoch, from, o->before);
        o->before_epoch = epoch;
        o->before_valid = true;
    }
    uint64_t t = o->before[s] + k, size = src->sampler.n;
    *source_epoch = t / size;
    return sample_of(src, t / size, t % size);
}

uint64_t gf__blend_order_source_epoch(const gf__blend_order *o, const gf__sampler *ranks, int s,
                                      uint64_t epoch, uint64_t pos)
{
    if (o->first)
        return epoch;
    uint64_t before[GF__BLEND_MAX] = {0};
    draws_before(o, epoch, 0, before);
    gf__sampler r = gf__blend_order_ranks(o, ranks, epoch);
    uint64_t len = gf__sampler_len(&r, epoch);
    uint64_t g = pos < len ? gf__sampler_global(&r, epoch, pos) : gf__blend_order_size(o, epoch);
    gf__blend_walk w;
    gf__blend_walk_start(&w, &o->b, epoch, g);
    return (before[s] + w.taken[s]) / o->src[s].sampler.n;
}
