/*
 * Data sets mixed by weight (settings.data "mix:W=SOURCE|..."): an
 * ImageFolder and tar shards mixed; every sample is its source's own
 * (pixels, label, index range), each source comes in the order it gives
 * alone (global and shard orders, both epoch kinds), the proportions are
 * the weights', a resume at any of 20 points is byte-identical, a
 * one-source mix is the source, and what cannot be a mix is refused.
 */
#include "run_suite.h"
#include "testutil.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PX = 16, CLASSES = 3, PER_CLASS = 7, A_N = CLASSES * PER_CLASS };
static const int counts[] = {5, 4, 6}; /* B: 15 samples, label = shard */
enum { B_SHARDS = 3, B_N = 15 };

static char *dir, *folder, shards[4096], mix[8192];

static void setup(void)
{
    folder = tu_image_folder(CLASSES, PER_CLASS, PX, PX, "png");
    dir = tu_mkdtemp();
    tu_counted_shards(dir, counts, B_SHARDS, PX, shards, sizeof shards);
    snprintf(mix, sizeof mix, "mix:2=%s|1=%s", folder, shards);
}

static void teardown(void)
{
    tu_rmrf(folder);
    tu_rmrf(dir);
    free(folder);
    free(dir);
}

static gf_loader *open_ok(const gf_settings *s)
{
    gf_loader *l = NULL;
    int rc = gf_open(&l, s);
    ck_assert_msg(rc == 0, "%s", gf_last_error(l));
    return l;
}

/* A sample's source, its own index, label and pixels' seed. */
static void expect(int src, uint64_t own, int32_t *label, uint32_t *seed)
{
    if (src == 0) { /* class folders sorted, files sorted: img_0 .. img_6 */
        *label = (int32_t)(own / PER_CLASS);
        *seed = (uint32_t)((own / PER_CLASS) * 1000 + own % PER_CLASS);
        return;
    }
    int k = 0;
    while (own >= (uint64_t)counts[k])
        own -= (uint64_t)counts[k++];
    *label = k;
    *seed = (uint32_t)(k * 100 + (int)own);
}

START_TEST(every_sample_is_its_sources_own)
{
    gf_settings s;
    tu_exact_settings(&s, mix, PX, PX);
    s.shuffle = 1;
    s.mix_epoch = _i ? GF_MIX_EPOCH_FIRST : GF_MIX_EPOCH_CYCLE;
    s.epochs = 3;
    gf_loader *l = open_ok(&s);
    ck_assert_int_eq(gf_sources(l), 2);
    gf_source_stats st[2];
    ck_assert_int_eq(gf_source_stats_get(l, 0, &st[0]), 0);
    ck_assert_int_eq(gf_source_stats_get(l, 1, &st[1]), 0);
    ck_assert_int_eq(gf_source_stats_get(l, 2, &st[1]), GF_EINVAL);
    ck_assert_uint_eq(st[0].size, A_N);
    ck_assert_uint_eq(st[1].first_index, A_N);
    ck_assert_int_eq(st[1].label_offset, CLASSES);
    ck_assert(st[0].weight > 0.666 && st[0].weight < 0.667);
    uint8_t want[PX * PX * 3];
    uint64_t delivered = 0, of[2] = {0, 0}, per[3][2] = {{0}};
    gf_batch *b;
    int rc;
    while ((rc = gf_next(l, &b)) == 0) {
        ck_assert_ptr_nonnull(b->sources);
        for (int i = 0; i < b->count; i++) {
            int src = b->sources[i];
            ck_assert(src == 0 || src == 1);
            uint64_t g = (uint64_t)b->indices[i], first = src ? A_N : 0;
            ck_assert_uint_ge(g, first);
            ck_assert_uint_lt(g, first + (src ? B_N : A_N));
            int32_t label;
            uint32_t seed;
            expect(src, g - first, &label, &seed);
            ck_assert_int_eq(b->labels[i], label + (src ? CLASSES : 0));
            tu_fill(want, PX, PX, 3, seed);
            ck_assert_msg(memcmp(b->pixels + (size_t)i * sizeof want, want, sizeof want) == 0,
                          "sample %llu of source %d: other pixels", (unsigned long long)g, src);
            of[src]++;
            per[b->epoch][src]++;
        }
        delivered += (uint64_t)b->count;
        gf_release(l, b);
    }
    ck_assert_int_eq(rc, GF_EOF);
    ck_assert_int_eq(gf_source_stats_get(l, 0, &st[0]), 0);
    ck_assert_int_eq(gf_source_stats_get(l, 1, &st[1]), 0);
    ck_assert_uint_eq(st[0].samples, of[0]);
    ck_assert_uint_eq(st[1].samples, of[1]);
    ck_assert_uint_eq(st[0].samples + st[1].samples, delivered);
    if (!_i) { /* an epoch is the sources' sizes summed */
        ck_assert_uint_eq(delivered, 3 * (A_N + B_N));
        /* 2:1 over 108 draws; shuffled, the counts are exact per block of
         * 256 positions, so a short run is within binomial bounds */
        ck_assert_msg(of[0] >= 52 && of[0] <= 92, "%llu of 108", (unsigned long long)of[0]);
        /* its own epoch: B's draws so far over its size */
        ck_assert_uint_eq(st[1].epoch, of[1] / B_N);
    } else { /* each epoch ends with the draw that exhausts a source */
        for (int e = 0; e < 3; e++) {
            ck_assert(per[e][0] <= A_N && per[e][1] <= B_N);
            ck_assert_msg(per[e][0] == A_N || per[e][1] == B_N, "epoch %d: %llu, %llu", e,
                          (unsigned long long)per[e][0], (unsigned long long)per[e][1]);
        }
    }
    gf_close(&l);
}
END_TEST

/* A source's indices in the order it gives alone, epochs after each other. */
static void alone(const char *data, gf_order order, uint64_t epochs, int64_t *out, uint64_t *n)
{
    gf_settings s;
    tu_exact_settings(&s, data, PX, PX);
    s.shuffle = 1;
    s.order = order;
    s.shard_window = 2;
    s.epochs = epochs;
    gf_loader *l = open_ok(&s);
    gf_batch *b;
    *n = 0;
    while (gf_next(l, &b) == 0) {
        for (int i = 0; i < b->count; i++)
            out[(*n)++] = b->indices[i] + (b->epoch << 32);
        gf_release(l, b);
    }
    gf_close(&l);
}

START_TEST(each_source_comes_in_its_own_order)
{
    gf_order order = _i & 1 ? GF_ORDER_SHARDS : GF_ORDER_GLOBAL;
    gf_mix_epoch kind = _i & 2 ? GF_MIX_EPOCH_FIRST : GF_MIX_EPOCH_CYCLE;
    int64_t a[1024], bb[1024], got[2][1024];
    uint64_t ep[2][1024];
    uint64_t na, nb, n[2] = {0, 0};
    alone(folder, GF_ORDER_GLOBAL, 10, a, &na);
    alone(shards, order, 10, bb, &nb);
    gf_settings s;
    tu_exact_settings(&s, mix, PX, PX);
    s.shuffle = 1;
    s.order = order;
    s.shard_window = 2;
    s.mix_epoch = kind;
    s.epochs = 4;
    gf_loader *l = open_ok(&s);
    gf_batch *b;
    while (gf_next(l, &b) == 0) {
        for (int i = 0; i < b->count; i++) {
            int src = b->sources[i];
            ep[src][n[src]] = b->epoch;
            got[src][n[src]++] = b->indices[i] - (src ? A_N : 0);
        }
        gf_release(l, b);
    }
    gf_close(&l);
    /* CYCLE: the draws are the source's epochs one after another; FIRST:
     * epoch E is a prefix of the source's epoch E (B's whole). */
    const int64_t *own[2] = {a, bb};
    uint64_t size[2] = {A_N, B_N};
    for (int src = 0; src < 2; src++) {
        uint64_t e = 0, at = 0;
        for (uint64_t k = 0; k < n[src]; k++) {
            if (kind == GF_MIX_EPOCH_FIRST && ep[src][k] != e) {
                e = ep[src][k];
                at = 0;
            }
            int64_t want = own[src][e * size[src] + at] & 0xffffffff;
            ck_assert_msg(got[src][k] == want, "order %d, kind %d, source %d, draw %llu: %lld, alone %lld",
                          (int)order, (int)kind, src, (unsigned long long)k, (long long)got[src][k],
                          (long long)want);
            at++;
            if (kind == GF_MIX_EPOCH_CYCLE && at == size[src]) {
                e++;
                at = 0;
            }
        }
    }
    (void)na;
    (void)nb;
}
END_TEST

/* Per sample: index, label, and a hash of its pixels. */
typedef struct rec {
    int64_t index;
    int32_t label;
    uint64_t hash, epoch, pos;
} rec;

static uint64_t fnv(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static void train_settings(gf_settings *s, const char *data)
{
    tu_cpu_settings(s);
    s->data = data;
    s->width = s->height = 12;
    s->batch_size = 5;
    s->threads = 2;
    s->shuffle = 1;
    s->seed = 99;
    s->epochs = 3;
}

/* From l's next batch on, up to max samples. */
static uint64_t record(gf_loader *l, rec *out, uint64_t max)
{
    uint64_t n = 0;
    gf_batch *b;
    while (n < max && gf_next(l, &b) == 0) {
        size_t each = (size_t)b->height * b->width * b->channels;
        for (int i = 0; i < b->count && n < max; i++)
            out[n++] = (rec){b->indices[i], b->labels[i], fnv(b->pixels + i * each, each),
                             b->epoch, b->position - (uint64_t)b->count + (uint64_t)i};
        gf_release(l, b);
    }
    return n;
}

START_TEST(a_resume_at_20_points_is_byte_identical)
{
    gf_settings s;
    train_settings(&s, mix);
    s.mix_epoch = _i ? GF_MIX_EPOCH_FIRST : GF_MIX_EPOCH_CYCLE;
    gf_loader *l = open_ok(&s);
    rec all[512];
    uint64_t n = record(l, all, 512);
    gf_close(&l);
    ck_assert_uint_eq(all[n - 1].epoch, 2);
    uint64_t x = 12345;
    for (int t = 0; t < 20; t++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t at = (x >> 33) % n;
        uint64_t e = all[at].epoch, pos = all[at].pos;
        gf_loader *r = open_ok(&s);
        if (t % 2) { /* through a state, as a checkpoint resumes */
            gf_state st;
            ck_assert_int_eq(gf_get_state(r, &st), 0);
            st.epoch = e;
            st.position = pos;
            ck_assert_msg(gf_set_state(r, &st) == 0, "%s", gf_last_error(r));
        } else {
            ck_assert_msg(gf_seek(r, e, pos) == 0, "%s", gf_last_error(r));
        }
        rec got[512];
        uint64_t m = record(r, got, n - at);
        ck_assert_uint_eq(m, n - at);
        for (uint64_t k = 0; k < m; k++)
            ck_assert_msg(got[k].index == all[at + k].index && got[k].label == all[at + k].label &&
                              got[k].hash == all[at + k].hash,
                          "resumed at epoch %llu position %llu: sample %llu differs", (unsigned long long)e,
                          (unsigned long long)pos, (unsigned long long)k);
        gf_close(&r);
    }
}
END_TEST

START_TEST(a_one_source_mix_is_the_source)
{
    char one[4200];
    snprintf(one, sizeof one, "mix:1=%s", shards);
    for (int order = GF_ORDER_GLOBAL; order <= GF_ORDER_SHARDS; order++) {
        gf_settings s;
        train_settings(&s, shards);
        s.order = (gf_order)order;
        s.shard_window = 2;
        gf_loader *l = open_ok(&s);
        rec want[64], got[64];
        uint64_t n = record(l, want, 64);
        gf_close(&l);
        s.data = one;
        l = open_ok(&s);
        ck_assert_uint_eq(record(l, got, 64), n);
        ck_assert_uint_eq(n, 3 * B_N);
        for (uint64_t k = 0; k < n; k++)
            ck_assert(want[k].index == got[k].index && want[k].hash == got[k].hash &&
                      want[k].label == got[k].label);
        gf_close(&l);
    }
}
END_TEST

/* A source drawn past its size starts its next epoch: new crops. */
START_TEST(a_source_that_cycles_sees_new_views)
{
    char heavy[8192];
    snprintf(heavy, sizeof heavy, "mix:1=%s|9=%s", folder, shards);
    gf_settings s;
    train_settings(&s, heavy);
    s.epochs = 1;
    gf_loader *l = open_ok(&s);
    rec r[64];
    uint64_t n = record(l, r, 64), repeats = 0, same = 0;
    ck_assert_uint_eq(n, A_N + B_N);
    for (uint64_t i = 0; i < n; i++)
        for (uint64_t j = i + 1; j < n; j++)
            if (r[i].index == r[j].index) {
                repeats++;
                same += r[i].hash == r[j].hash;
            }
    ck_assert_uint_ge(repeats, B_N); /* B's 15 drawn about 32 times */
    ck_assert_msg(same * 4 <= repeats, "%llu of %llu repeats with the same crop",
                  (unsigned long long)same, (unsigned long long)repeats);
    gf_close(&l);
}
END_TEST

START_TEST(labels_of_their_own_with_the_source)
{
    gf_settings s;
    tu_exact_settings(&s, mix, PX, PX);
    s.mix_labels = GF_MIX_LABELS_SOURCE;
    s.epochs = 1;
    gf_loader *l = open_ok(&s);
    gf_source_stats st;
    ck_assert_int_eq(gf_source_stats_get(l, 1, &st), 0);
    ck_assert_int_eq(st.label_offset, 0);
    ck_assert_int_eq(st.n_classes, B_SHARDS);
    gf_batch *b;
    uint64_t n = 0;
    while (gf_next(l, &b) == 0) {
        for (int i = 0; i < b->count; i++, n++) {
            int src = b->sources[i];
            int32_t label;
            uint32_t seed;
            expect(src, (uint64_t)b->indices[i] - (src ? A_N : 0), &label, &seed);
            ck_assert_int_eq(b->labels[i], label);
        }
        gf_release(l, b);
    }
    ck_assert_uint_eq(n, A_N + B_N);
    gf_close(&l);
}
END_TEST

static void refused(const char *data, int code, const char *says)
{
    gf_settings s;
    tu_exact_settings(&s, data, PX, PX);
    gf_loader *l = NULL;
    ck_assert_int_eq(gf_open(&l, &s), code);
    ck_assert_msg(strstr(gf_last_error(l), says), "%s: \"%s\" lacks \"%s\"", data,
                  gf_last_error(l), says);
    gf_close(&l);
}

START_TEST(what_cannot_be_a_mix_is_refused)
{
    char t[9000];
    snprintf(t, sizeof t, "mix:0=%s", folder);
    refused(t, GF_EINVAL, "source 1's weight \"0\"");
    snprintf(t, sizeof t, "mix:1=%s|-2=%s", folder, shards);
    refused(t, GF_EINVAL, "source 2's weight \"-2\"");
    snprintf(t, sizeof t, "mix:1=%s|x=%s", folder, shards);
    refused(t, GF_EINVAL, "weight \"x\"");
    snprintf(t, sizeof t, "mix:%s", folder);
    refused(t, GF_EINVAL, "WEIGHT=SOURCE expected");
    refused("mix:1=", GF_EINVAL, "no data after its weight");
    snprintf(t, sizeof t, "mix:1=%s|1=mix:1=%s", folder, folder);
    refused(t, GF_EINVAL, "not a mix");
    snprintf(t, sizeof t, "mix:1=%s|1=%s/nothing-here", folder, dir);
    refused(t, GF_EDATASET, "source 2: ");
    snprintf(t, sizeof t, "mix:1=%s|1e-9=%s", folder, shards);
    refused(t, GF_EINVAL, "never be drawn");

    /* A state of other weights or another mix_epoch names other samples. */
    gf_settings s;
    tu_exact_settings(&s, mix, PX, PX);
    gf_loader *l = open_ok(&s);
    gf_state st;
    ck_assert_int_eq(gf_get_state(l, &st), 0);
    gf_close(&l);
    s.mix_epoch = GF_MIX_EPOCH_FIRST;
    l = open_ok(&s);
    ck_assert_int_eq(gf_set_state(l, &st), GF_EINVAL);
    ck_assert_ptr_nonnull(strstr(gf_last_error(l), "index_hash"));
    gf_close(&l);
    s.mix_epoch = GF_MIX_EPOCH_CYCLE;
    snprintf(t, sizeof t, "mix:3=%s|1=%s", folder, shards);
    s.data = t;
    l = open_ok(&s);
    ck_assert_int_eq(gf_set_state(l, &st), GF_EINVAL);
    ck_assert_ptr_nonnull(strstr(gf_last_error(l), "index_hash"));
    gf_close(&l);
}
END_TEST

/* Elastic resume of a mix: a W-rank state at epoch 1, position p0,
 * resumed on W' ranks. An epoch is one sequence on every world, so what
 * the W ranks delivered before p0 and the W' ranks after it is that
 * sequence's multiset (padding added, drop_last's cut taken, as for a lone
 * data set); the next epoch is a fresh W'-rank run's; a state saved in
 * the split epoch resumes it on its world, and moves again. */
static gf_loader *open_rank(const char *data, int order, int drop, gf_mix_epoch kind,
                            uint32_t rank, uint32_t world)
{
    gf_settings s;
    tu_exact_settings(&s, data, PX, PX);
    s.shuffle = 1;
    s.seed = 5;
    s.batch_size = 2;
    s.order = (gf_order)order;
    s.shard_window = 2;
    s.drop_last = drop;
    s.mix_epoch = kind;
    s.epochs = 4;
    s.rank = (int)rank;
    s.world = (int)world;
    return open_ok(&s);
}

/* Indices of epoch's positions before `to` (UINT64_MAX: to its end) into
 * seen; *len: the epoch's end position seen. */
static void deliver(gf_loader *l, uint64_t epoch, uint64_t to, int *seen, uint64_t *len)
{
    gf_batch *b;
    while (gf_next(l, &b) == 0) {
        if (b->epoch != epoch) {
            gf_release(l, b);
            break;
        }
        uint64_t first = b->position - (uint64_t)b->count;
        for (int i = 0; i < b->count; i++)
            if (first + (uint64_t)i < to)
                seen[b->indices[i]]++;
        if (len)
            *len = b->position;
        uint64_t end = b->position; /* the batch is the loader's again once released */
        gf_release(l, b);
        if (end >= to)
            break;
    }
}

START_TEST(a_mix_resumes_on_another_number_of_ranks)
{
    static const uint32_t moves[][2] = {{4, 2}, {4, 3}, {3, 5}, {2, 1}};
    const uint32_t W = moves[_i % 4][0], W2 = moves[_i % 4][1];
    const int order = _i / 4 % 2 ? GF_ORDER_SHARDS : GF_ORDER_GLOBAL, drop = _i / 8 % 2;
    const gf_mix_epoch kind = _i / 16 ? GF_MIX_EPOCH_FIRST : GF_MIX_EPOCH_CYCLE;
    /* The epoch's sequence: one rank's epoch 1. */
    int whole[A_N + B_N] = {0};
    uint64_t size = 0, len = 0;
    gf_loader *one = open_rank(mix, order, 0, kind, 0, 1);
    ck_assert_int_eq(gf_seek(one, 1, 0), 0);
    deliver(one, 1, UINT64_MAX, whole, &size);
    gf_close(&one);
    gf_loader *l0 = open_rank(mix, order, drop, kind, 0, W);
    ck_assert_int_eq(gf_seek(l0, 1, 0), 0);
    int ignored[A_N + B_N] = {0};
    deliver(l0, 1, UINT64_MAX, ignored, &len);
    gf_close(&l0);
    ck_assert_uint_ge(len, 3);
    const uint64_t points[] = {1, len / 2, len - 1}; /* mid batch, mid shard, near the end */
    for (int pt = 0; pt < 3; pt++) {
        uint64_t p0 = points[pt];
        int seen[A_N + B_N] = {0};
        gf_state st;
        for (uint32_t r = 0; r < W; r++) {
            gf_loader *l = open_rank(mix, order, drop, kind, r, W);
            ck_assert_int_eq(gf_seek(l, 1, 0), 0);
            deliver(l, 1, p0, seen, NULL);
            ck_assert_int_eq(gf_seek(l, 1, p0), 0);
            ck_assert_int_eq(gf_get_state(l, &st), 0);
            gf_close(&l);
        }
        for (uint32_t r = 0; r < W2; r++) {
            gf_loader *l = open_rank(mix, order, drop, kind, r, W2);
            ck_assert_msg(gf_set_state(l, &st) == 0, "%u -> %u at %llu: %s", W, W2,
                          (unsigned long long)p0, gf_last_error(l));
            gf_stats stats;
            gf_get_stats(l, &stats);
            char want[64];
            snprintf(want, sizeof want, "resumed a %u-rank state on %u ranks at epoch 1", W, W2);
            ck_assert_msg(strncmp(stats.resume_note, want, strlen(want)) == 0, "%s",
                          stats.resume_note);
            if (r == 0) {
                /* Saved after a batch of the split epoch: resumed on this
                 * world, the same samples; on another, accepted. */
                gf_loader *a = open_rank(mix, order, drop, kind, 0, W2);
                gf_loader *c = open_rank(mix, order, drop, kind, 0, W2);
                ck_assert_int_eq(gf_set_state(a, &st), 0);
                gf_batch *b;
                ck_assert_int_eq(gf_next(a, &b), 0);
                gf_release(a, b);
                gf_state mid;
                ck_assert_int_eq(gf_get_state(a, &mid), 0);
                ck_assert_msg(gf_set_state(c, &mid) == 0, "%s", gf_last_error(c));
                rec x[64], y[64];
                uint64_t nx = record(a, x, 12), ny = record(c, y, 12);
                ck_assert_uint_eq(nx, ny);
                for (uint64_t k = 0; k < nx; k++)
                    ck_assert(x[k].index == y[k].index && x[k].hash == y[k].hash &&
                              x[k].epoch == y[k].epoch && x[k].pos == y[k].pos);
                gf_close(&a);
                gf_close(&c);
                gf_loader *d = open_rank(mix, order, drop, kind, 0, W2 + 1);
                ck_assert_msg(gf_set_state(d, &mid) == 0, "%s", gf_last_error(d));
                gf_close(&d);
            }
            deliver(l, 1, UINT64_MAX, seen, NULL);
            /* the next epoch: a fresh W'-rank run's */
            gf_loader *fresh = open_rank(mix, order, drop, kind, r, W2);
            ck_assert_int_eq(gf_seek(fresh, 2, 0), 0);
            ck_assert_int_eq(gf_seek(l, 2, 0), 0);
            rec a[64], b[64];
            uint64_t na = record(l, a, 20), nb = record(fresh, b, 20);
            ck_assert_uint_eq(na, nb);
            for (uint64_t k = 0; k < na; k++)
                ck_assert(a[k].index == b[k].index && a[k].hash == b[k].hash);
            gf_close(&fresh);
            gf_close(&l);
        }
        /* The sequence's multiset: nothing missing but drop_last's cut
         * (its floor on each world, each new rank's last short batch),
         * nothing extra but padding (fewer than a world's each time). */
        uint64_t extra = 0, missing = 0;
        char shown[A_N + B_N + 1];
        for (int i = 0; i < A_N + B_N; i++) {
            extra += seen[i] > whole[i] ? (uint64_t)(seen[i] - whole[i]) : 0;
            missing += whole[i] > seen[i] ? (uint64_t)(whole[i] - seen[i]) : 0;
            shown[i] = (char)('0' + (seen[i] - whole[i] + 5));
        }
        shown[A_N + B_N] = '\0';
        ck_assert_msg(drop ? extra == 0 && missing < W + 2 * W2 : missing == 0 && extra < W + W2,
                      "kind %d, order %d, drop %d, %u -> %u at %llu of %llu (sequence %llu): "
                      "%llu extra, %llu missing: %s",
                      (int)kind, order, drop, W, W2, (unsigned long long)p0,
                      (unsigned long long)len, (unsigned long long)size,
                      (unsigned long long)extra, (unsigned long long)missing, shown);
    }
}
END_TEST

/* A mix's state resumes where its folder is mounted elsewhere: its
 * identity is its files as their sources name them. */
START_TEST(a_mix_moved_elsewhere_resumes)
{
    gf_settings s;
    train_settings(&s, mix);
    gf_loader *l = open_ok(&s);
    ck_assert_int_eq(gf_seek(l, 1, 7), 0);
    gf_state st;
    ck_assert_int_eq(gf_get_state(l, &st), 0);
    rec want[16], got[16];
    uint64_t n = record(l, want, 16);
    gf_close(&l);
    char moved[4200], t[9000];
    snprintf(moved, sizeof moved, "%s-moved", folder);
    ck_assert_int_eq(rename(folder, moved), 0);
    snprintf(t, sizeof t, "mix:2=%s|1=%s", moved, shards);
    s.data = t;
    l = open_ok(&s);
    ck_assert_msg(gf_set_state(l, &st) == 0, "%s", gf_last_error(l));
    ck_assert_uint_eq(record(l, got, 16), n);
    for (uint64_t k = 0; k < n; k++)
        ck_assert(want[k].index == got[k].index && want[k].hash == got[k].hash);
    gf_close(&l);
    ck_assert_int_eq(rename(moved, folder), 0);
}
END_TEST

/* A source whose every shard is damaged: the loader refuses the mix
 * naming it; verify reports the damage and checks the other source. */
START_TEST(a_source_wholly_damaged)
{
    char *bad = tu_mkdtemp(), pattern[4096], t[9000];
    const int none[] = {0}; /* an empty file: a damaged shard */
    tu_counted_shards(bad, none, 1, PX, pattern, sizeof pattern);
    snprintf(t, sizeof t, "mix:1=%s|1=%s", folder, pattern);
    gf_settings s;
    tu_exact_settings(&s, t, PX, PX);
    s.on_shard_error = GF_SHARD_SKIP;
    gf_loader *l = NULL;
    ck_assert_int_eq(gf_open(&l, &s), GF_EDATASET);
    ck_assert_ptr_nonnull(strstr(gf_last_error(l), "source 2"));
    ck_assert_ptr_nonnull(strstr(gf_last_error(l), "every shard is damaged"));
    gf_close(&l);
    gf_verify_result *r = NULL;
    ck_assert_int_eq(gf_verify(&s, &r), 0);
    ck_assert_uint_eq(r->samples, A_N);
    ck_assert_uint_eq(r->n_damaged_shards, 1);
    gf_verify_free(&r);
    tu_rmrf(bad);
    free(bad);
}
END_TEST

static Suite *data_mix_suite(void)
{
    Suite *su = suite_create("data_mix");
    TCase *tc = tcase_create("mix");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, every_sample_is_its_sources_own, 0, 2);
    tcase_add_loop_test(tc, each_source_comes_in_its_own_order, 0, 4);
    tcase_add_loop_test(tc, a_resume_at_20_points_is_byte_identical, 0, 2);
    tcase_add_test(tc, a_one_source_mix_is_the_source);
    tcase_add_test(tc, a_source_that_cycles_sees_new_views);
    tcase_add_test(tc, labels_of_their_own_with_the_source);
    tcase_add_test(tc, what_cannot_be_a_mix_is_refused);
    tcase_add_test(tc, a_mix_moved_elsewhere_resumes);
    tcase_add_test(tc, a_source_wholly_damaged);
    tcase_add_loop_test(tc, a_mix_resumes_on_another_number_of_ranks, 0, 32);
    suite_add_tcase(su, tc);
    return su;
}

int main(void)
{
    return tu_run_suite(data_mix_suite());
}
