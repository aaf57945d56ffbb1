/* What device.c and device_copy.c share (the CUDA build only): a device
 * slot, the open device, and two helpers. device.c says which thread
 * touches what. */
#ifndef GF_DEVICE_IMPL_H
#define GF_DEVICE_IMPL_H

#include "device.h"
#include "device_thread.h"

#include <cuda_runtime_api.h>
#include <stdatomic.h>
#include <stdbool.h>

struct gf__device;

typedef struct dslot {
    struct gf__device *d;
    void *in;        /* uint8 staging, or NULL: the copy lands in out */
    void *out;
    uint8_t *flips;
    uint8_t *fields;   /* field_bytes: the batch's arrays and masks */
    float *targets;    /* target_bytes: a mixed batch's soft targets */
    cudaEvent_t ready, released;
    cudaEvent_t h2d_from, h2d_to; /* around the copy in: stats.h2d_s */
    int release_recorded;
    /* The batch in flight, from gf__device_enqueue to done(). */
    void (*done)(void *, int);
    void (*queued)(void *);
    void *done_arg;
    const uint8_t *pixels, *host_flips, *host_fields;
    gf__device_mix mix; /* draw NULL: no mix */
    int count;
    size_t cell_bytes;
    const gf__convert *cv;
    gf__call call;     /* its queueing, posted to gf-copy */
    size_t h2d_bytes;  /* timed by h2d_from/to, until harvested */
    atomic_int copied; /* done() ran: h2d_from/to have completed */
} dslot;

struct gf__device {
    int id;
    /* Slots made: prefetch_depth at open, more by gf__device_grow on the
     * consumer's thread, published (release) once whole; room for
     * capacity, so `slots` never moves. */
    atomic_int depth;
    int capacity;
    gf__dthread helper; /* gf-cuda */
    gf__dthread copier; /* gf-copy: started with the first pageable slot */
    atomic_bool offload; /* batches are queued on gf-copy (set once copier runs) */
    struct gf__device *next_open; /* open_devices */
    cudaStream_t *copy; /* n_copy streams: 1, or one per prefetch slot (slot i
                           uses copy[i % n_copy]) */
    int n_copy;
    dslot *slots;
    size_t in_bytes, out_bytes, flip_bytes, field_bytes, target_bytes;
    uint64_t pinned_max, pinned_now;
    uint64_t device_max;      /* s->device_max_bytes: 0 = what is free */
    _Atomic uint64_t device_bytes; /* observers read it while slots are added */
    pthread_mutex_t stat_mu; /* the copy totals */
    uint64_t h2d_bytes, h2d_copies;
    double h2d_s;
    atomic_uint_fast64_t queued_here, queued_off; /* by the controller, by gf-copy */
};

static inline int cuda_fail(cudaError_t e, const char *what, char *why, size_t why_len)
{
    gf__why(why, why_len, "%s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
    return e == cudaErrorMemoryAllocation ? GF_ENOMEM : GF_ENODEV;
}

/* fn(arg) on d's helper, on the loader's device. */
static inline cudaError_t on_device(gf__device *d, void (*fn)(void *), void *arg)
{
    return (cudaError_t)gf__dthread_call(&d->helper, fn, arg);
}

#endif
