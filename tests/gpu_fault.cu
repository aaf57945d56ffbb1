/* A kernel that faults (test_gpu_fault.c). */
#include <cuda_runtime.h>

static __global__ void trap_kernel(void)
{
    __trap();
}

/* The fault may already show in the launch's own error check, or only
 * later: the caller waits on the stream for it. */
extern "C" void tu_cuda_trap(void *stream)
{
    trap_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>();
}
