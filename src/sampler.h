/* Epoch order as a pure function of (seed, epoch): a keyed bijection. */
#ifndef GF_SAMPLER_H
#define GF_SAMPLER_H

#include "common.h"

typedef struct gf__sampler {
    uint64_t n;          /* data set size */
    uint64_t seed;
    int shuffle;
    uint32_t rank, world;
    int drop_last;
    uint64_t len;        /* this rank's samples per epoch */
} gf__sampler;

/* Feistel rounds. Four make a keyed pseudo-random permutation (Luby-Rackoff);
 * two more help the tiny domains of small data sets mix. Changing this
 * changes every shuffled order (the golden tests will say so). */
#define GF__PERM_ROUNDS 6

/* Per-epoch permutation state (round keys); O(1) memory. */
typedef struct gf__perm {
    uint64_t n;
    unsigned half_bits;  /* Feistel domain is 2^(2*half_bits) >= n */
    uint64_t keys[GF__PERM_ROUNDS];
    int identity;
} gf__perm;

/* Returns 0 or GF_EINVAL (n == 0, world == 0, rank >= world, or an empty
 * share). Shares follow DistributedSampler: rank r takes global positions
 * r, r + world, ...; without drop_last the order is padded by wrapping to
 * ceil(n/world) per rank, with drop_last truncated to floor(n/world). */
int gf__sampler_init(gf__sampler *s, uint64_t n, uint64_t seed, int shuffle,
                     uint32_t rank, uint32_t world, int drop_last);
void gf__perm_init(gf__perm *p, const gf__sampler *s, uint64_t epoch);
/* Data set index at this rank's position pos (< s->len) of the epoch.
 * O(1) expected (under 4 Feistel evaluations on average), so resuming at any
 * position costs nothing. A pos >= s->len is taken modulo s->len. */
uint64_t gf__sampler_at(const gf__sampler *s, const gf__perm *p, uint64_t pos);

#endif
