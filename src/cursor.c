/* The cursor: the position the next batch or hole takes its samples
 * from, in the sampler's order (its permutation of the epoch being read
 * kept, so that each sample costs one gf__sampler_at; or the shard
 * order's tables of that epoch, one gf__shard_at) or in the caller's
 * (an array lookup). On the controller thread (set by the lifecycle
 * thread before it starts). */
#include "cursor.h"

#include <assert.h>

void gf__cursor_start(gf__cursor *c, const gf__sampler *sampler, const gf__order *order,
                      gf__shard_epoch *shard_epoch, gf__blend_order *blend, uint64_t epoch,
                      uint64_t pos)
{
    assert(!sampler->shards == !shard_epoch);
    *c = (gf__cursor){.sampler = sampler,
                      .order = order,
                      .shard_epoch = shard_epoch,
                      .blend = blend,
                      .seed = order ? order->seed : sampler->seed,
                      .epoch = epoch,
                      .pos = pos};
    c->len = gf__cursor_len(c, epoch);
    gf__cursor_normalise(c);
}

void gf__cursor_normalise(gf__cursor *c)
{
    if (c->pos >= c->len) {
        c->epoch++;
        c->pos = 0;
        c->len = gf__cursor_len(c, c->epoch);
    }
}

uint64_t gf__cursor_len(const gf__cursor *c, uint64_t epoch)
{
    if (c->order)
        return c->order->n;
    return c->blend ? gf__blend_order_len(c->blend, epoch) : gf__sampler_len(c->sampler, epoch);
}

bool gf__cursor_epoch_live(const gf__cursor *c, uint64_t epoch, uint64_t epochs)
{
    if (c->order)
        return epoch == c->order->epoch;
    return epochs == 0 || epoch < epochs;
}

uint64_t gf__cursor_sample(gf__cursor *c, uint64_t epoch, uint64_t pos, uint64_t *key_epoch)
{
    uint64_t ignored;
    if (!key_epoch)
        key_epoch = &ignored;
    *key_epoch = epoch;
    if (c->blend && !c->order)
        return gf__blend_order_at(c->blend, epoch, pos, key_epoch);
    if (c->order) {
        assert(epoch == c->order->epoch && pos < c->order->n);
        return (uint64_t)c->order->idx[pos]; /* checked by gf_set_order */
    }
    if (c->shard_epoch) {
        /* O(shards) once an epoch; a seek keeps them (the same epoch's
         * tables are the same). */
        if (!c->shard_epoch->valid || c->shard_epoch->epoch != epoch)
            gf__shard_epoch_set(c->shard_epoch, c->sampler, epoch);
        return gf__shard_at(c->shard_epoch, c->sampler, gf__sampler_global(c->sampler, epoch, pos));
    }
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
    if (c->epoch != epoch || c->pos >= c->len)
        return false;
    *pos = c->pos++;
    return true;
}
