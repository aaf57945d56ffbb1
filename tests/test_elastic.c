/*
 * Elastic resume: a state saved on W ranks resumed on W' ranks. Over the
 * rest of the state's epoch the W' ranks deliver exactly what the W ranks
 * had not, each sample once (padding and drop_last as documented in
 * gpufeed.h), and the next epoch is a fresh W'-rank run's; for both
 * orders, drop_last on and off, at positions in the middle of a batch, of
 * a shard window and of an epoch, and across several changes in one epoch.
 * First the sampler alone (every case, exhaustively small), then the
 * loader through gf_get_state / gf_set_state on tar shards.
 */
#include "cursor.h"
#include "mix.h"
#include "run_suite.h"
#include "testutil.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the sampler ---------------------------------------------------------- */

/* A data set of shards with these sample counts, the shard order (window)
 * or the global order (window 0), for one world. */
typedef struct order {
    uint32_t *shard;
    uint64_t n;
    gf__shards sh;
    gf__shard_epoch se;
    gf__sampler s;
} order;

static const int counts[] = {5, 7, 3, 6, 4, 8, 2, 5, 6, 4, 1, 3}; /* 54 samples */
enum { N_SHARDS = sizeof counts / sizeof counts[0] };

static void order_init(order *o, uint32_t window, uint32_t rank, uint32_t world, int drop_last)
{
    *o = (order){0};
    for (int k = 0; k < N_SHARDS; k++)
        o->n += (uint64_t)counts[k];
    ck_assert_int_eq(gf__sampler_init(&o->s, o->n, 17, 1, rank, world, drop_last), 0);
    if (!window)
        return;
    o->shard = malloc(o->n * sizeof *o->shard);
    uint64_t i = 0;
    for (int k = 0; k < N_SHARDS; k++)
        for (int j = 0; j < counts[k]; j++)
            o->shard[i++] = (uint32_t)k;
    ck_assert_int_eq(gf__shards_init(&o->sh, o->shard, o->n, window), 0);
    ck_assert_int_eq(gf__shard_epoch_alloc(&o->se, &o->sh), 0);
    o->s.shards = &o->sh;
}

static void order_free(order *o)
{
    if (o->shard) {
        gf__shard_epoch_free(&o->se);
        gf__shards_free(&o->sh);
        free(o->shard);
    }
}

/* Positions [from, to) of epoch, as the loader's cursor reads them. */
static void take(order *o, uint64_t epoch, uint64_t from, uint64_t to, uint64_t *out)
{
    gf__cursor c;
    gf__cursor_start(&c, &o->s, NULL, o->shard ? &o->se : NULL, NULL, epoch, 0);
    for (uint64_t p = from; p < to; p++)
        out[p - from] = gf__cursor_sample(&c, epoch, p, NULL);
}

/* A world of `world` ranks: each its own sampler, the rest (first, pos0,
 * taken) set unless first is 0. */
typedef struct world {
    order r[8];
    uint32_t n;
} world;

static void world_init(world *w, uint32_t window, uint32_t n, int drop_last, uint64_t epoch,
                       uint32_t first, uint64_t pos0, uint64_t taken, int *rc)
{
    w->n = n;
    for (uint32_t r = 0; r < n; r++) {
        order_init(&w->r[r], window, r, n, drop_last);
        *rc = first ? gf__sampler_rest(&w->r[r].s, epoch, first, pos0, taken) : 0;
    }
}

static void world_free(world *w)
{
    for (uint32_t r = 0; r < w->n; r++)
        order_free(&w->r[r]);
}

/* Adds each rank's positions [0, upto) of epoch (upto = -1: its whole
 * share) to seen[] and returns how many. */
static uint64_t deliver(world *w, uint64_t epoch, int64_t upto, int *seen)
{
    uint64_t total = 0, buf[64];
    for (uint32_t r = 0; r < w->n; r++) {
        uint64_t len = gf__sampler_len(&w->r[r].s, epoch);
        uint64_t to = upto < 0 ? len : (uint64_t)upto;
        ck_assert_uint_le(to, len);
        ck_assert_uint_le(to, 64);
        take(&w->r[r], epoch, 0, to, buf);
        for (uint64_t i = 0; i < to; i++)
            seen[buf[i]]++;
        total += to;
    }
    return total;
}

/* The real (not padding) positions the first world's ranks deliver at pos
 * each: the epoch positions below n they read. */
static uint64_t real_of(world *w, uint64_t pos)
{
    uint64_t real = 0;
    for (uint32_t r = 0; r < w->n; r++) {
        const gf__sampler *s = &w->r[r].s;
        for (uint64_t p = 0; p < pos; p++)
            real += (s->shards ? r * s->len + p : p * s->world + r) < s->n;
    }
    return real;
}

static const uint32_t windows[] = {0, 1, 3};
static const uint32_t moves[][3] = {{4, 2, 0}, {4, 3, 0}, {3, 5, 0}, {2, 1, 0},
                                    {4, 3, 5}, {2, 5, 1}, {5, 2, 3}};

/* Every move, order, drop_last and first position; a third world (moves'
 * third column) takes over from the second at each of its positions. */
START_TEST(the_rest_of_an_epoch_is_delivered_once_on_any_world)
{
    const uint64_t epoch = 3;
    for (size_t wi = 0; wi < sizeof windows / sizeof windows[0]; wi++)
        for (size_t m = 0; m < sizeof moves / sizeof moves[0]; m++)
            for (int drop = 0; drop <= 1; drop++) {
                world a;
                int rc;
                world_init(&a, windows[wi], moves[m][0], drop, epoch, 0, 0, 0, &rc);
                uint64_t len0 = a.r[0].s.len;
                for (uint64_t p0 = 0; p0 <= len0; p0++) {
                    int seen[64] = {0};
                    uint64_t total = deliver(&a, epoch, (int64_t)p0, seen);
                    uint64_t pad = total - real_of(&a, p0);
                    world b;
                    world_init(&b, windows[wi], moves[m][1], drop, epoch, moves[m][0], p0, 0,
                               &rc);
                    ck_assert_int_ge(rc, 0);
                    if (rc == 1) /* the epoch is done: nothing of it is left */
                        ck_assert_msg(drop || real_of(&a, p0) == a.r[0].s.n, "%llu",
                                      (unsigned long long)p0);
                    if (p0 == 0) /* no change in its epoch: the new world's own */
                        ck_assert(!b.r[0].s.rest.on);
                    uint64_t left = b.r[0].s.rest.on ? b.r[0].s.rest.size : 0;
                    /* Equal shares; a third world at each of b's positions. */
                    uint64_t lenb = rc == 1 ? 0 : gf__sampler_len(&b.r[0].s, epoch);
                    for (uint32_t r = 1; r < b.n; r++)
                        ck_assert_uint_eq(rc == 1 ? 0 : gf__sampler_len(&b.r[r].s, epoch), lenb);
                    uint32_t third = moves[m][2];
                    uint64_t stops = third && b.r[0].s.rest.on ? lenb : 0;
                    for (uint64_t p1 = 0; p1 <= stops; p1++) {
                        int s2[64];
                        memcpy(s2, seen, sizeof s2);
                        uint64_t t2 = total, pad2 = pad;
                        if (rc == 0 && !third) {
                            t2 += deliver(&b, epoch, -1, s2);
                            uint64_t rest = b.r[0].s.rest.on ? left : a.r[0].s.n;
                            pad2 += lenb * b.n > rest ? lenb * b.n - rest : 0;
                        } else if (rc == 0 && b.r[0].s.rest.on) {
                            t2 += deliver(&b, epoch, (int64_t)p1, s2);
                            uint64_t taken = gf__rest_taken(&b.r[0].s, p1);
                            pad2 += b.n * p1 > taken ? b.n * p1 - taken : 0;
                            world c;
                            int rc3;
                            world_init(&c, windows[wi], third, drop, epoch, moves[m][0], p0,
                                       taken, &rc3);
                            ck_assert_int_ge(rc3, 0);
                            if (rc3 == 0) {
                                uint64_t lenc = gf__sampler_len(&c.r[0].s, epoch);
                                t2 += deliver(&c, epoch, -1, s2);
                                uint64_t rest = c.r[0].s.rest.size - c.r[0].s.rest.taken;
                                pad2 += lenc * c.n > rest ? lenc * c.n - rest : 0;
                            }
                            world_free(&c);
                        } else if (rc == 0) {
                            continue; /* p0 == 0: no rest, covered by !third */
                        }
                        /* Each sample once, but padding (the epoch's first samples) and
                         * drop_last's cut (fewer than a world's samples each time). */
                        uint64_t once = 0, twice = 0, missing = 0;
                        for (uint64_t i = 0; i < a.r[0].s.n; i++) {
                            once += s2[i] == 1;
                            twice += s2[i] > 1 ? (uint64_t)s2[i] - 1 : 0;
                            missing += s2[i] == 0;
                        }
                        ck_assert_msg(twice == pad2,
                                      "window %u, %u -> %u -> %u, drop %d, p0 %llu, p1 %llu: "
                                      "%llu repeats, %llu padding", windows[wi], moves[m][0],
                                      moves[m][1], third, drop, (unsigned long long)p0,
                                      (unsigned long long)p1, (unsigned long long)twice,
                                      (unsigned long long)pad2);
                        if (drop) {
                            ck_assert_uint_eq(twice, 0);
                            ck_assert_uint_lt(missing, (uint64_t)(moves[m][0] + moves[m][1] +
                                                                   (third ? third : 0)));
                        } else {
                            ck_assert_msg(missing == 0,
                                          "window %u, %u -> %u -> %u, p0 %llu, p1 %llu: %llu "
                                          "samples never delivered",
                                          windows[wi], moves[m][0], moves[m][1], third,
                                          (unsigned long long)p0, (unsigned long long)p1,
                                          (unsigned long long)missing);
                        }
                        uint64_t sum = 0;
                        for (uint64_t i = 0; i < a.r[0].s.n; i++)
                            sum += (uint64_t)s2[i];
                        ck_assert_uint_eq(t2, sum);
                    }
                    world_free(&b);
                }
                world_free(&a);
            }
}
END_TEST

/* The epoch after the rest is a fresh run's on the new world, sample for
 * sample; so is the one before it. */
START_TEST(the_next_epoch_is_the_new_worlds_own)
{
    for (size_t wi = 0; wi < sizeof windows / sizeof windows[0]; wi++)
        for (int drop = 0; drop <= 1; drop++) {
            world b, fresh;
            int rc;
            world_init(&b, windows[wi], 3, drop, 5, 4, 4, 0, &rc);
            ck_assert_int_eq(rc, 0);
            world_init(&fresh, windows[wi], 3, drop, 0, 0, 0, 0, &rc);
            for (uint32_t r = 0; r < 3; r++)
                for (uint64_t e = 4; e <= 6; e += 2) {
                    uint64_t len = gf__sampler_len(&b.r[r].s, e);
                    ck_assert_uint_eq(len, fresh.r[r].s.len);
                    uint64_t x[64], y[64];
                    take(&b.r[r], e, 0, len, x);
                    take(&fresh.r[r], e, 0, len, y);
                    ck_assert_int_eq(memcmp(x, y, len * sizeof *x), 0);
                }
            world_free(&b);
            world_free(&fresh);
        }
}
END_TEST

/* In the shard order each rank reads the rest a window at a time: the
 * windows its samples fall in never go back, so a shard is read once. */
START_TEST(the_shard_orders_rest_keeps_its_windows)
{
    world b;
    int rc;
    world_init(&b, 3, 3, 0, 2, 4, 5, 0, &rc);
    ck_assert_int_eq(rc, 0);
    for (uint32_t r = 0; r < 3; r++) {
        order *o = &b.r[r];
        uint64_t len = gf__sampler_len(&o->s, 2), x[64];
        take(o, 2, 0, len, x);
        /* The window of a sample's shard in epoch 2's shard sequence. */
        int last = -1;
        for (uint64_t i = 0; i + 1 < len; i++) { /* the last may be padding */
            uint32_t k = o->shard[x[i]];
            uint32_t at = 0;
            while (o->se.seq[at] != k)
                at++;
            int win = (int)(at / o->sh.window);
            ck_assert_int_ge(win, last);
            last = win;
        }
    }
    world_free(&b);
}
END_TEST

START_TEST(a_rest_that_does_not_fit_is_refused)
{
    order o;
    order_init(&o, 0, 0, 2, 0);
    ck_assert_int_eq(gf__sampler_rest(&o.s, 0, 0, 1, 0), GF_EINVAL); /* no world */
    ck_assert_int_eq(gf__sampler_rest(&o.s, 0, 4, 15, 0), GF_EINVAL); /* 54/4 -> 14 */
    ck_assert_int_eq(gf__sampler_rest(&o.s, 0, 4, 14, 0), 1);         /* all done */
    ck_assert_int_eq(gf__sampler_rest(&o.s, 0, 4, 3, 1000), 1);       /* taken: all */
    ck_assert(!o.s.rest.on);
    ck_assert_int_eq(gf__sampler_rest(&o.s, 0, 4, 3, 0), 0);
    ck_assert(o.s.rest.on);
    ck_assert_uint_eq(o.s.rest.size, 54 - 12);
    ck_assert_uint_eq(o.s.rest.len, 21);
    order_free(&o);
}
END_TEST

/* ---- through the loader --------------------------------------------------- */

enum { PX = 8, B = 3 };
static char *dir;
static char pattern[4200];
static uint64_t n_samples;

static void setup(void)
{
    dir = tu_mkdtemp();
    n_samples = tu_counted_shards(dir, counts, N_SHARDS, PX, pattern, sizeof pattern);
}

static void teardown(void)
{
    tu_rmrf(dir);
    free(dir);
}

static int l_drop; /* the loaders' drop_last, for drain */

static gf_loader *open_rank(gf_order ord, int drop, int rank, int world)
{
    l_drop = drop;
    gf_settings s;
    tu_cpu_settings(&s);
    s.data = pattern;
    s.width = s.height = PX;
    s.transform = GF_TRANSFORM_TRAIN; /* crops keyed by the sample */
    s.batch_size = B;
    s.threads = 2;
    s.seed = 7;
    s.epochs = 0;
    s.order = ord;
    s.shard_window = 2;
    s.drop_last = drop;
    s.rank = rank;
    s.world = world;
    gf_loader *l = NULL;
    ck_assert_msg(gf_open(&l, &s) == 0, "%s", gf_last_error(l));
    return l;
}

/* The rest of the loader's current epoch (its batches while their epoch
 * is `epoch`, up to position `upto`, -1 the end): indices into seen[],
 * pixel hashes (a batch each) into hash[]. Returns the samples. */
static int drain(gf_loader *l, uint64_t epoch, int64_t upto, int *seen, uint64_t *hash,
                 int *n_hash)
{
    int got = 0;
    for (;;) {
        gf_state st;
        gf_stats stats;
        ck_assert_int_eq(gf_get_state(l, &st), 0);
        ck_assert_int_eq(gf_get_stats(l, &stats), 0);
        if (l_drop && st.position + B > stats.epoch_samples) {
            st.epoch++; /* drop_last drops the short batch left */
            st.position = 0;
        }
        if (st.epoch != epoch || (upto >= 0 && st.position >= (uint64_t)upto))
            return got;
        gf_batch *b;
        int rc = gf_next(l, &b);
        ck_assert_msg(rc == 0, "%s", gf_last_error(l));
        ck_assert_uint_eq(b->epoch, epoch);
        int k = b->count;
        if (upto >= 0 && b->position > (uint64_t)upto)
            k -= (int)(b->position - (uint64_t)upto); /* the batch's first k */
        for (int i = 0; i < k; i++)
            seen[b->indices[i]]++;
        if (hash)
            hash[(*n_hash)++] = gf__fnv1a64(GF__FNV1A64_BASIS, b->pixels,
                                            (size_t)b->count * PX * PX * 3);
        got += k;
        uint64_t end = b->position; /* the batch is the loader's again once released */
        gf_release(l, b);
        if (upto >= 0 && end >= (uint64_t)upto)
            return got;
    }
}

typedef struct move {
    int from, to;
} move;

/* W ranks deliver `at` positions each of epoch 1 (from a seek: mid batch
 * when at % B); rank 0's state resumes W' ranks, which finish the epoch
 * and read epoch 2, compared with a fresh W'-rank run's. */
static void resume_across(gf_order ord, int drop, move mv, uint64_t at)
{
    int seen[64] = {0};
    int total = 0;
    gf_state st = {0};
    for (int r = 0; r < mv.from; r++) {
        gf_loader *l = open_rank(ord, drop, r, mv.from);
        ck_assert_int_eq(gf_seek(l, 1, 0), 0);
        total += drain(l, 1, (int64_t)at, seen, NULL, NULL);
        if (r == mv.from - 1) { /* any rank's: every rank is at `at` */
            ck_assert_int_eq(gf_seek(l, 1, at), 0);
            ck_assert_int_eq(gf_get_state(l, &st), 0);
        }
        gf_close(&l);
    }
    ck_assert_uint_eq(st.version, GF_STATE_VERSION);
    ck_assert_uint_eq(st.samples, n_samples);
    int shares = -1;
    for (int r = 0; r < mv.to; r++) {
        gf_loader *l = open_rank(ord, drop, r, mv.to);
        ck_assert_msg(gf_set_state(l, &st) == 0, "%s", gf_last_error(l));
        gf_stats stats;
        ck_assert_int_eq(gf_get_stats(l, &stats), 0);
        char want[96];
        snprintf(want, sizeof want, "resumed a %d-rank state on %d ranks at epoch 1, sample ",
                 mv.from, mv.to);
        ck_assert_msg(strncmp(stats.resume_note, want, strlen(want)) == 0, "%s",
                      stats.resume_note);
        int got = drain(l, 1, -1, seen, NULL, NULL);
        if (shares < 0)
            shares = got;
        ck_assert_int_eq(got, shares); /* equal shares, batch for batch */
        total += got;
        /* Epoch 2: a fresh W'-rank run's, byte for byte. */
        uint64_t h1[32], h2[32];
        int n1 = 0, n2 = 0, s1[64] = {0}, s2[64] = {0};
        drain(l, 2, -1, s1, h1, &n1);
        gf_close(&l);
        l = open_rank(ord, drop, r, mv.to);
        ck_assert_int_eq(gf_seek(l, 2, 0), 0);
        drain(l, 2, -1, s2, h2, &n2);
        gf_close(&l);
        ck_assert_int_eq(n1, n2);
        ck_assert_int_eq(memcmp(h1, h2, (size_t)n1 * sizeof *h1), 0);
        ck_assert_int_eq(memcmp(s1, s2, sizeof s1), 0);
    }
    int missing = 0, extra = 0;
    for (uint64_t i = 0; i < n_samples; i++) {
        missing += seen[i] == 0;
        extra += seen[i] > 1 ? seen[i] - 1 : 0;
    }
    if (drop) { /* cut: under a world's samples, then each rank's short batch */
        ck_assert_int_eq(extra, 0);
        ck_assert_int_lt(missing, mv.to * B);
    } else { /* padding: under a world's samples, each world */
        ck_assert_msg(missing == 0, "%d -> %d at %llu, %s: %d never delivered", mv.from, mv.to,
                      (unsigned long long)at, ord == GF_ORDER_SHARDS ? "shards" : "global",
                      missing);
        ck_assert_int_lt(extra, mv.from + mv.to - 1);
    }
    ck_assert_int_eq(total, (int)n_samples - missing + extra);
}

static const move worlds[] = {{4, 2}, {4, 3}, {3, 5}, {2, 1}};

START_TEST(a_state_resumes_on_another_number_of_ranks)
{
    gf_order ord = _i % 2 ? GF_ORDER_SHARDS : GF_ORDER_GLOBAL;
    int drop = _i / 2;
    for (size_t m = 0; m < sizeof worlds / sizeof worlds[0]; m++) {
        uint64_t len0 = n_samples / (uint64_t)worlds[m].from;
        /* Mid batch; mid window (the shard order's first window ends past
         * it); mid epoch. */
        uint64_t at[] = {B + 1, 5, len0 / 2 + 1};
        for (size_t k = 0; k < 3; k++)
            resume_across(ord, drop, worlds[m], at[k]);
    }
}
END_TEST

/* 4 -> 3 mid epoch, then 3 -> 5 before the epoch ends: the rest's rest;
 * and 3 -> 3 there: the rest resumed as is. */
START_TEST(a_second_change_in_the_same_epoch_takes_the_rest_of_the_rest)
{
    gf_order ord = _i % 2 ? GF_ORDER_SHARDS : GF_ORDER_GLOBAL;
    int seen[64] = {0};
    gf_state st = {0};
    for (int r = 0; r < 4; r++) {
        gf_loader *l = open_rank(ord, 0, r, 4);
        ck_assert_int_eq(gf_seek(l, 1, 0), 0);
        drain(l, 1, 4, seen, NULL, NULL);
        ck_assert_int_eq(gf_seek(l, 1, 4), 0);
        ck_assert_int_eq(gf_get_state(l, &st), 0);
        gf_close(&l);
    }
    gf_state mid = {0};
    for (int r = 0; r < 3; r++) {
        gf_loader *l = open_rank(ord, 0, r, 3);
        ck_assert_int_eq(gf_set_state(l, &st), 0);
        drain(l, 1, 4, seen, NULL, NULL); /* 4 of its positions: mid batch */
        ck_assert_int_eq(gf_seek(l, 1, 4), 0);
        ck_assert_int_eq(gf_get_state(l, &mid), 0);
        ck_assert_uint_eq(mid.rest_world, 4);
        ck_assert_uint_eq(mid.rest_position, 4);
        /* The same world resumes the rest where it was: what this rank
         * delivers next, batch for batch. */
        uint64_t h1[32], h2[32];
        int n1 = 0, n2 = 0, s1[64] = {0}, s2[64] = {0};
        drain(l, 1, -1, s1, h1, &n1);
        gf_close(&l);
        l = open_rank(ord, 0, (r + 1) % 3, 3); /* any rank's state is the job's */
        mid.rank = (uint32_t)r;
        ck_assert_int_eq(gf_set_state(l, &mid), 0);
        gf_close(&l);
        l = open_rank(ord, 0, r, 3);
        ck_assert_msg(gf_set_state(l, &mid) == 0, "%s", gf_last_error(l));
        gf_stats stats;
        gf_get_stats(l, &stats);
        ck_assert_str_eq(stats.resume_note, "");
        drain(l, 1, -1, s2, h2, &n2);
        ck_assert_int_eq(n1, n2);
        ck_assert_int_eq(memcmp(h1, h2, (size_t)n1 * sizeof *h1), 0);
        ck_assert_int_eq(memcmp(s1, s2, sizeof s1), 0);
        gf_close(&l);
    }
    for (int r = 0; r < 5; r++) {
        gf_loader *l = open_rank(ord, 0, r, 5);
        ck_assert_msg(gf_set_state(l, &mid) == 0, "%s", gf_last_error(l));
        gf_stats stats;
        gf_get_stats(l, &stats);
        ck_assert_str_eq(stats.resume_note,
                         "resumed a 3-rank state on 5 ranks at epoch 1, sample 28 of 54");
        drain(l, 1, -1, seen, NULL, NULL);
        gf_close(&l);
    }
    int extra = 0;
    for (uint64_t i = 0; i < n_samples; i++) {
        ck_assert_msg(seen[i] >= 1, "sample %llu never delivered", (unsigned long long)i);
        extra += seen[i] - 1;
    }
    ck_assert_int_lt(extra, 5);
}
END_TEST

/* The same world resumes any rank's state; another seed or data set is
 * refused, naming the field. */
START_TEST(a_state_of_another_seed_or_data_set_is_refused)
{
    gf_loader *l = open_rank(GF_ORDER_GLOBAL, 0, 1, 2);
    gf_state st;
    ck_assert_int_eq(gf_seek(l, 0, 5), 0);
    ck_assert_int_eq(gf_get_state(l, &st), 0);
    gf_loader *o = open_rank(GF_ORDER_GLOBAL, 0, 0, 2);
    ck_assert_msg(gf_set_state(o, &st) == 0, "%s", gf_last_error(o));
    gf_stats stats;
    gf_get_stats(o, &stats);
    ck_assert_str_eq(stats.resume_note, ""); /* no change of world */
    gf_state bad = st;
    bad.seed++;
    ck_assert_int_eq(gf_set_state(o, &bad), GF_EINVAL);
    ck_assert_ptr_nonnull(strstr(gf_last_error(o), "seed"));
    bad = st;
    bad.index_hash ^= 1;
    ck_assert_int_eq(gf_set_state(o, &bad), GF_EINVAL);
    ck_assert_ptr_nonnull(strstr(gf_last_error(o), "index_hash"));
    ck_assert_ptr_nonnull(strstr(gf_last_error(o), "another data set"));
    bad = st;
    bad.samples--;
    ck_assert_int_eq(gf_set_state(o, &bad), GF_EINVAL);
    ck_assert_ptr_nonnull(strstr(gf_last_error(o), "samples"));
    bad = st;
    bad.rest_world = 3;
    bad.rest_position = 1000;
    ck_assert_int_eq(gf_set_state(o, &bad), GF_EINVAL);
    ck_assert_ptr_nonnull(strstr(gf_last_error(o), "rest_position"));
    /* An earlier library's state (version 1): no identity to check. */
    bad = st;
    bad.version = 1;
    bad.samples = bad.index_hash = 0;
    ck_assert_int_eq(gf_set_state(o, &bad), 0);
    gf_close(&o);
    gf_close(&l);
}
END_TEST

/* A seek keeps the split epoch while it stays in it; one out of it gives
 * the world's own epochs (the rest describes its one epoch). */
START_TEST(a_seek_out_of_the_split_epoch_ends_the_rest)
{
    gf_loader *a = open_rank(GF_ORDER_GLOBAL, 0, 0, 4);
    gf_state st;
    ck_assert_int_eq(gf_seek(a, 1, 5), 0);
    ck_assert_int_eq(gf_get_state(a, &st), 0);
    gf_close(&a);
    gf_loader *l = open_rank(GF_ORDER_GLOBAL, 0, 1, 2);
    ck_assert_int_eq(gf_set_state(l, &st), 0);
    gf_stats stats;
    gf_get_stats(l, &stats);
    ck_assert_uint_eq(stats.epoch_samples, (54 - 20 + 1) / 2); /* the rest's share */
    ck_assert_int_eq(gf_seek(l, 1, 3), 0); /* within it: kept */
    gf_get_stats(l, &stats);
    ck_assert_uint_eq(stats.epoch_samples, 17);
    ck_assert_int_eq(gf_get_state(l, &st), 0);
    ck_assert_uint_eq(st.rest_world, 4);
    ck_assert_int_eq(gf_seek(l, 2, 0), 0); /* out of it: gone */
    ck_assert_int_eq(gf_get_state(l, &st), 0);
    ck_assert_uint_eq(st.rest_world, 0);
    ck_assert_int_eq(gf_seek(l, 1, 0), 0);
    gf_get_stats(l, &stats);
    ck_assert_uint_eq(stats.epoch_samples, 27); /* epoch 1 whole, a 2-rank run's */
    gf_close(&l);
}
END_TEST

/* A split state's position is checked against its world's share of the
 * rest (a huge one would wrap taken); the note counts what was delivered
 * when drop_last leaves this world nothing. */
START_TEST(a_split_state_out_of_its_share_is_refused)
{
    gf_loader *l = open_rank(GF_ORDER_GLOBAL, 0, 0, 3);
    gf_state st;
    ck_assert_int_eq(gf_get_state(l, &st), 0);
    st.world = 2;
    st.epoch = 1;
    st.rest_world = 4;
    st.rest_position = 3;
    st.rest_taken = 0;
    st.position = 1ull << 63;
    ck_assert_int_eq(gf_set_state(l, &st), GF_EINVAL);
    ck_assert_ptr_nonnull(strstr(gf_last_error(l), "rest_world 4"));
    st.position = 22; /* (54 - 12) / 2 = 21: one past */
    ck_assert_int_eq(gf_set_state(l, &st), GF_EINVAL);
    st.position = 21; /* the end of its share: the epoch is done */
    ck_assert_msg(gf_set_state(l, &st) == 0, "%s", gf_last_error(l));
    ck_assert_int_eq(gf_get_state(l, &st), 0);
    ck_assert_uint_eq(st.epoch, 2);
    gf_close(&l);
    /* drop_last: 4 ranks at 12 leave 6, under one each for 8 ranks. */
    l = open_rank(GF_ORDER_GLOBAL, 1, 0, 4);
    ck_assert_int_eq(gf_seek(l, 1, 12), 0);
    ck_assert_int_eq(gf_get_state(l, &st), 0);
    gf_close(&l);
    l = open_rank(GF_ORDER_GLOBAL, 1, 7, 8);
    ck_assert_msg(gf_set_state(l, &st) == 0, "%s", gf_last_error(l));
    gf_stats stats;
    gf_get_stats(l, &stats);
    ck_assert_str_eq(stats.resume_note,
                     "resumed a 4-rank state on 8 ranks at epoch 1, sample 48 of 54");
    ck_assert_int_eq(gf_get_state(l, &st), 0);
    ck_assert_uint_eq(st.epoch, 2);
    gf_close(&l);
}
END_TEST

static Suite *elastic_suite(void)
{
    Suite *su = suite_create("elastic");
    TCase *tc = tcase_create("sampler");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, the_rest_of_an_epoch_is_delivered_once_on_any_world);
    tcase_add_test(tc, the_next_epoch_is_the_new_worlds_own);
    tcase_add_test(tc, the_shard_orders_rest_keeps_its_windows);
    tcase_add_test(tc, a_rest_that_does_not_fit_is_refused);
    suite_add_tcase(su, tc);
    tc = tcase_create("loader");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, a_state_resumes_on_another_number_of_ranks, 0, 4);
    tcase_add_loop_test(tc, a_second_change_in_the_same_epoch_takes_the_rest_of_the_rest, 0, 2);
    tcase_add_test(tc, a_state_of_another_seed_or_data_set_is_refused);
    tcase_add_test(tc, a_seek_out_of_the_split_epoch_ends_the_rest);
    tcase_add_test(tc, a_split_state_out_of_its_share_is_refused);
    suite_add_tcase(su, tc);
    return su;
}

int main(void)
{
    return tu_run_suite(elastic_suite());
}
