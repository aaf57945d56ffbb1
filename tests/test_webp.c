/* WebP through libwebp (src/decode_webp.c): lossless pixels exact, lossy
 * within a tolerance, alpha kept, cropped decodes identical to whole
 * ones, damaged files (cut, flipped, lying sizes, huge canvases, animated)
 * refused with their reason, and folders and shards of .webp through the
 * loader. Without libwebp: the refusal. */
#include "config.h"
#include "decode.h"
#include "testutil.h"
#include "tu_engine.h"
#include "run_suite.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if GF_HAVE_WEBP
#include <webp/encode.h>
#endif

/* ---- helpers ---- */

/* One decode with a fresh decoder: rc, *used, why; the pixels in *out
 * (caller frees) when out is not NULL. */
static int dec_full(const uint8_t *data, size_t len, const gf__transform *t, uint64_t key,
                    uint8_t **out, int *used, char *why, size_t why_len)
{
    gf__decoder *d;
    ck_assert_int_eq(gf__decoder_create(&d), 0);
    uint8_t *px = malloc((size_t)t->out_w * t->out_h * t->channels);
    int u = 0;
    why[0] = 0;
    int rc = gf__decode(d, data, len, t, key, px, &u, why, why_len);
    gf__decoder_destroy(d);
    if (used)
        *used = u;
    if (out)
        *out = px;
    else
        free(px);
    return rc;
}

/* RIFF + WEBP + one empty VP8L chunk header: sniffed as WebP, which a
 * build without libwebp refuses before parsing anything. */
static const uint8_t riff_webp[20] = {'R', 'I', 'F', 'F', 12, 0, 0, 0, 'W', 'E',
                                      'B', 'P', 'V', 'P', '8', 'L', 0, 0, 0, 0};

#if GF_HAVE_WEBP

/* Decodes; fails the test on error; checks it went through libwebp. */
static uint8_t *dec(const uint8_t *data, size_t len, const gf__transform *t, uint64_t key)
{
    uint8_t *out;
    char why[256];
    int used;
    int rc = dec_full(data, len, t, key, &out, &used, why, sizeof why);
    ck_assert_msg(rc == 0, "decode failed: %s: %s", gf_err_name(rc), why);
    ck_assert_int_eq(used & ~GF__FLIPPED, GF__USED_WEBP);
    return out;
}

static int dec_mode(const uint8_t *data, size_t len, gf__transform t, gf_strictness m,
                    char *why, size_t why_len)
{
    t.strictness = m;
    int used;
    int rc = dec_full(data, len, &t, 42, NULL, &used, why, why_len);
    ck_assert_int_eq(used & GF__WARNED, 0); /* libwebp never warns */
    return rc;
}

enum { LOSSY, LOSSY_ALPHA, LOSSLESS, LOSSLESS_ALPHA, KINDS };
static const char *const kind_name[KINDS] = {"lossy", "lossy+alpha", "lossless",
                                             "lossless+alpha"};

/* w x h pixels for kind k (4 channels for the alpha kinds: alpha never
 * 0, where libwebp's lossless encoder may rewrite invisible colours):
 * smooth, photo-like, or noise (which lossless coding keeps exactly, and
 * lossy coding would not come near). */
static uint8_t *pixels(int k, int w, int h, uint32_t seed, int smooth)
{
    int c = k == LOSSY_ALPHA || k == LOSSLESS_ALPHA ? 4 : 3;
    uint8_t *px = malloc((size_t)w * h * c);
    if (smooth)
        tu_fill_smooth(px, w, h, c, seed);
    else
        tu_fill(px, w, h, c, seed);
    if (c == 4)
        for (size_t i = 3; i < (size_t)w * h * 4; i += 4)
            px[i] = (uint8_t)(px[i] | 1);
    return px;
}

static uint8_t *source(int k, int w, int h, uint32_t seed)
{
    return pixels(k, w, h, seed, k == LOSSY || k == LOSSY_ALPHA);
}

/* px (from pixels(k)) encoded as kind k, in a malloc'ed copy. */
static uint8_t *encode(int k, const uint8_t *px, int w, int h, size_t *len)
{
    uint8_t *out = NULL;
    switch (k) {
    case LOSSY: *len = WebPEncodeRGB(px, w, h, w * 3, 90, &out); break;
    case LOSSY_ALPHA: *len = WebPEncodeRGBA(px, w, h, w * 4, 90, &out); break;
    case LOSSLESS: *len = WebPEncodeLosslessRGB(px, w, h, w * 3, &out); break;
    default: *len = WebPEncodeLosslessRGBA(px, w, h, w * 4, &out); break;
    }
    ck_assert_msg(*len > 0, "libwebp could not encode %s", kind_name[k]);
    uint8_t *copy = malloc(*len);
    memcpy(copy, out, *len);
    WebPFree(out);
    return copy;
}

static uint8_t *encoded(int k, int w, int h, uint32_t seed, size_t *len)
{
    uint8_t *px = source(k, w, h, seed);
    uint8_t *webp = encode(k, px, w, h, len);
    free(px);
    return webp;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

static void put_le(uint8_t *p, uint32_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> 8 * i);
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
    *max_out = mx;
    return s / (double)n;
}

/* ---- good files ---- */

/* Eval at the source size with crop_fraction 1 is the identity: the
 * lossless pixels come back exactly, in every output channel count. */
START_TEST(lossless_decodes_to_the_source_pixels)
{
    const int w = 37, h = 23;
    for (int k = LOSSLESS; k <= LOSSLESS_ALPHA; k++) {
        int n = k == LOSSLESS_ALPHA ? 4 : 3;
        uint8_t *px = source(k, w, h, 7);
        size_t len;
        uint8_t *webp = encode(k, px, w, h, &len);
        for (int C = 1; C <= 4; C++) {
            if (C == 2)
                continue;
            gf__transform t = tu_eval_transform(w, h, C, 1.0f);
            uint8_t *out = dec(webp, len, &t, 1);
            for (int i = 0; i < w * h; i++) {
                const uint8_t *s = px + (size_t)i * n, *o = out + (size_t)i * C;
                if (C == 1) {
                    int y = (19595 * s[0] + 38470 * s[1] + 7471 * s[2] + 32768) >> 16;
                    ck_assert_int_eq(o[0], y);
                    continue;
                }
                ck_assert_msg(memcmp(o, s, 3) == 0, "%s C=%d: pixel %d differs",
                              kind_name[k], C, i);
                if (C == 4) /* alpha kept; opaque where the file has none */
                    ck_assert_int_eq(o[3], n == 4 ? s[3] : 255);
            }
            free(out);
        }
        free(webp);
        free(px);
    }
}
END_TEST

/* Lossy at quality 90 on smooth pixels: close to the source (measured
 * mean 1.36, max 10 levels); its alpha is coded losslessly (libwebp's
 * default alpha_quality 100), so it comes back exactly. */
START_TEST(lossy_is_close_to_the_source_and_keeps_alpha)
{
    const int w = 160, h = 120;
    for (int k = LOSSY; k <= LOSSY_ALPHA; k++) {
        int n = k == LOSSY_ALPHA ? 4 : 3;
        uint8_t *px = source(k, w, h, 11);
        size_t len;
        uint8_t *webp = encode(k, px, w, h, &len);
        gf__transform t = tu_eval_transform(w, h, 4, 1.0f);
        uint8_t *out = dec(webp, len, &t, 1);
        uint8_t *rgb = malloc((size_t)w * h * 3), *src = malloc((size_t)w * h * 3);
        for (int i = 0; i < w * h; i++) {
            memcpy(rgb + 3 * i, out + 4 * i, 3);
            memcpy(src + 3 * i, px + n * i, 3);
            ck_assert_int_eq(out[4 * i + 3], n == 4 ? px[4 * i + 3] : 255);
        }
        int mx;
        double m = mean_abs_diff(rgb, src, (size_t)w * h * 3, &mx);
        ck_assert_msg(m < 2.5 && mx <= 32, "%s: mean %.2f max %d", kind_name[k], m, mx);
        free(src);
        free(rgb);
        free(out);
        free(webp);
        free(px);
    }
}
END_TEST

/* The cropped decode (only the span the resampler reads, plus the
 * upsampler's margin) gives the bytes of a whole decode resampled with
 * the same crop, for every kind, odd sizes, train crops (odd offsets) and
 * eval, in every channel count; STRICT_WHOLE (which decodes the whole
 * image) too. */
START_TEST(cropped_decode_equals_whole_decode)
{
    const int sizes[3][2] = {{203, 151}, {160, 120}, {67, 301}};
    for (int k = 0; k < KINDS; k++)
        for (int si = 0; si < 3; si++) {
            int w = sizes[si][0], h = sizes[si][1];
            size_t len;
            uint8_t *webp = encoded(k, w, h, (uint32_t)(100 + si), &len);
            for (int C = 1; C <= 4; C++) {
                if (C == 2)
                    continue;
                for (uint64_t key = 0; key < 12; key++) {
                    gf__transform t = key % 4 == 3 ? tu_eval_transform(40, 40, C, 0.5f) : tu_train_transform(24, 24, C);
                    t.scale_min = 0.05f; /* small crops: most of the image skipped */
                    uint8_t *part = dec(webp, len, &t, key);
                    gf__transform tf = t;
                    tf.full_decode = 1;
                    uint8_t *full = dec(webp, len, &tf, key);
                    tf.full_decode = 0;
                    tf.strictness = GF_STRICT_WHOLE;
                    uint8_t *whole = dec(webp, len, &tf, key);
                    size_t n = (size_t)t.out_w * t.out_h * C;
                    ck_assert_msg(memcmp(part, full, n) == 0 && memcmp(whole, full, n) == 0,
                                  "%s %dx%d C=%d key %d: cropped != whole", kind_name[k], w, h,
                                  C, (int)key);
                    free(part);
                    free(full);
                    free(whole);
                }
            }
            free(webp);
        }
}
END_TEST

/* One decoder across sizes and kinds: its reused buffer never leaks one
 * sample's pixels into the next. */
START_TEST(decoder_reuse_across_sizes_stays_exact)
{
    gf__decoder *d;
    ck_assert_int_eq(gf__decoder_create(&d), 0);
    const int dims[4][2] = {{90, 70}, {17, 13}, {120, 33}, {17, 13}};
    for (int r = 0; r < 4; r++) {
        int w = dims[r][0], h = dims[r][1], k = r % 2 ? LOSSLESS_ALPHA : LOSSLESS;
        uint8_t *px = source(k, w, h, (uint32_t)r);
        size_t len;
        uint8_t *webp = encode(k, px, w, h, &len);
        int n = k == LOSSLESS_ALPHA ? 4 : 3;
        gf__transform t = tu_eval_transform(w, h, n, 1.0f);
        uint8_t *out = malloc((size_t)w * h * n);
        char why[256];
        int used;
        ck_assert_int_eq(gf__decode(d, webp, len, &t, 0, out, &used, why, sizeof why), 0);
        ck_assert_int_eq(used, GF__USED_WEBP);
        ck_assert_mem_eq(out, px, (size_t)w * h * n);
        free(out);
        free(webp);
        free(px);
    }
    gf__decoder_destroy(d);
}
END_TEST

/* ---- damaged files ---- */

/* A file cut anywhere after the RIFF header is GF_ETRUNC in every mode and
 * for every crop: the RIFF size says more bytes are due, whatever rows a
 * crop needs. */
START_TEST(truncated_files_are_etrunc_in_every_mode)
{
    const int w = 96, h = 72;
    char why[256];
    for (int k = 0; k < KINDS; k++) {
        size_t len;
        uint8_t *webp = encoded(k, w, h, 3, &len);
        size_t cuts[] = {12, 16, 20, 30, 40, len / 3, len / 2, len - 100, len - 2, len - 1};
        for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
            gf__transform ts[2] = {tu_eval_transform(16, 16, 3, 0.3f), tu_train_transform(24, 24, 4)};
            for (int ti = 0; ti < 2; ti++)
                for (int m = GF_STRICT; m <= GF_STRICT_WHOLE; m++) {
                    int rc = dec_mode(webp, cuts[i], ts[ti], (gf_strictness)m, why, sizeof why);
                    ck_assert_msg(rc == GF_ETRUNC, "%s cut at %zu of %zu, mode %d: %s (%s)",
                                  kind_name[k], cuts[i], len, m, gf_err_name(rc), why);
                    ck_assert_str_eq(why, "WebP: premature end of data (truncated?)");
                }
        }
        free(webp);
    }
}
END_TEST

/* The RIFF size field lying: over the data is a cut file (GF_ETRUNC);
 * under the image chunk's end is corrupt (libwebp: the chunk does not fit
 * the RIFF). Bytes after the RIFF's end are not part of the file: ignored,
 * as libwebp and PIL ignore them. */
START_TEST(a_lying_riff_size_is_named)
{
    char why[256];
    gf__transform t = tu_eval_transform(32, 32, 3, 1.0f);
    for (int k = 0; k < KINDS; k++) {
        size_t len;
        uint8_t *webp = encoded(k, 64, 48, 5, &len);
        uint32_t riff = le32(webp + 4);
        ck_assert_uint_eq(riff + 8, len);
        put_le(webp + 4, riff + 2, 4);
        ck_assert_int_eq(dec_mode(webp, len, t, GF_LENIENT, why, sizeof why), GF_ETRUNC);
        ck_assert_str_eq(why, "WebP: premature end of data (truncated?)");
        put_le(webp + 4, riff - 10, 4);
        for (int m = GF_STRICT; m <= GF_STRICT_WHOLE; m++) {
            ck_assert_int_eq(dec_mode(webp, len, t, (gf_strictness)m, why, sizeof why),
                             GF_ECORRUPT);
            ck_assert_str_eq(why, "WebP: corrupt data (libwebp: bitstream error)");
        }
        put_le(webp + 4, riff, 4);
        uint8_t *tail = malloc(len + 64);
        memcpy(tail, webp, len);
        memset(tail + len, 0xa5, 64);
        ck_assert_int_eq(dec_mode(tail, len + 64, t, GF_STRICT_WHOLE, why, sizeof why), 0);
        free(tail);
        free(webp);
    }
}
END_TEST

/* Bytes flipped. Where the bitstream has a fixed field (VP8's start code
 * 9d 01 2a, VP8L's signature 0x2f) it is GF_ECORRUPT, always. Elsewhere
 * lossy VP8 has no checksum: a flipped byte may decode to other pixels,
 * or fail; lossless VP8L fails on many (invalid Huffman codes, back
 * references out of the image). What holds for every flip: no crash,
 * only 0 / GF_ECORRUPT / GF_ETRUNC, the same outcome in STRICT and
 * LENIENT (libwebp has no warnings), the same result decoded twice, and a
 * failure seen by a cropped decode is seen by a whole one. */
START_TEST(flipped_bytes_fail_where_the_format_can_tell)
{
    char why[256];
    const int w = 120, h = 90;
    for (int k = 0; k < KINDS; k++) {
        size_t len;
        uint8_t *px = pixels(k, w, h, 9, 1);
        uint8_t *webp = encode(k, px, w, h, &len);
        free(px);
        /* the image chunk: after VP8X and ALPH where the kind has them */
        size_t pos = 12;
        while (memcmp(webp + pos, "VP8 ", 4) && memcmp(webp + pos, "VP8L", 4))
            pos += 8 + ((le32(webp + pos + 4) + 1) & ~1u);
        int lossless = webp[pos + 3] == 'L';
        uint8_t *bad = malloc(len);
        memcpy(bad, webp, len);
        bad[pos + 8 + (lossless ? 0 : 3)] ^= 0x40; /* signature / start code */
        gf__transform t = tu_eval_transform(32, 32, 3, 0.875f);
        for (int m = GF_STRICT; m <= GF_STRICT_WHOLE; m++) {
            ck_assert_int_eq(dec_mode(bad, len, t, (gf_strictness)m, why, sizeof why),
                             GF_ECORRUPT);
            ck_assert_str_eq(why, "WebP: corrupt data (libwebp: bitstream error)");
        }
        int failed = 0;
        size_t data0 = pos + 8 + (lossless ? 5 : 10);
        for (int trial = 0; trial < 40; trial++) {
            memcpy(bad, webp, len);
            uint32_t s = (uint32_t)trial * 2654435761u + 13;
            for (int f = 0; f < 3; f++) {
                s = s * 1664525u + 1013904223u;
                bad[data0 + (s >> 8) % (len - data0)] ^= (uint8_t)(1 + (s >> 24) % 255);
            }
            int sr = dec_mode(bad, len, t, GF_STRICT, why, sizeof why);
            int lr = dec_mode(bad, len, t, GF_LENIENT, why, sizeof why);
            int wr = dec_mode(bad, len, t, GF_STRICT_WHOLE, why, sizeof why);
            ck_assert_msg(sr == 0 || sr == GF_ECORRUPT || sr == GF_ETRUNC, "rc %d", sr);
            ck_assert_int_eq(lr, sr);
            if (sr == GF_ETRUNC) /* the file is whole: the bitstream ran out */
                ck_assert_msg(strstr(why, "in the image chunk"), "why: %s", why);
            if (sr)
                ck_assert_int_eq(wr, sr);
            failed += wr != 0;
            if (wr == 0) { /* deterministic pixels, whatever they are */
                uint8_t *a, *b;
                t.strictness = GF_STRICT_WHOLE;
                ck_assert_int_eq(dec_full(bad, len, &t, 42, &a, NULL, why, sizeof why), 0);
                ck_assert_int_eq(dec_full(bad, len, &t, 42, &b, NULL, why, sizeof why), 0);
                ck_assert_mem_eq(a, b, (size_t)32 * 32 * 3);
                free(a);
                free(b);
                t.strictness = GF_STRICT;
            }
        }
        if (lossless)
            ck_assert_msg(failed > 0, "%s: no flip was caught", kind_name[k]);
        free(bad);
        free(webp);
    }
}
END_TEST

/* The pixel limit from the header, before anything is allocated: a VP8X
 * canvas of 100000 x 100000 (which libwebp itself would only call a
 * bitstream error) and a plain VP8 frame header of 16383 x 16383. */
START_TEST(huge_headers_are_etoobig_before_allocating)
{
    tu_limit_address_space();
    char why[256];
    gf__transform t = tu_train_transform(16, 16, 3);
    size_t len;
    uint8_t *webp = encoded(LOSSY_ALPHA, 32, 32, 1, &len);
    ck_assert(memcmp(webp + 12, "VP8X", 4) == 0);
    put_le(webp + 24, 100000 - 1, 3);
    put_le(webp + 27, 100000 - 1, 3);
    for (int m = GF_STRICT; m <= GF_STRICT_WHOLE; m++) {
        ck_assert_int_eq(dec_mode(webp, len, t, (gf_strictness)m, why, sizeof why), GF_ETOOBIG);
        ck_assert_str_eq(why, "WebP 100000x100000 = 10000000000 pixels over the limit of 67108864");
    }
    free(webp);
    webp = encoded(LOSSY, 32, 32, 1, &len);
    ck_assert(memcmp(webp + 12, "VP8 ", 4) == 0);
    put_le(webp + 26, 16383, 2); /* 14 bits of width, no upscaling */
    put_le(webp + 28, 16383, 2);
    ck_assert_int_eq(dec_mode(webp, len, t, GF_STRICT, why, sizeof why), GF_ETOOBIG);
    ck_assert_str_eq(why, "WebP 16383x16383 = 268402689 pixels over the limit of 67108864");
    free(webp);
}
END_TEST

/* An animation (VP8X with its flag, ANIM, one ANMF frame) is refused with
 * its reason, not decoded as a still. */
START_TEST(animated_files_are_eformat)
{
    size_t flen;
    uint8_t *frame = encoded(LOSSLESS, 8, 8, 2, &flen); /* its VP8L chunk from byte 12 */
    size_t clen = flen - 12, len = 12 + 18 + 14 + 8 + 16 + clen;
    uint8_t *a = calloc(1, len), *p = a;
    memcpy(p, "RIFF", 4), put_le(p + 4, (uint32_t)(len - 8), 4), memcpy(p + 8, "WEBP", 4);
    p += 12;
    memcpy(p, "VP8X", 4), put_le(p + 4, 10, 4), p[8] = 0x02; /* animation */
    put_le(p + 12, 7, 3), put_le(p + 15, 7, 3);
    p += 18;
    memcpy(p, "ANIM", 4), put_le(p + 4, 6, 4);
    p += 14;
    memcpy(p, "ANMF", 4), put_le(p + 4, (uint32_t)(16 + clen), 4);
    put_le(p + 14, 7, 3), put_le(p + 17, 7, 3), put_le(p + 20, 100, 3);
    memcpy(p + 24, frame + 12, clen);
    char why[256];
    gf__transform t = tu_eval_transform(8, 8, 3, 1.0f);
    ck_assert_int_eq(dec_mode(a, len, t, GF_STRICT, why, sizeof why), GF_EFORMAT);
    ck_assert_str_eq(why, "WebP: animated files are not supported");
    free(a);
    free(frame);
}
END_TEST

/* ---- through the loader ---- */

#define CLASSES 3
#define PER_CLASS 5
#define N (CLASSES * PER_CLASS)
#define W 40
#define H 30

/* The loader delivers sample i of class i / PER_CLASS with the lossless
 * source pixels, every one through libwebp. */
static void load_and_check(const char *data)
{
    gf_settings s;
    tu_cpu_settings(&s);
    s.data = data;
    s.width = W;
    s.height = H;
    s.transform = GF_TRANSFORM_EVAL;
    s.crop_fraction = 1.0f;
    s.shuffle = 0;
    s.batch_size = 4;
    s.threads = 2;
    gf_loader *l = NULL;
    int rc = gf_open(&l, &s);
    ck_assert_msg(rc == 0, "gf_open: %s: %s", gf_err_name(rc), gf_last_error(l));
    int counts[CLASSES] = {0}, seen = 0;
    gf_batch *b;
    while ((rc = gf_next(l, &b)) == 0) {
        for (int i = 0; i < b->count; i++, seen++) {
            int k = b->labels[i];
            ck_assert(k >= 0 && k < CLASSES);
            /* shards come in the archive's order: the label picks the class,
             * the pixels (each image's own seed) name the image */
            int found = 0;
            for (int j = 0; j < PER_CLASS && !found; j++) {
                uint8_t *px = source(LOSSLESS, W, H, (uint32_t)(k * 1000 + j));
                found = memcmp(b->pixels + (size_t)i * W * H * 3, px, (size_t)W * H * 3) == 0;
                free(px);
            }
            ck_assert_msg(found, "sample %d (label %d): pixels of no image of its class", seen, k);
            counts[k]++;
        }
        gf_release(l, b);
    }
    ck_assert_msg(rc == GF_EOF, "gf_next: %s: %s", gf_err_name(rc), gf_last_error(l));
    ck_assert_int_eq(seen, N);
    for (int k = 0; k < CLASSES; k++)
        ck_assert_int_eq(counts[k], PER_CLASS);
    gf_stats st;
    gf_get_stats(l, &st);
    ck_assert_uint_eq(st.samples, N);
    ck_assert_uint_eq(st.errors, 0);
    ck_assert_uint_eq(st.decoded_webp, N);
    ck_assert_uint_eq(st.decoded_stb + st.decoded_turbo + st.decoded_spng, 0);
    gf_close(&l);
}

/* make-dataset's layouts (tests/cli.sh runs make-dataset --format webp
 * itself): DIR/class_XX/img_YYYYY.webp, and shards of KEY.webp + KEY.cls,
 * their members in an interleaved order. */
START_TEST(folders_and_shards_of_webp_load)
{
    char *root = tu_mkdtemp(), path[4096];
    tu_tar tars[2] = {{0}};
    for (int k = 0; k < CLASSES; k++)
        for (int j = 0; j < PER_CLASS; j++) {
            size_t len;
            uint8_t *webp = encoded(LOSSLESS, W, H, (uint32_t)(k * 1000 + j), &len);
            snprintf(path, sizeof path, "%s/folder/class_%02d/img_%05d.webp", root, k, j);
            tu_write_file(path, webp, len);
            char key[64], cls[8];
            snprintf(key, sizeof key, "class_%02d_img_%05d.webp", k, j);
            tu_tar *w = &tars[(k + j) % 2];
            tu_tar_file(w, key, webp, len);
            snprintf(key, sizeof key, "class_%02d_img_%05d.cls", k, j);
            snprintf(cls, sizeof cls, "%d", k);
            tu_tar_file(w, key, cls, strlen(cls));
            free(webp);
        }
    for (int i = 0; i < 2; i++) {
        tu_tar_end(&tars[i]);
        snprintf(path, sizeof path, "%s/shards/train-%06d.tar", root, i);
        tu_write_file(path, tars[i].p, tars[i].len);
        free(tars[i].p);
    }
    snprintf(path, sizeof path, "%s/folder", root);
    load_and_check(path);
    snprintf(path, sizeof path, "%s/shards/train-{000000..000001}.tar", root);
    load_and_check(path);
    tu_rmrf(root);
    free(root);
}
END_TEST

#else /* !GF_HAVE_WEBP */

START_TEST(without_libwebp_webp_is_refused_with_the_reason)
{
    char why[256];
    int used;
    gf__transform t = tu_eval_transform(8, 8, 3, 1.0f);
    for (int m = GF_STRICT; m <= GF_STRICT_WHOLE; m++) {
        t.strictness = (gf_strictness)m;
        ck_assert_int_eq(dec_full(riff_webp, sizeof riff_webp, &t, 0, NULL, &used, why,
                                  sizeof why),
                         GF_EFORMAT);
        ck_assert_msg(strstr(why, "no WebP decoder") != NULL, "why: %s", why);
    }
}
END_TEST

#endif

/* In every build: WebP bytes never reach stb_image, and data too short to
 * hold an image chunk is refused, not read past. */
START_TEST(riff_webp_without_an_image_is_refused)
{
    char why[256];
    int used;
    gf__transform t = tu_eval_transform(8, 8, 3, 1.0f);
    int rc = dec_full(riff_webp, sizeof riff_webp, &t, 0, NULL, &used, why, sizeof why);
    ck_assert_msg(rc == GF_EFORMAT || rc == GF_ECORRUPT || rc == GF_ETRUNC, "rc %d", rc);
    ck_assert_msg(strncmp(why, "WebP: ", 6) == 0, "why: %s", why);
    ck_assert_int_eq(used, 0);
}
END_TEST

static Suite *webp_suite(void)
{
    Suite *s = suite_create("webp");
    TCase *tc = tcase_create("webp");
#if GF_HAVE_WEBP
    tcase_add_test(tc, lossless_decodes_to_the_source_pixels);
    tcase_add_test(tc, lossy_is_close_to_the_source_and_keeps_alpha);
    tcase_add_test(tc, cropped_decode_equals_whole_decode);
    tcase_add_test(tc, decoder_reuse_across_sizes_stays_exact);
    tcase_add_test(tc, truncated_files_are_etrunc_in_every_mode);
    tcase_add_test(tc, a_lying_riff_size_is_named);
    tcase_add_test(tc, flipped_bytes_fail_where_the_format_can_tell);
    tcase_add_test(tc, huge_headers_are_etoobig_before_allocating);
    tcase_add_test(tc, animated_files_are_eformat);
    tcase_add_test(tc, folders_and_shards_of_webp_load);
#else
    tcase_add_test(tc, without_libwebp_webp_is_refused_with_the_reason);
#endif
    tcase_add_test(tc, riff_webp_without_an_image_is_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(webp_suite());
}
