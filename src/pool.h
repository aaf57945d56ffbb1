/* The decode pool: its job and completion queues and the worker threads
 * (src/pool.c). The controller pushes jobs and pops completions; workers
 * pop jobs and push completions. Both queues live under the loader's mutex
 * (gf_loader.mu); the pool adds one condition variable, work to pop.
 *
 * There is no "room to push" condition: each queue holds every entry that
 * can exist at once (gf__pool_capacity), so the controller, a libuv loop
 * that must not block, never waits for room. A push that finds a queue
 * full is a bug: it asserts, and in a release build the loader halts. */
#ifndef GF_POOL_H
#define GF_POOL_H

#include "common.h"
#include "decode.h"
#include "reader.h"

#include <assert.h>
#include <pthread.h>
#include <stdbool.h>

struct gf_loader;

/* Free-running head/tail over a power-of-two array (liburing's ring):
 * tail - head is the fill level, index & mask the entry. */
typedef struct gf__fifo {
    uint32_t mask, head, tail;
} gf__fifo;

static inline uint32_t gf__fifo_len(const gf__fifo *f)
{
    return f->tail - f->head;
}

static inline uint32_t gf__fifo_room(const gf__fifo *f)
{
    return f->mask + 1 - gf__fifo_len(f);
}

/* The index to write, or UINT32_MAX when full (the caller's bug). */
static inline uint32_t gf__fifo_push(gf__fifo *f)
{
    assert(gf__fifo_room(f) > 0);
    if (GF__UNLIKELY(gf__fifo_room(f) == 0))
        return UINT32_MAX;
    return f->tail++ & f->mask;
}

static inline uint32_t gf__fifo_pop(gf__fifo *f)
{
    assert(gf__fifo_len(f) > 0);
    return f->head++ & f->mask;
}

/* An array of at least `min` entries for f. NULL: out of memory. */
void *gf__fifo_alloc(gf__fifo *f, uint32_t min, size_t item_size);

enum { JOB_DECODE, JOB_CONVERT };

/* One job for a decode thread; kind says which member holds it. */
typedef struct gf__job {
    uint8_t kind;
    uint32_t slot;
    union {
        struct {           /* JOB_DECODE: read (unless buf) and decode one cell */
            uint8_t *dst;  /* the cell's pixels */
            gf__buf *buf;  /* encoded bytes (io_uring), or NULL: read them here */
            int64_t sample;
            uint64_t key;  /* gf__sample_key: the sample's randomness */
            uint32_t cell;
        } decode;
        struct {           /* JOB_CONVERT: the CPU twin over cells [first, first + count) */
            int first, count;
        } convert;
    };
} gf__job;

/* A finished job, as the controller reads it. */
typedef struct gf__done {
    uint8_t kind;
    uint32_t slot;
    struct {               /* JOB_DECODE only */
        uint32_t cell;
        int err, used;     /* used: GF__USED_*, GF__FLIPPED, GF__WARNED */
        int warn_code;     /* GF__WARNED: the code STRICT would have given */
        char *why;         /* malloc'd reason: errors, and GF__WARNED's */
    } decode;
} gf__done;

typedef struct worker {
    struct gf_loader *l;
    pthread_t thread;
    int id;
    gf__decoder *dec;
    gf__buf buf;
    double read_s, decode_s, convert_s; /* under mu */
    uint64_t bytes;           /* under mu */
    size_t scratch;           /* under mu: read buffer + decoder scratch */
} worker;

/* The workers themselves live in the loader (workers, n_workers,
 * active_threads: autotune grows the active ones), next to their stats. */
typedef struct gf__pool {
    pthread_cond_t work;      /* a job was pushed, a worker activated, or stopping */
    gf__job *jobs;
    gf__fifo job_q;
    gf__done *dones;
    gf__fifo done_q;
} gf__pool;

/* What can be in each queue at once: one decode job per cell of the ring
 * (a cell has at most one read or decode outstanding), and a converting
 * slot, whose cells are all decoded, at most one convert job per cell.
 * Completions likewise. */
static inline uint32_t gf__pool_capacity(int depth, int batch)
{
    return (uint32_t)depth * (uint32_t)batch;
}

/* Allocates the queues and l->threads workers with their decoders (no
 * threads yet). Returns 0 or GF_ENOMEM, with l->msg. */
int gf__pool_init(struct gf_loader *l, uint32_t capacity);
void gf__pool_free(struct gf_loader *l);
/* Empties both queues (frees the reasons of unread completions). */
void gf__pool_reset(struct gf_loader *l);
/* Starts the worker threads. Returns 0, or pthread_create's error with
 * none left running. */
int gf__pool_start(struct gf_loader *l);
/* With l->stopping set and the workers woken: joins them. */
void gf__pool_join(struct gf_loader *l);

/* Controller, with mu held: queues n jobs and wakes workers. Returns 0,
 * or GF_ENOMEM, queueing none, when they do not fit (a bug: asserted). */
int gf__pool_push_locked(struct gf_loader *l, const gf__job *js, int n);

#endif
