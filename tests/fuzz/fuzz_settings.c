/* gf_open with any settings over a folder of awkward images (1x1, 1x200,
 * 200x1, 17x13): a refusal that names the setting, or batches of the
 * shape asked for. Each field comes from the input: a boundary value
 * (0, 1, -1, huge, NaN, infinity, tiny) or a small one. */
#include "fuzz.h"
#include "testutil.h"
#include "gpufeed.h"

#include <math.h>
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

static int an_int(reader *r, int small_max)
{
    static const int edge[] = {0, 1, -1, 2, 3, 4, 16384, 16385, 65536, 65537, 1024, 1025,
                               0x7fffffff, (int)0x80000000};
    uint8_t b = next_byte(r);
    if (b < 64)
        return edge[b % (sizeof edge / sizeof edge[0])];
    return (b - 64) % (small_max + 1);
}

static float a_float(reader *r, float lo, float hi)
{
    static const float edge[] = {0.0f, -0.0f, 1.0f, -1.0f, NAN, INFINITY, -INFINITY, 1e-30f,
                                 1e30f, 1e-3f, 0.999f, 2.0f};
    uint8_t b = next_byte(r);
    if (b < 48)
        return edge[b % (sizeof edge / sizeof edge[0])];
    return lo + (hi - lo) * (float)(b - 48) / 207.0f;
}

static uint64_t a_u64(reader *r)
{
    static const uint64_t edge[] = {0, 1, 2, 100, 4096, 1u << 20, UINT64_MAX, UINT64_MAX / 2};
    uint8_t b = next_byte(r);
    return edge[b % (sizeof edge / sizeof edge[0])];
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
    gf_settings s;
    gf_default_settings(&s);
    s.data = root;
    s.device = GF_DEVICE_CPU;
    s.threads = 1 + next_byte(&r) % 2;
    s.batch_size = an_int(&r, 9);
    s.height = an_int(&r, 40);
    s.width = an_int(&r, 40);
    s.channels = an_int(&r, 5);
    s.prefetch_depth = an_int(&r, 5);
    s.queue_depth = an_int(&r, 8);
    s.io = (gf_io)an_int(&r, 3);
    s.decoder = (gf_decoder_kind)an_int(&r, 3);
    s.transform = (gf_transform)an_int(&r, 2);
    s.on_error = (gf_on_error)an_int(&r, 2);
    s.shuffle = an_int(&r, 2);
    s.drop_last = an_int(&r, 2);
    s.world = an_int(&r, 4);
    s.rank = an_int(&r, 4);
    s.epochs = a_u64(&r) % 3;
    s.seed = a_u64(&r);
    s.max_pixels = a_u64(&r);
    s.max_file_bytes = a_u64(&r);
    s.scale_min = a_float(&r, 0.0f, 1.0f);
    s.scale_max = a_float(&r, 0.0f, 1.0f);
    s.ratio_min = a_float(&r, 0.0f, 4.0f);
    s.ratio_max = a_float(&r, 0.0f, 8.0f);
    s.flip_prob = a_float(&r, 0.0f, 1.0f);
    s.crop_fraction = a_float(&r, 0.0f, 1.0f);
    s.dtype = (gf_dtype)an_int(&r, 4);
    s.layout = (gf_layout)an_int(&r, 2);
    for (int c = 0; c < 4; c++) {
        s.mean[c] = a_float(&r, -200.0f, 300.0f);
        s.std[c] = a_float(&r, 0.0f, 100.0f);
    }
    s.flip_on_device = an_int(&r, 1);
    s.autotune = an_int(&r, 1);
    s.max_threads = an_int(&r, 3);
    s.strictness = (gf_strictness)an_int(&r, 3); /* 3: out of range, refused */
    if (s.threads > 0 && s.max_threads > 2)
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

void fuzz_seeds(fuzz_emit emit)
{
    /* Defaults-like: 1 thread, batch 2, 24x20 RGB, depth 2, train. */
    uint8_t in[64];
    memset(in, 0xff, sizeof in);
    static const uint8_t head[] = {0, 64 + 2, 64 + 24, 64 + 20, 64 + 3, 64 + 2, 64 + 4,
                                   64 + 2, 64 + 0, 64 + 0, 64 + 0, 64 + 1, 64 + 0, 64 + 1,
                                   64 + 0, 1, 0, 6, 6, 48 + 20, 48 + 207, 48 + 40, 48 + 70,
                                   48 + 100, 48 + 180, 64 + 2, 64 + 1};
    memcpy(in, head, sizeof head);
    emit("settings-train", in, sizeof in);
    in[9] = 64 + 1;  /* eval */
    in[25] = 64 + 3; /* bfloat16 */
    emit("settings-eval-bf16", in, sizeof in);
}
