/* Epoch order as a pure function of (seed, epoch): a keyed bijection of
 * the samples (global), or of the shards then of each window's samples. */
#ifndef GF_SAMPLER_H
#define GF_SAMPLER_H

#include "common.h"

#include <stdbool.h>

/* The shard order's fixed facts (gf_order SHARDS), built once at gf_open
 * from the index: the shards that kept a sample, in index order, and
 * where their samples lie (a shard's samples are contiguous in the index). */
typedef struct gf__shards {
    uint32_t n;          /* shards with at least one sample */
    uint32_t window;     /* W: shards per window */
    uint64_t *first;     /* n + 1: shard k's samples are [first[k], first[k+1]) */
} gf__shards;

/* The epoch a change of world split (gf_set_state): its first world's
 * ranks delivered first_pos positions each; the samples they left, the
 * rest, in the epoch's order, are taken interleaved by later worlds,
 * `taken` of them before this one. */
typedef struct gf__rest {
    bool on;
    uint64_t epoch;
    uint32_t first_world;
    uint64_t first_len, first_pos;
    uint64_t full;       /* shards: the first world's spans whose tails are whole */
    uint64_t size;       /* samples the first world left */
    uint64_t taken;
    uint64_t len;        /* this rank's positions in the epoch */
} gf__rest;

typedef struct gf__sampler {
    uint64_t n;          /* data set size */
    uint64_t seed;
    int shuffle;
    uint32_t rank, world;
    int drop_last;
    uint64_t len;        /* this rank's samples per epoch */
    const gf__shards *shards; /* NULL: the global order */
    bool spans;          /* ranks take contiguous spans without shards (a mix's
                            shard order: blend_order.c); shards implies them */
    gf__rest rest;       /* rest.on: one epoch began on another world */
} gf__sampler;

/* Feistel rounds. Four make a keyed pseudo-random permutation (Luby-Rackoff);
 * two more help the tiny domains of small data sets mix. Changing this
 * changes every shuffled order (the golden tests will say so). */
#define GF__PERM_ROUNDS 6

/* Per-epoch permutation state (round keys); O(1) memory. */
typedef struct gf__perm {
    uint64_t n;
    uint64_t epoch;
    unsigned half_bits;  /* Feistel domain is 2^(2*half_bits) >= n */
    uint64_t keys[GF__PERM_ROUNDS];
    int identity;
} gf__perm;

/* Returns 0 or GF_EINVAL (n == 0, world == 0, rank >= world, or an empty
 * share). Each rank's share is ceil(n/world) positions, padded by wrapping
 * to the start of the epoch's order, or under drop_last floor(n/world).
 * The global order's shares follow DistributedSampler: rank r takes
 * positions r, r + world, ...; set s->shards after init for the shard
 * order, whose rank r takes the span [r*len, (r+1)*len). */
/* A keyed permutation of [0, n) (n >= 1) whose round keys come from base,
 * and its value at x < n: the machinery of the orders, for other
 * schedules (blend.c). */
void gf__perm_keyed(gf__perm *p, uint64_t n, uint64_t base);
uint64_t gf__perm_at(const gf__perm *p, uint64_t x);

int gf__sampler_init(gf__sampler *s, uint64_t n, uint64_t seed, int shuffle,
                     uint32_t rank, uint32_t world, int drop_last);
void gf__perm_init(gf__perm *p, const gf__sampler *s, uint64_t epoch);
/* The global order's data set index at this rank's position pos (<
 * gf__sampler_len) of p's epoch. O(1) expected (under 4 Feistel evaluations
 * on average), so resuming at any position costs nothing. A pos past the
 * epoch is taken modulo its length. */
uint64_t gf__sampler_at(const gf__sampler *s, const gf__perm *p, uint64_t pos);
/* The epoch position (< s->n) that this rank's position pos of epoch
 * reads: pos * world + rank in the global order, rank * len + pos in the
 * shard order (contiguous spans); past n it wraps (padding). In the rest's
 * epoch: the rest's sample taken + pos * world + rank, past the rest the
 * epoch's first positions (padding). */
uint64_t gf__sampler_global(const gf__sampler *s, uint64_t epoch, uint64_t pos);
/* This rank's positions in epoch: s->len, or the rest's share in its epoch. */
uint64_t gf__sampler_len(const gf__sampler *s, uint64_t epoch);

/* Elastic resume (gf_set_state from another world): epoch began on
 * first_world ranks, which delivered first_pos positions each, and later
 * worlds took `taken` samples of what they left; this sampler's world
 * takes the rest of the epoch from there, interleaved, each sample once
 * (padding and drop_last as for a whole epoch). Returns 0 (s->rest set),
 * 1 (nothing left of the epoch for this world: s->rest off, its counts
 * set, the epoch is done), GF_EINVAL (first_world 0, first_pos past its share). A taken
 * past the rest is the rest. first_pos 0 with taken 0 is no change: the
 * epoch is this world's own (returns 0, s->rest off). */
int gf__sampler_rest(gf__sampler *s, uint64_t epoch, uint32_t first_world, uint64_t first_pos,
                     uint64_t taken);
/* Samples of the rest taken when this rank is at pos of the rest's epoch
 * (every rank at pos): what a state saved there says to the next world. */
uint64_t gf__rest_taken(const gf__sampler *s, uint64_t pos);

/* The shard order. gf__shards_of builds sh from the index's per-sample
 * shard numbers (shard[i], non-decreasing: asserted), n samples; returns 0
 * or GF_ENOMEM / GF_EDATASET. */
int gf__shards_init(gf__shards *sh, const uint32_t *shard, uint64_t n, uint32_t window);
void gf__shards_free(gf__shards *sh);

/* One epoch's tables, O(shards) memory, allocated once (gf_open) and
 * rebuilt once per epoch (gf__shard_epoch_set), never per position. */
typedef struct gf__shard_epoch {
    uint32_t *seq;       /* n: the epoch's shard sequence (shard numbers) */
    uint64_t *start;     /* n + 1: positions before seq[k] */
    uint64_t epoch;
    bool valid;
    gf__perm win;        /* the last window's in-window permutation */
    uint64_t win_no;
    bool win_valid;
} gf__shard_epoch;

int gf__shard_epoch_alloc(gf__shard_epoch *e, const gf__shards *sh);
void gf__shard_epoch_free(gf__shard_epoch *e);
/* Builds epoch's shard permutation and prefix sums: O(shards). */
void gf__shard_epoch_set(gf__shard_epoch *e, const gf__sampler *s, uint64_t epoch);
/* The data set index at epoch position g (< s->n) of e's epoch:
 * O(log shards); caches the window's permutation in e. */
uint64_t gf__shard_at(gf__shard_epoch *e, const gf__sampler *s, uint64_t g);

#endif
