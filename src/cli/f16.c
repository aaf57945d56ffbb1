/* float -> binary16 bits; see f16.h. */
#include "f16.h"

#include <string.h>

uint16_t cli_f16_bits(float f)
{
    /* Normals: rebias, add half an ulp less one (plus the kept bit's
     * parity: ties to even), truncate. Subnormals: one float addition of
     * 2^-1 aligns the kept bits at the bottom, and the FPU rounds. */
    const uint32_t inf32 = 255u << 23, max16 = (127u + 16) << 23, min_normal16 = 113u << 23;
    const uint32_t magic_bits = ((127u - 15) + (23 - 10) + 1) << 23;
    uint32_t u, sign;
    float magic;
    memcpy(&u, &f, sizeof u);
    memcpy(&magic, &magic_bits, sizeof magic);
    sign = u & 0x80000000u;
    u ^= sign;
    uint16_t h;
    if (u >= max16) {
        h = u > inf32 ? 0x7e00 : 0x7c00; /* NaN, or too large: infinity */
    } else if (u < min_normal16) {
        float a;
        memcpy(&a, &u, sizeof a);
        a += magic;
        memcpy(&u, &a, sizeof u);
        h = (uint16_t)(u - magic_bits);
    } else {
        u += ((uint32_t)(15 - 127) << 23) + 0xfff + ((u >> 13) & 1);
        h = (uint16_t)(u >> 13);
    }
    return (uint16_t)(h | (sign >> 16));
}
