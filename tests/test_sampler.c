/* Sampler: the epoch order is a keyed bijection, split across ranks like
 * DistributedSampler, and resumable at any position. */
#include "sampler.h"
#include "testutil.h"
#include "run_suite.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

/* The full order of one rank's epoch. */
static uint64_t *order(uint64_t n, uint64_t seed, uint64_t epoch, int shuffle, uint32_t rank,
                       uint32_t world, int drop_last, uint64_t *len)
{
    gf__sampler s;
    gf__perm p;
    ck_assert_int_eq(gf__sampler_init(&s, n, seed, shuffle, rank, world, drop_last), 0);
    gf__perm_init(&p, &s, epoch);
    uint64_t *o = malloc(s.len * sizeof *o);
    ck_assert_ptr_nonnull(o);
    for (uint64_t i = 0; i < s.len; i++)
        o[i] = gf__sampler_at(&s, &p, i);
    *len = s.len;
    return o;
}

static void assert_bijection(uint64_t n, uint64_t seed, uint64_t epoch, int shuffle)
{
    uint64_t len;
    uint64_t *o = order(n, seed, epoch, shuffle, 0, 1, 0, &len);
    ck_assert_uint_eq(len, n);
    unsigned char *seen = calloc(n, 1);
    for (uint64_t i = 0; i < n; i++) {
        ck_assert_uint_lt(o[i], n);
        ck_assert_msg(!seen[o[i]], "n=%llu: index %llu twice", (unsigned long long)n,
                      (unsigned long long)o[i]);
        seen[o[i]] = 1;
    }
    free(seen);
    free(o);
}

START_TEST(shuffled_order_is_a_bijection_for_every_small_n)
{
    for (uint64_t n = 1; n <= 300; n++)
        for (uint64_t seed = 0; seed < 3; seed++)
            assert_bijection(n, seed, n * 7 + seed, 1);
}
END_TEST

START_TEST(shuffled_order_is_a_bijection_for_large_n)
{
    const uint64_t ns[] = {65536, 65537, 100003, (1u << 18) + 1};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        assert_bijection(ns[i], 42, 3, 1);
}
END_TEST

START_TEST(unshuffled_order_is_the_identity)
{
    const uint64_t ns[] = {1, 2, 3, 17, 256, 100003};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        assert_bijection(ns[k], 5, 9, 0);
        uint64_t len;
        uint64_t *o = order(ns[k], 5, 9, 0, 0, 1, 0, &len);
        for (uint64_t i = 0; i < len; i++)
            ck_assert_uint_eq(o[i], i);
        free(o);
    }
}
END_TEST

START_TEST(same_seed_and_epoch_give_the_same_order)
{
    uint64_t la, lb;
    uint64_t *a = order(1000, 7, 2, 1, 0, 1, 0, &la);
    uint64_t *b = order(1000, 7, 2, 1, 0, 1, 0, &lb);
    ck_assert_mem_eq(a, b, la * sizeof *a);
    free(a);
    free(b);
}
END_TEST

static int same_order(uint64_t n, uint64_t s1, uint64_t e1, uint64_t s2, uint64_t e2)
{
    uint64_t la, lb;
    uint64_t *a = order(n, s1, e1, 1, 0, 1, 0, &la);
    uint64_t *b = order(n, s2, e2, 1, 0, 1, 0, &lb);
    int same = memcmp(a, b, la * sizeof *a) == 0;
    free(a);
    free(b);
    return same;
}

START_TEST(different_epochs_give_different_orders)
{
    for (uint64_t e = 1; e < 20; e++)
        ck_assert_msg(!same_order(1000, 7, 0, 7, e), "epoch 0 and %llu agree",
                      (unsigned long long)e);
}
END_TEST

START_TEST(different_seeds_give_different_orders)
{
    for (uint64_t s = 1; s < 20; s++)
        ck_assert_msg(!same_order(1000, 0, 4, s, 4), "seed 0 and %llu agree",
                      (unsigned long long)s);
}
END_TEST

START_TEST(shuffled_order_is_not_the_identity)
{
    uint64_t len;
    uint64_t *o = order(100000, 0, 0, 1, 0, 1, 0, &len);
    uint64_t fixed = 0;
    for (uint64_t i = 0; i < len; i++)
        fixed += o[i] == i;
    /* A random permutation has about one fixed point. */
    ck_assert_uint_lt(fixed, 20);
    free(o);
}
END_TEST

START_TEST(every_index_lands_on_every_position_about_equally_often)
{
    enum { N = 10, EPOCHS = 20000 };
    static unsigned count[N][N];
    memset(count, 0, sizeof count);
    for (uint64_t e = 0; e < EPOCHS; e++) {
        gf__sampler s;
        gf__perm p;
        ck_assert_int_eq(gf__sampler_init(&s, N, 99, 1, 0, 1, 0), 0);
        gf__perm_init(&p, &s, e);
        for (uint64_t i = 0; i < N; i++)
            count[i][gf__sampler_at(&s, &p, i)]++;
    }
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            ck_assert_msg(count[i][j] > EPOCHS / N * 8 / 10 && count[i][j] < EPOCHS / N * 12 / 10,
                          "position %d got index %d %u times of %d", i, j, count[i][j], EPOCHS);
}
END_TEST

/* Pinned outputs: an accidental change of the algorithm (rounds, key
 * schedule, round function, cycle walking) changes every shuffled order,
 * which breaks resumption of runs started with an older build. */
START_TEST(orders_match_pinned_golden_values)
{
    static const struct {
        uint64_t n, seed, epoch;
        uint64_t first[8];
    } golden[] = {
        {10ull, 0, 0, {5, 1, 3, 0, 7, 2, 6, 4}},
        {10ull, 0, 1, {2, 1, 3, 7, 5, 9, 6, 8}},
        {1000ull, 42, 0, {868, 817, 610, 775, 18, 294, 887, 389}},
        {1000ull, 43, 0, {425, 104, 285, 581, 55, 967, 232, 806}},
        {100003ull, 2024, 7, {22214, 46989, 40063, 44, 85276, 91012, 64071, 60847}},
        {4294967296ull, 1, 1, {2514871943, 2026489072, 2095912616, 122416887, 914577903, 3201870176, 4118422774, 4294713770}},
        {3ull, 5, 5, {1, 0, 2}},
    };
    for (size_t k = 0; k < sizeof golden / sizeof golden[0]; k++) {
        gf__sampler s;
        gf__perm p;
        ck_assert_int_eq(gf__sampler_init(&s, golden[k].n, golden[k].seed, 1, 0, 1, 0), 0);
        gf__perm_init(&p, &s, golden[k].epoch);
        for (uint64_t i = 0; i < 8 && i < golden[k].n; i++)
            ck_assert_msg(gf__sampler_at(&s, &p, i) == golden[k].first[i],
                          "n=%llu seed=%llu epoch=%llu pos %llu: got %llu, pinned %llu",
                          (unsigned long long)golden[k].n, (unsigned long long)golden[k].seed,
                          (unsigned long long)golden[k].epoch, (unsigned long long)i,
                          (unsigned long long)gf__sampler_at(&s, &p, i),
                          (unsigned long long)golden[k].first[i]);
    }
}
END_TEST

/* What DistributedSampler gives rank r: the global order, padded by
 * repeating its start (or cut with drop_last), then every world-th item. */
static void assert_matches_distributed_sampler(uint64_t n, uint32_t world, int drop_last)
{
    uint64_t glen;
    uint64_t *global = order(n, 11, 1, 1, 0, 1, 0, &glen);
    uint64_t total = drop_last ? n / world * world : (n + world - 1) / world * world;
    unsigned *hits = calloc(n, sizeof *hits);
    for (uint32_t r = 0; r < world; r++) {
        uint64_t len;
        uint64_t *o = order(n, 11, 1, 1, r, world, drop_last, &len);
        ck_assert_uint_eq(len, total / world);
        for (uint64_t i = 0; i < len; i++) {
            uint64_t g = i * world + r;
            ck_assert_uint_eq(o[i], global[g % n]);
            hits[o[i]]++;
        }
        free(o);
    }
    uint64_t covered = 0, extra = 0;
    for (uint64_t i = 0; i < n; i++) {
        covered += hits[i] > 0;
        extra += hits[i] > 1 ? hits[i] - 1 : 0;
    }
    if (drop_last) {
        ck_assert_uint_eq(covered, total); /* disjoint: nothing twice */
        ck_assert_uint_eq(extra, 0);
    } else {
        ck_assert_uint_eq(covered, n); /* everything, padding repeated */
        ck_assert_uint_eq(extra, total - n);
    }
    free(hits);
    free(global);
}

START_TEST(ranks_get_disjoint_equal_shares_covering_all_when_world_divides_n)
{
    assert_matches_distributed_sampler(1000, 8, 0);
    assert_matches_distributed_sampler(1000, 8, 1);
    assert_matches_distributed_sampler(7, 7, 0);
    assert_matches_distributed_sampler(7, 1, 0);
}
END_TEST

START_TEST(ranks_are_padded_from_the_start_of_the_order_when_world_does_not_divide_n)
{
    assert_matches_distributed_sampler(1001, 8, 0);
    assert_matches_distributed_sampler(10, 3, 0);
    assert_matches_distributed_sampler(3, 8, 0); /* world > n: wraps more than once */
    assert_matches_distributed_sampler(1, 4, 0);
}
END_TEST

START_TEST(drop_last_truncates_to_disjoint_floor_shares)
{
    assert_matches_distributed_sampler(1001, 8, 1);
    assert_matches_distributed_sampler(10, 3, 1);
    assert_matches_distributed_sampler(9, 9, 1);
}
END_TEST

START_TEST(padding_without_shuffle_repeats_the_first_indices)
{
    gf__sampler s;
    gf__perm p;
    ck_assert_int_eq(gf__sampler_init(&s, 10, 0, 0, 2, 4, 0), 0);
    gf__perm_init(&p, &s, 0);
    ck_assert_uint_eq(s.len, 3);
    ck_assert_uint_eq(gf__sampler_at(&s, &p, 0), 2);
    ck_assert_uint_eq(gf__sampler_at(&s, &p, 1), 6);
    ck_assert_uint_eq(gf__sampler_at(&s, &p, 2), 0); /* global 10 wraps to 0 */
}
END_TEST

START_TEST(resuming_at_a_position_continues_the_full_traversal)
{
    uint64_t len;
    uint64_t *full = order(5003, 3, 8, 1, 1, 4, 0, &len);
    const uint64_t starts[] = {0, 1, 17, 1250, len - 1};
    for (size_t k = 0; k < sizeof starts / sizeof starts[0]; k++) {
        gf__sampler s;
        gf__perm p;
        ck_assert_int_eq(gf__sampler_init(&s, 5003, 3, 1, 1, 4, 0), 0);
        gf__perm_init(&p, &s, 8);
        for (uint64_t i = starts[k]; i < len; i++)
            ck_assert_uint_eq(gf__sampler_at(&s, &p, i), full[i]);
    }
    free(full);
}
END_TEST

START_TEST(a_huge_data_set_is_shuffled_in_constant_state)
{
    /* 2^40 + 1 samples: widest odd case; only a few positions evaluated. */
    gf__sampler s;
    gf__perm p;
    uint64_t n = (1ull << 40) + 1;
    ck_assert_int_eq(gf__sampler_init(&s, n, 1, 1, 3, 7, 0), 0);
    gf__perm_init(&p, &s, 2);
    ck_assert_uint_eq(p.half_bits, 21);
    for (uint64_t i = 0; i < 1000; i++)
        ck_assert_uint_lt(gf__sampler_at(&s, &p, i * 1000003), n);
    ck_assert_int_eq(gf__sampler_init(&s, UINT64_MAX, 1, 1, 0, 1, 0), 0);
    gf__perm_init(&p, &s, 0);
    ck_assert_uint_eq(p.half_bits, 32);
    ck_assert_uint_lt(gf__sampler_at(&s, &p, 12345), UINT64_MAX);
}
END_TEST

START_TEST(bad_arguments_are_rejected)
{
    gf__sampler s;
    ck_assert_int_eq(gf__sampler_init(&s, 0, 0, 1, 0, 1, 0), GF_EINVAL);
    ck_assert_int_eq(gf__sampler_init(&s, 10, 0, 1, 0, 0, 0), GF_EINVAL);
    ck_assert_int_eq(gf__sampler_init(&s, 10, 0, 1, 4, 4, 0), GF_EINVAL);
    ck_assert_int_eq(gf__sampler_init(&s, 3, 0, 1, 0, 4, 1), GF_EINVAL); /* empty share */
    ck_assert_int_eq(gf__sampler_init(NULL, 10, 0, 1, 0, 1, 0), GF_EINVAL);
    ck_assert_int_eq(gf__sampler_init(&s, 3, 0, 1, 0, 4, 0), 0); /* padded instead */
    ck_assert_uint_eq(s.len, 1);
}
END_TEST

START_TEST(half_bits_is_the_smallest_even_width_covering_n)
{
    const struct { uint64_t n; unsigned h; } cases[] = {
        {1, 1}, {2, 1}, {4, 1}, {5, 2}, {16, 2}, {17, 3}, {64, 3}, {65, 4}, {1u << 20, 10},
        {(1u << 20) + 1, 11},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        gf__sampler s;
        gf__perm p;
        ck_assert_int_eq(gf__sampler_init(&s, cases[k].n, 0, 1, 0, 1, 0), 0);
        gf__perm_init(&p, &s, 0);
        ck_assert_uint_eq(p.half_bits, cases[k].h);
    }
}
END_TEST

static Suite *sampler_suite(void)
{
    Suite *su = suite_create("sampler");
    TCase *tc = tcase_create("permutation");
    tcase_add_test(tc, shuffled_order_is_a_bijection_for_every_small_n);
    tcase_add_test(tc, shuffled_order_is_a_bijection_for_large_n);
    tcase_add_test(tc, unshuffled_order_is_the_identity);
    tcase_add_test(tc, same_seed_and_epoch_give_the_same_order);
    tcase_add_test(tc, different_epochs_give_different_orders);
    tcase_add_test(tc, different_seeds_give_different_orders);
    tcase_add_test(tc, shuffled_order_is_not_the_identity);
    tcase_add_test(tc, every_index_lands_on_every_position_about_equally_often);
    tcase_add_test(tc, orders_match_pinned_golden_values);
    tcase_add_test(tc, half_bits_is_the_smallest_even_width_covering_n);
    tcase_add_test(tc, a_huge_data_set_is_shuffled_in_constant_state);
    suite_add_tcase(su, tc);
    tc = tcase_create("ranks");
    tcase_add_test(tc, ranks_get_disjoint_equal_shares_covering_all_when_world_divides_n);
    tcase_add_test(tc, ranks_are_padded_from_the_start_of_the_order_when_world_does_not_divide_n);
    tcase_add_test(tc, drop_last_truncates_to_disjoint_floor_shares);
    tcase_add_test(tc, padding_without_shuffle_repeats_the_first_indices);
    suite_add_tcase(su, tc);
    tc = tcase_create("resume");
    tcase_add_test(tc, resuming_at_a_position_continues_the_full_traversal);
    suite_add_tcase(su, tc);
    tc = tcase_create("arguments");
    tcase_add_test(tc, bad_arguments_are_rejected);
    suite_add_tcase(su, tc);
    return su;
}

int main(void)
{
    return tu_run_suite(sampler_suite());
}
