/*
 * The transfer stage of a build without CUDA (device.h): no device opens,
 * so the loader runs its CPU path; host slots are pageable memory. Any
 * thread (nothing here has state). The CUDA build has device.c instead.
 */
#include "device.h"

#include "config.h"

#if !GF_HAVE_CUDA

int gf__device_open(gf__device **out, const gf_settings *s, int id_from_env, int depth,
                    int capacity, size_t in_bytes, size_t out_bytes, size_t flip_bytes,
                    size_t field_bytes, size_t target_bytes, char *why, size_t why_len)
{
    (void)s, (void)id_from_env, (void)depth, (void)capacity, (void)in_bytes, (void)out_bytes;
    (void)flip_bytes, (void)field_bytes, (void)target_bytes;
    *out = NULL;
    gf__why(why, why_len, "this build has no CUDA (meson -Dcuda=enabled)");
    return GF_ENODEV;
}

int gf__device_grow(gf__device *d, int i, char *why, size_t why_len)
{
    (void)d, (void)i;
    gf__why(why, why_len, "this build has no CUDA");
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
                       const uint8_t *fields, const gf__device_mix *mix, int count,
                       size_t cell_bytes, const gf__convert *cv,
                       void (*done)(void *, int), void (*queued)(void *), void *arg,
                       bool offload, char *why, size_t why_len)
{
    (void)d, (void)i, (void)pixels, (void)flips, (void)fields, (void)mix, (void)count;
    (void)cell_bytes;
    (void)cv;
    (void)done, (void)queued, (void)arg, (void)offload;
    gf__why(why, why_len, "this build has no CUDA");
    return GF_ENODEV;
}

bool gf__device_offloads(const gf__device *d)
{
    (void)d;
    return false;
}

void *gf__device_out(const gf__device *d, int i)
{
    (void)d, (void)i;
    return NULL;
}

void *gf__device_fields(const gf__device *d, int i)
{
    (void)d, (void)i;
    return NULL;
}

void *gf__device_targets(const gf__device *d, int i)
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

void gf__device_harvest(gf__device *d)
{
    (void)d;
}

void gf__device_h2d(gf__device *d, uint64_t *bytes, uint64_t *copies, double *s)
{
    (void)d;
    *bytes = *copies = 0;
    *s = 0;
}

void gf__device_queued(gf__device *d, uint64_t *by_controller, uint64_t *by_copy_thread)
{
    (void)d;
    *by_controller = *by_copy_thread = 0;
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
