/* The settings table (gf_setting_at, gf_settings_set/get): every row's
 * default, bounds and spellings, walked from the table itself so a new
 * row is covered with no change here; the one validator at every entry
 * point (gf_open, gf_index_open, gf_decoder_open, gf_decode_image); and
 * the launcher's environment, whose malformed values are errors. */
#include "gpufeed.h"
#include "testutil.h"

#include <check.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int set(gf_settings *s, const char *name, const char *value, char *why)
{
    return gf_settings_set(s, name, value, why, 320);
}

START_TEST(defaults_are_the_tables_and_round_trip)
{
    gf_settings d, s;
    gf_default_settings(&d);
    memset(&s, 0, sizeof s);
    char why[320], got[160], again[160];
    ck_assert_int_gt(gf_setting_count(), 30);
    ck_assert_ptr_null(gf_setting_at(gf_setting_count()));
    ck_assert_ptr_null(gf_setting_at(-1));
    for (int i = 0; i < gf_setting_count(); i++) {
        const gf_setting_info *r = gf_setting_at(i);
        ck_assert_ptr_eq(gf_setting_find(r->name), r);
        if (r->type == GF_SETTING_PATH || r->type == GF_SETTING_TEXT) { /* NULL by default,
                                                                     what zero says */
            ck_assert_ptr_null(r->default_text);
            ck_assert_ptr_nonnull(r->zero);
            ck_assert_ptr_null(*(const char *const *)((const char *)&d + r->offset));
            ck_assert_int_eq(gf_settings_get(&d, r->name, got, sizeof got), 0);
            continue;
        }
        ck_assert_msg(set(&s, r->name, r->default_text, why) == 0, "%s: %s", r->name, why);
        ck_assert_int_gt(gf_settings_get(&d, r->name, got, sizeof got), 0);
        ck_assert_int_gt(gf_settings_get(&s, r->name, again, sizeof again), 0);
        ck_assert_msg(strcmp(got, again) == 0, "%s: %s vs %s", r->name, got, again);
        /* what get says, set takes back to the same bytes */
        gf_settings t = s;
        ck_assert_int_eq(set(&t, r->name, got, why), 0);
        ck_assert_int_eq(memcmp(&t, &s, sizeof s), 0);
    }
    ck_assert_int_eq(memcmp(&d, &s, sizeof s), 0); /* the table is every default */
    /* the defaults the header documents */
    ck_assert_float_eq(d.ratio_max, 4.0f / 3.0f);
    ck_assert_float_eq(d.scale_min, 0.08f);
    ck_assert_uint_eq(d.max_pixels, 64ull << 20);
    ck_assert_int_eq(d.device_id, -1);
    ck_assert_float_eq(d.std[3], 1.0f);
    ck_assert_ptr_eq(gf_setting_find("prefetch-depth"), gf_setting_find("prefetch_depth"));
}
END_TEST

/* Accepted and refused values at each row's bounds, from the row. */
START_TEST(each_rows_bounds_and_spellings)
{
    char why[320], v[64];
    for (int i = 0; i < gf_setting_count(); i++) {
        const gf_setting_info *r = gf_setting_at(i);
        gf_settings s;
        gf_default_settings(&s);
        switch (r->type) {
        case GF_SETTING_INT:
        case GF_SETTING_U64:
            if (r->choices) {
                for (int k = 0; r->choices[k]; k++)
                    ck_assert_int_eq(set(&s, r->name, r->choices[k], why), 0);
                ck_assert_int_eq(set(&s, r->name, "2", why), GF_EINVAL);
                ck_assert_msg(strstr(why, "is not one of"), "%s", why);
                break;
            }
            snprintf(v, sizeof v, "%" PRId64, r->min_int);
            ck_assert_msg(set(&s, r->name, v, why) == 0, "%s", why);
            snprintf(v, sizeof v, "%" PRIu64, r->max_int);
            ck_assert_msg(set(&s, r->name, v, why) == 0, "%s", why);
            if (r->min_int > INT64_MIN && (r->min_int - 1 != 0 ||
                                           !(r->flags & GF_SETTING_ZERO_PICKS))) {
                snprintf(v, sizeof v, "%" PRId64, r->min_int - 1);
                ck_assert_msg(set(&s, r->name, v, why) == GF_EINVAL, "%s %s", r->name, v);
                ck_assert_msg(strncmp(why, r->name, strlen(r->name)) == 0, "%s", why);
            }
            if (r->max_int < UINT64_MAX) {
                snprintf(v, sizeof v, "%" PRIu64, r->max_int + 1);
                ck_assert_msg(set(&s, r->name, v, why) == GF_EINVAL, "%s %s", r->name, v);
                ck_assert_msg(strstr(why, "out of range"), "%s", why);
            }
            ck_assert_int_eq(set(&s, r->name, "0", why),
                             (r->flags & GF_SETTING_ZERO_PICKS) || r->min_int <= 0 ? 0 : GF_EINVAL);
            ck_assert_int_eq(set(&s, r->name, "12x", why), GF_EINVAL);
            ck_assert_int_eq(set(&s, r->name, "", why), GF_EINVAL);
            break;
        case GF_SETTING_FLOAT:
        case GF_SETTING_FLOAT4:
            ck_assert_int_eq(set(&s, r->name, "nan", why), GF_EINVAL);
            ck_assert_int_eq(set(&s, r->name, "inf", why), GF_EINVAL);
            ck_assert_int_eq(set(&s, r->name, "-inf", why), GF_EINVAL);
            ck_assert_int_eq(set(&s, r->name, "x", why), GF_EINVAL);
            if (r->min_float > -FLT_MAX) {
                snprintf(v, sizeof v, "%.9g", r->min_float);
                ck_assert_int_eq(set(&s, r->name, v, why),
                                 r->flags & GF_SETTING_MIN_EXCLUSIVE ? GF_EINVAL : 0);
                ck_assert_int_eq(set(&s, r->name, "-1", why), GF_EINVAL);
                ck_assert_msg(strstr(why, "out of range"), "%s", why);
            }
            if (r->max_float < FLT_MAX) {
                snprintf(v, sizeof v, "%.9g", r->max_float);
                ck_assert_int_eq(set(&s, r->name, v, why), 0);
                snprintf(v, sizeof v, "%.9g", r->max_float * 1.01 + 0.01);
                ck_assert_int_eq(set(&s, r->name, v, why), GF_EINVAL);
            }
            if (r->type == GF_SETTING_FLOAT4) {
                ck_assert_int_eq(set(&s, r->name, "2,3", why), 0);
                ck_assert_int_eq(set(&s, r->name, "1,2,3,4,5", why), GF_EINVAL);
                ck_assert_int_eq(set(&s, r->name, "2,,3", why), GF_EINVAL);
            }
            break;
        case GF_SETTING_CHOICE:
            for (int k = 0; r->choices[k]; k++) {
                gf_settings t;
                gf_default_settings(&t);
                ck_assert_int_eq(set(&t, r->name, r->choices[k], why), 0);
                ck_assert_int_eq(*(int *)((char *)&t + r->offset), k);
                if (r->aliases && r->aliases[k]) {
                    gf_default_settings(&t);
                    ck_assert_int_eq(set(&t, r->name, r->aliases[k], why), 0);
                    ck_assert_int_eq(*(int *)((char *)&t + r->offset), k);
                }
            }
            ck_assert_int_eq(set(&s, r->name, "nope", why), GF_EINVAL);
            ck_assert_msg(strstr(why, "'nope' is not one of"), "%s", why);
            break;
        case GF_SETTING_FLAG:
            ck_assert_int_eq(set(&s, r->name, "yes", why), 0);
            ck_assert_int_eq(*(int *)((char *)&s + r->offset), 1);
            ck_assert_int_eq(set(&s, r->name, "off", why), 0);
            ck_assert_int_eq(*(int *)((char *)&s + r->offset), 0);
            ck_assert_int_eq(set(&s, r->name, "2", why), GF_EINVAL);
            break;
        case GF_SETTING_PATH: /* any text, "" too, kept as given; nothing refused */
        case GF_SETTING_TEXT: {
            static const char *const paths[] = {"/no/such/dir", "", "rel ative", "no such value"};
            for (int k = 0; k < 4; k++) {
                char got[64];
                ck_assert_int_eq(set(&s, r->name, paths[k], why), 0);
                ck_assert_ptr_eq(*(const char **)((char *)&s + r->offset), paths[k]);
                ck_assert_int_eq(gf_settings_get(&s, r->name, got, sizeof got),
                                 (int)strlen(paths[k]));
                ck_assert_str_eq(got, paths[k]);
            }
            continue;
        }
        }
        /* a refused value writes nothing */
        gf_settings before = s;
        ck_assert_int_eq(set(&s, r->name, "no such value", why), GF_EINVAL);
        ck_assert_int_eq(memcmp(&before, &s, sizeof s), 0);
    }
}
END_TEST

START_TEST(errors_name_the_setting_and_its_choices)
{
    gf_settings s;
    gf_default_settings(&s);
    char why[320];
    ck_assert_int_eq(set(&s, "dtype", "float64", why), GF_EINVAL);
    ck_assert_str_eq(why, "dtype: 'float64' is not one of uint8, float32, float16, bfloat16 "
                          "(also u8, f32, f16, bf16)");
    ck_assert_int_eq(set(&s, "dtype", "f16", why), 0);
    ck_assert_int_eq(s.dtype, GF_DTYPE_FLOAT16);
    ck_assert_int_eq(set(&s, "batch_size", "0", why), GF_EINVAL);
    ck_assert_str_eq(why, "batch_size: 0 is out of range 1..65536");
    ck_assert_int_eq(set(&s, "channels", "2", why), GF_EINVAL);
    ck_assert_str_eq(why, "channels: 2 is not one of 1, 3, 4");
    ck_assert_int_eq(set(&s, "colour", "1", why), GF_EINVAL);
    ck_assert_str_eq(why, "unknown setting 'colour'");
    ck_assert_int_eq(set(&s, "seed", "-1", why), GF_EINVAL);
    ck_assert_int_eq(set(&s, "seed", "18446744073709551615", why), 0);
    ck_assert_uint_eq(s.seed, UINT64_MAX);
    ck_assert_int_eq(set(&s, "mean", "1.5", why), 0);
    ck_assert_float_eq(s.mean[0], 1.5f);
    ck_assert_float_eq(s.mean[3], 1.5f); /* one value is every channel's */
    ck_assert_int_eq(set(&s, "mean", "2,3", why), 0);
    ck_assert_float_eq(s.mean[1], 3.0f);
    ck_assert_float_eq(s.mean[2], 1.5f); /* a list: the rest keep their value */
    ck_assert_int_eq(gf_settings_set(NULL, "seed", "1", NULL, 0), GF_EINVAL);
    ck_assert_int_eq(gf_settings_get(&s, "nope", why, sizeof why), GF_EINVAL);
}
END_TEST

/* The bad settings issue 26 met, through every entry point. */
static const struct {
    const char *name, *value, *says;
} bad[] = {
    {"height", "60000", "height: 60000 is out of range 1..16384"},
    {"scale_min", "nan", "scale_min: nan is out of range (0, 1]"},
    {"scale_max", "-0.5", "scale_max"},
    {"ratio_min", "-1", "ratio_min"},
    {"crop_fraction", "0", "crop_fraction: 0 is out of range (0, 1]"},
    {"flip_prob", "-0.1", "flip_prob"},
    {"channels", "2", "channels"},
    {"std", "1e-6", "std"},
};

/* s with bad[k] written into its field, as a C caller would write it. */
static void make_bad(gf_settings *s, int k)
{
    gf_default_settings(s);
    const gf_setting_info *r = gf_setting_find(bad[k].name);
    char *at = (char *)s + r->offset;
    double v = strtod(bad[k].value, NULL);
    if (r->type == GF_SETTING_INT)
        *(int *)at = (int)v;
    else
        *(float *)at = (float)v;
}

START_TEST(every_entry_point_checks_the_same)
{
    char *root = tu_mkdtemp(), path[4096], why[512];
    snprintf(path, sizeof path, "%s/a/x.png", root);
    tu_write_png(path, 8, 8, 3, 1);
    size_t len;
    uint8_t *png = tu_read_file(path, &len);
    static uint8_t out[64 * 64 * 4];
    for (int k = 0; k < (int)(sizeof bad / sizeof bad[0]); k++) {
        gf_settings s;
        make_bad(&s, k);
        s.data = root;
        s.device = GF_DEVICE_CPU;
        gf_loader *l = NULL;
        ck_assert_int_eq(gf_open(&l, &s), GF_EINVAL);
        ck_assert_msg(strstr(gf_last_error(l), bad[k].says), "%s", gf_last_error(l));
        ck_assert_msg(strncmp(gf_last_error(l), "invalid settings: ", 18) == 0, "%s",
                      gf_last_error(l));
        gf_close(&l);
        gf_index *ix = NULL;
        ck_assert_int_eq(gf_index_open(&ix, &s), GF_EINVAL);
        ck_assert_msg(strstr(gf_index_last_error(ix), bad[k].says), "%s",
                      gf_index_last_error(ix));
        gf_index_close(&ix);
        gf_decoder *d = NULL;
        ck_assert_int_eq(gf_decoder_open(&d, &s), GF_EINVAL);
        ck_assert_ptr_null(d);
        ck_assert_int_eq(gf_decode_image(&s, png, len, 0, 0, out, why, sizeof why), GF_EINVAL);
        ck_assert_msg(strstr(why, bad[k].says), "%s", why);
        /* and the string setter refuses the same value */
        gf_default_settings(&s);
        ck_assert_int_eq(gf_settings_set(&s, bad[k].name, bad[k].value, why, sizeof why),
                         GF_EINVAL);
        ck_assert_msg(strstr(why, bad[k].says), "%s", why);
    }
    /* what is related to another setting is gf_open's, and the decoder's */
    gf_settings s;
    gf_default_settings(&s);
    s.scale_min = 0.9f;
    s.scale_max = 0.5f;
    ck_assert_int_eq(gf_decode_image(&s, png, len, 0, 0, out, why, sizeof why), GF_EINVAL);
    ck_assert_str_eq(why, "invalid settings: scale_min 0.9 is above scale_max 0.5");
    /* 0 picks the documented default, in the decoder as in the loader */
    gf_default_settings(&s);
    s.width = s.height = 16;
    s.max_pixels = 0;
    s.max_file_bytes = 0;
    ck_assert_int_eq(gf_decode_image(&s, png, len, 0, 0, out, why, sizeof why), 0);
    s.data = root;
    s.device = GF_DEVICE_CPU;
    gf_loader *l = NULL;
    ck_assert_int_eq(gf_open(&l, &s), 0);
    gf_close(&l);
    /* decode_image takes no data set */
    s.data = NULL;
    ck_assert_int_eq(gf_decode_image(&s, png, len, 0, 0, out, why, sizeof why), 0);
    gf_index *ix = NULL;
    ck_assert_int_eq(gf_index_open(&ix, &s), GF_EINVAL);
    gf_index_close(&ix);
    free(png);
    tu_rmrf(root);
    free(root);
}
END_TEST

static const char *const launcher_vars[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", NULL};

/* gf_open under an environment "A=x B=y": its code and message. The data
 * set does not exist: the launcher is read before it is indexed. */
static int open_under(const char *env, char *msg, size_t len)
{
    for (int i = 0; launcher_vars[i]; i++)
        unsetenv(launcher_vars[i]);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", env);
    for (char *save, *kv = strtok_r(buf, " ", &save); kv; kv = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(kv, '=');
        *eq = '\0';
        setenv(kv, eq + 1, 1);
    }
    gf_settings s;
    tu_cpu_settings(&s);
    s.data = "/nonexistent/gpufeed-launcher-test";
    gf_loader *l = NULL;
    int rc = gf_open(&l, &s);
    snprintf(msg, len, "%s", l ? gf_last_error(l) : "");
    gf_close(&l);
    for (int i = 0; launcher_vars[i]; i++)
        unsetenv(launcher_vars[i]);
    return rc;
}

START_TEST(a_malformed_launcher_environment_is_an_error)
{
    static const struct {
        const char *env, *says; /* says NULL: well-formed, so the open goes on */
    } cases[] = {
        {"RANK=1 WORLD_SIZE=two", "WORLD_SIZE='two' is not a whole number"},
        {"RANK=1", "RANK=1 has no world size: WORLD_SIZE is not set"},
        {"RANK=1 WORLD_SIZE=0", "WORLD_SIZE is 0"},
        {"RANK=x WORLD_SIZE=2", "RANK='x'"},
        {"RANK=-1 WORLD_SIZE=2", "RANK='-1'"},
        {"RANK=2 WORLD_SIZE=2", "rank 2 of a world of 2"},
        {"SLURM_PROCID=1 WORLD_SIZE=4", "SLURM_PROCID=1 has no world size: SLURM_NTASKS"},
        {"OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=3x", "OMPI_COMM_WORLD_SIZE='3x'"},
        {"LOCAL_RANK=gpu0", "LOCAL_RANK='gpu0'"},
        {"RANK=1 WORLD_SIZE=2 LOCAL_RANK=1", NULL},
        {"SLURM_PROCID=3 SLURM_NTASKS=4", NULL},
        {"WORLD_SIZE=4", NULL}, /* no rank: rank 0 of 1, as before */
        {"", NULL},
    };
    char msg[512];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int rc = open_under(cases[k].env, msg, sizeof msg);
        if (cases[k].says) {
            ck_assert_msg(rc == GF_EINVAL, "%s: %d %s", cases[k].env, rc, msg);
            ck_assert_msg(strstr(msg, cases[k].says), "%s: %s", cases[k].env, msg);
        } else {
            ck_assert_msg(rc == GF_EDATASET, "%s: %d %s", cases[k].env, rc, msg);
        }
    }
}
END_TEST

static Suite *settings_suite(void)
{
    Suite *su = suite_create("settings");
    TCase *tc = tcase_create("settings");
    tcase_add_test(tc, defaults_are_the_tables_and_round_trip);
    tcase_add_test(tc, each_rows_bounds_and_spellings);
    tcase_add_test(tc, errors_name_the_setting_and_its_choices);
    tcase_add_test(tc, every_entry_point_checks_the_same);
    tcase_add_test(tc, a_malformed_launcher_environment_is_an_error);
    suite_add_tcase(su, tc);
    return su;
}

int main(void)
{
    SRunner *sr = srunner_create(settings_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
