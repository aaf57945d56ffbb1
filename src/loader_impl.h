/*
 * The loader's insides, shared by its stages: a controller thread running
 * a libuv loop (controller.c, over assemble.c, dispatch.c, cursor.c and
 * autotune.c), a pool of decode threads (pool.c, running work.c's jobs),
 * batch slots (ring.c: D to prefetch into, one more per batch the consumer
 * holds), and the lifecycle and public API
 * (loader.c) on top. A stage calls only stages below it; each has its
 * own header.
 *
 * Ownership (who may touch what without the mutex):
 * - The controller owns the cursor, every slot's cells and error lists,
 *   and the cell reader (read queue, io_uring, fetcher, shard buffers).
 *   It finalises and delivers batches strictly in sequence order.
 * - A decode thread owns its decoder and, while it holds a job, the
 *   pixels of that job's cell (or, converting, of its cell range; mixing,
 *   its element range of every sample, and for the range at 0 the slot's
 *   targets); it reports through the completion queue.
 * - The consumer (gf_next/gf_release*) owns a delivery side while HELD.
 * - `mu` guards: both sides' states, the job and completion queues (and
 *   the pool's active count and stop flag), the buffer free list, the
 *   stats counters, head/tail, held, n_slots, and the failure fields. Nobody holds `mu`
 *   across a read, a decode, a CUDA call or a callback.
 *
 * Determinism with bad samples (on_error = skip): batch k is the first B
 * good samples, in sampler order, after batch k-1's content. A hole in the
 * oldest unfinished batch takes the lowest-position good sample of a later
 * batch of the same epoch, or a new sample from the cursor when no later
 * batch holds any. Only the oldest batch is ever filled, so the result
 * does not depend on timing or thread count.
 */
#ifndef GF_LOADER_IMPL_H
#define GF_LOADER_IMPL_H

#include "common.h"

#include "convert.h"
#include "cursor.h"
#include "dataset.h"
#include "augment.h"
#include "blend_order.h"
#include "decode.h"
#include "device.h"
#include "pool.h"
#include "reader.h"
#include "remote_fetch.h"
#include "ring.h"
#include "sampler.h"

#include <pthread.h>
#include <stdbool.h>
#include <uv.h>

/* Completions a cell reader takes from io_uring or the fetcher at once. */
enum { GF__REAP_BATCH = 64 };

struct gf__cell_reader_ops;
struct gf__cell_out;

struct gf_loader {
    gf_settings s;
    char *data_path;
    gf__dataset ds;
    gf__sampler sampler;
    gf__shards shards;           /* order SHARDS: the kept shards (else n 0) */
    gf__shard_epoch shard_epoch; /* its epoch tables: the cursor's (controller) */
    /* data as a mix (ds.n_sources): its order, the cursor's (src NULL
     * otherwise); the sampler then splits each epoch's sequence between
     * the ranks (in spans under order SHARDS). */
    gf__blend_order blend;
    gf__blend_order blend_scan;  /* the same order, the remote shard reader's scan's */
    gf__transform tf;
    gf__augment aug;             /* settings.augment, parsed; tf.augment points here */
    size_t cell_bytes;
    gf__field_layout field_layout[GF__FIELDS_MAX]; /* ds.var_field's (gf__fields_plan) */
    int B, D, threads;
    gf_io io;
    gf__convert cv;
    bool convert;                /* CPU path: batches need the CPU twin */
    gf__device *dev;             /* NULL: the CPU path */
    gf_device device;
    bool device_id_from_env; /* s.device_id is the launcher's local rank */
    char device_note[160];
    int pageable_slots;
    uint64_t pinned_bytes, out_bytes;

    /* Controller-owned. */
    uv_loop_t loop;
    uv_async_t wake;
    uv_poll_t read_poll;         /* the cell reader's fd (io_uring's eventfd) */
    bool read_polling;
    /* The cell reader (cell_reader.h) chosen at gf_open, and its state:
     * the read queue, io_uring or the fetcher, shard buffers. */
    const struct gf__cell_reader_ops *rd;
    void *rd_self;
    struct gf__cell_out *outs;   /* js_cap: a reader's outcomes, finished at once */
    pthread_t controller;
    gf__cursor cur;              /* the next sample no batch has taken */
    /* The caller's order (gf_set_order; idx NULL until one is set): the
     * lifecycle thread's, changed only while no loader thread runs (the
     * controller reads it through cur) and under mu (observers read its
     * seed). */
    gf__order order;
    uint64_t fin;                /* next sequence number to finalise */
    uint64_t xfer;               /* next finalised one to hand to delivery */
    uint32_t *seq_slot;          /* D: batch seq's host slot at seq % D (gf__slot_of) */
    /* io = AUTO with io_uring: the decode threads' reads from the page
     * cache, which hit and which missed (read_local.c). */
    uint64_t ctl_page_cache_hits, ctl_page_cache_misses;
    gf__job *js;                 /* jobs made in one pump round */
    int js_cap;                  /* gf__pool_capacity: one per cell at most */
    uv_timer_t tune_timer;       /* autotune: looks at the last window */
    bool tuning;
    double tune_t, tune_wait, tune_busy;

    /* Shared, under mu. */
    bool halted;                 /* a failed batch or an internal error (any thread) */
    pthread_mutex_t mu;
    pthread_cond_t ready_cv;
    gf__slot *slots;             /* room for max_slots; the array never moves */
    int n_slots;                 /* allocated: D + those gf_next added (written
                                    by the consumer's or lifecycle thread) */
    int max_slots;               /* D + max_held_batches - 1 */
    gf__pool pool;               /* the decode threads and their queues */
    struct gf__worker *workers;  /* each decode thread's decoder and times */
    int n_workers;
    int active_threads;          /* workers that take jobs at first (pool.active grows) */
    gf__budget budget;           /* the read buffers' (its own lock) */
    gf__buf *bufs;
    gf__buf **free_bufs;
    int n_bufs, n_free_bufs;
    uint64_t head, tail;         /* next to deliver, next to assign */
    int active_depth;            /* batches in flight at most (<= D) */
    uint64_t tune_changes;
    double waiting_since;        /* the consumer is inside gf_next since, or 0 */
    int held;                    /* batches the consumer holds */
    bool grow_refused;           /* the consumer's: the last gf__ring_grow failed */
    bool exhausted, stopping, running;
    /* gf-control found no completion and may sleep: the next one queued
     * wakes it (cleared by that worker); while false, it drains again
     * before it sleeps, and completions need no wake-up of their own. */
    bool ctl_may_sleep;
    /* Shards this run fetched that the shard cache has yet to write (the
     * controller's count, each round): GF_EOF waits for them while they
     * are being written, for a while from the last change the consumer
     * saw (eof_unwritten, eof_until; loader_next.c). */
    unsigned unwritten, eof_unwritten;
    struct timespec eof_until;
    atomic_int cancel;           /* raised with stopping: decodes in progress end */
    _Atomic uint64_t index_hash; /* gf_index_hash's cache, 0 until its first call */
    int copies_in_flight;        /* CUDA: callbacks still to run (under mu) */
    int fail_code;               /* the consumer's; sticky until gf_seek */
    int halt_code;               /* the controller's own failure */
    uint64_t samples, batches, errors, errors_by_kind[GF_SAMPLE_ERROR_KINDS];
    uint64_t decoded[GF__DECODERS]; /* samples by decoder (GF__DECODED_*) */
    uint64_t decode_warnings, uring_bytes;
    uint64_t page_cache_reads, page_cache_misses;
    double wait_s, uring_submit_s, t_open;
    /* Controller-owned tallies, added to the shared ones once per round. */
    uint64_t ctl_decoded[GF__DECODERS], ctl_warned, ctl_uring_bytes;
    /* Remote reads (the fetcher's counts, published each round). */
    uint64_t remote_requests, remote_retries, remote_bytes;
    double remote_wait_s;        /* gf_stats' */
    gf__fetch_counts remote_base; /* earlier runs' (a seek starts a fetcher anew) */
    double ctl_submit_s;
    bool ctl_remote_waiting;     /* remote_wait_s is counting since ctl_remote_since */
    double ctl_remote_since;
    size_t ctl_buf_bytes, buf_bytes; /* io_uring buffers: controller's, shared */
    uint64_t next_epoch, next_pos; /* where the next delivered batch starts */
    uint64_t epoch_len;          /* next_epoch's positions, for gf_next and the observers */
    /* data as a mix: each source's samples delivered, and gf_next's waits
     * for batches its sample arrived last in (under mu). */
    uint64_t *src_samples;
    double *src_wait_s;
    char resume_note[80];        /* gf_stats': the last gf_set_state's change of world */
    /* The last epoch that delivered a batch, or the one a seek entered
     * part-way (live_any): an empty batch of a later epoch means a whole
     * epoch delivered nothing, which would repeat forever. */
    bool live_any;
    uint64_t live_epoch;
    gf_sample_error recent[GF_RECENT_ERRORS];
    int n_recent, recent_at;
    gf_sample_error warnings[GF_RECENT_WARNINGS]; /* LENIENT's, a ring */
    int n_warnings, warnings_at;
    char msg[512];
};

/* gf_open, but a mix's samples are the joined table's in index order (the
 * sampler's, as one data set's), every source whole once: verify's. */
int gf__open_joined(gf_loader **out, const gf_settings *s);

/* failure.c: sets l->msg; returns code. With mu held, or where no
 * observer can run (gf_open); _locking takes mu (a lifecycle call while
 * observers may run). */
GF__COLD int gf__fail(gf_loader *l, int code, const char *fmt, ...) GF__PRINTF(3, 4);
GF__COLD int gf__fail_locking(gf_loader *l, int code, const char *fmt, ...) GF__PRINTF(3, 4);
/* Stops the controller making batches with the reason; the first halt
 * wins. _locked: with mu held. */
GF__COLD void gf__halt(gf_loader *l, int code, const char *what);
GF__COLD void gf__halt_locked(gf_loader *l, int code, const char *what);

#endif
