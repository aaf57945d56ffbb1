/* The one interface through which gf-control gets a cell's bytes, as
 * libuv's uv__io_t is its loop's: an ops table and its state. Three
 * implementations: local files (read_local.c: io_uring, or the decode
 * threads' pread), a ranged GET a cell (read_ranged.c) and whole remote
 * shards in buffers (remote_read.c). A reader never finishes a cell nor
 * calls the controller: it hands outcomes back (gf__cell_out), and the
 * controller turns them into decode jobs or holes (dispatch.c). The
 * remote two are absent (NULL) in a build without `remote`. */
#ifndef GF_CELL_READER_H
#define GF_CELL_READER_H

#include "loader_impl.h"

/* A cell's bytes, ready or failed. */
typedef struct gf__cell_out {
    uint32_t slot, cell;
    int err;              /* nonzero: a HOLE, why its reason */
    char *why;            /* malloc'd, or NULL: gf_strerror(err) */
    gf__buf *buf;         /* a read buffer of the free list, read into (on error too) */
    const uint8_t *bytes; /* else a view of n_bytes (a shard buffer's) */
    size_t n_bytes;
    bool cached;          /* no bytes: the decode thread reads, the page cache only if set */
} gf__cell_out;

static inline gf__cell_out gf__cell_out_of(const gf_loader *l, const gf__slot *sl, int c)
{
    return (gf__cell_out){.slot = (uint32_t)(sl - l->slots), .cell = (uint32_t)c};
}

/* What a reader may use of the controller's loop. */
typedef struct gf__reader_hooks {
    uv_loop_t *loop;
    void (*ready)(void *ctx); /* on the loop: outcomes wait to be reaped */
    void (*wake)(void *ctx);  /* any thread: the loop runs a round soon */
    void *ctx;
} gf__reader_hooks;

/* An entry left NULL is a step the reader has nothing to do in. "out,
 * max": outcomes written there, how many returned; each is a pending cell
 * of the ring, so max = l->js_cap always suffices. */
typedef struct gf__cell_reader_ops {
    /* gf_open: the state for l. 0, or a code with l->msg. */
    int (*create)(gf_loader *l, void **self);
    void (*destroy)(void *self);
    /* Lifecycle thread, no loader thread running: a run begins (a seek);
     * nothing is queued. 0, or a code with l->msg. */
    int (*restart)(void *self);
    /* Lifecycle thread, the loop made, not yet run: handles on it. */
    int (*start)(void *self, const gf__reader_hooks *h);
    /* On the loop, which ends: requests dropped, handles closed. */
    void (*close)(void *self);
    /* The loop closed (or never run): what restart and start made. */
    void (*stop)(void *self);
    /* gf-control: cell c of sl (sample set) at pos needs its bytes:
     * outcomes now, or 0 while it waits in the reader. */
    int (*take)(void *self, gf__slot *sl, int c, uint64_t pos, gf__cell_out *out, int max);
    /* gf-control: cell c's decode job ended (page_cache: its gf__done's).
     * True when the cell is the reader's again (read it for real). */
    bool (*decoded)(void *self, gf__slot *sl, int c, uint8_t page_cache);
    /* gf-control: reads that may start now (queued, and room for them). */
    unsigned (*room)(void *self);
    /* gf-control: starts the next queued read into buf (room was > 0).
     * <0: refused, a bug. */
    int (*submit)(void *self, gf__buf *buf);
    /* gf-control: finished reads' outcomes, 0 when none is left; bytes
     * the reads took are added to *bytes. */
    int (*reap)(void *self, gf__cell_out *out, int max, uint64_t *bytes);
    /* gf-control, after a round's cells are assigned: reads ahead. */
    int (*ahead)(void *self, gf__cell_out *out, int max);
    /* This run's reads take the controller's read buffers (the read
     * budget counts them, gf_stats' buffer_bytes shows them). */
    bool (*uses_buffers)(void *self);
    /* The fd the loop polls for completions, or -1. */
    int (*poll_fd)(void *self);
    /* Completions wait that no handle will signal: another round. */
    bool (*has_done)(void *self);
    /* Cells wait for remote bytes (gf_stats' remote_wait_s). */
    bool (*waiting)(void *self);
    /* gf-control: shards this run fetched whole that the shard cache has
     * yet to write: GF_EOF waits for them (loader_next.c). */
    unsigned (*unwritten)(void *self);
    /* Requests, retries and bytes of this run. */
    void (*counts)(void *self, gf__fetch_counts *c);
    /* The shard cache's figures (under mu, from gf_get_stats). */
    void (*cache_stats)(void *self, uint64_t *hits, uint64_t *misses, char *warning,
                        size_t warning_len);
} gf__cell_reader_ops;

extern const gf__cell_reader_ops gf__local_reader;
/* NULL without `remote` (read_remote_none.c). */
extern const gf__cell_reader_ops *const gf__ranged_reader;
extern const gf__cell_reader_ops *const gf__shard_reader;
/* A mix of remote and local sources: the local reader beside the shard
 * or the ranged one (read_mix.c). */
extern const gf__cell_reader_ops gf__mixed_shard_reader, gf__mixed_ranged_reader;

/* Whether s reads remote shards whole (the shard order). */
static inline bool gf__remote_whole_shards(const gf_settings *s)
{
    return s->order == GF_ORDER_SHARDS;
}

/* Cells waiting for a read, oldest first: one entry per cell of the
 * ring at most (a cell is in it once). */
typedef struct gf__cell_queue {
    gf__fifo q;
    uint64_t *cells; /* slot << 32 | cell */
} gf__cell_queue;

static inline int gf__cell_queue_alloc(gf__cell_queue *q, uint32_t cap)
{
    q->cells = gf__fifo_alloc(&q->q, cap, sizeof *q->cells);
    return q->cells ? 0 : GF_ENOMEM;
}

/* first: ahead of the others (a cached job's miss: its batch is older).
 * False when full, a bug. */
static inline bool gf__cell_queue_push(gf__cell_queue *q, uint32_t slot, uint32_t cell,
                                       bool first)
{
    uint32_t i = first ? gf__fifo_push_front(&q->q) : gf__fifo_push(&q->q);
    if (GF__UNLIKELY(i == UINT32_MAX))
        return false;
    q->cells[i] = (uint64_t)slot << 32 | cell;
    return true;
}

/* How a local sample's bytes are read, alike by pread (work.c) and by
 * io_uring (read_local.c). Any thread: the index is read-only. */
typedef struct gf__read_req {
    const char *rel;
    uint64_t off, len;
    gf__read_opts o;
} gf__read_req;

void gf__read_req_of(gf_loader *l, uint64_t sample, gf__read_req *r);

#endif
