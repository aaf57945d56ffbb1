/* gf_open with any settings over a folder of awkward images (1x1, 1x200,
 * 200x1, 17x13): a refusal that names the setting, or batches of the
 * shape asked for. Every row of the library's settings table
 * (gf_setting_at) is drawn, in table order, one byte each: a value at or
 * just past the row's bounds, a boundary value of its type (0, -1, huge,
 * NaN, infinity), or a small one; a setting added to the table is fuzzed
 * with no change here. Half the inputs write the field as a C caller
 * would; the other half go through gf_settings_set, which must refuse
 * exactly what gf_open would. */
#include "fuzz.h"
#include "testutil.h"
#include "gpufeed.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

static uint8_t next_byte(reader *r)
{
    if (!r->n)
        return 0;
    r->n--;
    return *r->p++;
}

/* One value for row w from byte b, written into s. */
static void draw(const gf_setting_info *w, uint8_t b, gf_settings *s)
{
    char *at = (char *)s + w->offset;
    switch (w->type) {
    case GF_SETTING_INT:
    case GF_SETTING_CHOICE:
    case GF_SETTING_FLAG: {
        int n = 0; /* choices */
        while (w->type == GF_SETTING_CHOICE && w->choices[n])
            n++;
        int64_t hi = w->type == GF_SETTING_CHOICE ? n - 1 : (int64_t)w->max_int;
        int64_t lo = w->type == GF_SETTING_CHOICE ? 0 : w->min_int;
        const int64_t edge[] = {0, 1, -1, lo, lo - 1, hi, hi + 1, 0x7fffffff, INT32_MIN};
        int64_t v = b < 72 ? edge[b % 9] : lo + (b - 72) % 6;
        if (v < INT32_MIN || v > INT32_MAX)
            v = INT32_MAX;
        *(int *)at = (int)v;
        break;
    }
    case GF_SETTING_U64: {
        const uint64_t edge[] = {0, 1, 2, 100, 4096, 1u << 20, UINT64_MAX, UINT64_MAX / 2,
                                 (uint64_t)w->min_int, (uint64_t)w->min_int - 1};
        *(uint64_t *)at = b < 100 ? edge[b % 10] : (uint64_t)w->min_int + (b - 100) % 4;
        break;
    }
    case GF_SETTING_PATH: { /* mostly none (cache_dir refuses local data), else
                               empty, missing, a directory */
        static const char *const paths[] = {NULL, "", "/nonexistent/gpufeed-fuzz", "."};
        *(const char **)at = paths[b % 16 < 4 ? b % 16 : 0];
        break;
    }
    case GF_SETTING_TEXT: { /* fields: mostly unset, else good and bad specs */
        static const char *const texts[] = {NULL, "", "jpg,cls,txt", "jpg;png,cls,json:bytes",
                                            "jpg,,cls", "txt", "jpg:nothing", "x.npy"};
        *(const char **)at = texts[b % 16 < 8 ? b % 16 : 0];
        break;
    }
    default: { /* FLOAT, FLOAT4 */
        const float edge[] = {0.0f, -0.0f, 1.0f, -1.0f, NAN, INFINITY, -INFINITY, 1e-30f, 1e30f,
                              1e-3f, 0.999f, 2.0f, (float)w->min_float, (float)w->max_float};
        float lo = w->min_float > -10 ? (float)w->min_float : -10,
              hi = w->max_float < 10 ? (float)w->max_float : 10;
        float v = b < 56 ? edge[b % 14] : lo + (hi - lo) * (float)(b - 56) / 199.0f;
        for (int c = 0; c < (w->type == GF_SETTING_FLOAT ? 1 : 4); c++)
            ((float *)at)[c] = c && b % 3 ? ((float *)at)[0] : v;
        break;
    }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char *root;
    if (!root) {
        root = tu_mkdtemp();
        static const int dims[][2] = {{1, 1}, {1, 200}, {200, 1}, {17, 13}};
        char p[4096];
        for (int i = 0; i < 4; i++) {
            snprintf(p, sizeof p, "%s/c%d/i.%s", root, i % 2, i % 2 ? "jpg" : "png");
            if (i % 2)
                tu_write_jpg(p, dims[i][0], dims[i][1], 3, (uint32_t)i, 90);
            else
                tu_write_png(p, dims[i][0], dims[i][1], i == 2 ? 1 : 3, (uint32_t)i);
            p[strlen(p) - 5] = 'j'; /* c0/j.png, c1/j.jpg: a second one each */
            if (i % 2)
                tu_write_jpg(p, dims[i][1], dims[i][0], 1, (uint32_t)i, 50);
            else
                tu_write_png(p, dims[i][1], dims[i][0], 4, (uint32_t)i);
        }
        fuzz_remove_at_exit(root);
    }
    reader r = {data, size};
    gf_settings s, drawn;
    gf_default_settings(&s);
    int by_name = next_byte(&r) & 1;
    /* A PATH setting keeps the text it is set from (gf_settings_set): each
     * setting's text lives until gf_open has read it. */
    char texts[96][160];
    FUZZ_CHECK(gf_setting_count() <= 96);
    for (int i = 0; i < gf_setting_count(); i++) {
        const gf_setting_info *w = gf_setting_at(i);
        uint8_t b = next_byte(&r);
        if (b == 0xff)
            continue; /* the default */
        drawn = s;
        draw(w, b, &drawn);
        if (!by_name) {
            s = drawn;
            continue;
        }
        /* the same value as text: the setter takes it iff gf_open's row check does */
        char *text = texts[i], why[320];
        FUZZ_CHECK(gf_settings_get(&drawn, w->name, text, sizeof texts[i]) >
                   (w->type == GF_SETTING_PATH || w->type == GF_SETTING_TEXT ? -1 : 0)); /* "" */
        gf_settings t = s;
        int rc = gf_settings_set(&t, w->name, text, why, sizeof why);
        FUZZ_CHECK(rc == 0 || (rc == GF_EINVAL && strncmp(why, w->name, strlen(w->name)) == 0));
        if (rc == 0)
            s = t;
    }
    s.data = root;
    s.device = GF_DEVICE_CPU;
    s.threads = 1 + next_byte(&r) % 2;
    s.world = s.world > 4 ? 4 : s.world;
    if (s.epochs > 2)
        s.epochs = 2;
    if (s.max_threads > 2 || s.max_threads < 0)
        s.max_threads = 2;

    /* What a fuzzer's memory allows: the ring, bounded here, not by gf_open. */
    double ring = (double)(s.batch_size > 0 ? s.batch_size : 1) * (s.height > 0 ? s.height : 1) *
                  (s.width > 0 ? s.width : 1) * 16.0 *
                  (s.prefetch_depth > 0 ? s.prefetch_depth : 4);
    if (ring > 64.0 * (1 << 20) || s.queue_depth > 64)
        return 0;

    gf_loader *l = NULL;
    int rc = gf_open(&l, &s);
    if (rc != 0) {
        FUZZ_CHECK(l == NULL || gf_last_error(l)[0] != '\0');
        gf_close(&l);
        return 0;
    }
    gf_batch *b = NULL;
    for (int k = 0; k < 2 && (rc = gf_next(l, &b)) == 0; k++) {
        FUZZ_CHECK(b->count >= 1 && b->count <= s.batch_size);
        FUZZ_CHECK(b->height == s.height && b->width == s.width && b->channels == s.channels);
        for (int i = 0; i < b->count; i++)
            FUZZ_CHECK(b->labels[i] == 0 || b->labels[i] == 1);
        FUZZ_CHECK(gf_release(l, b) == 0);
    }
    FUZZ_CHECK(rc == 0 || rc == GF_EOF || gf_last_error(l)[0] != '\0');
    gf_close(&l);
    return 0;
}

/* in[1 + row] = b for the row named `name`. */
static void seed_row(uint8_t *in, size_t len, const char *name, uint8_t b)
{
    for (int i = 0; i < gf_setting_count() && (size_t)i + 1 < len; i++)
        if (strcmp(gf_setting_at(i)->name, name) == 0)
            in[1 + i] = b;
}

void fuzz_seeds(fuzz_emit emit)
{
    /* Bytes per table row (0xff keeps the default), then threads. By
     * field: batch 2, 6x5, depth 2, train; then by name, eval bfloat16. */
    uint8_t in[80];
    memset(in, 0xff, sizeof in);
    in[0] = 0;
    seed_row(in, sizeof in, "batch_size", 72 + 1); /* a small value: min + 1 */
    seed_row(in, sizeof in, "height", 72 + 5);
    seed_row(in, sizeof in, "width", 72 + 4);
    seed_row(in, sizeof in, "prefetch_depth", 72 + 1);
    emit("settings-train", in, sizeof in);
    in[0] = 1;
    seed_row(in, sizeof in, "transform", 72 + 1);
    seed_row(in, sizeof in, "dtype", 72 + 3);
    emit("settings-eval-bf16", in, sizeof in);
}
