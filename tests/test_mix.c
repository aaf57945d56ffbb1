/* settings.augment's `mix` stage (src/batch_mix.c, parsed in augment.c):
 * the spec, the per-batch draw, the CPU twin against an out-of-place
 * reference, element ranges against one call, the soft targets, the Beta
 * draws' moments. The loader's batches against torchvision's arithmetic
 * are python/tests/test_mix.py's; the kernel against this twin, test_gpu's. */
#include "augment.h"
#include "config.h"
#include "convert.h"
#include "run_suite.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static int parse(const char *spec, gf__augment *a, char *why)
{
    return gf__augment_parse(spec, 12, 10, 3, a, why, 256);
}

START_TEST(mix_takes_torchvisions_defaults_and_its_keys)
{
    gf__augment a;
    char why[256] = "";
    ck_assert_int_eq(parse("mix", &a, why), 0);
    ck_assert(a.mix && a.mixup_alpha == 1.0 && a.cutmix_alpha == 1.0 && a.mix_switch == 0.5);
    ck_assert_int_eq(a.mix_classes, 0);
    ck_assert_int_eq(parse("ta_wide; erase p=0.2;mix mixup=0.2 cutmix=0 switch=0.1 classes=1000",
                           &a, why), 0);
    ck_assert(a.mix && a.erase && a.n_stages == 1);
    ck_assert(a.mixup_alpha == 0.2 && a.cutmix_alpha == 0 && a.mix_switch == 0.1);
    ck_assert_int_eq(a.mix_classes, 1000);
}
END_TEST

static const struct {
    const char *spec, *why;
} refused[] = {
    {"mix; jitter brightness=0.1", "jitter after mix"},
    {"mix; erase", "erase after mix"},
    {"mix; mix", "mix after mix"},
    {"mix mixup=0 cutmix=0", "nothing to do"},
    {"mix mixup=-1", "mixup=-1"},
    {"mix switch=1.5", "switch=1.5"},
    {"mix classes=0", "classes=0"},
    {"mix classes=2.5", "classes=2.5"},
    {"mix lam=1", "no setting lam"},
    {"mix mixup", "is not KEY=VALUE"},
};

START_TEST(a_bad_mix_is_refused_naming_the_word)
{
    gf__augment a;
    char why[256] = "";
    ck_assert_int_eq(parse(refused[_i].spec, &a, why), GF_EINVAL);
    ck_assert_msg(strstr(why, refused[_i].why), "%s: %s", refused[_i].spec, why);
    ck_assert_int_eq(a.mix, 0);
}
END_TEST

START_TEST(a_batch_draw_is_a_pure_function_of_seed_epoch_and_position)
{
    gf__augment a;
    char why[256];
    ck_assert_int_eq(parse("mix", &a, why), 0);
    gf__mix_draw d1, d2, d3;
    gf__mix_draw_of(&a, gf__mix_key(5, 1, 64), &d1);
    gf__mix_draw_of(&a, gf__mix_key(5, 1, 64), &d2);
    ck_assert_mem_eq(&d1, &d2, sizeof d1);
    int differ = 0;
    for (uint64_t p = 1; p < 20; p++) {
        gf__mix_draw_of(&a, gf__mix_key(5, 1, 64 * p), &d3);
        differ += d3.lam != d1.lam;
        ck_assert(d3.lam >= 0 && d3.lam <= 1);
        if (d3.kind == GF__MIX_CUTMIX) {
            ck_assert(0 <= d3.x1 && d3.x1 <= d3.x2 && d3.x2 <= 12);
            ck_assert(0 <= d3.y1 && d3.y1 <= d3.y2 && d3.y2 <= 10);
            ck_assert(d3.lam_target == 1.0 - (d3.x2 - d3.x1) * (d3.y2 - d3.y1) / 120.0);
        } else {
            ck_assert(d3.lam_target == d3.lam);
        }
    }
    ck_assert_int_ge(differ, 18);
    ck_assert(gf__mix_key(5, 1, 64) != gf__mix_key(5, 2, 64));
    ck_assert(gf__mix_key(5, 1, 64) != gf__mix_key(6, 1, 64));
}
END_TEST

/* ---- the CPU twin ---- */

enum { H = 10, W = 12, C = 3, E = H * W * C, N = 5 };

static void shape(gf__convert *cv, gf_dtype dt, gf_layout layout)
{
    *cv = (gf__convert){.h = H, .w = W, .c = C, .dtype = dt, .layout = layout};
}

static float value(unsigned k) /* some floats, normalised pixels' range */
{
    return (float)((k * 2654435761u) % 1000u) / 250.0f - 2.0f;
}

static void fill(const gf__convert *cv, void *out, int n)
{
    const size_t e = (size_t)cv->h * cv->w * cv->c;
    for (size_t k = 0; k < (size_t)n * e; k++) {
        if (cv->dtype == GF_DTYPE_FLOAT32)
            ((float *)out)[k] = value((unsigned)k);
        else if (cv->dtype == GF_DTYPE_FLOAT16)
            ((uint16_t *)out)[k] = gf__f32_to_f16(value((unsigned)k));
        else
            ((uint16_t *)out)[k] = gf__f32_to_bf16(value((unsigned)k));
    }
}

static float at(const gf__convert *cv, const void *p, size_t k)
{
    return cv->dtype == GF_DTYPE_FLOAT32   ? ((const float *)p)[k]
           : cv->dtype == GF_DTYPE_FLOAT16 ? gf__f16_to_f32(((const uint16_t *)p)[k])
                                           : gf__bf16_to_f32(((const uint16_t *)p)[k]);
}

/* Out of place, the obvious way: sample i from i and i - 1 of the original. */
static void reference(const gf__mix_draw *d, const gf__convert *cv, const void *in, void *out,
                      int n)
{
    const float lam = d->lam, rest = (float)(1.0 - (double)d->lam);
    for (int i = 0; i < n; i++)
        for (size_t e = 0; e < E; e++) {
            int y, x;
            if (cv->layout == GF_LAYOUT_NCHW)
                y = (int)(e % (H * W) / W), x = (int)(e % W);
            else
                y = (int)(e / C / W), x = (int)(e / C % W);
            float own = at(cv, in, (size_t)i * E + e),
                  other = at(cv, in, (size_t)((i + n - 1) % n) * E + e), v;
            if (d->kind == GF__MIX_MIXUP) {
                float p = lam * own, q = rest * other;
                v = p + q;
            } else {
                v = y >= d->y1 && y < d->y2 && x >= d->x1 && x < d->x2 ? other : own;
            }
            size_t k = (size_t)i * E + e;
            if (cv->dtype == GF_DTYPE_FLOAT32)
                ((float *)out)[k] = v;
            else if (cv->dtype == GF_DTYPE_FLOAT16)
                ((uint16_t *)out)[k] = gf__f32_to_f16(v);
            else
                ((uint16_t *)out)[k] = gf__f32_to_bf16(v);
        }
}

static const gf__mix_draw draws[] = {
    {GF__MIX_MIXUP, 0.3125f, 0.3125, 0, 0, 0, 0},
    {GF__MIX_MIXUP, 0.7310586f, 0.7310586, 0, 0, 0, 0},
    {GF__MIX_CUTMIX, 0.5f, 0.7, 2, 1, 9, 7},
    {GF__MIX_CUTMIX, 0.1f, 0.0, 0, 0, W, H}, /* the whole image */
};
static const gf_dtype dtypes[] = {GF_DTYPE_FLOAT32, GF_DTYPE_FLOAT16, GF_DTYPE_BFLOAT16};

START_TEST(the_twin_in_place_is_the_out_of_place_mix)
{
    const gf__mix_draw *d = &draws[_i % 4];
    for (int t = 0; t < 3; t++)
        for (int layout = 0; layout < 2; layout++)
            for (int n = 1; n <= N; n++) {
                gf__convert cv;
                shape(&cv, dtypes[t], layout ? GF_LAYOUT_NHWC : GF_LAYOUT_NCHW);
                size_t bytes = (size_t)n * E * gf_dtype_size(cv.dtype);
                uint8_t *in = malloc(bytes), *want = malloc(bytes), *got = malloc(bytes);
                fill(&cv, in, n);
                reference(d, &cv, in, want, n);
                memcpy(got, in, bytes);
                gf__mix_cpu(d, &cv, got, n, 0, E);
                ck_assert_msg(memcmp(got, want, bytes) == 0, "draw %d, dtype %d, layout %d, n %d",
                              _i, t, layout, n);
                free(in), free(want), free(got);
            }
}
END_TEST

typedef struct range_job {
    const gf__mix_draw *d;
    const gf__convert *cv;
    void *out;
    size_t first, n;
} range_job;

static void *run_range(void *p)
{
    range_job *j = p;
    gf__mix_cpu(j->d, j->cv, j->out, N, j->first, j->n);
    return NULL;
}

START_TEST(disjoint_element_ranges_on_threads_give_one_calls_batch)
{
    gf__convert cv = {.h = 40, .w = 40, .c = 3, .dtype = GF_DTYPE_FLOAT32,
                      .layout = GF_LAYOUT_NCHW};
    const size_t e = 40 * 40 * 3;
    size_t bytes = (size_t)N * e * sizeof(float);
    float *one = malloc(bytes), *split = malloc(bytes);
    for (int k = 0; k < 3; k++) { /* the boxes drawn for 12 x 10 lie inside 40 x 40 too */
        fill(&cv, one, N);
        memcpy(split, one, bytes);
        gf__mix_cpu(&draws[k], &cv, one, N, 0, e);
        /* uneven ranges, across the kept block's 1024 */
        const size_t cut[] = {0, 7, 1100, 1101, 2900, e};
        pthread_t th[5];
        range_job jobs[5];
        for (int r = 0; r < 5; r++) {
            jobs[r] = (range_job){&draws[k], &cv, split, cut[r], cut[r + 1] - cut[r]};
            ck_assert_int_eq(pthread_create(&th[r], NULL, run_range, &jobs[r]), 0);
        }
        for (int r = 0; r < 5; r++)
            pthread_join(th[r], NULL);
        ck_assert_msg(memcmp(one, split, bytes) == 0, "draw %d", k);
    }
    free(one), free(split);
}
END_TEST

START_TEST(targets_put_lam_on_the_own_label_and_the_rest_on_the_previous)
{
    const int32_t labels[] = {2, 0, 0, 3, 9, -1};
    const int n = 6, classes = 4;
    float t[6 * 4];
    gf__mix_draw d = {GF__MIX_CUTMIX, 0.4f, 0.6875, 0, 0, 0, 0};
    gf__mix_targets(&d, labels, n, classes, t);
    const float keep = 0.6875f, take = (float)(1.0 - 0.6875);
    const float want[6][4] = {
        {0, 0, keep, 0},        /* own 2, previous -1 (the last): nothing */
        {keep, 0, take, 0},     /* own 0, previous 2 */
        {take + keep, 0, 0, 0}, /* own 0, previous 0 */
        {take, 0, 0, keep},     /* own 3, previous 0 */
        {0, 0, 0, take},        /* own 9 (out of range), previous 3 */
        {0, 0, 0, 0},           /* own -1, previous 9 */
    };
    ck_assert_mem_eq(t, want, sizeof want);
    int32_t one = 1;
    gf__mix_targets(&d, &one, 1, classes, t); /* alone: its own pair */
    ck_assert(t[1] == take + keep && t[0] == 0 && t[2] == 0);
}
END_TEST

/* Moments over 20,000 draws: mean a/(a+b) and variance ab/((a+b)^2(a+b+1)),
 * within 5 standard errors (python/tests/test_mix.py holds the whole
 * distribution to numpy's with a KS test). */
START_TEST(beta_draws_have_the_betas_moments)
{
    static const double ab[][2] = {{0.2, 0.2}, {1, 1}, {2, 5}, {0.5, 3}, {8, 8}};
    for (int c = 0; c < 5; c++) {
        double a = ab[c][0], b = ab[c][1], s = 0, s2 = 0;
        const int n = 20000;
        for (int k = 0; k < n; k++) {
            double x = gf__beta_draw(a, b, gf__mix_key(77, 0, (uint64_t)k));
            ck_assert(x >= 0 && x <= 1);
            s += x, s2 += x * x;
        }
        double mean = a / (a + b), var = a * b / ((a + b) * (a + b) * (a + b + 1));
        double m = s / n, v = s2 / n - m * m;
        ck_assert_msg(fabs(m - mean) < 5 * sqrt(var / n), "Beta(%g, %g): mean %g", a, b, m);
        ck_assert_msg(fabs(v - var) < 0.05 * var + 1e-4, "Beta(%g, %g): var %g, want %g", a, b,
                      v, var);
    }
}
END_TEST

static Suite *mix_suite(void)
{
    Suite *su = suite_create("mix");
    TCase *tc = tcase_create("spec");
    tcase_add_test(tc, mix_takes_torchvisions_defaults_and_its_keys);
    tcase_add_loop_test(tc, a_bad_mix_is_refused_naming_the_word, 0,
                        (int)(sizeof refused / sizeof refused[0]));
    tcase_add_test(tc, a_batch_draw_is_a_pure_function_of_seed_epoch_and_position);
    suite_add_tcase(su, tc);
    tc = tcase_create("twin");
    tcase_add_loop_test(tc, the_twin_in_place_is_the_out_of_place_mix, 0, 4);
    tcase_add_test(tc, disjoint_element_ranges_on_threads_give_one_calls_batch);
    tcase_add_test(tc, targets_put_lam_on_the_own_label_and_the_rest_on_the_previous);
    tcase_add_test(tc, beta_draws_have_the_betas_moments);
    suite_add_tcase(su, tc);
    return su;
}

int main(void)
{
    return tu_run_suite(mix_suite());
}
