/* A mix's order (src/blend_order.c): which sample each of this rank's
 * positions reads, when data is a mix of sources (dataset_mix.c). The
 * cursor's, on gf-control; built by the lifecycle thread at gf_open. */
#ifndef GF_BLEND_ORDER_H
#define GF_BLEND_ORDER_H

#include "blend.h"
#include "sampler.h"

#include <stdbool.h>

/* One source: its own order (the one it gives alone) and the tables it
 * is read through. */
typedef struct gf__mix_source {
    gf__sampler sampler;     /* n its size, this rank's share of it */
    gf__shards shards;       /* order SHARDS: its shards (else n 0) */
    gf__shard_epoch tables;
    gf__perm perm;           /* perm_epoch's global order */
    uint64_t perm_epoch;
    bool perm_valid;
    uint64_t first;          /* its first index in the joined table */
} gf__mix_source;

/* A mix's epoch a change of world split (mix_epoch FIRST, gf_set_state):
 * its first world's ranks had reached schedule position pos0, each source
 * s taken0[s] draws in; each source's samples they left are its rest
 * (sampler.c's, on this world), and this world's position p is the
 * schedule's pos0 + p, source s's draw there its rest's position. The
 * epoch ends when the first source's rest is exhausted. */
typedef struct gf__blend_split {
    uint64_t epoch;
    uint32_t world;          /* the first world */
    uint64_t pos0, first_len; /* where it stopped, of first_len positions */
    uint64_t *taken0;        /* n */
    gf__rest *rest;          /* n: off with rest_len 0, nothing left */
    uint64_t *rest_len;      /* n: this rank's positions of source s's rest */
    int n;
} gf__blend_split;

typedef struct gf__blend_order {
    gf__blend b;
    int n;
    gf__mix_source *src;
    bool first;              /* GF_MIX_EPOCH_FIRST */
    /* The walk through walk_epoch's schedule, and (CYCLE) each source's
     * draws in the epochs before it: its own position at the walk's. */
    gf__blend_walk walk;
    bool walk_valid;
    uint64_t *before;        /* n */
    uint64_t before_epoch;
    bool before_valid;
    gf__blend_split *split;  /* NULL: no epoch split */
} gf__blend_order;

/* n sources of sizes sizes[] (first indices firsts[]), weights[] (> 0),
 * each with its own sampler as a lone data set's would be (seed, shuffle,
 * rank, world, drop_last), shard numbers shard[] of the joined table
 * (NULL: the global order); window: shard_window. 0, or GF_EINVAL /
 * GF_ENOMEM with why. */
int gf__blend_order_init(gf__blend_order *o, int n, const uint64_t *sizes,
                         const uint64_t *firsts, const double *weights, const uint32_t *shard,
                         uint32_t window, uint64_t seed, int shuffle, uint32_t rank,
                         uint32_t world, int drop_last, bool first, char *why, size_t why_len);
void gf__blend_order_free(gf__blend_order *o);
/* This rank's positions in epoch: pure (any thread). */
uint64_t gf__blend_order_len(const gf__blend_order *o, uint64_t epoch);
/* The joined table's index at position pos (< len) of epoch, and the
 * epoch of its source it belongs to (its crop's key: a source that
 * cycles sees new views). Sequential positions cost O(1). */
uint64_t gf__blend_order_at(gf__blend_order *o, uint64_t epoch, uint64_t pos,
                            uint64_t *source_epoch);
/* Source s's own epoch and position when epoch's position pos is next:
 * pure, O(epoch) (gf_source_stats). */
void gf__blend_order_where(const gf__blend_order *o, int s, uint64_t epoch, uint64_t pos,
                           uint64_t *source_epoch, uint64_t *source_pos);
/* The split of epoch begun on first_world ranks at schedule position
 * pos0, on o's world: *out malloc'd. 0, or GF_EINVAL with why (pos0 past
 * that world's epoch), GF_ENOMEM. mix_epoch FIRST only. */
int gf__blend_split_make(const gf__blend_order *o, uint64_t epoch, uint32_t first_world,
                         uint64_t pos0, gf__blend_split **out, char *why, size_t why_len);
gf__blend_split *gf__blend_split_copy(const gf__blend_split *sp);
void gf__blend_split_free(gf__blend_split *sp);
/* Installs sp (owned from now; NULL: none), freeing the one before. */
void gf__blend_order_set_split(gf__blend_order *o, gf__blend_split *sp);

/* The source that joined-table index i is in. */
int gf__blend_order_source_of(const gf__blend_order *o, uint64_t i);

#endif
