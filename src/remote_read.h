/* Remote shards read whole (src/remote_read.c), on gf-control: each
 * shard one streamed GET into a shard buffer, fetched ahead of the
 * cursor by a scan of the order, a fixed number of buffers in memory;
 * a cell's sample is decoded straight from its shard's buffer. The
 * transfers are the fetcher's (remote_fetch.h). */
#ifndef GF_REMOTE_READ_H
#define GF_REMOTE_READ_H

#include "loader_impl.h"

/* The fetcher's `user` of a whole shard's fetch (a cell's read is
 * slot << 32 | cell, below this bit). */
#define GF__SHARD_FETCH (1ull << 63)

/* Whether s reads remote shards whole (the shard order). */
static inline bool gf__remote_whole_shards(const gf_settings *s)
{
    return s->order == GF_ORDER_SHARDS;
}

/* On gf_open's thread: the shard buffers for ds's shards, `buffers` of
 * them within `budget` bytes. Returns 0 or GF_ENOMEM. */
int gf__remote_read_create(gf_loader *l, unsigned buffers, uint64_t budget);
void gf__remote_read_free(gf_loader *l);
/* Lifecycle thread, the pipeline stopped: transfers were dropped, cells
 * no longer wait, nothing is pinned; shards read stay (a seek reuses
 * them). */
void gf__remote_read_restart(gf_loader *l);
/* gf-control: cell c of sl (its sample set) is decoded from its shard's
 * buffer: a job now, or once the shard has arrived. */
void gf__remote_read_cell(gf_loader *l, gf__slot *sl, int c, uint64_t pos, gf__job *js,
                          int *n_jobs);
/* gf-control: a shard's fetch finished (d->user has GF__SHARD_FETCH):
 * its waiting cells become jobs or errors. */
void gf__remote_read_shard_done(gf_loader *l, const gf__read_done *d, gf__job *js, int *n_jobs);
/* gf-control: a decode from sample's shard is done: its buffer is no
 * longer read by it. */
void gf__remote_read_decoded(gf_loader *l, uint64_t sample);
/* gf-control: takes back the buffers the cache's writer is done with,
 * scans the order ahead of the cursor and starts the fetches the buffers
 * have room for (a shard found in the cache is READY at once: its
 * waiting cells become jobs). */
void gf__remote_read_ahead(gf_loader *l, gf__job *js, int *n_jobs);
/* The controller's loop can take wake-ups (true, once its async handle
 * is made) or not (false, before it is closed): the cache's writer wakes
 * it when a pinned buffer is free again. */
void gf__remote_read_wakes(gf_loader *l, bool on);
/* The cache's figures for gf_stats (zeros and "" without a cache). */
void gf__remote_read_cache_stats(gf_loader *l, uint64_t *hits, uint64_t *misses, char *warning,
                                 size_t warning_len);
/* Cells wait for a shard to arrive. */
bool gf__remote_read_cells_wait(const gf_loader *l);
/* Bytes the shard buffers hold. */
uint64_t gf__remote_read_bytes(const gf_loader *l);

#endif
