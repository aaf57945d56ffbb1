/* Many threads, extreme ring depths, batch 1, bad samples mixed in: the
 * same bytes as a single-thread run, every time. Also run under TSan. */
#include "mix.h"
#include "gpufeed.h"
#include "testutil.h"
#include "tu_engine.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *root;

static void setup(void)
{
    root = tu_image_folder(4, 16, 24, 20, "png");
    char p[4096];
    snprintf(p, sizeof p, "%s/class_1/img_003.png", root);
    tu_write_text(p, "not a png");
    snprintf(p, sizeof p, "%s/class_2/img_010.png", root);
    tu_write_file(p, "", 0);
}

static void teardown(void)
{
    tu_rmrf(root);
    free(root);
}

static uint64_t run(int threads, int depth, int batch, gf_io io, int *samples)
{
    gf_settings s;
    tu_cpu_settings(&s);
    s.data = root;
    s.width = 12;
    s.height = 10;
    s.seed = 99;
    s.epochs = 3;
    s.threads = threads;
    s.prefetch_depth = depth;
    s.batch_size = batch;
    s.queue_depth = 4;
    s.io = io;
    gf_loader *l = NULL;
    int rc = gf_open(&l, &s);
    ck_assert_msg(rc == 0, "%s", gf_last_error(l));
    uint64_t h = GF__FNV1A64_BASIS;
    gf_batch *b;
    *samples = 0;
    while ((rc = gf_next(l, &b)) == 0) {
        const uint8_t *p = b->pixels;
        size_t n = (size_t)b->count * 12 * 10 * 3;
        h = gf__fnv1a64(h, p, n);
        for (int i = 0; i < b->count; i++)
            h = (h ^ (uint64_t)b->indices[i]) * 0x100000001b3ull;
        *samples += b->count;
        gf_release(l, b);
    }
    ck_assert_int_eq(rc, GF_EOF);
    gf_stats st;
    gf_get_stats(l, &st);
    ck_assert_uint_eq(st.errors, 6); /* 2 bad files x 3 epochs */
    gf_close(&l);
    return h;
}

/* _i == URING_CASE (the uring test case, run alone: skipped where
 * io_uring is refused) takes io_uring, 0 the other readers. */
#define URING_CASE 1

START_TEST(extreme_depths_and_many_threads_give_the_reference_bytes)
{
    int n_ref, n;
    uint64_t ref = run(1, 2, 5, GF_IO_POSIX, &n_ref);
    ck_assert_int_eq(n_ref, 3 * 62);
    /* Batch size changes where holes are filled from, so each size is
     * compared with its own single-thread reference. */
    int depths[] = {1, 64};
    for (int d = 0; d < 2; d++)
        for (int io = GF_IO_AUTO; io <= GF_IO_POSIX; io++) {
            if ((io == GF_IO_URING) != (_i == URING_CASE))
                continue;
            uint64_t h = run(8, depths[d], 5, (gf_io)io, &n);
            ck_assert_msg(h == ref, "depth %d io %d differs", depths[d], io);
            ck_assert_int_eq(n, n_ref);
        }
    if (_i == URING_CASE)
        return;
    uint64_t one = run(1, 1, 1, GF_IO_POSIX, &n);
    for (int d = 0; d < 2; d++)
        ck_assert_uint_eq(run(8, depths[d], 1, GF_IO_AUTO, &n), one);
}
END_TEST

/* Each round takes up to 6 batches, releases all but the last few (up to
 * the ring's depth) and closes with those still held. */
START_TEST(open_and_close_repeatedly_mid_stream)
{
    int released = 0, closed_holding = 0;
    for (int i = 0; i < 30; i++) {
        gf_settings s;
        tu_cpu_settings(&s);
        s.data = root;
        s.width = 8;
        s.height = 8;
        s.threads = 1 + i % 6;
        s.prefetch_depth = 1 + i % 5;
        s.batch_size = 1 + i % 3;
        s.epochs = 0;
        gf_loader *l = NULL;
        ck_assert_int_eq(gf_open(&l, &s), 0);
        int take = i % 7, keep = i % 3 < s.prefetch_depth ? i % 3 : s.prefetch_depth;
        gf_batch *b;
        for (int k = 0; k < take; k++) {
            ck_assert_int_eq(gf_next(l, &b), 0);
            if (k < take - keep) {
                ck_assert_int_eq(gf_release(l, b), 0);
                released++;
            }
        }
        closed_holding += take > 0 && keep > 0;
        gf_close(&l);
    }
    ck_assert_int_gt(released, 0);
    ck_assert_int_gt(closed_holding, 0);
}
END_TEST

#include "run_suite.h"

int main(int argc, char **argv)
{
    Suite *s = suite_create("stress");
    TCase *t = tcase_create("stress");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 600);
    tcase_add_loop_test(t, extreme_depths_and_many_threads_give_the_reference_bytes, 0, 1);
    tcase_add_test(t, open_and_close_repeatedly_mid_stream);
    suite_add_tcase(s, t);
    t = tu_uring_tcase("stress_uring");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 600);
    tcase_add_loop_test(t, extreme_depths_and_many_threads_give_the_reference_bytes, URING_CASE,
                        URING_CASE + 1);
    suite_add_tcase(s, t);
    return tu_run_suite_split(s, argc, argv);
}
