/* The cursor (src/cursor.c): where the epoch's order stands, the next
 * sample no batch has taken yet. The order is the sampler's or, after
 * gf_set_order, the caller's (one epoch). The controller owns it:
 * batches are assigned from it (controller.c) and the oldest batch's
 * holes filled from it (assemble.c); the lifecycle thread sets it while
 * no loader thread runs (gf_open, gf_seek, gf_set_order). */
#ifndef GF_CURSOR_H
#define GF_CURSOR_H

#include "blend_order.h"
#include "sampler.h"

#include <stdbool.h>

/* One epoch's order given by the caller (gf_set_order): n data set
 * indices (each < the data set's size), the epoch it is, and the seed
 * its samples' crops and flips are keyed by. */
typedef struct gf__order {
    int64_t *idx;             /* NULL: no order given */
    uint64_t n, epoch, seed;
} gf__order;

typedef struct gf__cursor {
    const gf__sampler *sampler;
    const gf__order *order;   /* in force, or NULL: the sampler's */
    uint64_t len;             /* positions in `epoch`: gf__cursor_len */
    uint64_t seed;            /* gf__sample_key's: order->seed or the sampler's */
    uint64_t epoch, pos;      /* the next unassigned sample */
    gf__shard_epoch *shard_epoch; /* the shard order's tables, or NULL */
    gf__blend_order *blend;   /* data as a mix: its order (the sampler's then
                                 the whole table's, for its seed and world) */
    gf__perm perm;            /* perm_epoch's order, kept while it is used */
    uint64_t perm_epoch;
    bool perm_valid;
} gf__cursor;

/* Starts at (epoch, pos) of order (NULL: sampler's), normalised.
 * shard_epoch: the tables the sampler's shard order is read through
 * (rebuilt here at each new epoch), NULL in the global order. */
void gf__cursor_start(gf__cursor *c, const gf__sampler *sampler, const gf__order *order,
                      gf__shard_epoch *shard_epoch, gf__blend_order *blend, uint64_t epoch,
                      uint64_t pos);
/* Positions in epoch: the order's, or the sampler's (the epoch a change of
 * world split has its own). Reads only what the lifecycle thread set
 * before starting: any thread. */
uint64_t gf__cursor_len(const gf__cursor *c, uint64_t epoch);
/* Moves the cursor past an exhausted epoch. */
void gf__cursor_normalise(gf__cursor *c);
/* Whether epoch is one to deliver: the order's alone, else those
 * below `epochs` (0: all). */
bool gf__cursor_epoch_live(const gf__cursor *c, uint64_t epoch, uint64_t epochs);
/* The data set index at position pos (< len) of epoch, and the epoch its
 * randomness is keyed by into *key_epoch (may be NULL): epoch, or in a
 * mix its source's own. */
uint64_t gf__cursor_sample(gf__cursor *c, uint64_t epoch, uint64_t pos, uint64_t *key_epoch);
/* Takes the next position of epoch into *pos; false when epoch has no
 * more (the cursor is past it). */
bool gf__cursor_take(gf__cursor *c, uint64_t epoch, uint64_t *pos);

#endif
