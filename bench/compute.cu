/*
 * The CUDA side of `gpufeed bench --overlap`: a kernel that keeps the GPU
 * busy for a set time (the stand-in for a training step) and the few
 * runtime calls bench.c needs around it, behind a C interface so bench.c
 * stays C and builds without CUDA. Streams and events travel as void *
 * (cudaStream_t, cudaEvent_t), as in gpufeed.h.
 *
 * Every function returns 0, or -1 with the reason in cli_cuda_error().
 * The reason lives in one static buffer: call these from one thread.
 */
#include <cuda_runtime.h>
#include <stdio.h>

#include "cliutil.h"

static char last_error[256];

static int fail(const char *what, cudaError_t e)
{
    snprintf(last_error, sizeof last_error, "%s: %s", what, cudaGetErrorString(e));
    return -1;
}

#define CHECK(call)                                                            \
    do {                                                                       \
        cudaError_t e_ = (call);                                               \
        if (e_ != cudaSuccess)                                                 \
            return fail(#call, e_);                                            \
    } while (0)

extern "C" const char *cli_cuda_error(void)
{
    return last_error;
}

static __device__ __forceinline__ unsigned long long globaltimer_ns(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* One thread that watches the GPU's nanosecond clock: the stream is busy
 * for ns whatever the GPU's speed or clocks, which a loop of arithmetic
 * would not give. (%globaltimer ticks every ~1 us on some parts: far
 * below the milliseconds asked for here.) */
static __global__ void spin_kernel(unsigned long long ns)
{
    unsigned long long t0 = globaltimer_ns();
    while (globaltimer_ns() - t0 < ns) {
    }
}

extern "C" int cli_cuda_spin(double ms, void *stream)
{
    if (!(ms >= 0) || ms > 1e7) {
        snprintf(last_error, sizeof last_error, "cli_cuda_spin: bad duration %g ms", ms);
        return -1;
    }
    spin_kernel<<<1, 1, 0, (cudaStream_t)stream>>>((unsigned long long)(ms * 1e6));
    CHECK(cudaGetLastError());
    return 0;
}

extern "C" int cli_cuda_set_device(int device)
{
    CHECK(cudaSetDevice(device));
    return 0;
}

/* Non-blocking: no implicit ordering with the legacy default stream,
 * where the library (or anything else) may queue work. */
extern "C" int cli_cuda_stream_create(void **out)
{
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    *out = (void *)s;
    return 0;
}

extern "C" void cli_cuda_stream_destroy(void *stream)
{
    if (stream)
        cudaStreamDestroy((cudaStream_t)stream);
}

extern "C" int cli_cuda_stream_sync(void *stream)
{
    CHECK(cudaStreamSynchronize((cudaStream_t)stream));
    return 0;
}

extern "C" int cli_cuda_event_create(void **out)
{
    cudaEvent_t e;
    CHECK(cudaEventCreate(&e)); /* with timing */
    *out = (void *)e;
    return 0;
}

extern "C" void cli_cuda_event_destroy(void *event)
{
    if (event)
        cudaEventDestroy((cudaEvent_t)event);
}

extern "C" int cli_cuda_event_record(void *event, void *stream)
{
    CHECK(cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream));
    return 0;
}

extern "C" int cli_cuda_event_ms(void *start, void *end, double *ms)
{
    float f;
    CHECK(cudaEventElapsedTime(&f, (cudaEvent_t)start, (cudaEvent_t)end));
    *ms = f;
    return 0;
}

extern "C" int cli_cuda_malloc(void **out, size_t bytes)
{
    CHECK(cudaMalloc(out, bytes ? bytes : 1));
    return 0;
}

extern "C" void cli_cuda_free(void *p)
{
    if (p)
        cudaFree(p);
}

/* Synchronous, and from whatever memory src is in: the naive copy. */
extern "C" int cli_cuda_memcpy_h2d(void *dst, const void *src, size_t bytes)
{
    CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    return 0;
}
