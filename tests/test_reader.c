/*
 * The reader: whole-file reads by pread() and by io_uring.
 *
 * `test_reader` runs the POSIX cases; `test_reader uring` runs the io_uring
 * cases and exits 77 (meson: skipped) where io_uring is unavailable.
 */
#include "testutil.h"

#include "config.h"
#include "reader.h"
#include "run_suite.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)

static char *root;
static int root_fd = -1;

static void setup(void)
{
    root = tu_mkdtemp();
    root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(root_fd, 0);
}

static void teardown(void)
{
    close(root_fd);
    root_fd = -1;
    tu_rmrf(root);
    free(root);
    root = NULL;
}

static uint8_t *pattern(size_t n, uint32_t seed)
{
    uint8_t *p = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < n; i++)
        p[i] = tu_pixel(seed, (int)(i % 65521), (int)(i / 65521), 0);
    return p;
}

/* Writes root/rel with n pattern bytes; returns them (caller frees). */
static uint8_t *make(const char *rel, size_t n, uint32_t seed)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    uint8_t *p = pattern(n, seed);
    tu_write_file(path, p, n);
    return p;
}

static void make_free(const char *rel, size_t n, uint32_t seed)
{
    free(make(rel, n, seed));
}

static void assert_bytes(const gf__buf *b, const uint8_t *want, size_t n)
{
    ck_assert_uint_eq(b->len, n);
    ck_assert_uint_ge(b->cap, n);
    ck_assert_int_eq(memcmp(b->data, want, n), 0);
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

static const size_t sizes[] = {1, 4096, MIB + 7};

/* A file whose size says more than reading it gives, as a file cut short
 * while it is read does: sysfs attributes say 4096 bytes and hold a few.
 * NULL if there is none (the tests then say they skipped). */
static const char *short_file(size_t *size, size_t *holds)
{
    static const char *const candidates[] = {"/sys/devices/system/cpu/online",
                                             "/sys/devices/system/cpu/possible",
                                             "/sys/kernel/mm/transparent_hugepage/enabled"};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        struct stat st;
        int fd = open(candidates[i], O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        char tmp[8192];
        ssize_t n, got = 0;
        while ((n = read(fd, tmp, sizeof tmp)) > 0)
            got += n;
        int regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
        close(fd);
        if (regular && got > 0 && got < st.st_size) {
            *size = (size_t)st.st_size;
            *holds = (size_t)got;
            return candidates[i];
        }
    }
    printf("SKIP: no file whose size is over what it holds (sysfs)\n");
    return NULL;
}

/* ------------------------------------------------------------------ posix */

START_TEST(read_file_returns_files_of_1_4096_and_1MiB_plus_7_bytes_exactly)
{
    for (size_t k = 0; k < 3; k++) {
        char rel[64];
        snprintf(rel, sizeof rel, "sub/f%zu.bin", k);
        uint8_t *want = make(rel, sizes[k], (uint32_t)k + 1);
        gf__buf b = {0};
        char why[160] = "stale";
        ck_assert_int_eq(gf__read_file(root_fd, rel, &b, 256 * MIB, why, sizeof why), 0);
        ck_assert_str_eq(why, "");
        assert_bytes(&b, want, sizes[k]);
        gf__buf_free(&b);
        free(want);
    }
}
END_TEST

START_TEST(read_file_reports_a_missing_file_as_GF_ENOENT)
{
    make_free("file", 10, 1);
    const char *rels[] = {"nope.jpg", "nodir/nope.jpg", "file/below_a_file"};
    gf__buf b = {0};
    for (int k = 0; k < 3; k++) {
        char why[160] = "";
        ck_assert_int_eq(gf__read_file(root_fd, rels[k], &b, 0, why, sizeof why),
                         GF_ENOENT);
        ck_assert_str_eq(why, "no such file");
        ck_assert_uint_eq(b.len, 0);
    }
    ck_assert_ptr_null(b.data);
}
END_TEST

START_TEST(read_file_reports_an_empty_file_as_GF_EEMPTY)
{
    make_free("empty", 0, 1);
    gf__buf b = {0};
    char why[160] = "";
    ck_assert_int_eq(gf__read_file(root_fd, "empty", &b, 0, why, sizeof why), GF_EEMPTY);
    ck_assert_str_eq(why, "file is empty");
    ck_assert_ptr_null(b.data);
}
END_TEST

START_TEST(read_file_refuses_a_file_over_max_as_GF_ETOOBIG_before_allocating)
{
    uint8_t *want = make("big", 10000, 1);
    gf__buf b = {0};
    char why[160] = "";
    ck_assert_int_eq(gf__read_file(root_fd, "big", &b, 9999, why, sizeof why), GF_ETOOBIG);
    ck_assert_ptr_nonnull(strstr(why, "10000 bytes"));
    ck_assert_ptr_nonnull(strstr(why, "9999"));
    ck_assert_ptr_null(b.data);
    ck_assert_uint_eq(b.cap, 0);
    ck_assert_uint_eq(b.len, 0);
    /* Exactly at the limit is fine, and the buffer never exceeds it. */
    ck_assert_int_eq(gf__read_file(root_fd, "big", &b, 10000, why, sizeof why), 0);
    assert_bytes(&b, want, 10000);
    ck_assert_uint_eq(b.cap, 10000);
    gf__buf_free(&b);
    free(want);
}
END_TEST

START_TEST(read_file_reports_a_directory_as_GF_EIO)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/adir", root);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    gf__buf b = {0};
    char why[160] = "";
    ck_assert_int_eq(gf__read_file(root_fd, "adir", &b, 0, why, sizeof why), GF_EIO);
    ck_assert_str_eq(why, "not a regular file: a directory");
    ck_assert_ptr_null(b.data);
}
END_TEST

START_TEST(read_file_reports_a_fifo_as_GF_EIO_without_blocking)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/fifo", root);
    ck_assert_int_eq(mkfifo(path, 0644), 0);
    gf__buf b = {0};
    char why[160] = "";
    ck_assert_int_eq(gf__read_file(root_fd, "fifo", &b, 0, why, sizeof why), GF_EIO);
    ck_assert_str_eq(why, "not a regular file: a FIFO");
}
END_TEST

START_TEST(read_file_reports_an_unreadable_file_as_GF_EIO)
{
    if (geteuid() == 0)
        return; /* root reads through mode 000 */
    make_free("secret", 10, 1);
    char path[4096];
    snprintf(path, sizeof path, "%s/secret", root);
    ck_assert_int_eq(chmod(path, 0), 0);
    gf__buf b = {0};
    char why[160] = "";
    ck_assert_int_eq(gf__read_file(root_fd, "secret", &b, 0, why, sizeof why), GF_EIO);
    ck_assert_ptr_nonnull(strstr(why, "Permission denied"));
}
END_TEST

START_TEST(read_file_reuses_its_buffer_and_only_grows_it)
{
    uint8_t *small = make("small", 100, 1);
    uint8_t *mid = make("mid", 5000, 2);
    uint8_t *big = make("big", 300000, 3);
    gf__buf b = {0};
    char why[160];

    ck_assert_int_eq(gf__read_file(root_fd, "small", &b, 0, why, sizeof why), 0);
    assert_bytes(&b, small, 100);
    ck_assert_uint_eq(b.cap, 4096);
    ck_assert_int_eq(gf__read_file(root_fd, "mid", &b, 0, why, sizeof why), 0);
    assert_bytes(&b, mid, 5000);
    ck_assert_uint_eq(b.cap, 8192); /* doubled, not sized to fit */
    ck_assert_int_eq(gf__read_file(root_fd, "big", &b, 0, why, sizeof why), 0);
    assert_bytes(&b, big, 300000);
    ck_assert_uint_eq(b.cap, 524288);

    /* Smaller files and failures reuse the same memory: no allocation. */
    uint8_t *data = b.data;
    size_t cap = b.cap;
    ck_assert_int_eq(gf__read_file(root_fd, "small", &b, 0, why, sizeof why), 0);
    assert_bytes(&b, small, 100);
    ck_assert_int_eq(gf__read_file(root_fd, "missing", &b, 0, why, sizeof why), GF_ENOENT);
    ck_assert_int_eq(gf__read_file(root_fd, "mid", &b, 0, why, sizeof why), 0);
    assert_bytes(&b, mid, 5000);
    ck_assert_ptr_eq(b.data, data);
    ck_assert_uint_eq(b.cap, cap);

    gf__buf_free(&b);
    ck_assert_ptr_null(b.data);
    ck_assert_uint_eq(b.cap, 0);
    gf__buf_free(&b); /* twice is harmless */
    gf__buf_free(NULL);
    free(small);
    free(mid);
    free(big);
}
END_TEST

/* io = AUTO's decode threads: NOWAIT takes what the page cache holds and
 * says GF__READ_UNCACHED, never waiting, for the rest. */
START_TEST(read_sample_nowait_reads_cached_bytes_and_leaves_the_rest)
{
    size_t n = MIB + 7;
    uint8_t *want = make("f", n, 5);
    const gf__read_opts nowait = {.flags = GF__READ_NOWAIT}, plain = {0};
    gf__buf b = {0};
    char why[160];
    /* Just written: in the page cache. */
    ck_assert_int_eq(gf__read_sample(root_fd, "f", 0, GF__WHOLE_FILE, &nowait, &b, why, sizeof why),
                     0);
    assert_bytes(&b, want, n);
    /* A member's range too. */
    ck_assert_int_eq(gf__read_sample(root_fd, "f", 4096, 70000, &nowait, &b, why, sizeof why), 0);
    assert_bytes(&b, want + 4096, 70000);

    char path[4096];
    snprintf(path, sizeof path, "%s/f", root);
    /* Cold, as the kernel answers: whole or UNCACHED, never a part or an
     * error. RWF_NOWAIT starts readahead and a fast disk may finish it before
     * the kernel looks again, so which one is a race: UNCACHED on cue
     * follows. */
    if (!tu_evict(path)) {
        printf("SKIP: the file system keeps the file cached (tmpfs?)\n");
    } else {
        int rc = gf__read_sample(root_fd, "f", 0, GF__WHOLE_FILE, &nowait, &b, why, sizeof why);
        ck_assert_msg(rc == 0 || rc == GF__READ_UNCACHED, "nowait read: %d (%s)", rc, why);
        if (rc == 0)
            assert_bytes(&b, want, n);
        else
            ck_assert(b.len == 0 && why[0] == 0);
    }
    /* The blocking read takes it, and then it is cached. */
    ck_assert_int_eq(gf__read_sample(root_fd, "f", 0, GF__WHOLE_FILE, &plain, &b, why, sizeof why),
                     0);
    assert_bytes(&b, want, n);
    ck_assert_int_eq(gf__read_sample(root_fd, "f", 0, GF__WHOLE_FILE, &nowait, &b, why, sizeof why),
                     0);
    assert_bytes(&b, want, n);
    /* Cold, injected (the file is cached now, so only the injection can
     * say otherwise): nothing cached, or a part and then nothing. The part
     * is not returned; no reason is given, as nothing is wrong. */
    static const long parts[] = {0, 1, 4096, 300000};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        tu_nowait_budget(parts[i]);
        int rc = gf__read_sample(root_fd, "f", 0, GF__WHOLE_FILE, &nowait, &b, why, sizeof why);
        ck_assert_msg(rc == GF__READ_UNCACHED, "%ld bytes cached: %d (%s)", parts[i], rc, why);
        ck_assert_uint_eq(b.len, 0);
        ck_assert_str_eq(why, "");
    }
    tu_nowait_budget(4096); /* a member's range alike */
    ck_assert_int_eq(gf__read_sample(root_fd, "f", 4096, 70000, &nowait, &b, why, sizeof why),
                     GF__READ_UNCACHED);
    ck_assert_uint_eq(b.len, 0);
    tu_nowait_budget(-1);
    /* Errors are the plain read's. */
    ck_assert_int_eq(gf__read_sample(root_fd, "nope", 0, GF__WHOLE_FILE, &nowait, &b, why,
                                     sizeof why),
                     GF_ENOENT);
    ck_assert_int_eq(gf__read_sample(root_fd, "f", n - 10, 20, &nowait, &b, why, sizeof why),
                     GF_ETRUNC);
    gf__buf_free(&b);
    free(want);
}
END_TEST

/* A NOWAIT read the budget would hold back does not wait: io_uring waits
 * for it without a thread. */
START_TEST(read_sample_nowait_does_not_wait_for_the_budget)
{
    size_t n = 768 << 10;
    uint8_t *a = make("a", n, 6), *c = make("c", n, 7);
    gf__budget g;
    gf__budget_init(&g, MIB, 1, NULL); /* keep: 512 KiB */
    const gf__read_opts nowait = {.budget = &g, .flags = GF__READ_NOWAIT};
    gf__buf ba = {0}, bc = {0};
    char why[160];
    ck_assert_int_eq(gf__read_sample(root_fd, "a", 0, GF__WHOLE_FILE, &nowait, &ba, why,
                                     sizeof why),
                     0);
    assert_bytes(&ba, a, n);
    /* ba is large and held: c's growth would take the budget past 1 MiB. */
    ck_assert_int_eq(gf__read_sample(root_fd, "c", 0, GF__WHOLE_FILE, &nowait, &bc, why,
                                     sizeof why),
                     GF__READ_UNCACHED);
    gf__budget_done(&g, &ba);
    ck_assert_ptr_null(ba.data);
    ck_assert_int_eq(gf__read_sample(root_fd, "c", 0, GF__WHOLE_FILE, &nowait, &bc, why,
                                     sizeof why),
                     0);
    assert_bytes(&bc, c, n);
    gf__budget_done(&g, &bc);
    gf__budget_destroy(&g);
    free(a);
    free(c);
}
END_TEST

START_TEST(read_file_follows_openat_rules_for_absolute_paths)
{
    uint8_t *want = make("abs", 33, 9);
    char path[4096];
    snprintf(path, sizeof path, "%s/abs", root);
    gf__buf b = {0};
    char why[160];
    ck_assert_int_eq(gf__read_file(-1, path, &b, 0, why, sizeof why), 0);
    assert_bytes(&b, want, 33);
    ck_assert_int_eq(gf__read_file(AT_FDCWD, path, &b, 0, why, sizeof why), 0);
    assert_bytes(&b, want, 33);
    gf__buf_free(&b);
    free(want);
}
END_TEST

START_TEST(read_file_reports_a_file_that_shrinks_while_read)
{
    size_t size, holds;
    const char *path = short_file(&size, &holds);
    if (!path)
        return;
    gf__buf b = {0};
    char why[160], want[160];
    ck_assert_int_eq(gf__read_file(AT_FDCWD, path, &b, 0, why, sizeof why), GF_EIO);
    snprintf(want, sizeof want, "file shrank while reading: %zu of %zu bytes", holds, size);
    ck_assert_str_eq(why, want);
    ck_assert_uint_eq(b.len, 0);
    /* A member's range that the file no longer holds: the shard shrank. */
    ck_assert_int_eq(gf__read_range(AT_FDCWD, path, 0, holds + 1, &b, 0, why, sizeof why),
                     GF_ETRUNC);
    snprintf(want, sizeof want, "shard ended inside member: %zu of %zu bytes at offset 0",
             holds, holds + 1);
    ck_assert_str_eq(why, want);
    ck_assert_uint_eq(b.len, 0);
    gf__buf_free(&b);
}
END_TEST

START_TEST(read_file_rejects_NULL_arguments_and_tolerates_a_NULL_why)
{
    make_free("x", 5, 1);
    gf__buf b = {0};
    ck_assert_int_eq(gf__read_file(root_fd, NULL, &b, 0, NULL, 0), GF_EINVAL);
    ck_assert_int_eq(gf__read_file(root_fd, "x", NULL, 0, NULL, 0), GF_EINVAL);
    ck_assert_int_eq(gf__read_file(root_fd, "x", &b, 0, NULL, 0), 0);
    ck_assert_int_eq(gf__read_file(root_fd, "y", &b, 0, NULL, 0), GF_ENOENT);
    gf__buf_free(&b);
}
END_TEST

START_TEST(uring_availability_matches_the_build)
{
    ck_assert_int_eq(gf__have_uring(), GF_HAVE_URING);
#if !GF_HAVE_URING
    gf__uring *u = (gf__uring *)&u;
    char why[160] = "";
    ck_assert_int_eq(gf__uring_create(&u, 8, 0, why, sizeof why), GF_ENODEV);
    ck_assert_ptr_null(u);
    ck_assert_ptr_nonnull(strstr(why, "built without io_uring"));
    ck_assert_int_eq(gf__uring_eventfd(NULL), -1);
    ck_assert_uint_eq(gf__uring_room(NULL), 0);
    gf__uring_destroy(NULL);
#endif
}
END_TEST

static Suite *posix_suite(void)
{
    Suite *s = suite_create("reader");
    TCase *tc = tcase_create("pread");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, read_file_returns_files_of_1_4096_and_1MiB_plus_7_bytes_exactly);
    tcase_add_test(tc, read_file_reports_a_missing_file_as_GF_ENOENT);
    tcase_add_test(tc, read_file_reports_an_empty_file_as_GF_EEMPTY);
    tcase_add_test(tc, read_file_refuses_a_file_over_max_as_GF_ETOOBIG_before_allocating);
    tcase_add_test(tc, read_file_reports_a_directory_as_GF_EIO);
    tcase_add_test(tc, read_file_reports_a_fifo_as_GF_EIO_without_blocking);
    tcase_add_test(tc, read_file_reports_an_unreadable_file_as_GF_EIO);
    tcase_add_test(tc, read_file_reuses_its_buffer_and_only_grows_it);
    tcase_add_test(tc, read_file_follows_openat_rules_for_absolute_paths);
    tcase_add_test(tc, read_file_reports_a_file_that_shrinks_while_read);
    tcase_add_test(tc, read_file_rejects_NULL_arguments_and_tolerates_a_NULL_why);
    tcase_add_test(tc, read_sample_nowait_reads_cached_bytes_and_leaves_the_rest);
    tcase_add_test(tc, read_sample_nowait_does_not_wait_for_the_budget);
    suite_add_tcase(s, tc);
    TCase *tb = tcase_create("build");
    tcase_add_test(tb, uring_availability_matches_the_build);
    suite_add_tcase(s, tb);
    return s;
}

/* ----------------------------------------------------------------- uring */

static gf__uring *make_ring(unsigned depth, size_t max_bytes)
{
    gf__uring *u = NULL;
    char why[160] = "";
    int rc = gf__uring_create(&u, depth, max_bytes, why, sizeof why);
    ck_assert_msg(rc == 0, "gf__uring_create: %s: %s", gf_err_name(rc), why);
    ck_assert_ptr_nonnull(u);
    ck_assert_int_ge(gf__uring_eventfd(u), 0);
    ck_assert_uint_eq(gf__uring_room(u), depth);
    return u;
}

/* 1 if the eventfd becomes readable within ms milliseconds. */
static int efd_ready(gf__uring *u, int ms)
{
    struct pollfd p = {.fd = gf__uring_eventfd(u), .events = POLLIN};
    int r;
    do
        r = poll(&p, 1, ms);
    while (r < 0 && errno == EINTR);
    ck_assert_int_ge(r, 0);
    return r == 1 && (p.revents & POLLIN);
}

/* Reaps until `want` completions arrived, waiting on the eventfd as the
 * controller does; fails after 10 s without progress. Returns the count. */
static int reap_n(gf__uring *u, gf__read_done *done, int want)
{
    int got = 0;
    while (got < want) {
        ck_assert_msg(efd_ready(u, 10000), "no completion after 10 s (%d of %d)", got,
                      want);
        got += gf__uring_reap(u, done + got, want - got);
    }
    return got;
}

START_TEST(uring_returns_files_of_1_4096_and_1MiB_plus_7_bytes_exactly)
{
    gf__uring *u = make_ring(4, 256 * MIB);
    uint8_t *want[3];
    gf__buf b[3] = {{0}};
    for (size_t k = 0; k < 3; k++) {
        char rel[64];
        snprintf(rel, sizeof rel, "sub/f%zu.bin", k);
        want[k] = make(rel, sizes[k], (uint32_t)k + 1);
        ck_assert_int_eq(gf__uring_submit(u, root_fd, rel, &b[k], 100 + k), 0);
    }
    gf__read_done done[3];
    ck_assert_int_eq(reap_n(u, done, 3), 3);
    int seen = 0;
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_ge(done[i].user, 100);
        size_t k = (size_t)(done[i].user - 100);
        ck_assert_uint_lt(k, 3);
        ck_assert_int_eq(done[i].err, 0);
        ck_assert_str_eq(done[i].why, "");
        ck_assert_ptr_eq(done[i].buf, &b[k]);
        assert_bytes(&b[k], want[k], sizes[k]);
        seen |= 1 << k;
    }
    ck_assert_int_eq(seen, 7);
    ck_assert_uint_eq(gf__uring_room(u), 4);
    gf__uring_destroy(u);
    for (int k = 0; k < 3; k++) {
        gf__buf_free(&b[k]);
        free(want[k]);
    }
}
END_TEST

START_TEST(uring_keeps_queue_depth_reads_in_flight_then_reaps_them_all)
{
    enum { D = 16 };
    gf__uring *u = make_ring(D, 0);
    uint8_t *want[D];
    gf__buf b[D] = {{0}};
    for (int k = 0; k < D; k++) {
        char rel[64];
        snprintf(rel, sizeof rel, "f%02d", k);
        want[k] = make(rel, 65536 + (size_t)k * 1001, (uint32_t)k);
    }
    for (int round = 0; round < 3; round++) {
        for (int k = 0; k < D; k++) {
            char rel[64];
            snprintf(rel, sizeof rel, "f%02d", k);
            ck_assert_int_eq(gf__uring_submit(u, root_fd, rel, &b[k], (uint64_t)k), 0);
        }
        ck_assert_uint_eq(gf__uring_room(u), 0);
        gf__read_done done[D];
        ck_assert_int_eq(reap_n(u, done, D), D);
        unsigned seen = 0;
        for (int i = 0; i < D; i++) {
            int k = (int)done[i].user;
            ck_assert_int_eq(done[i].err, 0);
            ck_assert_ptr_eq(done[i].buf, &b[k]);
            assert_bytes(&b[k], want[k], 65536 + (size_t)k * 1001);
            seen |= 1u << k;
        }
        ck_assert_uint_eq(seen, (1u << D) - 1);
        ck_assert_uint_eq(gf__uring_room(u), D);
        ck_assert_int_eq(gf__uring_reap(u, done, D), 0);
    }
    gf__uring_destroy(u);
    for (int k = 0; k < D; k++) {
        gf__buf_free(&b[k]);
        free(want[k]);
    }
}
END_TEST

START_TEST(uring_eventfd_becomes_readable_after_submit_and_quiet_after_reap)
{
    uint8_t *want = make("one", 12345, 5);
    gf__uring *u = make_ring(2, 0);
    ck_assert_int_eq(efd_ready(u, 0), 0);
    gf__buf b = {0};
    ck_assert_int_eq(gf__uring_submit(u, root_fd, "one", &b, 7), 0);
    ck_assert_int_eq(efd_ready(u, 5000), 1);
    gf__read_done d;
    int n = 0;
    while (n == 0) {
        n = gf__uring_reap(u, &d, 1);
        if (!n)
            ck_assert(efd_ready(u, 5000));
    }
    ck_assert_int_eq(n, 1);
    ck_assert_uint_eq(d.user, 7);
    assert_bytes(&b, want, 12345);
    ck_assert_int_eq(efd_ready(u, 50), 0);
    gf__uring_destroy(u);
    gf__buf_free(&b);
    free(want);
}
END_TEST

START_TEST(uring_room_decreases_on_submit_and_increases_on_reap)
{
    make_free("a", 1000, 1);
    gf__uring *u = make_ring(3, 0);
    gf__buf b[3] = {{0}};
    for (unsigned k = 0; k < 3; k++) {
        ck_assert_uint_eq(gf__uring_room(u), 3 - k);
        ck_assert_int_eq(gf__uring_submit(u, root_fd, "a", &b[k], k), 0);
        ck_assert_uint_eq(gf__uring_room(u), 2 - k);
    }
    gf__read_done d[3];
    for (unsigned k = 0; k < 3; k++) {
        ck_assert_int_eq(reap_n(u, &d[k], 1), 1);
        ck_assert_int_eq(d[k].err, 0);
        ck_assert_uint_eq(gf__uring_room(u), k + 1);
    }
    gf__uring_destroy(u);
    for (int k = 0; k < 3; k++)
        gf__buf_free(&b[k]);
}
END_TEST

START_TEST(uring_completes_open_failures_through_reap_with_their_codes)
{
    make_free("empty", 0, 1);
    make_free("big", 5000, 1);
    char path[4096];
    snprintf(path, sizeof path, "%s/adir", root);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    const char *rels[] = {"missing.jpg", "empty", "big", "adir"};
    const int codes[] = {GF_ENOENT, GF_EEMPTY, GF_ETOOBIG, GF_EIO};
    const char *whys[] = {"no such file", "file is empty", "over the 4096-byte limit",
                          "not a regular file: a directory"};
    gf__uring *u = make_ring(4, 4096);
    gf__buf b[4] = {{0}};
    for (int k = 0; k < 4; k++) {
        b[k].len = 99;
        ck_assert_int_eq(gf__uring_submit(u, root_fd, rels[k], &b[k], (uint64_t)k), 0);
    }
    ck_assert_uint_eq(gf__uring_room(u), 0);
    /* Nothing reached the kernel, yet the controller must wake up. */
    ck_assert_int_eq(efd_ready(u, 0), 1);
    gf__read_done d[4];
    ck_assert_int_eq(gf__uring_reap(u, d, 4), 4);
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_eq(d[i].user, (uint64_t)i); /* in submission order */
        ck_assert_ptr_eq(d[i].buf, &b[i]);
        ck_assert_int_eq(d[i].err, codes[i]);
        ck_assert_msg(strstr(d[i].why, whys[i]), "why: %s", d[i].why);
        ck_assert_uint_eq(b[i].len, 0);
        ck_assert_ptr_null(b[i].data); /* refused before allocating */
    }
    ck_assert_uint_eq(gf__uring_room(u), 4);
    ck_assert_int_eq(efd_ready(u, 0), 0);
    gf__uring_destroy(u);
}
END_TEST

START_TEST(uring_submit_when_full_is_GF_EINVAL)
{
    make_free("a", 100, 1);
    gf__uring *u = make_ring(2, 0);
    gf__buf b[3] = {{0}};
    ck_assert_int_eq(gf__uring_submit(u, root_fd, "a", &b[0], 0), 0);
    ck_assert_int_eq(gf__uring_submit(u, root_fd, "missing", &b[1], 1), 0);
    ck_assert_uint_eq(gf__uring_room(u), 0);
    ck_assert_int_eq(gf__uring_submit(u, root_fd, "a", &b[2], 2), GF_EINVAL);
    ck_assert_ptr_null(b[2].data);
    gf__read_done d[2];
    ck_assert_int_eq(reap_n(u, d, 2), 2);
    ck_assert_int_eq(gf__uring_submit(u, root_fd, "a", &b[2], 2), 0);
    ck_assert_int_eq(reap_n(u, d, 1), 1);
    ck_assert_int_eq(d[0].err, 0);
    ck_assert_uint_eq(b[2].len, 100);
    gf__uring_destroy(u);
    for (int k = 0; k < 3; k++)
        gf__buf_free(&b[k]);
}
END_TEST

START_TEST(uring_refuses_a_buffer_that_already_has_a_read_in_flight)
{
    make_free("a", 100, 1);
    make_free("b", 100000, 2);
    gf__uring *u = make_ring(4, 0);
    gf__buf b = {0};
    ck_assert_int_eq(gf__uring_submit(u, root_fd, "a", &b, 0), 0);
    uint8_t *data = b.data;
    ck_assert_int_eq(gf__uring_submit(u, root_fd, "b", &b, 1), GF_EINVAL);
    ck_assert_ptr_eq(b.data, data); /* not regrown under the kernel */
    ck_assert_uint_eq(gf__uring_room(u), 3);
    gf__read_done d;
    ck_assert_int_eq(reap_n(u, &d, 1), 1);
    ck_assert_uint_eq(d.user, 0);
    ck_assert_uint_eq(b.len, 100);
    gf__uring_destroy(u);
    gf__buf_free(&b);
}
END_TEST

START_TEST(uring_reap_with_a_small_max_leaves_the_eventfd_readable)
{
    make_free("a", 3000, 1);
    gf__uring *u = make_ring(6, 0);
    gf__buf b[6] = {{0}};
    for (int k = 0; k < 6; k++)
        ck_assert_int_eq(gf__uring_submit(u, root_fd, k % 2 ? "a" : "missing", &b[k],
                                          (uint64_t)k),
                         0);
    int got = 0, ok = 0;
    while (got < 6) {
        ck_assert_msg(efd_ready(u, 10000), "eventfd quiet with %d of 6 reaped", got);
        gf__read_done d;
        int n = gf__uring_reap(u, &d, 1);
        ck_assert_int_le(n, 1);
        if (n) {
            ck_assert_int_eq(d.err, d.user % 2 ? 0 : GF_ENOENT);
            ok += d.err == 0;
        }
        got += n;
    }
    ck_assert_int_eq(ok, 3);
    ck_assert_int_eq(efd_ready(u, 50), 0);
    gf__uring_destroy(u);
    for (int k = 0; k < 6; k++)
        gf__buf_free(&b[k]);
}
END_TEST

START_TEST(uring_reuses_buffers_across_reads_without_growing)
{
    uint8_t *big = make("big", 200000, 1);
    uint8_t *small = make("small", 300, 2);
    gf__uring *u = make_ring(1, 0);
    gf__buf b = {0};
    gf__read_done d;
    ck_assert_int_eq(gf__uring_submit(u, root_fd, "big", &b, 0), 0);
    ck_assert_int_eq(reap_n(u, &d, 1), 1);
    assert_bytes(&b, big, 200000);
    uint8_t *data = b.data;
    size_t cap = b.cap;
    ck_assert_uint_eq(cap, 262144);
    for (int i = 0; i < 4; i++) {
        const char *rel = i % 2 ? "big" : "small";
        ck_assert_int_eq(gf__uring_submit(u, root_fd, rel, &b, 0), 0);
        ck_assert_int_eq(reap_n(u, &d, 1), 1);
        ck_assert_int_eq(d.err, 0);
        if (i % 2)
            assert_bytes(&b, big, 200000);
        else
            assert_bytes(&b, small, 300);
        ck_assert_ptr_eq(b.data, data);
        ck_assert_uint_eq(b.cap, cap);
    }
    gf__uring_destroy(u);
    gf__buf_free(&b);
    free(big);
    free(small);
}
END_TEST

START_TEST(uring_destroy_with_reads_in_flight_waits_and_closes_every_file)
{
    enum { D = 32 };
    for (int k = 0; k < D; k++) {
        char rel[64];
        snprintf(rel, sizeof rel, "f%02d", k);
        make_free(rel, MIB + (size_t)k, (uint32_t)k);
    }
    int fds = count_fds();
    gf__uring *u = make_ring(D, 0);
    gf__buf b[D] = {{0}};
    /* 32 MiB, so some reads are likely still in flight at destroy. */
    for (int k = 0; k < D; k++) {
        char rel[64];
        snprintf(rel, sizeof rel, "f%02d", k);
        ck_assert_int_eq(gf__uring_submit(u, root_fd, rel, &b[k], (uint64_t)k), 0);
    }
    gf__uring_destroy(u);
    /* The kernel is done with the buffers: freeing them now is safe. */
    for (int k = 0; k < D; k++)
        gf__buf_free(&b[k]);
    ck_assert_int_eq(count_fds(), fds);

    /* And with only failed opens pending. */
    u = make_ring(2, 0);
    gf__buf e = {0};
    ck_assert_int_eq(gf__uring_submit(u, root_fd, "missing", &e, 0), 0);
    gf__uring_destroy(u);
    gf__uring_destroy(NULL);
    ck_assert_int_eq(count_fds(), fds);
}
END_TEST

START_TEST(uring_create_rejects_a_bad_queue_depth)
{
    gf__uring *u = (gf__uring *)&u;
    char why[160] = "";
    ck_assert_int_eq(gf__uring_create(&u, 0, 0, why, sizeof why), GF_EINVAL);
    ck_assert_ptr_null(u);
    ck_assert_ptr_nonnull(strstr(why, "queue depth"));
    ck_assert_int_eq(gf__uring_create(&u, 40000, 0, why, sizeof why), GF_EINVAL);
    ck_assert_int_eq(gf__uring_create(NULL, 8, 0, why, sizeof why), GF_EINVAL);
}
END_TEST

START_TEST(uring_reports_a_file_that_shrinks_while_read)
{
    size_t size, holds;
    const char *path = short_file(&size, &holds);
    if (!path)
        return;
    gf__uring *u = make_ring(2, 0);
    gf__buf whole = {0}, range = {0};
    ck_assert_int_eq(gf__uring_submit(u, AT_FDCWD, path, &whole, 1), 0);
    ck_assert_int_eq(gf__uring_submit_range(u, AT_FDCWD, path, 0, holds + 1, &range, 2), 0);
    gf__read_done done[2];
    ck_assert_int_eq(reap_n(u, done, 2), 2);
    for (int i = 0; i < 2; i++) {
        char want[160];
        if (done[i].user == 1) {
            ck_assert_int_eq(done[i].err, GF_EIO);
            snprintf(want, sizeof want, "file shrank while reading: %zu of %zu bytes", holds,
                     size);
        } else {
            ck_assert_int_eq(done[i].err, GF_ETRUNC);
            snprintf(want, sizeof want,
                     "shard ended inside member: %zu of %zu bytes at offset 0", holds,
                     holds + 1);
        }
        ck_assert_str_eq(done[i].why, want);
        ck_assert_uint_eq(done[i].buf->len, 0);
    }
    ck_assert_uint_eq(gf__uring_room(u), 2);
    gf__uring_destroy(u);
    gf__buf_free(&whole);
    gf__buf_free(&range);
}
END_TEST

START_TEST(uring_submit_rejects_NULL_arguments)
{
    gf__uring *u = make_ring(2, 0);
    gf__buf b = {0};
    ck_assert_int_eq(gf__uring_submit(NULL, root_fd, "a", &b, 0), GF_EINVAL);
    ck_assert_int_eq(gf__uring_submit(u, root_fd, NULL, &b, 0), GF_EINVAL);
    ck_assert_int_eq(gf__uring_submit(u, root_fd, "a", NULL, 0), GF_EINVAL);
    ck_assert_uint_eq(gf__uring_room(u), 2);
    gf__read_done d;
    ck_assert_int_eq(gf__uring_reap(u, &d, 1), 0);
    ck_assert_int_eq(gf__uring_reap(u, NULL, 1), 0);
    ck_assert_int_eq(gf__uring_reap(u, &d, 0), 0);
    gf__uring_destroy(u);
}
END_TEST

static Suite *uring_suite(void)
{
    Suite *s = suite_create("reader_uring");
    TCase *tc = tcase_create("io_uring");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, uring_returns_files_of_1_4096_and_1MiB_plus_7_bytes_exactly);
    tcase_add_test(tc, uring_keeps_queue_depth_reads_in_flight_then_reaps_them_all);
    tcase_add_test(tc, uring_eventfd_becomes_readable_after_submit_and_quiet_after_reap);
    tcase_add_test(tc, uring_room_decreases_on_submit_and_increases_on_reap);
    tcase_add_test(tc, uring_completes_open_failures_through_reap_with_their_codes);
    tcase_add_test(tc, uring_submit_when_full_is_GF_EINVAL);
    tcase_add_test(tc, uring_refuses_a_buffer_that_already_has_a_read_in_flight);
    tcase_add_test(tc, uring_reap_with_a_small_max_leaves_the_eventfd_readable);
    tcase_add_test(tc, uring_reuses_buffers_across_reads_without_growing);
    tcase_add_test(tc, uring_destroy_with_reads_in_flight_waits_and_closes_every_file);
    tcase_add_test(tc, uring_create_rejects_a_bad_queue_depth);
    tcase_add_test(tc, uring_reports_a_file_that_shrinks_while_read);
    tcase_add_test(tc, uring_submit_rejects_NULL_arguments);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    Suite *s;
    if (argc > 1 && strcmp(argv[1], "uring") == 0) {
        gf__uring *u = NULL;
        char why[160] = "";
        int rc = gf__uring_create(&u, 4, 0, why, sizeof why);
        if (rc == GF_ENODEV) {
            printf("SKIP: io_uring unavailable: %s\n", why);
            return 77;
        }
        if (rc != 0) {
            fprintf(stderr, "gf__uring_create: %s: %s\n", gf_err_name(rc), why);
            return 1;
        }
        gf__uring_destroy(u);
        s = uring_suite();
    } else {
        s = posix_suite();
    }
    return tu_run_suite(s);
}
