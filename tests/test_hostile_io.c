/* Hostile files on the read side (issue 15): large files that are no
 * image cost their first bytes, not their size; the bytes read buffers
 * hold stay within the read budget, with io_uring and with pread. */
#include "testutil.h"
#include "tu_engine.h"

#include "dataset.h"
#include "reader_internal.h"

#include "gpufeed.h"

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)

/* A sparse file of size bytes starting with head[0, n): no disk, any size. */
static void write_sparse(const char *path, uint64_t size, const void *head, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_ge(fd, 0);
    if (n)
        ck_assert_int_eq(write(fd, head, n), (ssize_t)n);
    ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
    close(fd);
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    return (uint64_t)st.st_size;
}

/* ------------------------------------------------------------ the sniff */

/* 50 MiB of zeros named .jpg, 200 KiB of zeros named .tga, 3 MiB that
 * start as a JPEG; the paths are dir's. */
static void make_sniff_files(const char *dir, char zeros[4096], char tga[4096],
                             char jpeg[4096])
{
    snprintf(zeros, 4096, "%s/zeros.jpg", dir);
    snprintf(tga, 4096, "%s/zeros.tga", dir);
    snprintf(jpeg, 4096, "%s/head.jpg", dir);
    write_sparse(zeros, 50 * MIB, NULL, 0);
    write_sparse(tga, 200 << 10, NULL, 0);
    write_sparse(jpeg, 3 * MIB, "\xff\xd8\xff", 3);
}

START_TEST(a_large_file_that_is_no_image_costs_its_first_bytes)
{
    char *dir = tu_mkdtemp();
    char zeros[4096], tga[4096], jpeg[4096];
    make_sniff_files(dir, zeros, tga, jpeg);

    gf__buf b = {0};
    char why[160];
    const gf__read_opts sniff = {.flags = GF__READ_SNIFF};
    ck_assert_int_eq(gf__read_sample(AT_FDCWD, zeros, 0, GF__WHOLE_FILE, &sniff, &b, why,
                                     sizeof why),
                     GF_EFORMAT);
    ck_assert_str_eq(why, "not an image of a known format");
    ck_assert_uint_eq(b.got, GF__SNIFF_BYTES);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_uint_le(b.cap, 2 * GF__SNIFF_BYTES);
    /* The caller drops the flag for a .tga: read whole. A magic passes. */
    const gf__read_opts plain = {0};
    ck_assert_int_eq(gf__read_sample(AT_FDCWD, tga, 0, GF__WHOLE_FILE, &plain, &b, why,
                                     sizeof why),
                     0);
    ck_assert_uint_eq(b.len, 200 << 10);
    ck_assert_int_eq(gf__read_sample(AT_FDCWD, jpeg, 0, GF__WHOLE_FILE, &sniff, &b, why,
                                     sizeof why),
                     0);
    ck_assert_uint_eq(b.len, 3 * MIB);
    ck_assert_uint_eq(b.got, 3 * MIB);
    ck_assert(memcmp(b.data, "\xff\xd8\xff\0", 4) == 0); /* the first part kept */
    /* A member (a range) is sniffed as a file is. */
    ck_assert_int_eq(gf__read_sample(AT_FDCWD, zeros, 4096, 1 * MIB, &sniff, &b, why,
                                     sizeof why),
                     GF_EFORMAT);
    ck_assert_uint_eq(b.got, GF__SNIFF_BYTES);
    /* Over max_file_bytes: refused from fstat, nothing read or allocated. */
    gf__buf fresh = {0};
    const gf__read_opts capped = {.max_bytes = 10 * MIB, .flags = GF__READ_SNIFF};
    ck_assert_int_eq(gf__read_sample(AT_FDCWD, zeros, 0, GF__WHOLE_FILE, &capped, &fresh, why,
                                     sizeof why),
                     GF_ETOOBIG);
    ck_assert_int_eq(gf__read_sample(AT_FDCWD, zeros, 0, 20 * MIB, &capped, &fresh, why,
                                     sizeof why),
                     GF_ETOOBIG);
    ck_assert_uint_eq(fresh.cap, 0);
    ck_assert_uint_eq(fresh.got, 0);
    gf__buf_free(&b);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(a_large_file_that_is_no_image_costs_its_first_bytes_with_io_uring)
{
    char *dir = tu_mkdtemp();
    char zeros[4096], tga[4096], jpeg[4096], why[160];
    make_sniff_files(dir, zeros, tga, jpeg);
    gf__uring *u = NULL;
    ck_assert_int_eq(gf__uring_create(&u, 4, 10 * MIB, why, sizeof why), 0);
    gf__buf ub[3] = {{0}};
    ck_assert_int_eq(gf__uring_submit_sample(u, AT_FDCWD, zeros, 0, GF__WHOLE_FILE,
                                             GF__READ_SNIFF, NULL, NULL, &ub[0], 0),
                     0);
    ck_assert_int_eq(gf__uring_submit_sample(u, AT_FDCWD, zeros, 0, 1 * MIB,
                                             GF__READ_SNIFF, NULL, NULL, &ub[1], 1),
                     0);
    ck_assert_int_eq(gf__uring_submit_sample(u, AT_FDCWD, jpeg, 0, GF__WHOLE_FILE,
                                             GF__READ_SNIFF, NULL, NULL, &ub[2], 2),
                     0);
    gf__read_done d[3];
    int got = 0;
    while (got < 3)
        got += gf__uring_reap(u, d + got, 3 - got);
    for (int k = 0; k < 3; k++) {
        int i = (int)d[k].user;
        if (i == 0) { /* over the 10 MiB cap, from its size */
            ck_assert_int_eq(d[k].err, GF_ETOOBIG);
            ck_assert_uint_eq(ub[0].got, 0);
        } else if (i == 1) {
            ck_assert_int_eq(d[k].err, GF_EFORMAT);
            ck_assert_str_eq(d[k].why, "not an image of a known format");
            ck_assert_uint_eq(ub[1].got, GF__SNIFF_BYTES);
        } else {
            ck_assert_int_eq(d[k].err, 0);
            ck_assert_uint_eq(ub[2].len, 3 * MIB);
            ck_assert(memcmp(ub[2].data, "\xff\xd8\xff\0", 4) == 0);
        }
    }
    gf__uring_destroy(u);
    for (int k = 0; k < 3; k++)
        gf__buf_free(&ub[k]);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

/* ----------------------------------------------------------- the budget */

#define N_HUGE 24
#define N_IMAGES 12

typedef struct huge_errors {
    int n, other;
} huge_errors;

static void count_huge(void *user, int64_t sample, const char *path, int code,
                       const char *reason)
{
    (void)sample;
    huge_errors *e = user;
    if (code == GF_EFORMAT && strstr(path, "huge_") &&
        !strcmp(reason, "not an image of a known format"))
        e->n++;
    else
        e->other++;
}

/* 24 sparse 50 MB files that are no image among 12 noisy PNGs of ~360 KB,
 * batch 8 x depth 4, budget 1 MiB: every huge file is GF_EFORMAT having
 * cost 64 KiB, and the read buffers never held more than the budget
 * (the reads in flight would hold several MiB without it). */
static void run_budgeted(gf_io io, int threads)
{
    char *root = tu_image_folder(2, N_IMAGES / 2, 400, 300, "png");
    char path[4096];
    uint64_t image_bytes = 0;
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < N_IMAGES / 2; i++) {
            snprintf(path, sizeof path, "%s/class_%d/img_%03d.png", root, k, i);
            uint64_t n = file_size(path);
            ck_assert_uint_gt(n, 200 << 10); /* larger than the budget keeps */
            image_bytes += n;
        }
    for (int i = 0; i < N_HUGE; i++) {
        snprintf(path, sizeof path, "%s/class_%d/huge_%02d.jpg", root, i % 2, i);
        write_sparse(path, 50 * MIB, NULL, 0);
    }

    gf_settings s;
    tu_cpu_settings(&s);
    s.data = root;
    s.width = s.height = 32;
    s.batch_size = 8;
    s.prefetch_depth = 4;
    s.threads = threads;
    s.io = io;
    s.read_budget_bytes = 1 * MIB;
    huge_errors e = {0};
    s.on_sample_error = count_huge;
    s.on_sample_error_user = &e;
    gf_loader *l = NULL;
    int rc = gf_open(&l, &s);
    ck_assert_msg(rc == 0, "gf_open: %s: %s", gf_err_name(rc), gf_last_error(l));
    gf_batch *b;
    int samples = 0;
    while ((rc = gf_next(l, &b)) == 0) {
        samples += b->count;
        gf_release(l, b);
    }
    ck_assert_int_eq(rc, GF_EOF);
    gf_stats st;
    gf_get_stats(l, &st);
    gf_close(&l);

    ck_assert_int_eq(st.reader, io);
    ck_assert_int_eq(samples, N_IMAGES);
    ck_assert_int_eq(e.n, N_HUGE);
    ck_assert_int_eq(e.other, 0);
    ck_assert_uint_eq(st.errors, N_HUGE);
    /* Each image whole, each huge file its first part only; an image's
     * first part is read again when it waited for the budget. */
    ck_assert_uint_ge(st.bytes_read, image_bytes + N_HUGE * GF__SNIFF_BYTES);
    ck_assert_uint_le(st.bytes_read, image_bytes + (N_HUGE + N_IMAGES) * GF__SNIFF_BYTES);
    ck_assert_uint_eq(st.read_budget_bytes, 1 * MIB);
    ck_assert_msg(st.read_bytes_peak > 0 && st.read_bytes_peak <= 1 * MIB,
                  "read buffers peaked at %llu bytes", (unsigned long long)st.read_bytes_peak);
    /* io_uring submits the reads of every slot at once, more than the
     * budget allows, so some wait; with pread, whether decode threads'
     * reads overlap is the scheduler's choice. */
    if (io == GF_IO_URING)
        ck_assert_uint_gt(st.read_budget_waits, 0);
    tu_rmrf(root);
    free(root);
}

START_TEST(reads_in_flight_stay_within_the_budget_with_pread)
{
    run_budgeted(GF_IO_POSIX, 4);
}
END_TEST

START_TEST(reads_in_flight_stay_within_the_budget_with_io_uring)
{
    run_budgeted(GF_IO_URING, 1);
}
END_TEST

START_TEST(the_budget_setting_is_checked_and_defaults_to_256_mib)
{
    char *root = tu_image_folder(1, 2, 16, 16, "png");
    gf_settings s;
    tu_cpu_settings(&s);
    s.data = root;
    s.read_budget_bytes = MIB - 1;
    gf_loader *l = NULL;
    ck_assert_int_eq(gf_open(&l, &s), GF_EINVAL);
    ck_assert_ptr_nonnull(strstr(gf_last_error(l), "read_budget_bytes"));
    gf_close(&l);
    s.read_budget_bytes = 0;
    ck_assert_int_eq(gf_open(&l, &s), 0);
    gf_stats st;
    gf_get_stats(l, &st);
    ck_assert_uint_eq(st.read_budget_bytes, GF_READ_BUDGET_DEFAULT);
    ck_assert_uint_eq(GF_READ_BUDGET_DEFAULT, 256 * MIB);
    gf_close(&l);
    tu_rmrf(root);
    free(root);
}
END_TEST

/* ------------------------------------------------ files replaced under it */

/* A shard of 4 samples (PNG + label), seeds from seed. */
static void write_shard(const char *path, uint32_t seed)
{
    tu_tar w = {0};
    for (int i = 0; i < 4; i++) {
        uint8_t px[16 * 16 * 3];
        tu_fill(px, 16, 16, 3, seed + (uint32_t)i);
        size_t n;
        uint8_t *png = tu_png_mem(px, 16, 16, 3, &n);
        char name[32], label[8];
        snprintf(name, sizeof name, "k%u_%d.png", seed, i);
        tu_tar_file(&w, name, png, n);
        snprintf(name, sizeof name, "k%u_%d.cls", seed, i);
        snprintf(label, sizeof label, "%d", i % 2);
        tu_tar_file(&w, name, label, strlen(label));
        free(png);
    }
    tu_tar_end(&w);
    tu_write_file(path, w.p, w.len);
    free(w.p);
}

/* The samples that failed as changed (a bit each), and other errors. A
 * batch the loader prefetched, finalised and reported before the gf_seek
 * may already have met the replaced shard: its samples are then reported
 * again after the seek, so the test counts samples, not reports. */
typedef struct changed_errors {
    unsigned samples;
    int other;
} changed_errors;

static void count_changed(void *user, int64_t sample, const char *path, int code,
                          const char *reason)
{
    changed_errors *e = user;
    if (code == GF_EIO && !strncmp(path, "a.tar:", 6) && sample >= 0 && sample < 32 &&
        strstr(reason, "changed since it was indexed (replaced: another inode"))
        e->samples |= 1u << sample;
    else
        e->other++;
}

/* a.tar replaced (mv) by a tar of the same size after indexing: its
 * samples are errors naming it, b.tar's are delivered. */
static void replaced_shard(gf_io io)
{
    char *dir = tu_mkdtemp();
    char a[4096], b[4096], c[4096], src[8300];
    snprintf(a, sizeof a, "%s/a.tar", dir);
    snprintf(b, sizeof b, "%s/b.tar", dir);
    snprintf(c, sizeof c, "%s/c.tar", dir);
    write_shard(a, 10);
    write_shard(b, 20);
    /* a.tar with one image byte changed: the same size, other content. */
    size_t n;
    uint8_t *bytes = tu_read_file(a, &n);
    bytes[600] ^= 1;
    tu_write_file(c, bytes, n);
    free(bytes);
    snprintf(src, sizeof src, "%s,%s", a, b);

    gf_settings s;
    tu_cpu_settings(&s);
    s.data = src;
    s.width = s.height = 16;
    s.batch_size = 2;
    s.shuffle = 0;
    s.threads = 1;
    s.io = io;
    changed_errors e = {0};
    s.on_sample_error = count_changed;
    s.on_sample_error_user = &e;
    gf_loader *l = NULL;
    int rc = gf_open(&l, &s);
    ck_assert_msg(rc == 0, "gf_open: %s: %s", gf_err_name(rc), gf_last_error(l));
    ck_assert_int_eq(rename(c, a), 0);
    ck_assert_int_eq(gf_seek(l, 0, 0), 0); /* every read from here is after the mv */
    gf_batch *bt;
    int samples = 0;
    while ((rc = gf_next(l, &bt)) == 0) {
        for (int i = 0; i < bt->count; i++)
            ck_assert_int_ge(bt->indices[i], 4); /* b.tar's */
        samples += bt->count;
        gf_release(l, bt);
    }
    ck_assert_int_eq(rc, GF_EOF);
    gf_stats st;
    gf_get_stats(l, &st);
    ck_assert_int_eq(st.reader, io);
    gf_close(&l);
    ck_assert_int_eq(samples, 4);
    ck_assert_uint_eq(e.samples, 0xf); /* a.tar's four */
    ck_assert_int_eq(e.other, 0);
    tu_rmrf(dir);
    free(dir);
}

START_TEST(a_shard_replaced_by_mv_is_an_error_naming_it_with_pread)
{
    replaced_shard(GF_IO_POSIX);
}
END_TEST

START_TEST(a_shard_replaced_by_mv_is_an_error_naming_it_with_io_uring)
{
    replaced_shard(GF_IO_URING);
}
END_TEST

/* Rewritten in place (same inode), grown, or touched: each is caught. */
START_TEST(a_shard_rewritten_grown_or_touched_is_caught_at_the_read)
{
    char *dir = tu_mkdtemp();
    char a[4096];
    snprintf(a, sizeof a, "%s/a.tar", dir);
    write_shard(a, 10);
    gf__dataset ds;
    char why[256];
    ck_assert_int_eq(gf__dataset_open(&ds, a, why, sizeof why), 0);
    const char *rel;
    uint64_t off, len;
    gf__dataset_extent(&ds, 0, &rel, &off, &len);
    gf__read_opts o = {.expect = gf__dataset_file_id(&ds, 0)};
    ck_assert_ptr_nonnull(o.expect);
    gf__buf b = {0};
    ck_assert_int_eq(gf__read_sample(ds.root_fd, rel, off, len, &o, &b, why, sizeof why), 0);

    /* Touched: the same bytes, a new mtime. */
    struct timespec t[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
    ck_assert_int_eq(utimensat(AT_FDCWD, a, t, 0), 0);
    ck_assert_int_eq(gf__read_sample(ds.root_fd, rel, off, len, &o, &b, why, sizeof why),
                     GF_EIO);
    ck_assert_msg(strstr(why, "changed since it was indexed (its mtime") != NULL, "%s", why);
    /* Grown: appended to. */
    int fd = open(a, O_WRONLY | O_APPEND);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "x", 1), 1);
    close(fd);
    ck_assert_int_eq(gf__read_sample(ds.root_fd, rel, off, len, &o, &b, why, sizeof why),
                     GF_EIO);
    ck_assert_msg(strstr(why, "changed since it was indexed (its size") != NULL, "%s", why);
    /* Without the identity (gf_read_sample's reads) it reads on. */
    o.expect = NULL;
    ck_assert_int_eq(gf__read_sample(ds.root_fd, rel, off, len, &o, &b, why, sizeof why), 0);
    gf__buf_free(&b);
    gf__dataset_close(&ds);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

static Suite *hostile_io_suite(void)
{
    Suite *s = suite_create("hostile_io");
    TCase *t = tcase_create("budget");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, a_large_file_that_is_no_image_costs_its_first_bytes);
    tcase_add_test(t, reads_in_flight_stay_within_the_budget_with_pread);
    tcase_add_test(t, the_budget_setting_is_checked_and_defaults_to_256_mib);
    suite_add_tcase(s, t);
    t = tcase_create("identity");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, a_shard_replaced_by_mv_is_an_error_naming_it_with_pread);
    tcase_add_test(t, a_shard_rewritten_grown_or_touched_is_caught_at_the_read);
    suite_add_tcase(s, t);
    t = tu_uring_tcase("uring");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, a_large_file_that_is_no_image_costs_its_first_bytes_with_io_uring);
    tcase_add_test(t, reads_in_flight_stay_within_the_budget_with_io_uring);
    tcase_add_test(t, a_shard_replaced_by_mv_is_an_error_naming_it_with_io_uring);
    suite_add_tcase(s, t);
    return s;
}

#include "run_suite.h"

int main(int argc, char **argv)
{
    return tu_run_suite_split(hostile_io_suite(), argc, argv);
}
