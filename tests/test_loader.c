/* The loader end to end: order, pixels, labels, determinism, back-pressure,
 * bad samples, resume, close mid-epoch, both readers. */
#include "config.h"
#include "decode.h"
#include "mix.h"
#include "gpufeed.h"
#include "convert.h"
#include "sampler.h"
#include "reader.h"
#include "testutil.h"
#include "tu_engine.h"

#include <check.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The PNG samples decoded: by libspng where built, else by stb_image. */
static uint64_t png_decoded(const gf_stats *st)
{
    return GF_HAVE_SPNG ? st->decoded_spng : st->decoded_stb;
}

enum { W = 16, H = 12, CLASSES = 3, PER_CLASS = 7, N = CLASSES * PER_CLASS };

static char *root;

static void setup(void)
{
    root = tu_image_folder(CLASSES, PER_CLASS, W, H, "png");
}

static void teardown(void)
{
    tu_rmrf(root);
    free(root);
}

static gf_loader *open_ok(const gf_settings *s)
{
    gf_loader *l = NULL;
    int rc = gf_open(&l, s);
    ck_assert_msg(rc == 0, "gf_open: %s: %s", gf_err_name(rc), gf_last_error(l));
    return l;
}

/* Runs a loader to the end; returns a hash of every batch's bytes and the
 * delivered indices in order. */
typedef struct run_result {
    uint64_t hash;
    int64_t indices[4096];
    int32_t labels[4096];
    uint64_t epochs[4096];
    int n, batches;
    gf_stats stats;
} run_result;

static void run_all(const gf_settings *s, run_result *r)
{
    memset(r, 0, sizeof *r);
    r->hash = GF__FNV1A64_BASIS;
    gf_loader *l = open_ok(s);
    gf_batch *b;
    int rc;
    while ((rc = gf_next(l, &b)) == 0) {
        size_t px = (size_t)b->count * b->height * b->width * b->channels;
        r->hash = gf__fnv1a64(r->hash, b->pixels, px);
        r->hash = gf__fnv1a64(r->hash, b->labels, (size_t)b->count * sizeof *b->labels);
        r->hash = gf__fnv1a64(r->hash, &b->count, sizeof b->count);
        for (int i = 0; i < b->count && r->n < 4096; i++, r->n++) {
            r->indices[r->n] = b->indices[i];
            r->labels[r->n] = b->labels[i];
            r->epochs[r->n] = b->epoch;
        }
        r->batches++;
        ck_assert_int_eq(gf_release(l, b), 0);
    }
    ck_assert_msg(rc == GF_EOF, "gf_next: %s: %s", gf_err_name(rc), gf_last_error(l));
    gf_get_stats(l, &r->stats);
    gf_close(&l);
    ck_assert_ptr_null(l);
}

START_TEST(pixels_and_labels_match_the_files)
{
    gf_settings s;
    tu_exact_settings(&s, root, W, H);
    gf_loader *l = open_ok(&s);
    uint8_t *want = malloc((size_t)W * H * 3);
    int seen = 0;
    gf_batch *b;
    while (gf_next(l, &b) == 0) {
        ck_assert_int_eq(b->height, H);
        ck_assert_int_eq(b->width, W);
        ck_assert_int_eq(b->channels, 3);
        for (int i = 0; i < b->count; i++, seen++) {
            ck_assert_int_eq(b->indices[i], seen); /* no shuffle: data set order */
            int k = seen / PER_CLASS, j = seen % PER_CLASS;
            ck_assert_int_eq(b->labels[i], k);
            tu_fill(want, W, H, 3, (uint32_t)(k * 1000 + j));
            ck_assert_msg(memcmp(b->pixels + (size_t)i * W * H * 3, want, (size_t)W * H * 3) == 0,
                          "sample %d pixels differ", seen);
        }
        gf_release(l, b);
    }
    ck_assert_int_eq(seen, N);
    gf_stats st;
    gf_get_stats(l, &st);
    ck_assert_uint_eq(st.samples, N);
    ck_assert_uint_eq(st.batches, (N + 3) / 4);
    ck_assert_uint_eq(st.errors, 0);
    ck_assert_uint_eq(st.dataset_samples, N);
    ck_assert_int_eq(st.classes, CLASSES);
    ck_assert_uint_gt(st.bytes_read, 0);
    ck_assert_uint_eq(png_decoded(&st), N);
    ck_assert_uint_ge(st.ring_bytes, 4ull * 4 * W * H * 3);
    free(want);
    gf_close(&l);
}
END_TEST

START_TEST(a_final_short_batch_or_none_with_drop_last)
{
    gf_settings s;
    tu_exact_settings(&s, root, W, H);
    s.batch_size = 8;
    run_result *r = malloc(sizeof *r);
    run_all(&s, r);
    ck_assert_int_eq(r->n, N);
    ck_assert_int_eq(r->batches, 3); /* 8 + 8 + 5 */
    s.drop_last = 1;
    run_all(&s, r);
    ck_assert_int_eq(r->n, 16);
    ck_assert_int_eq(r->batches, 2);
    free(r);
}
END_TEST

START_TEST(shuffled_order_is_the_samplers_for_each_epoch)
{
    gf_settings s;
    tu_exact_settings(&s, root, W, H);
    s.shuffle = 1;
    s.seed = 42;
    s.epochs = 3;
    run_result *r = malloc(sizeof *r);
    run_all(&s, r);
    ck_assert_int_eq(r->n, 3 * N);
    gf__sampler sm;
    ck_assert_int_eq(gf__sampler_init(&sm, N, 42, 1, 0, 1, 0), 0);
    for (uint64_t e = 0; e < 3; e++) {
        gf__perm p;
        gf__perm_init(&p, &sm, e);
        for (int i = 0; i < N; i++) {
            ck_assert_uint_eq(r->epochs[e * N + i], e);
            ck_assert_int_eq(r->indices[e * N + i], (int64_t)gf__sampler_at(&sm, &p, (uint64_t)i));
            int64_t idx = r->indices[e * N + i];
            ck_assert_int_eq(r->labels[e * N + i], idx / PER_CLASS);
        }
    }
    /* Epochs differ in order. */
    ck_assert(memcmp(r->indices, r->indices + N, N * sizeof(int64_t)) != 0);
    free(r);
}
END_TEST

/* The tests that compare readers are loop tests: _i == URING_CASE (the
 * uring test case, run alone: skipped where io_uring is refused) takes
 * io_uring, 0 the others. */
#define URING_CASE 1

static int reader_in_case(int io, int i)
{
    return (io == GF_IO_URING) == (i == URING_CASE);
}

START_TEST(batches_are_identical_for_any_thread_count_and_reader)
{
    gf_settings s;
    tu_cpu_settings(&s);
    s.data = root;
    s.width = 10;
    s.height = 9; /* train: random-resized-crop + flip */
    s.batch_size = 5;
    s.seed = 7;
    s.epochs = 2;
    run_result *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    s.threads = 1;
    s.io = GF_IO_POSIX;
    run_all(&s, a);
    ck_assert_int_eq(a->stats.reader, GF_IO_POSIX);
    int threads[] = {2, 3, 8};
    for (int t = 0; t < 3; t++) {
        s.threads = threads[t];
        for (int io = GF_IO_AUTO; io <= GF_IO_POSIX; io++) {
            if (!reader_in_case(io, _i))
                continue;
            s.io = (gf_io)io;
            s.prefetch_depth = 1 + t * 3;
            run_all(&s, b);
            ck_assert_msg(a->hash == b->hash, "threads=%d io=%d differ", threads[t], io);
            ck_assert_int_eq(b->n, 2 * N);
        }
    }
    s.seed = 8;
    run_all(&s, b);
    ck_assert_msg(a->hash != b->hash, "another seed must give other batches");
    free(a);
    free(b);
}
END_TEST

START_TEST(forcing_each_reader_is_reported_in_stats)
{
    gf_settings s;
    tu_exact_settings(&s, root, W, H);
    run_result *r = malloc(sizeof *r);
    s.io = GF_IO_POSIX;
    run_all(&s, r);
    ck_assert_int_eq(r->stats.reader, GF_IO_POSIX);
    uint64_t h = r->hash;
    if (_i == URING_CASE) {
        s.io = GF_IO_URING;
        run_all(&s, r);
        ck_assert_int_eq(r->stats.reader, GF_IO_URING);
        ck_assert_uint_eq(r->hash, h);
        ck_assert_uint_gt(r->stats.bytes_read, 0);
    }
    free(r);
}
END_TEST

/* io = AUTO (with io_uring): the decode threads read what the page cache
 * holds, io_uring the rest, the batches the same bytes as either reader
 * forced. Raw PPMs over 64 KiB, read in two parts as prepared sets are. */
START_TEST(auto_reads_cached_files_on_the_decode_threads_and_cold_ones_with_io_uring)
{
    enum { K = 2, PER = 6, PW = 160, PH = 150 }; /* 72,015 bytes a file */
    char *dir = tu_image_folder(K, PER, PW, PH, "ppm");
    gf_settings s;
    tu_cpu_settings(&s);
    s.data = dir;
    s.width = 40;
    s.height = 32; /* train: random-resized-crop + flip */
    s.batch_size = 4;
    s.seed = 3;
    s.epochs = 2;
    s.threads = 2;
    run_result *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    s.io = GF_IO_POSIX;
    run_all(&s, a);
    ck_assert_int_eq(a->n, 2 * K * PER);
    ck_assert_uint_eq(a->stats.page_cache_reads + a->stats.page_cache_misses, 0);
    s.io = GF_IO_URING;
    run_all(&s, b);
    ck_assert_uint_eq(b->hash, a->hash);
    ck_assert_uint_eq(b->stats.page_cache_reads + b->stats.page_cache_misses, 0);

    s.io = GF_IO_AUTO;
    run_all(&s, b);
    ck_assert_uint_eq(b->hash, a->hash);
    ck_assert_int_eq(b->stats.reader, GF_IO_URING);
    ck_assert_uint_gt(b->stats.page_cache_reads, 0);
    ck_assert_uint_le(b->stats.page_cache_reads, 2 * K * PER);

    /* Cold, on cue (every NOWAIT read says EAGAIN): io_uring reads them,
     * and after misses the decode threads try less often (a backoff). */
    tu_nowait_budget(0);
    run_all(&s, b);
    tu_nowait_budget(-1);
    ck_assert_uint_eq(b->hash, a->hash);
    ck_assert_uint_eq(b->stats.errors, 0);
    ck_assert_uint_eq(b->stats.page_cache_reads, 0);
    ck_assert_uint_ge(b->stats.page_cache_misses, 1);

    /* Cold as the kernel answers (RWF_NOWAIT races its own readahead, so
     * either reader may take a file): the same batches. */
    int cold = 1;
    char path[4096];
    for (int k = 0; k < K; k++)
        for (int i = 0; i < PER; i++) {
            snprintf(path, sizeof path, "%s/class_%d/img_%03d.ppm", dir, k, i);
            cold &= tu_evict(path);
        }
    if (cold) {
        run_all(&s, b);
        ck_assert_uint_eq(b->hash, a->hash);
        ck_assert_uint_eq(b->stats.errors, 0);
    }
    free(a);
    free(b);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

static void wait_decoded(gf_loader *l, uint64_t n, gf_stats *st)
{
    for (int i = 0; i < 3000; i++) {
        gf_get_stats(l, st);
        if (png_decoded(st) >= n)
            return;
        usleep(10 * 1000);
    }
    ck_abort_msg("only %llu of %llu samples decoded after 30 s",
                 (unsigned long long)png_decoded(st), (unsigned long long)n);
}

START_TEST(the_ring_holds_back_when_the_consumer_does_not_read)
{
    gf_settings s;
    tu_exact_settings(&s, root, W, H);
    s.batch_size = 2;
    s.prefetch_depth = 3;
    s.threads = 4;
    gf_loader *l = open_ok(&s);
    /* Never more decoded than the ring can hold, however long we wait. */
    gf_stats st;
    wait_decoded(l, 6, &st);
    usleep(200 * 1000);
    gf_get_stats(l, &st);
    ck_assert_uint_eq(png_decoded(&st), 6);
    ck_assert_uint_eq(st.samples, 0);
    gf_batch *b;
    ck_assert_int_eq(gf_next(l, &b), 0);
    ck_assert_int_eq(b->indices[0], 0);
    gf_release(l, b);
    wait_decoded(l, 8, &st);
    usleep(200 * 1000);
    gf_get_stats(l, &st);
    ck_assert_uint_eq(png_decoded(&st), 8);
    gf_close(&l);
}
END_TEST

START_TEST(a_slow_consumer_gets_batches_in_order)
{
    gf_settings s;
    tu_exact_settings(&s, root, W, H);
    s.batch_size = 1;
    s.prefetch_depth = 2;
    s.threads = 4;
    gf_loader *l = open_ok(&s);
    gf_batch *b;
    int n = 0;
    while (gf_next(l, &b) == 0) {
        ck_assert_int_eq(b->indices[0], n);
        n++;
        usleep(3000);
        gf_release(l, b);
    }
    ck_assert_int_eq(n, N);
    gf_stats st;
    gf_get_stats(l, &st);
    ck_assert_uint_eq(st.samples, N);
    gf_close(&l);
}
END_TEST

/* Held batches take slots of their own (tests/test_held.c has the rest):
 * only past max_held_batches is gf_next busy, whichever is released. */
START_TEST(holding_past_max_held_batches_is_busy_not_a_hang)
{
    gf_settings s;
    tu_exact_settings(&s, root, W, H);
    s.prefetch_depth = 2;
    s.max_held_batches = 2;
    gf_loader *l = open_ok(&s);
    gf_batch *a, *b, *c;
    ck_assert_int_eq(gf_next(l, &a), 0);
    ck_assert_int_eq(gf_next(l, &b), 0);
    ck_assert_int_eq(gf_next(l, &c), GF_EBUSY);
    ck_assert_ptr_nonnull(strstr(gf_last_error(l), "2 batches are held"));
    gf_release(l, a); /* any one will do, not only the oldest */
    ck_assert_int_eq(gf_next(l, &c), 0);
    gf_release(l, b);
    ck_assert_int_eq(c->indices[0], 8);
    ck_assert_int_eq(gf_release(l, c), 0);
    ck_assert_int_eq(gf_release(l, c), GF_EINVAL); /* twice */
    gf_close(&l);
}
END_TEST

/* Entries of a /proc directory. */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* This process's threads, once down to `want` (a joined thread may stay
 * listed for a moment after pthread_join returns), or after 10 s: long
 * enough for a loaded machine to reap it, short of the test's timeout.
 * Fewer is no leak: the baseline may have counted a lingering thread. */
static int threads_settled(int want)
{
    int n = count_entries("/proc/self/task");
    for (int i = 0; i < 1000 && n > want; i++) {
        nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
        n = count_entries("/proc/self/task");
    }
    return n;
}

/* Threads and fds, after a first loader: it may leave what is made once
 * per process (libuv's signal lock pipe, TSan's background thread). */
static void baseline(const gf_settings *s, int *tasks, int *fds)
{
    gf_loader *first = open_ok(s);
    gf_close(&first);
    *tasks = count_entries("/proc/self/task");
    for (int i = 0; i < 20; i++) { /* its threads may linger a moment */
        nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
        int n = count_entries("/proc/self/task");
        *tasks = n < *tasks ? n : *tasks;
    }
    *fds = count_entries("/proc/self/fd");
}

/* Every thread joined and every descriptor closed: the process has the
 * threads and fds it had after the first loader (memory: the ASan and
 * valgrind runs). */
START_TEST(closing_mid_epoch_with_batches_held_frees_everything)
{
    gf_settings s;
    tu_exact_settings(&s, root, W, H);
    s.batch_size = 1;
    s.threads = 3;
    int tasks, fds;
    baseline(&s, &tasks, &fds);
    for (int i = 0; i < 5; i++) {
        gf_loader *l = open_ok(&s);
        gf_batch *b;
        for (int k = 0; k < i; k++)
            ck_assert_int_eq(gf_next(l, &b), 0); /* held, never released */
        gf_close(&l);
        ck_assert_ptr_null(l);
    }
    gf_close(NULL);
    ck_assert_int_le(threads_settled(tasks), tasks);
    ck_assert_int_eq(count_entries("/proc/self/fd"), fds);
}
END_TEST

/* pthread_create as the loader sees it: the fail_thread_at-th call (from
 * 1; 0: none) fails with EAGAIN and leaves errno saying something else,
 * as a failed pthread_create may. */
static atomic_int thread_calls, fail_thread_at;

int pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
    static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "pthread_create");
    if (atomic_load(&fail_thread_at) && atomic_fetch_add(&thread_calls, 1) + 1 == fail_thread_at) {
        errno = EDOM;
        return EAGAIN;
    }
    return real(t, a, fn, arg);
}

/* A decode thread or the controller that cannot start: GF_ETHREAD with
 * pthread_create's own error (it returns it; errno is not it), and the
 * threads that did start are joined. */
START_TEST(a_thread_that_cannot_start_fails_the_open_with_its_error)
{
    gf_settings s;
    tu_exact_settings(&s, root, W, H);
    s.threads = 2;
    int tasks, fds;
    baseline(&s, &tasks, &fds);
    for (int at = 1; at <= 3; at++) { /* decode thread 1, 2, the controller */
        atomic_store(&thread_calls, 0);
        atomic_store(&fail_thread_at, at);
        gf_loader *l = NULL;
        int rc = gf_open(&l, &s);
        atomic_store(&fail_thread_at, 0);
        ck_assert_int_eq(rc, GF_ETHREAD);
        ck_assert_msg(strstr(gf_last_error(l), strerror(EAGAIN)), "thread %d: %s", at,
                      gf_last_error(l));
        gf_close(&l);
        ck_assert_int_le(threads_settled(tasks), tasks);
        ck_assert_int_eq(count_entries("/proc/self/fd"), fds);
    }
}
END_TEST

START_TEST(unbounded_epochs_keep_coming)
{
    gf_settings s;
    tu_exact_settings(&s, root, W, H);
    s.epochs = 0;
    s.batch_size = 8;
    gf_loader *l = open_ok(&s);
    gf_batch *b;
    uint64_t last_epoch = 0;
    for (int i = 0; i < 12; i++) {
        ck_assert_int_eq(gf_next(l, &b), 0);
        ck_assert_uint_ge(b->epoch, last_epoch);
        last_epoch = b->epoch;
        gf_release(l, b);
    }
    ck_assert_uint_eq(last_epoch, 3); /* 3 batches per epoch */
    gf_close(&l);
}
END_TEST

START_TEST(resuming_at_a_batch_position_continues_exactly)
{
    gf_settings s;
    tu_cpu_settings(&s);
    s.data = root;
    s.width = 8;
    s.height = 8;
    s.batch_size = 4;
    s.seed = 3;
    s.epochs = 2;
    s.threads = 2;
    /* Reference: every batch's hash and its resume point. */
    uint64_t hashes[64], epochs[64], positions[64];
    int n = 0;
    gf_loader *l = open_ok(&s);
    gf_batch *b;
    while (gf_next(l, &b) == 0) {
        hashes[n] = gf__fnv1a64(0, b->pixels, (size_t)b->count * 8 * 8 * 3);
        hashes[n] = gf__fnv1a64(hashes[n], b->indices, (size_t)b->count * 8);
        epochs[n] = b->epoch;
        positions[n] = b->position;
        n++;
        gf_release(l, b);
    }
    gf_close(&l);
    ck_assert_int_eq(n, 12);
    for (int k = 0; k < n - 1; k += 2) {
        l = open_ok(&s);
        ck_assert_int_eq(gf_seek(l, epochs[k], positions[k]), 0);
        for (int j = k + 1; j < n; j++) {
            ck_assert_int_eq(gf_next(l, &b), 0);
            uint64_t h = gf__fnv1a64(0, b->pixels, (size_t)b->count * 8 * 8 * 3);
            h = gf__fnv1a64(h, b->indices, (size_t)b->count * 8);
            ck_assert_msg(h == hashes[j], "resume after %d: batch %d differs", k, j);
            gf_release(l, b);
        }
        ck_assert_int_eq(gf_next(l, &b), GF_EOF);
        gf_stats st;
        gf_get_stats(l, &st);
        ck_assert_uint_eq(st.epoch, 2);
        gf_close(&l);
    }
    l = open_ok(&s);
    ck_assert_int_eq(gf_next(l, &b), 0);
    ck_assert_int_eq(gf_seek(l, 0, 0), 0); /* a held batch stays valid */
    gf_release(l, b);
    ck_assert_int_eq(gf_seek(l, 0, 999), GF_EINVAL);
    ck_assert_int_eq(gf_seek(l, 1, 0), 0);
    ck_assert_int_eq(gf_next(l, &b), 0);
    ck_assert_uint_eq(b->epoch, 1);
    gf_release(l, b);
    gf_close(&l);
}
END_TEST

START_TEST(rank_shares_are_disjoint_and_cover_the_epoch)
{
    gf_settings s;
    tu_exact_settings(&s, root, W, H);
    s.shuffle = 1;
    s.seed = 11;
    s.drop_last = 1;
    int count[N] = {0};
    run_result *r = malloc(sizeof *r);
    for (int rank = 0; rank < 3; rank++) {
        s.world = 3;
        s.rank = rank;
        s.batch_size = 7;
        run_all(&s, r);
        ck_assert_int_eq(r->n, N / 3);
        for (int i = 0; i < r->n; i++)
            count[r->indices[i]]++;
    }
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(count[i], 1);
    free(r);
}
END_TEST

START_TEST(bad_settings_are_rejected_with_the_check_named)
{
    gf_settings s;
    tu_exact_settings(&s, root, W, H);
    s.channels = 2;
    gf_loader *l = NULL;
    ck_assert_int_eq(gf_open(&l, &s), GF_EINVAL);
    ck_assert_ptr_nonnull(strstr(gf_last_error(l), "channels"));
    gf_close(&l);
    tu_exact_settings(&s, root, W, H);
    s.rank = 2;
    s.world = 2;
    ck_assert_int_eq(gf_open(&l, &s), GF_EINVAL);
    gf_close(&l);
    tu_exact_settings(&s, "/nonexistent/gpufeed-data", W, H);
    ck_assert_int_eq(gf_open(&l, &s), GF_EDATASET);
    ck_assert_ptr_nonnull(strstr(gf_last_error(l), "/nonexistent/gpufeed-data"));
    gf_close(&l);
    ck_assert_int_eq(gf_open(NULL, &s), GF_EINVAL);
    ck_assert_str_eq(gf_err_name(GF_ETRUNC), "GF_ETRUNC");
    ck_assert_str_eq(gf_strerror(GF_EOF), "end of data: every requested epoch was delivered");
    ck_assert_str_eq(gf_err_name(12345), "GF_E?");
}
END_TEST

static void clear_launcher_env(void)
{
    const char *names[] = {"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                           "SLURM_PROCID", "SLURM_NTASKS", "LOCAL_RANK", NULL};
    for (int i = 0; names[i]; i++)
        unsetenv(names[i]);
}

START_TEST(each_launchers_environment_picks_the_share)
{
    clear_launcher_env();
    gf_settings s;
    tu_exact_settings(&s, root, W, H);
    s.shuffle = 1;
    s.seed = 4;
    run_result *want = malloc(sizeof *want), *got = malloc(sizeof *got);
    s.rank = 1;
    s.world = 3;
    run_all(&s, want);
    ck_assert_int_eq(want->n, N / 3);
    static const char *vars[3][2] = {{"RANK", "WORLD_SIZE"},
                                     {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                     {"SLURM_PROCID", "SLURM_NTASKS"}};
    for (int k = 0; k < 3; k++) {
        setenv(vars[k][0], "1", 1);
        setenv(vars[k][1], "3", 1);
        s.rank = 0;
        s.world = 0; /* from the launcher */
        run_all(&s, got);
        ck_assert_int_eq(got->stats.rank, 1);
        ck_assert_int_eq(got->stats.world, 3);
        ck_assert_uint_eq(got->hash, want->hash);
        unsetenv(vars[k][0]);
        unsetenv(vars[k][1]);
    }
    /* Explicit settings win over the environment. */
    setenv("RANK", "2", 1);
    setenv("WORLD_SIZE", "3", 1);
    s.rank = 1;
    s.world = 3;
    run_all(&s, got);
    ck_assert_uint_eq(got->hash, want->hash);
    setenv("RANK", "3", 1);
    s.world = 0;
    gf_loader *l = NULL;
    ck_assert_int_eq(gf_open(&l, &s), GF_EINVAL);
    ck_assert_ptr_nonnull(strstr(gf_last_error(l), "rank 3"));
    gf_close(&l);
    clear_launcher_env();
    s.world = 0;
    run_all(&s, got); /* no launcher: rank 0 of 1 */
    ck_assert_int_eq(got->stats.world, 1);
    ck_assert_int_eq(got->n, N);
    free(want);
    free(got);
}
END_TEST

START_TEST(a_saved_state_resumes_exactly_and_refuses_another_run)
{
    gf_settings s;
    tu_cpu_settings(&s);
    s.data = root;
    s.width = s.height = 8;
    s.batch_size = 3;
    s.seed = 21;
    s.epochs = 2;
    s.threads = 2;
    uint64_t want[32];
    int n = 0;
    gf_loader *l = open_ok(&s);
    gf_batch *b;
    gf_state saved = {0};
    while (gf_next(l, &b) == 0) {
        want[n] = gf__fnv1a64(gf__fnv1a64(0, b->pixels, (size_t)b->count * 8 * 8 * 3), b->indices,
                      (size_t)b->count * 8);
        gf_release(l, b);
        if (++n == 9)
            ck_assert_int_eq(gf_get_state(l, &saved), 0);
    }
    gf_close(&l);
    ck_assert_int_eq(n, 14);
    ck_assert_uint_eq(saved.version, GF_STATE_VERSION);
    ck_assert_uint_eq(saved.epoch, 1);
    ck_assert_uint_eq(saved.position, 6); /* 7 batches per epoch */

    gf_state copy;
    memcpy(&copy, &saved, sizeof copy); /* as bytes, as a checkpoint would */
    l = open_ok(&s);
    ck_assert_int_eq(gf_set_state(l, &copy), 0);
    for (int k = 9; k < n; k++) {
        ck_assert_int_eq(gf_next(l, &b), 0);
        uint64_t h = gf__fnv1a64(gf__fnv1a64(0, b->pixels, (size_t)b->count * 8 * 8 * 3), b->indices,
                         (size_t)b->count * 8);
        ck_assert_msg(h == want[k], "batch %d differs after resuming", k);
        gf_release(l, b);
    }
    ck_assert_int_eq(gf_next(l, &b), GF_EOF);
    gf_close(&l);

    s.seed = 22;
    l = open_ok(&s);
    ck_assert_int_eq(gf_set_state(l, &copy), GF_EINVAL);
    ck_assert_ptr_nonnull(strstr(gf_last_error(l), "seed: the state's 21, this loader's 22"));
    copy.version = 99;
    ck_assert_int_eq(gf_set_state(l, &copy), GF_EINVAL);
    gf_close(&l);
}
END_TEST

/* The first `batches` batches of an unbounded run: their hash, and the
 * stats at the end. */
static uint64_t first_batches(const gf_settings *s, int batches, gf_stats *st)
{
    gf_loader *l = open_ok(s);
    uint64_t h = GF__FNV1A64_BASIS;
    gf_batch *b;
    for (int i = 0; i < batches; i++) {
        ck_assert_int_eq(gf_next(l, &b), 0);
        h = gf__fnv1a64(h, b->pixels, (size_t)b->count * b->height * b->width * b->channels);
        h = gf__fnv1a64(h, b->indices, (size_t)b->count * sizeof *b->indices);
        gf_release(l, b);
    }
    gf_get_stats(l, st);
    gf_close(&l);
    return h;
}

START_TEST(autotune_adds_threads_when_the_consumer_stalls_and_keeps_the_bytes)
{
    /* Big noisy PNGs: decoding, not the consumer, is the bottleneck. */
    char *big = tu_image_folder(3, 8, 400, 300, "png");
    gf_settings s;
    tu_cpu_settings(&s);
    s.data = big;
    s.width = s.height = 32;
    s.batch_size = 4;
    s.seed = 12;
    s.epochs = 0;
    s.threads = 1;
    s.prefetch_depth = 6;
    gf_stats fixed, tuned;
    uint64_t want = first_batches(&s, 150, &fixed);
    ck_assert_int_eq(fixed.autotune, 0);
    ck_assert_int_eq(fixed.threads, 1);
    ck_assert_int_eq(fixed.prefetch_depth, 6);

    s.autotune = 1;
    s.max_threads = 3;
    uint64_t got = first_batches(&s, 150, &tuned);
    ck_assert_uint_eq(got, want); /* tuning never changes the batches */
    ck_assert_int_eq(tuned.autotune, 1);
    ck_assert_msg(tuned.autotune_changes >= 1 && tuned.threads >= 2,
                  "autotune: %llu changes, %d threads, depth %d",
                  (unsigned long long)tuned.autotune_changes, tuned.threads,
                  tuned.prefetch_depth);
    ck_assert_int_le(tuned.threads, 3);
    ck_assert_int_ge(tuned.prefetch_depth, 2);
    ck_assert_int_le(tuned.prefetch_depth, 6);
    tu_rmrf(big);
    free(big);
}
END_TEST

/* --------------------------------------------------------- bad samples */

typedef struct seen_errors {
    int n;
    int64_t sample[32];
    int code[32];
    char path[32][64];
} seen_errors;

static void on_error(void *user, int64_t sample, const char *path, int code, const char *reason)
{
    seen_errors *e = user;
    ck_assert_ptr_nonnull(reason);
    ck_assert(reason[0] != '\0');
    if (e->n < 32) {
        e->sample[e->n] = sample;
        e->code[e->n] = code;
        snprintf(e->path[e->n], sizeof e->path[0], "%s", path);
        e->n++;
    }
}

/* A list file of 13 samples, 6 of them bad in each way a file can be
 * (unreadable: a directory where a file should be; tests run as root, so
 * permissions cannot make one). */
static char *bad_list(char **listp)
{
    char *dir = tu_mkdtemp();
    char p[4096], list[8192] = "";
    static const char *names[13] = {"ok0.png", "missing.png", "ok2.png",  "trunc.png",
                                    "ok4.png", "text.png",    "ok6.png",  "empty.png",
                                    "ok8.png", "huge.png",    "ok10.png", "ok11.png",
                                    "unreadable.png"};
    for (int i = 0; i < 13; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        if (strncmp(names[i], "ok", 2) == 0)
            tu_write_png(p, W, H, 3, (uint32_t)i);
        size_t len = strlen(list);
        snprintf(list + len, sizeof list - len, "%s %d\n", names[i], i);
    }
    snprintf(p, sizeof p, "%s/trunc.png", dir);
    tu_write_png(p, W, H, 3, 3);
    size_t len;
    uint8_t *png = tu_read_file(p, &len);
    tu_write_file(p, png, len / 2);
    free(png);
    snprintf(p, sizeof p, "%s/text.png", dir);
    tu_write_text(p, "this is not an image\n");
    snprintf(p, sizeof p, "%s/empty.png", dir);
    tu_write_file(p, "", 0);
    snprintf(p, sizeof p, "%s/huge.png", dir);
    tu_write_png(p, 64, 64, 3, 9); /* over the limit set below */
    snprintf(p, sizeof p, "%s/unreadable.png/x", dir);
    tu_write_text(p, "a directory, not an image");
    snprintf(p, sizeof p, "%s/list.txt", dir);
    tu_write_text(p, list);
    *listp = strdup(p);
    return dir;
}

static void bad_settings(gf_settings *s, const char *list, seen_errors *e)
{
    tu_exact_settings(s, list, W, H);
    s->max_pixels = 1000; /* 64x64 is over, 16x12 is not */
    s->on_sample_error = on_error;
    s->on_sample_error_user = e;
}

START_TEST(bad_samples_are_skipped_counted_and_named)
{
    char *list;
    char *dir = bad_list(&list);
    gf_settings s;
    seen_errors e = {0};
    bad_settings(&s, list, &e);
    run_result *r = malloc(sizeof *r);
    run_all(&s, r);
    /* The good ones, each once; batches of 4 full but the last. */
    ck_assert_int_eq(r->n, 7);
    ck_assert_int_eq(r->batches, 2);
    int64_t want[7] = {0, 2, 4, 6, 8, 10, 11}; /* the next good ones, in order */
    for (int i = 0; i < 7; i++) {
        ck_assert_int_eq(r->indices[i], want[i]);
        ck_assert_int_eq(r->labels[i], want[i]);
    }
    ck_assert_uint_eq(r->stats.errors, 6);
    ck_assert_uint_eq(r->stats.errors_by_kind[GF_ENOENT - GF_ENOENT], 1);
    ck_assert_uint_eq(r->stats.errors_by_kind[GF_ENOENT - GF_EIO], 1);
    ck_assert_uint_eq(r->stats.errors_by_kind[GF_ENOENT - GF_EEMPTY], 1);
    ck_assert_uint_eq(r->stats.errors_by_kind[GF_ENOENT - GF_ETOOBIG], 1);
    ck_assert_int_eq(r->stats.n_recent, 6);
    ck_assert_str_eq(r->stats.recent[0].path, "unreadable.png"); /* newest first */
    ck_assert_str_eq(r->stats.recent[1].path, "huge.png");
    /* The callback saw them in sampler order, with paths. */
    ck_assert_int_eq(e.n, 6);
    int64_t bad[6] = {1, 3, 5, 7, 9, 12};
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(e.sample[i], bad[i]);
    ck_assert_int_eq(e.code[5], GF_EIO);
    ck_assert_str_eq(e.path[5], "unreadable.png");
    ck_assert_str_eq(e.path[0], "missing.png");
    ck_assert_int_eq(e.code[0], GF_ENOENT);
    ck_assert_str_eq(e.path[3], "empty.png");
    ck_assert_int_eq(e.code[3], GF_EEMPTY);
    ck_assert_int_eq(e.code[4], GF_ETOOBIG);
    ck_assert(e.code[1] == GF_ETRUNC || e.code[1] == GF_ECORRUPT);
    ck_assert(e.code[2] == GF_EFORMAT || e.code[2] == GF_ECORRUPT);

    /* Same batches for other thread counts, depths and readers. */
    uint64_t h = r->hash;
    for (int t = 1; t <= 6; t += 5)
        for (int io = GF_IO_URING; io <= GF_IO_POSIX; io++) {
            if (!reader_in_case(io, _i))
                continue;
            s.threads = t;
            s.io = (gf_io)io;
            s.prefetch_depth = t;
            e.n = 0;
            run_all(&s, r);
            ck_assert_uint_eq(r->hash, h);
            ck_assert_int_eq(e.n, 6);
        }
    free(r);
    tu_rmrf(dir);
    free(dir);
    free(list);
}
END_TEST

/* What the callback saw, reasons included. */
typedef struct seen_reasons {
    int n;
    int code[16];
    char path[16][64];
    char reason[16][160];
} seen_reasons;

static void on_error_reason(void *user, int64_t sample, const char *path, int code,
                            const char *reason)
{
    (void)sample;
    seen_reasons *e = user;
    if (e->n < 16) {
        e->code[e->n] = code;
        snprintf(e->path[e->n], sizeof e->path[0], "%s", path);
        snprintf(e->reason[e->n], sizeof e->reason[0], "%s", reason);
        e->n++;
    }
}

/* A FIFO, a socket, a directory and links to /dev/zero and to themselves,
 * all named like images, in an ImageFolder (and a list file) beside good
 * files: each is a counted GF_EIO with the kind of file named, read without
 * blocking and without reading /dev/zero, by either reader; on_error = fail
 * stops there. */
START_TEST(non_regular_entries_are_counted_errors_naming_the_kind)
{
    char *dir = tu_mkdtemp();
    char p[4096];
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/a/ok%d.png", dir, i);
        tu_write_png(p, W, H, 3, (uint32_t)i);
    }
    snprintf(p, sizeof p, "%s/a/dir.png/x.txt", dir);
    tu_write_text(p, "not an image");
    snprintf(p, sizeof p, "%s/a/fifo.png", dir);
    ck_assert_int_eq(mkfifo(p, 0644), 0);
    snprintf(p, sizeof p, "%s/a/sock.png", dir);
    int sk = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    ck_assert_uint_lt(strlen(p), sizeof sa.sun_path);
    memcpy(sa.sun_path, p, strlen(p) + 1);
    ck_assert_int_eq(bind(sk, (struct sockaddr *)&sa, sizeof sa), 0);
    close(sk);
    snprintf(p, sizeof p, "%s/a/zero.png", dir);
    ck_assert_int_eq(symlink("/dev/zero", p), 0);
    snprintf(p, sizeof p, "%s/a/loop.png", dir);
    ck_assert_int_eq(symlink("loop.png", p), 0);
    static const char *bad[5] = {"a/dir.png", "a/fifo.png", "a/loop.png", "a/sock.png",
                                 "a/zero.png"};
    static const char *why[5] = {"not a regular file: a directory",
                                 "not a regular file: a FIFO", "symbolic links",
                                 "not a regular file: a socket",
                                 "not a regular file: a character device"};
    for (int io = GF_IO_URING; io <= GF_IO_POSIX; io++) {
        if (!reader_in_case(io, _i))
            continue;
        gf_settings s;
        seen_reasons e = {0};
        tu_exact_settings(&s, dir, W, H);
        s.io = (gf_io)io;
        s.on_sample_error = on_error_reason;
        s.on_sample_error_user = &e;
        run_result *r = malloc(sizeof *r);
        run_all(&s, r);
        ck_assert_int_eq(r->n, 3);
        ck_assert_uint_eq(r->stats.dataset_samples, 8);
        ck_assert_uint_eq(r->stats.errors, 5);
        ck_assert_uint_eq(r->stats.errors_by_kind[GF_ENOENT - GF_EIO], 5);
        ck_assert_uint_lt(r->stats.bytes_read, 1u << 20); /* not /dev/zero's */
        ck_assert_int_eq(e.n, 5);
        for (int i = 0; i < 5; i++) {
            ck_assert_str_eq(e.path[i], bad[i]);
            ck_assert_int_eq(e.code[i], GF_EIO);
            ck_assert_msg(strstr(e.reason[i], why[i]), "%s: %s", e.path[i], e.reason[i]);
        }

        /* The same entries through a list file: the same errors. */
        char list[4096];
        snprintf(list, sizeof list, "%s/list.txt", dir);
        tu_write_text(list, "a/ok0.png 0\na/dir.png 0\na/fifo.png 0\na/loop.png 0\n"
                            "a/sock.png 0\na/zero.png 0\na/ok1.png 0\n");
        e.n = 0;
        s.data = list;
        run_all(&s, r);
        ck_assert_int_eq(r->n, 2);
        ck_assert_uint_eq(r->stats.errors_by_kind[GF_ENOENT - GF_EIO], 5);
        ck_assert_int_eq(e.n, 5);
        for (int i = 0; i < 5; i++)
            ck_assert_msg(strstr(e.reason[i], why[i]), "list %s: %s", e.path[i], e.reason[i]);
        free(r);
        s.data = dir;

        s.on_error = GF_ON_ERROR_FAIL;
        s.on_sample_error = NULL;
        gf_loader *l = open_ok(&s);
        gf_batch *b;
        ck_assert_int_eq(gf_next(l, &b), GF_EIO); /* the first batch holds dir.png */
        ck_assert_msg(strstr(gf_last_error(l), "a/dir.png"), "%s", gf_last_error(l));
        gf_close(&l);
    }
    tu_rmrf(dir);
    free(dir);
}
END_TEST

#if GF_HAVE_TURBO
/* A JPEG with a stray marker mid-scan: STRICT (the default) makes it a
 * counted GF_ECORRUPT naming libjpeg's warning; LENIENT delivers it,
 * counts the warning, and names it (on_sample_warning, gf_recent_warnings)
 * with the reason STRICT would have given. */
START_TEST(strictness_decides_a_warned_jpeg_and_lenient_counts_it)
{
    char *dir = tu_mkdtemp();
    char p[4096];
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/a/ok%d.jpg", dir, i);
        tu_write_jpg(p, 64, 48, 3, (uint32_t)i, 90);
    }
    snprintf(p, sizeof p, "%s/a/ok1.jpg", dir);
    size_t len;
    uint8_t *jpg = tu_read_file(p, &len);
    size_t s0 = 0;
    for (size_t i = 2; i + 3 < len && !s0; i++)
        if (jpg[i] == 0xff && jpg[i + 1] == 0xda)
            s0 = i + 2 + ((size_t)jpg[i + 2] << 8 | jpg[i + 3]);
    ck_assert_uint_gt(s0, 0);
    jpg[s0 + (len - s0) / 2] = 0xff;
    jpg[s0 + (len - s0) / 2 + 1] = 0xd3;
    tu_write_file(p, jpg, len);
    free(jpg);
    for (int m = GF_STRICT; m <= GF_STRICT_WHOLE; m++) {
        gf_settings s;
        seen_reasons e = {0}, w = {0};
        tu_exact_settings(&s, dir, W, H);
        s.width = 64;
        s.height = 48;
        s.strictness = (gf_strictness)m;
        s.on_sample_error = on_error_reason;
        s.on_sample_error_user = &e;
        s.on_sample_warning = on_error_reason;
        s.on_sample_warning_user = &w;
        run_result *r = malloc(sizeof *r);
        run_all(&s, r);
        if (m == GF_LENIENT) {
            ck_assert_int_eq(r->n, 3);
            ck_assert_uint_eq(r->stats.errors, 0);
            ck_assert_uint_eq(r->stats.decode_warnings, 1);
            ck_assert_int_eq(e.n, 0);
            ck_assert_int_eq(w.n, 1);
            ck_assert_str_eq(w.path[0], "a/ok1.jpg");
            ck_assert_int_eq(w.code[0], GF_ECORRUPT);
            ck_assert_msg(strstr(w.reason[0], "corrupt JPEG data: "), "%s", w.reason[0]);

            s.on_sample_warning = NULL;
            gf_loader *l = open_ok(&s);
            gf_batch *b;
            while (gf_next(l, &b) == 0)
                gf_release(l, b);
            gf_sample_error rw[GF_RECENT_WARNINGS + 1];
            ck_assert_int_eq(gf_recent_warnings(l, rw, GF_RECENT_WARNINGS + 1), 1);
            ck_assert_int_eq(gf_recent_warnings(l, rw, 0), 0);
            ck_assert_int_eq(gf_recent_warnings(l, NULL, 1), GF_EINVAL);
            ck_assert_int_eq(gf_recent_warnings(l, rw, 1), 1);
            ck_assert_str_eq(rw[0].path, "a/ok1.jpg");
            ck_assert_int_eq(rw[0].code, GF_ECORRUPT);
            ck_assert_msg(strstr(rw[0].reason, "corrupt JPEG data: "), "%s", rw[0].reason);
            gf_close(&l);
        } else {
            ck_assert_int_eq(w.n, 0);
            ck_assert_int_eq(r->n, 2);
            ck_assert_uint_eq(r->stats.errors, 1);
            ck_assert_uint_eq(r->stats.decode_warnings, 0);
            ck_assert_int_eq(e.n, 1);
            ck_assert_str_eq(e.path[0], "a/ok1.jpg");
            ck_assert_int_eq(e.code[0], GF_ECORRUPT);
            ck_assert_msg(strstr(e.reason[0], "corrupt JPEG data: "), "%s", e.reason[0]);
        }
        free(r);
    }
    tu_rmrf(dir);
    free(dir);
}
END_TEST
#endif

START_TEST(bad_samples_with_shuffle_are_deterministic_and_resumable)
{
    char *list;
    char *dir = bad_list(&list);
    gf_settings s;
    seen_errors e = {0};
    bad_settings(&s, list, &e);
    s.shuffle = 1;
    s.seed = 5;
    s.batch_size = 3;
    s.epochs = 2;
    uint64_t hashes[16], epochs[16], positions[16];
    int n = 0;
    gf_loader *l = open_ok(&s);
    gf_batch *b;
    int good = 0;
    while (gf_next(l, &b) == 0) {
        hashes[n] = gf__fnv1a64(0, b->indices, (size_t)b->count * 8);
        epochs[n] = b->epoch;
        positions[n] = b->position;
        for (int i = 0; i < b->count; i++)
            ck_assert_int_eq(b->indices[i] % 2 == 0 || b->indices[i] == 11, 1);
        good += b->count;
        n++;
        gf_release(l, b);
    }
    gf_close(&l);
    ck_assert_int_eq(good, 14);
    for (int k = 0; k < n - 1; k++) {
        l = open_ok(&s);
        ck_assert_int_eq(gf_seek(l, epochs[k], positions[k]), 0);
        for (int j = k + 1; j < n; j++) {
            ck_assert_int_eq(gf_next(l, &b), 0);
            ck_assert_msg(gf__fnv1a64(0, b->indices, (size_t)b->count * 8) == hashes[j],
                          "resume after batch %d: batch %d differs", k, j);
            gf_release(l, b);
        }
        ck_assert_int_eq(gf_next(l, &b), GF_EOF);
        gf_close(&l);
    }
    tu_rmrf(dir);
    free(dir);
    free(list);
}
END_TEST

START_TEST(on_error_fail_names_the_sample_after_the_good_batches)
{
    char *list;
    char *dir = bad_list(&list);
    gf_settings s;
    seen_errors e = {0};
    bad_settings(&s, list, &e);
    s.on_error = GF_ON_ERROR_FAIL;
    s.batch_size = 1;
    gf_loader *l = open_ok(&s);
    gf_batch *b;
    ck_assert_int_eq(gf_next(l, &b), 0);
    ck_assert_int_eq(b->indices[0], 0);
    gf_release(l, b);
    ck_assert_int_eq(gf_next(l, &b), GF_ENOENT);
    ck_assert_ptr_null(b);
    ck_assert_ptr_nonnull(strstr(gf_last_error(l), "missing.png"));
    ck_assert_ptr_nonnull(strstr(gf_last_error(l), "sample 1"));
    ck_assert_int_eq(gf_next(l, &b), GF_ENOENT); /* sticky */
    ck_assert_int_eq(gf_seek(l, 0, 2), 0);       /* past it */
    ck_assert_int_eq(gf_next(l, &b), 0);
    ck_assert_int_eq(b->indices[0], 2);
    gf_release(l, b);
    int rc = gf_next(l, &b);
    ck_assert(rc == GF_ETRUNC || rc == GF_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(gf_last_error(l), "trunc.png"));
    gf_close(&l);
    tu_rmrf(dir);
    free(dir);
    free(list);
}
END_TEST

/* The observers from other threads while the controller writes the
 * message of a failing batch (on_error = fail), and from the error
 * callback on the controller itself: gf_last_error is a copy taken under
 * the loader's lock each time (TSan names the race otherwise). */
typedef struct error_watch {
    gf_loader *l;
    atomic_int stop;
    atomic_int named; /* a reader saw the failure's message */
    int in_callback;  /* the callback's observer calls that returned */
} error_watch;

static void *watch_last_error(void *arg)
{
    error_watch *w = arg;
    while (!atomic_load(&w->stop)) {
        const char *m = gf_last_error(w->l);
        if (strstr(m, "missing.png") && strstr(m, "sample 1"))
            atomic_store(&w->named, 1);
    }
    return NULL;
}

static void observe_from_callback(void *user, int64_t sample, const char *path, int code,
                                  const char *reason)
{
    (void)sample, (void)path, (void)code, (void)reason;
    error_watch *w = user;
    gf_stats st;
    if (gf_get_stats(w->l, &st) == 0 && strlen(gf_last_error(w->l)) < 512)
        w->in_callback++;
}

START_TEST(last_error_may_be_read_from_any_thread_while_the_loader_halts)
{
    char *list;
    char *dir = bad_list(&list);
    gf_settings s;
    seen_errors e = {0};
    bad_settings(&s, list, &e);
    s.on_error = GF_ON_ERROR_FAIL;
    s.batch_size = 1;
    s.threads = 4;
    for (int round = 0; round < 8; round++) {
        error_watch w = {0};
        s.on_sample_error = observe_from_callback;
        s.on_sample_error_user = &w;
        /* gf_open sets w.l before it starts a thread. */
        ck_assert_int_eq(gf_open(&w.l, &s), 0);
        pthread_t t[2];
        for (int i = 0; i < 2; i++)
            ck_assert_int_eq(pthread_create(&t[i], NULL, watch_last_error, &w), 0);
        gf_batch *b;
        int rc;
        while ((rc = gf_next(w.l, &b)) == 0)
            gf_release(w.l, b);
        ck_assert_int_eq(rc, GF_ENOENT);
        ck_assert_ptr_nonnull(strstr(gf_last_error(w.l), "missing.png"));
        while (!atomic_load(&w.named)) /* a reader's next copy has it */
            sched_yield();
        atomic_store(&w.stop, 1);
        for (int i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
        gf_close(&w.l);
        ck_assert_int_ge(w.in_callback, 1);
    }
    tu_rmrf(dir);
    free(dir);
    free(list);
}
END_TEST

/* An epoch that delivers nothing would do so forever with unbounded
 * epochs: gf_next says so, naming a sample and its reason, instead of
 * spinning through the data. Bounded or not, the same error. */
START_TEST(an_all_bad_data_set_is_an_error_not_an_endless_loop)
{
    char *dir = tu_mkdtemp();
    char p[4096];
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "%s/c/%d.jpg", dir, i);
        tu_write_text(p, "garbage");
    }
    for (int epochs = 0; epochs <= 2; epochs += 2) {
        gf_settings s;
        tu_exact_settings(&s, dir, W, H);
        s.epochs = (uint64_t)epochs;
        gf_loader *l = open_ok(&s);
        gf_batch *b = NULL;
        ck_assert_int_eq(gf_next(l, &b), GF_EDATASET);
        ck_assert_ptr_null(b);
        const char *msg = gf_last_error(l);
        /* The last error met may be from the epoch prefetched after it. */
        ck_assert_msg(strstr(msg, "epoch 0 delivered no batch: none of its 5 samples") &&
                          strstr(msg, ".jpg: not an image of a known format"),
                      "%s", msg);
        gf_stats st;
        gf_get_stats(l, &st);
        ck_assert_uint_ge(st.errors, 5); /* and what prefetching met after */
        ck_assert_uint_eq(st.batches, 0);
        ck_assert_int_eq(gf_next(l, &b), GF_EDATASET); /* it stays failed */
        gf_close(&l);
    }
    tu_rmrf(dir);
    free(dir);
}
END_TEST

/* drop_last with a share under one batch would drop every batch. */
START_TEST(drop_last_with_a_share_under_a_batch_is_refused)
{
    gf_settings s;
    tu_exact_settings(&s, root, W, H);
    s.drop_last = 1;
    s.world = 2;
    s.rank = 1;
    s.batch_size = N / 2 + 1;
    gf_loader *l = NULL;
    ck_assert_int_eq(gf_open(&l, &s), GF_EINVAL);
    ck_assert_msg(strstr(gf_last_error(l), "drop_last drops every batch") != NULL, "%s",
                  gf_last_error(l));
    gf_close(&l);
    s.batch_size = N / 2; /* a share of 10: one batch */
    l = open_ok(&s);
    gf_close(&l);
}
END_TEST

/* ------------------------------------------------ the host "device" */

/* All batches of a run, concatenated: data bytes, labels. */
typedef struct blob {
    uint8_t *data;
    size_t len;
    int32_t labels[N * 4];
    int n;
} blob;

static void collect(const gf_settings *s, blob *o)
{
    memset(o, 0, sizeof *o);
    gf_loader *l = open_ok(s);
    gf_batch *b;
    while (gf_next(l, &b) == 0) {
        ck_assert_int_eq(b->device, GF_DEVICE_CPU);
        ck_assert_ptr_null(b->ready_event);
        ck_assert_int_eq(b->dtype, s->dtype);
        ck_assert_int_eq(gf_batch_wait(b, NULL), 0);
        size_t n = (size_t)b->count * b->height * b->width * b->channels * gf_dtype_size(b->dtype);
        o->data = realloc(o->data, o->len + n);
        memcpy(o->data + o->len, b->data, n);
        o->len += n;
        memcpy(o->labels + o->n, b->labels, (size_t)b->count * sizeof *b->labels);
        o->n += b->count;
        ck_assert_int_eq(gf_release_stream(l, b, NULL), 0);
    }
    gf_stats st;
    gf_get_stats(l, &st);
    ck_assert_int_eq(st.device, GF_DEVICE_CPU);
    ck_assert_int_eq(st.device_id, -1);
    if (s->dtype != GF_DTYPE_UINT8)
        ck_assert(st.convert_busy_s > 0);
    gf_close(&l);
}

static void device_settings(gf_settings *s, const char *data)
{
    gf_default_settings(s);
    s->data = data;
    s->width = 10;
    s->height = 8;
    s->batch_size = 4;
    s->seed = 17;
    s->epochs = 2;
    s->threads = 3;
    s->device = GF_DEVICE_CPU;
}

START_TEST(converted_batches_are_the_cpu_twin_of_the_uint8_ones)
{
    gf_settings s;
    device_settings(&s, root);
    blob *u8 = malloc(sizeof *u8), *f = malloc(sizeof *f);
    collect(&s, u8);
    ck_assert_int_eq(u8->n, 2 * N);
    gf_dtype dtypes[] = {GF_DTYPE_FLOAT32, GF_DTYPE_FLOAT16, GF_DTYPE_BFLOAT16};
    for (int d = 0; d < 3; d++)
        for (int lay = 0; lay < 2; lay++) {
            s.dtype = dtypes[d];
            s.layout = (gf_layout)lay;
            for (int c = 0; c < 3; c++) {
                s.mean[c] = 100.0f + 20.0f * c;
                s.std[c] = 50.0f + 5.0f * c;
            }
            collect(&s, f);
            gf__convert cv;
            gf__convert_init(&cv, &s);
            size_t sb = gf__convert_sample_bytes(&cv);
            ck_assert_uint_eq(f->len, sb * (size_t)u8->n);
            uint8_t *want = malloc(f->len);
            gf__convert_cpu(&cv, u8->data, want, NULL, 0, u8->n);
            ck_assert_msg(memcmp(want, f->data, f->len) == 0, "dtype %d layout %d differ", d, lay);
            ck_assert(memcmp(u8->labels, f->labels, (size_t)u8->n * 4) == 0);
            free(want);
            free(f->data);
        }
    free(u8->data);
    free(u8);
    free(f);
}
END_TEST

START_TEST(flipping_on_the_device_gives_the_same_bytes)
{
    gf_settings s;
    device_settings(&s, root);
    blob *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    collect(&s, a);
    s.flip_on_device = 1;
    collect(&s, b);
    ck_assert_uint_eq(a->len, b->len);
    ck_assert(memcmp(a->data, b->data, a->len) == 0);
    free(b->data);
    s.dtype = GF_DTYPE_FLOAT32;
    s.layout = GF_LAYOUT_NCHW;
    collect(&s, b);
    gf__convert cv;
    gf__convert_init(&cv, &s);
    uint8_t *want = malloc(b->len);
    gf__convert_cpu(&cv, a->data, want, NULL, 0, a->n);
    ck_assert(memcmp(want, b->data, b->len) == 0);
    free(want);
    free(a->data);
    free(b->data);
    free(a);
    free(b);
}
END_TEST

START_TEST(auto_without_a_gpu_runs_on_the_cpu_and_says_why)
{
    gf_settings s;
    device_settings(&s, root);
    s.device = GF_DEVICE_AUTO;
    gf_loader *l = open_ok(&s);
    gf_stats st;
    gf_get_stats(l, &st);
    if (st.device == GF_DEVICE_CUDA) { /* a GPU machine: the gpu suite covers it */
        gf_close(&l);
        return;
    }
    ck_assert_int_eq(st.device, GF_DEVICE_CPU);
    ck_assert_msg(strstr(st.device_note, "CPU path") != NULL, "note: %s", st.device_note);
    ck_assert_uint_eq(st.pinned_bytes, 0);
    gf_close(&l);
    s.device = GF_DEVICE_CUDA;
    ck_assert_int_eq(gf_open(&l, &s), GF_ENODEV);
    ck_assert(gf_last_error(l)[0] != '\0');
    gf_close(&l);
    ck_assert_uint_eq(gf_dtype_size(GF_DTYPE_FLOAT16), 2);
    ck_assert_uint_eq(gf_dtype_size((gf_dtype)9), 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Samples by index: gf_read_sample, gf_sample_path, gf_sample_label. */

static void tar_save(tu_tar *w, const char *path)
{
    tu_tar_end(w);
    tu_write_file(path, w->p, w->len);
    free(w->p);
    memset(w, 0, sizeof *w);
}

/* The fixture's image (class k, index i): its bytes, for use as a member. */
static uint8_t *fixture_image(int k, int i, size_t *len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/class_%d/img_%03d.png", root, k, i);
    uint8_t *b = tu_read_file(path, len);
    ck_assert_ptr_nonnull(b);
    return b;
}

START_TEST(read_sample_on_a_folder_gives_each_files_bytes_path_and_label)
{
    gf_settings s;
    tu_exact_settings(&s, root, W, H);
    gf_loader *l = open_ok(&s);
    gf_stats st;
    ck_assert_int_eq(gf_get_stats(l, &st), 0);
    ck_assert_uint_eq(st.dataset_samples, N);
    ck_assert_uint_eq(st.shards, 0);
    ck_assert_uint_eq(st.shard_members_skipped + st.shard_keys_skipped + st.dataset_warnings, 0);
    ck_assert_str_eq(st.dataset_warning, "");
    for (uint64_t i = 0; i < N; i++) {
        int k = (int)(i / PER_CLASS), j = (int)(i % PER_CLASS);
        char want[64];
        snprintf(want, sizeof want, "class_%d/img_%03d.png", k, j);
        ck_assert_str_eq(gf_sample_path(l, i), want);
        ck_assert_int_eq(gf_sample_label(l, i), k);
        size_t flen;
        uint8_t *file = fixture_image(k, j, &flen);
        void *data = (void *)1;
        size_t len = 0;
        char why[256] = "x";
        ck_assert_int_eq(gf_read_sample(l, i, &data, &len, why, sizeof why), 0);
        ck_assert_str_eq(why, "");
        ck_assert_uint_eq(len, flen);
        ck_assert_mem_eq(data, file, flen);
        gf_free(data);
        free(file);
    }
    /* Out of range: nothing allocated, the index named. */
    void *data = (void *)1;
    size_t len = 7;
    char why[256];
    ck_assert_int_eq(gf_read_sample(l, N, &data, &len, why, sizeof why), GF_EINVAL);
    ck_assert_ptr_null(data);
    ck_assert_uint_eq(len, 0);
    ck_assert_msg(strstr(why, "21") != NULL, "%s", why);
    ck_assert_int_eq(gf_read_sample(l, UINT64_MAX, &data, &len, NULL, 0), GF_EINVAL);
    ck_assert_int_eq(gf_read_sample(l, 0, NULL, &len, NULL, 0), GF_EINVAL);
    ck_assert_int_eq(gf_read_sample(NULL, 0, &data, &len, NULL, 0), GF_EINVAL);
    ck_assert_ptr_null(gf_sample_path(l, N));
    ck_assert_ptr_null(gf_sample_path(NULL, 0));
    ck_assert_int_eq(gf_sample_label(l, N), GF_EINVAL);
    /* Class names are the folders'; the index hash is stable and not 0. */
    ck_assert_int_eq(gf_class_count(l), st.classes);
    for (int k = 0; k < st.classes; k++) {
        char want[32];
        snprintf(want, sizeof want, "class_%d", k);
        ck_assert_str_eq(gf_class_name(l, k), want);
    }
    ck_assert_ptr_null(gf_class_name(l, st.classes));
    ck_assert_ptr_null(gf_class_name(l, -1));
    ck_assert_ptr_null(gf_class_name(NULL, 0));
    uint64_t h = gf_index_hash(l);
    ck_assert_uint_ne(h, 0);
    ck_assert_uint_eq(gf_index_hash(l), h);
    ck_assert_uint_eq(gf_index_hash(NULL), 0);
    /* A file that went bad after indexing: the sample's error, named. */
    char path[4096];
    snprintf(path, sizeof path, "%s/class_1/img_002.png", root);
    tu_write_file(path, "", 0);
    ck_assert_int_eq(gf_read_sample(l, PER_CLASS + 2, &data, &len, why, sizeof why), GF_EEMPTY);
    ck_assert_ptr_null(data);
    ck_assert_msg(strncmp(why, "class_1/img_002.png: ", 21) == 0, "%s", why);
    gf_close(&l);
}
END_TEST

START_TEST(read_sample_on_shards_gives_each_members_bytes_and_stats_count_what_was_skipped)
{
    /* s-0.tar: a (png + cls), a symlink member, b; s-1.tar: c without a
     * label (a skipped key), d. */
    size_t la, lb, lc, ld;
    uint8_t *ia = fixture_image(0, 0, &la), *ib = fixture_image(1, 1, &lb);
    uint8_t *ic = fixture_image(2, 2, &lc), *id = fixture_image(2, 3, &ld);
    char p0[4096], p1[4096], src[4096];
    snprintf(p0, sizeof p0, "%s/s-0.tar", root);
    snprintf(p1, sizeof p1, "%s/s-1.tar", root);
    snprintf(src, sizeof src, "%s/s-{0..1}.tar", root);
    tu_tar w = {0};
    tu_tar_file(&w, "a.png", ia, la);
    tu_tar_file(&w, "a.cls", "0", 1);
    tu_tar_header(&w, "link.png", '2', 0, NULL);
    tu_tar_file(&w, "b.cls", "1\n", 2);
    tu_tar_file(&w, "b.png", ib, lb);
    tar_save(&w, p0);
    tu_tar_file(&w, "c.png", ic, lc);
    tu_tar_file(&w, "d.png", id, ld);
    size_t d_at = tu_tar_file(&w, "d.cls", "2", 1) - 512 - ((ld + 511) / 512) * 512;
    tar_save(&w, p1);

    gf_settings s;
    tu_exact_settings(&s, src, W, H);
    gf_loader *l = open_ok(&s);
    gf_stats st;
    ck_assert_int_eq(gf_get_stats(l, &st), 0);
    ck_assert_uint_eq(st.dataset_samples, 3);
    ck_assert_uint_eq(st.shards, 2);
    ck_assert_uint_eq(st.shard_members_skipped, 1);
    ck_assert_uint_eq(st.shard_keys_skipped, 1);
    ck_assert_uint_ge(st.dataset_warnings, 2);
    ck_assert_msg(strstr(st.dataset_warning, "link.png") != NULL, "%s", st.dataset_warning);

    const char *names[3] = {"s-0.tar:a.png", "s-0.tar:b.png", "s-1.tar:d.png"};
    const uint8_t *bytes[3] = {ia, ib, id};
    const size_t lens[3] = {la, lb, ld};
    const int32_t labels[3] = {0, 1, 2};
    for (uint64_t i = 0; i < 3; i++) {
        ck_assert_str_eq(gf_sample_path(l, i), names[i]);
        ck_assert_int_eq(gf_sample_label(l, i), labels[i]);
        ck_assert_ptr_null(gf_class_name(l, labels[i])); /* shards' labels are numbers */
        void *data;
        size_t len;
        char why[256];
        ck_assert_msg(gf_read_sample(l, i, &data, &len, why, sizeof why) == 0, "%s", why);
        ck_assert_uint_eq(len, lens[i]);
        ck_assert_mem_eq(data, bytes[i], len);
        gf_free(data);
    }
    void *data;
    size_t len;
    char why[256];
    ck_assert_int_eq(gf_read_sample(l, 3, &data, &len, why, sizeof why), GF_EINVAL);
    ck_assert_ptr_null(gf_sample_path(l, 3));

    /* The shard cut inside d's image after indexing: truncated, named. */
    ck_assert_int_eq(truncate(p1, (off_t)(d_at + ld / 2)), 0);
    ck_assert_int_eq(gf_read_sample(l, 2, &data, &len, why, sizeof why), GF_ETRUNC);
    ck_assert_ptr_null(data);
    ck_assert_msg(strncmp(why, "s-1.tar:d.png: ", 15) == 0, "%s", why);
    gf_close(&l);
    free(ia);
    free(ib);
    free(ic);
    free(id);
}
END_TEST

/* A prepared raw set (issue 27): each source downscaled by the library
 * (gf_decoder_decode_fit, as `gpufeed prepare` does) and stored as a
 * binary PPM, or PGM when prepared grey, with its label. The loader reads
 * those members in place (decode_pnm_raw.c); its batches must hold, for
 * every transform, output channel count, dtype and layout, exactly what
 * decoding the same downscaled image from memory gives (a PNG of it,
 * through gf_decode_image), converted by the CPU twin. */
START_TEST(a_prepared_raw_set_gives_the_pixels_of_its_images_decoded_from_memory)
{
    enum { FILES = 7, MAX_SIDE = 64 };
    static const int src_size[FILES][2] = {{160, 120}, {120, 160}, {50, 40}, {201, 77},
                                           {64, 64},   {300, 9},   {3, 200}};
    char *dir = tu_mkdtemp(), shard[4096];
    snprintf(shard, sizeof shard, "%s/train-000000.tar", dir);
    uint8_t *png[FILES];
    size_t png_len[FILES];
    tu_tar w = {0};
    for (int i = 0; i < FILES; i++) {
        int sw = src_size[i][0], sh = src_size[i][1], c = i % 3 == 2 ? 1 : 3;
        uint8_t *px = malloc((size_t)sw * sh * 3);
        tu_fill_smooth(px, sw, sh, 3, (uint32_t)(40 + i));
        size_t len;
        uint8_t *src = tu_png_mem(px, sw, sh, 3, &len);
        gf_settings ps;
        tu_cpu_settings(&ps);
        ps.channels = c;
        gf_decoder *g;
        ck_assert_int_eq(gf_decoder_open(&g, &ps), 0);
        const uint8_t *fit;
        int fw, fh;
        char why[256];
        ck_assert_int_eq(gf_decoder_decode_fit(g, src, len, MAX_SIDE, &fit, &fw, &fh, NULL, NULL,
                                               why, sizeof why), 0);
        char head[48], name[32];
        int hn = snprintf(head, sizeof head, "P%c\n%d %d\n255\n", c == 1 ? '5' : '6', fw, fh);
        size_t body = (size_t)fw * fh * c;
        uint8_t *member = malloc((size_t)hn + body);
        memcpy(member, head, (size_t)hn);
        memcpy(member + hn, fit, body);
        snprintf(name, sizeof name, "k%02d.%s", i, c == 1 ? "pgm" : "ppm");
        tu_tar_file(&w, name, member, (size_t)hn + body);
        snprintf(name, sizeof name, "k%02d.cls", i);
        tu_tar_file(&w, name, "1", 1);
        png[i] = tu_png_mem(fit, fw, fh, c, &png_len[i]);
        free(member);
        gf_decoder_close(&g);
        free(src);
        free(px);
    }
    tar_save(&w, shard);
    static const gf_dtype dtypes[] = {GF_DTYPE_UINT8, GF_DTYPE_FLOAT32, GF_DTYPE_FLOAT16,
                                      GF_DTYPE_BFLOAT16};
    int checked = 0;
    for (int tr = 0; tr < 2; tr++)
        for (int ch = 1; ch <= 4; ch++)
            for (int dt = 0; dt < 4; dt++) {
                if (ch == 2)
                    continue;
                gf_settings s;
                tu_cpu_settings(&s);
                s.data = shard;
                s.width = 40;
                s.height = 32;
                s.channels = ch;
                s.transform = tr ? GF_TRANSFORM_TRAIN : GF_TRANSFORM_EVAL;
                s.batch_size = 3;
                s.threads = 2;
                s.epochs = 2;
                s.seed = 7;
                s.dtype = dtypes[dt];
                s.layout = (gf_layout)(dt & 1);
                s.flip_on_device = dt == 2; /* the flip left to the conversion */
                for (int c = 0; c < ch; c++) {
                    s.mean[c] = 90.0f + 10.0f * c;
                    s.std[c] = 60.0f - 5.0f * c;
                }
                gf__convert cv;
                gf__convert_init(&cv, &s);
                size_t hwc = (size_t)s.width * s.height * ch, sb = gf__convert_sample_bytes(&cv);
                uint8_t *px = malloc(hwc), *want = malloc(sb);
                gf_loader *l = open_ok(&s);
                gf_batch *b;
                int rc;
                while ((rc = gf_next(l, &b)) == 0) {
                    for (int i = 0; i < b->count; i++, checked++) {
                        int64_t k = b->indices[i];
                        char why[256];
                        ck_assert_int_eq(gf_decode_image(&s, png[k], png_len[k], b->epoch,
                                                         (uint64_t)k, px, why, sizeof why), 0);
                        gf__convert_cpu(&cv, px, want, NULL, 0, 1);
                        ck_assert_msg(memcmp((uint8_t *)b->data + sb * i, want, sb) == 0,
                                      "%s, %d channels, dtype %d: sample %lld of epoch %llu "
                                      "differs", tr ? "train" : "eval", ch, dt, (long long)k,
                                      (unsigned long long)b->epoch);
                        ck_assert_int_eq(b->labels[i], 1);
                    }
                    gf_release(l, b);
                }
                ck_assert_msg(rc == GF_EOF, "%s", gf_last_error(l));
                gf_stats st;
                gf_get_stats(l, &st);
                ck_assert_uint_eq(st.errors, 0);
                ck_assert_uint_eq(st.decoded_stb, 2 * FILES); /* the raw path counts there */
                gf_close(&l);
                free(px);
                free(want);
            }
    ck_assert_int_eq(checked, 2 * 3 * 4 * 2 * FILES);
    for (int i = 0; i < FILES; i++)
        free(png[i]);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

#if GF_HAVE_TURBO
/* Waits (polling) until a decode is held past GF__JPEG_LONG_SCANS scans
 * (gf__jpeg_hold is set). */
static void wait_for_a_held_decode(void)
{
    for (int i = 0; i < 60000 && atomic_load(&gf__jpeg_held) == 0; i++)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    ck_assert_uint_eq(atomic_load(&gf__jpeg_held), 1);
}

/* A folder of `files` copies of one flat side x side JPEG of 499 scans
 * (under the cap: long enough for the hold), and a one-thread loader's
 * settings for it (8x8, batches of 2, one epoch). Returns the folder. */
static char *long_scan_set(int files, int side, gf_settings *s)
{
    uint8_t *px = malloc((size_t)side * side * 3);
    for (size_t i = 0; i < (size_t)side * side * 3; i++)
        px[i] = (uint8_t)(90 + 30 * (i % 3)); /* flat: small scans, each a pass */
    size_t n;
    uint8_t *jpg = tu_jpeg_scans(px, side, side, GF__JPEG_MAX_SCANS - 1, &n);
    char *dir = tu_mkdtemp(), path[4096];
    for (int i = 0; i < files; i++) {
        snprintf(path, sizeof path, "%s/c/%02d.jpg", dir, i);
        tu_write_file(path, jpg, n);
    }
    free(jpg);
    free(px);
    tu_cpu_settings(s);
    s->data = dir;
    s->width = s->height = 8;
    s->threads = 1;
    s->autotune = 0;
    s->batch_size = 2;
    s->epochs = 1;
    return dir;
}

/* gf_close and gf_seek do not wait out a long decode: the flag they
 * raise ends the one in progress (counted), its result is dropped (no
 * error counted), and after a seek the same files decode in full. One
 * thread, 499-scan files (under the cap); the hook holds a decode past
 * its 100th scan, so one is surely in progress when the loader stops. */
START_TEST(close_and_seek_cancel_a_decode_in_progress)
{
    gf_settings s;
    char *dir = long_scan_set(24, 1024, &s);
    s.prefetch_depth = 4;
    unsigned cancels = atomic_load(&gf__decode_cancels);
    atomic_store(&gf__jpeg_hold, 1);
    gf_loader *l = open_ok(&s);
    wait_for_a_held_decode();
    ck_assert_int_eq(gf_seek(l, 0, 0), 0);
    ck_assert_uint_eq(atomic_load(&gf__decode_cancels), cancels + 1);
    atomic_store(&gf__jpeg_hold, 0);
    gf_batch *b;
    ck_assert_int_eq(gf_next(l, &b), 0); /* decodes in full again */
    ck_assert_int_eq(b->count, 2);
    gf_stats st;
    gf_get_stats(l, &st);
    ck_assert_uint_eq(st.errors, 0);

    atomic_store(&gf__jpeg_hold, 1);
    ck_assert_int_eq(gf_release(l, b), 0); /* room: a decode starts, or goes on */
    wait_for_a_held_decode();
    gf_close(&l);
    ck_assert_uint_eq(atomic_load(&gf__decode_cancels), cancels + 2);
    atomic_store(&gf__jpeg_hold, 0);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

/* While no batch can be ready (the one decode thread is held), a poll and
 * a short wait return GF_EAGAIN and change nothing; once the decode goes
 * on, slices of waiting deliver every batch in order, none lost. */
START_TEST(a_timed_next_that_runs_out_takes_nothing)
{
    enum { FILES = 6 };
    gf_settings s;
    char *dir = long_scan_set(FILES, 256, &s);
    s.shuffle = 0;
    s.prefetch_depth = 2;
    atomic_store(&gf__jpeg_hold, 1);
    gf_loader *l = open_ok(&s);
    wait_for_a_held_decode();
    gf_state before, after;
    ck_assert_int_eq(gf_get_state(l, &before), 0);
    gf_batch dummy, *b = &dummy; /* the call must clear it */
    ck_assert_int_eq(gf_next_timed(l, &b, 0), GF_EAGAIN);
    ck_assert_ptr_null(b);
    ck_assert_int_eq(gf_next_timed(l, &b, 20 * 1000 * 1000), GF_EAGAIN);
    ck_assert_ptr_null(b);
    ck_assert_int_eq(gf_get_state(l, &after), 0);
    ck_assert_uint_eq(after.epoch, before.epoch);
    ck_assert_uint_eq(after.position, before.position);
    ck_assert_str_eq(gf_last_error(l), "");
    gf_stats st;
    gf_get_stats(l, &st);
    ck_assert_uint_eq(st.batches, 0);

    atomic_store(&gf__jpeg_hold, 0);
    int rc, got = 0;
    for (;;) {
        rc = gf_next_timed(l, &b, 1000 * 1000);
        if (rc == GF_EAGAIN)
            continue;
        if (rc < 0)
            break;
        for (int i = 0; i < b->count; i++)
            ck_assert_int_eq(b->indices[i], got + i);
        got += b->count;
        ck_assert_int_eq(gf_release(l, b), 0);
    }
    ck_assert_int_eq(rc, GF_EOF);
    ck_assert_int_eq(got, FILES);
    ck_assert_int_eq(gf_next_timed(l, &b, 0), GF_EOF); /* the end stays the end */
    gf_close(&l);
    tu_rmrf(dir);
    free(dir);
}
END_TEST
#endif

static int ends_with(const char *s, const char *end)
{
    size_t n = strlen(s), k = strlen(end);
    return n >= k && strcmp(s + n - k, end) == 0;
}

/* dir, then 200-byte directory names up to about `len` bytes, then name. */
static void long_path(char *out, size_t cap, const char *dir, size_t len, const char *name)
{
    size_t at = (size_t)snprintf(out, cap, "%s", dir);
    while (at < len)
        at += (size_t)snprintf(out + at, cap - at, "/%0199d", 7);
    snprintf(out + at, cap - at, "/%s", name);
}

/* A 4000-byte path gives way in its middle, never the reason: the
 * message ends with it and still names the file and where the path
 * starts. So do a bad sample's path (256 bytes) and the message that
 * ends an epoch of bad samples. */
START_TEST(a_long_path_keeps_the_reason_and_the_files_name)
{
    char *dir = tu_mkdtemp(), path[4300], rel[4300], list[4400];
    long_path(path, sizeof path, dir, 4000, "missing-list.txt");
    gf_settings s;
    tu_exact_settings(&s, path, W, H);
    gf_loader *l = NULL;
    ck_assert_int_lt(gf_open(&l, &s), 0);
    const char *m = gf_last_error(l);
    ck_assert_msg(ends_with(m, ": No such file or directory"), "%s", m);
    ck_assert_msg(strstr(m, "missing-list.txt") && strncmp(m, dir, strlen(dir)) == 0, "%s", m);
    gf_close(&l);

    long_path(rel, sizeof rel, "a", 4000, "gone.png");
    snprintf(list, sizeof list, "%s 0\n", rel);
    snprintf(path, sizeof path, "%s/list.txt", dir);
    tu_write_text(path, list);
    tu_exact_settings(&s, path, W, H);
    l = open_ok(&s);
    gf_batch *b;
    ck_assert_int_eq(gf_next(l, &b), GF_EDATASET); /* its one sample is bad */
    m = gf_last_error(l);
    ck_assert_msg(ends_with(m, "/gone.png: no such file)"), "%s", m);
    gf_stats st;
    gf_get_stats(l, &st);
    ck_assert_int_eq(st.n_recent, 1);
    ck_assert_msg(ends_with(st.recent[0].path, "/gone.png") && st.recent[0].path[0] == 'a' &&
                      strstr(st.recent[0].path, "\xe2\x80\xa6"),
                  "%s", st.recent[0].path);
    ck_assert_str_eq(st.recent[0].reason, "no such file");
    gf_close(&l);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

/* In a child whose every descriptor but `left` is taken: gf_open's code
 * (its exit status: 0 EMFILE as wanted, 1 another outcome, 2 opened), or
 * the signal that ended it (libuv's abort(): SIGABRT). */
static void open_with_descriptors_left(int left, int *exit_code, int *signal_no)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        struct rlimit r = {64, 64};
        if (setrlimit(RLIMIT_NOFILE, &r) != 0)
            _exit(3);
        int last = -1;
        for (int fd; (fd = open("/dev/null", O_RDONLY)) >= 0;)
            last = fd;
        for (int i = 0; i < left && last >= 0; i++)
            close(last--); /* the highest: open() takes them back first */
        gf_settings s;
        tu_exact_settings(&s, root, W, H);
        s.threads = 1;
        s.io = GF_IO_POSIX;
        gf_loader *l = NULL;
        int rc = gf_open(&l, &s);
        int ok = rc == GF_EMFILE && strstr(gf_last_error(l), "too few file descriptors: the "
                                                             "loader needs 6") &&
                 strstr(gf_last_error(l), "RLIMIT_NOFILE 64");
        if (!ok && rc != 0)
            fprintf(stderr, "%d free: %s: %s\n", left, gf_err_name(rc), gf_last_error(l));
        gf_close(&l);
        _exit(rc == 0 ? 2 : ok ? 0 : 1);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    *exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    *signal_no = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

/* Issue 26: with 2-5 descriptors left at a process's first gf_open,
 * libuv called abort(); with fewer, "uv_loop_init failed" (GF_ENOMEM).
 * Now GF_EMFILE, naming how many it needs and the limit; with enough it
 * opens. */
START_TEST(too_few_descriptors_are_emfile_never_an_abort)
{
    /* valgrind keeps descriptors of its own and refuses a lower
     * RLIMIT_NOFILE: the other builds run this. */
    const char *preload = getenv("LD_PRELOAD");
    if (preload && strstr(preload, "vgpreload"))
        return;
    for (int left = 2; left <= 5; left++) {
        int code, sig;
        open_with_descriptors_left(left, &code, &sig);
        ck_assert_msg(sig == 0 && code == 0, "%d left: exit %d, signal %d", left, code, sig);
    }
    int code, sig;
    open_with_descriptors_left(30, &code, &sig);
    ck_assert_msg(sig == 0 && code == 2, "30 left: exit %d, signal %d", code, sig);
}
END_TEST

static Suite *loader_suite(void)
{
    Suite *s = suite_create("loader");
    TCase *t = tcase_create("delivery");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 120);
    tcase_add_test(t, pixels_and_labels_match_the_files);
    tcase_add_test(t, a_final_short_batch_or_none_with_drop_last);
    tcase_add_test(t, shuffled_order_is_the_samplers_for_each_epoch);
    tcase_add_loop_test(t, batches_are_identical_for_any_thread_count_and_reader, 0, 1);
    tcase_add_loop_test(t, forcing_each_reader_is_reported_in_stats, 0, 1);
    tcase_add_test(t, rank_shares_are_disjoint_and_cover_the_epoch);
    tcase_add_test(t, unbounded_epochs_keep_coming);
    suite_add_tcase(s, t);

    t = tcase_create("ring");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 120);
    tcase_add_test(t, the_ring_holds_back_when_the_consumer_does_not_read);
    tcase_add_test(t, a_slow_consumer_gets_batches_in_order);
    tcase_add_test(t, holding_past_max_held_batches_is_busy_not_a_hang);
    tcase_add_test(t, closing_mid_epoch_with_batches_held_frees_everything);
    tcase_add_test(t, a_thread_that_cannot_start_fails_the_open_with_its_error);
    tcase_add_test(t, resuming_at_a_batch_position_continues_exactly);
    tcase_add_test(t, a_saved_state_resumes_exactly_and_refuses_another_run);
    tcase_add_test(t, each_launchers_environment_picks_the_share);
    tcase_add_test(t, autotune_adds_threads_when_the_consumer_stalls_and_keeps_the_bytes);
#if GF_HAVE_TURBO
    tcase_add_test(t, close_and_seek_cancel_a_decode_in_progress);
    tcase_add_test(t, a_timed_next_that_runs_out_takes_nothing);
#endif
    suite_add_tcase(s, t);

    t = tcase_create("errors");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 120);
    tcase_add_test(t, bad_settings_are_rejected_with_the_check_named);
    tcase_add_loop_test(t, bad_samples_are_skipped_counted_and_named, 0, 1);
    tcase_add_loop_test(t, non_regular_entries_are_counted_errors_naming_the_kind, 0, 1);
#if GF_HAVE_TURBO
    tcase_add_test(t, strictness_decides_a_warned_jpeg_and_lenient_counts_it);
#endif
    tcase_add_test(t, bad_samples_with_shuffle_are_deterministic_and_resumable);
    tcase_add_test(t, on_error_fail_names_the_sample_after_the_good_batches);
    tcase_add_test(t, last_error_may_be_read_from_any_thread_while_the_loader_halts);
    tcase_add_test(t, an_all_bad_data_set_is_an_error_not_an_endless_loop);
    tcase_add_test(t, drop_last_with_a_share_under_a_batch_is_refused);
    tcase_add_test(t, a_long_path_keeps_the_reason_and_the_files_name);
    tcase_add_test(t, too_few_descriptors_are_emfile_never_an_abort);
    suite_add_tcase(s, t);

    t = tcase_create("device");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 120);
    tcase_add_test(t, converted_batches_are_the_cpu_twin_of_the_uint8_ones);
    tcase_add_test(t, flipping_on_the_device_gives_the_same_bytes);
    tcase_add_test(t, auto_without_a_gpu_runs_on_the_cpu_and_says_why);
    suite_add_tcase(s, t);

    t = tcase_create("samples");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 120);
    tcase_add_test(t, read_sample_on_a_folder_gives_each_files_bytes_path_and_label);
    tcase_add_test(t, read_sample_on_shards_gives_each_members_bytes_and_stats_count_what_was_skipped);
    tcase_add_test(t, a_prepared_raw_set_gives_the_pixels_of_its_images_decoded_from_memory);
    suite_add_tcase(s, t);

    t = tu_uring_tcase("uring");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 120);
    tcase_add_loop_test(t, batches_are_identical_for_any_thread_count_and_reader, URING_CASE,
                        URING_CASE + 1);
    tcase_add_loop_test(t, forcing_each_reader_is_reported_in_stats, URING_CASE, URING_CASE + 1);
    tcase_add_loop_test(t, bad_samples_are_skipped_counted_and_named, URING_CASE, URING_CASE + 1);
    tcase_add_loop_test(t, non_regular_entries_are_counted_errors_naming_the_kind, URING_CASE,
                        URING_CASE + 1);
    tcase_add_test(t, auto_reads_cached_files_on_the_decode_threads_and_cold_ones_with_io_uring);
    suite_add_tcase(s, t);
    return s;
}

#include "run_suite.h"

int main(int argc, char **argv)
{
    return tu_run_suite_split(loader_suite(), argc, argv);
}
