/*
 * gpufeed prepare --plan SRC: which setting to prepare with, by
 * measurement. An evenly spread sample of SRC (--plan-samples, default
 * 200; where it starts is --seed's) goes through prepare's own encoder
 * (prep_encode) for each setting of prep_plan_sides x {jpeg, raw}, and
 * as it is (the originals). Each setting's sample is written as one tar
 * shard in a temporary directory, laid out as prepare lays a shard out,
 * and three figures are taken:
 *   - bytes: what prepare would store for the sample, scaled to the set;
 *   - images/s: the library's loader over that shard, with the user's
 *     threads, image size and transform: the median of three passes (a
 *     pass is whole epochs of the sample, at least PASS_IMAGES images,
 *     after a first batch untimed; the settings in turn within a pass).
 *     The shard is in the page cache: decode cost, not storage speed;
 *   - PSNR: the eval crop (--image-size) of each prepared image against
 *     the same crop of the original's decode (gf_decoder_decode, the
 *     eval transform: the box is the same region of the picture at any
 *     size).
 * A sample any step cannot read or decode is bad: left out of every
 * setting, and counted (a setting is compared on the same images).
 * prepare_plan_report.c prints the result. The command's thread only;
 * the loader's threads are the library's.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "prepare.h"
#include "sysinfo.h"
#include "tar_write.h"

#define CMD "prepare"

const int prep_plan_sides[PLAN_SIDES] = {512, 384, 256, 160};

enum { PASSES = 3, PASS_IMAGES = 128, MAX_BATCH = 64 };

typedef struct plan_ctx {
    const prep_opts *o;
    gf_index *ix;
    plan_result *p;
    prep_opts row_opts[PLAN_ROWS];   /* each encoder keeps a pointer to its own */
    prep_encoder *enc[PLAN_ROWS];
    gf_decoder *eval;                /* the crop PSNR is taken on */
    uint8_t *ref, *crop;             /* the original's crop, a prepared one's */
    size_t crop_len;
    char dir[4096];                  /* the temporary shards */
    FILE *tar[PLAN_ROWS];
    uint64_t at[PLAN_ROWS];          /* each shard's size so far */
    prep_keys *keys;
} plan_ctx;

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* The i-th of k indices spread evenly over n, all shifted by one seeded
 * fraction of the stride: distinct, in index order, the same every run. */
static uint64_t sample_index(uint64_t i, uint64_t k, uint64_t n, uint64_t seed)
{
    double u = (double)(splitmix64(seed) >> 11) * 0x1p-53;
    uint64_t at = (uint64_t)(((double)i + u) * (double)n / (double)k);
    return at < n ? at : n - 1;
}

static uint64_t padded(uint64_t len)
{
    return 512 + (len + 511) / 512 * 512;
}

/* The member's extension for the originals: the source's own when it is
 * a plain one (the shard indexer takes members by it), else jpg (the
 * loader sniffs the bytes; the name only has to be an image's). */
static const char *source_ext(const char *path, char *buf, size_t n)
{
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    size_t len = dot ? strlen(dot + 1) : 0;
    if (!dot || (slash && dot < slash) || len == 0 || len >= n ||
        strspn(dot + 1, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") != len)
        return "jpg";
    memcpy(buf, dot + 1, len + 1);
    return buf;
}

static int add_bad(plan_result *p, uint64_t index, int code, const char *path, const char *why)
{
    prep_result *r = &p->bad;
    prep_bad *b = realloc(r->bad, (r->n_bad + 1) * sizeof *b);
    if (!b)
        return -1;
    r->bad = b;
    size_t n = strlen(path ? path : "?") + strlen(why) + 3;
    char *reason = malloc(n);
    if (!reason)
        return -1;
    snprintf(reason, n, "%s: %s", path ? path : "?", why);
    b[r->n_bad++] = (prep_bad){index, code, reason};
    return 0;
}

static uint64_t squared_error(const uint8_t *a, const uint8_t *b, size_t n)
{
    uint64_t sse = 0;
    for (size_t i = 0; i < n; i++) {
        int d = (int)a[i] - (int)b[i];
        sse += (uint64_t)(d * d);
    }
    return sse;
}

/* Writes one member, as prepare_write.c does, and returns the bytes it
 * and its sidecar line take. */
static uint64_t put(plan_ctx *c, int r, const char *key, const char *ext, const void *data,
                    size_t len, int *err)
{
    char name[128];
    snprintf(name, sizeof name, "%s.%s", key, ext);
    if (tar_write_member(c->tar[r], name, data, len, 0) < 0)
        *err = 1;
    uint64_t at = c->at[r];
    c->at[r] += padded(len);
    return padded(len) + (uint64_t)snprintf(NULL, 0, " %s %llu %zu %s", ext,
                                            (unsigned long long)at, len, name);
}

/* Every setting of one sample, or none: a sample that fails anywhere is
 * bad for all. Returns 0 (done, or bad and recorded), -1 fatal (printed). */
static int one_sample(plan_ctx *c, uint64_t index)
{
    plan_result *p = c->p;
    const char *path = gf_index_path(c->ix, index);
    void *src = NULL;
    size_t src_len = 0;
    char why[512];
    int rc = gf_index_read(c->ix, index, &src, &src_len, why, sizeof why);
    if (rc == 0)
        rc = gf_decoder_decode(c->eval, src, src_len, 0, index, c->ref, why, sizeof why);
    const uint8_t *member[PLAN_ROWS];
    size_t len[PLAN_ROWS];
    const char *ext[PLAN_ROWS];
    uint64_t sse[PLAN_ROWS] = {0};
    char own_ext[16];
    member[0] = src;
    len[0] = src_len;
    ext[0] = source_ext(path ? path : "", own_ext, sizeof own_ext);
    for (int r = 1; rc == 0 && r < PLAN_ROWS; r++) {
        int kind;
        rc = prep_encode(c->enc[r], src, src_len, &member[r], &len[r], &ext[r], &kind, NULL, why,
                         sizeof why);
        if (rc == GF_ENOMEM || rc == GF_ENODEV) { /* the encoder's, not the sample's */
            cli_error(CMD, "--plan: %s", why);
            gf_free(src);
            return -1;
        }
        if (rc == 0 && (rc = gf_decoder_decode(c->eval, member[r], len[r], 0, index, c->crop,
                                               why, sizeof why)) != 0)
            snprintf(why + strlen(why), sizeof why - strlen(why), " (prepared as %s)",
                     p->rows[r].name);
        if (rc == 0)
            sse[r] = squared_error(c->ref, c->crop, c->crop_len);
    }
    if (rc != 0) {
        gf_free(src);
        if (add_bad(p, index, rc, path, why) < 0) {
            cli_error(CMD, "out of memory");
            return -1;
        }
        return 0;
    }
    char key[96], cls[16];
    if (prep_key_next(c->keys, path ? path : "", gf_index_shards(c->ix) > 0, index, key,
                      sizeof key) < 0) {
        gf_free(src);
        cli_error(CMD, "out of memory");
        return -1;
    }
    int cn = snprintf(cls, sizeof cls, "%d", (int)gf_index_label(c->ix, index)), err = 0;
    size_t pn = strlen(path ? path : "");
    for (int r = 0; r < PLAN_ROWS; r++) {
        uint64_t b = put(c, r, key, ext[r], member[r], len[r], &err);
        b += put(c, r, key, "cls", cls, (size_t)cn, &err);
        b += put(c, r, key, "key", path ? path : "", pn, &err) + 1; /* the line's \n */
        /* The originals are the source as it is: its bytes, no container. */
        p->rows[r].bytes += r == 0 ? src_len : b;
        p->rows[r].sse += sse[r];
        p->rows[r].values += c->crop_len;
    }
    gf_free(src);
    if (err) {
        cli_error(CMD, "--plan: writing %s: %s", c->dir, strerror(errno ? errno : EIO));
        return -1;
    }
    p->good++;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One timed pass of the loader over row r's shard: opened, its first
 * batch taken (threads started; with a consumer this fast the ring never
 * runs ahead), then pass_images timed. Returns images/s, or -1 with the
 * message printed. */
static double one_pass(plan_ctx *c, int r)
{
    const prep_opts *o = c->o;
    plan_result *p = c->p;
    char data[4200];
    snprintf(data, sizeof data, "%s/row-%d.tar", c->dir, r);
    gf_settings s = o->s;
    s.data = data;
    s.threads = o->threads;
    s.batch_size = p->batch;
    s.epochs = 0;
    s.device = GF_DEVICE_CPU; /* decoding is the CPU's either way; no device ring to start */
    s.on_error = GF_ON_ERROR_SKIP;
    gf_loader *l = NULL;
    gf_batch *b;
    uint64_t images = 0;
    double t0 = 0;
    int rc = gf_open(&l, &s);
    if (rc == 0 && (rc = gf_next(l, &b)) == 0) {
        gf_release(l, b);
        t0 = cli_now();
        while (images < p->pass_images && (rc = gf_next(l, &b)) == 0) {
            images += (uint64_t)b->count;
            gf_release(l, b);
        }
    }
    if (rc < 0) {
        cli_error(CMD, "--plan: the loader on %s: %s", p->rows[r].name, gf_last_error(l));
        gf_close(&l);
        return -1;
    }
    double rate = (double)images / (cli_now() - t0);
    gf_stats st;
    if (r == 0 && gf_get_stats(l, &st) == 0)
        p->threads = st.threads;
    gf_close(&l);
    return rate;
}

/* Each setting's median images/s of PASSES passes, the settings taken in
 * turn within each pass, so that a machine whose load changes during the
 * plan slows every setting alike rather than the ones measured last.
 * Returns 0, or -1 with the message printed. */
static int measure_rates(plan_ctx *c)
{
    double rate[PLAN_ROWS][PASSES];
    for (int pass = 0; pass < PASSES; pass++)
        for (int r = 0; r < PLAN_ROWS; r++)
            if ((rate[r][pass] = one_pass(c, r)) < 0)
                return -1;
    for (int r = 0; r < PLAN_ROWS; r++) {
        qsort(rate[r], PASSES, sizeof rate[r][0], cmp_double);
        c->p->rows[r].images_per_s = rate[r][PASSES / 2];
    }
    return 0;
}

static void name_rows(const prep_opts *o, plan_result *p)
{
    p->rows[0] = (plan_row){.name = "original", .format = -1};
    for (int k = 0; k < PLAN_SIDES; k++)
        for (int f = 0; f < 2; f++) {
            plan_row *row = &p->rows[1 + 2 * k + f];
            row->max_side = prep_plan_sides[k];
            row->format = f ? PREP_RAW : PREP_JPEG;
            if (f)
                snprintf(row->name, sizeof row->name, "%d raw", row->max_side);
            else
                snprintf(row->name, sizeof row->name, "%d jpeg q%d", row->max_side, o->quality);
        }
}

static int setup(plan_ctx *c)
{
    const prep_opts *o = c->o;
    char why[256];
    for (int r = 1; r < PLAN_ROWS; r++) {
        c->row_opts[r] = *o;
        c->row_opts[r].max_side = c->p->rows[r].max_side;
        c->row_opts[r].format = c->p->rows[r].format;
        c->row_opts[r].keep_original = 0;
        if (!(c->enc[r] = prep_encoder_new(&c->row_opts[r], why, sizeof why))) {
            cli_error(CMD, "--plan: %s", why);
            return -1;
        }
    }
    gf_settings e = o->s;
    e.transform = GF_TRANSFORM_EVAL;
    int rc = gf_decoder_open(&c->eval, &e);
    if (rc < 0) {
        char msg[512] = "out of memory";
        if (rc == GF_EINVAL) /* the open keeps no message; the one-shot call names the setting */
            gf_decode_image(&e, "", 0, 0, 0, NULL, msg, sizeof msg);
        cli_error(CMD, "--plan: %s", msg);
        return -1;
    }
    c->crop_len = (size_t)e.height * (size_t)e.width * (size_t)e.channels;
    c->ref = malloc(c->crop_len);
    c->crop = malloc(c->crop_len);
    c->keys = prep_keys_new();
    if (!c->ref || !c->crop || !c->keys) {
        cli_error(CMD, "out of memory");
        return -1;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(c->dir, sizeof c->dir, "%s/gpufeed-plan-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(c->dir)) {
        cli_error(CMD, "--plan: a temporary directory %s: %s", c->dir, strerror(errno));
        c->dir[0] = 0;
        return -1;
    }
    for (int r = 0; r < PLAN_ROWS; r++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/row-%d.tar", c->dir, r);
        if (!(c->tar[r] = fopen(path, "wb"))) {
            cli_error(CMD, "--plan: %s: %s", path, strerror(errno));
            return -1;
        }
    }
    return 0;
}

/* Closes the shards (their end blocks: a tar as prepare ends one). */
static int close_tars(plan_ctx *c)
{
    static const uint8_t zeros[1024];
    int bad = 0;
    for (int r = 0; r < PLAN_ROWS; r++) {
        if (!c->tar[r])
            continue;
        bad |= fwrite(zeros, 1, sizeof zeros, c->tar[r]) != sizeof zeros;
        bad |= fclose(c->tar[r]) != 0;
        c->tar[r] = NULL;
    }
    if (bad)
        cli_error(CMD, "--plan: writing %s: %s", c->dir, strerror(errno ? errno : EIO));
    return bad ? -1 : 0;
}

static void teardown(plan_ctx *c)
{
    close_tars(c);
    if (c->dir[0]) {
        for (int r = 0; r < PLAN_ROWS; r++) {
            char path[4200];
            snprintf(path, sizeof path, "%s/row-%d.tar", c->dir, r);
            unlink(path);
        }
        rmdir(c->dir);
    }
    for (int r = 0; r < PLAN_ROWS; r++)
        prep_encoder_free(c->enc[r]);
    gf_decoder_close(&c->eval);
    prep_keys_free(c->keys);
    free(c->ref);
    free(c->crop);
}

int prep_plan(const prep_opts *o)
{
    double t0 = cli_now();
    gf_index *ix = NULL;
    int rc = gf_index_open(&ix, &o->s);
    if (rc < 0) {
        cli_error_msg(CMD, gf_index_last_error(ix), rc);
        gf_index_close(&ix);
        return CLI_USAGE;
    }
    plan_result p = {0};
    plan_ctx c = {.o = o, .ix = ix, .p = &p};
    name_rows(o, &p);
    p.set_samples = gf_index_count(ix);
    p.sampled = o->plan_samples < p.set_samples ? o->plan_samples : p.set_samples;
    p.passes = PASSES;
    int status = CLI_USAGE;
    if (setup(&c) < 0)
        goto out;
    status = CLI_FAIL;
    for (uint64_t i = 0; i < p.sampled; i++)
        if (one_sample(&c, sample_index(i, p.sampled, p.set_samples, o->s.seed)) < 0)
            goto out;
    if (close_tars(&c) < 0)
        goto out;
    if (p.good == 0) {
        cli_error(CMD, "--plan: none of the %llu sampled files could be read and decoded%s%s",
                  (unsigned long long)p.sampled, p.bad.n_bad ? "; the first: " : "",
                  p.bad.n_bad ? p.bad.bad[0].reason : "");
        goto out;
    }
    p.batch = p.good < MAX_BATCH ? (int)p.good : MAX_BATCH;
    /* Whole epochs (the last batch may be short), at least PASS_IMAGES. */
    uint64_t epochs = (PASS_IMAGES + p.good - 1) / p.good;
    p.pass_images = epochs * p.good;
    if (measure_rates(&c) < 0)
        goto out;
    for (int r = 0; r < PLAN_ROWS; r++) {
        plan_row *row = &p.rows[r];
        row->set_bytes = (double)row->bytes * (double)p.set_samples / (double)p.sampled;
        row->psnr = row->sse ? 10.0 * log10(255.0 * 255.0 * (double)row->values / (double)row->sse)
                             : INFINITY;
    }
    p.seconds = cli_now() - t0;
    prep_plan_report(o, ix, &p);
    status = CLI_OK;
out:
    teardown(&c);
    prep_result_free(&p.bad);
    gf_index_close(&ix);
    return status;
}
