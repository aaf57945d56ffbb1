/*
 * float -> IEEE binary16, rounded to nearest even (as the GPU's
 * __float2half_rn), NaNs made CUDA's canonical 0x7fff: the one copy, used
 * by the library's CPU conversion (convert.c) and by the demo trainer's
 * --amp batches. Pure functions, any thread.
 *
 * Header-only so that convert.c's loops inline and vectorize it, and so
 * that the gpufeed program, which links against the public API only, can
 * include it too.
 */
#ifndef GF_F16_H
#define GF_F16_H

#include <stdint.h>
#include <string.h>

#if defined(__GNUC__)
#define GF__F16_INLINE static inline __attribute__((always_inline))
#else
#define GF__F16_INLINE static inline
#endif

/* Branch-free (every path computed, then selected), so the loops that call
 * it vectorize. u: the float's bits. */
GF__F16_INLINE uint16_t gf__f16_from_bits(uint32_t u)
{
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    /* Normal half (a >= 2^-14): rebias the exponent by 127 - 15, then
     * round away 13 mantissa bits to nearest even. A carry out of the
     * mantissa bumps the exponent, which is right, up to infinity. */
    uint32_t n = a - 0x38000000u;
    n = (n + 0xfffu + ((n >> 13) & 1u)) >> 13;
    /* Subnormal half (a < 2^-14): the result is a * 2^24 rounded, i.e. the
     * 24-bit significand m shifted right by s = 126 - exponent (>= 14);
     * s >= 25 leaves less than half: zero. Float subnormals land there. */
    uint32_t e = a >> 23;
    uint32_t s = 126u - e;
    s = s - 1u > 24u ? 25u : s; /* also for the unused s == 0 and wraps */
    uint32_t m = (a & 0x7fffffu) | 0x800000u;
    uint32_t r = m >> s;
    uint32_t rem = m & ((1u << s) - 1u);
    uint32_t half = 1u << (s - 1u);
    r += (uint32_t)(rem > half) | ((uint32_t)(rem == half) & r);
    uint32_t v = a < 0x38800000u ? r : n;
    v = a >= 0x477ff000u ? 0x7c00u : v; /* >= 65520 rounds to infinity */
    v |= sign;
    return (uint16_t)(a > 0x7f800000u ? 0x7fffu : v);
}

/* The binary16 bits of f. */
GF__F16_INLINE uint16_t gf__f16_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return gf__f16_from_bits(u);
}

#endif /* GF_F16_H */
