/* Detection boxes moved with the image (src/boxes.c): hand-computed
 * cases (identity, flip, clipping, a fractional crop, drops with their
 * class), refusals with their reason, and the .npy element loader. The
 * torchvision comparison is tests/boxes_torchvision.py. */
#include "boxes.h"
#include "run_suite.h"

#include <check.h>
#include <math.h>
#include <string.h>

#define ROWS_MAX 8

typedef struct {
    long kept;
    float out[ROWS_MAX * 5];
    char why[256];
} result;

static result apply(gf__crop c, int out_w, int out_h, const double *in, size_t n, int cols)
{
    result r;
    memset(&r, 0, sizeof r);
    ck_assert_uint_le(n, ROWS_MAX);
    r.kept = gf__boxes_apply(&c, out_w, out_h, in, n, cols, r.out, r.why, sizeof r.why);
    return r;
}

static void expect_row(const result *r, long i, int cols, const float *want)
{
    for (int j = 0; j < cols; j++)
        ck_assert_msg(r->out[i * cols + j] == want[j], "row %ld col %d: %.9g, want %.9g", i, j,
                      (double)r->out[i * cols + j], (double)want[j]);
}

START_TEST(identity_crop_keeps_every_box_as_it_is)
{
    const double in[] = {10, 20, 30, 40, 0, 0, 100, 50, 12.25, 0.5, 99.75, 49.5};
    result r = apply((gf__crop){0, 0, 100, 50, 0}, 100, 50, in, 3, 4);
    ck_assert_int_eq(r.kept, 3);
    for (int i = 0; i < 3; i++) {
        float want[4];
        for (int j = 0; j < 4; j++)
            want[j] = (float)in[i * 4 + j];
        expect_row(&r, i, 4, want);
    }
}
END_TEST

START_TEST(flip_mirrors_x_about_the_output_width)
{
    const double in[] = {10, 20, 30, 40, 3};
    result r = apply((gf__crop){0, 0, 100, 50, 1}, 100, 50, in, 1, 5);
    ck_assert_int_eq(r.kept, 1);
    expect_row(&r, 0, 5, (const float[]){70, 20, 90, 40, 3});
    /* after the crop and scale: crop x 10..60 to 100 wide (x2), box 20..30
     * is 20..40 in the output, 60..80 mirrored */
    const double in2[] = {20, 10, 30, 20};
    r = apply((gf__crop){10, 10, 50, 25, 1}, 100, 50, in2, 1, 4);
    ck_assert_int_eq(r.kept, 1);
    expect_row(&r, 0, 4, (const float[]){60, 0, 80, 20});
}
END_TEST

START_TEST(a_box_is_clipped_to_the_crop_then_scaled)
{
    /* crop (10, 10) 50x50 to 100x100: x2 scale. (0,0)-(20,30) is
     * (-10,-10)-(10,20) in the crop, (0,0)-(10,20) clipped, x2 */
    const double in[] = {0, 0, 20, 30, 55, 40, 90, 200};
    result r = apply((gf__crop){10, 10, 50, 50, 0}, 100, 100, in, 2, 4);
    ck_assert_int_eq(r.kept, 2);
    expect_row(&r, 0, 4, (const float[]){0, 0, 20, 40});
    expect_row(&r, 1, 4, (const float[]){90, 60, 100, 100});
    /* and mirrored, the clipped edge goes to the left */
    r = apply((gf__crop){10, 10, 50, 50, 1}, 100, 100, in, 2, 4);
    ck_assert_int_eq(r.kept, 2);
    expect_row(&r, 0, 4, (const float[]){80, 0, 100, 40});
    expect_row(&r, 1, 4, (const float[]){0, 60, 10, 100});
}
END_TEST

START_TEST(a_fractional_crop_scales_each_axis_apart)
{
    /* eval's rectangle is fractional: (2.5, 1.5) 5x3 to 10x12 is x2, x4 */
    const double in[] = {3.5, 2.5, 7.5, 4.5};
    result r = apply((gf__crop){2.5, 1.5, 5, 3, 0}, 10, 12, in, 1, 4);
    ck_assert_int_eq(r.kept, 1);
    expect_row(&r, 0, 4, (const float[]){2, 4, 10, 12});
}
END_TEST

START_TEST(boxes_with_no_area_are_dropped_with_their_class)
{
    const double in[] = {
        0,   0,  5,  5,  1, /* left of the crop: x2 clipped to x1, dropped */
        20,  20, 30, 30, 2, /* inside */
        25,  5,  25, 40, 3, /* zero width as given */
        40,  40, 30, 45, 4, /* x2 < x1 as given */
        70,  20, 80, 30, 5, /* right of the crop */
        12,  15, 18, 19, 6, /* inside */
        12,  50, 18, 60, 7, /* below the crop: y1 = y2 = crop height */
    };
    gf__crop c = {10, 10, 50, 40, 0};
    for (int flip = 0; flip < 2; flip++) {
        c.flip = flip;
        result r = apply(c, 50, 40, in, 7, 5);
        ck_assert_int_eq(r.kept, 2);
        if (!flip) {
            expect_row(&r, 0, 5, (const float[]){10, 10, 20, 20, 2});
            expect_row(&r, 1, 5, (const float[]){2, 5, 8, 9, 6});
        } else {
            expect_row(&r, 0, 5, (const float[]){30, 10, 40, 20, 2});
            expect_row(&r, 1, 5, (const float[]){42, 5, 48, 9, 6});
        }
    }
    /* every box outside: none kept, nothing written past what is kept */
    result r = apply(c, 50, 40, in, 1, 5);
    ck_assert_int_eq(r.kept, 0);
}
END_TEST

START_TEST(four_and_five_columns)
{
    const double in4[] = {1, 2, 3, 4, 5, 6, 7, 8};
    result r = apply((gf__crop){0, 0, 10, 10, 0}, 10, 10, in4, 2, 4);
    ck_assert_int_eq(r.kept, 2);
    expect_row(&r, 0, 4, (const float[]){1, 2, 3, 4});
    expect_row(&r, 1, 4, (const float[]){5, 6, 7, 8});
    ck_assert(r.out[8] == 0); /* rows of 4: nothing written past them */
    const double in5[] = {1, 2, 3, 4, 11, 5, 6, 7, 8, -12.5};
    r = apply((gf__crop){0, 0, 10, 10, 0}, 10, 10, in5, 2, 5);
    ck_assert_int_eq(r.kept, 2);
    expect_row(&r, 0, 5, (const float[]){1, 2, 3, 4, 11});
    expect_row(&r, 1, 5, (const float[]){5, 6, 7, 8, -12.5f});
    ck_assert(r.out[10] == 0);
}
END_TEST

START_TEST(n_zero_keeps_nothing)
{
    gf__crop c = {0, 0, 10, 10, 1};
    char why[64] = "";
    ck_assert_int_eq(gf__boxes_apply(&c, 10, 10, NULL, 0, 4, NULL, why, sizeof why), 0);
    ck_assert_int_eq(gf__boxes_apply(&c, 10, 10, NULL, 0, 5, NULL, why, sizeof why), 0);
    ck_assert_str_eq(why, "");
}
END_TEST

START_TEST(a_value_not_finite_is_refused_naming_its_row)
{
    const double nan_in[] = {1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, NAN};
    result r = apply((gf__crop){0, 0, 10, 10, 0}, 10, 10, nan_in, 3, 4);
    ck_assert_int_eq(r.kept, -1);
    ck_assert_msg(strstr(r.why, "row 2") && strstr(r.why, "y2") && strstr(r.why, "nan"), "%s",
                  r.why);
    const double inf_in[] = {1, 2, 3, 4, 0, -INFINITY, 2, 3, 4, 0};
    r = apply((gf__crop){0, 0, 10, 10, 0}, 10, 10, inf_in, 2, 5);
    ck_assert_int_eq(r.kept, -1);
    ck_assert_msg(strstr(r.why, "row 1") && strstr(r.why, "x1") && strstr(r.why, "inf"), "%s",
                  r.why);
    const double cls_in[] = {1, 2, 3, 4, INFINITY};
    r = apply((gf__crop){0, 0, 10, 10, 0}, 10, 10, cls_in, 1, 5);
    ck_assert_int_eq(r.kept, -1);
    ck_assert_msg(strstr(r.why, "row 0") && strstr(r.why, "class"), "%s", r.why);
    const double big_cls[] = {1, 2, 3, 4, 1e300};
    r = apply((gf__crop){0, 0, 10, 10, 0}, 10, 10, big_cls, 1, 5);
    ck_assert_int_eq(r.kept, -1);
    ck_assert_msg(strstr(r.why, "row 0") && strstr(r.why, "float32"), "%s", r.why);
    /* a NaN in a row that would be dropped is refused all the same */
    const double dropped[] = {50, 50, 60, NAN};
    r = apply((gf__crop){0, 0, 10, 10, 0}, 10, 10, dropped, 1, 4);
    ck_assert_int_eq(r.kept, -1);
}
END_TEST

START_TEST(bad_arguments_are_refused)
{
    const double in[] = {1, 2, 3, 4, 5, 6};
    result r = apply((gf__crop){0, 0, 10, 10, 0}, 10, 10, in, 1, 6);
    ck_assert_int_eq(r.kept, -1);
    ck_assert_msg(strstr(r.why, "6 columns"), "%s", r.why);
    r = apply((gf__crop){0, 0, 10, 10, 0}, 10, 10, in, 2, 3);
    ck_assert_int_eq(r.kept, -1);
    r = apply((gf__crop){0, 0, 10, 10, 0}, 0, 10, in, 1, 4);
    ck_assert_int_eq(r.kept, -1);
    r = apply((gf__crop){0, 0, 0, 10, 0}, 10, 10, in, 1, 4);
    ck_assert_int_eq(r.kept, -1);
    r = apply((gf__crop){NAN, 0, 10, 10, 0}, 10, 10, in, 1, 4);
    ck_assert_int_eq(r.kept, -1);
    /* why may be NULL */
    gf__crop c = {0, 0, 10, 10, 0};
    float out[4];
    ck_assert_int_eq(gf__boxes_apply(&c, 10, 10, in, 1, 7, out, NULL, 0), -1);
}
END_TEST

START_TEST(load_converts_the_npy_dtypes)
{
    double out[3];
    const float f32[3] = {1.5f, -2.25f, 1e30f};
    uint8_t buf[1 + 3 * 8]; /* misaligned on purpose */
    memcpy(buf + 1, f32, sizeof f32);
    ck_assert_int_eq(gf__boxes_load(buf + 1, GF_DTYPE_FLOAT32, 3, out), 0);
    ck_assert(out[0] == 1.5 && out[1] == -2.25 && out[2] == (double)1e30f);
    const double f64[3] = {0.1, -7, 1e300};
    memcpy(buf + 1, f64, sizeof f64);
    ck_assert_int_eq(gf__boxes_load(buf + 1, GF_DTYPE_FLOAT64, 3, out), 0);
    ck_assert(out[0] == 0.1 && out[1] == -7 && out[2] == 1e300);
    const int32_t i32[3] = {-1, 2147483647, 7};
    memcpy(buf + 1, i32, sizeof i32);
    ck_assert_int_eq(gf__boxes_load(buf + 1, GF_DTYPE_INT32, 3, out), 0);
    ck_assert(out[0] == -1 && out[1] == 2147483647.0 && out[2] == 7);
    const int64_t i64[3] = {-3, 1ll << 53, 640};
    memcpy(buf + 1, i64, sizeof i64);
    ck_assert_int_eq(gf__boxes_load(buf + 1, GF_DTYPE_INT64, 3, out), 0);
    ck_assert(out[0] == -3 && out[1] == 9007199254740992.0 && out[2] == 640);
    ck_assert_int_eq(gf__boxes_load(buf + 1, GF_DTYPE_UINT8, 3, out), -1);
    ck_assert_int_eq(gf__boxes_load(buf + 1, GF_DTYPE_FLOAT16, 3, out), -1);
    ck_assert_int_eq(gf__boxes_load(NULL, GF_DTYPE_FLOAT32, 0, NULL), 0);
}
END_TEST

static Suite *boxes_suite(void)
{
    Suite *su = suite_create("boxes");
    TCase *tc = tcase_create("apply");
    tcase_add_test(tc, identity_crop_keeps_every_box_as_it_is);
    tcase_add_test(tc, flip_mirrors_x_about_the_output_width);
    tcase_add_test(tc, a_box_is_clipped_to_the_crop_then_scaled);
    tcase_add_test(tc, a_fractional_crop_scales_each_axis_apart);
    tcase_add_test(tc, boxes_with_no_area_are_dropped_with_their_class);
    tcase_add_test(tc, four_and_five_columns);
    tcase_add_test(tc, n_zero_keeps_nothing);
    tcase_add_test(tc, a_value_not_finite_is_refused_naming_its_row);
    tcase_add_test(tc, bad_arguments_are_refused);
    tcase_add_test(tc, load_converts_the_npy_dtypes);
    suite_add_tcase(su, tc);
    return su;
}

int main(void)
{
    return tu_run_suite(boxes_suite());
}
