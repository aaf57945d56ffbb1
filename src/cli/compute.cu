/*
 * The CUDA side of `gpufeed bench --overlap`: a kernel that keeps the GPU
 * busy for a set time (the stand-in for a training step) and the few
 * runtime calls bench.c needs around it, behind a C interface so bench.c
 * stays C and builds without CUDA. Streams and events travel as void *
 * (cudaStream_t, cudaEvent_t), as in gpufeed.h.
 *
 * Also the facts `gpufeed doctor` reports (versions, devices, whether the
 * kernels built here run on a device) and the copy-bandwidth measurement
 * shared by doctor and gpufeed-bandwidth.
 *
 * Every function returns 0, or -1 with the reason in cli_cuda_error().
 * The reason lives in one static buffer: call these from one thread.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compute.h"

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
#ifdef GF_CUDA_EMU
    return GF_CUDAEMU_GLOBALTIMER();
#else
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
#endif
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

/* Synchronous, and from whatever memory src is in: the naive copy. A
 * cudaMemcpy from pageable memory returns once src is staged, before the
 * device has the bytes, and the legacy stream it runs on is not ordered
 * with non-blocking streams: the legacy stream is waited for too. */
extern "C" int cli_cuda_memcpy_h2d(void *dst, const void *src, size_t bytes)
{
    CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaStreamSynchronize(cudaStreamLegacy));
    return 0;
}

/* The naive copy on the stream that reads dst (ordered before its next
 * kernels and after its queued ones), waited for: src is free on return. */
extern "C" int cli_cuda_copy_h2d(void *dst, const void *src, size_t bytes, void *stream)
{
    CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, (cudaStream_t)stream));
    CHECK(cudaStreamSynchronize((cudaStream_t)stream));
    return 0;
}

/* ---- gpufeed doctor ------------------------------------------------------ */

extern "C" void cli_cuda_probe_run(cli_cuda_probe *out)
{
    memset(out, 0, sizeof *out);
    /* Both succeed without a driver: the driver version is then 0. */
    if (cudaDriverGetVersion(&out->driver_version) != cudaSuccess)
        out->driver_version = 0;
    if (cudaRuntimeGetVersion(&out->runtime_version) != cudaSuccess)
        out->runtime_version = 0;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        out->count_error = (int)e;
        snprintf(out->count_error_name, sizeof out->count_error_name, "%s", cudaGetErrorName(e));
        snprintf(out->count_error_text, sizeof out->count_error_text, "%s",
                 cudaGetErrorString(e));
        cudaGetLastError(); /* not sticky; clear it for later calls */
        n = 0;
    }
    out->count = n;
}

extern "C" int cli_cuda_device_info(int device, cli_cuda_device *out)
{
    memset(out, 0, sizeof *out);
    cudaDeviceProp p;
    CHECK(cudaGetDeviceProperties(&p, device));
    snprintf(out->name, sizeof out->name, "%s", p.name);
    out->major = p.major;
    out->minor = p.minor;
    out->total_bytes = p.totalGlobalMem;
    out->async_engines = p.asyncEngineCount;
    out->multiprocessors = p.multiProcessorCount;
    if (cudaDeviceGetPCIBusId(out->pci_bus_id, (int)sizeof out->pci_bus_id, device) !=
        cudaSuccess)
        snprintf(out->pci_bus_id, sizeof out->pci_bus_id, "%04x:%02x:%02x.0", p.pciDomainID,
                 p.pciBusID, p.pciDeviceID);
    CHECK(cudaSetDevice(device));
    size_t free_b = 0, total_b = 0;
    cudaError_t e = cudaMemGetInfo(&free_b, &total_b); /* creates the context */
    if (e != cudaSuccess) {
        snprintf(out->kernel_error, sizeof out->kernel_error, "no context: %s (%s)",
                 cudaGetErrorName(e), cudaGetErrorString(e));
        cudaGetLastError();
        return 0;
    }
    out->free_bytes = free_b;
    /* compute.cu is compiled with the library's -gencode list (sm_80 and
     * sm_90 code, compute_90 PTX): no image here means the library's
     * conversion kernel cannot run on this device either. */
    cudaFuncAttributes a;
    e = cudaFuncGetAttributes(&a, spin_kernel);
    if (e != cudaSuccess) {
        snprintf(out->kernel_error, sizeof out->kernel_error, "%s (%s)", cudaGetErrorName(e),
                 cudaGetErrorString(e));
        cudaGetLastError();
    } else {
        out->binary_version = a.binaryVersion;
        out->ptx_version = a.ptxVersion;
    }
    return 0;
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* GB/s of reps copies of n bytes, after one untimed copy. */
static int measure_copy(void *dst, const void *src, size_t n, cudaMemcpyKind kind, int reps,
                        cudaStream_t st, cudaEvent_t a, cudaEvent_t b, double *gbs)
{
    CHECK(cudaMemcpyAsync(dst, src, n, kind, st));
    CHECK(cudaEventRecord(a, st));
    for (int i = 0; i < reps; i++)
        CHECK(cudaMemcpyAsync(dst, src, n, kind, st));
    CHECK(cudaEventRecord(b, st));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    *gbs = ms > 0 ? (double)n * reps / (ms * 1e-3) / 1e9 : 0;
    return 0;
}

static int bandwidth_run(size_t big, const size_t *sizes, const int *reps, cudaStream_t *st,
                         cudaEvent_t *a, cudaEvent_t *b, void **d, void **pinned, void **pageable,
                         cli_bandwidth *out)
{
    CHECK(cudaStreamCreateWithFlags(st, cudaStreamNonBlocking));
    CHECK(cudaEventCreate(a));
    CHECK(cudaEventCreate(b));
    CHECK(cudaMalloc(d, big));
    CHECK(cudaHostAlloc(pinned, big, cudaHostAllocDefault));
    *pageable = malloc(big);
    if (!*pageable) {
        snprintf(last_error, sizeof last_error, "out of host memory for %zu bytes", big);
        return -1;
    }
    /* Touched, so page faults are not timed as copies. */
    memset(*pinned, 1, big);
    memset(*pageable, 1, big);
    for (int k = 0; k < 2; k++) {
        const cudaMemcpyKind h2d = cudaMemcpyHostToDevice, d2h = cudaMemcpyDeviceToHost;
        if (measure_copy(*d, *pinned, sizes[k], h2d, reps[k], *st, *a, *b, &out->gbs[k][0]) ||
            measure_copy(*d, *pageable, sizes[k], h2d, reps[k], *st, *a, *b, &out->gbs[k][1]) ||
            measure_copy(*pinned, *d, sizes[k], d2h, reps[k], *st, *a, *b, &out->gbs[k][2]) ||
            measure_copy(*pageable, *d, sizes[k], d2h, reps[k], *st, *a, *b, &out->gbs[k][3]))
            return -1;
    }
    return 0;
}

extern "C" int cli_cuda_bandwidth(int device, size_t batch_bytes, size_t large_bytes,
                                  int batch_reps, int large_reps, cli_bandwidth *out)
{
    memset(out, 0, sizeof *out);
    if (!batch_bytes || !large_bytes || batch_reps < 1 || large_reps < 1) {
        snprintf(last_error, sizeof last_error, "cli_cuda_bandwidth: bad sizes or repetitions");
        return -1;
    }
    CHECK(cudaSetDevice(device));
    double t0 = wall_s();
    size_t sizes[2] = {batch_bytes, large_bytes};
    int reps[2] = {batch_reps, large_reps};
    size_t big = batch_bytes > large_bytes ? batch_bytes : large_bytes;
    cudaStream_t st = NULL;
    cudaEvent_t a = NULL, b = NULL;
    void *d = NULL, *pinned = NULL, *pageable = NULL;
    int rc = bandwidth_run(big, sizes, reps, &st, &a, &b, &d, &pinned, &pageable, out);
    if (st)
        cudaStreamSynchronize(st);
    cudaFree(d);
    cudaFreeHost(pinned);
    free(pageable);
    if (a)
        cudaEventDestroy(a);
    if (b)
        cudaEventDestroy(b);
    if (st)
        cudaStreamDestroy(st);
    for (int k = 0; k < 2; k++) {
        out->bytes[k] = sizes[k];
        out->reps[k] = reps[k];
    }
    out->seconds = wall_s() - t0;
    return rc;
}
