/* PNG through libspng (src/decode_png.c) against stb_image: every kind of
 * good file decodes to the same bytes, and files damaged here from good
 * ones (a CRC, the deflate stream, the Adler-32, truncation) get the code
 * and reason each strictness documents. Without libspng (build-min) the
 * same tests hold the stb_image path to gpufeed's own CRC check. */
#include "config.h"
#include "decode.h"
#include "decode_formats.h"
#include "testutil.h"
#include "run_suite.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

unsigned char *stbi_zlib_compress(unsigned char *data, int data_len, int *out_len, int quality);

/* ---- a PNG writer for what tu_png_raw lacks: Adam7, split IDATs ---- */

typedef struct buf {
    uint8_t *p;
    size_t n;
} buf;

static void put(buf *b, const void *d, size_t n)
{
    b->p = realloc(b->p, b->n + n + 1);
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void chunk(buf *b, const char *type, const uint8_t *d, size_t n)
{
    uint8_t h[8];
    be32(h, (uint32_t)n);
    memcpy(h + 4, type, 4);
    size_t at = b->n;
    put(b, h, 8);
    if (n)
        put(b, d, n);
    put(b, h, 4); /* the CRC's place */
    tu_png_fix_crc(b->p, at);
}

/* The offset of the k-th chunk of this type, or 0. */
static size_t find_chunk(const uint8_t *p, size_t len, const char *type, int k)
{
    for (size_t pos = 8; pos + 12 <= len;) {
        uint32_t n = (uint32_t)p[pos] << 24 | p[pos + 1] << 16 | p[pos + 2] << 8 | p[pos + 3];
        if (memcmp(p + pos + 4, type, 4) == 0 && k-- == 0)
            return pos;
        pos += 12 + n;
    }
    return 0;
}

typedef struct kind {
    int depth, ct, interlace;
    int trns;  /* gray/RGB: the colour of pixel (0, 0); palette: alphas of the first half */
    int idats; /* the zlib stream in this many IDAT chunks */
} kind;

static int coarse; /* samples of 4 levels: ties in the Paeth filter's choice */

static int samples(int ct)
{
    return ct == 2 ? 3 : ct == 4 ? 2 : ct == 6 ? 4 : 1;
}

/* Sample c of pixel (x, y), as stored: depth bits (palette: an index). */
static unsigned sample(const kind *k, int x, int y, int c)
{
    unsigned v = (unsigned)tu_pixel(7, x, y, c) << 8 | tu_pixel(9, x, y, c);
    if (coarse)
        v = (v * 2654435761u >> 13) % 4 * 0x5555;
    if (k->ct == 3)
        return v % (k->depth == 8 ? 200u : 1u << k->depth); /* 200 entries */
    return k->depth == 16 ? v : v >> (16 - k->depth);
}

static int paeth(int a, int b, int c)
{
    int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

/* Scanlines of a w x h subimage whose pixel (i, j) is image pixel
 * (x0 + i * dx, y0 + j * dy), row j filtered with PNG filter (j + w) % 5:
 * each of None, Sub, Up, Average and Paeth, the first row's too (where
 * the row above is zeros). */
static void scanlines(buf *b, const kind *k, int w, int h, int x0, int y0, int dx, int dy)
{
    int n = samples(k->ct);
    size_t rb = ((size_t)w * n * k->depth + 7) / 8;
    size_t bpp = (size_t)n * k->depth / 8 ? (size_t)n * k->depth / 8 : 1;
    uint8_t *row = malloc(rb + 1), *prev = calloc(rb + 1, 1), *out = malloc(rb + 1);
    for (int j = 0; j < h; j++) {
        memset(row, 0, rb + 1);
        for (int i = 0; i < w; i++)
            for (int c = 0; c < n; c++) {
                unsigned v = sample(k, x0 + i * dx, y0 + j * dy, c);
                size_t s = (size_t)i * n + c;
                if (k->depth == 16) {
                    row[1 + 2 * s] = (uint8_t)(v >> 8);
                    row[2 + 2 * s] = (uint8_t)v;
                } else if (k->depth == 8) {
                    row[1 + s] = (uint8_t)v;
                } else {
                    size_t bit = s * k->depth;
                    row[1 + bit / 8] |= (uint8_t)(v << (8 - k->depth - bit % 8));
                }
            }
        int f = (j + w) % 5;
        out[0] = (uint8_t)f;
        for (size_t i = 1; i <= rb; i++) {
            int a = i > bpp ? row[i - bpp] : 0, u = prev[i], c = i > bpp ? prev[i - bpp] : 0;
            int pred = f == 1 ? a : f == 2 ? u : f == 3 ? (a + u) / 2 : f == 4 ? paeth(a, u, c) : 0;
            out[i] = (uint8_t)(row[i] - pred);
        }
        put(b, out, rb + 1);
        memcpy(prev, row, rb + 1);
    }
    free(row);
    free(prev);
    free(out);
}

static uint8_t *make_png(const kind *k, int w, int h, size_t *len)
{
    buf f = {0}, raw = {0};
    put(&f, "\x89PNG\r\n\x1a\n", 8);
    uint8_t ih[13] = {0};
    be32(ih, (uint32_t)w);
    be32(ih + 4, (uint32_t)h);
    ih[8] = (uint8_t)k->depth;
    ih[9] = (uint8_t)k->ct;
    ih[12] = (uint8_t)k->interlace;
    chunk(&f, "IHDR", ih, 13);
    if (k->ct == 3) {
        uint8_t pal[200 * 3], al[100];
        for (int i = 0; i < 200 * 3; i++)
            pal[i] = (uint8_t)(i * 37 + 11);
        for (int i = 0; i < 100; i++)
            al[i] = (uint8_t)(i * 5);
        int entries = k->depth == 8 ? 200 : 1 << k->depth;
        chunk(&f, "PLTE", pal, (size_t)entries * 3);
        if (k->trns)
            chunk(&f, "tRNS", al, (size_t)(entries + 1) / 2);
    } else if (k->trns) {
        uint8_t t[6] = {0};
        for (int c = 0; c < samples(k->ct); c++) {
            t[2 * c] = (uint8_t)(sample(k, 0, 0, c) >> 8);
            t[2 * c + 1] = (uint8_t)sample(k, 0, 0, c);
        }
        chunk(&f, "tRNS", t, (size_t)samples(k->ct) * 2);
    }
    if (!k->interlace) {
        scanlines(&raw, k, w, h, 0, 0, 1, 1);
    } else {
        static const int xs[7] = {0, 4, 0, 2, 0, 1, 0}, ys[7] = {0, 0, 4, 0, 2, 0, 1};
        static const int dx[7] = {8, 8, 4, 4, 2, 2, 1}, dy[7] = {8, 8, 8, 4, 4, 2, 2};
        for (int p = 0; p < 7; p++) {
            int pw = (w - xs[p] + dx[p] - 1) / dx[p], ph = (h - ys[p] + dy[p] - 1) / dy[p];
            if (pw > 0 && ph > 0)
                scanlines(&raw, k, pw, ph, xs[p], ys[p], dx[p], dy[p]);
        }
    }
    int zn;
    uint8_t *z = stbi_zlib_compress(raw.p, (int)raw.n, &zn, 8);
    int parts = k->idats > 1 ? k->idats : 1;
    for (int i = 0; i < parts; i++) {
        size_t a = (size_t)zn * i / parts, e = (size_t)zn * (i + 1) / parts;
        chunk(&f, "IDAT", z + a, e - a);
    }
    chunk(&f, "IEND", NULL, 0);
    free(z);
    free(raw.p);
    *len = f.n;
    return f.p;
}

/* ---- decoding ---- */

static gf__transform tf(gf_transform kind, int w, int h, int c, float crop, int strictness)
{
    gf_settings s;
    gf_default_settings(&s);
    s.width = w;
    s.height = h;
    s.channels = c;
    s.transform = kind;
    s.crop_fraction = crop;
    s.strictness = strictness;
    gf__transform t;
    gf__transform_from_settings(&t, &s);
    return t;
}

typedef struct result {
    int rc, used;
    char why[256], warn[160];
    uint8_t *px;
} result;

static result run(const uint8_t *p, size_t len, const gf__transform *t, uint64_t key)
{
    result r;
    gf__decoder *d;
    ck_assert_int_eq(gf__decoder_create(&d), 0);
    r.px = malloc((size_t)t->out_w * t->out_h * t->channels);
    r.used = 0;
    r.why[0] = 0;
    r.rc = gf__decode(d, p, len, t, key, r.px, &r.used, r.why, sizeof r.why);
    snprintf(r.warn, sizeof r.warn, "%s", d->warn);
    gf__decoder_destroy(d);
    return r;
}

static const int spng_used = GF_HAVE_SPNG ? GF__USED_SPNG : GF__USED_STB;

/* AUTO and STB give the same bytes for kind k, every channel count, at
 * identity geometry and through random crops (rows and columns cut). */
static void same_as_stb(const kind *k, int w, int h)
{
    size_t len;
    uint8_t *png = make_png(k, w, h, &len);
    for (int C = 1; C <= 4; C++) {
        if (C == 2)
            continue;
        for (int g = 0; g < 4; g++) {
            gf__transform t = g == 0 ? tf(GF_TRANSFORM_EVAL, w, h, C, 1.0f, GF_STRICT)
                                     : tf(GF_TRANSFORM_TRAIN, 13, 11, C, 0, GF_STRICT);
            gf__transform ts = t;
            ts.decoder = GF_DECODER_STB;
            result a = run(png, len, &t, (uint64_t)g * 77), b = run(png, len, &ts, (uint64_t)g * 77);
            ck_assert_msg(a.rc == 0 && b.rc == 0, "depth %d ct %d il %d: %d %s / %d %s", k->depth,
                          k->ct, k->interlace, a.rc, a.why, b.rc, b.why);
            ck_assert_int_eq(a.used, spng_used);
            ck_assert_int_eq(b.used, GF__USED_STB);
            ck_assert_msg(memcmp(a.px, b.px, (size_t)t.out_w * t.out_h * C) == 0,
                          "depth %d ct %d interlace %d trns %d C %d geometry %d: pixels differ",
                          k->depth, k->ct, k->interlace, k->trns, C, g);
            free(a.px);
            free(b.px);
        }
    }
    free(png);
}

START_TEST(every_kind_decodes_as_stb_image_does)
{
    static const kind kinds[] = {
        {1, 0, 0, 0, 1}, {2, 0, 0, 0, 1}, {4, 0, 0, 0, 1}, {8, 0, 0, 0, 1}, {16, 0, 0, 0, 1},
        {2, 0, 0, 1, 1}, {8, 0, 0, 1, 1}, {16, 0, 0, 1, 1},                  /* gray + tRNS */
        {8, 4, 0, 0, 1}, {16, 4, 0, 0, 1},                                   /* gray + alpha */
        {8, 2, 0, 0, 1}, {16, 2, 0, 0, 1}, {8, 2, 0, 1, 1}, {16, 2, 0, 1, 1}, /* RGB */
        {8, 6, 0, 0, 1}, {16, 6, 0, 0, 1},                                   /* RGBA */
        {1, 3, 0, 0, 1}, {2, 3, 0, 0, 1}, {4, 3, 0, 0, 1}, {8, 3, 0, 0, 1}, /* palette */
        {4, 3, 0, 1, 1}, {8, 3, 0, 1, 1},                                    /* + tRNS */
        {8, 2, 0, 0, 3}, {16, 6, 0, 0, 4},                                   /* split IDATs */
        {1, 0, 1, 0, 1}, {2, 0, 1, 1, 1}, {8, 0, 1, 0, 2}, {16, 4, 1, 0, 1}, /* Adam7 */
        {8, 2, 1, 0, 1}, {16, 2, 1, 1, 1}, {8, 6, 1, 0, 1}, {4, 3, 1, 1, 1}, {8, 3, 1, 0, 1},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        same_as_stb(&kinds[i], 37, 29);
        same_as_stb(&kinds[i], 5, 3); /* Adam7 passes with no pixels */
    }
    static const kind ties[] = {{8, 0, 0, 0, 1}, {8, 2, 0, 0, 1}, {16, 6, 0, 0, 2}};
    coarse = 1;
    for (size_t i = 0; i < sizeof ties / sizeof *ties; i++)
        same_as_stb(&ties[i], 37, 29);
    coarse = 0;
}
END_TEST

/* The tRNS colour really turns pixels transparent (the test above would
 * pass if both decoders ignored it). */
START_TEST(trns_colour_gives_alpha_zero)
{
    const kind k = {8, 2, 0, 1, 1};
    size_t len;
    uint8_t *png = make_png(&k, 8, 8, &len);
    gf__transform t = tf(GF_TRANSFORM_EVAL, 8, 8, 4, 1.0f, GF_STRICT);
    result r = run(png, len, &t, 0);
    ck_assert_int_eq(r.rc, 0);
    ck_assert_int_eq(r.px[3], 0);
    ck_assert_int_eq(r.px[0], sample(&k, 0, 0, 0));
    ck_assert_int_eq(r.px[7], 255);
    free(r.px);
    free(png);
}
END_TEST

/* ---- damaged files ---- */

static const kind rgb = {8, 2, 0, 0, 1};
static const int modes[3] = {GF_STRICT, GF_STRICT_WHOLE, GF_LENIENT};

/* rc and reason of p under strictness m, crop fraction crop (1: every
 * row; 0.5: a centre crop, so the decode stops above the last row),
 * decoder dec. */
static result damaged(const uint8_t *p, size_t len, int m, float crop, gf_decoder_kind dec)
{
    gf__transform t = tf(GF_TRANSFORM_EVAL, 16, 16, 3, crop, m);
    t.decoder = dec;
    result r = run(p, len, &t, 1);
    free(r.px);
    return r;
}

static void expect_fail(const result *r, int code, const char *cause)
{
    ck_assert_msg(r->rc == code && strstr(r->why, cause) && strncmp(r->why, "PNG", 3) == 0,
                  "want %d \"%s\", got %d \"%s\"", code, cause, r->rc, r->why);
}

static void expect_warned(const result *r, const char *cause)
{
    ck_assert_msg(r->rc == 0 && (r->used & GF__WARNED) && strstr(r->warn, cause),
                  "want a warning \"%s\", got %d \"%s\" used %d warn \"%s\"", cause, r->rc,
                  r->why, r->used, r->warn);
}

START_TEST(bad_ihdr_crc_fails_in_every_mode)
{
    size_t len;
    uint8_t *png = make_png(&rgb, 64, 48, &len);
    memset(png + 8 + 8 + 13, 0, 4);
    for (int i = 0; i < 3; i++)
        for (int dec = 0; dec < 2; dec++) {
            result r = damaged(png, len, modes[i], 1.0f, dec ? GF_DECODER_STB : GF_DECODER_AUTO);
            expect_fail(&r, GF_ECORRUPT, "IHDR chunk CRC mismatch");
            if (GF_HAVE_SPNG && !dec)
                ck_assert_msg(strstr(r.why, "(libspng: invalid chunk checksum)"), "%s", r.why);
        }
    free(png);
}
END_TEST

START_TEST(bad_plte_crc_fails_even_lenient)
{
    const kind k = {8, 3, 0, 0, 1};
    size_t len;
    uint8_t *png = make_png(&k, 32, 32, &len);
    size_t at = find_chunk(png, len, "PLTE", 0);
    png[at + 8 + 600 + 2] ^= 0x40;
    for (int i = 0; i < 3; i++) {
        result r = damaged(png, len, modes[i], 1.0f, GF_DECODER_AUTO);
        expect_fail(&r, GF_ECORRUPT, "PLTE chunk CRC mismatch");
    }
    free(png);
}
END_TEST

/* A byte of an IDAT's CRC flipped: the second of three IDATs, so libspng
 * passes it when the decode runs to the bottom, and gpufeed's walk finds
 * it when a centre crop stops the decode above. PIL does not check it:
 * lenient warns. */
START_TEST(bad_idat_crc_is_strict_error_lenient_warning)
{
    const kind k = {8, 2, 0, 0, 3};
    size_t len;
    uint8_t *png = make_png(&k, 64, 48, &len);
    for (int which = 1; which <= 2; which++) {
        uint8_t *p = malloc(len);
        memcpy(p, png, len);
        size_t at = find_chunk(p, len, "IDAT", which);
        uint32_t n = (uint32_t)p[at] << 24 | p[at + 1] << 16 | p[at + 2] << 8 | p[at + 3];
        p[at + 8 + n + 1] ^= 0x10;
        for (int c = 0; c < 2; c++) {
            float crop = c ? 0.5f : 1.0f;
            for (int dec = 0; dec < 2; dec++) {
                gf_decoder_kind dk = dec ? GF_DECODER_STB : GF_DECODER_AUTO;
                result s = damaged(p, len, GF_STRICT, crop, dk);
                result w = damaged(p, len, GF_STRICT_WHOLE, crop, dk);
                result l = damaged(p, len, GF_LENIENT, crop, dk);
                expect_fail(&s, GF_ECORRUPT, "IDAT chunk CRC mismatch");
                expect_fail(&w, GF_ECORRUPT, "IDAT chunk CRC mismatch");
                ck_assert_int_eq(l.rc, 0);
                /* lenient reads only to the crop's last row: libspng
                 * may not reach the damaged CRC above it */
                if (dec || crop == 1.0f)
                    expect_warned(&l, "IDAT chunk CRC mismatch");
            }
        }
        free(p);
    }
    free(png);
}
END_TEST

/* The first deflate block's type set to 3 (reserved), the CRC made right
 * again: the stream itself is broken, in every mode. */
START_TEST(broken_deflate_stream_fails_in_every_mode)
{
    size_t len;
    uint8_t *png = make_png(&rgb, 64, 48, &len);
    size_t at = find_chunk(png, len, "IDAT", 0);
    png[at + 8 + 2] |= 0x06;
    tu_png_fix_crc(png, at);
    for (int i = 0; i < 3; i++) {
        result r = damaged(png, len, modes[i], 0.5f, GF_DECODER_AUTO);
        expect_fail(&r, GF_ECORRUPT, GF_HAVE_SPNG ? "damaged deflate stream" : "corrupt data");
        result s = damaged(png, len, modes[i], 0.5f, GF_DECODER_STB);
        expect_fail(&s, GF_ECORRUPT, "corrupt data (stb_image: ");
    }
    /* bytes flipped in the middle of the data, CRC left alone: strict
     * fails (the stream, its Adler-32 or the CRC, whichever libspng meets
     * first); lenient fails on a broken stream, or warns if the stream
     * still inflates (wrong pixels that only the checksums show) */
    png[at + 8 + 2] &= ~0x06;
    tu_png_fix_crc(png, at);
    for (int i = 100; i < 140; i++)
        png[at + 8 + i] ^= 0xa5;
    for (int i = 0; i < 3; i++) {
        result r = damaged(png, len, modes[i], 1.0f, GF_DECODER_AUTO);
        if (modes[i] == GF_LENIENT && r.rc == 0) {
            expect_warned(&r, GF_HAVE_SPNG ? "Adler-32" : "IDAT chunk CRC mismatch");
            continue;
        }
        ck_assert_msg(r.rc == GF_ECORRUPT && (strstr(r.why, "deflate") || strstr(r.why, "CRC") ||
                                              strstr(r.why, "Adler-32") ||
                                              strstr(r.why, "invalid scanline filter") ||
                                              strstr(r.why, "corrupt data")),
                      "%d %s", r.rc, r.why);
    }
    free(png);
}
END_TEST

/* The zlib stream's Adler-32 (its last 4 bytes) wrong, the IDAT's CRC
 * right: only the inflate sees it, at the end of the stream. */
START_TEST(wrong_adler32_fails_where_the_stream_is_read_to_its_end)
{
    size_t len;
    uint8_t *png = make_png(&rgb, 64, 48, &len);
    size_t at = find_chunk(png, len, "IDAT", 0);
    uint32_t n = (uint32_t)png[at] << 24 | png[at + 1] << 16 | png[at + 2] << 8 | png[at + 3];
    png[at + 8 + n - 1] ^= 0x01;
    tu_png_fix_crc(png, at);
    result s = damaged(png, len, GF_STRICT, 1.0f, GF_DECODER_AUTO);
    result sc = damaged(png, len, GF_STRICT, 0.5f, GF_DECODER_AUTO);
    result w = damaged(png, len, GF_STRICT_WHOLE, 0.5f, GF_DECODER_AUTO);
    result l = damaged(png, len, GF_LENIENT, 1.0f, GF_DECODER_AUTO);
    result st = damaged(png, len, GF_STRICT_WHOLE, 1.0f, GF_DECODER_STB);
    ck_assert_int_eq(st.rc, 0); /* stb_image checks no Adler-32 */
#if GF_HAVE_SPNG
    const char *adler = "zlib Adler-32 checksum mismatch";
    expect_fail(&s, GF_ECORRUPT, adler);
    ck_assert_msg(strstr(s.why, "(zlib: incorrect data check)"), "%s", s.why);
    expect_fail(&w, GF_ECORRUPT, adler);
    ck_assert_int_eq(sc.rc, 0); /* above the bottom, strict reads no further */
    expect_warned(&l, adler);
#else
    ck_assert_int_eq(s.rc + sc.rc + w.rc + l.rc, 0);
#endif
    free(png);
}
END_TEST

START_TEST(truncation_is_etrunc_in_every_mode)
{
    size_t len;
    uint8_t *png = make_png(&rgb, 64, 48, &len);
    size_t cuts[] = {9, 20, 33, 45, len / 2, len - 13, len - 5, len - 1};
    for (size_t c = 0; c < sizeof cuts / sizeof *cuts; c++)
        for (int i = 0; i < 3; i++)
            for (int dec = 0; dec < 2; dec++) {
                result r = damaged(png, cuts[c], modes[i], 0.5f,
                                   dec ? GF_DECODER_STB : GF_DECODER_AUTO);
                ck_assert_msg(r.rc == GF_ETRUNC && strstr(r.why, "PNG: premature end of data"),
                              "cut at %zu of %zu, mode %d: %d %s", cuts[c], len, modes[i], r.rc,
                              r.why);
            }
    free(png);
}
END_TEST

START_TEST(pixel_limit_is_checked_from_ihdr)
{
    size_t len;
    uint8_t *png = make_png(&rgb, 64, 48, &len);
    gf__transform t = tf(GF_TRANSFORM_EVAL, 16, 16, 3, 1.0f, GF_STRICT);
    t.max_pixels = 64 * 48 - 1;
    result r = run(png, len, &t, 0);
    expect_fail(&r, GF_ETOOBIG, "64x48 = 3072 pixels over the limit of 3071");
    free(r.px);
    /* a width past libspng's own limit, which gpufeed sets to the pixel limit */
    be32(png + 16, 1u << 30);
    tu_png_fix_crc(png, 8);
    t.max_pixels = 0;
    r = run(png, len, &t, 0);
    expect_fail(&r, GF_ETOOBIG, "over the limit");
    free(r.px);
    free(png);
}
END_TEST

/* A filter byte past 4 (row 1's 7): named as libspng names it, with the
 * row (issue 26: gpufeed's inflate said "corrupt data"). */
START_TEST(a_bad_filter_byte_is_named)
{
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    static const uint8_t ihdr[13] = {0, 0, 0, 4, 0, 0, 0, 2, 8, 0, 0, 0, 0};
    uint8_t raw[10] = {0, 1, 2, 3, 4, 7, 5, 6, 7, 8};
    int zl;
    uint8_t *z = stbi_zlib_compress(raw, sizeof raw, &zl, 8);
    buf b = {0};
    put(&b, sig, 8);
    chunk(&b, "IHDR", ihdr, 13);
    chunk(&b, "IDAT", z, (size_t)zl);
    chunk(&b, "IEND", NULL, 0);
    for (int i = 0; i < 3; i++) {
        result r = damaged(b.p, b.n, modes[i], 1.0f, GF_DECODER_AUTO);
        expect_fail(&r, GF_ECORRUPT,
                    GF_HAVE_SPNG ? "PNG: invalid scanline filter 7 in row 1" : "corrupt data");
    }
    free(z);
    free(b.p);
}
END_TEST

/* ---- bombs ---- */

/* The bound, 1 s of CPU time (the work a bomb costs, not the wait
 * for a core on a busy machine); under valgrind (its preload in
 * LD_PRELOAD), which runs code some 50 times slower, 60 s: still far from
 * a bomb's minutes. */
static double bound_s(void)
{
    const char *p = getenv("LD_PRELOAD");
    return p && strstr(p, "vgpreload") ? 60.0 : 1.0;
}

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A bomb of `mb` MB through decoder dec in every mode, each within 1 s:
 * gpufeed's inflate refuses it (LENIENT: the row, warned), stb_image's
 * path fails at its allocation cap (twice the file: its own work). */
static void expect_bomb_ended(gf_decoder_kind dec, size_t mb)
{
    size_t len;
    uint8_t *png = tu_png_bomb(mb << 20, &len);
    for (int i = 0; i < 3; i++) {
        double t0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
        result r = damaged(png, len, modes[i], 1.0f, dec);
        double took = clock_s(CLOCK_THREAD_CPUTIME_ID) - t0;
        ck_assert_msg(took < bound_s(), "mode %d decoder %d: %.1f s of CPU", modes[i], dec,
                      took);
        if (dec == GF_DECODER_STB)
            expect_fail(&r, GF_ECORRUPT, "a deflate bomb?");
        else if (modes[i] == GF_LENIENT)
            expect_warned(&r, "goes on past the last row");
        else
            expect_fail(&r, GF_ECORRUPT, "goes on past the last row");
    }
    free(png);
}

/* 8 MB of deflate data that inflate to 1.3 GB past a 1x1 image's row:
 * gpufeed's inflate stops within a budget of the image (STRICT and
 * STRICT_WHOLE refuse it, naming it; LENIENT keeps the row, warned). */
START_TEST(a_deflate_bomb_past_the_last_row_is_ended_within_the_images_budget)
{
    if (GF_HAVE_SPNG) /* else AUTO is stb_image's path: the test below */
        expect_bomb_ended(GF_DECODER_AUTO, 8);
}
END_TEST

/* stb_image's path (decoder = STB, and builds without libspng): its
 * allocations are capped by what the 1x1 image can need, so the bomb
 * fails at once, named, in every mode. */
START_TEST(a_deflate_bomb_on_the_stb_path_fails_at_the_allocation_cap)
{
    expect_bomb_ended(GF_DECODER_STB, 2); /* 330 MB past the row */
}
END_TEST

/* And in memory: a 1 MB bomb grows a child's peak RSS by under 64 MiB
 * (issue 26: 1 GB; 2 GB for a 16.7 MB file). */
START_TEST(a_deflate_bomb_on_the_stb_path_stays_under_64_mib)
{
    size_t len;
    uint8_t *png = tu_png_bomb(1u << 20, &len);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        struct rusage a, b;
        getrusage(RUSAGE_SELF, &a);
        result r = damaged(png, len, GF_STRICT, 1.0f, GF_DECODER_STB);
        getrusage(RUSAGE_SELF, &b);
        long grew_kib = b.ru_maxrss - a.ru_maxrss;
        int ok = r.rc == GF_ECORRUPT && grew_kib < 64 * 1024;
        if (!ok)
            fprintf(stderr, "rc %d (%s), peak RSS grew by %ld KiB\n", r.rc, r.why, grew_kib);
        _exit(ok ? 0 : 1);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child failed: status %d", st);
    free(png);
}
END_TEST

/* The flag the loader raises at close ends gpufeed's inflate too. */
START_TEST(a_raised_cancel_flag_ends_a_png_decode)
{
    if (!GF_HAVE_SPNG)
        return; /* stb_image's inflate has no hook: bounded by the image */
    size_t len;
    uint8_t *png = make_png(&rgb, 64, 48, &len);
    gf__transform t = tf(GF_TRANSFORM_EVAL, 16, 16, 3, 1.0f, GF_STRICT);
    gf__decoder *d;
    ck_assert_int_eq(gf__decoder_create(&d), 0);
    atomic_int cancel = 1;
    gf__decoder_set_cancel(d, &cancel);
    uint8_t out[16 * 16 * 3];
    char why[160];
    int used;
    unsigned before = atomic_load(&gf__decode_cancels);
    ck_assert_int_eq(gf__decode(d, png, len, &t, 1, out, &used, why, sizeof why), GF_EBUSY);
    ck_assert_str_eq(why, "PNG: decode cancelled (the loader is stopping)");
    ck_assert_uint_eq(atomic_load(&gf__decode_cancels), before + 1);
    cancel = 0;
    ck_assert_int_eq(gf__decode(d, png, len, &t, 1, out, &used, why, sizeof why), 0);
    gf__decoder_destroy(d);
    free(png);
}
END_TEST

/* A loader over bombs, STRICT_WHOLE as verify runs it: closed at once
 * while its decodes are in progress (issue 26: 28-40 s). */
START_TEST(a_loader_over_png_bombs_closes_at_once)
{
    size_t len;
    uint8_t *png = tu_png_bomb(8u << 20, &len);
    char *dir = tu_mkdtemp(), p[4200];
    snprintf(p, sizeof p, "%s/a", dir);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/a/bomb%d.png", dir, i);
        tu_write_file(p, png, len);
    }
    free(png);
    gf_settings s;
    tu_cpu_settings(&s);
    s.data = dir;
    s.width = s.height = 8;
    s.threads = 2;
    s.strictness = GF_STRICT_WHOLE;
    gf_loader *l = NULL;
    ck_assert_int_eq(gf_open(&l, &s), 0);
    gf_stats st;
    for (int i = 0; i < 500; i++) { /* a bomb read: its decode under way */
        gf_get_stats(l, &st);
        if (st.bytes_read >= len)
            break;
        usleep(10 * 1000);
    }
    usleep(20 * 1000);
    /* The decode threads' CPU too: a close that let the bombs finish
     * would spend theirs. The wall clock only against a wait that burns
     * no CPU, far above a busy machine's delays. */
    double cpu0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), wall0 = clock_s(CLOCK_MONOTONIC);
    gf_close(&l);
    double cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0, wall = clock_s(CLOCK_MONOTONIC) - wall0;
    ck_assert_msg(cpu < bound_s() && wall < 15 * bound_s(), "gf_close took %.1f s of CPU, %.1f s",
                  cpu, wall);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

static Suite *png_suite(void)
{
    Suite *s = suite_create("png");
    TCase *good = tcase_create("good");
    tcase_add_test(good, every_kind_decodes_as_stb_image_does);
    tcase_add_test(good, trns_colour_gives_alpha_zero);
    suite_add_tcase(s, good);
    TCase *bad = tcase_create("damaged");
    tcase_add_test(bad, bad_ihdr_crc_fails_in_every_mode);
    tcase_add_test(bad, bad_plte_crc_fails_even_lenient);
    tcase_add_test(bad, bad_idat_crc_is_strict_error_lenient_warning);
    tcase_add_test(bad, broken_deflate_stream_fails_in_every_mode);
    tcase_add_test(bad, wrong_adler32_fails_where_the_stream_is_read_to_its_end);
    tcase_add_test(bad, truncation_is_etrunc_in_every_mode);
    tcase_add_test(bad, pixel_limit_is_checked_from_ihdr);
    tcase_add_test(bad, a_bad_filter_byte_is_named);
    suite_add_tcase(s, bad);
    TCase *bombs = tcase_create("bombs");
    tcase_set_timeout(bombs, 120);
    tcase_add_test(bombs, a_deflate_bomb_past_the_last_row_is_ended_within_the_images_budget);
    tcase_add_test(bombs, a_deflate_bomb_on_the_stb_path_fails_at_the_allocation_cap);
    tcase_add_test(bombs, a_deflate_bomb_on_the_stb_path_stays_under_64_mib);
    tcase_add_test(bombs, a_raised_cancel_flag_ends_a_png_decode);
    tcase_add_test(bombs, a_loader_over_png_bombs_closes_at_once);
    suite_add_tcase(s, bombs);
    return s;
}

int main(void)
{
    return tu_run_suite(png_suite());
}
