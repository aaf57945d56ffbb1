/* ImageFolder and list-file samples whose file changed after indexing
 * (replaced by mv, grown, truncated, touched) are sample errors naming the
 * file, "changed since it was indexed (...)", on both readers; the other
 * samples are delivered, and an untouched set has none (gf__file_seen). */
#include "testutil.h"
#include "tu_engine.h"

#include "dataset.h"
#include "reader.h"

#include "gpufeed.h"

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { N = 6, VICTIM = 5 }; /* class_b/2.png: sample 5 in both orders */

/* dir/class_a/{0,1,2}.png, dir/class_b/{0,1,2}.png (16x16) and dir/list.txt
 * naming them in the same order. */
static char *make_set(void)
{
    char *dir = tu_mkdtemp();
    char p[4200];
    FILE *list = NULL;
    snprintf(p, sizeof p, "%s/list.txt", dir);
    list = fopen(p, "w");
    ck_assert_ptr_nonnull(list);
    for (int k = 0; k < N; k++) {
        const char *cls = k < 3 ? "class_a" : "class_b";
        snprintf(p, sizeof p, "%s/%s", dir, cls);
        mkdir(p, 0755);
        uint8_t px[16 * 16 * 3];
        tu_fill(px, 16, 16, 3, 70u + (uint32_t)k);
        size_t n;
        uint8_t *png = tu_png_mem(px, 16, 16, 3, &n);
        snprintf(p, sizeof p, "%s/%s/%d.png", dir, cls, k % 3);
        tu_write_file(p, png, n);
        free(png);
        fprintf(list, "%s/%d.png %d\n", cls, k % 3, k / 3);
    }
    fclose(list);
    return dir;
}

enum change { MV_SAME_SIZE, GROWN, TRUNCATED, TOUCHED };
static const char *const reason_of[] = {
    "changed since it was indexed (replaced: another inode",
    "changed since it was indexed (its size: ",
    "changed since it was indexed (its size: ",
    "changed since it was indexed (its mtime",
};

static void apply(const char *dir, enum change c)
{
    char v[4200], tmp[4200];
    snprintf(v, sizeof v, "%s/class_b/2.png", dir);
    size_t n;
    uint8_t *bytes = tu_read_file(v, &n);
    int fd;
    struct timespec t[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
    switch (c) {
    case MV_SAME_SIZE: /* another file of the same size moved over it */
        bytes[n / 2] ^= 1;
        snprintf(tmp, sizeof tmp, "%s/new.png", dir);
        tu_write_file(tmp, bytes, n);
        ck_assert_int_eq(rename(tmp, v), 0);
        break;
    case GROWN:
        fd = open(v, O_WRONLY | O_APPEND);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, "xyz", 3), 3);
        close(fd);
        break;
    case TRUNCATED:
        ck_assert_int_eq(truncate(v, (off_t)n - 8), 0);
        break;
    case TOUCHED:
        ck_assert_int_eq(utimensat(AT_FDCWD, v, t, 0), 0);
        break;
    }
    free(bytes);
}

typedef struct seen_errors {
    enum change c;
    unsigned victim; /* times the victim was reported with the reason */
    unsigned racing; /* ... otherwise: a prefetch read it mid-change */
    int other;       /* another sample reported */
    char last[512];
    char all[1024];  /* every report, for the failure message */
} seen_errors;

static void count(void *user, int64_t sample, const char *path, int code, const char *reason)
{
    seen_errors *e = user;
    if (code == GF_EIO && sample == VICTIM && strstr(path, "class_b/2.png") &&
        strstr(reason, reason_of[e->c]))
        e->victim++;
    else if (sample == VICTIM)
        e->racing++;
    else
        e->other++;
    snprintf(e->last, sizeof e->last, "%s: %s", path, reason);
    size_t n = strlen(e->all);
    snprintf(e->all + n, sizeof e->all - n, "[%lld %s: %s] ", (long long)sample, path, reason);
}

/* Samples delivered until GF_EOF or `upto` in all; none may be the victim
 * when `changed`. */
static int drain(gf_loader *l, int upto, int changed)
{
    gf_batch *bt;
    int got = 0, rc;
    while (got < upto && (rc = gf_next(l, &bt)) == 0) {
        for (int i = 0; i < bt->count; i++)
            if (changed)
                ck_assert_int_ne(bt->indices[i], VICTIM);
        got += bt->count;
        gf_release(l, bt);
    }
    return got;
}

static gf_loader *open_loader(const char *src, gf_io io, seen_errors *e, uint64_t epochs)
{
    gf_settings s;
    tu_cpu_settings(&s);
    s.data = src;
    s.width = s.height = 16;
    s.batch_size = 2;
    s.shuffle = 0;
    s.threads = 1;
    s.io = io;
    s.epochs = epochs;
    s.on_sample_error = count;
    s.on_sample_error_user = e;
    gf_loader *l = NULL;
    int rc = gf_open(&l, &s);
    ck_assert_msg(rc == 0, "gf_open: %s: %s", gf_err_name(rc), gf_last_error(l));
    gf_stats st;
    gf_get_stats(l, &st);
    ck_assert_int_eq(st.reader, io);
    return l;
}

/* Epoch 0 read whole (each file recorded), the change, then epoch 1: the
 * victim is an error with the reason, the other five are delivered. The
 * prefetch may have read epoch 1's victim between the change and the seek,
 * and a batch the seek drops has reported its errors already: then the
 * victim is reported twice (gf_sample_error_fn says so), and that first
 * read may have caught the file mid-change (another reason, or none).
 * No other sample is ever blamed. */
static void changed_after_a_read(gf_io io, int list, enum change c)
{
    char *dir = make_set();
    char src[4200];
    snprintf(src, sizeof src, list ? "%s/list.txt" : "%s", dir);
    seen_errors e = {.c = c};
    gf_loader *l = open_loader(src, io, &e, 2);
    ck_assert_int_eq(drain(l, N, 0), N);
    ck_assert_msg(e.other == 0 && !e.victim && !e.racing, "%s", e.all);
    apply(dir, c);
    ck_assert_int_eq(gf_seek(l, 1, 0), 0); /* every read from here is after it */
    ck_assert_int_eq(drain(l, N, 1), N - 1);
    gf_close(&l);
    ck_assert_msg(e.victim >= 1 && e.victim + e.racing <= 2 && e.other == 0,
                  "victim %u, racing %u, other %d: %s", e.victim, e.racing, e.other, e.all);
    tu_rmrf(dir);
    free(dir);
}

/* Loop index bit: io_uring (else pread); those cases run in the uring test
 * case alone. */
#define URING_CASE 8

static gf_io io_of(int i)
{
    return i & URING_CASE ? GF_IO_URING : GF_IO_POSIX;
}

/* _i: bit 0 list (else folder), bits 1-2 the change, URING_CASE. */
START_TEST(a_changed_sample_is_an_error_naming_it)
{
    changed_after_a_read(io_of(_i), _i & 1, (enum change)((_i >> 1) & 3));
}
END_TEST

/* An untouched folder or list, three epochs: no error, every sample.
 * _i: bit 0 list (else folder), URING_CASE. */
START_TEST(an_untouched_set_has_no_false_positive_over_three_epochs)
{
    gf_io io = io_of(_i);
    char *dir = make_set();
    char src[4200];
    snprintf(src, sizeof src, _i & 1 ? "%s/list.txt" : "%s", dir);
    seen_errors e = {.c = MV_SAME_SIZE};
    gf_loader *l = open_loader(src, io, &e, 3);
    ck_assert_int_eq(drain(l, 1000, 0), 3 * N);
    gf_close(&l);
    ck_assert_msg(e.other == 0 && !e.victim && !e.racing, "%s", e.all);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

/* The folder walk records readdir's inode: a file replaced by mv before
 * its first read is caught too (a list records it at the first read). */
START_TEST(a_folder_file_replaced_before_its_first_read_is_caught)
{
    char *dir = make_set();
    gf__dataset ds;
    char why[256];
    ck_assert_int_eq(gf__dataset_open(&ds, dir, why, sizeof why), 0);
    ck_assert_uint_eq(ds.n, N);
    ck_assert_str_eq(gf__dataset_path(&ds, VICTIM), "class_b/2.png");
    apply(dir, MV_SAME_SIZE);
    gf__read_opts o = {.seen = gf__dataset_file_seen(&ds, VICTIM)};
    ck_assert_ptr_nonnull(o.seen);
    gf__buf b = {0};
    ck_assert_int_eq(gf__read_sample(ds.root_fd, gf__dataset_path(&ds, VICTIM), 0,
                                     GF__WHOLE_FILE, &o, &b, why, sizeof why),
                     GF_EIO);
    ck_assert_msg(strstr(why, reason_of[MV_SAME_SIZE]) != NULL, "%s", why);
    /* Another sample reads, and is recorded at that read. */
    o.seen = gf__dataset_file_seen(&ds, 0);
    ck_assert_uint_eq(atomic_load(&o.seen->stamp), 0);
    ck_assert_int_eq(gf__read_sample(ds.root_fd, gf__dataset_path(&ds, 0), 0, GF__WHOLE_FILE,
                                     &o, &b, why, sizeof why),
                     0);
    ck_assert_uint_ne(atomic_load(&o.seen->stamp), 0);
    ck_assert_uint_ne(atomic_load(&o.seen->ino), 0);
    gf__buf_free(&b);
    gf__dataset_close(&ds);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

static Suite *sample_identity_suite(void)
{
    Suite *s = suite_create("sample_identity");
    TCase *t = tcase_create("changed");
    tcase_set_timeout(t, 120);
    tcase_add_loop_test(t, a_changed_sample_is_an_error_naming_it, 0, 8);
    tcase_add_loop_test(t, an_untouched_set_has_no_false_positive_over_three_epochs, 0, 2);
    tcase_add_test(t, a_folder_file_replaced_before_its_first_read_is_caught);
    suite_add_tcase(s, t);
    t = tu_uring_tcase("changed_uring");
    tcase_set_timeout(t, 120);
    tcase_add_loop_test(t, a_changed_sample_is_an_error_naming_it, URING_CASE, URING_CASE + 8);
    tcase_add_loop_test(t, an_untouched_set_has_no_false_positive_over_three_epochs, URING_CASE,
                        URING_CASE + 2);
    suite_add_tcase(s, t);
    return s;
}

#include "run_suite.h"

int main(int argc, char **argv)
{
    return tu_run_suite_split(sample_identity_suite(), argc, argv);
}
