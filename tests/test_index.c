/* The public index handle (gf_index): counts, paths, labels and bytes as
 * the loader's index gives them, the whole data set whatever the rank,
 * and errors that name the file. */
#include "gpufeed.h"
#include "testutil.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *root;

static void teardown(void)
{
    if (root)
        tu_rmrf(root);
    free(root);
    root = NULL;
}

static gf_index *open_ok(const char *data)
{
    gf_settings s;
    gf_index *ix = NULL;
    gf_default_settings(&s);
    s.data = data;
    int rc = gf_index_open(&ix, &s);
    ck_assert_msg(rc == 0, "gf_index_open(%s): %d %s", data, rc, gf_index_last_error(ix));
    ck_assert_str_eq(gf_index_last_error(ix), "");
    return ix;
}

START_TEST(folder_matches_the_loader)
{
    root = tu_image_folder(3, 4, 8, 8, "png");
    gf_index *ix = open_ok(root);
    gf_settings s;
    gf_loader *l = NULL;
    tu_cpu_settings(&s);
    s.data = root;
    s.batch_size = 1;
    s.width = s.height = 8;
    ck_assert_int_eq(gf_open(&l, &s), 0);
    ck_assert_uint_eq(gf_index_count(ix), 12);
    ck_assert_uint_eq(gf_index_shards(ix), 0);
    ck_assert_ptr_null(gf_index_shard_path(ix, 0));
    ck_assert_int_eq(gf_index_classes(ix), 3);
    for (uint64_t i = 0; i < 12; i++) {
        void *a, *b;
        size_t na, nb;
        ck_assert_str_eq(gf_index_path(ix, i), gf_sample_path(l, i));
        ck_assert_int_eq(gf_index_label(ix, i), gf_sample_label(l, i));
        ck_assert_int_eq(gf_index_label(ix, i), (int32_t)(i / 4));
        ck_assert_int_eq(gf_index_read(ix, i, &a, &na, NULL, 0), 0);
        ck_assert_int_eq(gf_read_sample(l, i, &b, &nb, NULL, 0), 0);
        ck_assert_uint_eq(na, nb);
        ck_assert(memcmp(a, b, na) == 0);
        free(a);
        free(b);
    }
    ck_assert_str_eq(gf_index_path(ix, 0), "class_0/img_000.png");
    ck_assert_ptr_null(gf_index_path(ix, 12));
    ck_assert_int_eq(gf_index_label(ix, 12), GF_EINVAL);
    gf_close(&l);
    gf_index_close(&ix);
    ck_assert_ptr_null(ix);
    gf_index_close(&ix); /* a no-op */
    gf_index_close(NULL);
}
END_TEST

START_TEST(the_whole_data_set_whatever_the_rank)
{
    root = tu_image_folder(2, 3, 8, 8, "png");
    gf_settings s;
    gf_index *ix = NULL;
    gf_default_settings(&s);
    s.data = root;
    s.rank = 1;
    s.world = 2;
    ck_assert_int_eq(gf_index_open(&ix, &s), 0);
    ck_assert_uint_eq(gf_index_count(ix), 6);
    gf_index_close(&ix);
}
END_TEST

START_TEST(list_and_shards)
{
    char p[4096];
    root = tu_mkdtemp();
    snprintf(p, sizeof p, "%s/a.png", root);
    tu_write_png(p, 4, 4, 3, 1);
    snprintf(p, sizeof p, "%s/list.txt", root);
    tu_write_text(p, "a.png 7\n# comment\na.png 2\n");
    gf_index *ix = open_ok(p);
    ck_assert_uint_eq(gf_index_count(ix), 2);
    ck_assert_str_eq(gf_index_path(ix, 1), "a.png");
    ck_assert_int_eq(gf_index_label(ix, 0), 7);
    ck_assert_int_eq(gf_index_label(ix, 1), 2);
    ck_assert_int_eq(gf_index_classes(ix), 8); /* the largest label + 1 */
    gf_index_close(&ix);

    tu_tar w = {0};
    tu_tar_file(&w, "k1.jpg", "xyz", 3);
    tu_tar_file(&w, "k1.cls", "5", 1);
    tu_tar_end(&w);
    snprintf(p, sizeof p, "%s/s-0.tar", root);
    tu_write_file(p, w.p, w.len);
    free(w.p);
    ix = open_ok(p);
    ck_assert_uint_eq(gf_index_count(ix), 1);
    ck_assert_uint_eq(gf_index_shards(ix), 1);
    ck_assert_str_eq(gf_index_shard_path(ix, 0), p);
    ck_assert_ptr_null(gf_index_shard_path(ix, 1));
    ck_assert_str_eq(gf_index_path(ix, 0), "s-0.tar:k1.jpg");
    ck_assert_int_eq(gf_index_label(ix, 0), 5);
    void *d;
    size_t n;
    ck_assert_int_eq(gf_index_read(ix, 0, &d, &n, NULL, 0), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert(memcmp(d, "xyz", 3) == 0);
    free(d);
    gf_index_close(&ix);
}
END_TEST

START_TEST(errors_name_the_file)
{
    char p[4096], why[256];
    gf_index *ix = NULL;
    gf_settings s;
    root = tu_mkdtemp();
    gf_default_settings(&s);
    snprintf(p, sizeof p, "%s/missing", root);
    s.data = p;
    ck_assert_int_eq(gf_index_open(&ix, &s), GF_EDATASET);
    ck_assert_ptr_nonnull(ix);
    ck_assert_msg(strstr(gf_index_last_error(ix), p), "%s", gf_index_last_error(ix));
    ck_assert_uint_eq(gf_index_count(ix), 0);
    gf_index_close(&ix);

    snprintf(p, sizeof p, "%s/list.txt", root);
    tu_write_text(p, "a.png 0\nb.png x\n");
    ck_assert_int_eq(gf_index_open(&ix, &s), GF_EDATASET);
    ck_assert_msg(strstr(gf_index_last_error(ix), "list.txt:2"), "%s", gf_index_last_error(ix));
    gf_index_close(&ix);

    /* A listed file that is gone: a read error naming the sample. */
    tu_write_text(p, "gone.png 0\n");
    ck_assert_int_eq(gf_index_open(&ix, &s), 0);
    void *d = (void *)1;
    size_t n = 1;
    ck_assert_int_eq(gf_index_read(ix, 0, &d, &n, why, sizeof why), GF_ENOENT);
    ck_assert_ptr_null(d);
    ck_assert_uint_eq(n, 0);
    ck_assert_msg(strstr(why, "gone.png"), "%s", why);
    ck_assert_str_eq(gf_index_last_error(ix), why);
    ck_assert_int_eq(gf_index_read(ix, 1, &d, &n, NULL, 0), GF_EINVAL);
    ck_assert_int_eq(gf_index_read(NULL, 0, &d, &n, NULL, 0), GF_EINVAL);
    gf_index_close(&ix);

    s.data = NULL;
    ck_assert_int_eq(gf_index_open(&ix, &s), GF_EINVAL);
    ck_assert_str_ne(gf_index_last_error(ix), "");
    gf_index_close(&ix);
    ck_assert_int_eq(gf_index_open(NULL, &s), GF_EINVAL);
    ck_assert_str_eq(gf_index_last_error(NULL), "");
    ck_assert_uint_eq(gf_index_count(NULL), 0);
}
END_TEST

/* A shard key whose .cls is no label ("-1"): gf_index_open treats it as
 * gf_open does, so prepare does too: under on_error = skip a warning
 * naming it (on_sample_warning, on the caller's thread) and the others
 * indexed; under fail GF_EDATASET naming the shard and the member. */
static int label_warnings;
static char label_warning[512];
static void on_label_warning(void *user, int64_t sample, const char *path, int code,
                             const char *reason)
{
    (void)user;
    label_warnings++;
    snprintf(label_warning, sizeof label_warning, "%s%s: %s",
             sample == -1 && code == GF_ECORRUPT ? "" : "(not sample -1, GF_ECORRUPT) ", path,
             reason);
}

START_TEST(a_key_without_a_label_warns_or_under_fail_fails)
{
    char p[4096];
    root = tu_mkdtemp();
    tu_tar w = {0};
    tu_tar_file(&w, "good.jpg", "xyz", 3);
    tu_tar_file(&w, "good.cls", "1", 1);
    tu_tar_file(&w, "neg.jpg", "xyz", 3);
    tu_tar_file(&w, "neg.cls", "-1", 2);
    tu_tar_end(&w);
    snprintf(p, sizeof p, "%s/keys.tar", root);
    tu_write_file(p, w.p, w.len);
    free(w.p);
    gf_settings s;
    gf_index *ix = NULL;
    gf_default_settings(&s);
    s.data = p;
    s.on_sample_warning = on_label_warning;
    label_warnings = 0;
    ck_assert_int_eq(gf_index_open(&ix, &s), 0);
    ck_assert_uint_eq(gf_index_count(ix), 1);
    ck_assert_int_eq(label_warnings, 1);
    ck_assert_msg(strstr(label_warning, "keys.tar:neg: offset 2048: key skipped: .cls is "
                                        "not a non-negative decimal integer") == label_warning,
                  "%s", label_warning);
    gf_index_close(&ix);

    s.on_error = GF_ON_ERROR_FAIL;
    label_warnings = 0;
    ck_assert_int_eq(gf_index_open(&ix, &s), GF_EDATASET);
    ck_assert_int_eq(label_warnings, 0);
    const char *e = gf_index_last_error(ix);
    ck_assert_msg(strstr(e, p) == e && strstr(e, "key 'neg': member 'neg.cls': .cls is not") &&
                      strstr(e, "(on_error = fail)"),
                  "%s", e);
    gf_index_close(&ix);
}
END_TEST

static Suite *index_suite(void)
{
    Suite *su = suite_create("index");
    TCase *tc = tcase_create("index");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, folder_matches_the_loader);
    tcase_add_test(tc, the_whole_data_set_whatever_the_rank);
    tcase_add_test(tc, list_and_shards);
    tcase_add_test(tc, errors_name_the_file);
    tcase_add_test(tc, a_key_without_a_label_warns_or_under_fail_fails);
    suite_add_tcase(su, tc);
    return su;
}

int main(void)
{
    SRunner *sr = srunner_create(index_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
