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
 * The global order's rank split and padding follow torch's
 * DistributedSampler: rank r takes global positions r, r + world,
 * r + 2*world, ...; without drop_last positions past n wrap to the start
 * of the order (padding), with drop_last the order is cut to
 * floor(n/world)*world.
 *
 * The shard order (gf_order SHARDS) keeps a shard's samples together so
 * remote shards are streamed, not fetched a sample at a time: each epoch
 * the shards are permuted (the same Feistel machinery, its own keys), the
 * sequence is cut into windows of W consecutive shards, and each window's
 * samples are permuted among themselves (keyed by seed, epoch, window).
 * Position g finds its shard in the sequence by binary search over the
 * epoch's prefix sums (its window is that shard's), goes through the
 * window's permutation, and finds the shard and member it lands on the
 * same way: O(log shards). The tables are O(shards), built once an epoch.
 * Ranks take contiguous spans of the epoch's sequence, so each reads about
 * shards/world of them (DistributedSampler's interleaving would make every
 * rank read every shard).
 *
 * Elastic resume. A state saved on W ranks and resumed on W' (gf_set_state)
 * splits its epoch: the samples the W ranks had not delivered, the rest,
 * keep their epoch order (the global order's suffix; the shard order's W
 * span tails, one after another, then under drop_last the cut end), and
 * the W' ranks take the rest interleaved, rank r' its samples r', r' + W',
 * ... Each sample is delivered once; a later change in the same epoch only
 * moves where the rest is taken from (`taken`), so a state stays O(1)
 * however many worlds an epoch sees. In the shard order every rank then
 * reads the rest's shards (each once: the rest keeps the epoch's windows),
 * not a 1/W' share, for the rest of that epoch. Padding (ceil) or drop_last
 * (floor) makes the shares equal as in a whole epoch; the next epoch is the
 * new world's own.
 *
 * No state but what the caller holds: any thread may call it (the loader's
 * controller thread does, once per sample it schedules).
 */
#include "sampler.h"

#include <assert.h>
#include <stdlib.h>

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
    s->shards = NULL;
    s->spans = false;
    s->rest = (gf__rest){0};
    return 0;
}

static uint64_t share(uint64_t n, uint64_t world, int drop_last)
{
    return n / world + (!drop_last && n % world);
}

/* The rest's sample x (< size) as an epoch position. */
static uint64_t rest_position(const gf__sampler *s, uint64_t x)
{
    const gf__rest *r = &s->rest;
    if (!s->shards && !s->spans)
        return r->first_world * r->first_pos + x;
    uint64_t tail = r->first_len - r->first_pos;
    if (x < r->full * tail)
        return x / tail * r->first_len + r->first_pos + x % tail;
    /* The tail cut short by the epoch's end, or drop_last's cut end. */
    uint64_t y = x - r->full * tail;
    return r->full * r->first_len + (r->full < r->first_world ? r->first_pos : 0) + y;
}

int gf__sampler_rest(gf__sampler *s, uint64_t epoch, uint32_t first_world, uint64_t first_pos,
                     uint64_t taken)
{
    s->rest = (gf__rest){0};
    if (first_world == 0)
        return GF_EINVAL;
    uint64_t first_len = share(s->n, first_world, s->drop_last);
    if (first_len == 0 || first_pos > first_len)
        return GF_EINVAL;
    if (first_pos == 0 && taken == 0)
        return 0;
    gf__rest r = {.on = true, .epoch = epoch, .first_world = first_world,
                  .first_len = first_len, .first_pos = first_pos};
    if (!s->shards && !s->spans) {
        uint64_t done = first_pos > s->n / first_world ? s->n : first_world * first_pos;
        r.size = s->n - done;
    } else {
        uint64_t tail = first_len - first_pos;
        r.full = GF__MIN((uint64_t)first_world, s->n / first_len);
        uint64_t end = r.full * first_len + (r.full < first_world ? first_pos : 0);
        r.size = r.full * tail + (s->n > end ? s->n - end : 0);
    }
    r.taken = GF__MIN(taken, r.size);
    r.len = share(r.size - r.taken, s->world, s->drop_last);
    r.on = r.len > 0;
    s->rest = r; /* off, its counts kept, when nothing is left */
    return r.on ? 0 : 1;
}

uint64_t gf__rest_taken(const gf__sampler *s, uint64_t pos)
{
    const gf__rest *r = &s->rest;
    return GF__MIN(r->taken + pos * s->world, r->size);
}

uint64_t gf__sampler_len(const gf__sampler *s, uint64_t epoch)
{
    return s->rest.on && s->rest.epoch == epoch ? s->rest.len : s->len;
}

/* A keyed permutation of [0, n) whose round keys all come from base. */
static void perm_keyed(gf__perm *p, uint64_t n, uint64_t base, int identity)
{
    p->n = n;
    p->identity = identity;
    unsigned h = 1;
    while (2 * h < 64 && (n - 1) >> (2 * h))
        h++;
    p->half_bits = h;
    assert(h <= 32 && (h == 32 || (n - 1) >> (2 * h) == 0)); /* 2^(2h) >= n */
    for (int i = 0; i < GF__PERM_ROUNDS; i++)
        p->keys[i] = gf__mix64(base + (uint64_t)(i + 1) * 0xbb67ae8584caa73bull);
}

void gf__perm_init(gf__perm *p, const gf__sampler *s, uint64_t epoch)
{
    /* Distinct constants keep the key schedule apart from gf__sample_key's
     * chain, which starts from the same (seed, epoch). */
    uint64_t base = gf__mix64(gf__mix64(s->seed ^ 0x6a09e667f3bcc908ull) ^ epoch);
    perm_keyed(p, s->n, base, !s->shuffle);
    p->epoch = epoch;
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

void gf__perm_keyed(gf__perm *p, uint64_t n, uint64_t base)
{
    perm_keyed(p, n, base, 0);
}

uint64_t gf__perm_at(const gf__perm *p, uint64_t x)
{
    return perm_at(p, x);
}

uint64_t gf__sampler_global(const gf__sampler *s, uint64_t epoch, uint64_t pos)
{
    if (GF__UNLIKELY(s->rest.on && s->rest.epoch == epoch)) {
        const gf__rest *r = &s->rest;
        uint64_t x = r->taken + (pos % r->len) * s->world + s->rank;
        return x < r->size ? rest_position(s, x) : (x - r->size) % s->n;
    }
    if (GF__UNLIKELY(pos >= s->len))
        pos %= s->len;
    uint64_t g = s->shards || s->spans ? s->rank * s->len + pos : pos * s->world + s->rank;
    if (g >= s->n)
        g %= s->n; /* padding repeats the start of the order */
    return g;
}

uint64_t gf__sampler_at(const gf__sampler *s, const gf__perm *p, uint64_t pos)
{
    assert(!s->shards);
    return perm_at(p, gf__sampler_global(s, p->epoch, pos));
}

int gf__shards_init(gf__shards *sh, const uint32_t *shard, uint64_t n, uint32_t window)
{
    *sh = (gf__shards){.window = window};
    if (!shard || n == 0 || window == 0)
        return GF_EINVAL;
    uint64_t k = 1;
    for (uint64_t i = 1; i < n; i++) {
        /* The indexer appends a shard's samples before the next shard's:
         * a shard is one contiguous run, which the prefix sums rely on. */
        assert(shard[i] >= shard[i - 1]);
        if (shard[i] < shard[i - 1])
            return GF_EDATASET;
        k += shard[i] != shard[i - 1];
    }
    sh->first = malloc((size_t)(k + 1) * sizeof *sh->first);
    if (!sh->first)
        return GF_ENOMEM;
    sh->n = (uint32_t)k;
    uint64_t j = 0;
    for (uint64_t i = 0; i < n; i++)
        if (i == 0 || shard[i] != shard[i - 1])
            sh->first[j++] = i;
    sh->first[j] = n;
    return 0;
}

void gf__shards_free(gf__shards *sh)
{
    free(sh->first);
    *sh = (gf__shards){0};
}

int gf__shard_epoch_alloc(gf__shard_epoch *e, const gf__shards *sh)
{
    *e = (gf__shard_epoch){0};
    e->seq = malloc((size_t)sh->n * sizeof *e->seq);
    e->start = malloc(((size_t)sh->n + 1) * sizeof *e->start);
    if (!e->seq || !e->start) {
        gf__shard_epoch_free(e);
        return GF_ENOMEM;
    }
    return 0;
}

void gf__shard_epoch_free(gf__shard_epoch *e)
{
    free(e->seq);
    free(e->start);
    *e = (gf__shard_epoch){0};
}

/* Keys of the shard order, apart from the global order's and the
 * sample keys' chains. */
static uint64_t shard_base(uint64_t seed, uint64_t epoch)
{
    return gf__mix64(gf__mix64(seed ^ 0x3c6ef372fe94f82bull) ^ epoch);
}

static uint64_t window_base(uint64_t seed, uint64_t epoch, uint64_t w)
{
    return gf__mix64(shard_base(seed, epoch) ^ gf__mix64(w ^ 0xa54ff53a5f1d36f1ull));
}

void gf__shard_epoch_set(gf__shard_epoch *e, const gf__sampler *s, uint64_t epoch)
{
    const gf__shards *sh = s->shards;
    gf__perm p;
    perm_keyed(&p, sh->n, shard_base(s->seed, epoch), !s->shuffle);
    e->start[0] = 0;
    for (uint32_t k = 0; k < sh->n; k++) {
        uint32_t j = (uint32_t)perm_at(&p, k);
        e->seq[k] = j;
        e->start[k + 1] = e->start[k] + (sh->first[j + 1] - sh->first[j]);
    }
    assert(e->start[sh->n] == s->n);
    e->epoch = epoch;
    e->valid = true;
    e->win_valid = false;
}

/* The last k in [lo, hi) with start[k] <= g (start[lo] <= g < start[hi]):
 * start strictly increases, every kept shard having a sample. */
static uint32_t seq_of(const uint64_t *start, uint32_t lo, uint32_t hi, uint64_t g)
{
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (start[mid] <= g)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

uint64_t gf__shard_at(gf__shard_epoch *e, const gf__sampler *s, uint64_t g)
{
    const gf__shards *sh = s->shards;
    assert(e->valid && g < s->n);
    uint32_t k = seq_of(e->start, 0, sh->n, g);
    uint32_t w0 = k - k % sh->window;
    uint32_t w1 = sh->n - w0 > sh->window ? w0 + sh->window : sh->n;
    uint64_t a = e->start[w0], b = e->start[w1];
    uint64_t w = k / sh->window;
    if (!e->win_valid || e->win_no != w) {
        perm_keyed(&e->win, b - a, window_base(s->seed, e->epoch, w), !s->shuffle);
        e->win_no = w;
        e->win_valid = true;
    }
    uint64_t q = a + perm_at(&e->win, g - a);
    k = seq_of(e->start, w0, w1, q);
    return sh->first[e->seq[k]] + (q - e->start[k]);
}
