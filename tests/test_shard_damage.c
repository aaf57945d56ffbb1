/* Damaged tar shards among good ones (on_shard_error): under skip exactly
 * the members before each damage are indexed and each damaged shard is
 * reported once, with its offset and counts, wherever it shows (the
 * index, the loader's callback, stats and list, gf_index); the batches do
 * not depend on the thread count or a resume; under fail the open names
 * the first damaged shard in source order. The shards are made here. */
#include "gpufeed.h"
#include "dataset.h"
#include "testutil.h"
#include "run_suite.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { W = 16, H = 12, SHARDS = 7, KEPT = 10, DAMAGED = 5 };

static char *dir;
static char src[4096];

/* What each damaged shard must report (shard index, code, offset, kept,
 * lost, a word of the reason); offsets are filled as the shards are made. */
typedef struct want_damage {
    uint32_t shard;
    int code;
    uint64_t offset, kept, lost;
    const char *cause;
} want_damage;
static want_damage want[DAMAGED];
/* The samples kept, in index order: "sK.tar:keyJ.png" and labels. */
static char want_path[KEPT][32];
static int32_t want_label[KEPT];
static int n_want;

/* Appends sample `key` (a PNG and its .cls) to w; returns the header
 * offset of its image member. */
static size_t add_sample(tu_tar *w, int shard, int j, int label)
{
    uint8_t px[W * H * 3];
    size_t len;
    tu_fill(px, W, H, 3, (uint32_t)(shard * 16 + j));
    uint8_t *png = tu_png_mem(px, W, H, 3, &len);
    char name[32], cls[16];
    size_t at = w->len;
    snprintf(name, sizeof name, "key%d.png", j);
    tu_tar_file(w, name, png, len);
    snprintf(name, sizeof name, "key%d.cls", j);
    snprintf(cls, sizeof cls, "%d\n", label);
    tu_tar_file(w, name, cls, strlen(cls));
    free(png);
    return at;
}

static void keep(int shard, int j, int label)
{
    ck_assert_int_lt(n_want, KEPT);
    snprintf(want_path[n_want], sizeof want_path[0], "s%d.tar:key%d.png", shard, j);
    want_label[n_want++] = label;
}

static void save(int shard, const void *p, size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/s%d.tar", dir, shard);
    tu_write_file(path, p, len);
}

/* s0 good (3), s1 cut inside the data of its third image, s2 cut inside
 * the header of its third image, s3 zero bytes, s4 a bad checksum on the
 * second key's .cls (that key is cut), s5 a JPEG renamed .tar, s6 good (2). */
static void setup(void)
{
    dir = tu_mkdtemp();
    n_want = 0;
    snprintf(src, sizeof src, "%s/s{0..6}.tar", dir);
    for (int s = 0; s < SHARDS; s++) {
        tu_tar w = {0};
        int n = s == 6 ? 2 : 3;
        size_t at[3] = {0};
        for (int j = 0; j < n; j++)
            at[j] = add_sample(&w, s, j, s + j);
        tu_tar_end(&w);
        size_t len = w.len;
        switch (s) {
        case 1:
            len = at[2] + 512 + 40;
            want[0] = (want_damage){1, GF_ETRUNC, at[2], 4, 1, "runs past the end"};
            break;
        case 2:
            len = at[2] + 100;
            want[1] = (want_damage){2, GF_ETRUNC, at[2], 4, 1, "truncated header"};
            break;
        case 3:
            len = 0;
            want[2] = (want_damage){3, GF_EEMPTY, 0, 0, 0, "zero bytes"};
            break;
        case 4: {
            /* key1.cls's header: its one data block, then key2.png's header. */
            size_t cls = at[2] - 1024;
            w.p[cls + 10] ^= 1;
            ck_assert_str_eq((char *)w.p + cls, "key1.cls");
            want[3] = (want_damage){4, GF_ECORRUPT, cls, 2, 2, "checksum mismatch"};
            break;
        }
        case 5: {
            uint8_t px[32 * 32 * 3];
            size_t jl;
            tu_fill(px, 32, 32, 3, 5);
            uint8_t *jpg = tu_jpg_mem(px, 32, 32, 3, 90, &jl);
            ck_assert_uint_gt(jl, 512); /* a whole block: the header check sees it */
            save(5, jpg, jl);
            free(jpg);
            want[4] = (want_damage){5, GF_ECORRUPT, 0, 0, 1, "starts like a JPEG image"};
            break;
        }
        }
        if (s != 5)
            save(s, w.p, len);
        int kept = s == 0 ? 3 : s == 1 || s == 2 ? 2 : s == 4 ? 1 : s == 6 ? 2 : 0;
        for (int j = 0; j < kept; j++)
            keep(s, j, s + j);
        free(w.p);
    }
    ck_assert_int_eq(n_want, KEPT);
}

static void teardown(void)
{
    tu_rmrf(dir);
    free(dir);
}

static void check_entry(const gf_sample_error *e, const want_damage *d)
{
    char path[64], head[64], tail[64];
    snprintf(path, sizeof path, "s%u.tar", d->shard);
    snprintf(head, sizeof head, "offset %llu: ", (unsigned long long)d->offset);
    snprintf(tail, sizeof tail, "; %llu members kept, %llu lost", (unsigned long long)d->kept,
             (unsigned long long)d->lost);
    size_t pl = strlen(e->path), rl = strlen(e->reason);
    ck_assert_msg(pl > strlen(path) && strcmp(e->path + pl - strlen(path), path) == 0 &&
                      e->path[pl - strlen(path) - 1] == '/',
                  "path '%s' is not %s", e->path, path);
    ck_assert_int_eq(e->sample, -1);
    ck_assert_msg(e->code == d->code, "%s: %s, not %s", path, gf_err_name(e->code),
                  gf_err_name(d->code));
    ck_assert_msg(strncmp(e->reason, head, strlen(head)) == 0, "%s: '%s'", head, e->reason);
    ck_assert_msg(rl > strlen(tail) && strcmp(e->reason + rl - strlen(tail), tail) == 0,
                  "'%s' does not end in '%s'", e->reason, tail);
    ck_assert_msg(strstr(e->reason, d->cause), "'%s' lacks '%s'", e->reason, d->cause);
}

START_TEST(skip_keeps_the_members_before_each_damage_and_reports_each_shard)
{
    gf__dataset ds;
    gf__dataset_opts o;
    char why[512];
    gf__dataset_default_opts(&o);
    o.shard_skip = 1;
    ck_assert_msg(gf__dataset_open_with(&ds, src, &o, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(ds.n, KEPT);
    for (int i = 0; i < KEPT; i++) {
        ck_assert_str_eq(gf__dataset_path(&ds, (uint64_t)i), want_path[i]);
        ck_assert_int_eq(ds.labels[i], want_label[i]);
    }
    ck_assert_uint_eq(ds.n_damage, DAMAGED);
    ck_assert_uint_eq(ds.members_lost, 5);
    ck_assert_uint_eq(ds.skipped_keys, 0); /* a cut key is lost, not skipped */
    gf_sample_error e[DAMAGED + 1];
    ck_assert_int_eq(gf__dataset_damage(&ds, e, DAMAGED + 1), DAMAGED);
    for (int k = 0; k < DAMAGED; k++) {
        ck_assert_uint_eq(ds.damage[k].shard, want[k].shard);
        check_entry(&e[k], &want[k]);
    }
    gf__dataset_close(&ds);
}
END_TEST

START_TEST(fail_names_the_first_damaged_shard_in_source_order)
{
    gf__dataset ds;
    char why[512], want_why[128];
    ck_assert_int_eq(gf__dataset_open(&ds, src, why, sizeof why), GF_EDATASET);
    snprintf(want_why, sizeof want_why, "s1.tar: offset %llu: member size",
             (unsigned long long)want[0].offset);
    ck_assert_msg(strstr(why, want_why), "'%s' lacks '%s'", why, want_why);

    /* Through the loader: on_error = fail follows, or on_shard_error says so. */
    char later[4096];
    snprintf(later, sizeof later, "%s/s0.tar,%s/s5.tar,%s/s3.tar", dir, dir, dir);
    for (int k = 0; k < 3; k++) {
        gf_settings s;
        tu_cpu_settings(&s);
        s.data = k == 2 ? later : src;
        s.on_error = k == 0 ? GF_ON_ERROR_FAIL : GF_ON_ERROR_SKIP;
        s.on_shard_error = k == 0 ? GF_SHARD_FOLLOW : GF_SHARD_FAIL;
        gf_loader *l = NULL;
        ck_assert_int_eq(gf_open(&l, &s), GF_EDATASET);
        const char *w = k == 2 ? "s5.tar: offset 0: not a tar archive" : want_why;
        ck_assert_msg(strstr(gf_last_error(l), w), "'%s' lacks '%s'", gf_last_error(l), w);
        gf_close(&l);
        gf_index *ix = NULL;
        ck_assert_int_eq(gf_index_open(&ix, &s), GF_EDATASET);
        ck_assert_msg(strstr(gf_index_last_error(ix), w), "%s", gf_index_last_error(ix));
        gf_index_close(&ix);
    }
    gf_settings s;
    tu_cpu_settings(&s);
    s.data = src;
    s.on_shard_error = (gf_on_shard_error)3;
    gf_loader *l = NULL;
    ck_assert_int_eq(gf_open(&l, &s), GF_EINVAL);
    gf_close(&l);
    gf_index *ix = NULL;
    ck_assert_int_eq(gf_index_open(&ix, &s), GF_EINVAL);
    ck_assert_msg(strstr(gf_index_last_error(ix), "on_shard_error: 3 is not a value of follow"), "%s",
                  gf_index_last_error(ix));
    gf_index_close(&ix);
}
END_TEST

typedef struct seen {
    gf_sample_error e[8];
    int n;
} seen;

static void on_error(void *user, int64_t sample, const char *path, int code, const char *reason)
{
    seen *s = user;
    ck_assert_int_lt(s->n, 8);
    gf_sample_error *e = &s->e[s->n++];
    e->sample = sample;
    e->code = code;
    snprintf(e->path, sizeof e->path, "%s", path);
    snprintf(e->reason, sizeof e->reason, "%s", reason);
}

typedef struct bytes {
    uint8_t *p;
    size_t len;
    int batches;
} bytes;

static void take(bytes *r, const gf_batch *b)
{
    size_t px = (size_t)b->count * b->height * b->width * b->channels;
    size_t need = px + (size_t)b->count * (sizeof(int32_t) + sizeof(int64_t));
    r->p = realloc(r->p, r->len + need);
    memcpy(r->p + r->len, b->pixels, px);
    memcpy(r->p + r->len + px, b->labels, (size_t)b->count * sizeof(int32_t));
    memcpy(r->p + r->len + px + (size_t)b->count * sizeof(int32_t), b->indices,
           (size_t)b->count * sizeof(int64_t));
    r->len += need;
    r->batches++;
}

static void loader_settings(gf_settings *s, int threads, seen *cb)
{
    tu_cpu_settings(s); /* on_error skip, on_shard_error follow */
    s->data = src;
    s->width = 10;
    s->height = 9;
    s->batch_size = 3;
    s->seed = 5;
    s->epochs = 2;
    s->threads = threads;
    s->on_sample_error = on_error;
    s->on_sample_error_user = cb;
}

/* Runs `stop` batches (-1: all), after gf_set_state(from) if given; the
 * state after the last batch into *after. */
static void run(int threads, bytes *r, int stop, const gf_state *from, gf_state *after)
{
    seen cb = {.n = 0};
    gf_settings s;
    loader_settings(&s, threads, &cb);
    gf_loader *l = NULL;
    int rc = gf_open(&l, &s);
    ck_assert_msg(rc == 0, "%s", gf_last_error(l));
    ck_assert_int_eq(cb.n, DAMAGED); /* from gf_open, once per damaged shard */
    if (from)
        ck_assert_int_eq(gf_set_state(l, from), 0);
    gf_batch *b;
    while ((stop < 0 || r->batches < stop) && (rc = gf_next(l, &b)) == 0) {
        take(r, b);
        gf_release(l, b);
    }
    if (stop < 0)
        ck_assert_msg(rc == GF_EOF, "%s", gf_last_error(l));
    if (after)
        ck_assert_int_eq(gf_get_state(l, after), 0);
    ck_assert_int_eq(cb.n, DAMAGED); /* and never again */
    gf_close(&l);
}

START_TEST(the_loader_reports_each_damaged_shard_once_and_delivers_the_kept_samples)
{
    seen cb = {.n = 0};
    gf_settings s;
    loader_settings(&s, 2, &cb);
    s.shuffle = 0;
    s.epochs = 1;
    gf_loader *l = NULL;
    ck_assert_msg(gf_open(&l, &s) == 0, "%s", gf_last_error(l));
    ck_assert_int_eq(cb.n, DAMAGED);
    for (int k = 0; k < DAMAGED; k++)
        check_entry(&cb.e[k], &want[k]);
    gf_sample_error list[DAMAGED];
    ck_assert_int_eq(gf_damaged_shards(l, NULL, 0), DAMAGED);
    ck_assert_int_eq(gf_damaged_shards(l, list, DAMAGED), DAMAGED);
    gf_stats st;
    ck_assert_int_eq(gf_get_stats(l, &st), 0);
    ck_assert_uint_eq(st.shards, SHARDS);
    ck_assert_uint_eq(st.shards_damaged, DAMAGED);
    ck_assert_uint_eq(st.shard_members_lost, 5);
    ck_assert_uint_eq(st.dataset_samples, KEPT);
    ck_assert_uint_eq(st.errors, 0); /* not sample errors */
    ck_assert_int_eq(st.n_recent, DAMAGED);
    for (int k = 0; k < DAMAGED; k++) {
        check_entry(&list[k], &want[k]);
        check_entry(&st.recent[DAMAGED - 1 - k], &want[k]); /* newest first */
    }
    int got = 0, rc;
    gf_batch *b;
    while ((rc = gf_next(l, &b)) == 0) {
        for (int i = 0; i < b->count; i++, got++) {
            ck_assert_int_lt(got, KEPT);
            ck_assert_str_eq(gf_sample_path(l, (uint64_t)b->indices[i]), want_path[got]);
            ck_assert_int_eq(b->labels[i], want_label[got]);
        }
        gf_release(l, b);
    }
    ck_assert_int_eq(rc, GF_EOF);
    ck_assert_int_eq(got, KEPT);
    gf_get_stats(l, &st);
    ck_assert_uint_eq(st.errors, 0);

    /* gf_index under the same settings indexes the same kept set (the
     * checkpoint's data-set identity hashes it): same paths and labels. */
    gf_index *ix = NULL;
    ck_assert_int_eq(gf_index_open(&ix, &s), 0);
    ck_assert_uint_eq(gf_index_count(ix), KEPT);
    for (uint64_t i = 0; i < KEPT; i++) {
        ck_assert_str_eq(gf_index_path(ix, i), gf_sample_path(l, i));
        ck_assert_int_eq(gf_index_label(ix, i), want_label[i]);
    }
    ck_assert_int_eq(gf_index_damaged_shards(ix, list, DAMAGED), DAMAGED);
    check_entry(&list[3], &want[3]);
    gf_index_close(&ix);
    gf_close(&l);
}
END_TEST

START_TEST(batches_do_not_depend_on_threads_or_a_resume)
{
    bytes one = {0}, three = {0}, head = {0}, tail = {0};
    run(1, &one, -1, NULL, NULL);
    ck_assert_int_eq(one.batches, 2 * ((KEPT + 2) / 3));
    run(3, &three, -1, NULL, NULL);
    ck_assert_uint_eq(three.len, one.len);
    ck_assert_msg(memcmp(three.p, one.p, one.len) == 0, "1 and 3 threads differ");
    gf_state mid;
    run(3, &head, 3, NULL, &mid);
    run(1, &tail, -1, &mid, NULL);
    ck_assert_uint_eq(head.len + tail.len, one.len);
    ck_assert(memcmp(head.p, one.p, head.len) == 0);
    ck_assert_msg(memcmp(tail.p, one.p + head.len, tail.len) == 0, "the resume differs");
    free(one.p);
    free(three.p);
    free(head.p);
    free(tail.p);
}
END_TEST

START_TEST(every_shard_damaged_is_no_samples_naming_the_first)
{
    char only[4096];
    snprintf(only, sizeof only, "%s/s3.tar,%s/s5.tar", dir, dir);
    gf_settings s;
    tu_cpu_settings(&s);
    s.data = only;
    seen cb = {.n = 0};
    s.on_sample_error = on_error;
    s.on_sample_error_user = &cb;
    gf_loader *l = NULL;
    ck_assert_int_eq(gf_open(&l, &s), GF_EDATASET);
    /* each damaged shard reported before the open fails (verify lists them) */
    ck_assert_int_eq(cb.n, 2);
    ck_assert_int_eq(cb.e[0].sample, -1);
    ck_assert_msg(strstr(cb.e[0].path, "s3.tar") && strstr(cb.e[1].path, "s5.tar"), "%s, %s",
                  cb.e[0].path, cb.e[1].path);
    const char *m = gf_last_error(l);
    ck_assert_msg(strstr(m, "no samples in 2 shard(s) (2 damaged; first: ") &&
                      strstr(m, "s3.tar: offset 0: zero bytes"),
                  "%s", m);
    gf_close(&l);
}
END_TEST

static Suite *damage_suite(void)
{
    Suite *su = suite_create("shard_damage");
    TCase *tc = tcase_create("damage");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, skip_keeps_the_members_before_each_damage_and_reports_each_shard);
    tcase_add_test(tc, fail_names_the_first_damaged_shard_in_source_order);
    tcase_add_test(tc, the_loader_reports_each_damaged_shard_once_and_delivers_the_kept_samples);
    tcase_add_test(tc, batches_do_not_depend_on_threads_or_a_resume);
    tcase_add_test(tc, every_shard_damaged_is_no_samples_naming_the_first);
    suite_add_tcase(su, tc);
    return su;
}

int main(void)
{
    return tu_run_suite(damage_suite());
}
