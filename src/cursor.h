/* The cursor (src/cursor.c): where the sampler order stands, the next
 * sample no batch has taken yet. The controller owns it: batches are
 * assigned from it (controller.c) and the oldest batch's holes filled
 * from it (assemble.c); the lifecycle thread sets it while no loader
 * thread runs (gf_open, gf_seek). */
#ifndef GF_CURSOR_H
#define GF_CURSOR_H

#include "sampler.h"

#include <stdbool.h>

typedef struct gf__cursor {
    const gf__sampler *sampler;
    uint64_t epoch, pos;      /* the next unassigned sample */
    gf__perm perm;            /* perm_epoch's order, kept while it is used */
    uint64_t perm_epoch;
    bool perm_valid;
} gf__cursor;

/* Starts at (epoch, pos) of sampler's order, normalised. */
void gf__cursor_start(gf__cursor *c, const gf__sampler *sampler, uint64_t epoch, uint64_t pos);
/* Moves the cursor past an exhausted epoch. */
void gf__cursor_normalise(gf__cursor *c);
/* The data set index at position pos of epoch. */
uint64_t gf__cursor_sample(gf__cursor *c, uint64_t epoch, uint64_t pos);
/* Takes the next position of epoch into *pos; false when epoch has no
 * more (the cursor is past it). */
bool gf__cursor_take(gf__cursor *c, uint64_t epoch, uint64_t *pos);

#endif
