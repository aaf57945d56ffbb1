/* The transfer stage: pinned host slots, device slots, the copy streams,
 * and a helper thread bound to the device for calls that must run there.
 * Everything CUDA lives behind this interface (src/device.c); without CUDA
 * (build or machine) gf__device_open says so and the loader runs its CPU
 * path. */
#ifndef GF_DEVICE_H
#define GF_DEVICE_H

#include "common.h"
#include "convert.h"

typedef struct gf__device gf__device;

/* Opens device s->device_id (the loader resolved it; id_from_env: it is
 * the launcher's local rank, taken modulo the visible devices when past
 * them), creates the copy stream and allocates `depth` device slots of
 * in_bytes (uint8 staging, 0 = copy straight to out) + out_bytes +
 * flip_bytes, checking the budget (s->device_max_bytes, or free memory)
 * first. The caller's current device is never touched. Returns 0;
 * GF_ENODEV (built without CUDA, no driver, no device) or GF_ENOMEM (over
 * budget or cudaMalloc failed), with why. */
int gf__device_open(gf__device **out, const gf_settings *s, int id_from_env, int depth,
                    size_t in_bytes, size_t out_bytes, size_t flip_bytes, char *why,
                    size_t why_len);
void gf__device_close(gf__device *d);
int gf__device_id(const gf__device *d);
uint64_t gf__device_bytes(const gf__device *d);

/* Makes d's device current for the calling thread (the controller). */
int gf__device_bind(gf__device *d);

/* Host slot memory: pinned (cudaHostAlloc) when d is not NULL and the
 * pinned total stays within s->pinned_max_bytes; else page-aligned
 * pageable memory, *pinned = 0 and the reason in why. NULL on failure. */
void *gf__host_alloc(gf__device *d, size_t bytes, int *pinned, char *why, size_t why_len);
void gf__host_free(gf__device *d, void *p, int pinned);

/* Controller thread. Queues on the copy stream, in this order: a wait for
 * the event recorded when device slot i was last released; the copy of
 * count samples (and their flips) in; the conversion into slot i's output;
 * the ready event; then done(arg, cuda_error) on a CUDA thread, after
 * which the host memory may be reused; cuda_error is 0, or the
 * cudaError_t that stopped the stream. pixels and flips should be pinned
 * (gf__host_alloc): a copy from pageable memory may wait for the stream,
 * i.e. for the consumer's release. Returns 0 or GF_ENODEV with why. */
int gf__device_enqueue(gf__device *d, int i, const uint8_t *pixels, const uint8_t *flips,
                       int count, size_t cell_bytes, const gf__convert *cv,
                       void (*done)(void *, int), void *arg, char *why, size_t why_len);
void *gf__device_out(const gf__device *d, int i);
void *gf__device_ready_event(const gf__device *d, int i);

/* Consumer thread: records slot i's release event on stream (NULL: the
 * legacy default stream of the loader's device). GF_EINVAL: stream is not
 * a stream; GF_ENODEV: the device failed. */
int gf__device_release(gf__device *d, int i, void *stream, char *why, size_t why_len);
/* stream waits for event (cudaStreamWaitEvent), a ready event of an open
 * device; NULL: the legacy default stream of that event's device, as for
 * gf__device_release. */
int gf__device_wait(void *event, void *stream);
/* Blocks until everything queued on the copy stream has run. */
void gf__device_sync(gf__device *d);

/* NVTX ranges around the pipeline's stages (no-ops without CUDA).
 * gf__range_init runs NVTX's lazy setup before any loader thread exists:
 * done on first use by several threads at once, it races. */
void gf__range_init(void);
void gf__range_push(const char *name);
void gf__range_pop(void);

#endif
