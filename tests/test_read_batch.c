/*
 * A decode thread's kept shard descriptors (gf__fd_cache) and its batch of
 * member reads in one io_uring call (gf__read_batch): the bytes each read
 * gives, an array's data read straight to its place (holes), and every
 * way a read must still fail: a shard touched, rewritten or replaced
 * since it was indexed, a range past its end, a file cut short between
 * the check and the read.
 */
#include "testutil.h"

#include "reader.h"
#include "reader_internal.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { SIZE = 64 << 10 };

static char *dir;
static int root_fd = -1;
static char path[2][4300];
static gf__file_id ids[2];

static uint8_t byte_at(int file, size_t i)
{
    return (uint8_t)(i * 7 + (size_t)file * 101 + (i >> 9));
}

static void write_file(int k)
{
    uint8_t *p = malloc(SIZE);
    for (size_t i = 0; i < SIZE; i++)
        p[i] = byte_at(k, i);
    tu_write_file(path[k], p, SIZE);
    free(p);
    struct stat st;
    ck_assert_int_eq(stat(path[k], &st), 0);
    gf__file_id_of(&ids[k], &st);
}

static void setup(void)
{
    dir = tu_mkdtemp();
    root_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(root_fd, 0);
    for (int k = 0; k < 2; k++) {
        snprintf(path[k], sizeof path[k], "%.4096s/s-%d.tar", dir, k);
        write_file(k);
    }
}

static void teardown(void)
{
    close(root_fd);
    tu_rmrf(dir);
    free(dir);
}

static gf__read_opts kept(gf__fd_cache *c, int file, double now)
{
    return (gf__read_opts){.expect = &ids[file], .fds = c, .file = (uint32_t)file, .now = now};
}

/* A kept descriptor is checked again once its last check is
 * GF__FD_CHECK_S old: a touch within that is not seen, after it is. */
START_TEST(a_kept_descriptor_sees_a_touched_shard_once_its_check_is_due)
{
    gf__fd_cache c;
    ck_assert_int_eq(gf__fd_cache_init(&c, 4), 0);
    gf__buf b = {0};
    char why[256];
    gf__read_opts o = kept(&c, 0, 100.0);
    ck_assert_int_eq(gf__read_sample(root_fd, path[0], 4096, 512, &o, &b, why, sizeof why), 0);
    ck_assert_int_eq(b.data[0], byte_at(0, 4096));
    struct timespec t[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
    ck_assert_int_eq(utimensat(AT_FDCWD, path[0], t, 0), 0);
    o.now = 100.0 + GF__FD_CHECK_S / 2;
    ck_assert_int_eq(gf__read_sample(root_fd, path[0], 0, 512, &o, &b, why, sizeof why), 0);
    o.now = 100.0 + GF__FD_CHECK_S * 2;
    ck_assert_int_eq(gf__read_sample(root_fd, path[0], 0, 512, &o, &b, why, sizeof why), GF_EIO);
    ck_assert_msg(strstr(why, "changed since it was indexed (its mtime"), "%s", why);
    /* The failed check gave the descriptor up: the next read opens it and
     * fails the same way. */
    ck_assert_int_eq(c.e[0].fd, -1);
    ck_assert_int_eq(gf__read_sample(root_fd, path[0], 0, 512, &o, &b, why, sizeof why), GF_EIO);
    gf__buf_free(&b);
    gf__fd_cache_free(&c);
}
END_TEST

/* Replaced by mv while its descriptor is kept, a shard is read as it was
 * indexed; once the cache is dropped (each start), the mv is an error. */
START_TEST(a_shard_replaced_while_kept_reads_as_indexed_until_dropped)
{
    gf__fd_cache c;
    ck_assert_int_eq(gf__fd_cache_init(&c, 1), 0);
    gf__buf b = {0};
    char why[256];
    gf__read_opts o = kept(&c, 0, 5.0);
    ck_assert_int_eq(gf__read_sample(root_fd, path[0], 0, 64, &o, &b, why, sizeof why), 0);
    char tmp[4400];
    snprintf(tmp, sizeof tmp, "%s.new", path[0]);
    uint8_t *p = malloc(SIZE);
    memset(p, 0xee, SIZE);
    tu_write_file(tmp, p, SIZE);
    free(p);
    ck_assert_int_eq(rename(tmp, path[0]), 0);
    o.now = 5.0 + GF__FD_CHECK_S * 10; /* checked: the old inode is still the indexed one */
    ck_assert_int_eq(gf__read_sample(root_fd, path[0], 100, 64, &o, &b, why, sizeof why), 0);
    ck_assert_int_eq(b.data[0], byte_at(0, 100));
    gf__fd_cache_drop(&c);
    ck_assert_int_eq(gf__read_sample(root_fd, path[0], 100, 64, &o, &b, why, sizeof why), GF_EIO);
    ck_assert_msg(strstr(why, "changed since it was indexed (replaced: another inode"), "%s", why);
    gf__buf_free(&b);
    gf__fd_cache_free(&c);
}
END_TEST

/* Two files in one direct-mapped entry take turns: each read is its own
 * file's bytes. */
START_TEST(two_shards_sharing_an_entry_each_read_their_own)
{
    gf__fd_cache c;
    ck_assert_int_eq(gf__fd_cache_init(&c, 1), 0);
    gf__buf b = {0};
    char why[256];
    for (int r = 0; r < 6; r++) {
        int k = r % 2;
        gf__read_opts o = kept(&c, k, 1.0);
        ck_assert_int_eq(gf__read_sample(root_fd, path[k], 1000 + (uint64_t)r, 300, &o, &b, why,
                                         sizeof why),
                         0);
        for (size_t i = 0; i < 300; i++)
            ck_assert_int_eq(b.data[i], byte_at(k, 1000 + (size_t)r + i));
    }
    gf__buf_free(&b);
    gf__fd_cache_free(&c);
}
END_TEST

/* A batch: each range's bytes in its buffer, its holes' in their places,
 * the buffer's bytes there left as they were. */
START_TEST(a_batch_reads_every_range_and_its_holes_in_place)
{
    gf__read_batch *rb;
    gf__read_batch_create(&rb, 8);
    gf__fd_cache c;
    ck_assert_int_eq(gf__fd_cache_init(&c, 2), 0);
    enum { R = 5, LEN = 9000 };
    gf__buf b[R] = {{0}};
    gf__batched_read r[R];
    uint8_t dst[R][4096 + 10];
    gf__read_hole holes[R][2];
    char why[256];
    /* warm the page cache: RWF_NOWAIT answers from it alone */
    for (int k = 0; k < 2; k++) {
        size_t n;
        free(tu_read_file(path[k], &n));
    }
    for (int i = 0; i < R; i++) {
        holes[i][0] = (gf__read_hole){.at = 640, .len = 4096, .dst = dst[i]};
        holes[i][1] = (gf__read_hole){.at = 8000, .len = 10, .dst = dst[i] + 4096};
        memset(dst[i], 0, sizeof dst[i]);
        gf__read_opts o = kept(&c, i % 2, 1.0);
        o.holes = holes[i];
        o.n_holes = i == 0 ? 0 : i == 1 ? 1 : 2;
        ck_assert_int_eq(gf__read_prepare(root_fd, path[i % 2], 512 * (uint64_t)i, LEN, &o, &b[i],
                                          &r[i], why, sizeof why),
                         0);
        memset(b[i].data, 0x5a, LEN);
    }
    gf__read_batch_run(rb, r, R);
    if (!rb) { /* no io_uring: nothing read, every one left for the usual read */
        for (int i = 0; i < R; i++)
            ck_assert_int_eq(gf__read_finish(&r[i], &b[i]), GF__READ_UNCACHED);
    }
    for (int i = 0; rb && i < R; i++) {
        ck_assert_int_eq(gf__read_finish(&r[i], &b[i]), 0);
        ck_assert_uint_eq(b[i].len, LEN);
        int k = i % 2;
        size_t base = 512 * (size_t)i;
        for (size_t j = 0; j < LEN; j++) {
            int in_hole0 = i >= 1 && j >= 640 && j < 640 + 4096;
            int in_hole1 = i >= 2 && j >= 8000 && j < 8010;
            uint8_t want = byte_at(k, base + j);
            if (in_hole0)
                ck_assert_int_eq(dst[i][j - 640], want);
            else if (in_hole1)
                ck_assert_int_eq(dst[i][4096 + (j - 8000)], want);
            else
                ck_assert_int_eq(b[i].data[j], want);
            if (in_hole0 || in_hole1)
                ck_assert_int_eq(b[i].data[j], 0x5a);
        }
    }
    for (int i = 0; i < R; i++)
        gf__buf_free(&b[i]);
    gf__fd_cache_free(&c);
    gf__read_batch_destroy(rb);
}
END_TEST

/* What a batch must not read: a range past the end is refused before
 * (GF_ETRUNC, named), one cut short after its check is not taken
 * (GF__READ_UNCACHED: the usual read then names it). */
START_TEST(a_batch_refuses_a_range_past_the_end_and_leaves_a_short_read)
{
    gf__read_batch *rb;
    gf__read_batch_create(&rb, 4);
    gf__fd_cache c;
    ck_assert_int_eq(gf__fd_cache_init(&c, 2), 0);
    gf__buf b[2] = {{0}};
    gf__batched_read r[2];
    char why[256];
    gf__read_opts o = kept(&c, 0, 1.0);
    ck_assert_int_eq(gf__read_prepare(root_fd, path[0], SIZE - 100, 200, &o, &b[0], &r[0], why,
                                      sizeof why),
                     GF_ETRUNC);
    ck_assert_msg(strstr(why, "shard ended inside member"), "%s", why);
    ck_assert_int_eq(gf__read_prepare(root_fd, path[0], SIZE - 200, 200, &o, &b[0], &r[0], why,
                                      sizeof why),
                     0);
    gf__read_opts o1 = kept(&c, 1, 1.0);
    ck_assert_int_eq(gf__read_prepare(root_fd, path[1], 0, 100, &o1, &b[1], &r[1], why,
                                      sizeof why),
                     0);
    ck_assert_int_eq(truncate(path[0], SIZE - 150), 0);
    gf__read_batch_run(rb, r, 2);
    ck_assert_int_eq(gf__read_finish(&r[0], &b[0]), GF__READ_UNCACHED);
    if (rb) {
        ck_assert_int_eq(gf__read_finish(&r[1], &b[1]), 0);
        ck_assert_int_eq(b[1].data[99], byte_at(1, 99));
    }
    /* Without a kept descriptor or an identity there is no batch. */
    gf__read_opts plain = {.expect = &ids[1]};
    ck_assert_int_eq(gf__read_prepare(root_fd, path[1], 0, 100, &plain, &b[1], &r[1], why,
                                      sizeof why),
                     GF__READ_UNCACHED);
    for (int i = 0; i < 2; i++)
        gf__buf_free(&b[i]);
    gf__fd_cache_free(&c);
    gf__read_batch_destroy(rb);
}
END_TEST

static Suite *read_batch_suite(void)
{
    Suite *s = suite_create("read_batch");
    TCase *tc = tcase_create("kept");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, a_kept_descriptor_sees_a_touched_shard_once_its_check_is_due);
    tcase_add_test(tc, a_shard_replaced_while_kept_reads_as_indexed_until_dropped);
    tcase_add_test(tc, two_shards_sharing_an_entry_each_read_their_own);
    tcase_add_test(tc, a_batch_reads_every_range_and_its_holes_in_place);
    tcase_add_test(tc, a_batch_refuses_a_range_past_the_end_and_leaves_a_short_read);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(read_batch_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
