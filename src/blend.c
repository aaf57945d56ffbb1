/*
 * The schedule of a blend of data sets (issue 41's mixing), pure and
 * integer past gf__blend_init: the weights become units of a fixed total
 * (2^24), and position q draws the source that owns unit (q * STEP +
 * phase) mod total, STEP odd and near total / golden ratio. Every period
 * of `total` positions draws each source exactly its units, and any
 * prefix is within a few samples of its share (the golden ratio's
 * sequence has the lowest discrepancy there is), so the proportions are
 * the weights' however short the run. How many draws a source has in [0,
 * q) is a floor sum (Euclid's algorithm: O(log total)), so any position's
 * own position in its source is known without walking the epoch.
 *
 * Shuffled, the phase is keyed by (seed, epoch) and each block of
 * GF__BLEND_BLOCK positions draws what its positions would, in an order
 * keyed by (seed, epoch, block): random within the block, the counts
 * unchanged over it.
 *
 * A source's own position is the count of its earlier draws in the epoch:
 * its samples come in its own order, which a remote source's shard reader
 * needs. gf__blend_walk keeps those counts as it goes; starting mid-block
 * counts the block's head (O(block)).
 *
 * A leaf: no loader state, any thread.
 */
#include "blend.h"

#include <math.h>

int gf__blend_init(gf__blend *b, const double *weights, int n, uint64_t seed, bool shuffle,
                   char *why, size_t why_len)
{
    *b = (gf__blend){.n = n, .seed = seed, .shuffle = shuffle};
    if (n < 1 || n > GF__BLEND_MAX) {
        gf__why(why, why_len, "%d sources: a blend takes 1 to %d", n, GF__BLEND_MAX);
        return GF_EINVAL;
    }
    double total = 0;
    for (int s = 0; s < n; s++) {
        if (!(weights[s] > 0) || !isfinite(weights[s])) {
            gf__why(why, why_len, "source %d's weight %g: a weight is a positive number", s + 1,
                    weights[s]);
            return GF_EINVAL;
        }
        total += weights[s];
    }
    if (!isfinite(total)) {
        gf__why(why, why_len, "the weights' sum is not finite");
        return GF_EINVAL;
    }
    /* Cumulative units, rounded once each: the units of a source are the
     * difference of two roundings, so they sum to the total exactly. */
    double acc = 0;
    b->cum[0] = 0;
    for (int s = 0; s < n; s++) {
        acc += weights[s];
        b->cum[s + 1] = s + 1 == n ? GF__BLEND_UNITS
                                   : (uint32_t)llround(acc / total * GF__BLEND_UNITS);
        if (b->cum[s + 1] <= b->cum[s]) {
            gf__why(why, why_len,
                    "source %d's weight %g is under 1/%u of the weights' sum: it would never "
                    "be drawn",
                    s + 1, weights[s], GF__BLEND_UNITS);
            return GF_EINVAL;
        }
    }
    return 0;
}

typedef unsigned __int128 u128;

/* sum over i < n of floor((a * i + c) / m): AtCoder's floor_sum, Euclid's
 * steps, in 128 bits (n up to 2^64, a and c under 2^26). */
static u128 floor_sum(u128 n, u128 m, u128 a, u128 c)
{
    u128 sum = 0;
    for (;;) {
        if (a >= m) {
            sum += n * (n - 1) / 2 * (a / m);
            a %= m;
        }
        if (c >= m) {
            sum += n * (c / m);
            c %= m;
        }
        u128 top = a * n + c;
        if (top < m)
            return sum;
        n = top / m;
        c = top % m;
        u128 t = m;
        m = a;
        a = t;
    }
}

static uint32_t phase(const gf__blend *b, uint64_t epoch)
{
    if (!b->shuffle)
        return 0;
    return (uint32_t)(gf__mix64(gf__mix64(b->seed ^ 0x1f83d9abfb41bd6bull) ^ epoch) &
                      (GF__BLEND_UNITS - 1));
}

uint32_t gf__blend_unit(const gf__blend *b, uint64_t epoch, uint64_t q)
{
    return (uint32_t)((q * GF__BLEND_STEP + phase(b, epoch)) & (GF__BLEND_UNITS - 1));
}

/* Positions x < q whose unit is under t: those with (x * STEP + c) mod U
 * >= t are floor((v + U - t) / U) - floor(v / U) = 1, v = x * STEP + c. */
static uint64_t below(uint64_t q, uint32_t c, uint32_t t)
{
    if (t == 0 || q == 0)
        return 0;
    u128 at_or_above = floor_sum(q, GF__BLEND_UNITS, GF__BLEND_STEP, (u128)c + GF__BLEND_UNITS - t) -
                       floor_sum(q, GF__BLEND_UNITS, GF__BLEND_STEP, c);
    return q - (uint64_t)at_or_above;
}

uint64_t gf__blend_count(const gf__blend *b, uint64_t epoch, int s, uint64_t q)
{
    uint32_t c = phase(b, epoch);
    return below(q, c, b->cum[s + 1]) - below(q, c, b->cum[s]);
}

/* The source that owns unit u: the last s with cum[s] <= u. */
static int owner(const gf__blend *b, uint32_t u)
{
    int lo = 0, hi = b->n - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (b->cum[mid] <= u)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

static void block_perm(const gf__blend *b, uint64_t epoch, uint64_t block, gf__perm *p)
{
    uint64_t base = gf__mix64(gf__mix64(gf__mix64(b->seed ^ 0x510e527fade682d1ull) ^ epoch) ^
                              block);
    gf__perm_keyed(p, GF__BLEND_BLOCK, base);
}

int gf__blend_source(const gf__blend *b, uint64_t epoch, uint64_t q)
{
    if (b->n == 1)
        return 0;
    if (!b->shuffle)
        return owner(b, gf__blend_unit(b, epoch, q));
    uint64_t block = q / GF__BLEND_BLOCK;
    gf__perm p;
    block_perm(b, epoch, block, &p);
    return owner(b, gf__blend_unit(b, epoch, block * GF__BLEND_BLOCK +
                                                 gf__perm_at(&p, q % GF__BLEND_BLOCK)));
}

void gf__blend_walk_start(gf__blend_walk *w, const gf__blend *b, uint64_t epoch, uint64_t q)
{
    *w = (gf__blend_walk){.b = b, .epoch = epoch, .q = q};
    /* The draws before the block (shuffling moves none across blocks),
     * then those of the block's positions before q, in the block's order. */
    uint64_t start = b->shuffle ? q - q % GF__BLEND_BLOCK : q;
    for (int s = 0; s < b->n; s++)
        w->taken[s] = gf__blend_count(b, epoch, s, start);
    for (uint64_t x = start; x < q; x++)
        w->taken[gf__blend_source(b, epoch, x)]++;
}

void gf__blend_walk_next(gf__blend_walk *w, int *s, uint64_t *k)
{
    *s = gf__blend_source(w->b, w->epoch, w->q++);
    *k = w->taken[*s]++;
}
