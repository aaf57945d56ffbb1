/*
 * The one copy of the project's hash and pseudo-random helpers: splitmix64
 * (its finaliser and its generator) and FNV-1a 64. Pure functions, any
 * thread.
 *
 * Header-only and dependency-free on purpose: besides the library, the
 * gpufeed program (src/cli, src/demo) and the tests include it, though they
 * link against the public API only; including it adds no link dependency
 * on the library's insides. Every stream it makes is part of a recorded
 * result (batches, make-dataset's bytes, checkpoints, weight checksums):
 * change nothing here.
 */
#ifndef GF_MIX_H
#define GF_MIX_H

#include <stddef.h>
#include <stdint.h>

/* splitmix64's Weyl step: 2^64 / golden ratio, odd. */
#define GF__GOLDEN64 0x9e3779b97f4a7c15ull
/* FNV-1a 64's offset basis (the hash of nothing). */
#define GF__FNV1A64_BASIS 0xcbf29ce484222325ull

/* splitmix64's finaliser of x + GF__GOLDEN64: the one mixing function for
 * keys and randomness. */
static inline uint64_t gf__mix64(uint64_t x)
{
    x += GF__GOLDEN64;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* splitmix64: the next 64 random bits of *state (advances it). */
static inline uint64_t gf__splitmix64(uint64_t *state)
{
    uint64_t x = *state;
    *state = x + GF__GOLDEN64;
    return gf__mix64(x);
}

/* A double in [0, 1) from the next 53 bits of *state (advances it). */
static inline double gf__draw_unit(uint64_t *state)
{
    return (double)(gf__splitmix64(state) >> 11) * 0x1p-53;
}

/* An int in [0, n) from the next 32 high bits of *state, by a multiply,
 * not a modulo (advances it). */
static inline int gf__draw_below(uint64_t *state, int n)
{
    return (int)(((gf__splitmix64(state) >> 32) * (uint64_t)(uint32_t)n) >> 32);
}

/* FNV-1a 64 of p[0, n) continuing from h (GF__FNV1A64_BASIS to start). */
static inline uint64_t gf__fnv1a64(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

#endif /* GF_MIX_H */
