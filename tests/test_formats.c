/* The formats stb_image decodes besides PNG and JPEG (BMP, TGA, PNM, GIF,
 * PSD), through gf__decode: good files decode to their pixels, and the
 * checks of src/decode_check.c refuse damaged ones by name. Each good file
 * is made here (stb_image_write for BMP/TGA, bytes by hand for the rest);
 * each damaged one is made from a good one. */
#include "decode.h"
#include "decode_formats.h"
#include "testutil.h"
#include "tu_engine.h"
#include "run_suite.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <stb_image_write.h>

enum { W = 13, H = 7 }; /* odd: BMP rows are padded */

/* ---- a growing byte buffer, and the hand-made files ---- */

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        ck_assert_ptr_nonnull(b->p);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void put8(buf *b, unsigned v)
{
    uint8_t x = (uint8_t)v;
    put(b, &x, 1);
}

static void put16le(buf *b, unsigned v)
{
    put8(b, v & 255);
    put8(b, v >> 8 & 255);
}

static void put32le(buf *b, uint32_t v)
{
    put16le(b, v & 0xffff);
    put16le(b, v >> 16);
}

static void put16be(buf *b, unsigned v)
{
    put8(b, v >> 8 & 255);
    put8(b, v & 255);
}

static void put32be(buf *b, uint32_t v)
{
    put16be(b, v >> 16);
    put16be(b, v & 0xffff);
}

static void wr32le(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> 8 * i);
}

static void stb_put(void *ctx, void *data, int size)
{
    put(ctx, data, (size_t)size);
}

/* Palette entry i, channel c: what indexed files here map to. */
static uint8_t pal(int i, int c)
{
    return (uint8_t)(c == 0 ? i : c == 1 ? 255 - i : i * 7);
}

/* 8-bit palette BMP (BITMAPINFOHEADER, bottom-up) of indices idx;
 * `entries` in the palette and in biClrUsed; RLE8 when rle. */
static buf make_bmp8(const uint8_t *idx, int entries, int rle)
{
    buf b = {0}, px = {0};
    int stride = (W + 3) & ~3;
    for (int r = 0; r < H; r++) {
        const uint8_t *row = idx + (size_t)(H - 1 - r) * W;
        if (!rle) {
            put(&px, row, W);
            for (int k = W; k < stride; k++)
                put8(&px, 0);
            continue;
        }
        for (int x = 0; x < W; x++) { /* runs of one, then end of line */
            put8(&px, 1);
            put8(&px, row[x]);
        }
        put16le(&px, r == H - 1 ? 0x0100 : 0); /* 00 01 ends the bitmap */
    }
    uint32_t off = 14 + 40 + 4 * (uint32_t)entries;
    put(&b, "BM", 2);
    put32le(&b, off + (uint32_t)px.n);
    put32le(&b, 0);
    put32le(&b, off);
    put32le(&b, 40);
    put32le(&b, W);
    put32le(&b, H);
    put16le(&b, 1);
    put16le(&b, 8);
    put32le(&b, rle ? 1 : 0);
    put32le(&b, (uint32_t)px.n);
    put32le(&b, 2835);
    put32le(&b, 2835);
    put32le(&b, (uint32_t)entries);
    put32le(&b, 0);
    for (int i = 0; i < entries; i++) {
        put8(&b, pal(i, 2));
        put8(&b, pal(i, 1));
        put8(&b, pal(i, 0));
        put8(&b, 0);
    }
    put(&b, px.p, px.n);
    free(px.p);
    return b;
}

/* Colour-mapped TGA (type 1, 8-bit indices, 24-bit BGR map, top-down). */
static buf make_tga_indexed(const uint8_t *idx, int entries)
{
    buf b = {0};
    put8(&b, 0);
    put8(&b, 1);
    put8(&b, 1);
    put16le(&b, 0);
    put16le(&b, (unsigned)entries);
    put8(&b, 24);
    put32le(&b, 0);
    put16le(&b, W);
    put16le(&b, H);
    put8(&b, 8);
    put8(&b, 0x20);
    for (int i = 0; i < entries; i++)
        for (int c = 2; c >= 0; c--)
            put8(&b, pal(i, c));
    put(&b, idx, W * H);
    return b;
}

/* P5 (c 1) or P6 (c 3); 16-bit samples v * 257 when maxval > 255. */
static buf make_pnm(const uint8_t *px, int c, unsigned maxval)
{
    buf b = {0};
    char hdr[64];
    int k = snprintf(hdr, sizeof hdr, "P%c\n# made by test_formats\n%d %d\n%u\n",
                     c == 1 ? '5' : '6', W, H, maxval);
    put(&b, hdr, (size_t)k);
    for (int i = 0; i < W * H * c; i++) {
        if (maxval > 255)
            put8(&b, px[i]); /* high byte of px * 257 */
        put8(&b, px[i]);
    }
    return b;
}

/* lzw as GIF data sub-blocks (255 bytes at most each, then an empty one)
 * onto b; frees lzw. */
static void put_sub_blocks(buf *b, buf *lzw)
{
    for (size_t at = 0; at < lzw->n; at += 255) {
        size_t len = lzw->n - at < 255 ? lzw->n - at : 255;
        put8(b, (unsigned)len);
        put(b, lzw->p + at, len);
    }
    put8(b, 0);
    free(lzw->p);
}

/* A GIF frame of 9-bit LZW codes, every pixel a literal and a clear code
 * every 200 so that the code size never grows: uncompressed LZW. */
static void gif_frame(buf *b, unsigned x, unsigned y, unsigned w, unsigned h, const uint8_t *idx)
{
    put8(b, 0x2c);
    put16le(b, x);
    put16le(b, y);
    put16le(b, w);
    put16le(b, h);
    put8(b, 0);
    put8(b, 8);
    buf lzw = {0};
    uint32_t acc = 0;
    int bits = 0;
    for (unsigned i = 0; i <= w * h; i++) {
        unsigned codes[2] = {256, i < w * h ? idx[i % (W * H)] : 257};
        for (int k = i % 200 == 0 ? 0 : 1; k < 2; k++) {
            acc |= (uint32_t)codes[k] << bits;
            for (bits += 9; bits >= 8; bits -= 8, acc >>= 8)
                put8(&lzw, acc & 255);
        }
    }
    if (bits)
        put8(&lzw, acc & 255);
    put_sub_blocks(b, &lzw);
}

/* GIF89a, 256-entry global table, a graphic control and a comment
 * extension, then two full frames of idx, then the trailer. */
static buf make_gif(const uint8_t *idx)
{
    buf b = {0};
    put(&b, "GIF89a", 6);
    put16le(&b, W);
    put16le(&b, H);
    put8(&b, 0xf7);
    put8(&b, 0);
    put8(&b, 0);
    for (int i = 0; i < 256; i++)
        for (int c = 0; c < 3; c++)
            put8(&b, pal(i, c));
    put(&b, "\x21\xf9\x04\x00\x00\x00\x00\x00", 8);
    put(&b, "\x21\xfe\x05hello\x00", 9);
    gif_frame(&b, 0, 0, W, H, idx);
    gif_frame(&b, 0, 0, W, H, idx);
    put8(&b, 0x3b);
    return b;
}

/* 8-bit RGB PSD, planar; raw, or RLE with rows of literal packets. */
static buf make_psd(const uint8_t *rgb, int rle)
{
    buf b = {0};
    put(&b, "8BPS", 4);
    put16be(&b, 1);
    put(&b, "\0\0\0\0\0\0", 6);
    put16be(&b, 3);
    put32be(&b, H);
    put32be(&b, W);
    put16be(&b, 8);
    put16be(&b, 3);
    for (int k = 0; k < 3; k++)
        put32be(&b, 0);
    put16be(&b, (unsigned)rle);
    if (rle)
        for (int r = 0; r < 3 * H; r++)
            put16be(&b, W + 1); /* one literal packet */
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < H; y++) {
            if (rle)
                put8(&b, W - 1);
            for (int x = 0; x < W; x++)
                put8(&b, rgb[(y * W + x) * 3 + c]);
        }
    return b;
}

static buf stb_written(int tga, int rle, int c, const uint8_t *px)
{
    buf b = {0};
    stbi_write_tga_with_rle = rle;
    int ok = tga ? stbi_write_tga_to_func(stb_put, &b, W, H, c, px)
                 : stbi_write_bmp_to_func(stb_put, &b, W, H, c, px);
    ck_assert(ok);
    return b;
}

/* ---- decoding ---- */

typedef struct outcome {
    int rc, warned;
    char why[256], warn[160];
    uint8_t px[W * H * 3];
} outcome;

static void decode(const uint8_t *p, size_t n, gf_strictness s, outcome *o)
{
    gf_settings st;
    gf_default_settings(&st);
    st.width = W;
    st.height = H;
    st.channels = 3;
    st.transform = GF_TRANSFORM_EVAL;
    st.crop_fraction = 1.0f;
    gf__transform t;
    gf__transform_from_settings(&t, &st);
    t.strictness = s;
    gf__decoder *d;
    ck_assert_int_eq(gf__decoder_create(&d), 0);
    int used = 0;
    o->rc = gf__decode(d, p, n, &t, 42, o->px, &used, o->why, sizeof o->why);
    o->warned = o->rc == 0 && (used & GF__WARNED);
    snprintf(o->warn, sizeof o->warn, "%s", d->warn);
    gf__decoder_destroy(d);
}

static const gf_strictness modes[] = {GF_STRICT, GF_LENIENT, GF_STRICT_WHOLE};

/* Every mode decodes p to rgb, with no warning. */
static void expect_pixels(const char *what, const uint8_t *p, size_t n, const uint8_t *rgb)
{
    for (int m = 0; m < 3; m++) {
        outcome o;
        decode(p, n, modes[m], &o);
        ck_assert_msg(o.rc == 0 && !o.warned, "%s, mode %d: rc %d (%s) warned %d", what, m,
                      o.rc, o.why, o.warned);
        ck_assert_msg(memcmp(o.px, rgb, sizeof o.px) == 0, "%s: wrong pixels", what);
    }
}

/* Every mode fails p with code and a reason starting `fmt: ` and holding
 * `cause`. */
static void expect_fail(const char *what, const uint8_t *p, size_t n, int code, const char *fmt,
                        const char *cause)
{
    for (int m = 0; m < 3; m++) {
        outcome o;
        decode(p, n, modes[m], &o);
        ck_assert_msg(o.rc == code && strncmp(o.why, fmt, strlen(fmt)) == 0 &&
                          o.why[strlen(fmt)] == ':' && strstr(o.why, cause),
                      "%s, mode %d: rc %d (%s), want %d (%s: ...%s...)", what, m, o.rc, o.why,
                      code, fmt, cause);
    }
}

/* Complete but untidy: STRICT fails it with code, LENIENT decodes it to
 * rgb and keeps the same reason as the warning. */
static void expect_untidy(const char *what, const uint8_t *p, size_t n, int code,
                          const char *cause, const uint8_t *rgb)
{
    outcome o;
    decode(p, n, GF_STRICT, &o);
    ck_assert_msg(o.rc == code && strstr(o.why, cause), "%s strict: rc %d (%s)", what, o.rc, o.why);
    char strict_why[256];
    snprintf(strict_why, sizeof strict_why, "%s", o.why);
    decode(p, n, GF_LENIENT, &o);
    ck_assert_msg(o.rc == 0 && o.warned && strcmp(o.warn, strict_why) == 0,
                  "%s lenient: rc %d (%s) warned %d (%s)", what, o.rc, o.why, o.warned, o.warn);
    ck_assert_msg(memcmp(o.px, rgb, sizeof o.px) == 0, "%s lenient: wrong pixels", what);
}

/* ---- the good files ---- */

typedef struct sample {
    const char *what, *fmt;
    buf file;
    size_t min_cut; /* shorter than this is not recognisable as fmt */
} sample;

enum { N_SAMPLES = 14 };
static uint8_t rgb[W * H * 3], rgba[W * H * 4], gray[W * H], idx[W * H];
static uint8_t idx_rgb[W * H * 3], gray_rgb[W * H * 3], rgba_rgb[W * H * 3];

static void make_pixels(void)
{
    tu_fill(rgb, W, H, 3, 1);
    tu_fill(rgba, W, H, 4, 2);
    tu_fill(gray, W, H, 1, 3);
    tu_fill(idx, W, H, 1, 4);
    for (int i = 0; i < W * H; i++)
        for (int c = 0; c < 3; c++) {
            idx_rgb[3 * i + c] = pal(idx[i], c);
            gray_rgb[3 * i + c] = gray[i];
            rgba_rgb[3 * i + c] = rgba[4 * i + c];
        }
}

/* The good files of every kind, and the pixels each decodes to. */
static void make_samples(sample *s, const uint8_t **want)
{
    make_pixels();
    int k = 0;
#define ADD(w, f, file_, cut, px) (s[k] = (sample){w, f, file_, cut}, want[k++] = px)
    ADD("BMP 24-bit", "BMP", stb_written(0, 0, 3, rgb), 2, rgb);
    ADD("BMP 32-bit V4 bitfields", "BMP", stb_written(0, 0, 4, rgba), 2, rgba_rgb);
    ADD("BMP 8-bit palette", "BMP", make_bmp8(idx, 256, 0), 2, idx_rgb);
    ADD("TGA RGB", "TGA", stb_written(1, 0, 3, rgb), 17, rgb);
    ADD("TGA RGBA RLE", "TGA", stb_written(1, 1, 4, rgba), 17, rgba_rgb);
    ADD("TGA gray RLE", "TGA", stb_written(1, 1, 1, gray), 17, gray_rgb);
    ADD("TGA colour-mapped", "TGA", make_tga_indexed(idx, 256), 17, idx_rgb);
    ADD("PNM P6", "PNM", make_pnm(rgb, 3, 255), 2, rgb);
    ADD("PNM P5", "PNM", make_pnm(gray, 1, 255), 2, gray_rgb);
    ADD("PNM P6 16-bit", "PNM", make_pnm(rgb, 3, 65535), 2, rgb);
    ADD("GIF", "GIF", make_gif(idx), 4, idx_rgb);
    ADD("PSD raw", "PSD", make_psd(rgb, 0), 4, rgb);
    ADD("PSD RLE", "PSD", make_psd(rgb, 1), 4, rgb);
    ADD("PNM P6 maxval 1000", "PNM", make_pnm(rgb, 3, 1000), 2, NULL);
#undef ADD
    ck_assert_int_eq(k, N_SAMPLES);
}

static void free_samples(sample *s)
{
    for (int i = 0; i < N_SAMPLES; i++)
        free(s[i].file.p);
}

START_TEST(good_files_decode_to_their_pixels_in_every_mode)
{
    sample s[N_SAMPLES];
    const uint8_t *want[N_SAMPLES];
    make_samples(s, want);
    for (int i = 0; i < N_SAMPLES; i++)
        if (want[i])
            expect_pixels(s[i].what, s[i].file.p, s[i].file.n, want[i]);
    free_samples(s);
}
END_TEST

/* Bytes after the image (a TGA footer, a BMP profile, concatenated PNMs,
 * anything after a GIF trailer) are allowed in every mode. */
START_TEST(trailing_bytes_after_the_image_are_allowed)
{
    sample s[N_SAMPLES];
    const uint8_t *want[N_SAMPLES];
    make_samples(s, want);
    for (int i = 0; i < N_SAMPLES; i++) {
        if (!want[i])
            continue;
        put(&s[i].file, "TRUEVISION-XFILE.\0 and more trailing bytes", 42);
        expect_pixels(s[i].what, s[i].file.p, s[i].file.n, want[i]);
    }
    free_samples(s);
}
END_TEST

/* Every cut of every good file, from the shortest recognisable one to the
 * last byte dropped, is GF_ETRUNC naming the format and "truncated", in
 * every mode; but a GIF cut between frames (complete, no trailer)
 * decodes under LENIENT with the warning STRICT fails it with. */
START_TEST(every_truncation_is_etrunc_in_every_mode)
{
    sample s[N_SAMPLES];
    const uint8_t *want[N_SAMPLES];
    make_samples(s, want);
    for (int i = 0; i < N_SAMPLES; i++) {
        int between_frames = 0;
        for (size_t cut = s[i].min_cut; cut < s[i].file.n; cut++)
            for (int m = 0; m < 3; m++) {
                outcome o;
                decode(s[i].file.p, cut, modes[m], &o);
                if (o.rc == 0 && modes[m] == GF_LENIENT && !strcmp(s[i].fmt, "GIF") &&
                    strstr(o.warn, "GIF: no trailer (0x3B) after the last frame (truncated?)")) {
                    between_frames++;
                    continue;
                }
                ck_assert_msg(o.rc == GF_ETRUNC && !strncmp(o.why, s[i].fmt, 3) &&
                                  strstr(o.why, "truncated?"),
                              "%s cut at %zu of %zu, mode %d: rc %d (%s)", s[i].what, cut,
                              s[i].file.n, m, o.rc, o.why);
            }
        /* after frame 0 and after frame 1 (the trailer dropped) */
        ck_assert_int_eq(between_frames, strcmp(s[i].fmt, "GIF") ? 0 : 2);
    }
    free_samples(s);
}
END_TEST

/* ---- header nonsense, format by format ---- */

static buf copy(const buf *b)
{
    buf c = {0};
    put(&c, b->p, b->n);
    return c;
}

START_TEST(pnm_header_nonsense_is_ecorrupt)
{
    make_pixels();
    static const struct {
        const char *hdr, *cause;
    } bad[] = {
        {"P6\n13 7\n0\n", "PNM: maxval 0"},
        {"P6\n13 7\n255xxx\n", "PNM: garbage after maxval"},
        {"P6\n13 7\n255#\n", "PNM: garbage after maxval"},
        {"P6\n13 7\n70000\n", "PNM: maxval 70000 (over 65535)"},
        {"P6\n13x 7\n255\n", "PNM: garbage after width"},
        {"P6\n0 7\n255\n", "PNM: 0x7 image"},
        {"P6\n13 -7\n255\n", "PNM: the height is not a number"},
        {"P6x13 7\n255\n", "PNM: garbage after the magic number"},
        {"P6\n13 99999999999\n255\n", "PNM: corrupt header (height over 2147483647)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        buf b = {0};
        put(&b, bad[i].hdr, strlen(bad[i].hdr));
        put(&b, rgb, sizeof rgb);
        expect_fail(bad[i].hdr, b.p, b.n, GF_ECORRUPT, "PNM", bad[i].cause);
        free(b.p);
    }
    /* Comments and any whitespace between the numbers are fine. */
    static const char ok[] = "P6 #c\n13\t#c 2\n\r7 # 9\n255\n";
    buf b = {0};
    put(&b, ok, strlen(ok));
    put(&b, rgb, sizeof rgb);
    expect_pixels(ok, b.p, b.n, rgb);
    /* The raster one byte short (the file's last byte dropped) */
    expect_fail("short raster", b.p, b.n - 1, GF_ETRUNC, "PNM",
                "272 of 273 raster bytes (truncated?)");
    free(b.p);
}
END_TEST

START_TEST(bmp_header_nonsense_is_named)
{
    make_pixels();
    buf b24 = stb_written(0, 0, 3, rgb), b8 = make_bmp8(idx, 256, 0), b;
    b = copy(&b8);
    wr32le(b.p + 46, 0x80000000u); /* biClrUsed */
    expect_fail("8-bit, 2^31 colours", b.p, b.n, GF_ECORRUPT, "BMP",
                "palette of 2147483648 entries (at most 256");
    free(b.p);
    b = copy(&b24);
    wr32le(b.p + 46, 0x80000000u);
    expect_fail("24-bit, 2^31 colours", b.p, b.n, GF_ECORRUPT, "BMP",
                "palette of 2147483648 entries runs past the end");
    free(b.p);
    b = copy(&b24);
    wr32le(b.p + 10, 100000); /* bfOffBits */
    expect_fail("bfOffBits past the end", b.p, b.n, GF_ETRUNC, "BMP",
                "pixel data starts at byte 100000 of a 334-byte file (truncated?)");
    wr32le(b.p + 10, 20);
    expect_fail("bfOffBits in the header", b.p, b.n, GF_ECORRUPT, "BMP",
                "pixel data at byte 20, inside the 54-byte header");
    free(b.p);
    static const struct {
        size_t at;
        uint32_t v;
        int bytes;
        const char *cause;
    } field[] = {
        {14, 41, 4, "header size 41"},        {22, 0, 4, "13x0 image"},
        {18, 0xfffffff3u, 4, "-13x7 image"}, {26, 2, 2, "2 planes (not 1)"},
        {28, 7, 2, "7 bits per pixel"},       {30, 9, 4, "unknown compression 9"},
        {30, 2, 4, "compression 2 with 24 bits per pixel"},
    };
    for (size_t i = 0; i < sizeof field / sizeof field[0]; i++) {
        b = copy(&b24);
        for (int k = 0; k < field[i].bytes; k++)
            b.p[field[i].at + (size_t)k] = (uint8_t)(field[i].v >> 8 * k);
        expect_fail(field[i].cause, b.p, b.n, GF_ECORRUPT, "BMP", field[i].cause);
        free(b.p);
    }
    /* The raster one row short: its size named. */
    b = copy(&b24);
    expect_fail("a row short", b.p, b.n - 40, GF_ETRUNC, "BMP",
                "pixel data ends at byte 240 of a 280-byte array (truncated?)");
    free(b.p);
    /* A 16-entry palette declared, 256 entries' room before the pixels:
     * fine. 256 declared in the room of 16: overlaps, untidy. */
    b = make_bmp8(idx, 256, 0);
    wr32le(b.p + 46, 16);
    expect_pixels("16 colours used", b.p, b.n, idx_rgb);
    free(b.p);
    uint8_t idx8[W * H], want[W * H * 3];
    int c;
    for (int i = 0; i < W * H; i++)
        for (idx8[i] = idx[i] & 7, c = 0; c < 3; c++)
            want[3 * i + c] = pal(idx8[i], c);
    b = make_bmp8(idx8, 8, 0);
    wr32le(b.p + 46, 16); /* 16 colours, in the room of 8 */
    expect_untidy("palette overlaps the pixels", b.p, b.n, GF_ECORRUPT,
                  "BMP: palette of 16 entries (to byte 118) overlaps the pixel data at byte 86",
                  want);
    free(b.p);
    free(b24.p);
    free(b8.p);
}
END_TEST

/* stb_image 2.27 does not decode RLE BMPs; the check still requires the
 * stream's end-of-bitmap marker, so a cut one says truncated. */
START_TEST(bmp_rle_stream_must_reach_end_of_bitmap)
{
    make_pixels();
    buf b = make_bmp8(idx, 256, 1);
    outcome o;
    decode(b.p, b.n, GF_STRICT, &o);
    ck_assert_msg(o.rc == GF_ECORRUPT && strstr(o.why, "BMP RLE"), "rc %d (%s)", o.rc, o.why);
    for (size_t cut = 14 + 40 + 1024; cut < b.n; cut++)
        expect_fail("RLE8 cut", b.p, cut, GF_ETRUNC, "BMP",
                    "RLE data ends at byte");
    free(b.p);
}
END_TEST

START_TEST(tga_header_nonsense_and_missing_pixels_are_named)
{
    make_pixels();
    buf t = stb_written(1, 0, 3, rgb);
    expect_fail("pixel data missing", t.p, 18, GF_ETRUNC, "TGA",
                "TGA: 0 of 273 pixel bytes (truncated?)");
    expect_fail("half the pixels", t.p, 18 + 100, GF_ETRUNC, "TGA",
                "TGA: 100 of 273 pixel bytes (truncated?)");
    free(t.p);
    buf m = make_tga_indexed(idx, 256);
    buf b = copy(&m);
    b.p[5] = b.p[6] = 0; /* colour map length */
    expect_fail("colour map of 0", b.p, b.n, GF_ECORRUPT, "TGA", "colour map of 0 entries");
    free(b.p);
    expect_fail("colour map cut", m.p, 18 + 300, GF_ETRUNC, "TGA",
                "colour map ends at byte 786 of a 318-byte file (truncated?)");
    free(m.p);
    /* Text is still no known format, not a TGA. */
    static const char text[] = "hello, this is not an image at all";
    outcome o;
    decode((const uint8_t *)text, sizeof text, GF_STRICT, &o);
    ck_assert_msg(o.rc == GF_EFORMAT && strstr(o.why, "not an image of a known format"), "%s",
                  o.why);
}
END_TEST

/* Offsets in make_gif's file: screen at 6, table at 13, extensions at
 * 781, frame 0's descriptor at 798. */
enum { GIF_FRAME0 = 13 + 768 + 8 + 9 };

START_TEST(gif_structure_nonsense_is_named)
{
    make_pixels();
    buf g = make_gif(idx), b;
    ck_assert_int_eq(g.p[GIF_FRAME0], 0x2c);
    b = copy(&g);
    b.p[GIF_FRAME0 + 5] = b.p[GIF_FRAME0 + 6] = b.p[GIF_FRAME0 + 7] = b.p[GIF_FRAME0 + 8] = 0;
    expect_fail("0x0 frame", b.p, b.n, GF_ECORRUPT, "GIF", "GIF: frame 0 is 0x0");
    free(b.p);
    b = copy(&g);
    b.p[GIF_FRAME0 + 10] = 12;
    expect_fail("code size 12", b.p, b.n, GF_ECORRUPT, "GIF",
                "frame 0 has LZW minimum code size 12");
    free(b.p);
    b = copy(&g);
    b.p[GIF_FRAME0] = 0x2d;
    expect_fail("unknown block", b.p, b.n, GF_ECORRUPT, "GIF", "unknown block 0x2D at byte 798");
    free(b.p);
    b = copy(&g);
    b.p[6] = b.p[7] = 0;
    expect_fail("0-wide screen", b.p, b.n, GF_ECORRUPT, "GIF", "logical screen is 0x7");
    free(b.p);
    b = copy(&g);
    b.p[GIF_FRAME0 + 1] = 1; /* frame 0 at x = 1 */
    expect_fail("frame 0 outside", b.p, b.n, GF_ECORRUPT, "GIF",
                "frame 0 (13x7 at 1,0) is outside the 13x7 screen");
    free(b.p);
    b = copy(&g);
    b.p[4] = '8';
    expect_fail("GIF88a", b.p, b.n, GF_ECORRUPT, "GIF", "version is not 87a or 89a");
    free(b.p);
    /* Complete but untidy: STRICT refuses, LENIENT decodes frame 0. */
    expect_untidy("no trailer", g.p, g.n - 1, GF_ETRUNC,
                  "GIF: no trailer (0x3B) after the last frame (truncated?)", idx_rgb);
    b = copy(&g);
    size_t frame1 = (g.n - 1 - GIF_FRAME0) / 2 + GIF_FRAME0;
    ck_assert_int_eq(b.p[frame1], 0x2c);
    b.p[frame1 + 3] = 1; /* frame 1 at y = 1 */
    expect_untidy("frame 1 outside", b.p, b.n, GF_ECORRUPT,
                  "GIF: frame 1 (13x7 at 0,1) is outside the 13x7 screen", idx_rgb);
    /* LENIENT still finds damage after an untidy part */
    outcome o;
    decode(b.p, b.n - 2, GF_LENIENT, &o);
    ck_assert_msg(o.rc == GF_ETRUNC && strstr(o.why, "GIF: frame 1's image data ends at byte"),
                  "rc %d (%s)", o.rc, o.why);
    free(b.p);
    free(g.p);
}
END_TEST

START_TEST(psd_header_nonsense_is_named)
{
    make_pixels();
    buf raw = make_psd(rgb, 0), rle = make_psd(rgb, 1), b;
    static const struct {
        size_t at;
        unsigned v;
        const char *cause;
    } field[] = {
        {4, 3, "PSD: version 3"},           {12, 0, "PSD: 0 channels"},
        {12, 57, "PSD: 57 channels"},       {22, 7, "PSD: 7 bits per channel"},
        {24, 5, "PSD: colour mode 5"},      {38, 5, "PSD: compression 5"},
    };
    for (size_t i = 0; i < sizeof field / sizeof field[0]; i++) {
        b = copy(&raw);
        b.p[field[i].at] = (uint8_t)(field[i].v >> 8);
        b.p[field[i].at + 1] = (uint8_t)field[i].v;
        expect_fail(field[i].cause, b.p, b.n, GF_ECORRUPT, "PSD", field[i].cause);
        free(b.p);
    }
    b = copy(&raw);
    b.p[17] = 0; /* height (bytes 14..17, big-endian) 0 */
    expect_fail("0 rows", b.p, b.n, GF_ECORRUPT, "PSD", "PSD: 13x0 image");
    free(b.p);
    b = copy(&raw);
    b.p[32] = 0x10; /* image resources (length at 30..33): 4096 bytes */
    expect_fail("section past the end", b.p, b.n, GF_ETRUNC, "PSD",
                "image resources (4096 bytes at byte 34) runs past the end");
    free(b.p);
    b = copy(&rle);
    b.p[40 + 2 * 5 + 1]++; /* row 5 of channel 0 counted a byte too long */
    expect_fail("RLE row count", b.p, b.n, GF_ECORRUPT, "PSD",
                "RLE row 5 of channel 0: a packet runs past the row's 15 bytes");
    free(b.p);
    b = copy(&rle);
    b.p[40 + 2 * 3 * H] = W - 2; /* row 0 of channel 0: a pixel short, */
    b.p[40 + 1]--;               /* and counted so */
    expect_fail("RLE row short", b.p, b.n, GF_ECORRUPT, "PSD",
                "RLE row 0 of channel 0 decodes to 12 bytes, not 13");
    free(b.p);
    free(raw.p);
    free(rle.p);
}
END_TEST

/* A 64x64 GIF as some encoders write it (issue 26, a real file PIL,
 * ImageMagick and stb_image read): LZW minimum code size 11, so every code
 * is 12 bits, each pixel a literal and no clear code after the first,
 * the code table full (4096) after 2046 of them. `wide` puts the literal
 * code 300 (a colour index over 255) at pixel 5. */
static buf make_gif_wide_codes(const uint8_t *idx64, int wide)
{
    buf b = {0};
    put(&b, "GIF89a", 6);
    put16le(&b, 64);
    put16le(&b, 64);
    put8(&b, 0xf7);
    put8(&b, 0);
    put8(&b, 0);
    for (int i = 0; i < 256; i++)
        for (int c = 0; c < 3; c++)
            put8(&b, pal(i, c));
    put8(&b, 0x2c);
    put16le(&b, 0);
    put16le(&b, 0);
    put16le(&b, 64);
    put16le(&b, 64);
    put8(&b, 0);
    put8(&b, 11);
    buf lzw = {0};
    uint32_t acc = 0;
    int bits = 0;
    for (int i = -1; i <= 64 * 64; i++) {
        unsigned code = i < 0 ? 2048 : i == 64 * 64 ? 2049 : wide && i == 5 ? 300 : idx64[i];
        acc |= (uint32_t)code << bits;
        for (bits += 12; bits >= 8; bits -= 8, acc >>= 8)
            put8(&lzw, acc & 255);
    }
    if (bits)
        put8(&lzw, acc & 255);
    put_sub_blocks(&b, &lzw);
    put8(&b, 0x3b);
    return b;
}

START_TEST(gif_with_a_large_minimum_code_size_decodes_and_a_wide_literal_is_named)
{
    static uint8_t idx64[64 * 64], want[64 * 64 * 3], got[64 * 64 * 3];
    for (int i = 0; i < 64 * 64; i++) {
        idx64[i] = (uint8_t)(i * 7 + i / 64 * 13);
        for (int c = 0; c < 3; c++)
            want[i * 3 + c] = pal(idx64[i], c);
    }
    gf_settings st;
    gf_default_settings(&st);
    st.width = st.height = 64;
    st.channels = 3;
    st.transform = GF_TRANSFORM_EVAL;
    st.crop_fraction = 1.0f;
    gf__transform t;
    gf__transform_from_settings(&t, &st);
    gf__decoder *d;
    ck_assert_int_eq(gf__decoder_create(&d), 0);
    for (int wide = 0; wide < 2; wide++) {
        buf g = make_gif_wide_codes(idx64, wide);
        for (int m = 0; m < 3; m++) {
            t.strictness = modes[m];
            char why[256] = "";
            int used = 0;
            int rc = gf__decode(d, g.p, g.n, &t, 1, got, &used, why, sizeof why);
            if (!wide) {
                ck_assert_msg(rc == 0 && !(used & GF__WARNED), "mode %d: %d %s", m, rc, why);
                ck_assert_msg(memcmp(got, want, sizeof want) == 0, "mode %d: wrong pixels", m);
            } else {
                ck_assert_msg(rc == GF_ECORRUPT && strstr(why, "GIF: frame 0 has the literal "
                                                               "code 300: a colour index over 255"),
                              "mode %d: %d %s", m, rc, why);
            }
        }
        free(g.p);
    }
    gf__decoder_destroy(d);
}
END_TEST

/* Plain (ASCII) PNM, P1-P3, and binary PBM, P4: what stb_image does not
 * read (issue 26: "not an image of a known format", and .pbm indexed but
 * never decoded). px is W x H x c (c 1 or 3); P1 and P4 take its bit
 * 7 (1 is black); P2 and P3 write v * maxval / 255. */
static buf make_pnm_plain(int kind, const uint8_t *px, unsigned maxval)
{
    buf b = {0};
    char t[64];
    int bits = kind == 1 || kind == 4, c = kind == 3 ? 3 : 1;
    int k = bits ? snprintf(t, sizeof t, "P%d\n# a comment\n%d %d\n", kind, W, H)
                 : snprintf(t, sizeof t, "P%d\n%d %d # a comment\n%u\n", kind, W, H, maxval);
    put(&b, t, (size_t)k);
    for (int y = 0; y < H; y++) {
        unsigned acc = 0;
        for (int x = 0; x < W * c; x++) {
            unsigned v = px[y * W * c + x];
            if (kind == 4) {
                acc = acc << 1 | v >> 7;
                if (x % 8 == 7 || x == W - 1) {
                    put8(&b, acc << (7 - x % 8) & 255);
                    acc = 0;
                }
                continue;
            }
            k = kind == 1 ? snprintf(t, sizeof t, "%u", v >> 7) /* no spaces: P1 allows it */
                          : snprintf(t, sizeof t, "%u%s", (v * maxval + 127) / 255,
                                     x % 5 == 4 ? "\n" : " ");
            put(&b, t, (size_t)k);
        }
        if (kind != 4)
            put8(&b, '\n');
    }
    return b;
}

START_TEST(plain_pnm_and_binary_pbm_decode_to_their_pixels)
{
    make_pixels();
    static uint8_t bw[W * H * 3];
    for (int i = 0; i < W * H; i++)
        for (int c = 0; c < 3; c++)
            bw[3 * i + c] = gray[i] >> 7 ? 0 : 255;
    buf b = make_pnm_plain(1, gray, 1);
    expect_pixels("P1", b.p, b.n, bw);
    free(b.p);
    b = make_pnm_plain(4, gray, 1);
    expect_pixels("P4", b.p, b.n, bw);
    free(b.p);
    b = make_pnm_plain(2, gray, 255);
    expect_pixels("P2", b.p, b.n, gray_rgb);
    free(b.p);
    b = make_pnm_plain(3, rgb, 255);
    expect_pixels("P3", b.p, b.n, rgb);
    free(b.p);
    b = make_pnm_plain(3, rgb, 65535); /* scaled back: v * 257 / 257 */
    expect_pixels("P3 maxval 65535", b.p, b.n, rgb);
    /* damage is named: cut (the last sample gone), a sample over maxval */
    buf g = make_pnm_plain(2, gray, 255);
    expect_fail("P2 cut", g.p, g.n - 5, GF_ETRUNC, "PNM", "the data ends at sample");
    expect_fail("P3 header cut", b.p, 20, GF_ETRUNC, "PNM", "the header ends at byte 20");
    free(b.p);
    b = make_pnm_plain(4, gray, 1);
    expect_fail("P4 cut", b.p, b.n - 1, GF_ETRUNC, "PNM", "of the 7 rows (truncated?)");
    free(b.p);
    char over[] = "P2\n2 1\n100\n50 101\n";
    expect_fail("P2 over maxval", (uint8_t *)over, sizeof over - 1, GF_ECORRUPT, "PNM",
                "sample 1 is not a number up to the maxval 100");
    free(g.p);
}
END_TEST

/* ---- binary PNM at maxval 255, read in place (decode_pnm_raw.c) ---- */

/* A P5 (c 1) or P6 (c 3) file of w x h pixels tu_fill(seed) at maxval 255,
 * the header as `gpufeed prepare --format raw` writes it or with a
 * comment, at an odd address in a block of exactly its size: reads past
 * its end or aligned loads would show (ASan). *block is to be freed. */
static const uint8_t *raw_pnm(int w, int h, int c, int comment, uint32_t seed, size_t *n,
                              uint8_t **block, uint8_t **px)
{
    char hdr[64];
    int k = snprintf(hdr, sizeof hdr, comment ? "P%c # c\n%d\t%d\r255\n" : "P%c\n%d %d\n255\n",
                     c == 1 ? '5' : '6', w, h);
    size_t body = (size_t)w * h * c;
    *n = (size_t)k + body;
    *px = malloc(body);
    *block = malloc(*n + 1);
    ck_assert(*px && *block);
    tu_fill(*px, w, h, c, seed);
    memcpy(*block + 1, hdr, (size_t)k);
    memcpy(*block + 1 + k, *px, body);
    return *block + 1;
}

/* One decode's result: its code, flags and pixels (a fitted decode's
 * from the decoder's own buffer). */
typedef struct raw_out {
    int rc, used, w, h;
    uint8_t *px;
    size_t n;
} raw_out;

static raw_out decode_by(gf__decoder *d, const uint8_t *p, size_t n, gf__transform t,
                         gf_decoder_kind by, uint64_t key)
{
    raw_out o = {0};
    t.decoder = by;
    size_t out = t.fit ? 4 : (size_t)t.out_w * t.out_h * t.channels;
    uint8_t *dst = malloc(out);
    ck_assert_ptr_nonnull(dst);
    char why[256];
    o.rc = gf__decode(d, p, n, &t, key, dst, &o.used, why, sizeof why);
    ck_assert_msg(o.rc == 0, "rc %d (%s)", o.rc, why);
    o.w = t.fit ? d->fitted.out_w : t.out_w;
    o.h = t.fit ? d->fitted.out_h : t.out_h;
    o.n = (size_t)o.w * o.h * t.channels;
    if (t.fit) {
        free(dst);
        dst = malloc(o.n);
        memcpy(dst, d->fit_out, o.n);
    }
    o.px = dst;
    return o;
}

/* The raw path gives stb_image's bytes, and the same pixels' PNG's, for
 * every transform (train RRC with the flip decided here or left to the
 * device, eval, the identity, a fitted decode), output size and channel
 * combination; it says so (GF__USED_RAW), and reads the file in place:
 * no scratch at all when the channels match. */
START_TEST(binary_pnm_at_maxval_255_reads_in_place_with_stb_images_bytes)
{
    static const int sizes[][2] = {{256, 192}, {13, 7}, {1, 1}, {37, 300}, {5, 2}};
    static const int outs[][2] = {{224, 224}, {40, 24}};
    gf__decoder *raw, *stb, *png;
    ck_assert_int_eq(gf__decoder_create(&raw), 0);
    ck_assert_int_eq(gf__decoder_create(&stb), 0);
    ck_assert_int_eq(gf__decoder_create(&png), 0);
    int cases = 0;
    for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++)
        for (int c = 1; c <= 3; c += 2)
            for (int oc = 1; oc <= 4; oc++) {
                if (oc == 2)
                    continue;
                int w = sizes[z][0], h = sizes[z][1];
                size_t n, plen;
                uint8_t *block, *px;
                const uint8_t *file = raw_pnm(w, h, c, (int)z & 1, (uint32_t)(z * 8 + c), &n,
                                              &block, &px);
                uint8_t *pngf = tu_png_mem(px, w, h, c, &plen);
                for (int k = 0; k < 10; k++) {
                    gf_settings st;
                    gf_default_settings(&st);
                    st.channels = oc;
                    st.width = outs[k & 1][0];
                    st.height = outs[k & 1][1];
                    st.transform = k < 6 ? GF_TRANSFORM_TRAIN : GF_TRANSFORM_EVAL;
                    if (k == 7) { /* the identity */
                        st.width = w;
                        st.height = h;
                        st.crop_fraction = 1.0f;
                    }
                    gf__transform t;
                    gf__transform_from_settings(&t, &st);
                    t.defer_flip = k == 3 || k == 5;
                    t.full_decode = k == 4;
                    if (k >= 8) { /* fitted, as prepare does: capped, and whole */
                        t.fit = 1;
                        t.fit_max_side = k == 8 ? 17 : 0;
                        t.out_w = t.out_h = 1;
                    }
                    for (uint64_t key = 0; key < (k < 6 ? 4u : 1u); key++) {
                        raw_out a = decode_by(raw, file, n, t, GF_DECODER_AUTO, key);
                        raw_out b = decode_by(stb, file, n, t, GF_DECODER_STB, key);
                        raw_out p = decode_by(png, pngf, plen, t, GF_DECODER_AUTO, key);
                        ck_assert_int_eq(a.used & ~GF__FLIPPED, GF__USED_RAW);
                        ck_assert_int_eq(b.used & ~GF__FLIPPED, GF__USED_STB);
                        ck_assert_int_eq(a.used & GF__FLIPPED, b.used & GF__FLIPPED);
                        ck_assert_int_eq(a.used & GF__FLIPPED, p.used & GF__FLIPPED);
                        ck_assert(a.w == b.w && a.h == b.h && a.w == p.w && a.h == p.h);
                        ck_assert_msg(memcmp(a.px, b.px, a.n) == 0 && memcmp(a.px, p.px, a.n) == 0,
                                      "%dx%d c%d -> c%d, case %d key %llu: pixels differ", w, h,
                                      c, oc, k, (unsigned long long)key);
                        free(a.px), free(b.px), free(p.px);
                        cases++;
                    }
                }
                free(pngf);
                free(px);
                free(block);
            }
    ck_assert_int_eq(cases, 5 * 2 * 3 * (6 * 4 + 4));
    /* In place: a fresh decoder's P6 to RGB holds no pixel buffer, and to
     * grey converts only the span the resampler reads. */
    gf__decoder *d;
    ck_assert_int_eq(gf__decoder_create(&d), 0);
    size_t n;
    uint8_t *block, *px;
    const uint8_t *file = raw_pnm(256, 192, 3, 0, 5, &n, &block, &px);
    gf__transform t = tu_train_transform(224, 224, 3);
    raw_out a = decode_by(d, file, n, t, GF_DECODER_AUTO, 3);
    ck_assert_uint_eq(d->buf_cap + d->conv_cap + d->fit_cap, 0);
    free(a.px);
    t = tu_train_transform(224, 224, 1);
    a = decode_by(d, file, n, t, GF_DECODER_AUTO, 3);
    ck_assert_uint_eq(d->buf_cap, 0);
    size_t span = (size_t)(d->rs.h.hi - d->rs.h.lo) * (size_t)(d->rs.v.hi - d->rs.v.lo);
    ck_assert_uint_lt(d->conv_cap, 2 * span + 4096); /* grown by doubling */
    free(a.px);
    free(px);
    free(block);
    gf__decoder_destroy(d);
    gf__decoder_destroy(raw);
    gf__decoder_destroy(stb);
    gf__decoder_destroy(png);
}
END_TEST

/* One row of samples as a PNM file: P2/P3 in decimal, P5/P6 in bytes or
 * big-endian 16-bit words (maxval > 255). */
static buf pnm_row(char kind, int w, unsigned maxval, const unsigned *v, int count)
{
    buf b = {0};
    char t[64];
    int k = snprintf(t, sizeof t, "P%c\n%d 1\n%u\n", kind, w, maxval);
    put(&b, t, (size_t)k);
    for (int i = 0; i < count; i++) {
        if (kind == '2' || kind == '3') {
            k = snprintf(t, sizeof t, "%u ", v[i]);
            put(&b, t, (size_t)k);
        } else {
            if (maxval > 255)
                put8(&b, v[i] >> 8);
            put8(&b, v[i] & 255);
        }
    }
    return b;
}

/* Issue 37: any maxval but 255 gives torchvision's pil_loader pixels (PIL
 * 9.4: round(v / maxval * 255) half to even; binary samples over maxval
 * clipped), with every decoder and strictness, but for grey over maxval
 * 255: PIL reads it as mode I and convert('RGB') clips it (8321 -> 255),
 * gpufeed scales it as a 16-bit PNG (8321 -> 32; the next test). stb_image
 * gave a 16-bit sample's low byte (8321 -> 129) and 8-bit ones unscaled.
 * The other expected bytes are what pil_loader printed for these files. */
START_TEST(pnm_at_other_maxvals_gives_pil_loaders_pixels)
{
    static const struct {
        char kind;
        int w;
        unsigned maxval, v[6];
        uint8_t rgb[18];
    } cases[] = {
        {'5', 6, 65535, {8321, 0, 65535, 200, 255, 256},
         {32, 32, 32, 0, 0, 0, 255, 255, 255, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
        {'5', 6, 1000, {1000, 500, 2, 3, 0, 1},
         {255, 255, 255, 128, 128, 128, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0}},
        {'5', 6, 256, {256, 1, 128, 255, 0, 300},
         {255, 255, 255, 1, 1, 1, 128, 128, 128, 254, 254, 254, 0, 0, 0, 255, 255, 255}},
        {'5', 6, 15, {15, 7, 8, 1, 16, 200},
         {255, 255, 255, 119, 119, 119, 136, 136, 136, 17, 17, 17, 255, 255, 255, 255, 255, 255}},
        {'6', 2, 65535, {8321, 0, 65535, 32896, 128, 129}, {32, 0, 255, 128, 0, 1}},
        {'6', 2, 1000, {1000, 500, 2, 3, 998, 1}, {255, 128, 1, 1, 254, 0}},
        {'6', 2, 6, {1, 3, 5, 6, 0, 2}, {42, 128, 212, 255, 0, 85}}, /* ties to even */
        {'2', 6, 6, {1, 3, 5, 6, 0, 2},
         {42, 42, 42, 128, 128, 128, 212, 212, 212, 255, 255, 255, 0, 0, 0, 85, 85, 85}},
        {'2', 6, 1000, {1000, 500, 2, 3, 0, 1},
         {255, 255, 255, 128, 128, 128, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0}},
        {'3', 2, 1000, {1000, 500, 2, 3, 998, 1}, {255, 128, 1, 1, 254, 0}},
        {'3', 2, 6, {1, 3, 5, 6, 0, 2}, {42, 128, 212, 255, 0, 85}},
    };
    gf_decoder_kind by[3] = {GF_DECODER_AUTO, GF_DECODER_STB, GF_DECODER_TURBO};
    gf__decoder *d;
    ck_assert_int_eq(gf__decoder_create(&d), 0);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        buf b = pnm_row(cases[i].kind, cases[i].w, cases[i].maxval, cases[i].v, 6);
        for (int k = 0; k < (gf__have_turbo() ? 3 : 2); k++)
            for (int m = 0; m < 3; m++) {
                gf__transform t = tu_eval_transform(cases[i].w, 1, 3, 1.0f);
                t.strictness = modes[m];
                raw_out o = decode_by(d, b.p, b.n, t, by[k], 0);
                ck_assert_msg(memcmp(o.px, cases[i].rgb, o.n) == 0,
                              "P%c maxval %u, decoder %d, mode %d: %u %u %u ..., want %u %u %u",
                              cases[i].kind, cases[i].maxval, k, m, o.px[0], o.px[1], o.px[2],
                              cases[i].rgb[0], cases[i].rgb[1], cases[i].rgb[2]);
                free(o.px);
            }
        free(b.p);
    }
    gf__decoder_destroy(d);
}
END_TEST

/* The scaled path reads only the crop's span, at its offset: a 16-bit P6
 * of v * 257 is v again (PIL), so every crop equals the maxval-255 file's
 * (the raw path's, checked against stb_image above). */
START_TEST(pnm_16_bit_crops_equal_the_8_bit_files)
{
    gf__decoder *d;
    ck_assert_int_eq(gf__decoder_create(&d), 0);
    int w = 61, h = 37;
    size_t n;
    uint8_t *block, *px;
    const uint8_t *file = raw_pnm(w, h, 3, 0, 11, &n, &block, &px);
    buf wide = {0};
    char hdr[32];
    put(&wide, hdr, (size_t)snprintf(hdr, sizeof hdr, "P6\n%d %d\n65535\n", w, h));
    for (int i = 0; i < w * h * 3; i++)
        put8(&wide, px[i]), put8(&wide, px[i]);
    for (int k = 0; k < 2; k++)
        for (int oc = 1; oc <= 3; oc += 2)
            for (uint64_t key = 0; key < 8; key++) {
                gf__transform t = tu_train_transform(24, 16, oc);
                raw_out a = decode_by(d, file, n, t, GF_DECODER_AUTO, key);
                raw_out b = decode_by(d, wide.p, wide.n, t,
                                      k ? GF_DECODER_STB : GF_DECODER_AUTO, key);
                ck_assert_int_eq(b.used & ~GF__FLIPPED, GF__USED_RAW);
                ck_assert_msg(memcmp(a.px, b.px, a.n) == 0, "key %llu c%d: pixels differ",
                              (unsigned long long)key, oc);
                free(a.px), free(b.px);
            }
    free(wide.p);
    free(px);
    free(block);
    gf__decoder_destroy(d);
}
END_TEST

/* The same 16-bit grey samples as a P5 and as a PNG (colour type 0) give
 * the same pixels, with every decoder: one scale for both formats. */
START_TEST(pnm_16_bit_grey_equals_the_same_samples_as_png)
{
    gf__decoder *d;
    ck_assert_int_eq(gf__decoder_create(&d), 0);
    enum { W = 23, H = 7 };
    uint8_t raw[W * H * 2];
    for (int i = 0; i < W * H; i++) {
        uint16_t v = (uint16_t)(i * 409 + 8321 * (i % 2)); /* 0..65535, ties and odd values */
        raw[2 * i] = (uint8_t)(v >> 8), raw[2 * i + 1] = (uint8_t)v;
    }
    size_t png_n;
    uint8_t *png = tu_png_raw(W, H, 16, 0, raw, (size_t)W * 2, NULL, 0, NULL, 0, &png_n);
    buf pgm = {0};
    char hdr[32];
    put(&pgm, hdr, (size_t)snprintf(hdr, sizeof hdr, "P5\n%d %d\n65535\n", W, H));
    put(&pgm, raw, sizeof raw);
    for (int k = 0; k < (gf__have_turbo() ? 3 : 2); k++) {
        gf_decoder_kind by[3] = {GF_DECODER_AUTO, GF_DECODER_STB, GF_DECODER_TURBO};
        gf__transform t = tu_eval_transform(W, H, 3, 1.0f);
        raw_out a = decode_by(d, png, png_n, t, GF_DECODER_AUTO, 0);
        raw_out b = decode_by(d, pgm.p, pgm.n, t, by[k], 0);
        ck_assert_int_eq((int)a.n, (int)b.n);
        ck_assert_msg(memcmp(a.px, b.px, a.n) == 0, "decoder %d: the P5 differs from the PNG", k);
        ck_assert_int_eq(b.px[3], 34); /* sample 1, 8730 of 65535: scaled, not PIL's clip to 255 */
        free(a.px), free(b.px);
    }
    free(pgm.p);
    free(png);
    gf__decoder_destroy(d);
}
END_TEST

static Suite *formats_suite(void)
{
    Suite *s = suite_create("formats");
    TCase *good = tcase_create("good");
    tcase_add_test(good, good_files_decode_to_their_pixels_in_every_mode);
    tcase_add_test(good, trailing_bytes_after_the_image_are_allowed);
    tcase_add_test(good, gif_with_a_large_minimum_code_size_decodes_and_a_wide_literal_is_named);
    tcase_add_test(good, plain_pnm_and_binary_pbm_decode_to_their_pixels);
    tcase_add_test(good, binary_pnm_at_maxval_255_reads_in_place_with_stb_images_bytes);
    tcase_add_test(good, pnm_at_other_maxvals_gives_pil_loaders_pixels);
    tcase_add_test(good, pnm_16_bit_crops_equal_the_8_bit_files);
    tcase_add_test(good, pnm_16_bit_grey_equals_the_same_samples_as_png);
    suite_add_tcase(s, good);
    TCase *bad = tcase_create("damaged");
    tcase_add_test(bad, every_truncation_is_etrunc_in_every_mode);
    tcase_add_test(bad, pnm_header_nonsense_is_ecorrupt);
    tcase_add_test(bad, bmp_header_nonsense_is_named);
    tcase_add_test(bad, bmp_rle_stream_must_reach_end_of_bitmap);
    tcase_add_test(bad, tga_header_nonsense_and_missing_pixels_are_named);
    tcase_add_test(bad, gif_structure_nonsense_is_named);
    tcase_add_test(bad, psd_header_nonsense_is_named);
    suite_add_tcase(s, bad);
    return s;
}

int main(void)
{
    return tu_run_suite(formats_suite());
}
