/* The decode pool (src/pool.c), self-contained as zstd's POOL: worker
 * threads (gf-decode-N), a job queue and a completion queue. It knows
 * nothing of its user: the user gives it a function that runs a job (no
 * lock held), one that settles a finished job under the lock (and says
 * whether its completion is queued), and a hook told of each completion
 * (the controller's wake). Both queues live under the user's mutex, given
 * to gf__pool_init; the pool adds one condition variable, work to pop.
 *
 * There is no "room to push" condition: each queue holds every entry that
 * can exist at once (gf__pool_capacity), so the controller, a libuv loop
 * that must not block, never waits for room. A push that finds a queue
 * full is a bug: it asserts, and in a release build the user is told
 * (and halts). */
#ifndef GF_POOL_H
#define GF_POOL_H

#include "common.h"
#include "reader.h"

#include <assert.h>
#include <pthread.h>
#include <stdbool.h>

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

/* As gf__fifo_push, at the head: popped next. */
static inline uint32_t gf__fifo_push_front(gf__fifo *f)
{
    assert(gf__fifo_room(f) > 0);
    if (GF__UNLIKELY(gf__fifo_room(f) == 0))
        return UINT32_MAX;
    return --f->head & f->mask;
}

static inline uint32_t gf__fifo_pop(gf__fifo *f)
{
    assert(gf__fifo_len(f) > 0);
    return f->head++ & f->mask;
}

/* An array of at least `min` entries for f. NULL: out of memory. */
void *gf__fifo_alloc(gf__fifo *f, uint32_t min, size_t item_size);

enum { GF__JOB_DECODE, GF__JOB_CONVERT, GF__JOB_MIX };

/* One job for a decode thread; kind says which member holds it. */
typedef struct gf__job {
    uint8_t kind;
    uint32_t slot;
    union {
        struct {           /* GF__JOB_DECODE: read (unless buf) and decode one cell */
            uint8_t *dst;  /* the cell's pixels */
            gf__buf *buf;  /* encoded bytes (io_uring, remote), or NULL: read them here */
            const uint8_t *bytes; /* else these n_bytes, in a remote shard's buffer */
            size_t n_bytes;
            int64_t sample;
            uint64_t key;  /* gf__sample_key: the sample's randomness */
            uint32_t cell;
            bool cached;   /* buf NULL: read only what the page cache holds */
        } decode;
        struct {           /* GF__JOB_CONVERT: the CPU twin over cells [first, first + count) */
            int first, count;
        } convert;
        struct {           /* GF__JOB_MIX: mix (augment.h) over elements [first, first + n)
                              of every sample of a converted batch */
            size_t first, n;
        } mix;
    };
} gf__job;

/* A finished job, as the controller reads it. */
typedef struct gf__done {
    uint8_t kind;
    uint32_t slot;
    struct {               /* GF__JOB_DECODE only */
        uint32_t cell;
        int err, used;     /* used: GF__USED_*, GF__FLIPPED, GF__WARNED */
        uint8_t member;    /* err: 1 + the schema field whose member failed;
                              0 the sample's own (its read, its image) */
        int warn_code;     /* GF__WARNED: the code STRICT would have given */
        char *why;         /* malloc'd reason: errors, and GF__WARNED's */
        uint8_t page_cache; /* a cached job's read: GF__PAGE_CACHE_HIT, or _MISS:
                              nothing read or decoded, io_uring must read it */
    } decode;
} gf__done;

enum { GF__PAGE_CACHE_NONE, GF__PAGE_CACHE_HIT, GF__PAGE_CACHE_MISS };

/* The user's side: arg is passed to each. */
typedef struct gf__pool_user {
    void *arg;
    /* On worker thread `worker`, no lock held: runs j, fills d. */
    void (*run)(void *arg, int worker, const gf__job *j, gf__done *d);
    /* NULL, or as run for the n > 1 jobs a worker took at once. */
    void (*run_batch)(void *arg, int worker, const gf__job *js, int n, gf__done *ds);
    /* Same thread, mu held: the job's bookkeeping. Returns whether d is
     * queued; when not, the user has dropped it (and its reason). */
    bool (*settle)(void *arg, int worker, const gf__job *j, gf__done *d);
    /* Mu held: a completion was queued, or (queued false) the completion
     * queue was full, a bug, and it was dropped. */
    void (*completed)(void *arg, bool queued);
    /* The most jobs a worker takes at once (0: one), run one after
     * another, settled under one lock and told by one `completed`: for
     * jobs of a few microseconds, whose queueing would cost more. */
    int grab;
} gf__pool_user;

enum { GF__POOL_GRAB_MAX = 32 };

typedef struct gf__pool_thread {
    struct gf__pool *p;
    pthread_t thread;
    int id;
} gf__pool_thread;

/* Everything under *mu but the constants set by gf__pool_alloc. */
typedef struct gf__pool {
    pthread_mutex_t *mu;      /* the user's */
    pthread_cond_t work;      /* a job was pushed, a worker activated, or stopping */
    gf__job *jobs;
    gf__fifo job_q;
    gf__done *dones;
    gf__fifo done_q;
    gf__pool_thread *threads;
    int n_threads;
    int active;               /* workers that take jobs; the others park */
    bool stopping;
    gf__pool_user user;
} gf__pool;

/* What can be in each queue at once: one decode job per cell of the ring
 * (a cell has at most one read or decode outstanding), and a converting
 * slot, whose cells are all decoded, at most one convert job per cell.
 * Completions likewise. */
static inline uint32_t gf__pool_capacity(int depth, int batch)
{
    return (uint32_t)depth * (uint32_t)batch;
}

/* The condition variable, on mu (which guards the queues); nothing
 * allocated yet, so gf__pool_free may follow at once. */
void gf__pool_init(gf__pool *p, pthread_mutex_t *mu);
/* The queues, for `threads` workers of which `active` take jobs (no
 * threads yet). Returns 0 or GF_ENOMEM. */
int gf__pool_alloc(gf__pool *p, uint32_t capacity, int threads, int active, gf__pool_user user);
void gf__pool_free(gf__pool *p);
/* No thread running: empties both queues (frees the reasons of unread
 * completions) and clears stopping. */
void gf__pool_reset(gf__pool *p);
/* Starts the worker threads. Returns 0, or pthread_create's error with
 * none left running. */
int gf__pool_start(gf__pool *p);
/* With mu held: the workers end once their job is settled. */
void gf__pool_stop_locked(gf__pool *p);
/* After gf__pool_stop_locked: joins them. */
void gf__pool_join(gf__pool *p);

/* With mu held: queues n jobs and wakes workers. Returns 0, or GF_ENOMEM,
 * queueing none, when they do not fit (a bug: asserted). */
int gf__pool_push_locked(gf__pool *p, const gf__job *js, int n);
/* With mu held: completions queued and not yet popped. */
static inline uint32_t gf__pool_dones_locked(const gf__pool *p)
{
    return gf__fifo_len(&p->done_q);
}

/* The i-th of those, read without mu: workers only append, so entries
 * below a tail read under mu stay put until popped. */
static inline gf__done gf__pool_done(const gf__pool *p, uint32_t i)
{
    return p->dones[(p->done_q.head + i) & p->done_q.mask];
}

/* With mu held: the first n completions are taken. */
static inline void gf__pool_pop_dones_locked(gf__pool *p, uint32_t n)
{
    p->done_q.head += n;
}

/* With mu held: one more worker takes jobs. Returns false when all do. */
bool gf__pool_grow_locked(gf__pool *p);

#endif
