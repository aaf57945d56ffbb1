/* cudaemu: NVTX ranges are no-ops here. */
#ifndef GF_CUDAEMU_NVTX_H
#define GF_CUDAEMU_NVTX_H

static inline void nvtxInitialize(const void *reserved)
{
    (void)reserved;
}
static inline int nvtxRangePushA(const char *message)
{
    (void)message;
    return 0;
}
static inline int nvtxRangePop(void)
{
    return 0;
}

#endif
