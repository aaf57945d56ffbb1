/* The cursor: the sampler position the next batch or hole takes its
 * samples from, and the permutation of the epoch being read, kept so that
 * each sample costs one gf__sampler_at. On the controller thread (set by
 * the lifecycle thread before it starts). */
#include "cursor.h"

void gf__cursor_start(gf__cursor *c, const gf__sampler *sampler, uint64_t epoch, uint64_t pos)
{
    *c = (gf__cursor){.sampler = sampler, .epoch = epoch, .pos = pos};
    gf__cursor_normalise(c);
}

void gf__cursor_normalise(gf__cursor *c)
{
    if (c->pos >= c->sampler->len) {
        c->epoch++;
        c->pos = 0;
    }
}

uint64_t gf__cursor_sample(gf__cursor *c, uint64_t epoch, uint64_t pos)
{
    if (!c->perm_valid || c->perm_epoch != epoch) {
        gf__perm_init(&c->perm, c->sampler, epoch);
        c->perm_epoch = epoch;
        c->perm_valid = true;
    }
    return gf__sampler_at(c->sampler, &c->perm, pos);
}

bool gf__cursor_take(gf__cursor *c, uint64_t epoch, uint64_t *pos)
{
    gf__cursor_normalise(c);
    if (c->epoch != epoch || c->pos >= c->sampler->len)
        return false;
    *pos = c->pos++;
    return true;
}
