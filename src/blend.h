/* The schedule of data sets mixed by weight (src/blend.c): which source
 * each position of an epoch draws from, and each source's own position.
 * A leaf: blend_order.c reads it for the loader. */
#ifndef GF_BLEND_H
#define GF_BLEND_H

#include "sampler.h"

#include <stdbool.h>

#define GF__BLEND_MAX 64     /* sources */
#define GF__BLEND_BLOCK 256  /* positions a shuffled block: counts exact in each */
#define GF__BLEND_UNITS (1u << 24) /* the weights' integer total */

typedef struct gf__blend {
    int n;                               /* sources */
    uint64_t seed;
    bool shuffle;
    /* The weights as integers summing to GF__BLEND_UNITS: source s owns
     * the units [cum[s], cum[s + 1]). */
    uint32_t cum[GF__BLEND_MAX + 1];
} gf__blend;

/* The golden ratio's step through the units (odd: every unit once a
 * period of GF__BLEND_UNITS positions). */
#define GF__BLEND_STEP 0x9e3779u

/* From n weights (each > 0 and finite): 0, or GF_EINVAL with why (a
 * weight not positive or finite, more than GF__BLEND_MAX sources, or a
 * weight under one unit of the total: too small to be drawn). */
int gf__blend_init(gf__blend *b, const double *weights, int n, uint64_t seed, bool shuffle,
                   char *why, size_t why_len);

/* Position q's unit before shuffling: q * STEP + the epoch's phase, modulo
 * the total. Source s draws the positions whose units it owns. */
uint32_t gf__blend_unit(const gf__blend *b, uint64_t epoch, uint64_t q);
/* Draws of source s among the positions [0, q) of epoch, before
 * shuffling: O(log total), exact (a floor sum, not a walk). */
uint64_t gf__blend_count(const gf__blend *b, uint64_t epoch, int s, uint64_t q);

/* The source position q of epoch draws from: O(log n), pure. Unshuffled,
 * position q's unit's owner: the sources interleave evenly. Shuffled, each
 * block of GF__BLEND_BLOCK positions draws what those positions would,
 * in an order keyed by (seed, epoch, block). */
int gf__blend_source(const gf__blend *b, uint64_t epoch, uint64_t q);

/* Walks an epoch's positions in order, each source's own position with
 * them: the n-th draw of a source is its position n, so a source's
 * samples come in its own order. Starting at q costs O(GF__BLEND_BLOCK). */
typedef struct gf__blend_walk {
    const gf__blend *b;
    uint64_t epoch, q;
    uint64_t taken[GF__BLEND_MAX];       /* each source's draws before q */
} gf__blend_walk;

void gf__blend_walk_start(gf__blend_walk *w, const gf__blend *b, uint64_t epoch, uint64_t q);
/* Position q's source into *s and that source's position into *k; q moves on. */
void gf__blend_walk_next(gf__blend_walk *w, int *s, uint64_t *k);

#endif
