/*
 * The copy path of the CUDA transfer stage (device.h, the invariants at
 * the top of device.c): each batch's copy in, conversion, ready event and
 * done() queued on its copy stream, by the controller or, with pageable
 * host slots, posted to gf-copy; the copies' timing, read back once they
 * have run (harvest); and waiting for all of it (sync).
 *
 * A mixed batch (settings.augment's mix) adds its targets' copy and the
 * mix kernel after the convert kernel: the ready event covers both.
 *
 * Threads: gf__device_enqueue and harvest on the controller; queue_batch
 * there or in copy_main on gf-copy; copied() on a CUDA thread; sync on
 * the thread stopping the pipeline (its CUDA calls on the helper); the
 * totals read by any thread, under stat_mu.
 */
#include "config.h"

#if GF_HAVE_CUDA

#include "augment.h" /* gf__mix_cuda */
#include "device_impl.h"

#include <nvtx3/nvToolsExt.h>

/* A CUDA thread, after the batch's copy and kernel, or with the error
 * that stopped the stream. No CUDA calls here. */
static void CUDART_CB copied(cudaStream_t stream, cudaError_t status, void *arg)
{
    (void)stream;
    dslot *sl = arg;
    void (*done)(void *, int) = sl->done;
    void *done_arg = sl->done_arg;
    atomic_store_explicit(&sl->copied, 1, memory_order_release);
    done(done_arg, status == cudaSuccess ? 0 : (int)status);
}

/* Queues slot sl's batch in flight on its copy stream (the order at the
 * top); *err is the CUDA error on failure. On the controller or gf-copy. */
static int queue_batch(gf__device *d, dslot *sl, cudaError_t *err, char *why, size_t why_len)
{
    const int i = (int)(sl - d->slots);
    cudaStream_t copy = d->copy[i % d->n_copy];
    const size_t bytes = (size_t)sl->count * sl->cell_bytes;
    const bool with_flips = sl->flips && sl->host_flips;
    /* the batch's rows only: a partial batch's rest is never read */
    const size_t target_bytes =
        sl->mix.draw ? (size_t)sl->count * (size_t)sl->mix.classes * sizeof(float) : 0;
    cudaError_t e;
    nvtxRangePushA("gf copy+convert");
    if (sl->release_recorded && (e = cudaStreamWaitEvent(copy, sl->released, 0)) != cudaSuccess)
        goto fail;
    void *dst = sl->in ? sl->in : sl->out;
    if ((e = cudaEventRecord(sl->h2d_from, copy)) != cudaSuccess ||
        (e = cudaMemcpyAsync(dst, sl->pixels, bytes, cudaMemcpyHostToDevice, copy)) !=
            cudaSuccess ||
        (with_flips && (e = cudaMemcpyAsync(sl->flips, sl->host_flips, (size_t)sl->count,
                                            cudaMemcpyHostToDevice, copy)) != cudaSuccess) ||
        (sl->host_fields && (e = cudaMemcpyAsync(sl->fields, sl->host_fields, d->field_bytes,
                                                 cudaMemcpyHostToDevice, copy)) != cudaSuccess) ||
        (sl->mix.draw &&
         (e = cudaMemcpyAsync(sl->targets, sl->mix.targets, target_bytes, cudaMemcpyHostToDevice,
                              copy)) != cudaSuccess) ||
        (e = cudaEventRecord(sl->h2d_to, copy)) != cudaSuccess)
        goto fail;
    sl->h2d_bytes = bytes + (with_flips ? (size_t)sl->count : 0) +
                    (sl->host_fields ? d->field_bytes : 0) + target_bytes;
    if (sl->in) {
        int rc = gf__convert_cuda(sl->cv, sl->in, sl->out, sl->flips, sl->count, copy, why,
                                  why_len);
        /* the mix reads the whole converted batch: after the convert kernel, on its stream */
        if (rc == 0 && sl->mix.draw)
            rc = gf__mix_cuda(sl->cv, sl->mix.draw, sl->out, sl->count, copy, why, why_len);
        if (rc < 0) {
            nvtxRangePop();
            *err = cudaErrorLaunchFailure;
            return rc;
        }
    }
    if ((e = cudaEventRecord(sl->ready, copy)) != cudaSuccess ||
        (e = cudaStreamAddCallback(copy, copied, sl, 0)) != cudaSuccess)
        goto fail;
    nvtxRangePop();
    return 0;
fail:
    nvtxRangePop();
    *err = e;
    return cuda_fail(e, "queueing a batch copy", why, why_len);
}

/* gf-copy: a posted batch. Failing, it owes done() the error itself: no
 * callback was queued (cudaStreamAddCallback comes last). */
static void copy_main(void *p)
{
    dslot *sl = p;
    gf__device *d = sl->d;
    char why[256];
    cudaError_t e = (cudaError_t)d->copier.set;
    if (e == cudaSuccess && queue_batch(d, sl, &e, why, sizeof why) == 0) {
        sl->queued(sl->done_arg);
        return;
    }
    sl->h2d_bytes = 0;
    sl->done(sl->done_arg, e != cudaSuccess ? (int)e : (int)cudaErrorUnknown);
}

void gf__device_harvest(gf__device *d)
{
    if (!d)
        return;
    uint64_t bytes = 0, n = 0;
    double s = 0;
    const int depth = atomic_load_explicit(&d->depth, memory_order_acquire);
    for (int i = 0; i < depth; i++) {
        dslot *sl = &d->slots[i];
        if (!atomic_load_explicit(&sl->copied, memory_order_acquire))
            continue;
        atomic_store_explicit(&sl->copied, 0, memory_order_relaxed);
        float ms = 0;
        if (!sl->h2d_bytes)
            continue;
        if (cudaEventElapsedTime(&ms, sl->h2d_from, sl->h2d_to) == cudaSuccess && ms >= 0) {
            bytes += sl->h2d_bytes;
            n++;
            s += ms * 1e-3;
        } else {
            cudaGetLastError(); /* a failed stream's: the loader halts on its own */
        }
        sl->h2d_bytes = 0;
    }
    if (n) {
        pthread_mutex_lock(&d->stat_mu);
        d->h2d_bytes += bytes;
        d->h2d_copies += n;
        d->h2d_s += s;
        pthread_mutex_unlock(&d->stat_mu);
    }
}

int gf__device_enqueue(gf__device *d, int i, const uint8_t *pixels, const uint8_t *flips,
                       const uint8_t *fields, const gf__device_mix *mix, int count,
                       size_t cell_bytes, const gf__convert *cv,
                       void (*done)(void *, int), void (*queued)(void *), void *arg,
                       bool offload, char *why, size_t why_len)
{
    gf__device_harvest(d); /* slot i's last copy, before it is timed again */
    dslot *sl = &d->slots[i];
    sl->pixels = pixels;
    sl->host_flips = flips;
    sl->host_fields = d->field_bytes ? fields : NULL;
    sl->mix = mix && d->target_bytes ? *mix : (gf__device_mix){0};
    sl->count = count;
    sl->cell_bytes = cell_bytes;
    sl->cv = cv;
    sl->done = done;
    sl->queued = queued;
    sl->done_arg = arg;
    if (offload) {
        atomic_fetch_add_explicit(&d->queued_off, 1, memory_order_relaxed);
        sl->call = (gf__call){.fn = copy_main, .arg = sl};
        gf__dthread_post(&d->copier, &sl->call);
        return 1;
    }
    atomic_fetch_add_explicit(&d->queued_here, 1, memory_order_relaxed);
    cudaError_t e;
    return queue_batch(d, sl, &e, why, why_len);
}

bool gf__device_offloads(const gf__device *d)
{
    return d && atomic_load_explicit(&((gf__device *)d)->offload, memory_order_acquire);
}

static void sync_main(void *p)
{
    gf__device *d = p;
    for (int i = 0; i < d->n_copy; i++)
        if (d->copy[i])
            cudaStreamSynchronize(d->copy[i]);
    gf__device_harvest(d); /* the enqueuers are done: the last copies' times */
}

void gf__device_sync(gf__device *d)
{
    if (!d)
        return;
    gf__dthread_drain(&d->copier);
    on_device(d, sync_main, d);
}

void gf__device_h2d(gf__device *d, uint64_t *bytes, uint64_t *copies, double *s)
{
    *bytes = *copies = 0;
    *s = 0;
    if (!d)
        return;
    pthread_mutex_lock(&d->stat_mu);
    *bytes = d->h2d_bytes;
    *copies = d->h2d_copies;
    *s = d->h2d_s;
    pthread_mutex_unlock(&d->stat_mu);
}

void gf__device_queued(gf__device *d, uint64_t *by_controller, uint64_t *by_copy_thread)
{
    *by_controller = d ? atomic_load(&d->queued_here) : 0;
    *by_copy_thread = d ? atomic_load(&d->queued_off) : 0;
}

#endif
