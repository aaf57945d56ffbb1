/* cudaemu: __half, with conversions that round to nearest even as the
 * device's do (GCC's _Float16 conversions are IEEE's). */
#ifndef GF_CUDAEMU_FP16_H
#define GF_CUDAEMU_FP16_H

#include "cuda_runtime.h"

#include <stdint.h>
#include <string.h>

struct __half {
    uint16_t bits;
};

static inline __half __float2half_rn(float f)
{
    _Float16 h = (_Float16)f;
    __half r;
    memcpy(&r.bits, &h, sizeof r.bits);
    return r;
}
static inline float __half2float(__half h)
{
    _Float16 v;
    memcpy(&v, &h.bits, sizeof v);
    return (float)v;
}
static inline unsigned short __half_as_ushort(__half h)
{
    return h.bits;
}
static inline __half __ushort_as_half(unsigned short u)
{
    __half r;
    r.bits = u;
    return r;
}

#endif
