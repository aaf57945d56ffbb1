/*
 * The CUDA transfer stage (device.h): opening and closing a device (its
 * slots, copy streams and helper), host slot memory, and the consumer's
 * side (release, wait). The copy path is device_copy.c's, the threads
 * bound to the device device_thread.c's; the build without CUDA has
 * device_nocuda.c instead. The invariants below hold across these files.
 *
 * Threads: open, close and host slot memory run on gf_open/gf_close's
 * thread, grow and host slot memory also on the consumer's (a slot added
 * for a held batch), their CUDA calls on the device's helper (gf-cuda);
 * enqueue and
 * harvest on the controller; a batch's queueing (queue_batch) on the
 * controller, or with pageable host slots on the copy thread (gf-copy);
 * copied() on a CUDA thread; release and wait on the consumer's threads
 * (through the helper when bound to another device).
 *
 * Invariants (no reuse race by construction):
 * - A copy stream carries each batch's copy, conversion, ready event and
 *   done() in that order: one stream for the ring (the default, batches
 *   in order), or one per prefetch slot, slot i on i % D
 *   (copy_stream_per_slot: batches of different slots may overlap; nothing
 *   below needs their order).
 * - One thread queues every batch of a device, in the order the
 *   controller hands them over: the controller when all host slots are
 *   pinned; gf-copy, in the order posted, as soon as one is pageable (a
 *   copy from pageable memory blocks its caller until the stream reaches
 *   it, and the controller also drives reads and decodes).
 * - Any host slot may feed device slot i. A host slot is reused only
 *   after done() has run, and done() is queued on the copy stream after
 *   its copy: the GPU has read the host memory. Device slot i takes
 *   another batch only after its last done() too (the loader's `copying`):
 *   slot i's in-flight record (done, arg, timing events) is one batch's.
 *   A batch posted to gf-copy has its host slot OUT until then too.
 * - A batch is handed to the consumer only once its ready event is
 *   recorded: after gf__device_enqueue returns 0, or, posted to gf-copy,
 *   from queued() (the slot's delivery side is COPYING until then), so
 *   gf_batch_wait never waits on an earlier record.
 * - A device slot i is written only by work queued after a wait on the
 *   event the consumer recorded on its own stream when it released slot
 *   i: the GPU runs the consumer's work on the batch before the copy that
 *   overwrites it. The host never blocks on either.
 * - The consumer's stream waits on slot i's ready event before reading it.
 * - done() runs for every enqueued batch, also when the stream has failed
 *   (cudaStreamAddCallback passes the error; a host function would be
 *   skipped and the slot never freed), or when gf-copy could not queue it:
 *   the loader halts with the error instead of waiting for a slot forever.
 * - Slot i's copy timing events are read only once copied() has flagged
 *   them complete, by the controller, before it hands slot i another
 *   batch (harvest): reading them never waits.
 * - Close waits for gf-copy, the copy streams and every recorded release
 *   event before freeing device memory the consumer may still be reading.
 *
 * The caller's current device is never changed: what must run on the
 * loader's device from a thread bound to another (or none) runs on the
 * helper (device_thread.c says why); the controller binds to it.
 */
#include "config.h"

#if GF_HAVE_CUDA

#include "device_impl.h"

#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


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

/* At the device's highest priority, so a conversion does not queue behind
 * a trainer's kernels that fill the GPU; a plain one if that fails. */
static cudaError_t create_copy_stream(cudaStream_t *s)
{
    int least = 0, greatest = 0;
    if (cudaDeviceGetStreamPriorityRange(&least, &greatest) == cudaSuccess &&
        cudaStreamCreateWithPriority(s, cudaStreamNonBlocking, greatest) == cudaSuccess)
        return cudaSuccess;
    cudaGetLastError(); /* not sticky: clear it for the kernel's launch check */
    return cudaStreamCreateWithFlags(s, cudaStreamNonBlocking);
}

typedef struct open_call {
    gf__device *d;
    const gf_settings *s;
    char *why;
    size_t why_len;
    int rc;
} open_call;

static uint64_t slot_bytes(const gf__device *d)
{
    return (uint64_t)d->in_bytes + d->out_bytes + d->flip_bytes + d->field_bytes +
           d->target_bytes;
}

/* Device slot i's memory and events, on the loader's device. */
static cudaError_t alloc_dslot(gf__device *d, int i)
{
    dslot *sl = &d->slots[i];
    cudaError_t e;
    if ((d->in_bytes && (e = cudaMalloc(&sl->in, d->in_bytes)) != cudaSuccess) ||
        (e = cudaMalloc(&sl->out, d->out_bytes ? d->out_bytes : 1)) != cudaSuccess ||
        (d->flip_bytes && (e = cudaMalloc((void **)&sl->flips, d->flip_bytes)) != cudaSuccess) ||
        (d->field_bytes && (e = cudaMalloc((void **)&sl->fields, d->field_bytes)) != cudaSuccess) ||
        (d->target_bytes &&
         (e = cudaMalloc((void **)&sl->targets, d->target_bytes)) != cudaSuccess) ||
        (e = cudaEventCreateWithFlags(&sl->ready, cudaEventDisableTiming)) != cudaSuccess ||
        (e = cudaEventCreateWithFlags(&sl->released, cudaEventDisableTiming)) != cudaSuccess ||
        (e = cudaEventCreateWithFlags(&sl->h2d_from, cudaEventDefault)) != cudaSuccess ||
        (e = cudaEventCreateWithFlags(&sl->h2d_to, cudaEventDefault)) != cudaSuccess)
        return e;
    return cudaSuccess;
}

/* Frees what alloc_dslot made; slot i is unused (close, or a failed
 * grow). */
static void free_dslot(gf__device *d, int i)
{
    dslot *sl = &d->slots[i];
    cudaFree(sl->in);
    cudaFree(sl->out);
    cudaFree(sl->flips);
    cudaFree(sl->fields);
    cudaFree(sl->targets);
    cudaEvent_t evs[] = {sl->ready, sl->released, sl->h2d_from, sl->h2d_to};
    for (size_t k = 0; k < sizeof evs / sizeof evs[0]; k++)
        if (evs[k])
            cudaEventDestroy(evs[k]);
    *sl = (dslot){.d = d};
}

/* On the loader's device: checks the budget, creates the stream, and
 * allocates the first `depth` slots. */
static void open_main(void *p)
{
    open_call *c = p;
    gf__device *d = c->d;
    cudaError_t e;
    const int depth = atomic_load_explicit(&d->depth, memory_order_relaxed);
    uint64_t per_slot = slot_bytes(d);
    uint64_t need = per_slot * (uint64_t)depth;
    size_t free_b = 0, total_b = 0;
    if ((e = cudaMemGetInfo(&free_b, &total_b)) != cudaSuccess) {
        c->rc = cuda_fail(e, "cudaMemGetInfo", c->why, c->why_len);
        return;
    }
    uint64_t budget = d->device_max ? GF__MIN(d->device_max, (uint64_t)free_b) : (uint64_t)free_b;
    if (need > budget) {
        gf__why(c->why, c->why_len,
                "device %d: the ring needs %.1f MiB (%d slots x %.1f MiB) but %.1f MiB are "
                "available (%.1f MiB free of %.1f MiB%s)",
                d->id, need / 1048576.0, depth, per_slot / 1048576.0, budget / 1048576.0,
                free_b / 1048576.0, total_b / 1048576.0,
                d->device_max ? ", device_max_bytes set" : "");
        c->rc = GF_ENOMEM;
        return;
    }
    for (int i = 0; i < d->n_copy; i++) {
        if ((e = create_copy_stream(&d->copy[i])) != cudaSuccess) {
            d->copy[i] = NULL;
            c->rc = cuda_fail(e, "cudaStreamCreate", c->why, c->why_len);
            return;
        }
    }
    for (int i = 0; i < depth; i++) {
        if ((e = alloc_dslot(d, i)) != cudaSuccess) {
            c->rc = cuda_fail(e, "allocating the device ring", c->why, c->why_len);
            return;
        }
    }
    atomic_store_explicit(&d->device_bytes, need, memory_order_relaxed);
    c->rc = 0;
}

int gf__device_open(gf__device **out, const gf_settings *s, int id_from_env, int depth,
                    int capacity, size_t in_bytes, size_t out_bytes, size_t flip_bytes,
                    size_t field_bytes, size_t target_bytes, char *why, size_t why_len)
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
    if (!d || !(d->slots = calloc((size_t)capacity, sizeof *d->slots)) ||
        !(d->copy = calloc((size_t)n_copy, sizeof *d->copy))) {
        if (d)
            free(d->slots);
        free(d);
        gf__why(why, why_len, "out of host memory");
        return GF_ENOMEM;
    }
    d->n_copy = n_copy;
    d->id = id;
    atomic_init(&d->depth, depth);
    d->capacity = capacity;
    d->device_max = s->device_max_bytes;
    d->in_bytes = in_bytes;
    d->out_bytes = out_bytes;
    d->flip_bytes = flip_bytes;
    d->field_bytes = field_bytes;
    d->target_bytes = target_bytes;
    d->pinned_max = s->pinned_max_bytes;
    for (int i = 0; i < capacity; i++)
        d->slots[i].d = d;
    pthread_mutex_init(&d->stat_mu, NULL);
    gf__dthread_start(&d->helper, id, "gf-cuda");
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
    const int depth = atomic_load_explicit(&d->depth, memory_order_acquire);
    for (int i = 0; i < depth; i++) {
        /* the consumer's work on the slot, queued before its release */
        if (d->slots[i].release_recorded)
            cudaEventSynchronize(d->slots[i].released);
        free_dslot(d, i);
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
    gf__dthread_stop(&d->copier); /* queues what was posted */
    on_device(d, close_main, d);
    gf__dthread_stop(&d->helper);
    pthread_mutex_destroy(&d->stat_mu);
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
    return d ? atomic_load_explicit(&((gf__device *)d)->device_bytes, memory_order_relaxed) : 0;
}

typedef struct grow_call {
    gf__device *d;
    int i;
    char *why;
    size_t why_len;
    int rc;
} grow_call;

/* On the loader's device: slot i within the budget, or why not. */
static void grow_main(void *p)
{
    grow_call *c = p;
    gf__device *d = c->d;
    const uint64_t per_slot = slot_bytes(d);
    const uint64_t now = atomic_load_explicit(&d->device_bytes, memory_order_relaxed);
    size_t free_b = 0, total_b = 0;
    cudaError_t e = cudaMemGetInfo(&free_b, &total_b);
    if (e != cudaSuccess) {
        c->rc = cuda_fail(e, "cudaMemGetInfo", c->why, c->why_len);
        return;
    }
    if ((d->device_max && now + per_slot > d->device_max) || per_slot > (uint64_t)free_b) {
        gf__why(c->why, c->why_len,
                "device %d: another %.1f MiB slot would pass %s (%.1f MiB taken, %.1f MiB free)",
                d->id, per_slot / 1048576.0,
                d->device_max && now + per_slot > d->device_max ? "device_max_bytes"
                                                                : "the free memory",
                now / 1048576.0, free_b / 1048576.0);
        c->rc = GF_ENOMEM;
        return;
    }
    if ((e = alloc_dslot(d, c->i)) != cudaSuccess) {
        free_dslot(d, c->i);
        c->rc = cuda_fail(e, "allocating a device slot", c->why, c->why_len);
        return;
    }
    atomic_store_explicit(&d->device_bytes, now + per_slot, memory_order_relaxed);
    c->rc = 0;
}

int gf__device_grow(gf__device *d, int i, char *why, size_t why_len)
{
    if (i < atomic_load_explicit(&d->depth, memory_order_relaxed))
        return 0; /* made by an earlier try whose host slot failed */
    if (i != atomic_load_explicit(&d->depth, memory_order_relaxed) || i >= d->capacity) {
        gf__why(why, why_len, "internal error: device slot %d of %d", i, d->capacity);
        return GF_ENOMEM;
    }
    grow_call c = {.d = d, .i = i, .why = why, .why_len = why_len, .rc = GF_ENODEV};
    cudaError_t e = on_device(d, grow_main, &c);
    if (e != cudaSuccess)
        return cuda_fail(e, "cudaSetDevice", why, why_len);
    if (c.rc == 0) /* whole: the controller and gf__device_wait may look at it */
        atomic_store_explicit(&d->depth, i + 1, memory_order_release);
    return c.rc;
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
            gf__why(why, why_len,
                    "pinned memory cap of %.1f MiB reached: slots are pageable (copied on "
                    "gf-copy)",
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
            gf__why(why, why_len,
                    "cudaHostAlloc of %.1f MiB failed (%s): slots are pageable (copied on "
                    "gf-copy)",
                    bytes / 1048576.0, cudaGetErrorName(e));
        }
        /* From now on every batch is queued on gf-copy (the top says why);
         * without that thread, on the controller as before. */
        if (!atomic_load_explicit(&d->offload, memory_order_relaxed)) {
            gf__dthread_start(&d->copier, d->id, "gf-copy");
            /* After the start: the controller may post as soon as it sees it. */
            atomic_store_explicit(&d->offload, true, memory_order_release);
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

void *gf__device_out(const gf__device *d, int i)
{
    return d->slots[i].out;
}

void *gf__device_fields(const gf__device *d, int i)
{
    return d->slots[i].fields;
}

void *gf__device_targets(const gf__device *d, int i)
{
    return d->slots[i].targets;
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
        cudaGetLastError(); /* not sticky: the caller's next launch check must pass */
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
        for (int i = 0, n = atomic_load_explicit(&d->depth, memory_order_acquire); i < n; i++)
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

#endif
