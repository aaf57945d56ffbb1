/*
 * The loader: a controller thread running a libuv loop, a pool of decode
 * threads, and a ring of D batch slots.
 *
 * A slot has two sides. Its host side (pixels, cells) is filled by the
 * decode pool; once finalised it is handed, in sequence order, to its
 * delivery side: on the CPU the same memory (after the CPU twin of the
 * device kernel, when a dtype is asked for), on CUDA the device slot of
 * the same index (copy + kernel queued on the copy stream; the host side
 * is free again when the copy has run, see device.c).
 *
 * Ownership (who may touch what without the mutex):
 * - The controller owns the cursor, every slot's cells and error lists,
 *   the read queue and the io_uring reader. It finalises and delivers
 *   batches strictly in sequence order.
 * - A decode thread owns its decoder and, while it holds a job, the
 *   pixels of that job's cell (or, converting, of its cell range); it
 *   reports through the completion queue.
 * - The consumer (gf_next/gf_release*) owns a delivery side while HELD.
 * - `mu` guards: both sides' states, the job and completion queues, the
 *   buffer free list, the stats counters, head/tail, and the failure
 *   fields. Nobody holds `mu` across a read, a decode, a CUDA call or a
 *   callback.
 *
 * Determinism with bad samples (on_error = skip): batch k is the first B
 * good samples, in sampler order, after batch k-1's content. A hole in the
 * oldest unfinished batch takes the lowest-position good sample of a later
 * batch of the same epoch, or a new sample from the cursor when no later
 * batch holds any. Only the oldest batch is ever filled, so the result
 * does not depend on timing or thread count.
 */
#include "common.h"

#include "config.h"
#include "convert.h"
#include "dataset.h"
#include "decode.h"
#include "device.h"
#include "reader.h"
#include "sampler.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

enum { CELL_PENDING, CELL_OK, CELL_BAD, CELL_MOVED };
/* A slot's host side: its pixels, filled, then handed on (CPU: until the
 * consumer releases the batch; CUDA: until the copy has run). */
enum { HOST_FREE, HOST_FILLING, HOST_FINAL, HOST_OUT };
/* A slot's delivery side: the batch the consumer sees (on CUDA, the
 * device slot of the same index). */
enum { OUT_FREE, OUT_CONVERTING, OUT_READY, OUT_EMPTY, OUT_HELD };
enum { JOB_DECODE, JOB_CONVERT };

typedef struct cell {
    uint64_t pos;
    uint8_t state;
} cell;

typedef struct sample_error {
    uint64_t pos;
    int64_t sample;
    int code;
    char *why;
} sample_error;

typedef struct slot {
    struct gf_loader *l;
    gf_batch batch;      /* the consumer's view */
    uint8_t *pixels;
    int32_t *labels;
    int64_t *indices;
    uint8_t *flips;      /* per cell: to be mirrored by the device kernel */
    void *out;           /* CPU: the converted batch, or NULL (data = pixels) */
    int32_t *out_labels; /* CUDA: the delivered batch's own copies, since */
    int64_t *out_indices; /* the host slot is refilled while it is held */
    int pinned;
    cell *cells;
    int n_cells;         /* cells in use: B, or fewer at the end of an epoch */
    int pending;         /* cells with a read or decode outstanding */
    int converting;      /* convert jobs outstanding */
    int count, status;   /* once finalised */
    bool empty;
    uint64_t seq, epoch, end_pos;
    sample_error *errs;  /* bad samples met by this batch (rare) */
    int n_errs, cap_errs;
    int host;            /* HOST_*, under mu */
    int out_state;       /* OUT_*, under mu */
    uint64_t out_seq;    /* the batch the delivery side holds */
} slot;

typedef struct job {
    uint8_t *dst;
    gf__buf *buf;        /* encoded bytes (io_uring), or NULL: read it */
    int64_t sample;      /* JOB_CONVERT: the first cell */
    uint64_t key;        /* JOB_CONVERT: the cell count */
    uint32_t slot, cell;
    uint8_t kind;
} job;

typedef struct done {
    uint32_t slot, cell;
    int err, used;
    uint8_t kind;
    char *why;           /* malloc'd reason, errors only */
} done;

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

typedef struct queue {       /* power-of-two ring of fixed-size items */
    void *items;
    uint32_t mask, head, tail;
} queue;

struct gf_loader {
    gf_settings s;
    char *data_path;
    gf__dataset ds;
    gf__sampler sampler;
    gf__transform tf;
    size_t cell_bytes;
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
    uv_poll_t uring_poll;
    bool uring_polling;
    gf__uring *uring;
    pthread_t controller;
    uint64_t cur_epoch, cur_pos; /* cursor: the next unassigned sample */
    gf__perm cur_perm;
    uint64_t perm_epoch;
    bool perm_valid;
    uint64_t fin;                /* next sequence number to finalise */
    uint64_t xfer;               /* next finalised one to hand to delivery */
    queue reads;                 /* (slot, cell) waiting for an io_uring slot */
    gf__read_done *reaped;
    job *js;                     /* jobs made in one pump round: <= D * B */
    bool halted;                 /* a failed batch or an internal error */
    uv_timer_t tune_timer;       /* autotune: looks at the last window */
    bool tuning;
    double tune_t, tune_wait, tune_busy;

    /* Shared, under mu. */
    pthread_mutex_t mu;
    pthread_cond_t job_cv, ready_cv;
    slot *slots;
    worker *workers;
    int n_workers;
    queue jobs, dones;
    gf__buf *bufs;
    gf__buf **free_bufs;
    int n_bufs, n_free_bufs;
    uint64_t head, tail;         /* next to deliver, next to assign */
    int active_threads;          /* workers that take jobs (autotune grows it) */
    int active_depth;            /* batches in flight at most (<= D) */
    uint64_t tune_changes;
    double waiting_since;        /* the consumer is inside gf_next since, or 0 */
    int held;
    bool exhausted, stopping, running;
    int copies_in_flight;        /* CUDA: callbacks still to run (under mu) */
    int fail_code;               /* the consumer's; sticky until gf_seek */
    int halt_code;               /* the controller's own failure */
    uint64_t samples, batches, errors, errors_by_kind[GF_SAMPLE_ERROR_KINDS];
    uint64_t decoded_turbo, decoded_stb, uring_bytes;
    double wait_s, uring_submit_s, t_open;
    /* Controller-owned tallies, added to the shared ones once per round. */
    uint64_t ctl_turbo, ctl_stb, ctl_uring_bytes;
    double ctl_submit_s;
    size_t ctl_buf_bytes, buf_bytes; /* io_uring buffers: controller's, shared */
    uint64_t next_epoch, next_pos; /* where the next delivered batch starts */
    /* The last epoch that delivered a batch, or the one a seek entered
     * part-way (live_any): an empty batch of a later epoch means a whole
     * epoch delivered nothing, which would repeat forever. */
    bool live_any;
    uint64_t live_epoch;
    gf_sample_error recent[GF_RECENT_ERRORS];
    int n_recent, recent_at;
    char msg[512];
};

/* ---------------------------------------------------------------- util */

static GF__COLD int fail(gf_loader *l, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->msg, sizeof l->msg, fmt, ap);
    va_end(ap);
    return code;
}

#define validate_or_ret(l, cond)                                               \
    do {                                                                       \
        if (!(cond))                                                           \
            return fail(l, GF_EINVAL, "invalid settings: %s", #cond);          \
    } while (0)

static int queue_init(queue *q, uint32_t min_items, size_t item_size)
{
    uint32_t n = 1;
    while (n < min_items)
        n <<= 1;
    q->items = calloc(n, item_size);
    q->mask = n - 1;
    q->head = q->tail = 0;
    return q->items ? 0 : GF_ENOMEM;
}

static inline uint32_t queue_len(const queue *q)
{
    return q->tail - q->head;
}

static inline slot *slot_of(gf_loader *l, uint64_t seq)
{
    return &l->slots[seq % (uint64_t)l->D];
}

static inline uint8_t *cell_pixels(gf_loader *l, slot *sl, int c)
{
    return sl->pixels + (size_t)c * l->cell_bytes;
}

static void wake_controller(gf_loader *l)
{
    uv_async_send(&l->wake);
}

/* ---------------------------------------------------------- decode pool */

static void *worker_main(void *arg)
{
    worker *w = arg;
    gf_loader *l = w->l;
    char name[16];
    snprintf(name, sizeof name, "gf-decode-%d", w->id);
    pthread_setname_np(pthread_self(), name);

    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->stopping && (queue_len(&l->jobs) == 0 || w->id >= l->active_threads))
            pthread_cond_wait(&l->job_cv, &l->mu);
        if (l->stopping)
            break;
        job j = ((job *)l->jobs.items)[l->jobs.head++ & l->jobs.mask];
        pthread_mutex_unlock(&l->mu);

        if (j.kind == JOB_CONVERT) {
            slot *sl = &l->slots[j.slot];
            double t0 = gf__now();
            gf__range_push("gf convert");
            gf__convert_cpu(&l->cv, sl->pixels, sl->out, sl->flips, (int)j.sample, (int)j.key);
            gf__range_pop();
            double t1 = gf__now();
            pthread_mutex_lock(&l->mu);
            w->convert_s += t1 - t0;
            done *d = &((done *)l->dones.items)[l->dones.tail++ & l->dones.mask];
            *d = (done){.slot = j.slot, .kind = JOB_CONVERT};
            wake_controller(l);
            continue;
        }

        char why[192] = "";
        int err = 0, used = 0;
        double t0 = gf__now(), t1 = t0;
        gf__buf *in = j.buf;
        if (!in) {
            in = &w->buf;
            gf__range_push("gf read");
            const char *rel;
            uint64_t off, len;
            gf__dataset_extent(&l->ds, (uint64_t)j.sample, &rel, &off, &len);
            err = gf__read_range(l->ds.root_fd, rel, off, len, in, l->s.max_file_bytes, why,
                                 sizeof why);
            gf__range_pop();
            t1 = gf__now();
        }
        if (!err) {
            gf__range_push("gf decode");
            err = gf__decode(w->dec, in->data, in->len, &l->tf, j.key, j.dst, &used, why,
                             sizeof why);
            gf__range_pop();
        }
        double t2 = gf__now();
        char *why_copy = err ? strdup(why[0] ? why : gf_strerror(err)) : NULL;

        size_t scratch = w->buf.cap + gf__decoder_scratch_bytes(w->dec);
        pthread_mutex_lock(&l->mu);
        w->scratch = scratch;
        w->read_s += t1 - t0;
        w->decode_s += t2 - t1;
        if (!j.buf)
            w->bytes += in->len;
        else
            l->free_bufs[l->n_free_bufs++] = j.buf;
        done *d = &((done *)l->dones.items)[l->dones.tail++ & l->dones.mask];
        *d = (done){.slot = j.slot, .cell = j.cell, .err = err, .used = used, .why = why_copy,
                    .kind = JOB_DECODE};
        wake_controller(l);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* ----------------------------------------------------------- controller */

static uint64_t sample_at(gf_loader *l, uint64_t epoch, uint64_t pos)
{
    if (!l->perm_valid || l->perm_epoch != epoch) {
        gf__perm_init(&l->cur_perm, &l->sampler, epoch);
        l->perm_epoch = epoch;
        l->perm_valid = true;
    }
    return gf__sampler_at(&l->sampler, &l->cur_perm, pos);
}

static bool epochs_left(const gf_loader *l, uint64_t epoch)
{
    return l->s.epochs == 0 || epoch < l->s.epochs;
}

/* Moves the cursor past an exhausted epoch. */
static void normalise_cursor(gf_loader *l)
{
    if (l->cur_pos >= l->sampler.len) {
        l->cur_epoch++;
        l->cur_pos = 0;
    }
}

/* Starts work on one cell: an io_uring read, or straight to a decoder. */
static void dispatch_cell(gf_loader *l, job *batch_jobs, int *n_jobs, slot *sl, int c,
                          uint64_t pos)
{
    uint64_t sample = sample_at(l, sl->epoch, pos);
    sl->cells[c] = (cell){.pos = pos, .state = CELL_PENDING};
    sl->indices[c] = (int64_t)sample;
    sl->labels[c] = l->ds.labels[sample];
    sl->flips[c] = 0;
    sl->pending++;
    if (pos + 1 > sl->end_pos)
        sl->end_pos = pos + 1;
    uint32_t sidx = (uint32_t)(sl - l->slots);
    if (l->uring) {
        uint64_t *r = &((uint64_t *)l->reads.items)[l->reads.tail++ & l->reads.mask];
        *r = (uint64_t)sidx << 32 | (uint32_t)c;
        return;
    }
    batch_jobs[(*n_jobs)++] = (job){.dst = cell_pixels(l, sl, c),
                                    .sample = (int64_t)sample,
                                    .key = gf__sample_key(l->s.seed, sl->epoch, sample),
                                    .slot = sidx,
                                    .cell = (uint32_t)c};
}

static void push_jobs(gf_loader *l, const job *js, int n)
{
    if (n == 0)
        return;
    pthread_mutex_lock(&l->mu);
    for (int i = 0; i < n; i++)
        ((job *)l->jobs.items)[l->jobs.tail++ & l->jobs.mask] = js[i];
    /* A signal could wake a parked (inactive) worker and be lost. */
    if (n == 1 && l->active_threads == l->n_workers)
        pthread_cond_signal(&l->job_cv);
    else
        pthread_cond_broadcast(&l->job_cv);
    pthread_mutex_unlock(&l->mu);
}

static int record_error(slot *sl, int c, int code, char *why)
{
    if (sl->n_errs == sl->cap_errs) {
        int cap = sl->cap_errs ? sl->cap_errs * 2 : 4;
        sample_error *e = realloc(sl->errs, (size_t)cap * sizeof *e);
        if (!e) {
            free(why);
            return GF_ENOMEM;
        }
        sl->errs = e;
        sl->cap_errs = cap;
    }
    sl->errs[sl->n_errs++] = (sample_error){
        .pos = sl->cells[c].pos, .sample = sl->indices[c], .code = code, .why = why};
    sl->cells[c].state = CELL_BAD;
    return 0;
}

/* The first halt wins; with mu held. */
static GF__COLD void halt_locked(gf_loader *l, int code, const char *what)
{
    if (!l->halted) {
        l->halted = true;
        l->halt_code = fail(l, code, "%s", what);
    }
    pthread_cond_broadcast(&l->ready_cv);
}

static GF__COLD void halt(gf_loader *l, int code, const char *what)
{
    pthread_mutex_lock(&l->mu);
    halt_locked(l, code, what);
    pthread_mutex_unlock(&l->mu);
}

static void cell_finished(gf_loader *l, slot *sl, int c, int err, char *why)
{
    sl->pending--;
    if (!err) {
        sl->cells[c].state = CELL_OK;
        return;
    }
    if (!why)
        why = strdup(gf_strerror(err));
    if (record_error(sl, c, err, why) < 0)
        halt(l, GF_ENOMEM, "out of memory recording a bad sample");
}

/* The good cell of a later batch with the lowest position, or -1 with
 * *wait set when a lower position is still being decoded. */
static int find_donor(gf_loader *l, uint64_t epoch, slot **donor_slot, bool *wait)
{
    for (uint64_t seq = l->fin + 1; seq < l->tail; seq++) {
        slot *d = slot_of(l, seq);
        if (d->epoch != epoch)
            break;
        int best = -1;
        for (int c = 0; c < d->n_cells; c++) {
            uint8_t st = d->cells[c].state;
            if ((st == CELL_OK || st == CELL_PENDING) &&
                (best < 0 || d->cells[c].pos < d->cells[best].pos))
                best = c;
        }
        if (best < 0)
            continue;
        if (d->cells[best].state == CELL_PENDING) {
            *wait = true;
            return -1;
        }
        *donor_slot = d;
        return best;
    }
    return -1;
}

static void move_cell(gf_loader *l, slot *from, int fc, slot *to, int tc)
{
    uint64_t pos = from->cells[fc].pos;
    memcpy(cell_pixels(l, to, tc), cell_pixels(l, from, fc), l->cell_bytes);
    to->cells[tc] = (cell){.pos = pos, .state = CELL_OK};
    if (pos + 1 > to->end_pos)
        to->end_pos = pos + 1;
    to->labels[tc] = from->labels[fc];
    to->indices[tc] = from->indices[fc];
    to->flips[tc] = from->flips[fc];
    from->cells[fc].state = CELL_MOVED;
}

static int cmp_err(const void *a, const void *b)
{
    uint64_t x = ((const sample_error *)a)->pos, y = ((const sample_error *)b)->pos;
    return x < y ? -1 : x > y;
}

/* Reports a finished batch's bad samples, in sampler order. */
static void report_errors(gf_loader *l, slot *sl)
{
    if (sl->n_errs == 0)
        return;
    qsort(sl->errs, (size_t)sl->n_errs, sizeof *sl->errs, cmp_err);
    for (int i = 0; i < sl->n_errs; i++) {
        sample_error *e = &sl->errs[i];
        const char *path = gf__dataset_path(&l->ds, (uint64_t)e->sample);
        if (l->s.on_sample_error)
            l->s.on_sample_error(l->s.on_sample_error_user, e->sample, path, e->code, e->why);
        pthread_mutex_lock(&l->mu);
        l->errors++;
        int kind = gf_sample_error_kind(e->code);
        if (kind >= 0)
            l->errors_by_kind[kind]++;
        gf_sample_error *r = &l->recent[l->recent_at];
        l->recent_at = (l->recent_at + 1) % GF_RECENT_ERRORS;
        if (l->n_recent < GF_RECENT_ERRORS)
            l->n_recent++;
        r->sample = e->sample;
        r->code = e->code;
        snprintf(r->path, sizeof r->path, "%s", path);
        snprintf(r->reason, sizeof r->reason, "%s", e->why);
        pthread_mutex_unlock(&l->mu);
    }
}

static void clear_errors(slot *sl)
{
    for (int i = 0; i < sl->n_errs; i++)
        free(sl->errs[i].why);
    sl->n_errs = 0;
}

/* Packs good cells to the front, keeping their order (short final batch). */
static int compact(gf_loader *l, slot *sl)
{
    int n = 0;
    for (int c = 0; c < sl->n_cells; c++) {
        if (sl->cells[c].state != CELL_OK)
            continue;
        if (c != n)
            move_cell(l, sl, c, sl, n);
        n++;
    }
    return n;
}

typedef struct pos_cell {
    uint64_t pos;
    int cell;
} pos_cell;

static int cmp_pos_cell(const void *a, const void *b)
{
    uint64_t x = ((const pos_cell *)a)->pos, y = ((const pos_cell *)b)->pos;
    return x < y ? -1 : x > y;
}

/* Puts the first n cells in sampler order, so a batch that was filled
 * does not depend on where its holes were (ring depth, resume point).
 * Cheap unless the batch was filled after a bad sample. */
static int sort_cells(gf_loader *l, slot *sl, int n)
{
    bool sorted = true;
    for (int c = 1; c < n && sorted; c++)
        sorted = sl->cells[c - 1].pos < sl->cells[c].pos;
    if (sorted)
        return 0;
    pos_cell *order = malloc((size_t)n * sizeof *order);
    uint8_t *tmp = malloc(l->cell_bytes ? l->cell_bytes : 1);
    if (!order || !tmp) {
        free(order);
        free(tmp);
        return GF_ENOMEM;
    }
    for (int c = 0; c < n; c++)
        order[c] = (pos_cell){sl->cells[c].pos, c};
    qsort(order, (size_t)n, sizeof *order, cmp_pos_cell);
    /* Destination i takes source order[i].cell: follow each cycle once. */
    for (int i = 0; i < n; i++) {
        if (order[i].cell < 0 || order[i].cell == i)
            continue;
        cell c0 = sl->cells[i];
        int32_t lab0 = sl->labels[i];
        int64_t idx0 = sl->indices[i];
        uint8_t flip0 = sl->flips[i];
        memcpy(tmp, cell_pixels(l, sl, i), l->cell_bytes);
        int dst = i;
        for (;;) {
            int src = order[dst].cell;
            order[dst].cell = -1;
            if (src == i) {
                memcpy(cell_pixels(l, sl, dst), tmp, l->cell_bytes);
                sl->cells[dst] = c0;
                sl->labels[dst] = lab0;
                sl->indices[dst] = idx0;
                sl->flips[dst] = flip0;
                break;
            }
            memcpy(cell_pixels(l, sl, dst), cell_pixels(l, sl, src), l->cell_bytes);
            sl->cells[dst] = sl->cells[src];
            sl->labels[dst] = sl->labels[src];
            sl->indices[dst] = sl->indices[src];
            sl->flips[dst] = sl->flips[src];
            dst = src;
        }
    }
    free(order);
    free(tmp);
    return 0;
}

/* Tries to finish the oldest unfinished batch. Returns true when it did,
 * so the caller can go on to the next one. */
static bool finalise_oldest(gf_loader *l, job *js, int *n_jobs)
{
    if (l->fin == l->tail || l->halted)
        return false;
    slot *sl = slot_of(l, l->fin);
    if (sl->pending > 0)
        return false;

    bool empty = false;
    int status = 0;
    int count = 0;
    if (l->s.on_error == GF_ON_ERROR_FAIL && sl->n_errs > 0) {
        qsort(sl->errs, (size_t)sl->n_errs, sizeof *sl->errs, cmp_err);
        sample_error *e = &sl->errs[0];
        status = e->code;
    } else {
        for (int c = 0; c < sl->n_cells; c++) {
            uint8_t st = sl->cells[c].state;
            if (st == CELL_OK)
                continue;
            bool wait = false;
            slot *d = NULL;
            int dc = find_donor(l, sl->epoch, &d, &wait);
            if (wait)
                return false;
            if (dc >= 0) {
                move_cell(l, d, dc, sl, c);
                continue;
            }
            normalise_cursor(l);
            if (l->cur_epoch == sl->epoch && l->cur_pos < l->sampler.len) {
                dispatch_cell(l, js, n_jobs, sl, c, l->cur_pos++);
                continue;
            }
            /* The epoch has no more samples: a short batch, and every
             * position is spent, whichever batch had dispatched the
             * last ones (deeper rings dispatch them to later batches). */
            sl->end_pos = l->sampler.len;
            break;
        }
        if (sl->pending > 0)
            return false;
        count = compact(l, sl);
        if (sort_cells(l, sl, count) < 0) {
            halt(l, GF_ENOMEM, "out of memory ordering a batch");
            return false;
        }
        if (count == 0 || (count < l->B && l->s.drop_last))
            empty = true;
    }
    report_errors(l, sl);

    sl->count = count;
    sl->status = status;
    sl->empty = empty;
    pthread_mutex_lock(&l->mu);
    if (status < 0) {
        /* Nothing after a failed batch is made: its message must stand. */
        sample_error *e = &sl->errs[0];
        fail(l, status, "sample %lld (%s): %s", (long long)e->sample,
             gf__dataset_path(&l->ds, (uint64_t)e->sample), e->why);
        l->halted = true;
    }
    sl->host = HOST_FINAL;
    l->fin++;
    pthread_mutex_unlock(&l->mu);
    clear_errors(sl);
    return status == 0;
}

/* CUDA thread: the copy out of a host slot has run, or the copy stream
 * failed (cuda_error, a cudaError_t); the slot may be refilled. Everything
 * happens under mu and the count of callbacks in flight drops last:
 * stop_pipeline waits for it to reach 0 (a failed stream's synchronize
 * may return before its callbacks have run) and then may free l. While
 * stopping, the controller is gone or going: nothing wakes it. */
static void host_slot_copied(void *arg, int cuda_error)
{
    slot *sl = arg;
    gf_loader *l = sl->l;
    char why[160];
    if (cuda_error)
        snprintf(why, sizeof why,
                 "the CUDA copy stream failed with cudaError_t %d (an earlier kernel or copy "
                 "of this process may have faulted)",
                 cuda_error);
    pthread_mutex_lock(&l->mu);
    sl->host = HOST_FREE;
    if (cuda_error)
        halt_locked(l, GF_ENODEV, why);
    if (!l->stopping)
        wake_controller(l);
    l->copies_in_flight--;
    pthread_cond_broadcast(&l->ready_cv);
    pthread_mutex_unlock(&l->mu);
}

/* Hands finalised batches, in order, to the consumer's side: on the CPU
 * straight away (after the CPU twin when one is asked for), on CUDA once
 * the device slot of the same index is free, by queueing copy + kernel. */
static void deliver(gf_loader *l, job *js, int *n_jobs)
{
    while (l->xfer < l->fin) {
        slot *sl = slot_of(l, l->xfer);
        uint32_t idx = (uint32_t)(sl - l->slots);
        pthread_mutex_lock(&l->mu);
        bool out_free = sl->out_state == OUT_FREE;
        pthread_mutex_unlock(&l->mu);
        if (!out_free)
            return; /* CUDA: the consumer still holds this device slot */

        gf_batch *b = &sl->batch;
        b->count = sl->count;
        b->epoch = sl->epoch;
        b->position = sl->end_pos;
        int out = sl->empty ? OUT_EMPTY : OUT_READY;
        bool copying = false;
        if (!sl->empty && sl->status == 0) {
            if (l->dev) {
                memcpy(sl->out_labels, sl->labels, (size_t)sl->count * sizeof *sl->labels);
                memcpy(sl->out_indices, sl->indices, (size_t)sl->count * sizeof *sl->indices);
                char why[256] = "";
                /* Before the enqueue: its callback may free the host slot
                 * before this thread takes mu again. */
                pthread_mutex_lock(&l->mu);
                l->copies_in_flight++;
                sl->host = HOST_OUT;
                pthread_mutex_unlock(&l->mu);
                if (gf__device_enqueue(l->dev, (int)idx, sl->pixels,
                                       l->s.flip_on_device ? sl->flips : NULL, sl->count,
                                       l->cell_bytes, &l->cv, host_slot_copied, sl, why,
                                       sizeof why) < 0) {
                    char msg[320];
                    snprintf(msg, sizeof msg,
                             "the CUDA device failed: %s (an earlier kernel or copy of this "
                             "process may have faulted)",
                             why);
                    pthread_mutex_lock(&l->mu);
                    l->copies_in_flight--; /* its callback was not queued */
                    halt_locked(l, GF_ENODEV, msg);
                    pthread_mutex_unlock(&l->mu);
                    return;
                }
                copying = true;
            } else if (l->convert) {
                /* Chunks for the pool: about two per thread. */
                int chunks = GF__MIN(sl->count, 2 * l->threads);
                int per = (sl->count + chunks - 1) / chunks;
                sl->converting = 0;
                for (int first = 0; first < sl->count; first += per) {
                    js[(*n_jobs)++] = (job){.kind = JOB_CONVERT,
                                            .slot = idx,
                                            .sample = first,
                                            .key = (uint64_t)GF__MIN(per, sl->count - first)};
                    sl->converting++;
                }
                out = OUT_CONVERTING;
            }
        }
        pthread_mutex_lock(&l->mu);
        sl->out_seq = l->xfer;
        sl->out_state = out;
        /* CUDA: the host slot is free once copied (host_slot_copied), or
         * now if there is nothing to copy; CPU: it is the batch, free when
         * the consumer is done. */
        if (!l->dev)
            sl->host = HOST_OUT;
        else if (!copying)
            sl->host = HOST_FREE;
        l->xfer++;
        pthread_cond_broadcast(&l->ready_cv);
        pthread_mutex_unlock(&l->mu);
    }
}

/* Claims free slots for new batches while the cursor has samples. */
static void assign_batches(gf_loader *l, job *js, int *n_jobs)
{
    for (;;) {
        normalise_cursor(l);
        pthread_mutex_lock(&l->mu);
        slot *sl = slot_of(l, l->tail);
        bool can = !l->halted && !l->stopping && sl->host == HOST_FREE &&
                   l->tail - l->head < (uint64_t)l->active_depth;
        bool more = epochs_left(l, l->cur_epoch);
        if (!more && !l->exhausted) {
            l->exhausted = true;
            pthread_cond_broadcast(&l->ready_cv);
        }
        if (can && more)
            sl->host = HOST_FILLING;
        pthread_mutex_unlock(&l->mu);
        if (!can || !more)
            return;

        sl->seq = l->tail;
        sl->epoch = l->cur_epoch;
        sl->end_pos = 0;
        sl->pending = 0;
        sl->n_cells = (int)GF__MIN((uint64_t)l->B, l->sampler.len - l->cur_pos);
        for (int c = 0; c < sl->n_cells; c++)
            dispatch_cell(l, js, n_jobs, sl, c, l->cur_pos++);
        pthread_mutex_lock(&l->mu);
        l->tail++;
        pthread_mutex_unlock(&l->mu);
    }
}

static void submit_reads(gf_loader *l)
{
    if (!l->uring)
        return;
    double t0 = gf__now();
    while (queue_len(&l->reads) && gf__uring_room(l->uring) > 0) {
        pthread_mutex_lock(&l->mu);
        gf__buf *buf = l->n_free_bufs ? l->free_bufs[--l->n_free_bufs] : NULL;
        pthread_mutex_unlock(&l->mu);
        if (!buf)
            break;
        uint64_t r = ((uint64_t *)l->reads.items)[l->reads.head++ & l->reads.mask];
        slot *sl = &l->slots[r >> 32];
        int c = (int)(uint32_t)r;
        const char *rel;
        uint64_t off, len;
        gf__dataset_extent(&l->ds, (uint64_t)sl->indices[c], &rel, &off, &len);
        gf__uring_submit_range(l->uring, l->ds.root_fd, rel, off, len, buf, r);
    }
    l->ctl_submit_s += gf__now() - t0;
    size_t total = 0; /* only this thread grows the io_uring buffers */
    for (int i = 0; i < l->n_bufs; i++)
        total += l->bufs[i].cap;
    l->ctl_buf_bytes = total;
}

static void reap_reads(gf_loader *l, job *js, int *n_jobs)
{
    if (!l->uring)
        return;
    int n;
    while ((n = gf__uring_reap(l->uring, l->reaped, 64)) > 0) {
        for (int i = 0; i < n; i++) {
            gf__read_done *r = &l->reaped[i];
            slot *sl = &l->slots[r->user >> 32];
            int c = (int)(uint32_t)r->user;
            if (r->err) {
                pthread_mutex_lock(&l->mu);
                l->free_bufs[l->n_free_bufs++] = r->buf;
                pthread_mutex_unlock(&l->mu);
                cell_finished(l, sl, c, r->err, strdup(r->why[0] ? r->why : gf_strerror(r->err)));
                continue;
            }
            l->ctl_uring_bytes += r->buf->len;
            uint64_t sample = (uint64_t)sl->indices[c];
            js[(*n_jobs)++] = (job){.dst = cell_pixels(l, sl, c),
                                    .buf = r->buf,
                                    .sample = (int64_t)sample,
                                    .key = gf__sample_key(l->s.seed, sl->epoch, sample),
                                    .slot = (uint32_t)(sl - l->slots),
                                    .cell = (uint32_t)c};
        }
    }
}

/* One round of everything the controller does; runs on each wake-up. */
static void pump(gf_loader *l)
{
    job *js = l->js;
    for (;;) {
        int n_jobs = 0;
        pthread_mutex_lock(&l->mu);
        uint32_t n_done = queue_len(&l->dones);
        pthread_mutex_unlock(&l->mu);
        for (uint32_t i = 0; i < n_done; i++) {
            /* Workers only append, so entries below the tail we read are stable. */
            done d = ((done *)l->dones.items)[(l->dones.head + i) & l->dones.mask];
            slot *sl = &l->slots[d.slot];
            if (d.kind == JOB_CONVERT) {
                if (--sl->converting == 0) {
                    pthread_mutex_lock(&l->mu);
                    sl->out_state = OUT_READY;
                    pthread_cond_broadcast(&l->ready_cv);
                    pthread_mutex_unlock(&l->mu);
                }
                continue;
            }
            if (!d.err) {
                if (d.used & GF__USED_TURBO)
                    l->ctl_turbo++;
                else
                    l->ctl_stb++;
                sl->flips[d.cell] = (d.used & GF__FLIPPED) != 0;
            }
            cell_finished(l, sl, (int)d.cell, d.err, d.why);
        }
        reap_reads(l, js, &n_jobs);
        /* Published before any batch they count is finalised. */
        pthread_mutex_lock(&l->mu);
        l->dones.head += n_done;
        l->decoded_turbo += l->ctl_turbo;
        l->decoded_stb += l->ctl_stb;
        l->uring_bytes += l->ctl_uring_bytes;
        l->uring_submit_s += l->ctl_submit_s;
        l->buf_bytes = l->ctl_buf_bytes;
        pthread_mutex_unlock(&l->mu);
        l->ctl_turbo = l->ctl_stb = l->ctl_uring_bytes = 0;
        l->ctl_submit_s = 0;

        while (finalise_oldest(l, js, &n_jobs))
            ;
        deliver(l, js, &n_jobs);
        assign_batches(l, js, &n_jobs);
        push_jobs(l, js, n_jobs);
        submit_reads(l);
        if (n_done == 0 && n_jobs == 0)
            break;
    }
}

/* Autotune, every window: when the consumer waited more than 5% of it,
 * add a decode thread if the active ones were busy (input-bound), else a
 * batch of depth (jitter, or reads in flight). It never shrinks: a loader
 * that stopped stalling stays where it got. */
static void on_tune(uv_timer_t *h)
{
    gf_loader *l = h->data;
    double now = gf__now();
    pthread_mutex_lock(&l->mu);
    double wait = l->wait_s + (l->waiting_since > 0 ? now - l->waiting_since : 0);
    double busy = l->uring_submit_s;
    for (int i = 0; i < l->n_workers; i++)
        busy += l->workers[i].read_s + l->workers[i].decode_s + l->workers[i].convert_s;
    double dt = now - l->tune_t;
    double stall = dt > 0 ? (wait - l->tune_wait) / dt : 0;
    double per_thread = dt > 0 ? (busy - l->tune_busy) / (dt * l->active_threads) : 0;
    bool grew = false;
    if (stall > 0.05 && !l->exhausted) {
        if (per_thread > 0.7 && l->active_threads < l->n_workers) {
            l->active_threads++;
            pthread_cond_broadcast(&l->job_cv);
            grew = true;
        } else if (l->active_depth < l->D) {
            l->active_depth++;
            grew = true;
        }
    }
    if (grew)
        l->tune_changes++;
    l->tune_t = now;
    l->tune_wait = wait;
    l->tune_busy = busy;
    pthread_mutex_unlock(&l->mu);
    if (grew)
        pump(l); /* a deeper ring may take a batch now */
}

static void on_wake(uv_async_t *h)
{
    gf_loader *l = h->data;
    pthread_mutex_lock(&l->mu);
    bool stop = l->stopping;
    pthread_mutex_unlock(&l->mu);
    if (stop) {
        uv_close((uv_handle_t *)&l->wake, NULL);
        if (l->uring_polling)
            uv_close((uv_handle_t *)&l->uring_poll, NULL);
        if (l->tuning)
            uv_close((uv_handle_t *)&l->tune_timer, NULL);
        return;
    }
    pump(l);
}

static void on_uring(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    on_wake(&((gf_loader *)h->data)->wake);
}

static void *controller_main(void *arg)
{
    gf_loader *l = arg;
    pthread_setname_np(pthread_self(), "gf-control");
    if (gf__device_bind(l->dev) < 0)
        halt(l, GF_ENODEV, "cannot make the loader's CUDA device current");
    pump(l);
    uv_run(&l->loop, UV_RUN_DEFAULT);
    return NULL;
}

/* ------------------------------------------------------------ lifecycle */

/* Joins every thread and drops in-flight work; slots become FREE. */
static void stop_pipeline(gf_loader *l)
{
    if (!l->running)
        return;
    pthread_mutex_lock(&l->mu);
    l->stopping = true;
    pthread_cond_broadcast(&l->job_cv);
    pthread_cond_broadcast(&l->ready_cv);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < l->n_workers; i++)
        pthread_join(l->workers[i].thread, NULL);
    uv_async_send(&l->wake);
    pthread_join(l->controller, NULL);
    /* After the join: nothing queues a copy any more, and the callbacks of
     * those queued see `stopping` and leave the closed loop alone. Every
     * callback runs, errors included; wait for each, not only the stream. */
    gf__device_sync(l->dev);
    pthread_mutex_lock(&l->mu);
    while (l->copies_in_flight > 0)
        pthread_cond_wait(&l->ready_cv, &l->mu);
    pthread_mutex_unlock(&l->mu);
    uv_loop_close(&l->loop);
    if (l->uring) {
        gf__uring_destroy(l->uring); /* waits for reads still in flight */
        l->uring = NULL;
    }
    for (uint32_t i = l->dones.head; i != l->dones.tail; i++)
        free(((done *)l->dones.items)[i & l->dones.mask].why);
    for (int i = 0; i < l->D; i++) {
        clear_errors(&l->slots[i]);
        l->slots[i].host = HOST_FREE;
        l->slots[i].out_state = OUT_FREE;
    }
    l->running = false;
}

static int start_pipeline(gf_loader *l, uint64_t epoch, uint64_t pos)
{
    l->cur_epoch = epoch;
    l->cur_pos = pos;
    normalise_cursor(l);
    l->next_epoch = l->cur_epoch;
    l->next_pos = l->cur_pos;
    l->live_any = l->cur_pos > 0;
    l->live_epoch = l->cur_epoch;
    l->perm_valid = false;
    l->head = l->tail = l->fin = l->xfer = 0;
    l->held = 0;
    l->exhausted = l->stopping = l->halted = false;
    l->fail_code = l->halt_code = 0;
    l->jobs.head = l->jobs.tail = 0;
    l->dones.head = l->dones.tail = 0;
    l->reads.head = l->reads.tail = 0;
    l->n_free_bufs = l->n_bufs;
    for (int i = 0; i < l->n_bufs; i++)
        l->free_bufs[i] = &l->bufs[i];

    char why[192] = "";
    if (l->io != GF_IO_POSIX) {
        unsigned qd = (unsigned)l->s.queue_depth;
        int rc = gf__uring_create(&l->uring, qd, l->s.max_file_bytes, why, sizeof why);
        if (rc < 0 && l->s.io == GF_IO_URING)
            return fail(l, GF_ENODEV, "io_uring requested but unavailable: %s", why);
        if (rc < 0)
            l->io = GF_IO_POSIX;
        else
            l->io = GF_IO_URING;
    }
    if (uv_loop_init(&l->loop) != 0)
        return fail(l, GF_ENOMEM, "uv_loop_init failed");
    uv_async_init(&l->loop, &l->wake, on_wake);
    l->wake.data = l;
    l->uring_polling = false;
    if (l->uring) {
        uv_poll_init(&l->loop, &l->uring_poll, gf__uring_eventfd(l->uring));
        l->uring_poll.data = l;
        uv_poll_start(&l->uring_poll, UV_READABLE, on_uring);
        l->uring_polling = true;
    }
    l->tuning = l->s.autotune != 0;
    if (l->tuning) {
        uv_timer_init(&l->loop, &l->tune_timer);
        l->tune_timer.data = l;
        l->tune_t = gf__now();
        l->tune_wait = l->wait_s;
        l->tune_busy = 0;
        for (int i = 0; i < l->n_workers; i++)
            l->tune_busy += l->workers[i].read_s + l->workers[i].decode_s + l->workers[i].convert_s;
        l->tune_busy += l->uring_submit_s;
        uv_timer_start(&l->tune_timer, on_tune, 100, 100);
    }

    l->running = true;
    int started = 0;
    for (; started < l->n_workers; started++) {
        worker *w = &l->workers[started];
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
            break;
    }
    int rc = 0;
    if (started < l->n_workers || pthread_create(&l->controller, NULL, controller_main, l) != 0) {
        /* Unwind what did start; the loop is closed without running. */
        pthread_mutex_lock(&l->mu);
        l->stopping = true;
        pthread_cond_broadcast(&l->job_cv);
        pthread_mutex_unlock(&l->mu);
        for (int i = 0; i < started; i++)
            pthread_join(l->workers[i].thread, NULL);
        uv_close((uv_handle_t *)&l->wake, NULL);
        if (l->uring_polling)
            uv_close((uv_handle_t *)&l->uring_poll, NULL);
        if (l->tuning)
            uv_close((uv_handle_t *)&l->tune_timer, NULL);
        uv_run(&l->loop, UV_RUN_DEFAULT);
        uv_loop_close(&l->loop);
        if (l->uring) {
            gf__uring_destroy(l->uring);
            l->uring = NULL;
        }
        l->running = false;
        rc = fail(l, GF_ETHREAD, "could not start a loader thread: %s", strerror(errno));
    }
    return rc;
}

void gf_default_settings(gf_settings *s)
{
    memset(s, 0, sizeof *s);
    s->epochs = 1;
    s->batch_size = 64;
    s->height = s->width = 224;
    s->channels = 3;
    s->shuffle = 1;
    s->max_pixels = 64ull << 20;
    s->max_file_bytes = 256ull << 20;
    s->scale_min = 0.08f;
    s->scale_max = 1.0f;
    s->ratio_min = 3.0f / 4.0f;
    s->ratio_max = 4.0f / 3.0f;
    s->flip_prob = 0.5f;
    s->crop_fraction = 0.875f;
    s->device_id = -1;
    for (int c = 0; c < 4; c++)
        s->std[c] = 1.0f;
}

static int check_settings(gf_loader *l, const gf_settings *s)
{
    validate_or_ret(l, s->data != NULL && s->data[0] != '\0');
    validate_or_ret(l, s->batch_size >= 1 && s->batch_size <= (1 << 16));
    validate_or_ret(l, s->height >= 1 && s->height <= 16384);
    validate_or_ret(l, s->width >= 1 && s->width <= 16384);
    validate_or_ret(l, s->channels == 1 || s->channels == 3 || s->channels == 4);
    validate_or_ret(l, s->threads >= 0 && s->threads <= 1024);
    validate_or_ret(l, s->prefetch_depth >= 0 && s->prefetch_depth <= 1024);
    validate_or_ret(l, s->queue_depth >= 0 && s->queue_depth <= 4096);
    validate_or_ret(l, s->io >= GF_IO_AUTO && s->io <= GF_IO_POSIX);
    validate_or_ret(l, s->decoder >= GF_DECODER_AUTO && s->decoder <= GF_DECODER_TURBO);
    validate_or_ret(l, s->transform == GF_TRANSFORM_TRAIN || s->transform == GF_TRANSFORM_EVAL);
    validate_or_ret(l, s->on_error == GF_ON_ERROR_SKIP || s->on_error == GF_ON_ERROR_FAIL);
    validate_or_ret(l, s->world >= 0 && s->rank >= 0 && (s->world == 0 || s->rank < s->world));
    validate_or_ret(l, s->max_pixels >= 1 && s->max_file_bytes >= 1);
    validate_or_ret(l, s->scale_min > 0 && s->scale_min <= s->scale_max && s->scale_max <= 1);
    validate_or_ret(l, s->ratio_min > 0 && s->ratio_min <= s->ratio_max);
    validate_or_ret(l, s->flip_prob >= 0 && s->flip_prob <= 1);
    validate_or_ret(l, s->crop_fraction > 0 && s->crop_fraction <= 1);
    validate_or_ret(l, s->device >= GF_DEVICE_AUTO && s->device <= GF_DEVICE_CPU);
    validate_or_ret(l, s->device_id >= -1);
    validate_or_ret(l, s->max_threads >= 0 && s->max_threads <= 1024);
    validate_or_ret(l, s->copy_stream_per_slot == 0 || s->copy_stream_per_slot == 1);
    validate_or_ret(l, s->dtype >= GF_DTYPE_UINT8 && s->dtype <= GF_DTYPE_BFLOAT16);
    validate_or_ret(l, s->layout == GF_LAYOUT_NHWC || s->layout == GF_LAYOUT_NCHW);
    for (int c = 0; c < 4; c++) {
        validate_or_ret(l, isfinite(s->mean[c]) && isfinite(s->std[c]));
        validate_or_ret(l, s->std[c] == 0 || s->std[c] >= 1e-3f); /* 0 means 1 */
    }
    validate_or_ret(l, (uint64_t)s->batch_size * (uint64_t)(s->prefetch_depth ? s->prefetch_depth : 4) <
                           (1ull << 30));
    if (s->decoder == GF_DECODER_TURBO && !gf__have_turbo())
        return fail(l, GF_ENODEV, "decoder turbo requested but this build has no libjpeg-turbo");
    if (s->io == GF_IO_URING && !gf__have_uring())
        return fail(l, GF_ENODEV, "io_uring requested but this build has no liburing");
    return 0;
}

static int alloc_ring(gf_loader *l)
{
    size_t B = (size_t)l->B;
    size_t pix = B * l->cell_bytes;
    if (l->cell_bytes && pix / l->cell_bytes != B)
        return fail(l, GF_EINVAL, "batch of %d x %zu bytes overflows", l->B, l->cell_bytes);
    l->slots = calloc((size_t)l->D, sizeof *l->slots);
    if (!l->slots)
        return GF_ENOMEM;
    size_t out = l->convert && !l->dev ? B * gf__convert_sample_bytes(&l->cv) : 0;
    for (int i = 0; i < l->D; i++) {
        slot *sl = &l->slots[i];
        sl->l = l;
        char why[192] = "";
        /* The flips live after the pixels: pinned with them, so their copy
         * to the device cannot block the controller either. */
        sl->pixels = gf__host_alloc(l->dev, pix + B, &sl->pinned, why, sizeof why);
        if (!sl->pixels)
            return fail(l, GF_ENOMEM, "cannot allocate a %zu-byte batch slot", pix + B);
        sl->flips = sl->pixels + pix;
        memset(sl->flips, 0, B);
        if (sl->pinned) {
            l->pinned_bytes += pix + B;
        } else if (l->dev) {
            l->pageable_slots++;
            snprintf(l->device_note, sizeof l->device_note, "%s", why);
        }
        if (out && posix_memalign(&sl->out, 4096, out) != 0)
            return fail(l, GF_ENOMEM, "cannot allocate a %zu-byte converted batch", out);
        sl->labels = calloc(B, sizeof *sl->labels);
        sl->indices = calloc(B, sizeof *sl->indices);
        sl->cells = calloc(B, sizeof *sl->cells);
        if (!sl->labels || !sl->indices || !sl->cells)
            return GF_ENOMEM;
        if (l->dev) {
            sl->out_labels = calloc(B, sizeof *sl->out_labels);
            sl->out_indices = calloc(B, sizeof *sl->out_indices);
            if (!sl->out_labels || !sl->out_indices)
                return GF_ENOMEM;
        }
        gf_batch *b = &sl->batch;
        b->height = l->s.height;
        b->width = l->s.width;
        b->channels = l->s.channels;
        b->dtype = l->cv.dtype;
        b->layout = l->cv.layout;
        b->slot_ = (uint32_t)i;
        if (l->dev) {
            b->device = GF_DEVICE_CUDA;
            b->data = gf__device_out(l->dev, i);
            b->ready_event = gf__device_ready_event(l->dev, i);
            b->labels = sl->out_labels;
            b->indices = sl->out_indices;
        } else {
            b->device = GF_DEVICE_CPU;
            b->pixels = sl->pixels;
            b->data = sl->out ? sl->out : sl->pixels;
            b->labels = sl->labels;
            b->indices = sl->indices;
        }
    }
    l->out_bytes = (uint64_t)out * (uint64_t)l->D;
    return 0;
}

/* A non-negative integer from the first of names that is set, or -1. */
static long env_first(const char *const *names)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (v && *v) {
            char *end;
            long x = strtol(v, &end, 10);
            return *end == '\0' && x >= 0 && x < (1L << 30) ? x : -1;
        }
    }
    return -1;
}

/* Rank, world and local rank from the launcher when the settings leave
 * them to it: torchrun, Open MPI's mpirun, Slurm. */
static int resolve_launcher(gf_loader *l)
{
    static const char *const ranks[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", NULL};
    static const char *const worlds[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS",
                                         NULL};
    static const char *const locals[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                         "SLURM_LOCALID", NULL};
    if (l->s.world == 0) {
        long r = env_first(ranks), w = env_first(worlds);
        if (r >= 0 && w >= 1) {
            if (r >= w)
                return fail(l, GF_EINVAL, "the launcher says rank %ld of a world of %ld", r, w);
            l->s.rank = (int)r;
            l->s.world = (int)w;
        } else {
            l->s.rank = 0;
            l->s.world = 1;
        }
    }
    if (l->s.device_id < 0) {
        long lr = env_first(locals);
        l->s.device_id = lr >= 0 ? (int)lr : 0;
        l->device_id_from_env = lr >= 0;
    }
    return 0;
}

/* CUDA when asked for and present; AUTO falls back to the CPU path and
 * says why in stats. */
static int open_device(gf_loader *l)
{
    l->device = GF_DEVICE_CPU;
    if (l->s.device == GF_DEVICE_CPU)
        return 0;
    size_t B = (size_t)l->B;
    size_t in = l->convert ? B * l->cell_bytes : 0;
    size_t out = B * gf__convert_sample_bytes(&l->cv);
    size_t flips = l->s.flip_on_device ? B : 0;
    char why[256] = "";
    int rc = gf__device_open(&l->dev, &l->s, l->device_id_from_env, l->D, in, out, flips, why,
                             sizeof why);
    if (rc == 0) {
        l->device = GF_DEVICE_CUDA;
        return 0;
    }
    if (rc == GF_ENODEV && l->s.device == GF_DEVICE_AUTO) {
        snprintf(l->device_note, sizeof l->device_note, "CPU path: %s", why);
        return 0;
    }
    return fail(l, rc, "%s", why);
}

int gf_open(gf_loader **out, const gf_settings *s)
{
    if (!out)
        return GF_EINVAL;
    *out = NULL;
    gf_loader *l = calloc(1, sizeof *l);
    if (!l)
        return GF_ENOMEM;
    *out = l;
    l->t_open = gf__now();
    l->ds.root_fd = -1;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->job_cv, NULL);
    pthread_cond_init(&l->ready_cv, NULL);
    if (!s)
        return fail(l, GF_EINVAL, "invalid settings: s != NULL");
    int rc = check_settings(l, s);
    if (rc < 0)
        return rc;

    l->s = *s;
    l->data_path = strdup(s->data);
    if (!l->data_path)
        return GF_ENOMEM;
    l->s.data = l->data_path;
    l->B = s->batch_size;
    l->D = s->prefetch_depth ? s->prefetch_depth : 4;
    l->threads = s->threads ? s->threads : GF__MAX(1, gf__available_cores() - 1);
    if (s->autotune) {
        int cap = s->max_threads ? s->max_threads : GF__MAX(1, gf__available_cores() - 1);
        l->active_threads = s->threads ? GF__MIN(s->threads, cap) : 1;
        l->threads = GF__MAX(cap, l->active_threads);
        l->active_depth = GF__MIN(2, l->D);
    } else {
        l->active_threads = l->threads;
        l->active_depth = l->D;
    }
    l->s.queue_depth = s->queue_depth ? s->queue_depth : 64;
    l->io = s->io;
    l->cell_bytes = (size_t)s->height * (size_t)s->width * (size_t)s->channels;
    gf__transform_from_settings(&l->tf, &l->s);
    gf__convert_init(&l->cv, &l->s);
    l->convert = s->dtype != GF_DTYPE_UINT8 || s->flip_on_device;

    if ((rc = resolve_launcher(l)) < 0)
        return rc;
    char why[384] = "";
    rc = gf__dataset_open(&l->ds, l->data_path, why, sizeof why);
    if (rc < 0)
        return fail(l, rc, "%s", why);
    rc = gf__sampler_init(&l->sampler, l->ds.n, s->seed, s->shuffle, (uint32_t)l->s.rank,
                          (uint32_t)l->s.world, s->drop_last);
    if (rc < 0)
        return fail(l, rc, "%s: %llu samples cannot be split into %d shares", l->data_path,
                    (unsigned long long)l->ds.n, l->s.world);
    if (s->drop_last && l->sampler.len < (uint64_t)l->B)
        return fail(l, GF_EINVAL,
                    "%s: drop_last drops every batch: this rank's share is %llu samples, "
                    "under one batch of %d",
                    l->data_path, (unsigned long long)l->sampler.len, l->B);

    if ((rc = open_device(l)) < 0)
        return rc;
    if ((rc = alloc_ring(l)) < 0)
        return rc == GF_ENOMEM && !l->msg[0] ? fail(l, rc, "out of memory allocating the ring")
                                             : rc;
    uint32_t cells = (uint32_t)(l->D * l->B);
    l->n_bufs = l->s.queue_depth + 2 * l->threads;
    l->bufs = calloc((size_t)l->n_bufs, sizeof *l->bufs);
    l->free_bufs = calloc((size_t)l->n_bufs, sizeof *l->free_bufs);
    l->reaped = calloc(64, sizeof *l->reaped);
    l->js = calloc((size_t)cells + 64, sizeof *l->js);
    l->workers = calloc((size_t)l->threads, sizeof *l->workers);
    if (!l->bufs || !l->free_bufs || !l->reaped || !l->js || !l->workers ||
        queue_init(&l->jobs, cells, sizeof(job)) < 0 ||
        queue_init(&l->dones, cells, sizeof(done)) < 0 ||
        queue_init(&l->reads, cells, sizeof(uint64_t)) < 0)
        return fail(l, GF_ENOMEM, "out of memory allocating queues");
    for (int i = 0; i < l->threads; i++) {
        worker *w = &l->workers[i];
        w->l = l;
        w->id = i;
        if (gf__decoder_create(&w->dec) < 0)
            return fail(l, GF_ENOMEM, "out of memory creating a decoder");
        l->n_workers++;
    }
    gf__range_init();
    return start_pipeline(l, 0, 0);
}

/* Under mu: the delivery side is free again; on the CPU it is the host
 * slot too. */
static void free_out(gf_loader *l, slot *sl)
{
    sl->out_state = OUT_FREE;
    if (!l->dev)
        sl->host = HOST_FREE;
}

/* A whole epoch gave no batch: every sample failed (on_error = skip) or a
 * short last batch was dropped. Under mu. */
static GF__COLD int no_sample_in_epoch(gf_loader *l, uint64_t epoch)
{
    if (l->n_recent == 0)
        return fail(l, GF_EDATASET, "epoch %llu delivered no batch: its %llu samples are "
                    "fewer than a batch of %d, and drop_last drops them",
                    (unsigned long long)epoch, (unsigned long long)l->sampler.len, l->B);
    const gf_sample_error *e =
        &l->recent[(l->recent_at - 1 + GF_RECENT_ERRORS) % GF_RECENT_ERRORS];
    return fail(l, GF_EDATASET, "epoch %llu delivered no batch: none of its %llu samples "
                "could be used (%llu sample errors so far; the last: %s: %s)",
                (unsigned long long)epoch, (unsigned long long)l->sampler.len,
                (unsigned long long)l->errors, e->path, e->reason);
}

int gf_next(gf_loader *l, gf_batch **out)
{
    if (!l || !out)
        return GF_EINVAL;
    *out = NULL;
    double t0 = gf__now();
    int rc = 0;
    pthread_mutex_lock(&l->mu);
    l->waiting_since = t0;
    for (;;) {
        if (l->fail_code) {
            rc = l->fail_code;
            break;
        }
        if (!l->running) {
            rc = GF_EINVAL;
            break;
        }
        slot *sl = slot_of(l, l->head);
        bool here = sl->out_seq == l->head &&
                    (sl->out_state == OUT_READY || sl->out_state == OUT_EMPTY);
        if (here) {
            /* The host side's status is still this batch's: the slot
             * is not refilled before head moves past it. */
            if (sl->out_state == OUT_EMPTY || sl->status < 0) {
                rc = sl->status;
                if (rc == 0 && (!l->live_any || sl->epoch > l->live_epoch))
                    rc = no_sample_in_epoch(l, sl->epoch);
                free_out(l, sl);
                l->head++;
                wake_controller(l);
                if (rc < 0) {
                    l->fail_code = rc;
                    break;
                }
                continue;
            }
            sl->out_state = OUT_HELD;
            l->held++;
            l->head++;
            l->samples += (uint64_t)sl->batch.count;
            l->batches++;
            l->live_any = true;
            l->live_epoch = sl->epoch;
            l->next_epoch = sl->epoch;
            l->next_pos = sl->end_pos;
            if (l->next_pos >= l->sampler.len) {
                l->next_epoch++;
                l->next_pos = 0;
            }
            *out = &sl->batch;
            break;
        }
        if (l->halt_code) {
            rc = l->fail_code = l->halt_code;
            break;
        }
        if (l->exhausted && l->head == l->tail) {
            rc = GF_EOF;
            break;
        }
        /* The next batch needs the slot of one the caller still holds. */
        if (sl->out_state == OUT_HELD) {
            rc = fail(l, GF_EBUSY, "batch slot %d is still held: release it first",
                      (int)(l->head % (uint64_t)l->D));
            break;
        }
        pthread_cond_wait(&l->ready_cv, &l->mu);
    }
    l->wait_s += gf__now() - t0;
    l->waiting_since = 0;
    pthread_mutex_unlock(&l->mu);
    return rc;
}

int gf_release_stream(gf_loader *l, gf_batch *b, void *stream)
{
    if (!l || !b || b->slot_ >= (uint32_t)l->D || &l->slots[b->slot_].batch != b)
        return GF_EINVAL;
    slot *sl = &l->slots[b->slot_];
    pthread_mutex_lock(&l->mu);
    bool held = sl->out_state == OUT_HELD;
    pthread_mutex_unlock(&l->mu);
    if (!held)
        return GF_EINVAL;
    /* Only the consumer moves a held slot on, so the state cannot change
     * while the event is recorded outside the lock. */
    char why[256];
    int rc = l->dev ? gf__device_release(l->dev, (int)b->slot_, stream, why, sizeof why) : 0;
    if (rc == GF_EINVAL) { /* a bad stream: still held, release it again */
        pthread_mutex_lock(&l->mu);
        fail(l, GF_EINVAL, "gf_release_stream: %s", why);
        pthread_mutex_unlock(&l->mu);
        return GF_EINVAL;
    }
    if (rc < 0) {
        /* The device is lost (a fault): the slot cannot be reused safely,
         * and gf_next says why, not "held". */
        char msg[320];
        snprintf(msg, sizeof msg, "gf_release_stream: the CUDA device failed: %s", why);
        halt(l, GF_ENODEV, msg);
        return GF_ENODEV;
    }
    pthread_mutex_lock(&l->mu);
    free_out(l, sl);
    l->held--;
    pthread_mutex_unlock(&l->mu);
    wake_controller(l);
    return 0;
}

int gf_release(gf_loader *l, gf_batch *b)
{
    return gf_release_stream(l, b, NULL);
}

int gf_batch_wait(const gf_batch *b, void *stream)
{
    if (!b)
        return GF_EINVAL;
    return b->device == GF_DEVICE_CUDA ? gf__device_wait(b->ready_event, stream) : 0;
}

int gf_seek(gf_loader *l, uint64_t epoch, uint64_t position)
{
    if (!l)
        return GF_EINVAL;
    if (!l->slots)
        return GF_EINVAL;
    /* Under mu: the controller may be writing the message too. */
    int rc = 0;
    pthread_mutex_lock(&l->mu);
    if (l->held)
        rc = fail(l, GF_EBUSY, "gf_seek: %d batches are still held", l->held);
    else if (position > l->sampler.len)
        rc = fail(l, GF_EINVAL, "gf_seek: position %llu is past the epoch's %llu samples",
                  (unsigned long long)position, (unsigned long long)l->sampler.len);
    pthread_mutex_unlock(&l->mu);
    if (rc < 0)
        return rc;
    stop_pipeline(l);
    l->msg[0] = '\0';
    return start_pipeline(l, epoch, position);
}

int gf_get_stats(gf_loader *l, gf_stats *st)
{
    if (!l || !st)
        return GF_EINVAL;
    memset(st, 0, sizeof *st);
    pthread_mutex_lock(&l->mu);
    st->samples = l->samples;
    st->batches = l->batches;
    st->epoch = l->next_epoch;
    st->position = l->next_pos;
    st->elapsed_s = gf__now() - l->t_open;
    st->wait_s = l->wait_s;
    st->read_busy_s = l->uring_submit_s;
    st->bytes_read = l->uring_bytes;
    st->buffer_bytes = l->buf_bytes;
    for (int i = 0; i < l->n_workers; i++) {
        worker *w = &l->workers[i];
        st->read_busy_s += w->read_s;
        st->decode_busy_s += w->decode_s;
        st->convert_busy_s += w->convert_s;
        st->bytes_read += w->bytes;
        st->buffer_bytes += w->scratch;
    }
    st->errors = l->errors;
    memcpy(st->errors_by_kind, l->errors_by_kind, sizeof l->errors_by_kind);
    for (int i = 0; i < l->n_recent; i++)
        st->recent[i] = l->recent[(l->recent_at - 1 - i + 2 * GF_RECENT_ERRORS) % GF_RECENT_ERRORS];
    st->n_recent = l->n_recent;
    st->reader = l->io;
    st->decoded_turbo = l->decoded_turbo;
    st->decoded_stb = l->decoded_stb;
    st->threads = l->active_threads;
    st->prefetch_depth = l->active_depth;
    st->autotune = l->s.autotune != 0;
    st->autotune_changes = l->tune_changes;
    st->queue_depth = l->s.queue_depth;
    st->batch_size = l->B;
    st->ring_bytes = (uint64_t)l->D * ((uint64_t)l->B * (l->cell_bytes + sizeof(int32_t) +
                                                        sizeof(int64_t) + sizeof(cell)));
    st->ring_bytes += l->out_bytes;
    st->dataset_samples = l->ds.n;
    st->epoch_samples = l->sampler.len;
    st->classes = l->ds.n_classes;
    st->device = l->device;
    st->device_id = gf__device_id(l->dev);
    snprintf(st->device_note, sizeof st->device_note, "%s", l->device_note);
    st->pinned_bytes = l->pinned_bytes;
    st->pageable_slots = l->pageable_slots;
    st->device_bytes = gf__device_bytes(l->dev);
    st->rank = l->s.rank;
    st->world = l->s.world;
    st->shard_members_skipped = l->ds.skipped_members;
    st->shard_keys_skipped = l->ds.skipped_keys;
    st->dataset_warnings = l->ds.warnings;
    /* The index keeps 256 bytes of it; stats carry the start. */
    snprintf(st->dataset_warning, sizeof st->dataset_warning, "%.*s",
             (int)sizeof st->dataset_warning - 1, l->ds.warning);
    st->shards = l->ds.n_shards;
    pthread_mutex_unlock(&l->mu);
    return 0;
}

/* The index is immutable from the end of gf_open() to gf_close(), so the
 * sample accessors below read it without the mutex and touch no loader
 * state: any thread may call them while the pipeline runs. */

int gf_read_sample(gf_loader *l, uint64_t index, void **data, size_t *len, char *why,
                   size_t why_len)
{
    if (data)
        *data = NULL;
    if (len)
        *len = 0;
    if (why && why_len)
        why[0] = '\0';
    if (!l || !data || !len)
        return GF_EINVAL;
    if (index >= l->ds.n) {
        gf__why(why, why_len, "sample %llu: out of range (%llu samples)",
                (unsigned long long)index, (unsigned long long)l->ds.n);
        return GF_EINVAL;
    }
    const char *rel;
    uint64_t off, length;
    gf__dataset_extent(&l->ds, index, &rel, &off, &length);
    gf__buf b = {0};
    char reason[192] = "";
    int rc = gf__read_range(l->ds.root_fd, rel, off, length, &b, l->s.max_file_bytes, reason,
                            sizeof reason);
    if (rc < 0) {
        gf__buf_free(&b);
        gf__why(why, why_len, "%s: %s", gf__dataset_path(&l->ds, index),
                reason[0] ? reason : gf_strerror(rc));
        return rc;
    }
    /* The read buffer grows in powers of two: give back the slack. */
    if (b.cap > b.len) {
        uint8_t *p = realloc(b.data, b.len ? b.len : 1);
        if (p)
            b.data = p;
    }
    *data = b.data;
    *len = b.len;
    return 0;
}

const char *gf_sample_path(gf_loader *l, uint64_t index)
{
    return l && index < l->ds.n ? gf__dataset_path(&l->ds, index) : NULL;
}

int32_t gf_sample_label(gf_loader *l, uint64_t index)
{
    return l && index < l->ds.n ? l->ds.labels[index] : GF_EINVAL;
}

int gf_get_state(gf_loader *l, gf_state *st)
{
    if (!l || !st || !l->slots)
        return GF_EINVAL;
    pthread_mutex_lock(&l->mu);
    *st = (gf_state){.version = GF_STATE_VERSION,
                     .rank = (uint32_t)l->s.rank,
                     .world = (uint32_t)l->s.world,
                     .seed = l->s.seed,
                     .epoch = l->next_epoch,
                     .position = l->next_pos};
    pthread_mutex_unlock(&l->mu);
    return 0;
}

int gf_set_state(gf_loader *l, const gf_state *st)
{
    if (!l || !st)
        return GF_EINVAL;
    /* Under mu: the controller may be writing the message too. */
    int rc = 0;
    pthread_mutex_lock(&l->mu);
    if (st->version != GF_STATE_VERSION)
        rc = fail(l, GF_EINVAL, "gf_set_state: state version %u, this library writes %u",
                  st->version, GF_STATE_VERSION);
    else if (st->seed != l->s.seed || st->rank != (uint32_t)l->s.rank ||
             st->world != (uint32_t)l->s.world)
        rc = fail(l, GF_EINVAL,
                  "gf_set_state: saved by seed %llu, rank %u of %u; this loader has seed "
                  "%llu, rank %d of %d",
                  (unsigned long long)st->seed, st->rank, st->world,
                  (unsigned long long)l->s.seed, l->s.rank, l->s.world);
    pthread_mutex_unlock(&l->mu);
    return rc < 0 ? rc : gf_seek(l, st->epoch, st->position);
}

/* A loader thread may rewrite l->msg (under mu) while any thread asks:
 * each caller gets its own copy, taken under mu. */
const char *gf_last_error(const gf_loader *l)
{
    static _Thread_local char copy[sizeof l->msg];
    if (!l)
        return "";
    pthread_mutex_t *mu = (pthread_mutex_t *)&l->mu; /* l is the caller's, not const */
    pthread_mutex_lock(mu);
    memcpy(copy, l->msg, sizeof copy);
    pthread_mutex_unlock(mu);
    return copy;
}

void gf_close(gf_loader **lp)
{
    if (!lp || !*lp)
        return;
    gf_loader *l = *lp;
    stop_pipeline(l);
    for (int i = 0; i < l->n_workers; i++) {
        gf__decoder_destroy(l->workers[i].dec);
        gf__buf_free(&l->workers[i].buf);
    }
    if (l->slots) {
        for (int i = 0; i < l->D; i++) {
            slot *sl = &l->slots[i];
            if (sl->pixels)
                gf__host_free(l->dev, sl->pixels, sl->pinned);
            free(sl->out);
            free(sl->labels);
            free(sl->indices);
            free(sl->out_labels);
            free(sl->out_indices);
            free(sl->cells);
            free(sl->errs);
        }
    }
    for (int i = 0; i < l->n_bufs; i++)
        gf__buf_free(&l->bufs[i]);
    free(l->slots);
    free(l->bufs);
    free(l->free_bufs);
    free(l->reaped);
    free(l->js);
    free(l->workers);
    free(l->jobs.items);
    free(l->dones.items);
    free(l->reads.items);
    gf__device_close(l->dev);
    gf__dataset_close(&l->ds);
    free(l->data_path);
    pthread_cond_destroy(&l->job_cv);
    pthread_cond_destroy(&l->ready_cv);
    pthread_mutex_destroy(&l->mu);
    free(l);
    *lp = NULL;
}
