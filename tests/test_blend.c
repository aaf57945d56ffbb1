/*
 * The blend's schedule (src/blend.c), alone: each source's draws within
 * binomial bounds of its weight over 100,000 positions (and within a few
 * samples: the schedule is not a random draw), exact over a period, the
 * floor-sum counts equal to a walk's, a walk started at 20 random
 * positions equal to the uninterrupted one, each source's positions in its
 * own order, blocks shuffled by epoch and seed, refusals.
 */
#include "blend.h"
#include "run_suite.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static gf__blend make(const double *w, int n, bool shuffle, uint64_t seed)
{
    gf__blend b;
    char why[160] = "";
    ck_assert_msg(gf__blend_init(&b, w, n, seed, shuffle, why, sizeof why) == 0, "%s", why);
    return b;
}

/* The source owning unit u, by a scan (blend.c searches). */
static int owner_of(const gf__blend *b, uint32_t u)
{
    int s = 0;
    while (s + 1 < b->n && b->cum[s + 1] <= u)
        s++;
    return s;
}

static const double weights[][4] = {{0.7, 0.3}, {1, 1, 1}, {0.05, 0.9, 0.05}, {5, 1, 3, 0.01}};
static const int n_weights[] = {2, 3, 3, 4};

START_TEST(proportions_are_the_weights_within_binomial_bounds)
{
    enum { DRAWS = 391 * GF__BLEND_BLOCK }; /* 100,096: whole blocks, so the
                                                 shuffled counts are the floor sums' */
    for (size_t k = 0; k < 4; k++)
        for (int shuffle = 0; shuffle <= 1; shuffle++) {
            gf__blend b = make(weights[k], n_weights[k], shuffle, 3);
            uint64_t count[4] = {0};
            gf__blend_walk w;
            gf__blend_walk_start(&w, &b, 2, 0);
            for (int q = 0; q < DRAWS; q++) {
                int s;
                uint64_t at;
                gf__blend_walk_next(&w, &s, &at);
                ck_assert_uint_eq(at, count[s]); /* its own order: 0, 1, 2, ... */
                count[s]++;
            }
            double total = 0;
            for (int s = 0; s < n_weights[k]; s++)
                total += weights[k][s];
            for (int s = 0; s < n_weights[k]; s++) {
                double p = weights[k][s] / total, mean = DRAWS * p;
                double sd = sqrt(DRAWS * p * (1 - p));
                /* Binomial: within 4 standard deviations. The schedule is
                 * tighter: a low-discrepancy sequence, a few samples off. */
                ck_assert_msg(fabs((double)count[s] - mean) <= 4 * sd,
                              "weights %zu, source %d: %llu draws, %.1f expected", k, s,
                              (unsigned long long)count[s], mean);
                ck_assert_msg(fabs((double)count[s] - mean) <= 24,
                              "weights %zu, source %d: %llu draws, %.1f expected", k, s,
                              (unsigned long long)count[s], mean);
                ck_assert_uint_eq(count[s], gf__blend_count(&b, 2, s, DRAWS));
            }
        }
}
END_TEST

/* A period of the units draws each source exactly its units. */
START_TEST(a_period_draws_each_source_exactly_its_units)
{
    gf__blend b = make(weights[2], 3, true, 9);
    for (int s = 0; s < 3; s++)
        ck_assert_uint_eq(gf__blend_count(&b, 5, s, GF__BLEND_UNITS), b.cum[s + 1] - b.cum[s]);
    uint64_t sum = 0;
    for (int s = 0; s < 3; s++)
        sum += gf__blend_count(&b, 5, s, 12345);
    ck_assert_uint_eq(sum, 12345);
}
END_TEST

/* The floor sums' counts are a walk's, at any position, and far out. */
START_TEST(counts_by_floor_sum_equal_counting)
{
    gf__blend b = make(weights[3], 4, true, 1);
    uint64_t count[4] = {0};
    for (uint64_t q = 0; q < 5000; q++) {
        for (int s = 0; s < 4; s++)
            ck_assert_uint_eq(gf__blend_count(&b, 7, s, q), count[s]);
        count[owner_of(&b, gf__blend_unit(&b, 7, q))]++;
    }
    /* Far out: every count within a few of its share, summing to q. */
    uint64_t q = 1ull << 40, sum = 0;
    for (int s = 0; s < 4; s++) {
        uint64_t c = gf__blend_count(&b, 7, s, q);
        double want = (double)q * (b.cum[s + 1] - b.cum[s]) / GF__BLEND_UNITS;
        ck_assert_msg(fabs((double)c - want) < 64, "source %d: %llu, %.1f", s,
                      (unsigned long long)c, want);
        sum += c;
    }
    ck_assert_uint_eq(sum, q);
}
END_TEST

/* Resume: a walk started at any position goes on as the uninterrupted one. */
START_TEST(a_walk_started_anywhere_is_the_uninterrupted_walk)
{
    enum { N = 20000 };
    for (int shuffle = 0; shuffle <= 1; shuffle++) {
        gf__blend b = make(weights[3], 4, shuffle, 42);
        static int src[N];
        static uint64_t at[N];
        gf__blend_walk w;
        gf__blend_walk_start(&w, &b, 1, 0);
        for (int q = 0; q < N; q++)
            gf__blend_walk_next(&w, &src[q], &at[q]);
        srand(7);
        for (int k = 0; k < 20; k++) {
            uint64_t from = (uint64_t)rand() % N;
            gf__blend_walk_start(&w, &b, 1, from);
            for (uint64_t q = from; q < N && q < from + 600; q++) {
                int s;
                uint64_t a;
                gf__blend_walk_next(&w, &s, &a);
                ck_assert_int_eq(s, src[q]);
                ck_assert_uint_eq(a, at[q]);
                ck_assert_int_eq(gf__blend_source(&b, 1, q), s); /* pure */
            }
        }
    }
}
END_TEST

/* Shuffled: each block draws what its positions would, in an order of the
 * seed and epoch; unshuffled, the same every epoch. */
START_TEST(blocks_are_shuffled_by_seed_and_epoch)
{
    gf__blend b = make(weights[1], 3, true, 11), c = make(weights[1], 3, true, 12);
    int differ_epoch = 0, differ_seed = 0;
    for (uint64_t q = 0; q < 4 * GF__BLEND_BLOCK; q++) {
        differ_epoch += gf__blend_source(&b, 0, q) != gf__blend_source(&b, 1, q);
        differ_seed += gf__blend_source(&b, 0, q) != gf__blend_source(&c, 0, q);
    }
    ck_assert_int_gt(differ_epoch, GF__BLEND_BLOCK);
    ck_assert_int_gt(differ_seed, GF__BLEND_BLOCK);
    /* A block's draws: those of its positions' units. */
    for (uint64_t blk = 0; blk < 8; blk++) {
        int got[3] = {0}, want[3] = {0};
        for (uint64_t q = blk * GF__BLEND_BLOCK; q < (blk + 1) * GF__BLEND_BLOCK; q++) {
            got[gf__blend_source(&b, 3, q)]++;
            want[owner_of(&b, gf__blend_unit(&b, 3, q))]++;
        }
        ck_assert_int_eq(memcmp(got, want, sizeof got), 0);
    }
    gf__blend u = make(weights[1], 3, false, 11);
    for (uint64_t q = 0; q < 1000; q++)
        ck_assert_int_eq(gf__blend_source(&u, 0, q), gf__blend_source(&u, 9, q));
    /* Unshuffled, evenly: three equal sources never draw one twice in a row
     * more than once in a while. */
    int repeats = 0;
    for (uint64_t q = 1; q < 3000; q++)
        repeats += gf__blend_source(&u, 0, q) == gf__blend_source(&u, 0, q - 1);
    ck_assert_int_lt(repeats, 300);
}
END_TEST

START_TEST(bad_weights_are_refused)
{
    gf__blend b;
    char why[160];
    const double neg[] = {1, -1}, zero[] = {1, 0}, tiny[] = {1, 1e-9}, inf[] = {1, INFINITY};
    ck_assert_int_eq(gf__blend_init(&b, neg, 2, 0, true, why, sizeof why), GF_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "source 2's weight -1"));
    ck_assert_int_eq(gf__blend_init(&b, zero, 2, 0, true, why, sizeof why), GF_EINVAL);
    ck_assert_int_eq(gf__blend_init(&b, inf, 2, 0, true, why, sizeof why), GF_EINVAL);
    ck_assert_int_eq(gf__blend_init(&b, tiny, 2, 0, true, why, sizeof why), GF_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "never be drawn"));
    ck_assert_int_eq(gf__blend_init(&b, neg, 0, 0, true, why, sizeof why), GF_EINVAL);
    ck_assert_int_eq(gf__blend_init(&b, neg, GF__BLEND_MAX + 1, 0, true, why, sizeof why),
                     GF_EINVAL);
    const double one[] = {3};
    ck_assert_int_eq(gf__blend_init(&b, one, 1, 0, true, why, sizeof why), 0);
    ck_assert_int_eq(gf__blend_source(&b, 0, 12345), 0);
}
END_TEST

static Suite *blend_suite(void)
{
    Suite *su = suite_create("blend");
    TCase *tc = tcase_create("schedule");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, proportions_are_the_weights_within_binomial_bounds);
    tcase_add_test(tc, a_period_draws_each_source_exactly_its_units);
    tcase_add_test(tc, counts_by_floor_sum_equal_counting);
    tcase_add_test(tc, a_walk_started_anywhere_is_the_uninterrupted_walk);
    tcase_add_test(tc, blocks_are_shuffled_by_seed_and_epoch);
    tcase_add_test(tc, bad_weights_are_refused);
    suite_add_tcase(su, tc);
    return su;
}

int main(void)
{
    return tu_run_suite(blend_suite());
}
