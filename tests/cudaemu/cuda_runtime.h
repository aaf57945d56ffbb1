/* cudaemu: the runtime API, and in C++ the device side that kernels see
 * (built-in indices, __syncthreads, qualifiers). cu2cpp.py rewrites each
 * kernel<<<grid, block, shared, stream>>>(args) into a launcher call. */
#ifndef GF_CUDAEMU_RUNTIME_H
#define GF_CUDAEMU_RUNTIME_H

#include "cuda_runtime_api.h"

#ifdef __cplusplus
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

struct uint3 {
    unsigned x, y, z;
};

/* Vector types keep CUDA's alignment, so UBSan sees a misaligned vector
 * access, which faults on a GPU. */
#define GF_CUDAEMU_VEC(name, T, align)                                                      \
    struct alignas(align) name##2 { T x, y; };                                               \
    struct alignas(align * 2) name##4 { T x, y, z, w; };                                     \
    static inline name##2 make_##name##2(T x, T y) { return name##2{x, y}; }                \
    static inline name##4 make_##name##4(T x, T y, T z, T w) { return name##4{x, y, z, w}; }
GF_CUDAEMU_VEC(float, float, 8)
GF_CUDAEMU_VEC(uint, unsigned, 8)
GF_CUDAEMU_VEC(int, int, 8)
GF_CUDAEMU_VEC(ushort, unsigned short, 4)
GF_CUDAEMU_VEC(uchar, unsigned char, 2)
#undef GF_CUDAEMU_VEC

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};

namespace gf_cudaemu {

/* initial-exec: no __tls_get_addr call, which ASan's interceptor gets
 * wrong on a fiber's stack. */
#define GF_CUDAEMU_TLS thread_local __attribute__((tls_model("initial-exec")))
extern GF_CUDAEMU_TLS uint3 thread_idx, block_idx;
extern GF_CUDAEMU_TLS dim3 block_dim, grid_dim;

/* A static __shared__ array (cu2cpp.py): one copy per block, poisoned when
 * the block starts, so reading what no thread of the block wrote shows. */
struct shared_site {
    unsigned long long block = 0;
    void *ptr = nullptr;
    void *get(size_t bytes);
};

void syncthreads();
[[noreturn]] void trap(); /* the context is lost: every later call fails */
void *dynamic_shared();
unsigned long long globaltimer_ns();
void launch(const char *name, dim3 grid, dim3 block, size_t shared, cudaStream_t stream,
            std::function<void()> body);
/* Where the kernel reaches the bytes at device address p (p itself for
 * host memory): device addresses fault on the host (emu_memory.cpp). */
void *kernel_pointer(const void *p);

template <class T> T kernel_arg(T v)
{
    if constexpr (std::is_pointer_v<T> && std::is_object_v<std::remove_pointer_t<T>>)
        return static_cast<T>(kernel_pointer(v));
    else
        return v;
}

/* Arguments are converted to the kernel's parameter types and copied at
 * the launch, as CUDA does; pointers are translated then. */
struct launcher {
    dim3 grid, block;
    size_t shared;
    cudaStream_t stream;
    launcher(dim3 g, dim3 b, size_t sh = 0, cudaStream_t s = 0)
        : grid(g), block(b), shared(sh), stream(s)
    {
    }
    template <class... P, class... A> void run(const char *name, void (*kernel)(P...), A &&...a)
    {
        static_assert(sizeof...(P) == sizeof...(A), "kernel argument count");
        auto args =
            std::make_tuple(kernel_arg(static_cast<std::decay_t<P>>(std::forward<A>(a)))...);
        launch(name, grid, block, shared, stream, [kernel, args]() { std::apply(kernel, args); });
    }
};

} // namespace gf_cudaemu

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
/* What cu2cpp.py leaves: one copy per OS thread (a block's threads are
 * fibers on one; blocks on other streams run on others). */
#define __shared__ static thread_local
/* By value, through functions UBSan leaves alone: GCC 12's null check on
 * a thread-local address tests stale flags (lea sets none) and reports
 * a null pointer at random. */
namespace gf_cudaemu {
#define GF_CUDAEMU_GET(T, name, var)                                                         \
    __attribute__((no_sanitize("undefined"))) static inline T name() { return var; }
GF_CUDAEMU_GET(uint3, get_thread_idx, thread_idx)
GF_CUDAEMU_GET(uint3, get_block_idx, block_idx)
GF_CUDAEMU_GET(dim3, get_block_dim, block_dim)
GF_CUDAEMU_GET(dim3, get_grid_dim, grid_dim)
#undef GF_CUDAEMU_GET
} // namespace gf_cudaemu
#define threadIdx (::gf_cudaemu::get_thread_idx())
#define blockIdx (::gf_cudaemu::get_block_idx())
#define blockDim (::gf_cudaemu::get_block_dim())
#define gridDim (::gf_cudaemu::get_grid_dim())
#define __syncthreads() ::gf_cudaemu::syncthreads()
#define __trap() ::gf_cudaemu::trap()
#define GF_CUDAEMU_GLOBALTIMER() ::gf_cudaemu::globaltimer_ns()

template <class T> static inline T __ldg(const T *p)
{
    return *p;
}
static inline float __fmaf_rn(float a, float b, float c)
{
    return fmaf(a, b, c);
}
/* Rounded alone, never fused (volatile: whatever the compiler's contraction). */
static inline float __fmul_rn(float a, float b)
{
    volatile float r = a * b;
    return r;
}
static inline float __fadd_rn(float a, float b)
{
    volatile float r = a + b;
    return r;
}
static inline float __int_as_float(int i)
{
    float f;
    memcpy(&f, &i, sizeof f);
    return f;
}
static inline int __float_as_int(float f)
{
    int i;
    memcpy(&i, &f, sizeof i);
    return i;
}
#endif

#endif
