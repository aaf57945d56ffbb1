/* The shard reader's insides (src/remote_read.c, remote_shard.c), on
 * gf-control: every shard's state and buffer, the cells waiting for
 * them, the scan ahead of the cursor. Built with `remote` only. */
#ifndef GF_REMOTE_READ_IMPL_H
#define GF_REMOTE_READ_IMPL_H

#include "cell_reader.h"
#include "remote_cache.h"

/* WANTED: absent, cells wait for it, no buffer was free (in `want`). */
enum { SH_ABSENT, SH_WANTED, SH_FETCHING, SH_READY, SH_FAILED };

typedef struct rshard {
    uint8_t state;
    uint32_t pins;       /* decode jobs reading its buffer */
    uint32_t need;       /* positions scanned, not yet taken */
    uint32_t waiting;    /* first waiting cell + 1, 0: none */
    uint64_t used;       /* LRU tick */
    bool cached_copy;    /* buf maps the cache's file (cap 0) */
    bool validating;     /* FETCHING one byte, to learn the ETag */
    bool to_cache;       /* READY, fetched, not yet taken by the cache */
    uint64_t failed_epoch; /* FAILED: the cursor's epoch then */
    gf__buf buf;
    int err;
    char *why;
} rshard;

typedef struct shard_reader {
    gf_loader *l;
    gf__fetcher *f;      /* this run's, from start to stop */
    gf__read_done reaped[GF__REAP_BATCH];
    gf__cell_out *out;   /* the outcomes of the op running */
    int n_out, max_out;
    rshard *sh;
    uint32_t *wait_next; /* per cell (slot * B + c): the next waiting + 1 */
    uint32_t *live;      /* shards FETCHING or READY, at most `buffers` */
    unsigned n_live, buffers;
    uint32_t *want;      /* WANTED shards, oldest first (n_shards room) */
    uint32_t n_want;
    uint32_t n_waiting;  /* cells on the shards' waiting lists */
    uint64_t budget, bytes, tick;
    gf__buf spare;       /* the buffer of the shard room_for_one dropped */
    gf__cursor scan;     /* the scan's own cursor */
    gf__shard_epoch scan_tables; /* its shard order tables (the cursor's
                            are for the cursor's epoch) */
    bool has_tables, scanning;
    uint64_t scan_epoch, scan_pos;
    gf__shard_cache *cache; /* NULL: none */
} shard_reader;

/* Shard k's fetch: the fetcher's `user` (a cell's is below this bit). */
#define SHARD_FETCH (1ull << 63)
/* remote_shard.c: one shard's buffer. */
/* Frees s's buffer, or unmaps the cache's file. */
void gf__rr_release(rshard *s);
/* The buffers the cache's writer is done with: unpinned. */
void gf__rr_take_back(shard_reader *r);
/* Frees k's buffer; k is ABSENT. */
void gf__rr_drop(shard_reader *r, uint32_t k);
/* Cell c of sl reads shard k (READY or FAILED): its outcome to r->out. */
void gf__rr_serve(shard_reader *r, gf__slot *sl, int c, uint32_t k);
/* Starts shard k into a buffer: from the cache (READY now, its waiting
 * cells served), or a fetch. False when no buffer or request is free. */
bool gf__rr_start(shard_reader *r, uint32_t k);
/* A shard's fetch finished: its waiting cells' outcomes to r->out. */
void gf__rr_shard_done(shard_reader *r, const gf__read_done *d);
/* Hands fetched shard k to the cache's writer. False when its queue is
 * full: offer it again later. */
bool gf__rr_offer(shard_reader *r, uint32_t k);

#endif
