/* cudaemu: the API surface: configuration, the shared lock, devices,
 * errors and versions, and the checks every entry point makes (ENTER).
 * Any host thread calls these; a device fault (sticky) is set by a stream
 * worker (emu_launch.cpp) and read by every later call. */
#include "emu_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

namespace gf_cudaemu {

void violation(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cudaemu: CUDA misuse: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}

namespace {

long env_long(const char *name, long fallback)
{
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : fallback;
}

config read_config()
{
    config c;
    c.devices = (int)env_long("GF_CUDAEMU_DEVICES", 1);
    c.device_bytes = (size_t)env_long("GF_CUDAEMU_MEM_MB", 2048) << 20;
    long pmb = env_long("GF_CUDAEMU_PINNED_MB", -1);
    c.pinned_max = pmb < 0 ? -1 : pmb << 20;
    c.delay_us = env_long("GF_CUDAEMU_DELAY_US", 0);
    c.sync = env_long("GF_CUDAEMU_SYNC", 0) != 0;
    const long lazy = env_long("GF_CUDAEMU_LAZY_DEFAULT", 0);
    c.lazy_ms = lazy <= 0 ? 0 : lazy == 1 ? 100 : lazy;
    return c;
}

thread_local cudaError_t last_error = cudaSuccess;

}  // namespace

const config &cfg()
{
    static const config c = read_config();
    return c;
}

std::mutex &mu = *new std::mutex;
std::condition_variable &changed = *new std::condition_variable;

cudaError_t sticky[MAX_DEVICES];
thread_local int current_device;
thread_local bool in_callback;

cudaError_t fail(cudaError_t e)
{
    if (e != cudaSuccess)
        last_error = e;
    return e;
}

void enter(const char *fn)
{
    if (in_callback)
        violation("%s called from a stream callback (CUDA: not permitted, may deadlock)", fn);
}

bool have_devices()
{
    return cfg().devices > 0;
}

cudaError_t sticky_of(int device)
{
    std::lock_guard<std::mutex> lk(mu);
    return sticky[device];
}

}  // namespace gf_cudaemu

using namespace gf_cudaemu;

extern "C" {

const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
#define NAME(x) case x: return #x;
    NAME(cudaSuccess)
    NAME(cudaErrorInvalidValue)
    NAME(cudaErrorMemoryAllocation)
    NAME(cudaErrorInitializationError)
    NAME(cudaErrorInvalidConfiguration)
    NAME(cudaErrorInvalidMemcpyDirection)
    NAME(cudaErrorInsufficientDriver)
    NAME(cudaErrorInvalidDeviceFunction)
    NAME(cudaErrorNoDevice)
    NAME(cudaErrorInvalidDevice)
    NAME(cudaErrorInvalidResourceHandle)
    NAME(cudaErrorNotReady)
    NAME(cudaErrorIllegalAddress)
    NAME(cudaErrorLaunchFailure)
    NAME(cudaErrorNotPermitted)
    NAME(cudaErrorNotSupported)
    NAME(cudaErrorUnknown)
#undef NAME
    }
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    default: return "unknown error (cudaemu)";
    }
}

cudaError_t cudaGetLastError(void)
{
    if (cudaError_t fault = have_devices() ? sticky_of(current_device) : cudaSuccess)
        return fault; /* sticky: never cleared */
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void)
{
    if (cudaError_t fault = have_devices() ? sticky_of(current_device) : cudaSuccess)
        return fault;
    return last_error;
}

cudaError_t cudaDriverGetVersion(int *v)
{
    enter(__func__);
    *v = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v)
{
    enter(__func__);
    *v = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *count)
{
    enter(__func__);
    *count = cfg().devices > 0 ? cfg().devices : 0;
    return have_devices() ? cudaSuccess : fail(cudaErrorNoDevice);
}

cudaError_t cudaGetDevice(int *device)
{
    ENTER_RELEASE();
    *device = current_device;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    ENTER_RELEASE();
    if (device < 0 || device >= cfg().devices || device >= MAX_DEVICES)
        return fail(cudaErrorInvalidDevice);
    current_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device)
{
    ENTER();
    if (device < 0 || device >= cfg().devices)
        return fail(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "cudaemu %d (CPU emulation, not a GPU)", device);
    p->totalGlobalMem = cfg().device_bytes;
    p->sharedMemPerBlock = 48 * 1024;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 0x7fffffff;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 1;
    p->asyncEngineCount = 1;
    p->pciBusID = device;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *bus_id, int len, int device)
{
    ENTER();
    if (device < 0 || device >= cfg().devices)
        return fail(cudaErrorInvalidDevice);
    snprintf(bus_id, (size_t)len, "0000:%02x:00.0", device);
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    ENTER();
    std::unique_lock<std::mutex> lk(mu);
    drain_device(lk, current_device);
    return fail(sticky[current_device]); /* a fault in what it waited for */
}

cudaError_t gf_cudaemu_func_attributes(struct cudaFuncAttributes *attr, const void *func)
{
    ENTER();
    if (!attr || !func)
        return fail(cudaErrorInvalidDeviceFunction);
    memset(attr, 0, sizeof *attr);
    attr->maxThreadsPerBlock = 1024;
    attr->ptxVersion = 90;
    attr->binaryVersion = 90;
    return cudaSuccess;
}

}  /* extern "C" */
