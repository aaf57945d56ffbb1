/* The shard order (order = shards): each sample once an epoch, a window's
 * samples together, ranks as contiguous spans, resumable like the global
 * order; and through the loader on tar shards: the same bytes at any
 * threads and depth, seek and state resume exact, a state of another
 * order refused, non-shard data refused. */
#include "cursor.h"
#include "settings.h"
#include "testutil.h"
#include "run_suite.h"
#include "mix.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the order alone, through the cursor ---------------------------------- */

/* A synthetic index: counts[k] samples in shard k (0: a shard the index
 * kept nothing of, as a damaged one). */
typedef struct fake {
    uint32_t *shard;
    uint64_t n;
    gf__shards sh;
    gf__shard_epoch se;
    gf__sampler s;
} fake;

static void fake_init(fake *f, const int *counts, int n_shards, uint32_t window, uint64_t seed,
                      int shuffle, uint32_t rank, uint32_t world, int drop_last)
{
    f->n = 0;
    for (int k = 0; k < n_shards; k++)
        f->n += (uint64_t)counts[k];
    f->shard = malloc(f->n * sizeof *f->shard);
    uint64_t i = 0;
    for (int k = 0; k < n_shards; k++)
        for (int j = 0; j < counts[k]; j++)
            f->shard[i++] = (uint32_t)k;
    ck_assert_int_eq(gf__shards_init(&f->sh, f->shard, f->n, window), 0);
    ck_assert_int_eq(gf__shard_epoch_alloc(&f->se, &f->sh), 0);
    ck_assert_int_eq(gf__sampler_init(&f->s, f->n, seed, shuffle, rank, world, drop_last), 0);
    f->s.shards = &f->sh;
}

static void fake_free(fake *f)
{
    gf__shard_epoch_free(&f->se);
    gf__shards_free(&f->sh);
    free(f->shard);
}

/* This rank's epoch, position by position, as the loader's cursor reads it. */
static uint64_t *epoch_order(fake *f, uint64_t epoch)
{
    gf__cursor c;
    gf__cursor_start(&c, &f->s, NULL, &f->se, NULL, epoch, 0);
    uint64_t *o = malloc(f->s.len * sizeof *o);
    for (uint64_t p = 0; p < f->s.len; p++)
        o[p] = gf__cursor_sample(&c, epoch, p, NULL);
    return o;
}

static const int unequal[] = {5, 1, 7, 3, 1, 9, 2, 4};
static const int ones[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
static const int damaged[] = {4, 0, 6, 3, 0, 2}; /* shards 1 and 4 kept nothing */
static const struct { const int *c; int n; } sets[] = {
    {unequal, 8}, {ones, 10}, {damaged, 6},
};
static const uint32_t windows[] = {1, 2, 4, 100};

START_TEST(every_sample_is_read_once_an_epoch)
{
    for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++)
        for (size_t w = 0; w < sizeof windows / sizeof windows[0]; w++)
            for (int shuffle = 0; shuffle < 2; shuffle++)
                for (uint64_t epoch = 0; epoch < 3; epoch++) {
                    fake f;
                    fake_init(&f, sets[k].c, sets[k].n, windows[w], 7, shuffle, 0, 1, 0);
                    uint64_t *o = epoch_order(&f, epoch);
                    ck_assert_uint_eq(f.s.len, f.n);
                    unsigned char *seen = calloc(f.n, 1);
                    for (uint64_t p = 0; p < f.n; p++) {
                        ck_assert_uint_lt(o[p], f.n);
                        ck_assert_msg(!seen[o[p]], "set %zu W %u shuffle %d: %llu twice", k,
                                      windows[w], shuffle, (unsigned long long)o[p]);
                        seen[o[p]] = 1;
                        if (!shuffle) /* unshuffled: the index order, as global's */
                            ck_assert_uint_eq(o[p], p);
                    }
                    free(seen);
                    free(o);
                    fake_free(&f);
                }
}
END_TEST

START_TEST(a_windows_samples_take_one_contiguous_range_of_positions)
{
    int counts[40];
    for (int k = 0; k < 40; k++)
        counts[k] = 1 + (k * 7) % 5;
    for (size_t w = 0; w < sizeof windows / sizeof windows[0]; w++) {
        fake f;
        fake_init(&f, counts, 40, windows[w], 3, 1, 0, 1, 0);
        uint64_t *o = epoch_order(&f, 1);
        /* Each shard's place in the epoch's sequence, hence its window. */
        uint64_t at[40];
        for (uint32_t q = 0; q < f.sh.n; q++)
            at[f.se.seq[q]] = q;
        uint64_t last = 0;
        for (uint64_t p = 0; p < f.n; p++) {
            uint64_t win = at[f.shard[o[p]]] / windows[w];
            ck_assert_msg(win >= last, "W %u: position %llu in window %llu after window %llu",
                          windows[w], (unsigned long long)p, (unsigned long long)win,
                          (unsigned long long)last);
            last = win;
        }
        /* W = 1: a shard is read member after member, in some order. */
        free(o);
        fake_free(&f);
    }
}
END_TEST

static int same_seq(const fake *a, const fake *b)
{
    return memcmp(a->se.seq, b->se.seq, a->sh.n * sizeof *a->se.seq) == 0;
}

START_TEST(the_shard_permutation_differs_across_epochs_and_seeds)
{
    int counts[50];
    for (int k = 0; k < 50; k++)
        counts[k] = 3;
    fake a, b, c;
    fake_init(&a, counts, 50, 4, 1, 1, 0, 1, 0);
    fake_init(&b, counts, 50, 4, 1, 1, 0, 1, 0);
    fake_init(&c, counts, 50, 4, 2, 1, 0, 1, 0);
    gf__shard_epoch_set(&a.se, &a.s, 0);
    gf__shard_epoch_set(&b.se, &b.s, 0);
    ck_assert(same_seq(&a, &b)); /* a pure function of (seed, epoch) */
    gf__shard_epoch_set(&b.se, &b.s, 1);
    ck_assert(!same_seq(&a, &b));
    gf__shard_epoch_set(&c.se, &c.s, 0);
    ck_assert(!same_seq(&a, &c));
    int moved = 0; /* not the identity */
    for (uint32_t q = 0; q < a.sh.n; q++)
        moved += a.se.seq[q] != q;
    ck_assert_int_gt(moved, 25);
    fake_free(&a);
    fake_free(&b);
    fake_free(&c);
}
END_TEST

/* Ranks: contiguous spans of the one epoch sequence, padded by wrapping,
 * disjoint but for the padding, covering; under drop_last disjoint. */
START_TEST(ranks_take_disjoint_contiguous_spans_that_cover_the_epoch)
{
    const uint32_t worlds[] = {2, 3, 7};
    for (size_t wi = 0; wi < 3; wi++)
        for (int drop = 0; drop < 2; drop++) {
            uint32_t world = worlds[wi];
            fake full;
            fake_init(&full, unequal, 8, 2, 11, 1, 0, 1, 0);
            uint64_t *all = epoch_order(&full, 4);
            uint64_t n = full.n;
            uint64_t L = drop ? n / world : (n + world - 1) / world;
            unsigned *count = calloc(n, sizeof *count);
            for (uint32_t r = 0; r < world; r++) {
                fake f;
                fake_init(&f, unequal, 8, 2, 11, 1, r, world, drop);
                ck_assert_uint_eq(f.s.len, L);
                uint64_t *o = epoch_order(&f, 4);
                for (uint64_t i = 0; i < L; i++) {
                    ck_assert_uint_eq(o[i], all[(r * L + i) % n]);
                    count[o[i]]++;
                }
                free(o);
                fake_free(&f);
            }
            uint64_t covered = 0, twice = 0;
            for (uint64_t i = 0; i < n; i++) {
                covered += count[i] > 0;
                twice += count[i] > 1 ? count[i] - 1 : 0;
            }
            if (drop) {
                ck_assert_uint_eq(twice, 0);
                ck_assert_uint_eq(covered, L * world);
            } else {
                ck_assert_uint_eq(covered, n);
                ck_assert_uint_eq(twice, L * world - n); /* the padding alone */
            }
            free(count);
            free(all);
            fake_free(&full);
        }
}
END_TEST

START_TEST(a_position_reads_the_same_sample_whatever_was_read_before)
{
    fake f;
    fake_init(&f, unequal, 8, 3, 5, 1, 0, 1, 0);
    uint64_t *o = epoch_order(&f, 2);
    gf__cursor c;
    gf__cursor_start(&c, &f.s, NULL, &f.se, NULL, 2, 0);
    for (uint64_t p = f.n; p-- > 0;) /* backwards, across windows */
        ck_assert_uint_eq(gf__cursor_sample(&c, 2, p, NULL), o[p]);
    free(o);
    fake_free(&f);
}
END_TEST

START_TEST(remote_data_is_told_by_its_scheme)
{
    ck_assert(gf__data_is_remote("http://h/a-{0..3}.tar"));
    ck_assert(gf__data_is_remote("https://h/a.tar"));
    ck_assert(gf__data_is_remote("s3://bucket/a.tar"));
    ck_assert(!gf__data_is_remote("/data/a.tar"));
    ck_assert(!gf__data_is_remote("httpx/a.tar"));
    ck_assert(!gf__data_is_remote(NULL));
    gf_settings s;
    gf_default_settings(&s);
    ck_assert_int_eq(s.order, GF_ORDER_AUTO);
    s.data = "s3://bucket/a.tar";
    gf__resolve_settings(&s);
    ck_assert_int_eq(s.order, GF_ORDER_SHARDS);
    ck_assert_int_eq(s.shard_window, 4);
    gf_default_settings(&s);
    s.data = "local/a.tar";
    gf__resolve_settings(&s);
    ck_assert_int_eq(s.order, GF_ORDER_GLOBAL);
    ck_assert_int_eq(gf_settings_set(&s, "order", "shards", NULL, 0), 0);
    ck_assert_int_eq(s.order, GF_ORDER_SHARDS);
    ck_assert_int_eq(gf_settings_set(&s, "shard_window", "2", NULL, 0), 0);
    ck_assert_int_eq(s.shard_window, 2);
    ck_assert_int_eq(gf_settings_set(&s, "shard_window", "65537", NULL, 0), GF_EINVAL);
    ck_assert_int_eq(gf_settings_set(&s, "order", "window", NULL, 0), GF_EINVAL);
}
END_TEST

/* ---- through the loader, on tar shards ------------------------------------ */

enum { PX = 8, SHARDS = 7 };
static const int members[SHARDS] = {3, 5, 1, 4, 0, 2, 6}; /* s4: zero bytes, damaged */
static char *dir;
static char pattern[4200];
static int n_samples;

static void setup(void)
{
    dir = tu_mkdtemp();
    n_samples = (int)tu_counted_shards(dir, members, SHARDS, PX, pattern, sizeof pattern);
}

static void teardown(void)
{
    tu_rmrf(dir);
    free(dir);
}

static void shard_settings(gf_settings *s)
{
    tu_cpu_settings(s);
    s->data = pattern;
    s->width = s->height = PX;
    s->transform = GF_TRANSFORM_TRAIN; /* crops keyed by the sample: bytes differ by order */
    s->batch_size = 3;
    s->threads = 2;
    s->seed = 99;
    s->shuffle = 1;
    s->epochs = 3;
    s->order = GF_ORDER_SHARDS;
    s->shard_window = 2;
    s->on_shard_error = GF_SHARD_SKIP;
}

typedef struct run {
    uint64_t hash[64];
    int64_t idx[256];
    int32_t label[256];
    int n_batches, n_idx;
} run;

/* Reads up to max batches (all, to GF_EOF, when max is 0) into r. */
static void take(gf_loader *l, run *r, int max)
{
    gf_batch *b;
    int rc;
    while ((max == 0 || r->n_batches < max) && (rc = gf_next(l, &b)) == 0) {
        size_t px = (size_t)b->count * PX * PX * 3;
        uint64_t h = gf__fnv1a64(GF__FNV1A64_BASIS, b->data, px);
        h = gf__fnv1a64(h, b->indices, (size_t)b->count * sizeof *b->indices);
        h = gf__fnv1a64(h, &b->epoch, sizeof b->epoch);
        h = gf__fnv1a64(h, &b->position, sizeof b->position);
        ck_assert_int_lt(r->n_batches, 64);
        r->hash[r->n_batches++] = h;
        for (int i = 0; i < b->count; i++) {
            ck_assert_int_lt(r->n_idx, 256);
            r->label[r->n_idx] = b->labels[i];
            r->idx[r->n_idx++] = b->indices[i];
        }
        gf_release(l, b);
    }
    if (max == 0)
        ck_assert_int_eq(rc, GF_EOF);
}

static void run_all(const gf_settings *s, run *r)
{
    memset(r, 0, sizeof *r);
    gf_loader *l = NULL;
    ck_assert_msg(gf_open(&l, s) == 0, "%s", gf_last_error(l));
    take(l, r, 0);
    gf_close(&l);
}

START_TEST(the_loader_reads_each_kept_sample_once_a_window_at_a_time)
{
    gf_settings s;
    shard_settings(&s);
    run r;
    run_all(&s, &r);
    ck_assert_int_eq(r.n_idx, 3 * n_samples);
    for (int e = 0; e < 3; e++) {
        int seen[64] = {0};
        const int64_t *o = &r.idx[e * n_samples];
        for (int i = 0; i < n_samples; i++)
            ck_assert_int_eq(seen[o[i]]++, 0);
        /* Windows of 2 shards: a shard's samples lie within a span of at most
         * the two largest shards' sizes (6 + 5). */
        for (int k = 0; k < SHARDS; k++) {
            int lo = n_samples, hi = -1;
            for (int i = 0; i < n_samples; i++)
                if (r.label[e * n_samples + i] == k) {
                    lo = i < lo ? i : lo;
                    hi = i > hi ? i : hi;
                }
            if (hi >= 0)
                ck_assert_int_le(hi - lo + 1, 11);
        }
    }
}
END_TEST

START_TEST(batches_are_the_same_bytes_at_any_threads_and_depth)
{
    gf_settings s;
    shard_settings(&s);
    run ref, r;
    s.threads = 1;
    s.prefetch_depth = 1;
    run_all(&s, &ref);
    const int threads[] = {1, 3}, depths[] = {1, 4};
    for (int t = 0; t < 2; t++)
        for (int d = 0; d < 2; d++) {
            s.threads = threads[t];
            s.prefetch_depth = depths[d];
            run_all(&s, &r);
            ck_assert_int_eq(r.n_batches, ref.n_batches);
            ck_assert_msg(memcmp(r.hash, ref.hash, sizeof ref.hash) == 0,
                          "threads %d depth %d differ", threads[t], depths[d]);
        }
    /* And not the global order's. */
    s.order = GF_ORDER_GLOBAL;
    run_all(&s, &r);
    ck_assert(memcmp(r.idx, ref.idx, sizeof ref.idx) != 0);
}
END_TEST

START_TEST(seek_and_state_resume_give_the_uninterrupted_batches)
{
    gf_settings s;
    shard_settings(&s);
    run ref;
    run_all(&s, &ref);
    for (int at = 1; at < ref.n_batches; at += 3) {
        /* Stop after `at` batches, save, resume in a fresh loader. */
        gf_loader *l = NULL;
        ck_assert_int_eq(gf_open(&l, &s), 0);
        run a = {0};
        take(l, &a, at);
        gf_state st;
        ck_assert_int_eq(gf_get_state(l, &st), 0);
        ck_assert_uint_eq(st.version, GF_STATE_VERSION);
        ck_assert_uint_eq(st.shard_window, 2);
        gf_close(&l);
        ck_assert_int_eq(gf_open(&l, &s), 0);
        ck_assert_msg(gf_set_state(l, &st) == 0, "%s", gf_last_error(l));
        take(l, &a, 0);
        gf_close(&l);
        ck_assert_int_eq(a.n_batches, ref.n_batches);
        ck_assert_msg(memcmp(a.hash, ref.hash, sizeof ref.hash) == 0, "resumed at %d", at);
        /* gf_seek to the same (epoch, position). */
        ck_assert_int_eq(gf_open(&l, &s), 0);
        ck_assert_int_eq(gf_seek(l, st.epoch, st.position), 0);
        run b = {0};
        take(l, &b, 0);
        gf_close(&l);
        ck_assert_msg(memcmp(b.hash, &ref.hash[at], (size_t)(ref.n_batches - at) * 8) == 0,
                      "sought at %d", at);
    }
}
END_TEST

START_TEST(a_state_of_another_order_is_refused)
{
    gf_settings s;
    shard_settings(&s);
    gf_loader *l = NULL;
    ck_assert_int_eq(gf_open(&l, &s), 0);
    gf_state shards;
    ck_assert_int_eq(gf_get_state(l, &shards), 0);
    gf_close(&l);

    s.order = GF_ORDER_GLOBAL;
    ck_assert_int_eq(gf_open(&l, &s), 0);
    gf_state global;
    ck_assert_int_eq(gf_get_state(l, &global), 0);
    ck_assert_uint_eq(global.version, GF_STATE_VERSION);
    ck_assert_uint_eq(global.shard_window, 0);
    ck_assert_int_eq(gf_set_state(l, &shards), GF_EINVAL);
    ck_assert_ptr_nonnull(strstr(gf_last_error(l), "saved in order shards (shard_window 2)"));
    ck_assert_ptr_nonnull(strstr(gf_last_error(l), "reads order global"));
    global.shard_window = 77;
    ck_assert_int_eq(gf_set_state(l, &global), GF_EINVAL);
    global.version = 1; /* an earlier library's global state: those bytes were padding */
    ck_assert_int_eq(gf_set_state(l, &global), 0);
    gf_close(&l);

    s.order = GF_ORDER_SHARDS;
    s.shard_window = 3;
    ck_assert_int_eq(gf_open(&l, &s), 0);
    ck_assert_int_eq(gf_set_state(l, &shards), GF_EINVAL);
    ck_assert_ptr_nonnull(strstr(gf_last_error(l), "shard_window 3"));
    ck_assert_int_eq(gf_set_state(l, &global), GF_EINVAL);
    gf_close(&l);
}
END_TEST

START_TEST(ranks_read_disjoint_spans_through_the_loader)
{
    gf_settings s;
    shard_settings(&s);
    s.epochs = 1;
    s.batch_size = 1;
    int count[64] = {0};
    for (int r = 0; r < 3; r++) {
        s.rank = r;
        s.world = 3;
        run o;
        run_all(&s, &o);
        ck_assert_int_eq(o.n_idx, (n_samples + 2) / 3);
        for (int i = 0; i < o.n_idx; i++)
            count[o.idx[i]]++;
    }
    int twice = 0;
    for (int i = 0; i < n_samples; i++) {
        ck_assert_int_gt(count[i], 0);
        twice += count[i] - 1;
    }
    ck_assert_int_eq(twice, 3 * ((n_samples + 2) / 3) - n_samples);
}
END_TEST

START_TEST(order_shards_on_data_that_is_not_tar_shards_is_refused)
{
    char *root = tu_image_folder(2, 3, PX, PX, "png");
    gf_settings s;
    tu_exact_settings(&s, root, PX, PX);
    s.order = GF_ORDER_SHARDS;
    gf_loader *l = NULL;
    ck_assert_int_eq(gf_open(&l, &s), GF_EINVAL);
    ck_assert_msg(strstr(gf_last_error(l), "order shards needs tar shards") &&
                      strstr(gf_last_error(l), "is an ImageFolder"),
                  "%s", gf_last_error(l));
    gf_close(&l);
    /* auto is global for local data: it opens, in the usual order. */
    s.order = GF_ORDER_AUTO;
    ck_assert_int_eq(gf_open(&l, &s), 0);
    gf_close(&l);

    char list[4096];
    snprintf(list, sizeof list, "%s/list.txt", root);
    tu_write_text(list, "class_0/img_0.png 0\n");
    s.data = list;
    s.order = GF_ORDER_SHARDS;
    ck_assert_int_eq(gf_open(&l, &s), GF_EINVAL);
    ck_assert_ptr_nonnull(strstr(gf_last_error(l), "is a list file"));
    gf_close(&l);
    s.data = root;
    const char *paths[] = {"class_0/img_0.png"};
    const int32_t labels[] = {0};
    ck_assert_int_eq(gf_open_samples(&l, &s, paths, labels, 1), GF_EINVAL);
    ck_assert_ptr_nonnull(strstr(gf_last_error(l), "gf_open_samples"));
    gf_close(&l);
    tu_rmrf(root);
    free(root);
}
END_TEST

static Suite *shard_order_suite(void)
{
    Suite *su = suite_create("shard_order");
    TCase *tc = tcase_create("order");
    tcase_add_test(tc, every_sample_is_read_once_an_epoch);
    tcase_add_test(tc, a_windows_samples_take_one_contiguous_range_of_positions);
    tcase_add_test(tc, the_shard_permutation_differs_across_epochs_and_seeds);
    tcase_add_test(tc, ranks_take_disjoint_contiguous_spans_that_cover_the_epoch);
    tcase_add_test(tc, a_position_reads_the_same_sample_whatever_was_read_before);
    tcase_add_test(tc, remote_data_is_told_by_its_scheme);
    suite_add_tcase(su, tc);
    tc = tcase_create("loader");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, the_loader_reads_each_kept_sample_once_a_window_at_a_time);
    tcase_add_test(tc, batches_are_the_same_bytes_at_any_threads_and_depth);
    tcase_add_test(tc, seek_and_state_resume_give_the_uninterrupted_batches);
    tcase_add_test(tc, a_state_of_another_order_is_refused);
    tcase_add_test(tc, ranks_read_disjoint_spans_through_the_loader);
    tcase_add_test(tc, order_shards_on_data_that_is_not_tar_shards_is_refused);
    suite_add_tcase(su, tc);
    return su;
}

int main(void)
{
    return tu_run_suite(shard_order_suite());
}
