/* A mix's order (src/blend_order.c): which sample each of this rank's
 * positions reads, when data is a mix of sources (dataset_mix.c). The
 * cursor's, on gf-control; built by the lifecycle thread at gf_open. */
#ifndef GF_BLEND_ORDER_H
#define GF_BLEND_ORDER_H

#include "blend.h"
#include "sampler.h"

#include <pthread.h>
#include <stdbool.h>

/* FIRST's epoch sizes, the last two asked (any thread: its own lock). */
typedef struct gf__blend_sizes {
    pthread_mutex_t mu;
    uint64_t epoch[2], size[2];
    bool valid[2];
    int next;
} gf__blend_sizes;

/* One source: its own order (the one it gives alone, on one rank) and the
 * tables it is read through. */
typedef struct gf__mix_source {
    gf__sampler sampler;     /* its size, world 1 */
    gf__shards shards;       /* order SHARDS: its shards (else n 0) */
    gf__shard_epoch tables;
    gf__perm perm;           /* perm_epoch's global order */
    uint64_t perm_epoch;
    bool perm_valid;
    uint64_t first;          /* its first index in the joined table */
} gf__mix_source;

typedef struct gf__blend_order {
    gf__blend b;
    int n;
    gf__mix_source *src;
    bool first;              /* GF_MIX_EPOCH_FIRST */
    /* The ranks' split of an epoch's sequence (the loader's sampler: its
     * world, rank, drop_last, spans and rest; n the sequence's length,
     * which under FIRST each epoch has its own). */
    const gf__sampler *ranks;
    /* The block of the schedule last read: each position's source and its
     * draw count there (blk_base + blk_k). */
    uint64_t blk_epoch, blk_no;
    bool blk_valid;
    uint8_t blk_src[GF__BLEND_BLOCK], blk_k[GF__BLEND_BLOCK];
    uint64_t blk_base[GF__BLEND_MAX];
    gf__blend_sizes *sizes;  /* FIRST */
    uint64_t at_epoch, at_size; /* FIRST: gf__blend_order_at's epoch, unlocked */
    bool at_valid;
    /* CYCLE: each source's draws in the epochs before before_epoch. */
    uint64_t *before;
    uint64_t before_epoch;
    bool before_valid;
} gf__blend_order;

/* n sources of sizes sizes[] (first indices firsts[]), weights[] (> 0),
 * each in its own order as a lone data set's on one rank (seed, shuffle),
 * shard numbers shard[] of the joined table (NULL: the global order; a
 * source of files has only that); window: shard_window. ranks: the
 * sampler that splits each epoch's sequence between ranks. 0, or
 * GF_EINVAL / GF_ENOMEM with why. */
int gf__blend_order_init(gf__blend_order *o, int n, const uint64_t *sizes,
                         const uint64_t *firsts, const double *weights, const uint32_t *shard,
                         uint32_t window, uint64_t seed, int shuffle, bool first,
                         const gf__sampler *ranks, char *why, size_t why_len);
void gf__blend_order_free(gf__blend_order *o);
/* The epoch's sequence, all ranks': the sources' sizes summed (CYCLE), or
 * until the first source is exhausted (FIRST). Pure. */
uint64_t gf__blend_order_size(const gf__blend_order *o, uint64_t epoch);
/* ranks as it splits epoch's sequence (n and len that epoch's). Pure. */
gf__sampler gf__blend_order_ranks(const gf__blend_order *o, const gf__sampler *ranks,
                                  uint64_t epoch);
/* This rank's positions in epoch (a split epoch's rest too): pure. */
uint64_t gf__blend_order_len(const gf__blend_order *o, uint64_t epoch);
/* The joined table's index at this rank's position pos (< len) of
 * epoch, and the epoch of its source it belongs to (its crop's key: a
 * source that cycles sees new views). */
uint64_t gf__blend_order_at(gf__blend_order *o, uint64_t epoch, uint64_t pos,
                            uint64_t *source_epoch);
/* Source s's own epoch when this rank's position pos of epoch is next,
 * ranks its split then: pure, O(epoch) (gf_source_stats). */
uint64_t gf__blend_order_source_epoch(const gf__blend_order *o, const gf__sampler *ranks, int s,
                                      uint64_t epoch, uint64_t pos);

#endif
