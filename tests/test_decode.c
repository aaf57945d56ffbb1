/* Decode + transform (src/decode.c) and the resampler (src/resample.c). */
#include "config.h"
#include "decode.h"
#include "resample.h"
#include "testutil.h"
#include "tu_engine.h"
#include "run_suite.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if GF_HAVE_TURBO
#include <stdio.h>
#include <jpeglib.h>
#endif

/* ---- helpers ---- */

/* Decodes with a fresh decoder; fails the test on error. */
static uint8_t *dec(const uint8_t *data, size_t len, const gf__transform *t, uint64_t key,
                    int *used_out)
{
    gf__decoder *d;
    ck_assert_int_eq(gf__decoder_create(&d), 0);
    uint8_t *out = malloc((size_t)t->out_w * t->out_h * t->channels);
    char why[256];
    int used = 0;
    int rc = gf__decode(d, data, len, t, key, out, &used, why, sizeof why);
    ck_assert_msg(rc == 0, "decode failed: %d %s", rc, why);
    gf__decoder_destroy(d);
    if (used_out)
        *used_out = used;
    return out;
}

static int dec_rc(const uint8_t *data, size_t len, const gf__transform *t, char *why,
                  size_t why_len)
{
    gf__decoder *d;
    ck_assert_int_eq(gf__decoder_create(&d), 0);
    uint8_t *out = malloc((size_t)t->out_w * t->out_h * t->channels);
    int used;
    int rc = gf__decode(d, data, len, t, 42, out, &used, why, why_len);
    free(out);
    gf__decoder_destroy(d);
    return rc;
}

static double mean_abs_diff(const uint8_t *a, const uint8_t *b, size_t n, int *max_out)
{
    double s = 0;
    int mx = 0;
    for (size_t i = 0; i < n; i++) {
        int d = abs((int)a[i] - (int)b[i]);
        s += d;
        mx = d > mx ? d : mx;
    }
    if (max_out)
        *max_out = mx;
    return s / (double)n;
}

static uint8_t luma(int r, int g, int b)
{
    return (uint8_t)((19595 * r + 38470 * g + 7471 * b + 32768) >> 16);
}

/* Expected conversion of one source pixel of n channels to C channels. */
static void expect_px(const uint8_t *s, int n, int C, uint8_t *o)
{
    int r, g, b, a = 255;
    if (n <= 2) {
        r = g = b = s[0];
        if (n == 2)
            a = s[1];
    } else {
        r = s[0];
        g = s[1];
        b = s[2];
        if (n == 4)
            a = s[3];
    }
    if (C == 1) {
        o[0] = n <= 2 ? (uint8_t)r : luma(r, g, b);
        return;
    }
    o[0] = (uint8_t)r;
    o[1] = (uint8_t)g;
    o[2] = (uint8_t)b;
    if (C == 4)
        o[3] = (uint8_t)a;
}

/* ---- PNG: exactness and conversions ---- */

START_TEST(png_rgb_identity_is_pixel_exact)
{
    const int w = 37, h = 23;
    uint8_t px[37 * 23 * 3];
    tu_fill(px, w, h, 3, 7);
    size_t len;
    uint8_t *png = tu_png_mem(px, w, h, 3, &len);
    gf__transform t = tu_eval_transform(w, h, 3, 1.0f);
    int used;
    uint8_t *out = dec(png, len, &t, 1, &used);
    ck_assert_int_eq(used, GF_HAVE_SPNG ? GF__USED_SPNG : GF__USED_STB);
    ck_assert_mem_eq(out, px, sizeof px);
    free(out);
    free(png);
}
END_TEST

START_TEST(train_with_full_scale_and_no_flip_is_identity)
{
    const int w = 40, h = 30;
    uint8_t px[40 * 30 * 3];
    tu_fill(px, w, h, 3, 8);
    size_t len;
    uint8_t *png = tu_png_mem(px, w, h, 3, &len);
    gf__transform t = tu_train_transform(w, h, 3);
    t.scale_min = t.scale_max = 1.0f;
    t.ratio_min = t.ratio_max = (float)w / h;
    t.flip_prob = 0;
    for (uint64_t key = 0; key < 5; key++) {
        uint8_t *out = dec(png, len, &t, key, NULL);
        ck_assert_mem_eq(out, px, sizeof px);
        free(out);
    }
    free(png);
}
END_TEST

/* Every source layout (gray, gray+alpha, RGB, RGBA) to every output (1, 3,
 * 4 channels): identity geometry, so the values are the conversion's. */
START_TEST(png_channel_conversions_follow_the_rules)
{
    const int w = 19, h = 11;
    for (int n = 1; n <= 4; n++) {
        uint8_t *px = malloc((size_t)w * h * n);
        tu_fill(px, w, h, n, 100 + (uint32_t)n);
        size_t len;
        uint8_t *png = tu_png_mem(px, w, h, n, &len);
        for (int C = 1; C <= 4; C++) {
            if (C == 2)
                continue;
            gf__transform t = tu_eval_transform(w, h, C, 1.0f);
            uint8_t *out = dec(png, len, &t, 3, NULL);
            for (int i = 0; i < w * h; i++) {
                uint8_t e[4];
                expect_px(px + (size_t)i * n, n, C, e);
                ck_assert_msg(memcmp(out + (size_t)i * C, e, (size_t)C) == 0,
                              "source %d channels -> %d: pixel %d differs", n, C, i);
            }
            free(out);
        }
        free(png);
        free(px);
    }
}
END_TEST

START_TEST(png_16bit_is_rounded_to_8bit)
{
    const int w = 9, h = 5;
    uint8_t raw[9 * 5 * 6];
    uint16_t v[9 * 5 * 3];
    for (int i = 0; i < w * h * 3; i++) {
        v[i] = (uint16_t)(i * 1499 + 128 * (i % 3)); /* spans 0..65535 */
        raw[2 * i] = (uint8_t)(v[i] >> 8);
        raw[2 * i + 1] = (uint8_t)v[i];
    }
    size_t len;
    uint8_t *png = tu_png_raw(w, h, 16, 2, raw, (size_t)w * 6, NULL, 0, NULL, 0, &len);
    gf__transform t = tu_eval_transform(w, h, 3, 1.0f);
    uint8_t *out = dec(png, len, &t, 0, NULL);
    for (int i = 0; i < w * h * 3; i++)
        ck_assert_int_eq(out[i], (int)(((uint32_t)v[i] * 255 + 32767) / 65535));
    free(out);
    free(png);
}
END_TEST

START_TEST(png_palette_expands_with_transparency)
{
    const int w = 8, h = 6;
    uint8_t plte[4 * 3] = {255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 20, 30};
    uint8_t trns[4] = {255, 128, 0, 255};
    uint8_t idx[8 * 6];
    for (int i = 0; i < w * h; i++)
        idx[i] = (uint8_t)((i * 7) % 4);
    size_t len;
    uint8_t *png = tu_png_raw(w, h, 8, 3, idx, (size_t)w, plte, 4, trns, 4, &len);
    gf__transform t3 = tu_eval_transform(w, h, 3, 1.0f), t4 = tu_eval_transform(w, h, 4, 1.0f);
    uint8_t *o3 = dec(png, len, &t3, 0, NULL), *o4 = dec(png, len, &t4, 0, NULL);
    for (int i = 0; i < w * h; i++) {
        ck_assert_mem_eq(o3 + 3 * i, plte + 3 * idx[i], 3);
        ck_assert_mem_eq(o4 + 4 * i, plte + 3 * idx[i], 3);
        ck_assert_int_eq(o4[4 * i + 3], trns[idx[i]]);
    }
    free(o3);
    free(o4);
    free(png);
}
END_TEST

START_TEST(eval_center_crop_picks_the_center)
{
    /* 40x30 source, 20x10 output, crop_fraction 1/3: shorter side 10/(1/3)
     * = 30 = source, so no scaling and a crop at (10, 10). */
    const int w = 40, h = 30;
    uint8_t px[40 * 30 * 3];
    tu_fill(px, w, h, 3, 9);
    size_t len;
    uint8_t *png = tu_png_mem(px, w, h, 3, &len);
    gf__transform t = tu_eval_transform(20, 10, 3, 1.0f / 3);
    uint8_t *out = dec(png, len, &t, 0, NULL);
    for (int y = 0; y < 10; y++)
        ck_assert_mem_eq(out + y * 20 * 3, px + ((y + 10) * w + 10) * 3, 20 * 3);
    free(out);
    free(png);
}
END_TEST

/* ---- train transform: flip, determinism ---- */

START_TEST(flip_mirrors_exactly)
{
    const int w = 64, h = 48;
    uint8_t px[64 * 48 * 3];
    tu_fill_smooth(px, w, h, 3, 5);
    size_t len;
    uint8_t *png = tu_png_mem(px, w, h, 3, &len);
    gf__transform t = tu_train_transform(24, 16, 3);
    for (uint64_t key = 0; key < 8; key++) {
        t.flip_prob = 0;
        uint8_t *a = dec(png, len, &t, key, NULL);
        t.flip_prob = 1;
        uint8_t *b = dec(png, len, &t, key, NULL);
        for (int y = 0; y < 16; y++)
            for (int x = 0; x < 24; x++)
                ck_assert_mem_eq(a + (y * 24 + x) * 3, b + (y * 24 + 23 - x) * 3, 3);
        free(a);
        free(b);
    }
    free(png);
}
END_TEST

START_TEST(same_key_same_bytes_different_keys_different_crops)
{
    const int w = 96, h = 80;
    uint8_t px[96 * 80 * 3];
    tu_fill(px, w, h, 3, 11);
    size_t len;
    uint8_t *png = tu_png_mem(px, w, h, 3, &len);
    gf__transform t = tu_train_transform(32, 32, 3);
    uint8_t *first = dec(png, len, &t, 1234, NULL);
    uint8_t *again = dec(png, len, &t, 1234, NULL);
    ck_assert_mem_eq(first, again, 32 * 32 * 3);
    int differ = 0;
    for (uint64_t key = 0; key < 10; key++) {
        uint8_t *o = dec(png, len, &t, key, NULL);
        differ += memcmp(o, first, 32 * 32 * 3) != 0;
        free(o);
    }
    ck_assert_int_eq(differ, 10);
    free(first);
    free(again);
    free(png);
}
END_TEST

START_TEST(public_decode_image_depends_on_seed_epoch_index)
{
    const int w = 50, h = 40;
    uint8_t px[50 * 40 * 3];
    tu_fill(px, w, h, 3, 12);
    size_t len;
    uint8_t *png = tu_png_mem(px, w, h, 3, &len);
    gf_settings s;
    gf_default_settings(&s);
    s.width = s.height = 16;
    uint8_t a[16 * 16 * 3], b[16 * 16 * 3], c[16 * 16 * 3];
    char why[128];
    ck_assert_int_eq(gf_decode_image(&s, png, len, 0, 5, a, why, sizeof why), 0);
    ck_assert_int_eq(gf_decode_image(&s, png, len, 0, 5, b, why, sizeof why), 0);
    ck_assert_mem_eq(a, b, sizeof a);
    ck_assert_int_eq(gf_decode_image(&s, png, len, 1, 5, c, why, sizeof why), 0);
    ck_assert(memcmp(a, c, sizeof a) != 0);
    ck_assert_int_eq(gf_decode_image(&s, png, 0, 0, 5, c, why, sizeof why), GF_EEMPTY);
    free(png);
}
END_TEST

/* gf_decoder_decode_fit: the longer side capped, the shorter rounded
 * half up (at least 1), never enlarged; an image that fits comes back
 * pixel for pixel. */
START_TEST(fit_caps_the_longer_side_keeps_aspect_and_never_enlarges)
{
    static const struct {
        int w, h, max, ew, eh;
    } cases[] = {
        {500, 375, 256, 256, 192}, /* 192 exactly */
        {375, 500, 256, 192, 256},
        {200, 101, 100, 100, 51},  /* 50.5 rounds up */
        {333, 100, 100, 100, 30},  /* 30.03 */
        {1000, 3, 10, 10, 1},      /* 0.03: at least 1 */
        {100, 50, 256, 100, 50},   /* fits: kept */
        {64, 64, 64, 64, 64},
        {90, 40, 0, 90, 40},       /* 0: no cap */
    };
    gf_settings s;
    gf_default_settings(&s);
    gf_decoder *d;
    ck_assert_int_eq(gf_decoder_open(&d, &s), 0);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int w = cases[k].w, h = cases[k].h;
        uint8_t *px = malloc((size_t)w * h * 3);
        tu_fill(px, w, h, 3, (int)k);
        size_t len;
        uint8_t *png = tu_png_mem(px, w, h, 3, &len);
        const uint8_t *out;
        int ow, oh, sw, sh;
        char why[128];
        ck_assert_int_eq(gf_decoder_decode_fit(d, png, len, cases[k].max, &out, &ow, &oh, &sw,
                                               &sh, why, sizeof why), 0);
        ck_assert_int_eq(ow, cases[k].ew);
        ck_assert_int_eq(oh, cases[k].eh);
        ck_assert_int_eq(sw, w);
        ck_assert_int_eq(sh, h);
        if (ow == w && oh == h)
            ck_assert_mem_eq(out, px, (size_t)w * h * 3);
        free(png);
        free(px);
    }
    const uint8_t *out;
    int ow, oh;
    char why[128];
    ck_assert_int_eq(gf_decoder_decode_fit(d, "x", 1, 10, &out, &ow, &oh, NULL, NULL, why,
                                           sizeof why), GF_EFORMAT);
    ck_assert_ptr_null(out);
    ck_assert_int_eq(gf_decoder_decode_fit(d, "x", 1, -1, &out, &ow, &oh, NULL, NULL, why,
                                           sizeof why), GF_EINVAL);
    gf_decoder_close(&d);
}
END_TEST

/* A downscale by fit is the antialiased filter's: a flat image stays flat,
 * and a fine checkerboard averages to grey instead of aliasing. */
START_TEST(fit_downscale_is_antialiased)
{
    const int w = 400, h = 300;
    uint8_t *px = malloc((size_t)w * h * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            memset(px + ((size_t)y * w + x) * 3, (x + y) % 2 ? 255 : 0, 3);
    size_t len;
    uint8_t *png = tu_png_mem(px, w, h, 3, &len);
    gf_settings s;
    gf_default_settings(&s);
    gf_decoder *d;
    ck_assert_int_eq(gf_decoder_open(&d, &s), 0);
    const uint8_t *out;
    int ow, oh;
    char why[128];
    ck_assert_int_eq(gf_decoder_decode_fit(d, png, len, 64, &out, &ow, &oh, NULL, NULL, why,
                                           sizeof why), 0);
    ck_assert_int_eq(ow, 64);
    ck_assert_int_eq(oh, 48);
    for (int i = 0; i < ow * oh * 3; i++)
        ck_assert_msg(abs((int)out[i] - 128) <= 8, "value %d at %d: aliased", out[i], i);
    gf_decoder_close(&d);
    free(png);
    free(px);
}
END_TEST

/* ---- JPEG ---- */

START_TEST(jpeg_stb_and_turbo_agree_with_each_other_and_the_source)
{
    /* q95 4:4:4 (stb_image_write subsamples only below q91) smooth image,
     * identity geometry. Tolerances: both decoders within mean 2 / max 24
     * of the source (JPEG loss), and within mean 1 / max 8 of each other
     * (IDCT and colour-conversion rounding differ). */
    const int w = 120, h = 90;
    uint8_t *px = malloc(w * h * 3);
    tu_fill_smooth(px, w, h, 3, 1);
    size_t len;
    uint8_t *jpg = tu_jpg_mem(px, w, h, 3, 95, &len);
    gf__transform t = tu_eval_transform(w, h, 3, 1.0f);
    t.decoder = GF_DECODER_STB;
    int used;
    uint8_t *s = dec(jpg, len, &t, 0, &used);
    ck_assert_int_eq(used, GF__USED_STB);
    int mx;
    double m = mean_abs_diff(s, px, (size_t)w * h * 3, &mx);
    ck_assert_msg(m < 2.0 && mx <= 24, "stb vs source: mean %.2f max %d", m, mx);
#if GF_HAVE_TURBO
    t.decoder = GF_DECODER_AUTO;
    uint8_t *j = dec(jpg, len, &t, 0, &used);
    ck_assert_int_eq(used, GF__USED_TURBO);
    m = mean_abs_diff(j, px, (size_t)w * h * 3, &mx);
    ck_assert_msg(m < 2.0 && mx <= 24, "turbo vs source: mean %.2f max %d", m, mx);
    m = mean_abs_diff(j, s, (size_t)w * h * 3, &mx);
    ck_assert_msg(m < 1.0 && mx <= 8, "turbo vs stb: mean %.2f max %d", m, mx);
    free(j);
#endif
    free(s);
    free(jpg);
    free(px);
}
END_TEST

#if GF_HAVE_TURBO
START_TEST(jpeg_gray_and_rgba_outputs_agree_between_decoders)
{
    const int w = 64, h = 48;
    uint8_t *px = malloc(w * h * 3);
    tu_fill_smooth(px, w, h, 3, 2);
    size_t len;
    uint8_t *jpg = tu_jpg_mem(px, w, h, 3, 95, &len);
    for (int C = 1; C <= 4; C += 3) {
        gf__transform t = tu_train_transform(32, 24, C);
        t.decoder = GF_DECODER_STB;
        uint8_t *s = dec(jpg, len, &t, 77, NULL);
        t.decoder = GF_DECODER_AUTO;
        uint8_t *j = dec(jpg, len, &t, 77, NULL);
        int mx;
        /* libjpeg's gray is the stored Y; stb's path goes through RGB */
        double m = mean_abs_diff(s, j, (size_t)32 * 24 * C, &mx);
        ck_assert_msg(m < 1.5 && mx <= 10, "C=%d: mean %.2f max %d", C, m, mx);
        if (C == 4)
            for (int i = 0; i < 32 * 24; i++)
                ck_assert_int_eq(j[4 * i + 3], 255);
        free(s);
        free(j);
    }
    free(jpg);
    free(px);
}
END_TEST

/* DCT-scaled + column-cropped + row-skipped decode against a full-size
 * decode resampled with the same crop. The scaled IDCT is a different
 * low-pass than our triangle filter: mean 3 / max 40 levels on a smooth
 * image (measured ~0.7 mean). */
START_TEST(dct_scaled_partial_jpeg_matches_full_decode)
{
    const int w = 500, h = 375;
    uint8_t *px = malloc(w * h * 3);
    tu_fill_smooth(px, w, h, 3, 3);
    size_t len;
    uint8_t *jpg = tu_jpg_mem(px, w, h, 3, 90, &len);
    for (int C = 1; C <= 4; C++) {
        if (C == 2)
            continue;
        for (uint64_t key = 0; key < 24; key++) {
            gf__transform t = key % 4 == 3 ? tu_eval_transform(56, 56, C, 0.875f) : tu_train_transform(56, 56, C);
            uint8_t *part = dec(jpg, len, &t, key, NULL);
            t.full_decode = 1;
            uint8_t *full = dec(jpg, len, &t, key, NULL);
            int mx;
            double m = mean_abs_diff(part, full, (size_t)56 * 56 * C, &mx);
            ck_assert_msg(m < 3.0 && mx <= 40, "C=%d key %d: mean %.2f max %d", C, (int)key, m,
                          mx);
            free(part);
            free(full);
        }
    }
    free(jpg);
    free(px);
}
END_TEST

/* A w x h RGB JPEG at q95 whose luma is sampled hs x vs times the
 * chroma (1 x 1 is 4:4:4, 2 x 1 4:2:2, 2 x 2 4:2:0, 1 x 2 4:4:0). */
static uint8_t *jpeg_subsampled(const uint8_t *px, int w, int h, int hs, int vs, size_t *len)
{
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr je;
    ci.err = jpeg_std_error(&je);
    jpeg_create_compress(&ci);
    unsigned char *mem = NULL;
    unsigned long n = 0;
    jpeg_mem_dest(&ci, &mem, &n);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    ci.input_components = 3;
    ci.in_color_space = JCS_RGB;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, 95, TRUE);
    ci.comp_info[0].h_samp_factor = hs;
    ci.comp_info[0].v_samp_factor = vs;
    for (int k = 1; k < 3; k++)
        ci.comp_info[k].h_samp_factor = ci.comp_info[k].v_samp_factor = 1;
    jpeg_start_compress(&ci, TRUE);
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW row = (JSAMPROW)(px + (size_t)ci.next_scanline * w * 3);
        jpeg_write_scanlines(&ci, &row, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    *len = n;
    return mem;
}

/* Issue 37: a crop-only decode (columns by jpeg_crop_scanline, rows
 * skipped above and not read below) equals the whole image decoded at the
 * same DCT scale and then cropped, exactly: the resampler reads the same
 * span with the same weights, so max abs diff 0. Fancy upsampling at a
 * crop edge inside an MCU had replicated the crop's last chroma sample
 * instead of the next one (4:2:2 up to 77 levels off, 4:2:0 43). Noisy
 * pixels, so wrong chroma shows; crops from many keys, full size (out
 * 112: no crop of 203 x 157 is twice that) and DCT-scaled (out 24). */
START_TEST(cropped_jpeg_decode_equals_whole_decode_then_crop)
{
    const int w = 203, h = 157;
    static const int samp[][2] = {{1, 1}, {2, 1}, {2, 2}, {1, 2}};
    uint8_t *px = malloc((size_t)w * h * 3);
    tu_fill(px, w, h, 3, 37);
    gf__decoder *d;
    ck_assert_int_eq(gf__decoder_create(&d), 0);
    int inside_right = 0, inside_bottom = 0, scaled = 0;
    for (size_t s = 0; s < sizeof samp / sizeof *samp; s++) {
        size_t len;
        uint8_t *jpg = jpeg_subsampled(px, w, h, samp[s][0], samp[s][1], &len);
        for (int k = 0; k < 3; k++)
            for (uint64_t key = 0; key < 40; key++) {
                int out = k == 1 ? 24 : 112;
                gf__transform t = k == 2 ? tu_eval_transform(out, out, 3, 0.6f)
                                         : tu_train_transform(out, out, 3);
                size_t n = (size_t)out * out * 3;
                uint8_t *part = malloc(n), *whole = malloc(n);
                char why[256];
                int used;
                ck_assert_int_eq(gf__decode(d, jpg, len, &t, key, part, &used, why, sizeof why), 0);
                ck_assert_int_eq(used & ~GF__FLIPPED, GF__USED_TURBO);
                /* where the crop-only decode's span ended, in decoded pixels */
                int num = (int)d->ci.scale_num, hi = d->rs.h.hi, bottom = d->rs.v.hi;
                int lo = d->rs.h.lo, top = d->rs.v.lo;
                int mcu_w = 8 * samp[s][0] * num / 8, mcu_h = 8 * samp[s][1] * num / 8;
                int sw = (w * num + 7) / 8, sh = (h * num + 7) / 8; /* the scaled image */
                inside_right += hi % mcu_w && hi < sw;
                inside_bottom += bottom % mcu_h && bottom < sh;
                scaled += num < 8;
                t.uncropped = 1;
                ck_assert_int_eq(gf__decode(d, jpg, len, &t, key, whole, &used, why, sizeof why), 0);
                ck_assert_int_eq((int)d->ci.scale_num, num);
                int mx;
                double m = mean_abs_diff(part, whole, n, &mx);
                ck_assert_msg(mx == 0, "%dx%d sampling, scale %d/8, key %d (span x to %d, y to %d): "
                              "mean %.3f max %d, span from x %d y %d", samp[s][0], samp[s][1], num, (int)key, hi,
                              bottom, m, mx, lo, top);
                free(part);
                free(whole);
            }
        free(jpg);
    }
    /* the cases that matter were met */
    ck_assert_int_gt(inside_right, 100);
    ck_assert_int_gt(inside_bottom, 100);
    ck_assert_int_gt(scaled, 60);
    gf__decoder_destroy(d);
    free(px);
}
END_TEST

START_TEST(cmyk_jpeg_decodes_to_rgb_like_photoshop)
{
    /* Stored (Adobe-inverted) values: R = C*K/255. With K = 255 the
     * stored C, M, Y are R, G, B; with K = 128 they are halved. */
    const int w = 48, h = 32;
    uint8_t *rgb = malloc(w * h * 3), *cmyk = malloc(w * h * 4), *want = malloc(w * h * 3);
    tu_fill_smooth(rgb, w, h, 3, 4);
    for (int i = 0; i < w * h; i++) {
        int k = i % w < w / 2 ? 255 : 128;
        for (int c = 0; c < 3; c++) {
            cmyk[4 * i + c] = rgb[3 * i + c];
            want[3 * i + c] = (uint8_t)((rgb[3 * i + c] * k + 127) / 255);
        }
        cmyk[4 * i + 3] = (uint8_t)k;
    }
    size_t len;
    uint8_t *jpg = tu_jpeg_cmyk(cmyk, w, h, 98, &len);
    gf__transform t = tu_eval_transform(w, h, 3, 1.0f);
    int used, mx;
    uint8_t *j = dec(jpg, len, &t, 0, &used);
    ck_assert_int_eq(used, GF__USED_TURBO);
    double m = mean_abs_diff(j, want, (size_t)w * h * 3, &mx);
    ck_assert_msg(m < 2.0 && mx <= 16, "turbo CMYK: mean %.2f max %d", m, mx);
    t.decoder = GF_DECODER_STB;
    uint8_t *s = dec(jpg, len, &t, 0, &used);
    m = mean_abs_diff(s, j, (size_t)w * h * 3, &mx);
    ck_assert_msg(m < 1.0 && mx <= 8, "stb vs turbo CMYK: mean %.2f max %d", m, mx);
    gf__transform t1 = tu_eval_transform(w, h, 1, 1.0f);
    uint8_t *g = dec(jpg, len, &t1, 0, NULL);
    for (int i = 0; i < w * h; i++)
        ck_assert_int_eq(g[i], luma(j[3 * i], j[3 * i + 1], j[3 * i + 2]));
    free(g);
    free(s);
    free(j);
    free(jpg);
    free(rgb);
    free(cmyk);
    free(want);
}
END_TEST
#endif

/* ---- resampler ---- */

/* float64 reference of the same filter (antialiased triangle or bicubic,
 * PIL's support and centre convention), no intermediate rounding. */
static void ref_axis(int in_n, double x0, double len, int out_n, gf_interpolation mode,
                     double *W /* out_n*in_n */)
{
    double scale = len / out_n, fs = scale > 1 ? scale : 1, support;
    gf__rs_filter(mode, 0, &support);
    support *= fs;
    memset(W, 0, sizeof *W * (size_t)out_n * in_n);
    for (int i = 0; i < out_n; i++) {
        double c = x0 + (i + 0.5) * scale, sum = 0;
        int lo = (int)floor(c - support + 0.5), hi = (int)floor(c + support + 0.5);
        lo = lo < 0 ? 0 : lo;
        hi = hi > in_n ? in_n : hi;
        for (int x = lo; x < hi; x++)
            sum += W[(size_t)i * in_n + x] = gf__rs_filter(mode, (x - c + 0.5) / fs, NULL);
        for (int x = lo; x < hi; x++)
            W[(size_t)i * in_n + x] /= sum;
    }
}

static void check_against_reference(gf_interpolation mode, int iw, int ih, int ch, double x0,
                                    double y0, double cw, double chh, int ow, int oh, int flip,
                                    uint32_t seed)
{
    uint8_t *src = malloc((size_t)iw * ih * ch), *dst = malloc((size_t)ow * oh * ch);
    tu_fill(src, iw, ih, ch, seed);
    gf__resampler r;
    memset(&r, 0, sizeof r);
    ck_assert_int_eq(gf__rs_axis_set(&r.h, iw, x0, cw, ow, mode), 0);
    ck_assert_int_eq(gf__rs_axis_set(&r.v, ih, y0, chh, oh, mode), 0);
    const uint8_t *span = src + ((size_t)r.v.lo * iw + r.h.lo) * ch;
    ck_assert_int_eq(gf__resample(&r, span, (size_t)iw * ch, ch, dst, (size_t)ow * ch, flip), 0);
    double *WH = malloc(sizeof *WH * (size_t)ow * iw), *WV = malloc(sizeof *WV * (size_t)oh * ih);
    ref_axis(iw, x0, cw, ow, mode, WH);
    ref_axis(ih, y0, chh, oh, mode, WV);
    double *tmp = calloc((size_t)oh * iw * ch, sizeof *tmp);
    for (int y = 0; y < oh; y++)
        for (int sy = 0; sy < ih; sy++) {
            double wv = WV[(size_t)y * ih + sy];
            if (wv != 0)
                for (int k = 0; k < iw * ch; k++)
                    tmp[(size_t)y * iw * ch + k] += wv * src[(size_t)sy * iw * ch + k];
        }
    if (mode == GF_INTERP_BICUBIC) { /* PIL's order: horizontal first, clipped */
        double *hx = calloc((size_t)ih * ow * ch, sizeof *hx);
        for (int sy = 0; sy < ih; sy++)
            for (int x = 0; x < ow; x++)
                for (int c = 0; c < ch; c++) {
                    double v = 0;
                    for (int sx = 0; sx < iw; sx++)
                        v += WH[(size_t)x * iw + sx] * src[((size_t)sy * iw + sx) * ch + c];
                    hx[((size_t)sy * ow + x) * ch + c] = fmin(255, fmax(0, v));
                }
        for (int y = 0; y < oh; y++)
            for (int x = 0; x < ow; x++)
                for (int c = 0; c < ch; c++) {
                    double v = 0;
                    for (int sy = 0; sy < ih; sy++)
                        v += WV[(size_t)y * ih + sy] * hx[((size_t)sy * ow + x) * ch + c];
                    int want = (int)fmin(255, fmax(0, floor(v + 0.5)));
                    int got = dst[((size_t)y * ow + (flip ? ow - 1 - x : x)) * ch + c];
                    ck_assert_msg(abs(got - want) <= 1, "bicubic %dx%dx%d -> %dx%d: (%d,%d,%d) got %d want %d",
                                  iw, ih, ch, ow, oh, x, y, c, got, want);
                }
        free(hx);
    }
    for (int y = 0; y < oh && mode == GF_INTERP_BILINEAR; y++)
        for (int x = 0; x < ow; x++)
            for (int c = 0; c < ch; c++) {
                double v = 0;
                for (int sx = 0; sx < iw; sx++)
                    v += WH[(size_t)x * iw + sx] * tmp[((size_t)y * iw + sx) * ch + c];
                int want = (int)fmin(255, fmax(0, floor(v + 0.5)));
                int ox = flip ? ow - 1 - x : x;
                int got = dst[((size_t)y * ow + ox) * ch + c];
                ck_assert_msg(abs(got - want) <= 1,
                              "mode %d %dx%dx%d crop (%.2f,%.2f %.2fx%.2f) -> %dx%d: (%d,%d,%d) "
                              "got %d want %d (%.3f)",
                              mode, iw, ih, ch, x0, y0, cw, chh, ow, oh, x, y, c, got, want, v);
            }
    free(tmp);
    free(WH);
    free(WV);
    gf__resampler_free(&r);
    free(src);
    free(dst);
}

START_TEST(resampler_is_within_one_of_a_float_reference)
{
    struct {
        int iw, ih;
        double x0, y0, cw, ch;
        int ow, oh;
    } cases[] = {
        {100, 80, 0, 0, 100, 80, 37, 29},       /* shrink ~2.7x */
        {100, 80, 10.5, 3.25, 60.3, 50.1, 23, 31}, /* fractional crop */
        {64, 48, 0, 0, 64, 48, 64, 48},         /* scale 1 */
        {50, 40, 5, 5, 20, 15, 47, 33},         /* enlarge */
        {31, 17, 0, 0, 31, 17, 100, 60},        /* enlarge a lot */
        {300, 200, 0, 0, 300, 200, 17, 11},     /* shrink ~18x */
        {90, 90, 1, 2, 80, 85, 61, 77},         /* shrink 1.1-1.3x */
        {40, 30, 0, 0, 40, 30, 1, 1},           /* to one pixel */
    };
    static const gf_interpolation modes[] = {GF_INTERP_BILINEAR, GF_INTERP_BICUBIC};
    for (int m = 0; m < 2; m++)
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int ch = 1; ch <= 4; ch++)
            check_against_reference(modes[m], cases[i].iw, cases[i].ih, ch, cases[i].x0, cases[i].y0,
                                    cases[i].cw, cases[i].ch, cases[i].ow, cases[i].oh,
                                    (int)(i + ch) % 2, (uint32_t)(i * 10 + ch));
}
END_TEST

START_TEST(resampler_at_scale_one_is_bit_exact)
{
    const int iw = 70, ih = 50;
    for (int m = 0; m < 3; m++) /* BILINEAR, BICUBIC, NEAREST */
    for (int ch = 1; ch <= 4; ch++) {
        uint8_t *src = malloc((size_t)iw * ih * ch), *dst = malloc((size_t)33 * 21 * ch);
        tu_fill(src, iw, ih, ch, 50 + (uint32_t)ch);
        gf__resampler r;
        memset(&r, 0, sizeof r);
        ck_assert_int_eq(gf__rs_axis_set(&r.h, iw, 17, 33, 33, (gf_interpolation)m), 0);
        ck_assert_int_eq(gf__rs_axis_set(&r.v, ih, 29, 21, 21, (gf_interpolation)m), 0);
        ck_assert_int_eq(r.h.taps, 1);
        const uint8_t *span = src + ((size_t)r.v.lo * iw + r.h.lo) * ch;
        ck_assert_int_eq(gf__resample(&r, span, (size_t)iw * ch, ch, dst, (size_t)33 * ch, 0), 0);
        for (int y = 0; y < 21; y++)
            ck_assert_mem_eq(dst + (size_t)y * 33 * ch, src + ((size_t)(y + 29) * iw + 17) * ch,
                             (size_t)33 * ch);
        gf__resampler_free(&r);
        free(src);
        free(dst);
    }
}
END_TEST

START_TEST(resampler_reuses_weights_for_the_same_geometry)
{
    gf__rs_axis a;
    memset(&a, 0, sizeof a);
    ck_assert_int_eq(gf__rs_axis_set(&a, 500, 12.5, 300, 224, GF_INTERP_BILINEAR), 0);
    int16_t *w = a.w;
    int16_t first = a.w[5];
    a.w[5] = 12345; /* a recompute would overwrite this */
    ck_assert_int_eq(gf__rs_axis_set(&a, 500, 12.5, 300, 224, GF_INTERP_BILINEAR), 0);
    ck_assert_ptr_eq(a.w, w);
    ck_assert_int_eq(a.w[5], 12345);
    ck_assert_int_eq(gf__rs_axis_set(&a, 500, 12.0, 300, 224, GF_INTERP_BILINEAR), 0);
    ck_assert_int_ne(a.w[5], 12345);
    a.w[5] = 12345; /* another filter on the same geometry: its own weights */
    ck_assert_int_eq(gf__rs_axis_set(&a, 500, 12.0, 300, 224, GF_INTERP_BICUBIC), 0);
    ck_assert_int_ne(a.w[5], 12345);
    (void)first;
    ck_assert_int_eq(gf__rs_axis_set(&a, 500, 0, 0, 224, GF_INTERP_BILINEAR), -1); /* empty crop */
    free(a.w);
    free(a.start);
}
END_TEST

START_TEST(decoder_reuse_across_sizes_stays_correct)
{
    gf__decoder *d;
    ck_assert_int_eq(gf__decoder_create(&d), 0);
    uint8_t out[40 * 30 * 4];
    char why[128];
    int used;
    for (int i = 0; i < 12; i++) {
        int w = 10 + 10 * (i % 4), h = 8 + 7 * (i % 3), C = i % 2 ? 3 : 4;
        uint8_t *px = malloc((size_t)w * h * 3);
        tu_fill(px, w, h, 3, (uint32_t)i);
        size_t len;
        uint8_t *png = tu_png_mem(px, w, h, 3, &len);
        gf__transform t = tu_eval_transform(w, h, C, 1.0f);
        ck_assert_int_eq(gf__decode(d, png, len, &t, 0, out, &used, why, sizeof why), 0);
        for (int p = 0; p < w * h; p++) {
            uint8_t e[4];
            expect_px(px + 3 * p, 3, C, e);
            ck_assert_mem_eq(out + p * C, e, (size_t)C);
        }
        free(png);
        free(px);
    }
    ck_assert_uint_gt(gf__decoder_scratch_bytes(d), 0);
    gf__decoder_destroy(d);
}
END_TEST

START_TEST(small_image_enlarges_within_its_range)
{
    const int w = 8, h = 6;
    uint8_t px[8 * 6 * 3];
    tu_fill(px, w, h, 3, 21);
    size_t len;
    uint8_t *png = tu_png_mem(px, w, h, 3, &len);
    gf__transform t = tu_train_transform(32, 32, 3);
    uint8_t *out = dec(png, len, &t, 9, NULL);
    int lo = 255, hi = 0;
    for (int i = 0; i < w * h * 3; i++) {
        lo = px[i] < lo ? px[i] : lo;
        hi = px[i] > hi ? px[i] : hi;
    }
    for (int i = 0; i < 32 * 32 * 3; i++)
        ck_assert(out[i] >= lo && out[i] <= hi);
    free(out);
    free(png);
}
END_TEST

/* ---- bad inputs ---- */

START_TEST(empty_and_tiny_and_text_inputs_are_rejected)
{
    gf__transform t = tu_train_transform(16, 16, 3);
    char why[256];
    ck_assert_int_eq(dec_rc((const uint8_t *)"", 0, &t, why, sizeof why), GF_EEMPTY);
    ck_assert_int_eq(dec_rc((const uint8_t *)"\xff", 1, &t, why, sizeof why), GF_EFORMAT);
    const char *text = "hello, this is a text file and not an image at all\n";
    ck_assert_int_eq(dec_rc((const uint8_t *)text, strlen(text), &t, why, sizeof why),
                     GF_EFORMAT);
    ck_assert_msg(strstr(why, "not an image") != NULL, "why: %s", why);
}
END_TEST

START_TEST(truncated_jpeg_is_etrunc_for_both_decoders)
{
    const int w = 160, h = 120;
    uint8_t *px = malloc(w * h * 3);
    tu_fill_smooth(px, w, h, 3, 6);
    size_t len;
    uint8_t *jpg = tu_jpg_mem(px, w, h, 3, 90, &len);
    char why[256];
    for (int dcd = 0; dcd < 2; dcd++) {
        gf__transform t = tu_eval_transform(64, 64, 3, 0.875f);
        t.decoder = dcd ? GF_DECODER_STB : GF_DECODER_AUTO;
        ck_assert_int_eq(dec_rc(jpg, len / 2, &t, why, sizeof why), GF_ETRUNC);
        ck_assert_msg(strstr(why, "JPEG: premature end of data") != NULL, "why: %s", why);
        ck_assert_int_eq(dec_rc(jpg, 20, &t, why, sizeof why), GF_ETRUNC); /* in the header */
        ck_assert_int_eq(dec_rc(jpg, len - 1, &t, why, sizeof why), GF_ETRUNC);
    }
    free(jpg);
    free(px);
}
END_TEST

START_TEST(truncated_png_is_etrunc)
{
    const int w = 64, h = 64;
    uint8_t *px = malloc(w * h * 3);
    tu_fill(px, w, h, 3, 13);
    size_t len;
    uint8_t *png = tu_png_mem(px, w, h, 3, &len);
    gf__transform t = tu_train_transform(16, 16, 3);
    char why[256];
    ck_assert_int_eq(dec_rc(png, len / 2, &t, why, sizeof why), GF_ETRUNC);
    ck_assert_msg(strstr(why, "PNG: premature end of data") != NULL, "why: %s", why);
    ck_assert_int_eq(dec_rc(png, 30, &t, why, sizeof why), GF_ETRUNC);
    free(png);
    free(px);
}
END_TEST

/* A DHT table declaring more than 256 codes (16 counts of 255): Debian's
 * stb_image would write past its tables (found by tests/fuzz). Refused
 * before stb_image sees it, in the header and after the scan starts;
 * libjpeg-turbo refuses it on its own. The untouched file still decodes. */
START_TEST(overfull_huffman_table_is_ecorrupt_for_both_decoders)
{
    const int w = 40, h = 24;
    uint8_t *px = malloc(w * h * 3);
    tu_fill_smooth(px, w, h, 3, 9);
    size_t len;
    uint8_t *jpg = tu_jpg_mem(px, w, h, 3, 90, &len);
    size_t dht = 0, sos = 0;
    for (size_t i = 2; i + 1 < len && !sos; i++) {
        if (jpg[i] == 0xff && jpg[i + 1] == 0xc4 && !dht)
            dht = i;
        if (jpg[i] == 0xff && jpg[i + 1] == 0xda)
            sos = i;
    }
    ck_assert(dht && sos);
    char why[256];
    for (int where = 0; where < 3; where++) {
        uint8_t *bad = malloc(len + 32);
        size_t n = len;
        memcpy(bad, jpg, len);
        if (where == 1) { /* the first table's counts */
            memset(bad + dht + 5, 255, 16);
        } else if (where == 2) { /* a DHT marker inside the scan's data */
            static const uint8_t seg[] = {0xff, 0xc4, 0x00, 0x13, 0x00};
            size_t at = sos + (len - sos) / 2;
            memmove(bad + at + 21, bad + at, len - at);
            memcpy(bad + at, seg, sizeof seg);
            memset(bad + at + sizeof seg, 255, 16);
            n = len + 21;
        }
        for (int dcd = 0; dcd < 2; dcd++) {
            gf__transform t = tu_eval_transform(16, 16, 3, 1.0f);
            t.decoder = dcd ? GF_DECODER_STB : GF_DECODER_AUTO;
            int rc = dec_rc(bad, n, &t, why, sizeof why);
            if (where == 0) {
                ck_assert_msg(rc == 0, "rc %d (%s)", rc, why);
            } else {
                ck_assert_msg(rc == GF_ECORRUPT, "where %d, decoder %d: rc %d (%s)", where, dcd,
                              rc, why);
                if (dcd)
                    ck_assert_msg(strstr(why, "more than 256 codes") != NULL, "why: %s", why);
            }
        }
        free(bad);
    }
    free(jpg);
    free(px);
}
END_TEST

/* PNM header numbers over INT_MAX (width, height or maximum value, after
 * comments too) would overflow stb_image's int: refused by name. */
START_TEST(pnm_header_numbers_over_int_max_are_ecorrupt)
{
    static const char *const bad[] = {
        "P6\n99999999999 2\n255\n",
        "P5 3 2147483648 255 ",
        "P5\n# a comment 9999999999999\n3 2\n# another\n55555555555555555555\nxyz",
    };
    gf__transform t = tu_eval_transform(4, 4, 3, 1.0f);
    char why[256];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = dec_rc((const uint8_t *)bad[i], strlen(bad[i]), &t, why, sizeof why);
        ck_assert_msg(rc == GF_ECORRUPT && strstr(why, "PNM: corrupt header"), "%zu: rc %d (%s)",
                      i, rc, why);
    }
    /* The largest allowed numbers pass this check (and fail later, as too big). */
    static const char edge[] = "P5 2147483647 1 255 ";
    int rc = dec_rc((const uint8_t *)edge, strlen(edge), &t, why, sizeof why);
    ck_assert_msg(rc != 0 && !strstr(why, "PNM: corrupt header"), "rc %d (%s)", rc, why);
}
END_TEST

/* Bytes flipped in the entropy-coded data: libjpeg-turbo reports corrupt
 * data (GF_ECORRUPT) or, when the damage decodes silently (or lies below
 * the rows a crop needs), returns pixels; stb_image rarely notices and
 * returns pixels. Either way: no crash, no sanitizer report, and an error
 * always carries a reason. */
START_TEST(corrupt_jpeg_middle_never_crashes)
{
    const int w = 160, h = 120;
    uint8_t *px = malloc(w * h * 3);
    tu_fill_smooth(px, w, h, 3, 14);
    size_t len;
    uint8_t *jpg = tu_jpg_mem(px, w, h, 3, 90, &len);
    uint8_t *bad = malloc(len);
    char why[256];
    int errors = 0;
    for (int trial = 0; trial < 40; trial++) {
        memcpy(bad, jpg, len);
        uint32_t s = (uint32_t)trial * 2654435761u + 1;
        for (int k = 0; k < 16; k++) {
            s = s * 1664525u + 1013904223u;
            bad[len / 3 + (s >> 8) % (len / 3)] ^= (uint8_t)(1 + (s >> 24) % 255);
        }
        for (int dcd = 0; dcd < 2; dcd++) {
            gf__transform t = trial % 2 ? tu_eval_transform(48, 48, 3, 0.875f) : tu_train_transform(48, 48, 3);
            t.decoder = dcd ? GF_DECODER_STB : GF_DECODER_AUTO;
            why[0] = 0;
            int rc = dec_rc(bad, len, &t, why, sizeof why);
            ck_assert_msg(rc == 0 || rc == GF_ECORRUPT || rc == GF_ETRUNC, "rc %d (%s)", rc, why);
            if (rc) {
                ck_assert_msg(why[0] != 0, "an error without a reason");
                errors++;
            }
        }
    }
    /* Header damage too: a zero width in SOF. */
    memcpy(bad, jpg, len);
    for (size_t i = 2; i + 9 < len; i++)
        if (bad[i] == 0xff && bad[i + 1] == 0xc0) {
            bad[i + 7] = bad[i + 8] = 0;
            break;
        }
    gf__transform t = tu_train_transform(48, 48, 3);
    int rc = dec_rc(bad, len, &t, why, sizeof why);
    ck_assert_msg(rc == GF_ECORRUPT || rc == GF_EFORMAT, "rc %d (%s)", rc, why);
#if GF_HAVE_TURBO
    ck_assert_msg(errors > 0, "libjpeg-turbo flagged none of 40 corrupted files");
#endif
    free(bad);
    free(jpg);
    free(px);
}
END_TEST

#if GF_HAVE_TURBO
/* Offset of the first scan's entropy-coded data. */
static size_t scan_start(const uint8_t *p, size_t n)
{
    for (size_t i = 2; i + 3 < n; i++)
        if (p[i] == 0xff && p[i + 1] == 0xda)
            return i + 2 + ((size_t)p[i + 2] << 8 | p[i + 3]);
    ck_abort_msg("no SOS");
    return 0;
}

/* A copy of jpg with a stray marker (RST3, in a file without restarts)
 * written over 2 bytes at off: libjpeg warns "Corrupt JPEG data: premature
 * end of data segment" and fills the rest of the scan with grey. */
static uint8_t *plant_marker(const uint8_t *jpg, size_t len, size_t off)
{
    uint8_t *b = malloc(len);
    memcpy(b, jpg, len);
    b[off] = 0xff;
    b[off + 1] = 0xd3;
    return b;
}

static int dec_mode(const uint8_t *data, size_t len, gf__transform t, gf_strictness m,
                    int *used, char *why, size_t why_len)
{
    gf__decoder *d;
    ck_assert_int_eq(gf__decoder_create(&d), 0);
    t.strictness = m;
    uint8_t *out = malloc((size_t)t.out_w * t.out_h * t.channels);
    *used = 0;
    why[0] = 0;
    int rc = gf__decode(d, data, len, &t, 42, out, used, why, why_len);
    free(out);
    gf__decoder_destroy(d);
    return rc;
}

START_TEST(jpeg_warnings_fail_strict_and_are_counted_lenient)
{
    const int w = 320, h = 240;
    uint8_t *px = malloc((size_t)w * h * 3);
    tu_fill_smooth(px, w, h, 3, 21);
    char why[256];
    int used;
    for (int prog = 0; prog < 2; prog++) {
        size_t len;
        uint8_t *jpg = tu_jpeg_lib(px, w, h, 90, prog ? TU_JPEG_PROGRESSIVE : TU_JPEG_BASELINE, &len);
        size_t s0 = scan_start(jpg, len);
        /* mid-scan, and in the first rows, which the eval crop skips */
        size_t offs[2] = {s0 + (len - s0) / 2, s0 + 6};
        for (int k = 0; k < 2; k++) {
            uint8_t *bad = plant_marker(jpg, len, offs[k]);
            gf__transform ts[3] = {tu_eval_transform(32, 32, 3, 0.5f), tu_train_transform(48, 48, 3),
                                   tu_eval_transform(32, 32, 3, 0.5f)};
            ts[2].full_decode = 1;
            for (int ti = 0; ti < 3; ti++) {
                for (int m = GF_STRICT; m <= GF_STRICT_WHOLE; m++) {
                    if (m == GF_LENIENT)
                        continue;
                    int rc = dec_mode(bad, len, ts[ti], (gf_strictness)m, &used, why,
                                      sizeof why);
                    ck_assert_msg(rc == GF_ECORRUPT, "prog %d off %d t %d mode %d: rc %d (%s)",
                                  prog, k, ti, m, rc, why);
                    ck_assert_msg(strstr(why, "corrupt JPEG data: ") == why &&
                                      strstr(why, "lenient"),
                                  "why: %s", why);
                }
                int rc = dec_mode(bad, len, ts[ti], GF_LENIENT, &used, why, sizeof why);
                ck_assert_msg(rc == 0, "lenient: rc %d (%s)", rc, why);
                ck_assert_int_eq(used & GF__WARNED, GF__WARNED);
            }
            free(bad);
        }
        /* Junk before EOI: "Corrupt JPEG data: 34 extraneous bytes before
         * marker 0xd9" (the bytes the Huffman decoder read ahead are not
         * counted), seen once the decode reaches the end. */
        size_t jl = len + 40;
        uint8_t *junk = malloc(jl);
        memcpy(junk, jpg, len - 2);
        for (int i = 0; i < 40; i++)
            junk[len - 2 + i] = (uint8_t)(i + 1);
        junk[jl - 2] = 0xff;
        junk[jl - 1] = 0xd9;
        gf__transform te = tu_eval_transform(32, 32, 3, 0.875f);
        int rc = dec_mode(junk, jl, te, GF_STRICT_WHOLE, &used, why, sizeof why);
        ck_assert_int_eq(rc, GF_ECORRUPT);
        ck_assert_msg(strstr(why, "corrupt JPEG data: ") == why &&
                          strstr(why, "extraneous bytes before marker 0xd9"),
                      "why: %s", why);
        ck_assert_int_eq(dec_mode(junk, jl, te, GF_LENIENT, &used, why, sizeof why), 0);
        /* Good files decode in every mode, with no warning. */
        for (int m = GF_STRICT; m <= GF_STRICT_WHOLE; m++) {
            ck_assert_int_eq(dec_mode(jpg, len, te, (gf_strictness)m, &used, why, sizeof why),
                             0);
            ck_assert_int_eq(used & GF__WARNED, 0);
        }
        free(junk);
        free(jpg);
    }
    free(px);
}
END_TEST

START_TEST(damage_below_a_partial_decode_is_seen_only_when_whole)
{
    /* The documented limit of STRICT: rows below the crop's last row are
     * not read, so a warning there (which cannot change the pixels
     * delivered) is not seen; STRICT_WHOLE reads to EOI. Progressive files
     * are read whole by jpeg_start_decompress, so STRICT sees it there. */
    const int w = 320, h = 240;
    uint8_t *px = malloc((size_t)w * h * 3);
    tu_fill_smooth(px, w, h, 3, 22);
    char why[256];
    int used;
    for (int prog = 0; prog < 2; prog++) {
        size_t len;
        uint8_t *jpg = tu_jpeg_lib(px, w, h, 90, prog ? TU_JPEG_PROGRESSIVE : TU_JPEG_BASELINE, &len);
        uint8_t *bad = plant_marker(jpg, len, len - 12);
        gf__transform t = tu_eval_transform(32, 32, 3, 0.5f); /* the centre half */
        int rc = dec_mode(bad, len, t, GF_STRICT, &used, why, sizeof why);
        ck_assert_msg(rc == (prog ? GF_ECORRUPT : 0), "prog %d: rc %d (%s)", prog, rc, why);
        ck_assert_int_eq(dec_mode(bad, len, t, GF_STRICT_WHOLE, &used, why, sizeof why),
                         GF_ECORRUPT);
        ck_assert_msg(strstr(why, "corrupt JPEG data"), "why: %s", why);
        free(bad);
        free(jpg);
    }
    free(px);
}
END_TEST

START_TEST(random_scan_damage_fails_strict_where_lenient_warns)
{
    const int w = 160, h = 120;
    uint8_t *px = malloc((size_t)w * h * 3);
    tu_fill_smooth(px, w, h, 3, 23);
    char why[256];
    int used, caught = 0;
    for (int prog = 0; prog < 2; prog++) {
        size_t len;
        uint8_t *jpg = tu_jpeg_lib(px, w, h, 90, prog ? TU_JPEG_PROGRESSIVE : TU_JPEG_BASELINE, &len);
        size_t s0 = scan_start(jpg, len);
        uint8_t *bad = malloc(len);
        for (int trial = 0; trial < 30; trial++) {
            memcpy(bad, jpg, len);
            uint32_t s = (uint32_t)trial * 2654435761u + 7;
            for (int k = 0; k < 8; k++) {
                s = s * 1664525u + 1013904223u;
                bad[s0 + (s >> 8) % (len - 2 - s0)] ^= (uint8_t)(1 + (s >> 24) % 255);
            }
            /* The same partial decode: lenient warns exactly where strict
             * fails (strict may also fail at the end, which it reads when
             * the crop reaches the bottom); whole fails wherever strict does. */
            gf__transform t = tu_eval_transform(48, 48, 3, 0.875f);
            int lr = dec_mode(bad, len, t, GF_LENIENT, &used, why, sizeof why);
            int warned = lr == 0 && (used & GF__WARNED);
            int sr = dec_mode(bad, len, t, GF_STRICT, &used, why, sizeof why);
            int wr = dec_mode(bad, len, t, GF_STRICT_WHOLE, &used, why, sizeof why);
            if (lr != 0) { /* an error, not a warning: the same in every mode */
                ck_assert_int_eq(sr, lr);
                continue;
            }
            if (warned)
                ck_assert_msg(sr == GF_ECORRUPT || sr == GF_ETRUNC, "trial %d: strict %d",
                              trial, sr);
            if (sr)
                ck_assert_msg(wr == GF_ECORRUPT || wr == GF_ETRUNC, "trial %d: whole %d (%s)",
                              trial, wr, why);
            caught += warned;
        }
        free(bad);
        free(jpg);
    }
    ck_assert_msg(caught > 0, "no flipped scan made libjpeg warn");
    free(px);
}
END_TEST
#endif

START_TEST(huge_png_header_is_etoobig_before_allocating)
{
    tu_limit_address_space();
    /* IHDR claims 100000 x 100000 RGB; the tiny IDAT is never reached. */
    uint8_t raw[3] = {1, 2, 3};
    size_t len;
    uint8_t *png = tu_png_raw(1, 1, 8, 2, raw, 3, NULL, 0, NULL, 0, &len);
    png[16] = 0, png[17] = 0x01, png[18] = 0x86, png[19] = 0xa0; /* width */
    png[20] = 0, png[21] = 0x01, png[22] = 0x86, png[23] = 0xa0; /* height */
    gf__transform t = tu_train_transform(16, 16, 3);
    char why[256];
    ck_assert_int_eq(dec_rc(png, len, &t, why, sizeof why), GF_ETOOBIG);
    ck_assert_str_eq(why, "PNG 100000x100000 = 10000000000 pixels over the limit of 67108864");
    free(png);
}
END_TEST

START_TEST(huge_jpeg_header_is_etoobig_for_both_decoders)
{
    tu_limit_address_space();
    const int w = 32, h = 32;
    uint8_t *px = malloc(w * h * 3);
    tu_fill_smooth(px, w, h, 3, 15);
    size_t len;
    uint8_t *jpg = tu_jpg_mem(px, w, h, 3, 90, &len);
    size_t sof = 0;
    for (size_t i = 2; i + 9 < len; i++)
        if (jpg[i] == 0xff && jpg[i + 1] == 0xc0) {
            sof = i;
            break;
        }
    ck_assert_uint_gt(sof, 0);
    jpg[sof + 5] = 0xfd, jpg[sof + 6] = 0xe8; /* height 65000 */
    jpg[sof + 7] = 0xfd, jpg[sof + 8] = 0xe8; /* width 65000 */
    char why[256];
    for (int dcd = 0; dcd < 2; dcd++) {
        gf__transform t = tu_train_transform(16, 16, 3);
        t.decoder = dcd ? GF_DECODER_STB : GF_DECODER_AUTO;
        ck_assert_int_eq(dec_rc(jpg, len, &t, why, sizeof why), GF_ETOOBIG);
        ck_assert_msg(strstr(why, "JPEG 65000x65000") != NULL, "why: %s", why);
    }
    free(jpg);
    free(px);
}
END_TEST

START_TEST(bad_arguments_are_einval)
{
    gf__transform t = tu_train_transform(16, 16, 2);
    char why[64];
    ck_assert_int_eq(dec_rc((const uint8_t *)"x", 1, &t, why, sizeof why), GF_EINVAL);
    t = tu_train_transform(0, 16, 3);
    ck_assert_int_eq(dec_rc((const uint8_t *)"x", 1, &t, why, sizeof why), GF_EINVAL);
}
END_TEST

#if GF_HAVE_TURBO
/* Each scan of a progressive file is a pass over every coefficient block:
 * past GF__JPEG_MAX_SCANS the file is refused, not decoded for minutes.
 * Under the cap a repeated scan changes nothing: same pixels. */
START_TEST(jpeg_scans_over_the_cap_are_a_bomb_and_under_it_decode)
{
    const int w = 64, h = 48;
    uint8_t *px = malloc((size_t)w * h * 3);
    tu_fill_smooth(px, w, h, 3, 5);
    gf__transform t = tu_eval_transform(w, h, 3, 1.0f);
    size_t n4, n400, nbomb;
    uint8_t *plain = tu_jpeg_scans(px, w, h, 4, &n4);
    uint8_t *under = tu_jpeg_scans(px, w, h, 400, &n400);
    uint8_t *bomb = tu_jpeg_scans(px, w, h, GF__JPEG_MAX_SCANS + 1, &nbomb);
    ck_assert_uint_gt(n400, n4 + 396 * 6); /* 396 real copies of a scan */
    size_t bytes = (size_t)w * h * 3;
    for (gf_strictness m = GF_STRICT; m <= GF_STRICT_WHOLE; m++) {
        int used;
        char why[160];
        ck_assert_int_eq(dec_mode(under, n400, t, m, &used, why, sizeof why), 0);
        ck_assert_int_eq(dec_mode(bomb, nbomb, t, m, &used, why, sizeof why), GF_ECORRUPT);
        ck_assert_str_eq(why, "JPEG: more than 500 scans (a decompression-time bomb?)");
    }
    gf__transform ts = t; /* stb_image has no cap of its own: decode.c counts */
    ts.decoder = GF_DECODER_STB;
    char why[160];
    ck_assert_int_eq(dec_rc(under, n400, &ts, why, sizeof why), 0);
    ck_assert_int_eq(dec_rc(bomb, nbomb, &ts, why, sizeof why), GF_ECORRUPT);
    ck_assert_str_eq(why, "JPEG: more than 500 scans (a decompression-time bomb?)");
    uint8_t *a = dec(plain, n4, &t, 1, NULL), *b = dec(under, n400, &t, 1, NULL);
    ck_assert_mem_eq(a, b, bytes);
    free(a);
    free(b);
    free(plain);
    free(under);
    free(bomb);
    free(px);
}
END_TEST

/* The flag the loader raises at close ends a decode in progress. */
START_TEST(a_raised_cancel_flag_ends_a_progressive_decode)
{
    const int w = 64, h = 48;
    uint8_t *px = malloc((size_t)w * h * 3);
    tu_fill_smooth(px, w, h, 3, 6);
    size_t n;
    uint8_t *jpg = tu_jpeg_scans(px, w, h, 8, &n);
    gf__transform t = tu_eval_transform(w, h, 3, 1.0f);
    gf__decoder *d;
    ck_assert_int_eq(gf__decoder_create(&d), 0);
    atomic_int cancel = 1;
    gf__decoder_set_cancel(d, &cancel);
    uint8_t *out = malloc((size_t)w * h * 3);
    char why[160];
    int used;
    unsigned before = atomic_load(&gf__decode_cancels);
    ck_assert_int_eq(gf__decode(d, jpg, n, &t, 1, out, &used, why, sizeof why), GF_EBUSY);
    ck_assert_str_eq(why, "JPEG: decode cancelled (the loader is stopping)");
    ck_assert_uint_eq(atomic_load(&gf__decode_cancels), before + 1);
    cancel = 0; /* the same decoder decodes again once lowered */
    ck_assert_int_eq(gf__decode(d, jpg, n, &t, 1, out, &used, why, sizeof why), 0);
    gf__decoder_destroy(d);
    free(out);
    free(jpg);
    free(px);
}
END_TEST
#endif

/* Offset of the first SOFn marker (FF C0-CF but DHT C4, JPG C8, DAC CC). */
static size_t sof_at(const uint8_t *p, size_t n)
{
    for (size_t i = 2; i + 4 < n; i++)
        if (p[i] == 0xff && p[i + 1] >= 0xc0 && p[i + 1] <= 0xcf && p[i + 1] != 0xc4 &&
            p[i + 1] != 0xc8 && p[i + 1] != 0xcc)
            return i;
    ck_abort_msg("no SOF");
    return 0;
}

#if GF_HAVE_TURBO && LIBJPEG_TURBO_VERSION_NUMBER < 3000000
#define TURBO_LACKS_LOSSLESS 1 /* libjpeg-turbo 3 decodes SOF3 */
#else
#define TURBO_LACKS_LOSSLESS 0
#endif

/* Valid JPEG processes a decoder lacks are GF_EFORMAT ("unsupported"),
 * not corrupt data: another frame type (SOF marker) or precision written
 * into a baseline file. stb_image reads only 8-bit Huffman frames; libjpeg
 * (this 8-bit build) reads no 12-bit and no hierarchical frame. */
START_TEST(unsupported_jpeg_processes_are_eformat_naming_what)
{
    const int w = 32, h = 24;
    uint8_t px[32 * 24 * 3];
    tu_fill_smooth(px, w, h, 3, 9);
    size_t n;
    uint8_t *jpg = tu_jpg_mem(px, w, h, 3, 90, &n);
    size_t sof = sof_at(jpg, n);
    static const struct {
        uint8_t marker, precision;
        const char *stb;
        int turbo; /* GF_EFORMAT on libjpeg-turbo too (its text: "SOF type") */
    } cases[] = {
        {0xc0, 12, "JPEG: 12-bit samples are not supported", 1},
        {0xc1, 12, "JPEG: 12-bit samples are not supported", 1},
        {0xc3, 8, "JPEG: lossless coding is not supported by stb_image",
         TURBO_LACKS_LOSSLESS},
        {0xc5, 8, "JPEG: hierarchical coding is not supported by stb_image", 1},
        {0xc6, 8, "JPEG: hierarchical coding is not supported by stb_image", 1},
        {0xc7, 8, "JPEG: hierarchical coding is not supported by stb_image", 1},
        {0xc9, 8, "JPEG: arithmetic coding is not supported by stb_image", 0},
        {0xca, 8, "JPEG: arithmetic coding is not supported by stb_image", 0},
        {0xcb, 8, "JPEG: arithmetic coding is not supported by stb_image", 1},
        {0xcd, 8, "JPEG: arithmetic coding is not supported by stb_image", 1},
        {0xce, 8, "JPEG: arithmetic coding is not supported by stb_image", 1},
        {0xcf, 8, "JPEG: arithmetic coding is not supported by stb_image", 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        uint8_t *b = malloc(n);
        memcpy(b, jpg, n);
        b[sof + 1] = cases[k].marker;
        b[sof + 4] = cases[k].precision;
        gf__transform t = tu_eval_transform(16, 16, 3, 1.0f);
        t.decoder = GF_DECODER_STB;
        char why[160];
        ck_assert_int_eq(dec_rc(b, n, &t, why, sizeof why), GF_EFORMAT);
        ck_assert_str_eq(why, cases[k].stb);
#if GF_HAVE_TURBO
        t.decoder = GF_DECODER_TURBO;
        int rc = dec_rc(b, n, &t, why, sizeof why);
        if (cases[k].precision != 8) {
            ck_assert_msg(rc == GF_EFORMAT, "0x%02x: %d %s", cases[k].marker, rc, why);
            ck_assert_str_eq(why, cases[k].stb);
        } else if (cases[k].turbo) {
            ck_assert_msg(rc == GF_EFORMAT && strstr(why, "SOF type"), "0x%02x: %d %s",
                          cases[k].marker, rc, why);
        }
#endif
        free(b);
    }
    free(jpg);
}
END_TEST

#if GF_HAVE_TURBO
/* A real arithmetic-coded file: libjpeg-turbo decodes it, stb_image says
 * it cannot. */
START_TEST(arithmetic_coded_jpeg_decodes_on_turbo_and_is_eformat_on_stb)
{
    const int w = 48, h = 32;
    uint8_t *px = malloc((size_t)w * h * 3);
    tu_fill_smooth(px, w, h, 3, 10);
    size_t n;
    uint8_t *jpg = tu_jpeg_lib(px, w, h, 95, TU_JPEG_ARITH, &n);
    ck_assert_uint_eq(jpg[sof_at(jpg, n) + 1], 0xc9);

    gf__transform t = tu_eval_transform(w, h, 3, 1.0f);
    t.decoder = GF_DECODER_TURBO;
    uint8_t *out = dec(jpg, n, &t, 1, NULL);
    ck_assert_double_lt(mean_abs_diff(out, px, (size_t)w * h * 3, NULL), 4.0);
    t.decoder = GF_DECODER_STB;
    char why[160];
    ck_assert_int_eq(dec_rc(jpg, n, &t, why, sizeof why), GF_EFORMAT);
    ck_assert_str_eq(why, "JPEG: arithmetic coding is not supported by stb_image");
    free(out);
    free(jpg);
    free(px);
}
END_TEST
#endif

/* A real-file miss (issue 26): a JPEG whose DQT segments were removed.
 * libjpeg says "Quantization table 0x00 was not defined"; stb_image
 * decoded it with zeros, a grey image, as good. Every decoder and
 * strictness now refuses it with libjpeg's words. */
START_TEST(a_jpeg_without_its_quantization_tables_is_ecorrupt_on_every_path)
{
    const int w = 32, h = 24;
    uint8_t px[32 * 24 * 3];
    tu_fill_smooth(px, w, h, 3, 4);
    size_t n;
    uint8_t *jpg = tu_jpg_mem(px, w, h, 3, 90, &n);
    size_t k = 2;
    for (size_t i = 2; i + 4 <= n;) { /* drop every DQT (FF DB) before the scan */
        size_t seg = 2 + ((size_t)jpg[i + 2] << 8 | jpg[i + 3]);
        int last = jpg[i + 1] == 0xda;
        if (last)
            seg = n - i;
        if (jpg[i + 1] != 0xdb) {
            memmove(jpg + k, jpg + i, seg);
            k += seg;
        }
        i += seg;
        if (last)
            break;
    }
    ck_assert_uint_lt(k, n);
    static const gf_strictness modes[] = {GF_STRICT, GF_STRICT_WHOLE, GF_LENIENT};
    gf__decoder *d;
    ck_assert_int_eq(gf__decoder_create(&d), 0);
    uint8_t out[32 * 24 * 3];
    size_t good_n;
    uint8_t *good = tu_jpg_mem(px, w, h, 3, 90, &good_n);
    for (int m = 0; m < 3; m++)
        for (int dec = 0; dec < 2; dec++) {
            gf__transform t = tu_eval_transform(w, h, 3, 1.0f);
            t.strictness = modes[m];
            t.decoder = dec ? GF_DECODER_STB : GF_DECODER_AUTO;
            char why[256] = "";
            int used;
            /* a good file first: libjpeg's handle keeps its tables */
            ck_assert_int_eq(gf__decode(d, good, good_n, &t, 1, out, &used, why, sizeof why), 0);
            int rc = gf__decode(d, jpg, k, &t, 1, out, &used, why, sizeof why);
            ck_assert_msg(rc == GF_ECORRUPT &&
                              strstr(why, "JPEG: Quantization table 0x00 was not defined"),
                          "mode %d decoder %d: %d %s", modes[m], dec, rc, why);
        }
    gf__decoder_destroy(d);
    free(good);
    free(jpg);
}
END_TEST

static Suite *decode_suite(void)
{
    Suite *s = suite_create("decode");
    TCase *png = tcase_create("png");
    tcase_add_test(png, png_rgb_identity_is_pixel_exact);
    tcase_add_test(png, train_with_full_scale_and_no_flip_is_identity);
    tcase_add_test(png, png_channel_conversions_follow_the_rules);
    tcase_add_test(png, png_16bit_is_rounded_to_8bit);
    tcase_add_test(png, png_palette_expands_with_transparency);
    tcase_add_test(png, eval_center_crop_picks_the_center);
    suite_add_tcase(s, png);

    TCase *train = tcase_create("train");
    tcase_add_test(train, flip_mirrors_exactly);
    tcase_add_test(train, same_key_same_bytes_different_keys_different_crops);
    tcase_add_test(train, public_decode_image_depends_on_seed_epoch_index);
    tcase_add_test(train, decoder_reuse_across_sizes_stays_correct);
    tcase_add_test(train, small_image_enlarges_within_its_range);
    suite_add_tcase(s, train);

    TCase *fit = tcase_create("fit");
    tcase_add_test(fit, fit_caps_the_longer_side_keeps_aspect_and_never_enlarges);
    tcase_add_test(fit, fit_downscale_is_antialiased);
    suite_add_tcase(s, fit);

    TCase *jpeg = tcase_create("jpeg");
    tcase_add_test(jpeg, jpeg_stb_and_turbo_agree_with_each_other_and_the_source);
#if GF_HAVE_TURBO
    tcase_add_test(jpeg, jpeg_gray_and_rgba_outputs_agree_between_decoders);
    tcase_add_test(jpeg, dct_scaled_partial_jpeg_matches_full_decode);
    tcase_add_test(jpeg, cropped_jpeg_decode_equals_whole_decode_then_crop);
    tcase_add_test(jpeg, jpeg_warnings_fail_strict_and_are_counted_lenient);
    tcase_add_test(jpeg, damage_below_a_partial_decode_is_seen_only_when_whole);
    tcase_add_test(jpeg, random_scan_damage_fails_strict_where_lenient_warns);
    tcase_add_test(jpeg, cmyk_jpeg_decodes_to_rgb_like_photoshop);
#endif
    suite_add_tcase(s, jpeg);

    TCase *rs = tcase_create("resample");
    tcase_add_test(rs, resampler_is_within_one_of_a_float_reference);
    tcase_add_test(rs, resampler_at_scale_one_is_bit_exact);
    tcase_add_test(rs, resampler_reuses_weights_for_the_same_geometry);
    suite_add_tcase(s, rs);

    TCase *bad = tcase_create("bad_inputs");
    tcase_add_test(bad, empty_and_tiny_and_text_inputs_are_rejected);
    tcase_add_test(bad, truncated_jpeg_is_etrunc_for_both_decoders);
    tcase_add_test(bad, truncated_png_is_etrunc);
    tcase_add_test(bad, corrupt_jpeg_middle_never_crashes);
    tcase_add_test(bad, overfull_huffman_table_is_ecorrupt_for_both_decoders);
    tcase_add_test(bad, pnm_header_numbers_over_int_max_are_ecorrupt);
    tcase_add_test(bad, huge_png_header_is_etoobig_before_allocating);
    tcase_add_test(bad, huge_jpeg_header_is_etoobig_for_both_decoders);
    tcase_add_test(bad, bad_arguments_are_einval);
#if GF_HAVE_TURBO
    tcase_add_test(bad, jpeg_scans_over_the_cap_are_a_bomb_and_under_it_decode);
    tcase_add_test(bad, a_raised_cancel_flag_ends_a_progressive_decode);
    tcase_add_test(bad, arithmetic_coded_jpeg_decodes_on_turbo_and_is_eformat_on_stb);
#endif
    tcase_add_test(bad, unsupported_jpeg_processes_are_eformat_naming_what);
    tcase_add_test(bad, a_jpeg_without_its_quantization_tables_is_ecorrupt_on_every_path);
    suite_add_tcase(s, bad);
    return s;
}

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

int main(void)
{
    /* libjpeg-turbo's SIMD upsamplers load whole vectors across the row
     * padding of their main buffer, which no decode writes; memcheck
     * cannot follow which lanes survive and flags the crops' pixels
     * (cropped_jpeg_decode_equals_whole_decode_then_crop). Its C code
     * computes the same pixels and reads no such byte: memcheck runs the
     * suite on it, so every byte compared is proven defined. */
    if (RUNNING_ON_VALGRIND)
        setenv("JSIMD_FORCENONE", "1", 1);
    return tu_run_suite(decode_suite());
}
