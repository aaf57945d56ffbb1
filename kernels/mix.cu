/* settings.augment's mix on the device: MixUp or CutMix over a converted
 * batch in place, queued on the slot's copy stream after the convert
 * kernel (device_copy.c). src/batch_mix.c's gf__mix_cpu is its CPU twin:
 * the same float32 arithmetic, each product and the sum rounded alone
 * (__fmul_rn, __fadd_rn: no contraction), stored as the convert kernel
 * stores (round to nearest even, NaNs canonical), so the bytes agree.
 *
 * In place without a second buffer: a thread owns one element offset of
 * every sample and walks the samples from the last down, so sample i - 1
 * is still its own when sample i reads it; it keeps the last sample's
 * original for sample 0. Consecutive threads take consecutive offsets:
 * each sample's reads and writes are coalesced. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "config.h"
#include "augment.h"
#include "convert.h"
}

namespace {

enum { DT_F32 = 1, DT_F16 = 2, DT_BF16 = 3 };

struct mix_params {
    unsigned E;         /* elements per sample */
    unsigned w, hw, c;  /* the box test's: pixels per row and per sample, channels */
    int nchw, cut;
    int x1, y1, x2, y2;
    float lam, rest;
};

template <int DT> __device__ __forceinline__ float get(const void *p, size_t at)
{
    if constexpr (DT == DT_F32)
        return static_cast<const float *>(p)[at];
    else if constexpr (DT == DT_F16)
        return __half2float(__ushort_as_half(static_cast<const uint16_t *>(p)[at]));
    else
        return __int_as_float((int)((unsigned)static_cast<const uint16_t *>(p)[at] << 16));
}

template <int DT> __device__ __forceinline__ void set(void *p, size_t at, float v)
{
    if constexpr (DT == DT_F32)
        static_cast<float *>(p)[at] = v == v ? v : __int_as_float(0x7fffffff);
    else if constexpr (DT == DT_F16)
        static_cast<uint16_t *>(p)[at] = v == v ? __half_as_ushort(__float2half_rn(v)) : (uint16_t)0x7fff;
    else
        static_cast<uint16_t *>(p)[at] =
            v == v ? __bfloat16_as_ushort(__float2bfloat16_rn(v)) : (uint16_t)0x7fff;
}

template <int DT>
__global__ void __launch_bounds__(256) mix_kernel(uint8_t *out, int count, mix_params p)
{
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < p.E;
         e += (size_t)gridDim.x * blockDim.x) {
        if (p.cut) {
            const unsigned px = p.nchw ? (unsigned)(e % p.hw) : (unsigned)(e / p.c);
            const int y = (int)(px / p.w), x = (int)(px % p.w);
            if (y < p.y1 || y >= p.y2 || x < p.x1 || x >= p.x2)
                continue;
        }
        const float keep = get<DT>(out, (size_t)(count - 1) * p.E + e);
        for (int i = count - 1; i >= 0; i--) {
            const size_t at = (size_t)i * p.E + e;
            float v = i ? get<DT>(out, at - p.E) : keep;
            if (!p.cut)
                v = __fadd_rn(__fmul_rn(p.lam, get<DT>(out, at)), __fmul_rn(p.rest, v));
            set<DT>(out, at, v);
        }
    }
}

} // namespace

extern "C" int gf__mix_cuda(const gf__convert *cv, const gf__mix_draw *d, void *d_out, int count,
                            void *stream, char *why, size_t why_len)
{
    if (count <= 0)
        return 0;
    mix_params p;
    p.E = (unsigned)cv->h * (unsigned)cv->w * (unsigned)cv->c;
    p.w = (unsigned)cv->w;
    p.hw = (unsigned)cv->h * (unsigned)cv->w;
    p.c = (unsigned)cv->c;
    p.nchw = cv->layout == GF_LAYOUT_NCHW;
    p.cut = d->kind == GF__MIX_CUTMIX;
    p.x1 = d->x1, p.y1 = d->y1, p.x2 = d->x2, p.y2 = d->y2;
    p.lam = d->lam;
    p.rest = (float)(1.0 - (double)d->lam);
    size_t blocks = ((size_t)p.E + 255) / 256;
    const dim3 grid((unsigned)(blocks < 1 ? 1 : blocks > 65535 ? 65535 : blocks));
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    uint8_t *out = static_cast<uint8_t *>(d_out); /* an object pointer: cudaemu translates it */
    switch (cv->dtype) {
    case GF_DTYPE_FLOAT32: mix_kernel<DT_F32><<<grid, 256, 0, st>>>(out, count, p); break;
    case GF_DTYPE_FLOAT16: mix_kernel<DT_F16><<<grid, 256, 0, st>>>(out, count, p); break;
    case GF_DTYPE_BFLOAT16: mix_kernel<DT_BF16><<<grid, 256, 0, st>>>(out, count, p); break;
    default:
        gf__why(why, why_len, "mix: dtype %d is not a float", (int)cv->dtype);
        return GF_EINVAL;
    }
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
        gf__why(why, why_len, "mix kernel launch: %s", cudaGetErrorName(err));
        return GF_ENODEV;
    }
    return 0;
}
