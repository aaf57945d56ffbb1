/* The transfer stage: pinned host slots, device slots, the copy streams,
 * and the threads bound to the device: a helper for calls that must run
 * there, and a copy thread for pageable slots. Everything CUDA lives
 * behind this interface (src/device.c, src/device_thread.c); without CUDA
 * in the build (src/device_nocuda.c) or the machine, gf__device_open says
 * so and the loader runs its CPU path. */
#ifndef GF_DEVICE_H
#define GF_DEVICE_H

#include "common.h"
#include "convert.h"

#include <stdbool.h>
#include <stdlib.h>

/* Page-aligned pageable memory, for host slots that are not pinned; one
 * of 2 MiB or more 2 MiB-aligned, with huge pages asked for (the ring's
 * first pass faulted 9,400 times for a 37 MiB ring). free()s. */
static inline void *gf__host_alloc_pageable(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, bytes >= GF__HUGE_PAGE ? GF__HUGE_PAGE : 4096, bytes ? bytes : 1))
        return NULL;
    gf__advise_huge(p, bytes);
    return p;
}

typedef struct gf__device gf__device;

/* Opens device s->device_id (the loader resolved it; id_from_env: it is
 * the launcher's local rank, taken modulo the visible devices when past
 * them), creates the copy stream and allocates `depth` device slots of
 * in_bytes (uint8 staging, 0 = copy straight to out) + out_bytes +
 * flip_bytes + field_bytes (a batch's arrays and masks, copied as they
 * are), checking the budget (s->device_max_bytes, or free memory)
 * first, with room for `capacity` slots in all. The caller's current
 * device is never touched. Returns 0; GF_ENODEV (built without CUDA, no
 * driver, no device) or GF_ENOMEM (over budget or cudaMalloc failed),
 * with why. */
int gf__device_open(gf__device **out, const gf_settings *s, int id_from_env, int depth,
                    int capacity, size_t in_bytes, size_t out_bytes, size_t flip_bytes,
                    size_t field_bytes, size_t target_bytes, char *why, size_t why_len);
/* The consumer's thread: device slot i (the next, or one made already),
 * within device_max_bytes and the free memory. Returns 0, or GF_ENOMEM /
 * GF_ENODEV with why. */
int gf__device_grow(gf__device *d, int i, char *why, size_t why_len);
void gf__device_close(gf__device *d);
int gf__device_id(const gf__device *d);
uint64_t gf__device_bytes(const gf__device *d);

/* Makes d's device current for the calling thread (the controller). */
int gf__device_bind(gf__device *d);

/* Host slot memory: pinned (cudaHostAlloc) when d is not NULL and the
 * pinned total stays within s->pinned_max_bytes; else page-aligned
 * pageable memory, *pinned = 0 and the reason in why, and from then on d
 * queues every batch on its copy thread. NULL on failure. gf_open's
 * thread, or the consumer's adding a slot (gf__ring_grow). */
void *gf__host_alloc(gf__device *d, size_t bytes, int *pinned, char *why, size_t why_len);
void gf__host_free(gf__device *d, void *p, int pinned);

/* settings.augment's mix for one batch: its draw, and its soft targets in
 * host memory (copied with the pixels into the slot's target_bytes); the
 * mix kernel runs after the convert kernel. Both pointed at stay valid
 * until done() (the host slot's); the struct is copied. */
typedef struct gf__device_mix {
    const struct gf__mix_draw *draw;
    const float *targets; /* count x classes */
    int classes;
} gf__device_mix;

/* Controller thread, into device slot i (fed from any host slot's
 * pixels). Queues on the copy stream, in this order: a wait for
 * the event recorded when device slot i was last released; the copy of
 * count samples (and their flips, the fields' field_bytes unless
 * fields is NULL, and mix's targets unless mix is NULL) in, between two
 * timing events; the conversion into slot i's output, then mix's kernel
 * over it; the ready event; then
 * done(arg, cuda_error) on a CUDA thread, after which the host memory may
 * be reused; cuda_error is 0, or the cudaError_t that stopped the stream
 * or failed the queueing. Returns 0: queued, the batch may be handed out;
 * or GF_ENODEV with why.
 * With pageable host slots (offload, which the caller read once from
 * gf__device_offloads: a copy from pageable memory waits for the stream,
 * i.e. for the consumer's release) the queueing is posted to the copy
 * thread, which does it in the same order,
 * then calls queued(arg) (the batch may be handed out from then on), or
 * done(arg, error) alone if it failed. Returns 1 then. */
int gf__device_enqueue(gf__device *d, int i, const uint8_t *pixels, const uint8_t *flips,
                       const uint8_t *fields, const gf__device_mix *mix, int count,
                       size_t cell_bytes, const gf__convert *cv,
                       void (*done)(void *, int), void (*queued)(void *), void *arg,
                       bool offload, char *why, size_t why_len);
/* Whether batches are queued on the copy thread (some host slot is
 * pageable); false -> true at most once, when a slot is added. */
bool gf__device_offloads(const gf__device *d);
void *gf__device_out(const gf__device *d, int i);
/* Device slot i's field_bytes: a batch's arrays and masks. */
void *gf__device_fields(const gf__device *d, int i);
/* Device slot i's target_bytes: a mixed batch's soft targets. */
void *gf__device_targets(const gf__device *d, int i);
void *gf__device_ready_event(const gf__device *d, int i);

/* Consumer thread: records slot i's release event on stream (NULL: the
 * legacy default stream of the loader's device). GF_EINVAL: stream is not
 * a stream; GF_ENODEV: the device failed. */
int gf__device_release(gf__device *d, int i, void *stream, char *why, size_t why_len);
/* stream waits for event (cudaStreamWaitEvent), a ready event of an open
 * device; NULL: the legacy default stream of that event's device, as for
 * gf__device_release. */
int gf__device_wait(void *event, void *stream);
/* Blocks until the copy thread has queued what was posted and everything
 * queued on the copy streams has run. */
void gf__device_sync(gf__device *d);

/* Controller thread: adds the copies whose done() has run to the totals,
 * from their timing events (complete by then: this never waits). */
void gf__device_harvest(gf__device *d);
/* The totals so far, any thread: bytes copied in, the copies timed, and
 * their seconds on the GPU. */
void gf__device_h2d(gf__device *d, uint64_t *bytes, uint64_t *copies, double *s);
/* Tests: batches queued by the controller and by the copy thread. */
void gf__device_queued(gf__device *d, uint64_t *by_controller, uint64_t *by_copy_thread);

/* NVTX ranges around the pipeline's stages (no-ops without CUDA).
 * gf__range_init runs NVTX's lazy setup before any loader thread exists:
 * done on first use by several threads at once, it races. */
void gf__range_init(void);
void gf__range_push(const char *name);
void gf__range_pop(void);

#endif
