/*
 * The CUDA transfer stage.
 *
 * Invariants (no reuse race by construction):
 * - A copy stream carries each batch's copy, conversion, ready event and
 *   done() in that order: one stream for the ring (the default, batches
 *   in order), or slot i's own (copy_stream_per_slot: batches of
 *   different slots may overlap; nothing below needs their order).
 * - A host slot is reused only after done() has run, and done() is queued
 *   on the copy stream after its copy: the GPU has read the host memory.
 * - A device slot i is written only by work queued after a wait on the
 *   event the consumer recorded on its own stream when it released slot
 *   i: the GPU runs the consumer's work on the batch before the copy that
 *   overwrites it. The host never blocks on either.
 * - The consumer's stream waits on slot i's ready event before reading it.
 * - done() runs for every enqueued batch, also when the stream has failed
 *   (cudaStreamAddCallback passes the error; a host function would be
 *   skipped and the slot never freed): the loader halts with the error
 *   instead of waiting for a slot forever.
 * - Close waits for the copy streams and for every recorded release event
 *   before freeing device memory the consumer may still be reading.
 *
 * The caller's current device is never changed: setup, teardown, pinned
 * allocations, and a release or wait on the legacy default stream asked
 * from a thread bound to another device (or none) run on the device's
 * helper thread (gf-cuda, on_device), bound to the loader's device from
 * gf__device_open to gf__device_close; the controller thread binds to it
 * too. Saving and restoring the caller's device instead would create a
 * context on device 0 in every process whose thread had none
 * (cudaGetDevice says 0 then), hundreds of MB on GPU 0 per rank under
 * mpirun. One thread for the device's life, not one per call: a consumer
 * on another device's thread releases every batch through it.
 */
#include "device.h"

#include "config.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>



static void *gf__host_alloc_pageable(size_t bytes)
{
    void *p = NULL;
    return posix_memalign(&p, 4096, bytes ? bytes : 1) == 0 ? p : NULL;
}

#if GF_HAVE_CUDA

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

typedef struct dslot {
    void *in;        /* uint8 staging, or NULL: the copy lands in out */
    void *out;
    uint8_t *flips;
    cudaEvent_t ready, released;
    int release_recorded;
    void (*done)(void *, int); /* the batch in flight's */
    void *done_arg;
} dslot;

/* The helper thread: one call at a time, the caller waits for its end. */
typedef struct helper {
    pthread_t thread;
    bool started, quit;
    pthread_mutex_t mu;
    pthread_cond_t cv;        /* a call posted or finished, or quit */
    void (*fn)(void *);       /* the call running or posted, NULL when idle */
    void *arg;
    uint64_t posted, finished;
    cudaError_t set;          /* its cudaSetDevice */
} helper;

struct gf__device {
    int id;
    int depth;
    helper h;
    struct gf__device *next_open; /* open_devices */
    cudaStream_t *copy; /* n_copy streams: 1, or depth (one per slot) */
    int n_copy;
    dslot *slots;
    size_t in_bytes, out_bytes, flip_bytes;
    uint64_t pinned_max, pinned_now;
    uint64_t device_bytes;
};

static int cuda_fail(cudaError_t e, const char *what, char *why, size_t why_len)
{
    gf__why(why, why_len, "%s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
    return e == cudaErrorMemoryAllocation ? GF_ENOMEM : GF_ENODEV;
}

static void *helper_main(void *p)
{
    gf__device *d = p;
    helper *h = &d->h;
    pthread_setname_np(pthread_self(), "gf-cuda");
    cudaError_t set = cudaSetDevice(d->id);
    pthread_mutex_lock(&h->mu);
    h->set = set;
    for (;;) {
        while (!h->fn && !h->quit)
            pthread_cond_wait(&h->cv, &h->mu);
        if (!h->fn)
            break;
        void (*fn)(void *) = h->fn;
        void *arg = h->arg;
        pthread_mutex_unlock(&h->mu);
        if (set == cudaSuccess)
            fn(arg);
        pthread_mutex_lock(&h->mu);
        h->fn = NULL;
        h->finished++;
        pthread_cond_broadcast(&h->cv);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* Starts d's helper thread; without one, on_device runs calls in place. */
static void helper_start(gf__device *d)
{
    helper *h = &d->h;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    h->started = pthread_create(&h->thread, NULL, helper_main, d) == 0;
}

static void helper_stop(gf__device *d)
{
    helper *h = &d->h;
    if (h->started) {
        pthread_mutex_lock(&h->mu);
        h->quit = true;
        pthread_cond_broadcast(&h->cv);
        pthread_mutex_unlock(&h->mu);
        pthread_join(h->thread, NULL);
    }
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
}

/* fn(arg) on a thread whose current device is d's, so the caller's is
 * left alone (see the top); returns once it has run. Returns the
 * cudaSetDevice error, if any; without a helper thread, fn runs here (the
 * caller's device may then change). */
static cudaError_t on_device(gf__device *d, void (*fn)(void *), void *arg)
{
    helper *h = &d->h;
    if (!h->started) {
        cudaError_t e = cudaSetDevice(d->id);
        if (e == cudaSuccess)
            fn(arg);
        return e;
    }
    pthread_mutex_lock(&h->mu);
    while (h->fn) /* another caller's */
        pthread_cond_wait(&h->cv, &h->mu);
    h->fn = fn;
    h->arg = arg;
    uint64_t mine = ++h->posted;
    pthread_cond_broadcast(&h->cv);
    while (h->finished < mine)
        pthread_cond_wait(&h->cv, &h->mu);
    cudaError_t e = h->set;
    pthread_mutex_unlock(&h->mu);
    return e;
}

/* Open devices, for gf__device_wait: a batch names its ready event, not
 * its loader. */
static pthread_mutex_t open_mu = PTHREAD_MUTEX_INITIALIZER;
static gf__device *open_devices;

static void track_open(gf__device *d)
{
    pthread_mutex_lock(&open_mu);
    d->next_open = open_devices;
    open_devices = d;
    pthread_mutex_unlock(&open_mu);
}

static void untrack_open(gf__device *d)
{
    pthread_mutex_lock(&open_mu);
    for (gf__device **p = &open_devices; *p; p = &(*p)->next_open)
        if (*p == d) {
            *p = d->next_open;
            break;
        }
    pthread_mutex_unlock(&open_mu);
}

typedef struct open_call {
    gf__device *d;
    const gf_settings *s;
    char *why;
    size_t why_len;
    int rc;
} open_call;

/* On the loader's device: checks the budget, creates the stream, and
 * allocates the slots. */
static void open_main(void *p)
{
    open_call *c = p;
    gf__device *d = c->d;
    cudaError_t e;
    uint64_t per_slot = (uint64_t)d->in_bytes + d->out_bytes + d->flip_bytes;
    uint64_t need = per_slot * (uint64_t)d->depth;
    size_t free_b = 0, total_b = 0;
    if ((e = cudaMemGetInfo(&free_b, &total_b)) != cudaSuccess) {
        c->rc = cuda_fail(e, "cudaMemGetInfo", c->why, c->why_len);
        return;
    }
    uint64_t budget = c->s->device_max_bytes
                          ? GF__MIN(c->s->device_max_bytes, (uint64_t)free_b)
                          : (uint64_t)free_b;
    if (need > budget) {
        gf__why(c->why, c->why_len,
                "device %d: the ring needs %.1f MiB (%d slots x %.1f MiB) but %.1f MiB are "
                "available (%.1f MiB free of %.1f MiB%s)",
                d->id, need / 1048576.0, d->depth, per_slot / 1048576.0, budget / 1048576.0,
                free_b / 1048576.0, total_b / 1048576.0,
                c->s->device_max_bytes ? ", device_max_bytes set" : "");
        c->rc = GF_ENOMEM;
        return;
    }
    for (int i = 0; i < d->n_copy; i++) {
        if ((e = cudaStreamCreateWithFlags(&d->copy[i], cudaStreamNonBlocking)) != cudaSuccess) {
            d->copy[i] = NULL;
            c->rc = cuda_fail(e, "cudaStreamCreate", c->why, c->why_len);
            return;
        }
    }
    for (int i = 0; i < d->depth; i++) {
        dslot *sl = &d->slots[i];
        if ((d->in_bytes && (e = cudaMalloc(&sl->in, d->in_bytes)) != cudaSuccess) ||
            (e = cudaMalloc(&sl->out, d->out_bytes ? d->out_bytes : 1)) != cudaSuccess ||
            (d->flip_bytes &&
             (e = cudaMalloc((void **)&sl->flips, d->flip_bytes)) != cudaSuccess) ||
            (e = cudaEventCreateWithFlags(&sl->ready, cudaEventDisableTiming)) != cudaSuccess ||
            (e = cudaEventCreateWithFlags(&sl->released, cudaEventDisableTiming)) !=
                cudaSuccess) {
            c->rc = cuda_fail(e, "allocating the device ring", c->why, c->why_len);
            return;
        }
    }
    d->device_bytes = need;
    c->rc = 0;
}

int gf__device_open(gf__device **out, const gf_settings *s, int id_from_env, int depth,
                    size_t in_bytes, size_t out_bytes, size_t flip_bytes, char *why,
                    size_t why_len)
{
    *out = NULL;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess)
        return cuda_fail(e, "no usable CUDA driver or device", why, why_len);
    int id = s->device_id >= 0 ? s->device_id : 0; /* the loader resolved -1 */
    /* A local rank past the visible devices: the launcher gave each rank
     * its own (CUDA_VISIBLE_DEVICES per rank), numbered from 0. */
    if (id_from_env && n > 0 && id >= n)
        id %= n;
    if (n == 0 || id >= n) {
        gf__why(why, why_len, "CUDA device %d requested, %d present", id, n);
        return GF_ENODEV;
    }

    gf__device *d = calloc(1, sizeof *d);
    const int n_copy = s->copy_stream_per_slot ? depth : 1;
    if (!d || !(d->slots = calloc((size_t)depth, sizeof *d->slots)) ||
        !(d->copy = calloc((size_t)n_copy, sizeof *d->copy))) {
        if (d)
            free(d->slots);
        free(d);
        gf__why(why, why_len, "out of host memory");
        return GF_ENOMEM;
    }
    d->n_copy = n_copy;
    d->id = id;
    d->depth = depth;
    d->in_bytes = in_bytes;
    d->out_bytes = out_bytes;
    d->flip_bytes = flip_bytes;
    d->pinned_max = s->pinned_max_bytes;
    helper_start(d);
    open_call c = {.d = d, .s = s, .why = why, .why_len = why_len, .rc = GF_ENODEV};
    if ((e = on_device(d, open_main, &c)) != cudaSuccess)
        c.rc = cuda_fail(e, "cudaSetDevice", why, why_len);
    if (c.rc != 0) {
        gf__device_close(d);
        return c.rc;
    }
    track_open(d);
    *out = d;
    return 0;
}

static void close_main(void *p)
{
    gf__device *d = p;
    for (int i = 0; i < d->n_copy; i++)
        if (d->copy[i])
            cudaStreamSynchronize(d->copy[i]);
    if (d->slots) {
        for (int i = 0; i < d->depth; i++) {
            dslot *sl = &d->slots[i];
            /* the consumer's work on the slot, queued before its release */
            if (sl->release_recorded)
                cudaEventSynchronize(sl->released);
            cudaFree(sl->in);
            cudaFree(sl->out);
            cudaFree(sl->flips);
            if (sl->ready)
                cudaEventDestroy(sl->ready);
            if (sl->released)
                cudaEventDestroy(sl->released);
        }
    }
    for (int i = 0; i < d->n_copy; i++)
        if (d->copy[i])
            cudaStreamDestroy(d->copy[i]);
}

void gf__device_close(gf__device *d)
{
    if (!d)
        return;
    untrack_open(d);
    on_device(d, close_main, d);
    helper_stop(d);
    free(d->copy);
    free(d->slots);
    free(d);
}

int gf__device_id(const gf__device *d)
{
    return d ? d->id : -1;
}

uint64_t gf__device_bytes(const gf__device *d)
{
    return d ? d->device_bytes : 0;
}

int gf__device_bind(gf__device *d)
{
    return d && cudaSetDevice(d->id) != cudaSuccess ? GF_ENODEV : 0;
}

typedef struct host_call {
    void *p;
    size_t bytes;
    cudaError_t e;
} host_call;

static void host_alloc_main(void *p)
{
    host_call *c = p;
    c->e = cudaHostAlloc(&c->p, c->bytes ? c->bytes : 1, cudaHostAllocPortable);
}

static void host_free_main(void *p)
{
    host_call *c = p;
    c->e = cudaFreeHost(c->p);
}

void *gf__host_alloc(gf__device *d, size_t bytes, int *pinned, char *why, size_t why_len)
{
    *pinned = 0;
    if (d) {
        if (d->pinned_max && d->pinned_now + bytes > d->pinned_max) {
            gf__why(why, why_len, "pinned memory cap of %.1f MiB reached: slots are pageable",
                    d->pinned_max / 1048576.0);
        } else {
            host_call c = {.bytes = bytes};
            cudaError_t e = on_device(d, host_alloc_main, &c);
            if (e == cudaSuccess)
                e = c.e;
            if (e == cudaSuccess) {
                d->pinned_now += bytes;
                *pinned = 1;
                return c.p;
            }
            gf__why(why, why_len, "cudaHostAlloc of %.1f MiB failed (%s): slots are pageable",
                    bytes / 1048576.0, cudaGetErrorName(e));
        }
    }
    return gf__host_alloc_pageable(bytes);
}

void gf__host_free(gf__device *d, void *p, int pinned)
{
    if (pinned) {
        host_call c = {.p = p};
        on_device(d, host_free_main, &c);
    } else {
        free(p);
    }
}

/* A CUDA thread, after the batch's copy and kernel, or with the error
 * that stopped the stream. No CUDA calls here. */
static void CUDART_CB copied(cudaStream_t stream, cudaError_t status, void *arg)
{
    (void)stream;
    dslot *sl = arg;
    sl->done(sl->done_arg, status == cudaSuccess ? 0 : (int)status);
}

int gf__device_enqueue(gf__device *d, int i, const uint8_t *pixels, const uint8_t *flips,
                       int count, size_t cell_bytes, const gf__convert *cv,
                       void (*done)(void *, int), void *arg, char *why, size_t why_len)
{
    dslot *sl = &d->slots[i];
    cudaStream_t copy = d->copy[d->n_copy > 1 ? i : 0];
    cudaError_t e;
    nvtxRangePushA("gf copy+convert");
    if (sl->release_recorded && (e = cudaStreamWaitEvent(copy, sl->released, 0)) != cudaSuccess)
        goto fail;
    void *dst = sl->in ? sl->in : sl->out;
    if ((e = cudaMemcpyAsync(dst, pixels, (size_t)count * cell_bytes, cudaMemcpyHostToDevice,
                             copy)) != cudaSuccess)
        goto fail;
    if (sl->flips && flips &&
        (e = cudaMemcpyAsync(sl->flips, flips, (size_t)count, cudaMemcpyHostToDevice, copy)) !=
            cudaSuccess)
        goto fail;
    if (sl->in) {
        int rc = gf__convert_cuda(cv, sl->in, sl->out, sl->flips, count, copy, why, why_len);
        if (rc < 0) {
            nvtxRangePop();
            return rc;
        }
    }
    sl->done = done;
    sl->done_arg = arg;
    if ((e = cudaEventRecord(sl->ready, copy)) != cudaSuccess ||
        (e = cudaStreamAddCallback(copy, copied, sl, 0)) != cudaSuccess)
        goto fail;
    nvtxRangePop();
    return 0;
fail:
    nvtxRangePop();
    return cuda_fail(e, "queueing a batch copy", why, why_len);
}

void *gf__device_out(const gf__device *d, int i)
{
    return d->slots[i].out;
}

void *gf__device_ready_event(const gf__device *d, int i)
{
    return d->slots[i].ready;
}

typedef struct release_call {
    dslot *sl;
    cudaError_t e;
} release_call;

static void release_main(void *p)
{
    release_call *c = p;
    c->e = cudaEventRecord(c->sl->released, 0);
}

int gf__device_release(gf__device *d, int i, void *stream, char *why, size_t why_len)
{
    dslot *sl = &d->slots[i];
    cudaError_t e;
    int cur = -1;
    /* NULL: the legacy default stream of the loader's device. From a
     * thread whose current device is another (or none: cudaGetDevice
     * says 0 then), record it on the helper thread rather than switch
     * this one's device (see the top). */
    if (stream || (cudaGetDevice(&cur) == cudaSuccess && cur == d->id)) {
        e = cudaEventRecord(sl->released, (cudaStream_t)stream);
    } else {
        release_call c = {.sl = sl, .e = cudaErrorUnknown};
        e = on_device(d, release_main, &c);
        if (e == cudaSuccess)
            e = c.e;
    }
    if (e == cudaErrorInvalidResourceHandle || e == cudaErrorInvalidValue) {
        gf__why(why, why_len, "not a stream of device %d: %s", d->id, cudaGetErrorName(e));
        return GF_EINVAL; /* the caller's mistake: the loader is fine */
    }
    if (e != cudaSuccess)
        return cuda_fail(e, "recording a batch's release event", why, why_len);
    sl->release_recorded = 1;
    return 0;
}

typedef struct wait_call {
    cudaEvent_t event;
    cudaError_t e;
} wait_call;

static void wait_main(void *p)
{
    wait_call *c = p;
    c->e = cudaStreamWaitEvent(0, c->event, 0);
}

/* The open device whose slot made event, or NULL. */
static gf__device *device_of(cudaEvent_t event)
{
    gf__device *found = NULL;
    pthread_mutex_lock(&open_mu);
    for (gf__device *d = open_devices; d && !found; d = d->next_open)
        for (int i = 0; i < d->depth; i++)
            if (d->slots[i].ready == event) {
                found = d;
                break;
            }
    pthread_mutex_unlock(&open_mu);
    return found;
}

int gf__device_wait(void *event, void *stream)
{
    if (!event)
        return 0;
    cudaError_t e;
    int cur = -1;
    gf__device *d;
    /* NULL: the legacy default stream of the loader's device, as for
     * gf__device_release; from a thread bound elsewhere, on the helper. */
    if (!stream && (d = device_of((cudaEvent_t)event)) &&
        !(cudaGetDevice(&cur) == cudaSuccess && cur == d->id)) {
        wait_call c = {.event = (cudaEvent_t)event, .e = cudaErrorUnknown};
        e = on_device(d, wait_main, &c);
        if (e == cudaSuccess)
            e = c.e;
    } else {
        e = cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, 0);
    }
    return e == cudaSuccess ? 0 : GF_ENODEV;
}

void gf__device_sync(gf__device *d)
{
    for (int i = 0; d && i < d->n_copy; i++)
        if (d->copy[i])
            cudaStreamSynchronize(d->copy[i]);
}

void gf__range_init(void)
{
    nvtxInitialize(NULL);
}

void gf__range_push(const char *name)
{
    nvtxRangePushA(name);
}

void gf__range_pop(void)
{
    nvtxRangePop();
}

#else /* !GF_HAVE_CUDA: the CPU path only */

int gf__device_open(gf__device **out, const gf_settings *s, int id_from_env, int depth,
                    size_t in_bytes, size_t out_bytes, size_t flip_bytes, char *why,
                    size_t why_len)
{
    (void)s, (void)id_from_env, (void)depth, (void)in_bytes, (void)out_bytes, (void)flip_bytes;
    *out = NULL;
    gf__why(why, why_len, "this build has no CUDA (meson -Dcuda=enabled)");
    return GF_ENODEV;
}

void gf__device_close(gf__device *d)
{
    (void)d;
}

int gf__device_id(const gf__device *d)
{
    (void)d;
    return -1;
}

uint64_t gf__device_bytes(const gf__device *d)
{
    (void)d;
    return 0;
}

int gf__device_bind(gf__device *d)
{
    (void)d;
    return 0;
}

void *gf__host_alloc(gf__device *d, size_t bytes, int *pinned, char *why, size_t why_len)
{
    (void)d, (void)why, (void)why_len;
    *pinned = 0;
    return gf__host_alloc_pageable(bytes);
}

void gf__host_free(gf__device *d, void *p, int pinned)
{
    (void)d, (void)pinned;
    free(p);
}

int gf__device_enqueue(gf__device *d, int i, const uint8_t *pixels, const uint8_t *flips,
                       int count, size_t cell_bytes, const gf__convert *cv,
                       void (*done)(void *, int), void *arg, char *why, size_t why_len)
{
    (void)d, (void)i, (void)pixels, (void)flips, (void)count, (void)cell_bytes, (void)cv;
    (void)done, (void)arg;
    gf__why(why, why_len, "this build has no CUDA");
    return GF_ENODEV;
}

void *gf__device_out(const gf__device *d, int i)
{
    (void)d, (void)i;
    return NULL;
}

void *gf__device_ready_event(const gf__device *d, int i)
{
    (void)d, (void)i;
    return NULL;
}

int gf__device_release(gf__device *d, int i, void *stream, char *why, size_t why_len)
{
    (void)d, (void)i, (void)stream, (void)why, (void)why_len;
    return 0;
}

int gf__device_wait(void *event, void *stream)
{
    (void)event, (void)stream;
    return 0;
}

void gf__device_sync(gf__device *d)
{
    (void)d;
}

void gf__range_init(void)
{
}

void gf__range_push(const char *name)
{
    (void)name;
}

void gf__range_pop(void)
{
}

#endif
