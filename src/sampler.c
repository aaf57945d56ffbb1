/*
 * Sampler: the order of one epoch as a pure function of (seed, epoch).
 *
 * The shuffle is a keyed bijection on [0, n) evaluated on demand, not a
 * stored permutation: a balanced Feistel network on the smallest even bit
 * width 2h with 2^(2h) >= n, made to stay inside [0, n) by cycle walking
 * (apply it again until the value lands below n). Because 2^(2h) < 4n for
 * n > 1, a walk takes under 4 steps on average. State is a few round keys,
 * any position is O(1), and the order does not depend on thread count or
 * on which positions were asked for before: resuming is just a position.
 *
 * Rank split and padding follow torch.utils.data.DistributedSampler: rank r
 * takes global positions r, r + world, r + 2*world, ...; without drop_last
 * positions past n wrap to the start of the order (padding), with drop_last
 * the order is cut to floor(n/world)*world.
 *
 * No state but what the caller holds: any thread may call it (the loader's
 * controller thread does, once per sample it schedules).
 */
#include "sampler.h"

#include <assert.h>

int gf__sampler_init(gf__sampler *s, uint64_t n, uint64_t seed, int shuffle,
                     uint32_t rank, uint32_t world, int drop_last)
{
    if (!s || n == 0 || world == 0 || rank >= world)
        return GF_EINVAL;
    uint64_t len = n / world;
    if (!drop_last && n % world)
        len++;
    if (len == 0)
        return GF_EINVAL; /* drop_last with fewer samples than ranks */
    s->n = n;
    s->seed = seed;
    s->shuffle = shuffle != 0;
    s->rank = rank;
    s->world = world;
    s->drop_last = drop_last != 0;
    s->len = len;
    return 0;
}

void gf__perm_init(gf__perm *p, const gf__sampler *s, uint64_t epoch)
{
    p->n = s->n;
    p->identity = !s->shuffle;
    unsigned h = 1;
    while (2 * h < 64 && (s->n - 1) >> (2 * h))
        h++;
    p->half_bits = h;
    assert(h <= 32 && (h == 32 || (s->n - 1) >> (2 * h) == 0)); /* 2^(2h) >= n */
    /* Distinct constants keep the key schedule apart from gf__sample_key's
     * chain, which starts from the same (seed, epoch). */
    uint64_t base = gf__mix64(gf__mix64(s->seed ^ 0x6a09e667f3bcc908ull) ^ epoch);
    for (int i = 0; i < GF__PERM_ROUNDS; i++)
        p->keys[i] = gf__mix64(base + (uint64_t)(i + 1) * 0xbb67ae8584caa73bull);
}

static inline uint64_t feistel(const gf__perm *p, uint64_t x)
{
    unsigned h = p->half_bits;
    uint64_t mask = (1ull << h) - 1; /* h <= 32 */
    uint64_t l = x >> h, r = x & mask;
    for (int i = 0; i < GF__PERM_ROUNDS; i++) {
        /* The top h bits of the mix: splitmix's best-mixed bits. */
        uint64_t f = gf__mix64(p->keys[i] ^ r) >> (64 - h);
        uint64_t t = l ^ f;
        l = r;
        r = t;
    }
    return (l << h) | r;
}

static inline uint64_t perm_at(const gf__perm *p, uint64_t g)
{
    if (p->identity)
        return g;
    /* Cycle walking: the Feistel cycle through g returns below n. */
    uint64_t x = g;
    do
        x = feistel(p, x);
    while (x >= p->n);
    return x;
}

uint64_t gf__sampler_at(const gf__sampler *s, const gf__perm *p, uint64_t pos)
{
    if (GF__UNLIKELY(pos >= s->len))
        pos %= s->len;
    uint64_t g = pos * s->world + s->rank;
    if (g >= s->n)
        g %= s->n; /* padding repeats the start of the order */
    return perm_at(p, g);
}
