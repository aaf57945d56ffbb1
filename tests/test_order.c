/* Samples given in memory (gf_open_samples) and the caller's epoch order
 * (gf_set_order): what torch's ImageFolder.samples and samplers hand the
 * Python DataLoader. Values, orders and codes; never timing. */
#include "gpufeed.h"
#include "mix.h"
#include "testutil.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { W = 16, H = 12, CLASSES = 3, PER_CLASS = 7, N = CLASSES * PER_CLASS };

static char *root;
/* Sample j: class_(j / PER_CLASS)/img_(j % PER_CLASS).png, relative to root. */
static char rel[N][64];
static const char *paths[N];
static int32_t labels[N];

static void setup(void)
{
    root = tu_image_folder(CLASSES, PER_CLASS, W, H, "png");
    for (int j = 0; j < N; j++) {
        snprintf(rel[j], sizeof rel[j], "class_%d/img_%03d.png", j / PER_CLASS, j % PER_CLASS);
        paths[j] = rel[j];
        labels[j] = (j * 5) % 4; /* not the folder's classes: ours are used */
    }
}

static void teardown(void)
{
    tu_rmrf(root);
    free(root);
}

static gf_loader *open_samples_ok(const gf_settings *s, const char *const *p, const int32_t *lb,
                                  uint64_t n)
{
    gf_loader *l = NULL;
    int rc = gf_open_samples(&l, s, p, lb, n);
    ck_assert_msg(rc == 0, "gf_open_samples: %s: %s", gf_err_name(rc), gf_last_error(l));
    return l;
}

static void set_order_ok(gf_loader *l, uint64_t seed, uint64_t epoch, const int64_t *o,
                         uint64_t n)
{
    int rc = gf_set_order(l, seed, epoch, o, n);
    ck_assert_msg(rc == 0, "gf_set_order: %s: %s", gf_err_name(rc), gf_last_error(l));
}

/* Reads to GF_EOF: the indices delivered, in order; batch sizes, epochs
 * and positions checked as they come; a hash of the pixels. */
typedef struct got {
    int64_t idx[256];
    int n, batches, sizes[64];
    uint64_t pos[64];
    uint64_t hash;
} got;

static void read_epoch(gf_loader *l, uint64_t epoch, got *g)
{
    memset(g, 0, sizeof *g);
    g->hash = GF__FNV1A64_BASIS;
    gf_batch *b;
    int rc;
    while ((rc = gf_next(l, &b)) == 0) {
        ck_assert_uint_eq(b->epoch, epoch);
        for (int i = 0; i < b->count; i++) {
            ck_assert_int_lt(g->n, 256);
            g->idx[g->n++] = b->indices[i];
            ck_assert_int_eq(b->labels[i], gf_sample_label(l, (uint64_t)b->indices[i]));
        }
        /* Where the next batch starts: past the samples, and past holes. */
        ck_assert_uint_ge(b->position, (uint64_t)g->n);
        g->pos[g->batches] = b->position;
        g->hash = gf__fnv1a64(g->hash, b->pixels, (size_t)b->count * W * H * 3);
        g->sizes[g->batches++] = b->count;
        ck_assert_int_eq(gf_release(l, b), 0);
    }
    ck_assert_msg(rc == GF_EOF, "gf_next: %s: %s", gf_err_name(rc), gf_last_error(l));
}

START_TEST(open_samples_delivers_the_given_labels_and_files)
{
    gf_settings s;
    tu_exact_settings(&s, root, W, H);
    /* One path absolute: it ignores the root. */
    char abs[4096];
    snprintf(abs, sizeof abs, "%s/%s", root, rel[3]);
    const char *p[N];
    memcpy(p, paths, sizeof p);
    p[3] = abs;
    gf_loader *l = open_samples_ok(&s, p, labels, N);
    uint8_t *want = malloc((size_t)W * H * 3);
    int seen = 0;
    gf_batch *b;
    while (gf_next(l, &b) == 0) {
        for (int i = 0; i < b->count; i++, seen++) {
            ck_assert_int_eq(b->indices[i], seen);
            ck_assert_int_eq(b->labels[i], labels[seen]);
            tu_fill(want, W, H, 3, (uint32_t)((seen / PER_CLASS) * 1000 + seen % PER_CLASS));
            ck_assert_msg(memcmp(b->pixels + (size_t)i * W * H * 3, want, (size_t)W * H * 3) == 0,
                          "sample %d: pixels differ", seen);
        }
        gf_release(l, b);
    }
    ck_assert_int_eq(seen, N);
    gf_stats st;
    gf_get_stats(l, &st);
    ck_assert_uint_eq(st.dataset_samples, N);
    ck_assert_uint_eq(st.epoch_samples, N);
    ck_assert_int_eq(st.classes, 4); /* max label 3, + 1 */
    ck_assert_uint_eq(st.errors, 0);
    ck_assert_str_eq(gf_sample_path(l, 3), abs);
    ck_assert_str_eq(gf_sample_path(l, 4), rel[4]);
    ck_assert_int_eq(gf_sample_label(l, 5), labels[5]);
    free(want);
    gf_close(&l);
}
END_TEST

START_TEST(odd_names_are_read_and_given_back_byte_for_byte)
{
    /* A space, trailing spaces, a newline, bytes that are not UTF-8. */
    static const char *const names[] = {"a b.png", "trailing .png  ", "new\nline.png",
                                        "\xff\xfe latin\xe9.png"};
    enum { K = 4 };
    char *dir = tu_mkdtemp();
    char path[4096];
    int32_t lb[K];
    for (int i = 0; i < K; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        tu_write_png(path, W, H, 3, (uint32_t)(7 + i));
        lb[i] = K - 1 - i;
    }
    gf_settings s;
    tu_exact_settings(&s, dir, W, H);
    gf_loader *l = open_samples_ok(&s, names, lb, K);
    uint8_t *want = malloc((size_t)W * H * 3);
    gf_batch *b;
    ck_assert_int_eq(gf_next(l, &b), 0);
    ck_assert_int_eq(b->count, K);
    for (int i = 0; i < K; i++) {
        ck_assert_int_eq(b->indices[i], i);
        ck_assert_int_eq(b->labels[i], lb[i]);
        tu_fill(want, W, H, 3, (uint32_t)(7 + i));
        ck_assert_msg(memcmp(b->pixels + (size_t)i * W * H * 3, want, (size_t)W * H * 3) == 0,
                      "'%s': pixels differ", names[i]);
        ck_assert_str_eq(gf_sample_path(l, (uint64_t)i), names[i]);
        void *data;
        size_t len, flen;
        char why[512];
        ck_assert_int_eq(gf_read_sample(l, (uint64_t)i, &data, &len, why, sizeof why), 0);
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        uint8_t *file = tu_read_file(path, &flen);
        ck_assert_uint_eq(len, flen);
        ck_assert(memcmp(data, file, len) == 0);
        gf_free(data);
        free(file);
    }
    gf_release(l, b);
    ck_assert_int_eq(gf_next(l, &b), GF_EOF);
    gf_close(&l);
    free(want);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(a_missing_file_is_a_sample_error_naming_it)
{
    const char *p[N];
    memcpy(p, paths, sizeof p);
    p[6] = "class_0/not here.png";
    gf_settings s;
    tu_exact_settings(&s, root, W, H);
    s.on_error = GF_ON_ERROR_SKIP;
    gf_loader *l = open_samples_ok(&s, p, labels, N);
    got *g = malloc(sizeof *g);
    read_epoch(l, 0, g);
    ck_assert_int_eq(g->n, N - 1);
    for (int i = 0, j = 0; i < g->n; i++, j++) {
        if (j == 6)
            j++;
        ck_assert_int_eq(g->idx[i], j);
    }
    gf_stats st;
    gf_get_stats(l, &st);
    ck_assert_uint_eq(st.errors, 1);
    ck_assert_int_eq(st.recent[0].sample, 6);
    ck_assert_int_eq(st.recent[0].code, GF_ENOENT);
    ck_assert_str_eq(st.recent[0].path, "class_0/not here.png");
    gf_close(&l);

    s.on_error = GF_ON_ERROR_FAIL;
    l = open_samples_ok(&s, p, labels, N);
    gf_batch *b;
    ck_assert_int_eq(gf_next(l, &b), 0); /* 0..3 */
    gf_release(l, b);
    ck_assert_int_eq(gf_next(l, &b), GF_ENOENT);
    ck_assert_msg(strstr(gf_last_error(l), "class_0/not here.png"), "%s", gf_last_error(l));
    gf_close(&l);
    free(g);
}
END_TEST

START_TEST(holes_in_an_order_are_filled_from_the_order)
{
    const char *p[N];
    memcpy(p, paths, sizeof p);
    p[20] = "class_2/not here.png";
    gf_settings s;
    tu_exact_settings(&s, root, W, H);
    s.on_error = GF_ON_ERROR_SKIP;
    s.threads = 3;
    /* The sampler's epoch the open prefetches (0..7) misses the bad file:
     * errors of discarded batches count too. */
    s.prefetch_depth = 2;
    gf_loader *l = open_samples_ok(&s, p, labels, N);
    const int64_t o[] = {20, 0, 20, 1, 2, 3, 4, 5, 7};
    set_order_ok(l, 0, 0, o, 9);
    got *g = malloc(sizeof *g);
    read_epoch(l, 0, g);
    /* Batch k: the first 4 good samples of the order after batch k-1's. */
    static const int64_t want[] = {0, 1, 2, 3, 4, 5, 7};
    ck_assert_int_eq(g->n, 7);
    for (int i = 0; i < 7; i++)
        ck_assert_int_eq(g->idx[i], want[i]);
    ck_assert_int_eq(g->batches, 2);
    ck_assert_uint_eq(g->pos[0], 6); /* past the holes and the donors */
    ck_assert_uint_eq(g->pos[1], 9);
    gf_stats st;
    gf_get_stats(l, &st);
    ck_assert_uint_eq(st.errors, 2);
    gf_close(&l);
    free(g);
}
END_TEST

static void open_refused(const gf_settings *s, const char *const *p, const int32_t *lb,
                         uint64_t n, int code, const char *says)
{
    gf_loader *l = NULL;
    int rc = gf_open_samples(&l, s, p, lb, n);
    ck_assert_msg(rc == code, "%s: %s (%s)", says, gf_err_name(rc), l ? gf_last_error(l) : "");
    ck_assert_msg(strstr(gf_last_error(l), says), "'%s' not in '%s'", says, gf_last_error(l));
    gf_close(&l);
}

START_TEST(bad_samples_arguments_are_refused_naming_the_index)
{
    gf_settings s;
    tu_exact_settings(&s, root, W, H);
    open_refused(&s, paths, labels, 0, GF_EINVAL, "n = 0");
    int32_t lb[N];
    memcpy(lb, labels, sizeof lb);
    lb[2] = -1;
    open_refused(&s, paths, lb, N, GF_EINVAL, "label 2 is -1");
    /* A label is a class, and N samples cannot mean 2^31 classes: the
     * first sample holding the largest label is named. */
    lb[2] = 2147483646;
    lb[5] = 2147483646;
    char past[160];
    snprintf(past, sizeof past, "samples: sample 2: label 2147483646 is past any class of a set "
                                "of %d samples (labels are class numbers; at most 1048576 "
                                "classes)", N);
    open_refused(&s, paths, lb, N, GF_EINVAL, past);
    lb[5] = 1048576;
    lb[2] = 3;
    open_refused(&s, paths, lb, N, GF_EINVAL, "samples: sample 5: label 1048576 is past");
    lb[5] = 1048575; /* within: a subset of a large set keeps its labels */
    gf_loader *within = NULL;
    ck_assert_int_eq(gf_open_samples(&within, &s, paths, lb, N), 0);
    gf_close(&within);
    lb[5] = labels[5];
    const char *p[N];
    memcpy(p, paths, sizeof p);
    p[1] = NULL;
    open_refused(&s, p, labels, N, GF_EINVAL, "path 1 is NULL");
    open_refused(&s, NULL, labels, N, GF_EINVAL, "paths array is NULL");
    /* The root must be a directory. */
    char file[4096];
    snprintf(file, sizeof file, "%s/%s", root, rel[0]);
    s.data = file;
    open_refused(&s, paths, labels, N, GF_EDATASET, file);
    /* Settings are gf_open's. */
    tu_exact_settings(&s, root, W, H);
    s.batch_size = 0;
    open_refused(&s, paths, labels, N, GF_EINVAL, "batch_size");
    gf_loader *l = NULL;
    ck_assert_int_eq(gf_open_samples(NULL, &s, paths, labels, N), GF_EINVAL);
    ck_assert_int_eq(gf_open_samples(&l, NULL, paths, labels, N), GF_EINVAL);
    gf_close(&l);
}
END_TEST

START_TEST(no_data_root_takes_paths_from_the_current_directory)
{
    char abs[N][4096];
    const char *p[N];
    for (int j = 0; j < N; j++) {
        snprintf(abs[j], sizeof abs[j], "%s/%s", root, rel[j]);
        p[j] = abs[j];
    }
    gf_settings s;
    tu_exact_settings(&s, NULL, W, H);
    gf_loader *l = open_samples_ok(&s, p, labels, N);
    got *g = malloc(sizeof *g);
    read_epoch(l, 0, g);
    ck_assert_int_eq(g->n, N);
    gf_close(&l);
    free(g);
}
END_TEST

START_TEST(an_order_is_delivered_exactly_with_repeats_then_eof)
{
    gf_settings s;
    tu_exact_settings(&s, root, W, H);
    gf_loader *l = open_samples_ok(&s, paths, labels, N);
    /* The sampler's batches are prefetched already: discarded. */
    const int64_t o1[] = {5, 5, 0, 20, 3, 3, 3, 17, 1, 9};
    set_order_ok(l, 11, 7, o1, 10);
    gf_stats st;
    gf_get_stats(l, &st);
    ck_assert_uint_eq(st.epoch_samples, 10);
    ck_assert_uint_eq(st.epoch, 7);
    ck_assert_uint_eq(st.position, 0);
    got *g = malloc(sizeof *g);
    read_epoch(l, 7, g);
    ck_assert_int_eq(g->n, 10);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(g->idx[i], o1[i]);
    ck_assert_int_eq(g->batches, 3); /* 4 + 4 + 2 */
    ck_assert_int_eq(g->sizes[2], 2);
    ck_assert_uint_eq(g->pos[0], 4);
    ck_assert_uint_eq(g->pos[1], 8);
    ck_assert_uint_eq(g->pos[2], 10);
    gf_batch *b;
    ck_assert_int_eq(gf_next(l, &b), GF_EOF); /* and stays so */
    gf_state state;
    ck_assert_int_eq(gf_get_state(l, &state), 0);
    ck_assert_uint_eq(state.seed, 11);
    ck_assert_uint_eq(state.epoch, 8);
    ck_assert_uint_eq(state.position, 0);

    /* The next epoch: another order. */
    const int64_t o2[] = {20, 19, 18, 2, 1};
    set_order_ok(l, 11, 8, o2, 5);
    read_epoch(l, 8, g);
    ck_assert_int_eq(g->n, 5);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(g->idx[i], o2[i]);

    /* An empty order is an epoch of nothing. */
    set_order_ok(l, 11, 9, NULL, 0);
    ck_assert_int_eq(gf_next(l, &b), GF_EOF);
    gf_close(&l);
    free(g);
}
END_TEST

START_TEST(drop_last_drops_the_short_batch_of_an_order)
{
    gf_settings s;
    tu_exact_settings(&s, root, W, H);
    s.drop_last = 1;
    gf_loader *l = open_samples_ok(&s, paths, labels, N);
    int64_t o[10];
    for (int i = 0; i < 10; i++)
        o[i] = 20 - 2 * i;
    set_order_ok(l, 1, 0, o, 10);
    got *g = malloc(sizeof *g);
    read_epoch(l, 0, g);
    ck_assert_int_eq(g->batches, 2);
    ck_assert_int_eq(g->n, 8);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(g->idx[i], o[i]);
    /* Shorter than a batch: nothing, as torch yields nothing; not an error. */
    set_order_ok(l, 1, 1, o, 3);
    gf_batch *b;
    ck_assert_int_eq(gf_next(l, &b), GF_EOF);
    set_order_ok(l, 1, 2, o, 4);
    read_epoch(l, 2, g);
    ck_assert_int_eq(g->n, 4);
    gf_close(&l);
    free(g);
}
END_TEST

/* The pixels of one train epoch over `order` at (threads, depth). */
static uint64_t train_hash(uint64_t seed, int threads, int depth, const int64_t *o, int n)
{
    gf_settings s;
    tu_exact_settings(&s, root, W, H);
    s.transform = GF_TRANSFORM_TRAIN; /* random crops and flips */
    s.width = 8;
    s.height = 8;
    s.threads = threads;
    s.prefetch_depth = depth;
    s.seed = 99; /* the loader's own; the order's seed is what counts */
    gf_loader *l = open_samples_ok(&s, paths, labels, N);
    set_order_ok(l, seed, 3, o, (uint64_t)n);
    uint64_t h = GF__FNV1A64_BASIS;
    gf_batch *b;
    int rc, k = 0;
    while ((rc = gf_next(l, &b)) == 0) {
        for (int i = 0; i < b->count; i++, k++)
            ck_assert_int_eq(b->indices[i], o[k]);
        h = gf__fnv1a64(h, b->pixels, (size_t)b->count * 8 * 8 * 3);
        gf_release(l, b);
    }
    ck_assert_int_eq(rc, GF_EOF);
    ck_assert_int_eq(k, n);
    gf_close(&l);
    return h;
}

START_TEST(the_same_seed_epoch_and_order_give_the_same_bytes)
{
    int64_t o[30];
    for (int i = 0; i < 30; i++)
        o[i] = (i * 7 + 3) % N; /* every sample, some twice */
    uint64_t a = train_hash(5, 1, 2, o, 30);
    ck_assert_uint_eq(train_hash(5, 3, 4, o, 30), a);
    ck_assert_uint_eq(train_hash(5, 3, 2, o, 30), a);
    /* The seed keys the crops: another one gives other bytes. */
    ck_assert_uint_ne(train_hash(6, 1, 2, o, 30), a);
}
END_TEST

START_TEST(seek_moves_within_the_order_and_set_state_is_refused)
{
    gf_settings s;
    tu_exact_settings(&s, root, W, H);
    gf_loader *l = open_samples_ok(&s, paths, labels, N);
    int64_t o[13];
    for (int i = 0; i < 13; i++)
        o[i] = 12 - i;
    set_order_ok(l, 4, 2, o, 13);
    gf_batch *b;
    ck_assert_int_eq(gf_next(l, &b), 0);
    ck_assert_uint_eq(b->position, 4);
    /* Held across a new order, as across gf_seek: the batch stays as it was. */
    int64_t held_index = b->indices[0];
    set_order_ok(l, 4, 2, o, 13);
    ck_assert_int_eq(b->indices[0], held_index);
    gf_release(l, b);

    gf_state st;
    ck_assert_int_eq(gf_get_state(l, &st), 0);
    ck_assert_uint_eq(st.seed, 4);
    ck_assert_uint_eq(st.epoch, 2);
    ck_assert_uint_eq(st.position, 0); /* the order set again starts over */
    ck_assert_int_eq(gf_set_state(l, &st), GF_EINVAL);
    ck_assert_msg(strstr(gf_last_error(l), "the caller owns the epoch's order"), "%s",
                  gf_last_error(l));

    ck_assert_int_eq(gf_seek(l, 2, 6), 0);
    got *g = malloc(sizeof *g);
    gf_batch *c;
    ck_assert_int_eq(gf_next(l, &c), 0);
    ck_assert_int_eq(c->count, 4);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(c->indices[i], o[6 + i]);
    ck_assert_uint_eq(c->position, 10);
    gf_release(l, c);

    ck_assert_int_eq(gf_seek(l, 2, 14), GF_EINVAL);
    ck_assert_msg(strstr(gf_last_error(l), "position 14 is past the epoch's 13 samples"), "%s",
                  gf_last_error(l));
    ck_assert_int_eq(gf_seek(l, 5, 0), GF_EINVAL);
    ck_assert_msg(strstr(gf_last_error(l), "epoch 5 is not the epoch of the order"), "%s",
                  gf_last_error(l));
    /* The order's end, as gf_get_state says it after the last batch. */
    ck_assert_int_eq(gf_seek(l, 3, 0), 0);
    ck_assert_int_eq(gf_next(l, &c), GF_EOF);
    ck_assert_int_eq(gf_seek(l, 2, 13), 0);
    ck_assert_int_eq(gf_next(l, &c), GF_EOF);
    ck_assert_int_eq(gf_seek(l, 2, 0), 0);
    read_epoch(l, 2, g);
    ck_assert_int_eq(g->n, 13);
    for (int i = 0; i < 13; i++)
        ck_assert_int_eq(g->idx[i], o[i]);
    gf_close(&l);
    free(g);
}
END_TEST

START_TEST(bad_orders_are_refused_naming_the_position)
{
    gf_settings s;
    tu_exact_settings(&s, root, W, H);
    gf_loader *l = open_samples_ok(&s, paths, labels, N);
    int64_t o[] = {0, 1, 2, N, 4};
    ck_assert_int_eq(gf_set_order(l, 0, 0, o, 5), GF_EINVAL);
    ck_assert_msg(strstr(gf_last_error(l), "order[3] = 21 is not a sample index"), "%s",
                  gf_last_error(l));
    o[3] = -1;
    ck_assert_int_eq(gf_set_order(l, 0, 0, o, 5), GF_EINVAL);
    ck_assert_msg(strstr(gf_last_error(l), "order[3] = -1"), "%s", gf_last_error(l));
    ck_assert_int_eq(gf_set_order(l, 0, 0, NULL, 5), GF_EINVAL);
    ck_assert_int_eq(gf_set_order(NULL, 0, 0, o, 5), GF_EINVAL);
    /* Refused: the sampler's epoch goes on as before. */
    got *g = malloc(sizeof *g);
    read_epoch(l, 0, g);
    ck_assert_int_eq(g->n, N);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(g->idx[i], i);
    /* gf_set_state works while no order was ever set. */
    gf_state st;
    gf_get_state(l, &st);
    ck_assert_int_eq(gf_set_state(l, &st), 0);
    gf_close(&l);
    free(g);
}
END_TEST

static Suite *order_suite(void)
{
    Suite *s = suite_create("order");
    TCase *t = tcase_create("samples");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 120);
    tcase_add_test(t, open_samples_delivers_the_given_labels_and_files);
    tcase_add_test(t, odd_names_are_read_and_given_back_byte_for_byte);
    tcase_add_test(t, a_missing_file_is_a_sample_error_naming_it);
    tcase_add_test(t, bad_samples_arguments_are_refused_naming_the_index);
    tcase_add_test(t, no_data_root_takes_paths_from_the_current_directory);
    suite_add_tcase(s, t);

    t = tcase_create("order");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 120);
    tcase_add_test(t, an_order_is_delivered_exactly_with_repeats_then_eof);
    tcase_add_test(t, drop_last_drops_the_short_batch_of_an_order);
    tcase_add_test(t, the_same_seed_epoch_and_order_give_the_same_bytes);
    tcase_add_test(t, seek_moves_within_the_order_and_set_state_is_refused);
    tcase_add_test(t, bad_orders_are_refused_naming_the_position);
    tcase_add_test(t, holes_in_an_order_are_filled_from_the_order);
    suite_add_tcase(s, t);
    return s;
}

#include "run_suite.h"

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return tu_run_suite(order_suite());
}
