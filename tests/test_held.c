/* Batches the consumer keeps: a held batch costs its own slot, never the
 * run. Kept over many steps, many at once, in gradient-accumulation
 * groups, across gf_seek and gf_set_state; past max_held_batches gf_next
 * is GF_EBUSY naming them, and recovers once one is released, also when
 * another thread releases them. The bytes never depend on the holding
 * pattern. */
#include "gpufeed.h"
#include "mix.h"
#include "testutil.h"

#include <check.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { W = 8, H = 8, CLASSES = 4, PER_CLASS = 30, N = CLASSES * PER_CLASS, PIX = W * H * 3 };

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

/* One sample a batch, in data set order, at the source size. */
static void plain_settings(gf_settings *s, int depth)
{
    tu_exact_settings(s, root, W, H);
    s->batch_size = 1;
    s->prefetch_depth = depth;
}

static gf_loader *open_ok(const gf_settings *s)
{
    gf_loader *l = NULL;
    int rc = gf_open(&l, s);
    ck_assert_msg(rc == 0, "gf_open: %s: %s", gf_err_name(rc), gf_last_error(l));
    return l;
}

static uint64_t ring_bytes(gf_loader *l)
{
    gf_stats st;
    ck_assert_int_eq(gf_get_stats(l, &st), 0);
    return st.ring_bytes;
}

/* A batch's bytes as gf_next gave them: pixels, labels, indices, place. */
static uint64_t batch_hash(const gf_batch *b)
{
    uint64_t h = gf__fnv1a64(0, b->pixels, (size_t)b->count * PIX);
    h = gf__fnv1a64(h, b->labels, (size_t)b->count * sizeof *b->labels);
    h = gf__fnv1a64(h, b->indices, (size_t)b->count * sizeof *b->indices);
    h = gf__fnv1a64(h, &b->epoch, sizeof b->epoch);
    return gf__fnv1a64(h, &b->position, sizeof b->position);
}

/* The pixels sample i of the folder has (tu_image_folder's fill). */
static void check_sample(const gf_batch *b, int c, int64_t i)
{
    uint8_t want[PIX];
    int k = (int)(i / PER_CLASS), j = (int)(i % PER_CLASS);
    tu_fill(want, W, H, 3, (uint32_t)(k * 1000 + j));
    ck_assert_int_eq(b->labels[c], k);
    ck_assert_msg(memcmp(b->pixels + (size_t)c * PIX, want, PIX) == 0, "sample %lld differs",
                  (long long)i);
}

START_TEST(one_batch_kept_over_a_hundred_steps_finishes_the_epoch)
{
    gf_settings s;
    plain_settings(&s, 2);
    gf_loader *l = open_ok(&s);
    const uint64_t ring2 = ring_bytes(l);
    gf_batch *kept, *b;
    ck_assert_int_eq(gf_next(l, &kept), 0);
    const uint64_t kept_hash = batch_hash(kept);
    int seen[N] = {0};
    seen[kept->indices[0]]++;
    int n = 1, rc;
    while ((rc = gf_next(l, &b)) == 0) {
        ck_assert_int_eq(b->indices[0], n); /* in order, nothing skipped */
        check_sample(b, 0, n);
        seen[b->indices[0]]++;
        n++;
        ck_assert_int_eq(gf_release(l, b), 0);
        ck_assert_uint_eq(batch_hash(kept), kept_hash);
    }
    ck_assert_msg(rc == GF_EOF, "%s: %s", gf_err_name(rc), gf_last_error(l));
    ck_assert_int_eq(n, N);
    for (int i = 0; i < N; i++)
        ck_assert_msg(seen[i] == 1, "sample %d delivered %d times", i, seen[i]);
    check_sample(kept, 0, 0);
    /* One kept batch cost one slot: depth 2 + 1. */
    ck_assert_uint_eq(ring_bytes(l), ring2 / 2 * 3);
    ck_assert_int_eq(gf_release(l, kept), 0);
    gf_close(&l);
}
END_TEST

START_TEST(eight_batches_held_at_depth_two_then_released)
{
    gf_settings s;
    plain_settings(&s, 2);
    gf_loader *l = open_ok(&s);
    const uint64_t ring2 = ring_bytes(l);
    gf_batch *held[8], *b;
    uint64_t hashes[8];
    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(gf_next(l, &held[i]), 0);
        ck_assert_int_eq(held[i]->indices[0], i);
        hashes[i] = batch_hash(held[i]);
        for (int k = 0; k <= i; k++) /* none moved while later ones came */
            ck_assert_uint_eq(batch_hash(held[k]), hashes[k]);
    }
    /* 7 held when the 8th was asked for: 2 + 7 slots. */
    ck_assert_uint_eq(ring_bytes(l), ring2 / 2 * 9);
    for (int i = 7; i >= 0; i--) { /* any order */
        check_sample(held[i], 0, i);
        ck_assert_int_eq(gf_release(l, held[i]), 0);
    }
    int n = 8;
    while (gf_next(l, &b) == 0) {
        ck_assert_int_eq(b->indices[0], n++);
        gf_release(l, b);
    }
    ck_assert_int_eq(n, N);
    ck_assert_uint_eq(ring_bytes(l), ring2 / 2 * 9); /* added slots stay */
    gf_close(&l);
}
END_TEST

START_TEST(gradient_accumulation_holds_four_then_releases_four)
{
    gf_settings s;
    plain_settings(&s, 2);
    s.batch_size = 3;
    gf_loader *l = open_ok(&s);
    gf_batch *group[4];
    uint64_t hashes[4];
    int next = 0, rc = 0, steps = 0;
    for (;;) {
        int k = 0;
        for (; k < 4 && (rc = gf_next(l, &group[k])) == 0; k++) {
            gf_batch *b = group[k];
            for (int c = 0; c < b->count; c++) {
                ck_assert_int_eq(b->indices[c], next);
                check_sample(b, c, next++);
            }
            hashes[k] = batch_hash(b);
        }
        for (int i = 0; i < k; i++) {
            ck_assert_uint_eq(batch_hash(group[i]), hashes[i]);
            ck_assert_int_eq(gf_release(l, group[i]), 0);
        }
        steps++;
        if (rc != 0)
            break;
    }
    ck_assert_msg(rc == GF_EOF, "%s: %s", gf_err_name(rc), gf_last_error(l));
    ck_assert_int_eq(next, N);
    ck_assert_int_eq(steps, N / 12 + 1);
    gf_close(&l);
}
END_TEST

START_TEST(past_max_held_batches_is_busy_naming_them_and_recovers)
{
    gf_settings s;
    plain_settings(&s, 2);
    s.max_held_batches = 3;
    gf_loader *l = open_ok(&s);
    gf_batch *held[3], *b;
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(gf_next(l, &held[i]), 0);
    ck_assert_int_eq(gf_next(l, &b), GF_EBUSY);
    ck_assert_ptr_null(b);
    const char *m = gf_last_error(l);
    ck_assert_msg(strstr(m, "3 batches are held") && strstr(m, "max_held_batches") &&
                      strstr(m, "(epoch 0, position 1), (epoch 0, position 2), "
                                "(epoch 0, position 3)") &&
                      !strstr(m, "..."),
                  "message: %s", m);
    ck_assert_int_eq(gf_next_timed(l, &b, 0), GF_EBUSY); /* also without waiting */
    /* Releasing any one lets the next call take the next batch. */
    ck_assert_int_eq(gf_release(l, held[1]), 0);
    ck_assert_int_eq(gf_next(l, &b), 0);
    ck_assert_int_eq(b->indices[0], 3);
    ck_assert_int_eq(gf_release(l, b), 0);
    ck_assert_int_eq(gf_release(l, held[0]), 0);
    ck_assert_int_eq(gf_release(l, held[2]), 0);
    int n = 4;
    while (gf_next(l, &b) == 0) {
        ck_assert_int_eq(b->indices[0], n++);
        gf_release(l, b);
    }
    ck_assert_int_eq(n, N);
    gf_close(&l);

    /* More held than the message lists: the oldest few, then "...". */
    s.max_held_batches = 6;
    l = open_ok(&s);
    gf_batch *six[6];
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(gf_next(l, &six[i]), 0);
    ck_assert_int_eq(gf_next(l, &b), GF_EBUSY);
    m = gf_last_error(l);
    ck_assert_msg(strstr(m, "6 batches are held: (epoch 0, position 1), (epoch 0, position 2), "
                            "(epoch 0, position 3), (epoch 0, position 4), ...") != NULL,
                  "message: %s", m);
    gf_close(&l); /* with batches held */
}
END_TEST

START_TEST(seek_and_set_state_keep_a_held_batch_intact)
{
    gf_settings s;
    plain_settings(&s, 2);
    gf_loader *l = open_ok(&s);
    gf_batch *kept, *b;
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(gf_next(l, &b), 0);
        gf_release(l, b);
    }
    ck_assert_int_eq(gf_next(l, &kept), 0);
    ck_assert_int_eq(kept->indices[0], 5);
    const uint64_t kept_hash = batch_hash(kept);
    gf_state st;
    ck_assert_int_eq(gf_get_state(l, &st), 0);
    ck_assert_uint_eq(st.position, 6);

    ck_assert_int_eq(gf_seek(l, 0, 0), 0);
    for (int i = 0; i < 10; i++) { /* the epoch again, the kept batch too */
        ck_assert_int_eq(gf_next(l, &b), 0);
        ck_assert_int_eq(b->indices[0], i);
        check_sample(b, 0, i);
        gf_release(l, b);
    }
    ck_assert_uint_eq(batch_hash(kept), kept_hash);

    ck_assert_int_eq(gf_set_state(l, &st), 0);
    int n = 6;
    while (gf_next(l, &b) == 0) {
        ck_assert_int_eq(b->indices[0], n++);
        ck_assert_uint_eq(batch_hash(kept), kept_hash);
        gf_release(l, b);
    }
    ck_assert_int_eq(n, N);
    check_sample(kept, 0, 5);
    ck_assert_int_eq(gf_release(l, kept), 0);
    ck_assert_int_eq(gf_release(l, kept), GF_EINVAL); /* once */
    gf_close(&l);
}
END_TEST

/* Every batch's hash in delivery order, over two shuffled, augmented
 * epochs, holding batches by `pattern`: 0 releases each at once, 1 keeps
 * the first batch to the end, 2 holds 4 and releases 4, 3 holds 8 and
 * releases them newest first. */
static void run_pattern(int depth, int threads, int pattern, uint64_t *out, int *n_out)
{
    gf_settings s;
    tu_cpu_settings(&s);
    s.data = root;
    s.width = 6;
    s.height = 5;
    s.batch_size = 7;
    s.seed = 31;
    s.epochs = 2;
    s.threads = threads;
    s.prefetch_depth = depth;
    gf_loader *l = open_ok(&s);
    gf_batch *held[8];
    int n_held = 0, n = 0, rc;
    gf_batch *b;
    while ((rc = gf_next(l, &b)) == 0) {
        uint64_t h = gf__fnv1a64(0, b->pixels, (size_t)b->count * 6 * 5 * 3);
        h = gf__fnv1a64(h, b->indices, (size_t)b->count * sizeof *b->indices);
        out[n++] = h;
        if (pattern == 0 || (pattern == 1 && n > 1)) {
            gf_release(l, b);
            continue;
        }
        held[n_held++] = b;
        int group = pattern == 1 ? 1 : pattern == 2 ? 4 : 8;
        if (pattern != 1 && n_held == group) {
            for (int i = n_held - 1; i >= 0; i--)
                ck_assert_int_eq(gf_release(l, held[pattern == 3 ? i : n_held - 1 - i]), 0);
            n_held = 0;
        }
    }
    ck_assert_msg(rc == GF_EOF, "%s: %s", gf_err_name(rc), gf_last_error(l));
    for (int i = 0; i < n_held; i++)
        gf_release(l, held[i]);
    *n_out = n;
    gf_close(&l);
}

START_TEST(the_same_seed_gives_the_same_batches_whatever_the_holding)
{
    uint64_t want[64], got[64];
    int n_want, n_got;
    run_pattern(1, 1, 0, want, &n_want);
    ck_assert_int_eq(n_want, 2 * ((N + 6) / 7));
    static const int cases[][3] = {{2, 3, 1}, {2, 2, 2}, {1, 4, 3}, {3, 1, 2}, {4, 3, 3}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        run_pattern(cases[k][0], cases[k][1], cases[k][2], got, &n_got);
        ck_assert_int_eq(n_got, n_want);
        for (int i = 0; i < n_want; i++)
            ck_assert_msg(got[i] == want[i], "depth %d, %d threads, pattern %d: batch %d differs",
                          cases[k][0], cases[k][1], cases[k][2], i);
    }
}
END_TEST

/* Held batches handed to another thread, which releases them while gf_next
 * adds slots and the controller refills others (TSan's case). */
typedef struct releaser {
    gf_loader *l;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    gf_batch *queue[64];
    int head, tail;
    int released;
    bool done;
} releaser;

static void *release_main(void *arg)
{
    releaser *r = arg;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (r->head == r->tail && !r->done)
            pthread_cond_wait(&r->cv, &r->mu);
        if (r->head == r->tail)
            break;
        gf_batch *b = r->queue[r->head++ % 64];
        pthread_mutex_unlock(&r->mu);
        ck_assert_int_eq(gf_release(r->l, b), 0);
        pthread_mutex_lock(&r->mu);
        r->released++;
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

START_TEST(batches_released_on_another_thread_keep_the_order)
{
    gf_settings s;
    plain_settings(&s, 2);
    s.threads = 3;
    s.max_held_batches = 4;
    releaser r = {.l = open_ok(&s)};
    pthread_mutex_init(&r.mu, NULL);
    pthread_cond_init(&r.cv, NULL);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, release_main, &r), 0);
    gf_batch *b;
    int n = 0, rc;
    while ((rc = gf_next(r.l, &b)) != GF_EOF) {
        if (rc == GF_EBUSY) { /* max_held_batches: wait for a release */
            ck_assert_ptr_nonnull(strstr(gf_last_error(r.l), "batches are held"));
            pthread_mutex_lock(&r.mu);
            while (r.tail - r.released >= 4)
                pthread_cond_wait(&r.cv, &r.mu);
            pthread_mutex_unlock(&r.mu);
            continue;
        }
        ck_assert_msg(rc == 0, "%s: %s", gf_err_name(rc), gf_last_error(r.l));
        ck_assert_int_eq(b->indices[0], n);
        check_sample(b, 0, n++);
        pthread_mutex_lock(&r.mu);
        r.queue[r.tail++ % 64] = b;
        pthread_cond_broadcast(&r.cv);
        pthread_mutex_unlock(&r.mu);
    }
    pthread_mutex_lock(&r.mu);
    r.done = true;
    pthread_cond_broadcast(&r.cv);
    pthread_mutex_unlock(&r.mu);
    pthread_join(t, NULL);
    ck_assert_int_eq(n, N);
    gf_close(&r.l);
    pthread_cond_destroy(&r.cv);
    pthread_mutex_destroy(&r.mu);
}
END_TEST

static Suite *held_suite(void)
{
    Suite *s = suite_create("held");
    TCase *t = tcase_create("held");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 120);
    tcase_add_test(t, one_batch_kept_over_a_hundred_steps_finishes_the_epoch);
    tcase_add_test(t, eight_batches_held_at_depth_two_then_released);
    tcase_add_test(t, gradient_accumulation_holds_four_then_releases_four);
    tcase_add_test(t, past_max_held_batches_is_busy_naming_them_and_recovers);
    tcase_add_test(t, seek_and_set_state_keep_a_held_batch_intact);
    tcase_add_test(t, the_same_seed_gives_the_same_batches_whatever_the_holding);
    tcase_add_test(t, batches_released_on_another_thread_keep_the_order);
    suite_add_tcase(s, t);
    return s;
}

#include "run_suite.h"

int main(void)
{
    return tu_run_suite(held_suite());
}
