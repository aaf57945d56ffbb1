/* The device transform: uint8 HWC samples -> float32/float16/bfloat16 in
 * NHWC or NCHW (or uint8 NHWC), mean/std normalisation, per-sample mirror.
 * src/convert.c is its CPU twin; the two agree bit for bit because each
 * value is one __fmaf_rn((float)x, scale[k], shift[k]) (what C's fmaf
 * computes), then __float2half_rn / __float2bfloat16_rn (round to nearest
 * even, as gf__f32_to_f16/bf16), with NaNs made canonical on both sides.
 * Built without fast-math, so denormals are kept (no FTZ) as on the CPU.
 *
 * Memory: the kernel is bandwidth-bound (1 byte in, up to 4 out). In the
 * fast kernel one thread owns 4 consecutive output pixels of one row (all
 * channels): it reads their 4*C input bytes as C aligned 32-bit words
 * (a warp reads one contiguous stretch), mirrors in registers when the
 * sample is flipped (4 mirrored pixels are also 4 contiguous input
 * pixels), and writes 16-byte (float) or 8-byte (half) vectors: contiguous
 * per warp in NHWC, contiguous per warp and plane in NCHW. It needs
 * width % 4 == 0 and aligned pointers; anything else takes the generic
 * kernel, one thread per pixel, which is coalesced too, just with more
 * instructions per byte. blockIdx.y walks the samples, so a sample's flip
 * flag and base are uniform per block. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "config.h"
#include "convert.h"
}

namespace {

enum { DT_U8 = 0, DT_F32 = 1, DT_F16 = 2, DT_BF16 = 3 };

struct cv_params {
    unsigned w;     /* pixels per row */
    unsigned hw;    /* pixels per sample */
    unsigned c;     /* channels (generic kernel; the fast one has C) */
    float scale[4], shift[4];
};

template <int DT> struct store_type { typedef uint16_t type; };
template <> struct store_type<DT_U8> { typedef uint8_t type; };
template <> struct store_type<DT_F32> { typedef float type; };

/* One value: x -> its stored representation. */
template <int DT>
__device__ __forceinline__ typename store_type<DT>::type put(uint8_t x, float s, float b)
{
    const float v = __fmaf_rn((float)x, s, b);
    if constexpr (DT == DT_F32)
        return v == v ? v : __int_as_float(0x7fffffff);
    else if constexpr (DT == DT_F16)
        return v == v ? __half_as_ushort(__float2half_rn(v)) : (uint16_t)0x7fff;
    else
        return v == v ? __bfloat16_as_ushort(__float2bfloat16_rn(v)) : (uint16_t)0x7fff;
}
template <>
__device__ __forceinline__ uint8_t put<DT_U8>(uint8_t x, float, float)
{
    return x;
}

/* Stores 4 consecutive values (aligned to the vector size). */
__device__ __forceinline__ void store4(float *p, const float *v)
{
    *reinterpret_cast<float4 *>(p) = make_float4(v[0], v[1], v[2], v[3]);
}
__device__ __forceinline__ void store4(uint16_t *p, const uint16_t *v)
{
    *reinterpret_cast<uint2 *>(p) =
        make_uint2(v[0] | (uint32_t)v[1] << 16, v[2] | (uint32_t)v[3] << 16);
}
__device__ __forceinline__ void store4(uint8_t *p, const uint8_t *v)
{
    *reinterpret_cast<uint32_t *>(p) =
        v[0] | (uint32_t)v[1] << 8 | (uint32_t)v[2] << 16 | (uint32_t)v[3] << 24;
}

/* Fast path: w % 4 == 0, in 4-aligned, out aligned to 4 values. */
template <int DT, int C, bool NCHW>
__global__ void __launch_bounds__(256)
    convert_fast(const uint8_t *__restrict__ in, typename store_type<DT>::type *__restrict__ out,
                 const uint8_t *__restrict__ flips, int count, const cv_params p)
{
    typedef typename store_type<DT>::type T;
    const unsigned units = p.hw / 4;
    for (int s = blockIdx.y; s < count; s += gridDim.y) {
        const bool flip = flips && flips[s];
        const uint8_t *sin = in + (size_t)s * p.hw * C;
        T *sout = out + (size_t)s * p.hw * C;
        for (unsigned u = blockIdx.x * blockDim.x + threadIdx.x; u < units;
             u += gridDim.x * blockDim.x) {
            const unsigned pix = 4 * u;
            const unsigned y = pix / p.w, x = pix - y * p.w;
            /* Mirrored, output pixels x..x+3 are input pixels w-1-x..w-4-x:
             * the 4 input pixels starting at w-4-x, in reverse. */
            const unsigned src = flip ? y * p.w + (p.w - 4 - x) : pix;
            const uint32_t *wp = reinterpret_cast<const uint32_t *>(sin + (size_t)src * C);
            uint8_t b[4 * C];
#pragma unroll
            for (int k = 0; k < C; k++) {
                const uint32_t word = __ldg(wp + k);
#pragma unroll
                for (int j = 0; j < 4; j++)
                    b[4 * k + j] = (uint8_t)(word >> (8 * j));
            }
            T v[4 * C];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int si = flip ? 3 - i : i;
#pragma unroll
                for (int k = 0; k < C; k++) {
                    /* Output index: NHWC i*C+k, NCHW planar k*4+i. */
                    const int o = NCHW ? k * 4 + i : i * C + k;
                    v[o] = put<DT>(b[si * C + k], p.scale[k], p.shift[k]);
                }
            }
            if (NCHW) {
#pragma unroll
                for (int k = 0; k < C; k++)
                    store4(sout + (size_t)k * p.hw + pix, v + 4 * k);
            } else {
#pragma unroll
                for (int k = 0; k < C; k++)
                    store4(sout + (size_t)pix * C + 4 * k, v + 4 * k);
            }
        }
    }
}

/* Any size and alignment: one thread per output pixel. */
template <int DT, bool NCHW>
__global__ void __launch_bounds__(256)
    convert_generic(const uint8_t *__restrict__ in, typename store_type<DT>::type *__restrict__ out,
                    const uint8_t *__restrict__ flips, int count, const cv_params p)
{
    typedef typename store_type<DT>::type T;
    const unsigned c = p.c;
    for (int s = blockIdx.y; s < count; s += gridDim.y) {
        const bool flip = flips && flips[s];
        const uint8_t *sin = in + (size_t)s * p.hw * c;
        T *sout = out + (size_t)s * p.hw * c;
        for (unsigned pix = blockIdx.x * blockDim.x + threadIdx.x; pix < p.hw;
             pix += gridDim.x * blockDim.x) {
            unsigned src = pix;
            if (flip) {
                const unsigned y = pix / p.w, x = pix - y * p.w;
                src = y * p.w + (p.w - 1 - x);
            }
            /* Constant k (unrolled, guarded) keeps p.scale/shift out of
             * local memory. */
#pragma unroll
            for (unsigned k = 0; k < 4; k++) {
                if (k >= c)
                    break;
                const T v = put<DT>(__ldg(sin + (size_t)src * c + k), p.scale[k], p.shift[k]);
                if (NCHW)
                    sout[(size_t)k * p.hw + pix] = v;
                else
                    sout[(size_t)pix * c + k] = v;
            }
        }
    }
}

template <int DT, int C, bool NCHW>
void launch_fast(dim3 grid, cudaStream_t st, const uint8_t *in, void *out, const uint8_t *flips,
                 int count, const cv_params &p)
{
    convert_fast<DT, C, NCHW><<<grid, 256, 0, st>>>(
        in, static_cast<typename store_type<DT>::type *>(out), flips, count, p);
}

template <int DT, bool NCHW>
void launch(bool fast, dim3 grid_fast, dim3 grid, cudaStream_t st, const uint8_t *in, void *out,
            const uint8_t *flips, int count, const cv_params &p)
{
    if (!fast) {
        convert_generic<DT, NCHW><<<grid, 256, 0, st>>>(
            in, static_cast<typename store_type<DT>::type *>(out), flips, count, p);
        return;
    }
    switch (p.c) {
    case 1: launch_fast<DT, 1, NCHW>(grid_fast, st, in, out, flips, count, p); break;
    case 2: launch_fast<DT, 2, NCHW>(grid_fast, st, in, out, flips, count, p); break;
    case 3: launch_fast<DT, 3, NCHW>(grid_fast, st, in, out, flips, count, p); break;
    default: launch_fast<DT, 4, NCHW>(grid_fast, st, in, out, flips, count, p); break;
    }
}

__device__ __forceinline__ uint64_t globaltimer_ns()
{
#ifdef GF_CUDA_EMU
    return GF_CUDAEMU_GLOBALTIMER();
#else
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
#endif
}

__global__ void spin(uint64_t ns)
{
    const uint64_t t0 = globaltimer_ns();
    while (globaltimer_ns() - t0 < ns) {
    }
}

unsigned blocks_for(size_t items)
{
    size_t b = (items + 255) / 256;
    return (unsigned)(b < 1 ? 1 : b > 65535 ? 65535 : b);
}

} // namespace

/* Also GF_EINVAL (not in convert.h's list: never from a gf__convert made
 * by gf__convert_init from valid settings) for a malformed cv or count < 0,
 * or a sample of 2^31 elements or more. */
extern "C" int gf__convert_cuda(const gf__convert *cv, const uint8_t *d_in, void *d_out,
                                const uint8_t *d_flips, int count, void *stream, char *why,
                                size_t why_len)
{
    if (count < 0 || cv->h <= 0 || cv->w <= 0 || cv->c < 1 || cv->c > 4 ||
        (uint64_t)cv->h * (uint64_t)cv->w * (uint64_t)cv->c > 0x7fffffffu) {
        gf__why(why, why_len, "convert: bad shape %dx%dx%d or count %d", cv->h, cv->w, cv->c,
                count);
        return GF_EINVAL;
    }
    if (count == 0)
        return 0;
    cv_params p;
    p.w = (unsigned)cv->w;
    p.hw = (unsigned)cv->h * (unsigned)cv->w;
    p.c = (unsigned)cv->c;
    for (int k = 0; k < 4; k++) {
        p.scale[k] = cv->scale[k];
        p.shift[k] = cv->shift[k];
    }
    const size_t esize = gf_dtype_size(cv->dtype);
    /* Fast: a unit of 4 pixels never straddles a row, and its input words
     * and output vectors are aligned (hw % 4 == 0 keeps every sample's base
     * aligned if the batch's is). */
    const bool fast = p.w % 4 == 0 && (uintptr_t)d_in % 4 == 0 &&
                      (uintptr_t)d_out % (4 * esize) == 0;
    const unsigned gy = (unsigned)(count < 65535 ? count : 65535);
    const dim3 grid_fast(blocks_for(p.hw / 4), gy), grid(blocks_for(p.hw), gy);
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    const bool nchw = cv->layout == GF_LAYOUT_NCHW;
    switch (cv->dtype) {
    case GF_DTYPE_UINT8: /* always NHWC */
        launch<DT_U8, false>(fast, grid_fast, grid, st, d_in, d_out, d_flips, count, p);
        break;
    case GF_DTYPE_FLOAT32:
        if (nchw)
            launch<DT_F32, true>(fast, grid_fast, grid, st, d_in, d_out, d_flips, count, p);
        else
            launch<DT_F32, false>(fast, grid_fast, grid, st, d_in, d_out, d_flips, count, p);
        break;
    case GF_DTYPE_FLOAT16:
        if (nchw)
            launch<DT_F16, true>(fast, grid_fast, grid, st, d_in, d_out, d_flips, count, p);
        else
            launch<DT_F16, false>(fast, grid_fast, grid, st, d_in, d_out, d_flips, count, p);
        break;
    case GF_DTYPE_BFLOAT16:
        if (nchw)
            launch<DT_BF16, true>(fast, grid_fast, grid, st, d_in, d_out, d_flips, count, p);
        else
            launch<DT_BF16, false>(fast, grid_fast, grid, st, d_in, d_out, d_flips, count, p);
        break;
    default:
        gf__why(why, why_len, "convert: unknown dtype %d", (int)cv->dtype);
        return GF_EINVAL;
    }
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
        gf__why(why, why_len, "convert kernel launch: %s", cudaGetErrorName(err));
        return GF_ENODEV;
    }
    return 0;
}

extern "C" int gf__cuda_spin(uint64_t ns, void *stream)
{
    spin<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(ns);
    return cudaGetLastError() == cudaSuccess ? 0 : GF_ENODEV;
}
