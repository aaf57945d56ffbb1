/* The model suites' random inputs (test_model.c, test_model_gpu.c):
 * splitmix64 uniforms and Box-Muller normals from one seedable state. */
#ifndef GF_TEST_MODEL_RNG_H
#define GF_TEST_MODEL_RNG_H

#include <math.h>
#include <stdint.h>

static uint64_t rng_state;

static double urand(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return ((z >> 11) + 0.5) * 0x1p-53;
}

static double nrand(void)
{
    return sqrt(-2 * log(urand())) * cos(6.283185307179586 * urand());
}

#endif
