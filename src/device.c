/*
 * The CUDA transfer stage.
 *
 * Invariants (no reuse race by construction):
 * - One copy stream carries every copy and conversion, in batch order.
 * - A host slot is reused only after done() has run, and done() is queued
 *   on the copy stream after its copy: the GPU has read the host memory.
 * - A device slot i is written only by work queued after a wait on the
 *   event the consumer recorded on its own stream when it released slot
 *   i: the GPU runs the consumer's work on the batch before the copy that
 *   overwrites it. The host never blocks on either.
 * - The consumer's stream waits on slot i's ready event before reading it.
 * The caller's current device is never changed, except on the controller
 * thread, which binds to the loader's device.
 */
#include "device.h"

#include "config.h"

#include <errno.h>
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
} dslot;

struct gf__device {
    int id;
    int depth;
    cudaStream_t copy;
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

int gf__device_open(gf__device **out, const gf_settings *s, int depth, size_t in_bytes,
                    size_t out_bytes, size_t flip_bytes, char *why, size_t why_len)
{
    *out = NULL;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess)
        return cuda_fail(e, "no usable CUDA driver or device", why, why_len);
    int id = s->device_id >= 0 ? s->device_id : 0; /* the loader resolved -1 */
    if (n == 0 || id >= n) {
        gf__why(why, why_len, "CUDA device %d requested, %d present", id, n);
        return GF_ENODEV;
    }
    int prev = 0;
    cudaGetDevice(&prev);
    if ((e = cudaSetDevice(id)) != cudaSuccess)
        return cuda_fail(e, "cudaSetDevice", why, why_len);

    gf__device *d = calloc(1, sizeof *d);
    int rc = GF_ENOMEM;
    if (!d || !(d->slots = calloc((size_t)depth, sizeof *d->slots))) {
        gf__why(why, why_len, "out of host memory");
        goto fail;
    }
    d->id = id;
    d->depth = depth;
    d->in_bytes = in_bytes;
    d->out_bytes = out_bytes;
    d->flip_bytes = flip_bytes;
    d->pinned_max = s->pinned_max_bytes;

    uint64_t per_slot = (uint64_t)in_bytes + out_bytes + flip_bytes;
    uint64_t need = per_slot * (uint64_t)depth;
    size_t free_b = 0, total_b = 0;
    if ((e = cudaMemGetInfo(&free_b, &total_b)) != cudaSuccess) {
        rc = cuda_fail(e, "cudaMemGetInfo", why, why_len);
        goto fail;
    }
    uint64_t budget = s->device_max_bytes ? GF__MIN(s->device_max_bytes, (uint64_t)free_b)
                                          : (uint64_t)free_b;
    if (need > budget) {
        gf__why(why, why_len,
                "device %d: the ring needs %.1f MiB (%d slots x %.1f MiB) but %.1f MiB are "
                "available (%.1f MiB free of %.1f MiB%s)",
                id, need / 1048576.0, depth, per_slot / 1048576.0, budget / 1048576.0,
                free_b / 1048576.0, total_b / 1048576.0,
                s->device_max_bytes ? ", device_max_bytes set" : "");
        rc = GF_ENOMEM;
        goto fail;
    }
    if ((e = cudaStreamCreateWithFlags(&d->copy, cudaStreamNonBlocking)) != cudaSuccess) {
        rc = cuda_fail(e, "cudaStreamCreate", why, why_len);
        goto fail;
    }
    for (int i = 0; i < depth; i++) {
        dslot *sl = &d->slots[i];
        if ((in_bytes && (e = cudaMalloc(&sl->in, in_bytes)) != cudaSuccess) ||
            (e = cudaMalloc(&sl->out, out_bytes ? out_bytes : 1)) != cudaSuccess ||
            (flip_bytes && (e = cudaMalloc((void **)&sl->flips, flip_bytes)) != cudaSuccess) ||
            (e = cudaEventCreateWithFlags(&sl->ready, cudaEventDisableTiming)) != cudaSuccess ||
            (e = cudaEventCreateWithFlags(&sl->released, cudaEventDisableTiming)) !=
                cudaSuccess) {
            rc = cuda_fail(e, "allocating the device ring", why, why_len);
            goto fail;
        }
    }
    d->device_bytes = need;
    cudaSetDevice(prev);
    *out = d;
    return 0;
fail:
    gf__device_close(d);
    cudaSetDevice(prev);
    return rc;
}

void gf__device_close(gf__device *d)
{
    if (!d)
        return;
    int prev = 0;
    cudaGetDevice(&prev);
    cudaSetDevice(d->id);
    if (d->copy)
        cudaStreamSynchronize(d->copy);
    if (d->slots) {
        for (int i = 0; i < d->depth; i++) {
            dslot *sl = &d->slots[i];
            cudaFree(sl->in);
            cudaFree(sl->out);
            cudaFree(sl->flips);
            if (sl->ready)
                cudaEventDestroy(sl->ready);
            if (sl->released)
                cudaEventDestroy(sl->released);
        }
    }
    if (d->copy)
        cudaStreamDestroy(d->copy);
    cudaSetDevice(prev);
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

void *gf__host_alloc(gf__device *d, size_t bytes, int *pinned, char *why, size_t why_len)
{
    *pinned = 0;
    if (d) {
        if (d->pinned_max && d->pinned_now + bytes > d->pinned_max) {
            gf__why(why, why_len, "pinned memory cap of %.1f MiB reached: slots are pageable",
                    d->pinned_max / 1048576.0);
        } else {
            void *p = NULL;
            int prev = 0;
            cudaGetDevice(&prev);
            cudaSetDevice(d->id);
            cudaError_t e = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable);
            cudaSetDevice(prev);
            if (e == cudaSuccess) {
                d->pinned_now += bytes;
                *pinned = 1;
                return p;
            }
            gf__why(why, why_len, "cudaHostAlloc of %.1f MiB failed (%s): slots are pageable",
                    bytes / 1048576.0, cudaGetErrorName(e));
        }
    }
    return gf__host_alloc_pageable(bytes);
}

void gf__host_free(gf__device *d, void *p, int pinned)
{
    (void)d;
    if (pinned)
        cudaFreeHost(p);
    else
        free(p);
}

int gf__device_enqueue(gf__device *d, int i, const uint8_t *pixels, const uint8_t *flips,
                       int count, size_t cell_bytes, const gf__convert *cv, void (*done)(void *),
                       void *arg, char *why, size_t why_len)
{
    dslot *sl = &d->slots[i];
    cudaError_t e;
    nvtxRangePushA("gf copy+convert");
    if (sl->release_recorded && (e = cudaStreamWaitEvent(d->copy, sl->released, 0)) != cudaSuccess)
        goto fail;
    void *dst = sl->in ? sl->in : sl->out;
    if ((e = cudaMemcpyAsync(dst, pixels, (size_t)count * cell_bytes, cudaMemcpyHostToDevice,
                             d->copy)) != cudaSuccess)
        goto fail;
    if (sl->flips && flips &&
        (e = cudaMemcpyAsync(sl->flips, flips, (size_t)count, cudaMemcpyHostToDevice, d->copy)) !=
            cudaSuccess)
        goto fail;
    if (sl->in) {
        int rc = gf__convert_cuda(cv, sl->in, sl->out, sl->flips, count, d->copy, why, why_len);
        if (rc < 0) {
            nvtxRangePop();
            return rc;
        }
    }
    if ((e = cudaEventRecord(sl->ready, d->copy)) != cudaSuccess ||
        (e = cudaLaunchHostFunc(d->copy, done, arg)) != cudaSuccess)
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

int gf__device_release(gf__device *d, int i, void *stream)
{
    dslot *sl = &d->slots[i];
    if (cudaEventRecord(sl->released, (cudaStream_t)stream) != cudaSuccess)
        return GF_ENODEV;
    sl->release_recorded = 1;
    return 0;
}

int gf__device_wait(void *event, void *stream)
{
    if (!event)
        return 0;
    return cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, 0) == cudaSuccess
               ? 0
               : GF_ENODEV;
}

void gf__device_sync(gf__device *d)
{
    if (d && d->copy)
        cudaStreamSynchronize(d->copy);
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

int gf__device_open(gf__device **out, const gf_settings *s, int depth, size_t in_bytes,
                    size_t out_bytes, size_t flip_bytes, char *why, size_t why_len)
{
    (void)s, (void)depth, (void)in_bytes, (void)out_bytes, (void)flip_bytes;
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
                       int count, size_t cell_bytes, const gf__convert *cv, void (*done)(void *),
                       void *arg, char *why, size_t why_len)
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

int gf__device_release(gf__device *d, int i, void *stream)
{
    (void)d, (void)i, (void)stream;
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
