/* gpufeed-decode-cost: what one sample's CPU work costs, split into JPEG
 * decode and resample, with and without DCT-scaled partial decoding.
 *
 *   gpufeed-decode-cost [image.jpg] [iterations]
 *
 * Without a file it encodes a 500x375 photo-like JPEG (quality 90). Prints
 * per-sample milliseconds for a 224x224 RGB train transform (random
 * resized crop + flip), the resample share of it, the speed-up of the
 * DCT-scaled + cropped decode over a full-size decode, and the floor under
 * any JPEG loader: libjpeg's entropy decoding of the whole file alone
 * (jpeg_read_coefficients: no IDCT, no colour, no resample), which every
 * decode pays down to its crop's last row.
 *
 * INTERNAL: includes the library's private headers (src/decode.h, src/resample.h) and
 * links gpufeed_core; it moves with them.
 */
#include "decode.h"
#include "resample.h"

#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-function"
#include <stb_image_write.h>
#pragma GCC diagnostic pop

typedef struct membuf {
    uint8_t *p;
    size_t n, cap;
} membuf;

static void put(void *ctx, void *data, int size)
{
    membuf *m = ctx;
    if (m->n + (size_t)size > m->cap) {
        m->cap = (m->n + (size_t)size) * 2;
        m->p = realloc(m->p, m->cap);
        if (!m->p) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
    }
    memcpy(m->p + m->n, data, (size_t)size);
    m->n += (size_t)size;
}

/* Smooth shapes, edges and a little noise: compresses like a photo. */
static uint8_t *photo(int w, int h)
{
    uint8_t *px = malloc((size_t)w * h * 3);
    uint32_t s = 12345;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) {
                s = s * 1664525u + 1013904223u;
                double v = 120 + 60 * sin(x / (17.0 + 5 * c) + y / 23.0) +
                           35 * cos(hypot(x - w / 3.0, y - h / 2.0) / (9.0 + c)) +
                           ((x / 40 + y / 40) % 2 ? 20 : -20) + (double)(s >> 28) - 8;
                px[((size_t)y * w + x) * 3 + c] = (uint8_t)fmin(255, fmax(0, v));
            }
    return px;
}

static double run_once(gf__decoder *d, const membuf *img, const gf__transform *t, int iters,
                       uint8_t *out, double *resample_ms)
{
    double tot0, rs0, tot1, rs1;
    char why[256];
    int used;
    gf__decoder_times(d, &tot0, &rs0);
    for (int i = 0; i < iters; i++)
        if (gf__decode(d, img->p, img->n, t, gf__sample_key(1, 0, (uint64_t)i), out, &used, why,
                       sizeof why) < 0) {
            fprintf(stderr, "decode failed: %s\n", why);
            exit(1);
        }
    gf__decoder_times(d, &tot1, &rs1);
    *resample_ms = (rs1 - rs0) * 1e3 / iters;
    return (tot1 - tot0) * 1e3 / iters;
}

/* Best of 7 rounds (the machine may be shared): the lowest total, and
 * separately the lowest resample time. */
static double run(gf__decoder *d, const membuf *img, const gf__transform *t, int iters,
                  uint8_t *out, double *resample_ms)
{
    double best = 1e30, best_rs = 1e30, rs;
    for (int r = 0; r < 7; r++) {
        double tot = run_once(d, img, t, iters / 7 + 1, out, &rs);
        best = tot < best ? tot : best;
        best_rs = rs < best_rs ? rs : best_rs;
    }
    *resample_ms = best_rs;
    return best;
}

#if GF_HAVE_TURBO
#include <jpeglib.h>

typedef struct floor_err {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
} floor_err;

static void floor_error_exit(j_common_ptr ci)
{
    longjmp(((floor_err *)ci->err)->jb, 1);
}

/* Entropy decoding alone: ms per file, best of 7 rounds; < 0 on an error. */
static double entropy_only_ms(const membuf *img, int iters)
{
    struct jpeg_decompress_struct ci;
    floor_err e;
    memset(&ci, 0, sizeof ci); /* destroyable even if create fails */
    ci.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = floor_error_exit;
    if (setjmp(e.jb)) {
        jpeg_destroy_decompress(&ci);
        return -1;
    }
    jpeg_create_decompress(&ci);
    double best = 1e30;
    for (int r = 0; r < 8; r++) { /* the first round warms up */
        double t0 = gf__now();
        int n = iters / 7 + 1;
        for (int i = 0; i < n; i++) {
            jpeg_mem_src(&ci, img->p, (unsigned long)img->n);
            jpeg_read_header(&ci, TRUE);
            jpeg_read_coefficients(&ci);
            jpeg_abort_decompress(&ci);
        }
        double ms = (gf__now() - t0) * 1e3 / n;
        if (r > 0 && ms < best)
            best = ms;
    }
    jpeg_destroy_decompress(&ci);
    return best;
}
#endif

int main(int argc, char **argv)
{
    membuf img = {0};
    int iters = argc > 2 ? atoi(argv[2]) : 400;
    iters = iters > 0 ? iters : 400;
    if (argc > 1 && strcmp(argv[1], "-") != 0) {
        FILE *f = fopen(argv[1], "rb");
        if (!f) {
            perror(argv[1]);
            return 1;
        }
        uint8_t buf[65536];
        size_t k;
        while ((k = fread(buf, 1, sizeof buf, f)) > 0)
            put(&img, buf, (int)k);
        fclose(f);
    } else {
        uint8_t *px = photo(500, 375);
        stbi_write_jpg_to_func(put, &img, 500, 375, 3, px, 90);
        free(px);
        printf("image: synthetic 500x375 photo-like JPEG, quality 90, %zu bytes\n", img.n);
    }

    gf_settings s;
    memset(&s, 0, sizeof s);
    s.width = s.height = 224;
    s.channels = 3;
    s.transform = GF_TRANSFORM_TRAIN;
    s.scale_min = 0.08f;
    s.scale_max = 1.0f;
    s.ratio_min = 3.0f / 4;
    s.ratio_max = 4.0f / 3;
    s.flip_prob = 0.5f;
    s.crop_fraction = 0.875f;
    gf__transform t;
    gf__transform_from_settings(&t, &s);

    gf__decoder *d;
    if (gf__decoder_create(&d) < 0)
        return 1;
    uint8_t *out = malloc(224 * 224 * 3);
    double rs;
    printf("224x224 RGB, %d samples each (best of 7 rounds), ms per sample:\n", iters);
    printf("%-34s %8s %8s %8s %8s\n", "", "total", "decode", "resample", "ratio");
    struct {
        const char *name;
        gf_decoder_kind dec;
        int full;
        gf_transform kind;
    } modes[] = {
#if GF_HAVE_TURBO
        {"turbo, DCT-scaled + cropped", GF_DECODER_TURBO, 0, GF_TRANSFORM_TRAIN},
        {"turbo, full decode", GF_DECODER_TURBO, 1, GF_TRANSFORM_TRAIN},
        {"turbo, eval (DCT-scaled)", GF_DECODER_TURBO, 0, GF_TRANSFORM_EVAL},
        {"turbo, eval (full decode)", GF_DECODER_TURBO, 1, GF_TRANSFORM_EVAL},
#endif
        {"stb_image (full decode)", GF_DECODER_STB, 0, GF_TRANSFORM_TRAIN},
    };
    double scaled = 0, full = 0;
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        t.decoder = modes[m].dec;
        t.full_decode = modes[m].full;
        t.kind = modes[m].kind;
        run_once(d, &img, &t, iters / 10 + 1, out, &rs); /* warm up */
        double tot = run(d, &img, &t, iters, out, &rs);
        printf("%-34s %8.3f %8.3f %8.3f %7.1f%%\n", modes[m].name, tot, tot - rs, rs,
               100 * rs / (tot - rs));
        if (m == 0)
            scaled = tot;
        if (m == 1)
            full = tot;
    }
    if (scaled > 0 && full > 0)
        printf("DCT-scaled + cropped decode speed-up over full decode: %.2fx\n", full / scaled);
#if GF_HAVE_TURBO
    double floor_ms = entropy_only_ms(&img, iters);
    if (floor_ms > 0 && full > 0 && scaled > 0)
        printf("entropy decoding alone (the whole file): %.3f ms = %.0f%% of the full decode, "
               "%.0f%% of the cropped one\n",
               floor_ms, 100 * floor_ms / full, 100 * floor_ms / scaled);
#endif
    printf("decoder scratch: %zu bytes\n", gf__decoder_scratch_bytes(d));
    gf__decoder_destroy(d);
    free(out);
    free(img.p);
    return 0;
}
