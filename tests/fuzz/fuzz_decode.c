/* gf__decode on any bytes: the first two bytes choose the decoder, the
 * transform, the channels and the output size; the rest is the file. An
 * error must say why; a success must write exactly the output. A binary
 * PNM that went the raw path (decode_pnm_raw.c) must give decoder = STB's
 * result: the same code and reason, or the same bytes (stb_image's at
 * maxval 255; at any other maxval both take the scaled path). */
#include "config.h"
#include "fuzz.h"
#include "decode.h"
#include "testutil.h"

#include <string.h>

#if GF_HAVE_WEBP
#include <webp/encode.h>
#endif
#include <stb_image_write.h>
unsigned char *stbi_zlib_compress(unsigned char *data, int data_len, int *out_len, int quality);

/* The stb path's result for the same file and key must be rc and why, or
 * on success the same pixels as dst. */
static void same_as_stb(gf__decoder *dec, const uint8_t *file, size_t len, const gf__transform *t,
                        uint64_t key, const uint8_t *dst, int rc, const char *why)
{
    gf__transform st = *t;
    st.decoder = GF_DECODER_STB;
    size_t out = (size_t)t->out_w * t->out_h * t->channels;
    uint8_t *px = malloc(out);
    FUZZ_CHECK(px);
    char swhy[256] = "";
    int used = 0;
    int src = gf__decode(dec, file, len, &st, key, px, &used, swhy, sizeof swhy);
    if (src != GF_ENOMEM) {
        FUZZ_CHECK(src == rc);
        FUZZ_CHECK(rc < 0 ? strcmp(swhy, why) == 0 : memcmp(px, dst, out) == 0);
    }
    free(px);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static gf__decoder *dec;
    if (!dec)
        FUZZ_CHECK(gf__decoder_create(&dec) == 0);
    if (size < 2)
        return 0;
    static const int channels[] = {1, 3, 4, 3};
    gf_settings s;
    gf_default_settings(&s);
    s.decoder = (gf_decoder_kind)(data[0] % 3);
    s.transform = data[0] & 4 ? GF_TRANSFORM_TRAIN : GF_TRANSFORM_EVAL;
    s.channels = channels[data[0] >> 3 & 3];
    s.width = 1 + (data[1] & 31);
    s.height = 1 + (data[1] >> 5) * 9;
    s.max_pixels = 1u << 22; /* 4 Mi pixels: a fuzzer's memory, not a limit test */
    gf__transform t;
    gf__transform_from_settings(&t, &s);
    t.full_decode = data[0] >> 5 & 1;
    t.strictness = (gf_strictness)((data[0] >> 6) % 3);

    size_t out = (size_t)s.width * s.height * s.channels;
    uint8_t *dst = malloc(out + 16);
    FUZZ_CHECK(dst);
    memset(dst, 0xa5, out + 16);
    char why[256] = "";
    int used = 0;
    int rc = gf__decode(dec, data + 2, size - 2, &t, size, dst, &used, why, sizeof why);
    if (rc == 0)
        FUZZ_CHECK(used & (GF__USED_STB | GF__USED_TURBO | GF__USED_SPNG | GF__USED_WEBP |
                           GF__USED_RAW));
    else if (rc != GF_ENODEV) /* TURBO asked of a build without it */
        FUZZ_CHECK(rc < 0 && why[0] != '\0');
    for (int i = 0; i < 16; i++)
        FUZZ_CHECK(dst[out + i] == 0xa5); /* nothing past the output */
    if (t.decoder != GF_DECODER_STB && size >= 4 && data[2] == 'P' &&
        (data[3] == '5' || data[3] == '6') && rc != GF_ENOMEM)
        same_as_stb(dec, data + 2, size - 2, &t, size, dst, rc, why);
    free(dst);
    return 0;
}

static void emit_image(fuzz_emit emit, const char *name, uint8_t mode, uint8_t size,
                       const uint8_t *file, size_t len)
{
    uint8_t *buf = malloc(len + 2);
    buf[0] = mode;
    buf[1] = size;
    memcpy(buf + 2, file, len);
    emit(name, buf, len + 2);
    free(buf);
}

/* PNGs of every kind libspng and stb_image must agree on, and damaged
 * ones (decode_png.c, png_check.c). Mode bytes: AUTO or STB, train or
 * eval, strict / lenient / strict-whole in the top two bits. */
static void png_kind_seeds(fuzz_emit emit)
{
    static const struct {
        const char *name;
        int w, h, depth, ct;
    } kinds[] = {
        {"png-gray1", 9, 5, 1, 0}, {"png-gray2", 9, 5, 2, 0}, {"png-gray4", 9, 5, 4, 0},
        {"png-gray16", 5, 4, 16, 0}, {"png-ga8", 5, 4, 8, 4}, {"png-ga16", 5, 4, 16, 4},
        {"png-rgba16", 5, 4, 16, 6}, {"png-pal1", 9, 5, 1, 3}, {"png-pal4", 9, 5, 4, 3},
    };
    uint8_t raw[5 * 4 * 8], plte[16 * 3], trns[6] = {0, 3, 0, 5, 0, 7};
    for (size_t i = 0; i < sizeof raw; i++)
        raw[i] = (uint8_t)(i * 53 + 7);
    for (size_t i = 0; i < sizeof plte; i++)
        plte[i] = (uint8_t)(i * 29);
    size_t len;
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        int n = kinds[k].ct == 2 ? 3 : kinds[k].ct == 4 ? 2 : kinds[k].ct == 6 ? 4 : 1;
        size_t rb = ((size_t)kinds[k].w * n * kinds[k].depth + 7) / 8;
        int pal = kinds[k].ct == 3;
        uint8_t *p = tu_png_raw(kinds[k].w, kinds[k].h, kinds[k].depth, kinds[k].ct, raw, rb,
                                pal ? plte : NULL, 1 << kinds[k].depth, pal ? trns : NULL, 2, &len);
        emit_image(emit, kinds[k].name, (uint8_t)(k & 1 ? 0x44 : 0x0c), 0x23, p, len);
        free(p);
    }
    /* tRNS on gray and RGB */
    uint8_t *g = tu_png_raw(5, 4, 8, 0, raw, 5, NULL, 0, trns, 2, &len);
    emit_image(emit, "png-gray-trns", 0x04, 0x23, g, len);
    free(g);
    uint8_t *c = tu_png_raw(5, 4, 8, 2, raw, 15, NULL, 0, trns, 6, &len);
    emit_image(emit, "png-rgb-trns", 0x14, 0x23, c, len);
    free(c);
    /* Adam7: a 1 x 8 image's passes are eight one-pixel scanlines (rows
     * 0, 4, 2, 6, 1, 3, 5, 7), the layout of a plain 1 x 8: same bytes
     * with the interlace flag set */
    uint8_t *a = tu_png_raw(1, 8, 16, 2, raw, 6, NULL, 0, NULL, 0, &len);
    a[8 + 8 + 12] = 1;
    tu_png_fix_crc(a, 8);
    emit_image(emit, "png-adam7", 0x0c, 0x23, a, len);
    free(a);
    /* damaged copies of an 8-bit RGB file: chunks at 8 (IHDR), 33 (IDAT) */
    uint8_t *good = tu_png_raw(5, 4, 8, 2, raw, 15, NULL, 0, NULL, 0, &len);
    size_t zlen = (size_t)good[33] << 24 | good[34] << 16 | good[35] << 8 | good[36];
    static const struct {
        const char *name;
        uint8_t mode;
    } bad[] = {{"png-bad-ihdr-crc", 0x00}, {"png-bad-idat-crc", 0x40},
               {"png-bad-deflate", 0x80},  {"png-bad-adler", 0x40},
               {"png-cut-iend", 0x00},     {"png-cut-idat", 0x41}};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        uint8_t *p = malloc(len);
        memcpy(p, good, len);
        size_t n = len;
        switch (k) {
        case 0: memset(p + 29, 0, 4); break;
        case 1: p[41 + zlen] ^= 0x10; break;
        case 2: p[43] |= 0x06; tu_png_fix_crc(p, 33); break; /* block type 3 */
        case 3: p[40 + zlen] ^= 0x01; tu_png_fix_crc(p, 33); break;
        case 4: n = len - 1; break;
        default: n = 41 + zlen / 2; break;
        }
        emit_image(emit, bad[k].name, bad[k].mode, 0x23, p, n);
        free(p);
    }
    free(good);
}

/* Binary PNM at maxval 255, which the raw path reads in place
 * (decode_pnm_raw.c), as `gpufeed prepare --format raw` writes it and
 * with a comment, trailing bytes, a short raster: AUTO (so each is also
 * decoded by stb_image and compared), train and eval, every channel
 * count. */
static void raw_pnm_seeds(fuzz_emit emit)
{
    enum { RW = 11, RH = 6 };
    uint8_t f[64 + RW * RH * 3 + 8];
    static const char *const head[] = {"P6\n%d %d\n255\n", "P5\n%d %d\n255\n",
                                       "P6 # c\n%d\t%d\r255 ", "P5\n%d %d\n255\n"};
    static const uint8_t mode[] = {0x0c, 0x00, 0x14, 0x18};
    for (int k = 0; k < 4; k++) {
        int c = head[k][1] == '6' ? 3 : 1;
        size_t n = (size_t)snprintf((char *)f, 64, head[k], RW, RH);
        for (int i = 0; i < RW * RH * c; i++)
            f[n++] = (uint8_t)(i * 37 + k);
        if (k == 3)
            memcpy(f + n, "P5 junk", 7), n += 7; /* bytes after the raster are allowed */
        char name[32];
        snprintf(name, sizeof name, "pnm-raw-%d", k);
        emit_image(emit, name, mode[k], 0x2f, f, n);
        snprintf(name, sizeof name, "pnm-raw-%d-cut", k);
        emit_image(emit, name, mode[k], 0x2f, f, n - (k == 3 ? 8 : 1));
    }
}

/* Binary PNM at other maxvals, which every decoder scales alike
 * (decode_pnm.c): 16-bit and 8-bit samples, some over maxval, whole and
 * cut; AUTO, STB and TURBO. */
static void scaled_pnm_seeds(fuzz_emit emit)
{
    enum { RW = 9, RH = 5 };
    uint8_t f[64 + RW * RH * 3 * 2];
    static const unsigned maxval[] = {65535, 1000, 15, 256};
    static const uint8_t mode[] = {0x0c, 0x0d, 0x16, 0x05};
    for (int k = 0; k < 4; k++) {
        int c = k & 1 ? 1 : 3, wide = maxval[k] > 255;
        size_t n = (size_t)snprintf((char *)f, 64, "P%c\n%d %d\n%u\n", c == 3 ? '6' : '5', RW,
                                    RH, maxval[k]);
        for (int i = 0; i < RW * RH * c; i++) {
            unsigned v = (unsigned)(i * 7919 + k) % (maxval[k] + maxval[k] / 8 + 1);
            if (wide)
                f[n++] = (uint8_t)(v >> 8);
            f[n++] = (uint8_t)(v > 255 && !wide ? 255 : v);
        }
        char name[32];
        snprintf(name, sizeof name, "pnm-scaled-%d", k);
        emit_image(emit, name, mode[k], 0x2f, f, n);
        snprintf(name, sizeof name, "pnm-scaled-%d-cut", k);
        emit_image(emit, name, mode[k], 0x2f, f, n - 1);
    }
}

/* stb_image_write's callback into a fixed buffer (fuzz_seeds' BMP, TGA). */
typedef struct membuf {
    uint8_t *p;
    size_t n, cap;
} membuf;

static void membuf_put(void *ctx, void *data, int size)
{
    membuf *m = ctx;
    FUZZ_CHECK(m->n + (size_t)size <= m->cap);
    memcpy(m->p + m->n, data, (size_t)size);
    m->n += (size_t)size;
}

void fuzz_seeds(fuzz_emit emit)
{
    enum { W = 23, H = 17 };
    uint8_t px[W * H * 4];
    size_t len;
    for (int c = 1; c <= 4; c++) {
        char name[64];
        tu_fill_smooth(px, W, H, c, (uint32_t)c);
        uint8_t *png = tu_png_mem(px, W, H, c, &len);
        snprintf(name, sizeof name, "png-c%d", c);
        emit_image(emit, name, (uint8_t)(c == 1 ? 0x04 : 0x0c), 0x2f, png, len);
        free(png);
        if (c == 2 || c == 4)
            continue;
        uint8_t *jpg = tu_jpg_mem(px, W, H, c, 85, &len);
        snprintf(name, sizeof name, "jpg-c%d", c);
        emit_image(emit, name, (uint8_t)(c == 1 ? 0x00 : 0x0c), 0x2f, jpg, len);
        snprintf(name, sizeof name, "jpg-c%d-stb", c);
        emit_image(emit, name, (uint8_t)(c == 1 ? 0x01 : 0x0d), 0x47, jpg, len);
        free(jpg);
    }
    /* 16-bit RGB and 4-entry palette PNGs (stb_image_write makes neither). */
    uint8_t raw16[4 * 3 * 6], rawp[4 * 3], plte[12] = {0, 0, 0, 255, 0, 0, 0, 255, 0, 9, 9, 9};
    for (size_t i = 0; i < sizeof raw16; i++)
        raw16[i] = (uint8_t)(i * 37);
    for (size_t i = 0; i < sizeof rawp; i++)
        rawp[i] = (uint8_t)(i % 4);
    uint8_t *p16 = tu_png_raw(4, 3, 16, 2, raw16, 4 * 6, NULL, 0, NULL, 0, &len);
    emit_image(emit, "png-16bit", 0x09, 0x23, p16, len);
    free(p16);
    uint8_t trns[1] = {0};
    uint8_t *pp = tu_png_raw(4, 3, 8, 3, rawp, 4, plte, 4, trns, 1, &len);
    emit_image(emit, "png-palette", 0x19, 0x23, pp, len);
    free(pp);
    static const char ppm[] = "P6\n3 2\n255\n"
                              "\x10\x20\x30\x40\x50\x60\x70\x80\x90\xa0\xb0\xc0"
                              "\xd0\xe0\xf0\x01\x02\x03";
    emit_image(emit, "ppm", 0x09, 0x22, (const uint8_t *)ppm, sizeof ppm - 1);
    raw_pnm_seeds(emit);
    scaled_pnm_seeds(emit);
    /* Issue 26's cases: plain PNM and binary PBM (decode_pnm.c), a PNG
     * deflate bomb on both paths, a bad PNG filter byte, a JPEG without
     * its DQT (after the good ones: the handle's stale tables) on both
     * decoders, a GIF with LZW minimum code size 11. */
#define PNM_SEED(name, text) {name, text, sizeof text - 1}
    static const struct {
        const char *name, *data;
        size_t len;
    } pnm[] = {
        PNM_SEED("pbm-plain", "P1\n# c\n3 2\n010\n1 1 0\n"),
        PNM_SEED("pgm-plain", "P2\n2 2\n1000\n0 700\n1000 3\n"),
        PNM_SEED("ppm-plain", "P3\n1 2\n255\n1 2 3\n4 5 6\n"),
        PNM_SEED("pbm-raw", "P4\n9 2\n\xff\x80\x01\x00"),
    };
#undef PNM_SEED
    for (size_t i = 0; i < sizeof pnm / sizeof *pnm; i++)
        emit_image(emit, pnm[i].name, 0x08, 0x22, (const uint8_t *)pnm[i].data, pnm[i].len);
    uint8_t *bomb = tu_png_bomb(512, &len);
    emit_image(emit, "png-bomb", 0x48, 0x22, bomb, len);
    emit_image(emit, "png-bomb-stb", 0x49, 0x22, bomb, len);
    free(bomb);
    static const uint8_t filt_raw[10] = {0, 1, 2, 3, 4, 7, 5, 6, 7, 8}; /* row 1: filter 7 */
    {
        int zl;
        unsigned char *z = stbi_zlib_compress((unsigned char *)filt_raw, 10, &zl, 8);
        static const uint8_t head[] = "\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\0\0\x04\0\0\0\x02"
                                      "\x08\0\0\0\0";
        uint8_t png[128];
        size_t n = sizeof head - 1;
        memcpy(png, head, n);
        memset(png + n, 0, 4); /* IHDR's CRC: fixed below */
        n += 4;
        size_t idat = n;
        png[n++] = 0, png[n++] = 0, png[n++] = 0, png[n++] = (uint8_t)zl;
        memcpy(png + n, "IDAT", 4);
        memcpy(png + n + 4, z, (size_t)zl);
        n += 4 + (size_t)zl + 4;
        memcpy(png + n, "\0\0\0\0IEND\xae\x42\x60\x82", 12);
        n += 12;
        tu_png_fix_crc(png, 8);
        tu_png_fix_crc(png, idat);
        emit_image(emit, "png-bad-filter", 0x08, 0x22, png, n);
        free(z);
    }
    tu_fill_smooth(px, W, H, 3, 3);
    uint8_t *jpg = tu_jpg_mem(px, W, H, 3, 85, &len);
    size_t k = 2;
    for (size_t i = 2; i + 4 <= len;) { /* every DQT (FF DB) before the scan out */
        size_t seg = jpg[i + 1] == 0xda ? len - i : 2 + ((size_t)jpg[i + 2] << 8 | jpg[i + 3]);
        if (jpg[i + 1] != 0xdb) {
            memmove(jpg + k, jpg + i, seg);
            k += seg;
        }
        if (jpg[i + 1] == 0xda)
            break;
        i += seg;
    }
    emit_image(emit, "jpg-no-dqt", 0x0c, 0x2f, jpg, k);
    emit_image(emit, "jpg-no-dqt-stb", 0x0d, 0x2f, jpg, k);
    free(jpg);
    {
        /* 8x4 GIF, minimum code size 11: clear, 32 literals of 12 bits, end */
        uint8_t g[256];
        size_t n = 0;
        static const uint8_t hdr[] = "GIF89a\x08\x00\x04\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff"
                                     "\x2c\x00\x00\x00\x00\x08\x00\x04\x00\x00\x0b";
        memcpy(g, hdr, sizeof hdr - 1);
        n = sizeof hdr - 1;
        uint8_t lzw[64];
        size_t ln = 0;
        uint32_t acc = 0;
        int bits = 0;
        for (int i = -1; i <= 32; i++) {
            acc |= (uint32_t)(i < 0 ? 2048 : i == 32 ? 2049 : i % 2) << bits;
            for (bits += 12; bits >= 8; bits -= 8, acc >>= 8)
                lzw[ln++] = (uint8_t)acc;
        }
        if (bits)
            lzw[ln++] = (uint8_t)acc;
        g[n++] = (uint8_t)ln;
        memcpy(g + n, lzw, ln);
        n += ln;
        g[n++] = 0;
        g[n++] = 0x3b;
        emit_image(emit, "gif-min-code-11", 0x08, 0x22, g, n);
    }
#if GF_HAVE_WEBP
    /* WebP: lossy, lossy + ALPH (VP8X), lossless, lossless + alpha; each
     * cropped (train, eval) and whole, then cut and with a byte flipped in
     * its bitstream. */
    for (int k = 0; k < 4; k++) {
        static const char *const kinds[] = {"lossy", "lossy-alpha", "lossless", "lossless-alpha"};
        int c = k % 2 ? 4 : 3;
        uint8_t *webp = NULL;
        char name[64];
        tu_fill_smooth(px, W, H, c, (uint32_t)(10 + k));
        len = k == 0   ? WebPEncodeRGB(px, W, H, W * 3, 80, &webp)
              : k == 1 ? WebPEncodeRGBA(px, W, H, W * 4, 80, &webp)
              : k == 2 ? WebPEncodeLosslessRGB(px, W, H, W * 3, &webp)
                       : WebPEncodeLosslessRGBA(px, W, H, W * 4, &webp);
        if (!len)
            continue;
        snprintf(name, sizeof name, "webp-%s", kinds[k]);
        emit_image(emit, name, (uint8_t)(c == 4 ? 0x14 : 0x0c), 0x2f, webp, len);
        snprintf(name, sizeof name, "webp-%s-eval-whole", kinds[k]);
        emit_image(emit, name, (uint8_t)(0x80 | (c == 4 ? 0x10 : 0x08)), 0x47, webp, len);
        snprintf(name, sizeof name, "webp-%s-cut", kinds[k]);
        emit_image(emit, name, 0x0c, 0x2f, webp, len * 2 / 3);
        webp[len / 2] ^= 0x5a;
        snprintf(name, sizeof name, "webp-%s-flipped", kinds[k]);
        emit_image(emit, name, 0x4c, 0x2f, webp, len);
        WebPFree(webp);
    }
#endif
    png_kind_seeds(emit);

    /* The formats decode_check.c walks (BMP, TGA, PNM, GIF, PSD): each
     * good, cut in half, its last byte dropped and a header field broken,
     * so the fuzzer starts inside every walker. */
    {
        enum { FW = 9, FH = 5 };
        static uint8_t f[6][1024];
        size_t fn[6] = {0};
        static const char *const fname[6] = {"bmp24", "bmp32", "tga", "tga-rle", "pgm16", "psd"};
        tu_fill(px, FW, FH, 4, 9);
        for (int i = 0; i < 4; i++) {
            membuf m = {f[i], 0, sizeof f[i]};
            stbi_write_tga_with_rle = i == 3;
            FUZZ_CHECK(i < 2 ? stbi_write_bmp_to_func(membuf_put, &m, FW, FH, 3 + i, px)
                             : stbi_write_tga_to_func(membuf_put, &m, FW, FH, 3 + (i & 1), px));
            fn[i] = m.n;
        }
        fn[4] = (size_t)snprintf((char *)f[4], 32, "P5\n%d %d\n65535\n", FW, FH);
        memcpy(f[4] + fn[4], px, 2 * FW * FH);
        fn[4] += 2 * FW * FH;
        static const uint8_t psd[26] = {'8', 'B', 'P', 'S', 0, 1, 0, 0, 0, 0, 0, 0, 0, 3,
                                        0, 0, 0, FH, 0, 0, 0, FW, 0, 8, 0, 3};
        memcpy(f[5], psd, 26);
        memset(f[5] + 26, 0, 14); /* three empty sections, compression 0 */
        memcpy(f[5] + 40, px, 3 * FW * FH);
        fn[5] = 40 + 3 * FW * FH;
        /* the 1x1 GIF everyone uses, and with its frame twice */
        static const uint8_t gif[] = "GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00"
                                     "\x21\xf9\x04\x01\x00\x00\x00\x00"
                                     "\x2c\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02\x44\x01\x00"
                                     "\x2c\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02\x44\x01\x00"
                                     "\x3b";
        for (int i = 0; i < 7; i++) {
            const uint8_t *p = i < 6 ? f[i] : gif;
            size_t n = i < 6 ? fn[i] : sizeof gif - 1;
            const char *name = i < 6 ? fname[i] : "gif";
            uint8_t bad[1024];
            char nm[64];
            for (int m = 0; m < (i == 6 ? 2 : 1); m++) { /* strict; lenient for GIF's untidy */
                uint8_t mode = (uint8_t)(0x09 | m << 6);
                snprintf(nm, sizeof nm, "%s%s", name, m ? "-lenient" : "");
                emit_image(emit, nm, mode, 0x22, p, n);
                snprintf(nm, sizeof nm, "%s-half%s", name, m ? "-lenient" : "");
                emit_image(emit, nm, mode, 0x22, p, n / 2);
                snprintf(nm, sizeof nm, "%s-last-byte-dropped%s", name, m ? "-lenient" : "");
                emit_image(emit, nm, mode, 0x22, p, n - 1);
                /* a header field broken: bfOffBits, TGA height, garbage
                 * after maxval, PSD channels, GIF frame 0 width */
                static const size_t at[7] = {10, 10, 14, 14, 11, 13, 32};
                memcpy(bad, p, n);
                bad[at[i]] = i == 4 ? 'x' : (uint8_t)(bad[at[i]] ^ 0xff);
                if (i == 6)
                    bad[at[i]] = 0;
                snprintf(nm, sizeof nm, "%s-header%s", name, m ? "-lenient" : "");
                emit_image(emit, nm, mode, 0x22, bad, n);
            }
        }
    }
}
