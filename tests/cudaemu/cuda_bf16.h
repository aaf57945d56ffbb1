/* cudaemu: __nv_bfloat16, rounding to nearest even. */
#ifndef GF_CUDAEMU_BF16_H
#define GF_CUDAEMU_BF16_H

#include "cuda_runtime.h"

#include <stdint.h>
#include <string.h>

struct __nv_bfloat16 {
    uint16_t bits;
};

static inline __nv_bfloat16 __float2bfloat16_rn(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    __nv_bfloat16 r;
    if ((u & 0x7fffffffu) > 0x7f800000u)
        r.bits = (uint16_t)((u >> 16) | 0x40u); /* NaN stays NaN */
    else
        r.bits = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    return r;
}
static inline float __bfloat162float(__nv_bfloat16 b)
{
    uint32_t u = (uint32_t)b.bits << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b)
{
    return b.bits;
}

#endif
