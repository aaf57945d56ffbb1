/* Segmentation masks (src/mask.c): grey and palette PNGs (palette colours
 * unlike their indices: the output must be the indices) at 8, 4, 2 and 1
 * bits, cropped and flipped as the image is, by nearest neighbour. Every
 * output value must be one of the mask's, and every output pixel-equal
 * to a reference written here from Pillow 9.4's own code (_resize() in
 * src/_imaging.c, ImagingScaleAffine in src/libImaging/Geometry.c, line
 * for line: the fill of 0 outside included, so a divergence shows);
 * tests/mask_pil.py holds the same to PIL itself. Then the refusals, each
 * by its message: RGB, RGBA, grey+alpha, 16-bit, another size, truncation
 * at every length, a damaged byte, not a PNG. */
#include "config.h"
#include "mask.h"
#include "testutil.h"
#include "run_suite.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#if GF_HAVE_SPNG
#include <spng.h>
#include <zlib.h> /* libspng's: a zTXt bomb */
#endif

enum { CT_GREY = 0, CT_RGB = 2, CT_PAL = 3, CT_GA = 4, CT_RGBA = 6 };

static gf__mask_scratch scratch;

static void teardown(void)
{
    gf__mask_scratch_free(&scratch);
}

#if GF_HAVE_SPNG

static uint32_t rng_state = 12345;
static uint32_t rnd(void)
{
    uint32_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return rng_state = x;
}
static double rnd01(void)
{
    return (rnd() >> 8) / 16777216.0;
}

/* w x h samples of `depth` bits (one a byte in v) packed as PNG rows. */
static uint8_t *pack(const uint8_t *v, int w, int h, int depth, size_t *rowbytes)
{
    size_t rb = ((size_t)w * depth + 7) / 8;
    uint8_t *raw = calloc(rb * h, 1);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            size_t bit = (size_t)x * depth;
            raw[rb * y + bit / 8] |= (uint8_t)(v[(size_t)w * y + x] << (8 - depth - bit % 8));
        }
    *rowbytes = rb;
    return raw;
}

/* A palette of n colours that are not their indices (nor any index's). */
static void palette(uint8_t *plte, int n)
{
    for (int i = 0; i < n; i++) {
        plte[3 * i] = (uint8_t)(255 - i);
        plte[3 * i + 1] = (uint8_t)(37 * i + 101);
        plte[3 * i + 2] = (uint8_t)(200 ^ i);
    }
}

/* A mask PNG of values v (grey 8-bit, or a palette of 2^depth entries). */
static uint8_t *mask_png(const uint8_t *v, int w, int h, int ct, int depth, size_t *len)
{
    size_t rb;
    uint8_t *raw = pack(v, w, h, depth, &rb);
    uint8_t plte[768];
    int n = 1 << depth;
    palette(plte, n);
    uint8_t trns[3] = {0, 128, 255};
    uint8_t *png = tu_png_raw(w, h, depth, ct, raw, rb, ct == CT_PAL ? plte : NULL, n,
                              ct == CT_PAL ? trns : NULL, 3, len);
    free(raw);
    return png;
}

/* Random values drawn from `set` (k entries). */
static uint8_t *values(int w, int h, const uint8_t *set, int k)
{
    uint8_t *v = malloc((size_t)w * h);
    for (int i = 0; i < w * h; i++)
        v[i] = set[rnd() % (unsigned)k];
    return v;
}

/* Pillow 9.4's resize(NEAREST, box) then ImageOps.mirror, from its code. */
#define COORD(v) ((v) < 0.0 ? -1 : ((int)(v)))
static void pil_ref(const uint8_t *in, int W, int H, const gf__crop *c, int xsize, int ysize,
                    uint8_t *out)
{
    float box[4] = {(float)c->x, (float)c->y, (float)(c->x + c->w), (float)(c->y + c->h)};
    if (box[0] - (int)box[0] == 0 && box[2] - box[0] == xsize && box[1] - (int)box[1] == 0 &&
        box[3] - box[1] == ysize) { /* ImagingCrop */
        for (int y = 0; y < ysize; y++)
            memcpy(out + (size_t)xsize * y, in + (size_t)W * ((int)box[1] + y) + (int)box[0],
                   (size_t)xsize);
    } else {
        double a[6] = {0};
        a[0] = (double)(box[2] - box[0]) / xsize;
        a[4] = (double)(box[3] - box[1]) / ysize;
        a[2] = box[0];
        a[5] = box[1];
        memset(out, 0, (size_t)xsize * ysize); /* fill */
        int *xintab = calloc((size_t)xsize, sizeof(int));
        double xo = a[2] + a[0] * 0.5, yo = a[5] + a[4] * 0.5;
        int xmin = xsize, xmax = 0;
        for (int x = 0; x < xsize; x++) {
            int xin = COORD(xo);
            if (xin >= 0 && xin < W) {
                xmax = x + 1;
                if (x < xmin)
                    xmin = x;
                xintab[x] = xin;
            }
            xo += a[0];
        }
        for (int y = 0; y < ysize; y++) {
            int yi = COORD(yo);
            if (yi >= 0 && yi < H)
                for (int x = xmin; x < xmax; x++)
                    out[(size_t)xsize * y + x] = in[(size_t)W * yi + xintab[x]];
            yo += a[4];
        }
        free(xintab);
    }
    if (c->flip) /* ImageOps.mirror */
        for (int y = 0; y < ysize; y++)
            for (int x = 0; x < xsize / 2; x++) {
                uint8_t *r = out + (size_t)xsize * y, t = r[x];
                r[x] = r[xsize - 1 - x];
                r[xsize - 1 - x] = t;
            }
}

/* Crop c of the mask png (values v) to ow x oh: no error, every value one
 * of v's, and equal to the reference. */
static void check_crop(const uint8_t *png, size_t len, const uint8_t *v, int W, int H,
                       const gf__crop *c, int ow, int oh)
{
    uint8_t *got = malloc((size_t)ow * oh), *want = malloc((size_t)ow * oh);
    char why[256] = "";
    int rc = gf__mask_crop(&scratch, png, len, W, H, c, ow, oh, got, why, sizeof why);
    ck_assert_msg(rc == 0, "rc %d: %s", rc, why);
    int present[256] = {0};
    for (int i = 0; i < W * H; i++)
        present[v[i]] = 1;
    int i = 0; /* one assertion a check: Check marks a point at each */
    while (i < ow * oh && present[got[i]])
        i++;
    ck_assert_msg(i == ow * oh, "output %d is %u, not a value of the mask (crop %.17g %.17g "
                  "%.17g %.17g flip %d to %dx%d)", i, got[i], c->x, c->y, c->w, c->h, c->flip,
                  ow, oh);
    pil_ref(v, W, H, c, ow, oh, want);
    for (i = 0; i < ow * oh && got[i] == want[i];)
        i++;
    ck_assert_msg(i == ow * oh, "pixel (%d, %d): %u, PIL %u (crop %.17g %.17g %.17g %.17g "
                  "flip %d of %dx%d to %dx%d)", i % ow, i / ow, got[i], want[i], c->x, c->y, c->w,
                  c->h, c->flip, W, H, ow, oh);
    free(got);
    free(want);
}

static const uint8_t some_ids[] = {3, 17, 42, 99, 200, 255};

START_TEST(grey_identity_is_the_mask)
{
    int W = 13, H = 9;
    uint8_t *v = values(W, H, some_ids, 6);
    size_t len;
    uint8_t *png = mask_png(v, W, H, CT_GREY, 8, &len);
    uint8_t out[13 * 9];
    gf__crop c = {0, 0, W, H, 0};
    char why[256];
    ck_assert_int_eq(gf__mask_crop(&scratch, png, len, W, H, &c, W, H, out, why, sizeof why), 0);
    ck_assert(memcmp(out, v, sizeof out) == 0);
    c.flip = 1;
    ck_assert_int_eq(gf__mask_crop(&scratch, png, len, W, H, &c, W, H, out, why, sizeof why), 0);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            ck_assert_int_eq(out[W * y + x], v[W * y + W - 1 - x]);
    free(png);
    free(v);
}
END_TEST

/* Palette masks: the indices come out, never the colours, at every depth
 * (odd widths: rows end mid-byte below 8 bits). */
START_TEST(palette_gives_indices_at_every_depth)
{
    static const int depths[] = {8, 4, 2, 1};
    for (int d = 0; d < 4; d++) {
        int depth = depths[d], W = 11 + d, H = 7;
        uint8_t set[256];
        int k = 1 << depth;
        for (int i = 0; i < k; i++)
            set[i] = (uint8_t)i;
        uint8_t *v = values(W, H, set, k);
        size_t len;
        uint8_t *png = mask_png(v, W, H, CT_PAL, depth, &len);
        uint8_t out[14 * 7];
        gf__crop c = {0, 0, W, H, 0};
        char why[256];
        int rc = gf__mask_crop(&scratch, png, len, W, H, &c, W, H, out, why, sizeof why);
        ck_assert_msg(rc == 0, "%d bits: %s", depth, why);
        ck_assert_msg(memcmp(out, v, (size_t)W * H) == 0, "%d bits: not the indices", depth);
        free(png);
        free(v);
    }
}
END_TEST

START_TEST(integer_crops_are_the_block)
{
    int W = 20, H = 15;
    for (int ct = 0; ct < 2; ct++) {
        uint8_t set[16];
        for (int i = 0; i < 16; i++)
            set[i] = (uint8_t)(i + 1) % 16; /* 0 too, for the palette */
        uint8_t *v = ct ? values(W, H, set, 16) : values(W, H, some_ids, 6);
        size_t len;
        uint8_t *png = mask_png(v, W, H, ct ? CT_PAL : CT_GREY, ct ? 4 : 8, &len);
        for (int flip = 0; flip < 2; flip++) {
            gf__crop c = {3, 2, 9, 11, flip};
            uint8_t out[9 * 11];
            char why[256];
            int rc = gf__mask_crop(&scratch, png, len, W, H, &c, 9, 11, out, why, sizeof why);
            ck_assert_msg(rc == 0, "%s", why);
            for (int y = 0; y < 11; y++)
                for (int x = 0; x < 9; x++)
                    ck_assert_int_eq(out[9 * y + (flip ? 8 - x : x)], v[W * (2 + y) + 3 + x]);
            check_crop(png, len, v, W, H, &c, 9, 11);
            /* integer boxes to other sizes: 2x down, 3x up, the box at the edge */
            check_crop(png, len, v, W, H, &c, 4, 5);
            check_crop(png, len, v, W, H, &c, 27, 33);
            gf__crop e = {11, 4, 9, 11, flip};
            check_crop(png, len, v, W, H, &e, 9, 11);
            check_crop(png, len, v, W, H, &e, 7, 31);
        }
        free(png);
        free(v);
    }
}
END_TEST

/* The crops the loader makes: eval's centre crops (fractional boxes) and
 * train's random resized crops with flips, up- and downsampled. */
START_TEST(planned_crops_match_pil)
{
    static const int sizes[][2] = {{37, 29}, {64, 48}, {17, 90}, {200, 150}, {5, 5}};
    static const int outs[][2] = {{16, 16}, {24, 20}, {224, 224}, {7, 3}, {1, 1}};
    for (int s = 0; s < 5; s++) {
        int W = sizes[s][0], H = sizes[s][1];
        uint8_t set[16];
        for (int i = 0; i < 16; i++)
            set[i] = (uint8_t)(i + 1);
        uint8_t *v = values(W, H, set, s % 2 ? 15 : 6);
        size_t len;
        uint8_t *png = mask_png(v, W, H, s % 2 ? CT_PAL : CT_GREY, s % 2 ? 4 : 8, &len);
        for (int o = 0; o < 5; o++) {
            gf__transform t;
            memset(&t, 0, sizeof t);
            t.channels = 3;
            t.out_w = outs[o][0];
            t.out_h = outs[o][1];
            t.kind = GF_TRANSFORM_EVAL;
            t.crop_fraction = 0.875f;
            gf__crop c;
            gf__crop_plan(&t, W, H, 0, &c);
            check_crop(png, len, v, W, H, &c, t.out_w, t.out_h);
            c.flip = 1;
            check_crop(png, len, v, W, H, &c, t.out_w, t.out_h);
            t.kind = GF_TRANSFORM_TRAIN;
            t.scale_min = 0.08f;
            t.scale_max = 1.0f;
            t.ratio_min = 3.0f / 4;
            t.ratio_max = 4.0f / 3;
            t.flip_prob = 0.5f;
            for (uint64_t i = 0; i < 40; i++) {
                gf__crop_plan(&t, W, H, gf__sample_key(7, 0, i), &c);
                check_crop(png, len, v, W, H, &c, t.out_w, t.out_h);
            }
        }
        free(png);
        free(v);
    }
}
END_TEST

/* Random boxes, fractional and integer, anywhere in the image (to its
 * right and bottom edges), random output sizes. */
START_TEST(random_boxes_match_pil)
{
    int W = 41, H = 33;
    uint8_t set[4] = {1, 2, 3, 0};
    for (int ct = 0; ct < 2; ct++) {
        uint8_t *v = ct ? values(W, H, set, 4) : values(W, H, some_ids, 6);
        size_t len;
        uint8_t *png = mask_png(v, W, H, ct ? CT_PAL : CT_GREY, ct ? 2 : 8, &len);
        for (int i = 0; i < 600; i++) {
            gf__crop c;
            if (i % 3 == 0) { /* integer */
                int x0 = (int)(rnd() % W), y0 = (int)(rnd() % H);
                c.x = x0;
                c.y = y0;
                c.w = 1 + rnd() % (unsigned)(W - x0);
                c.h = 1 + rnd() % (unsigned)(H - y0);
            } else {
                double x0 = rnd01() * W, x1 = rnd01() * W, y0 = rnd01() * H, y1 = rnd01() * H;
                if (i % 7 == 0)
                    x1 = W, y1 = H; /* to the edge */
                c.x = x0 < x1 ? x0 : x1;
                c.w = x0 < x1 ? x1 - x0 : x0 - x1;
                c.y = y0 < y1 ? y0 : y1;
                c.h = y0 < y1 ? y1 - y0 : y0 - y1;
                if (c.x + c.w > W || c.y + c.h > H)
                    continue; /* PIL refuses a box past the image */
            }
            c.flip = (int)(rnd() & 1);
            int ow = 1 + (int)(rnd() % 96), oh = 1 + (int)(rnd() % 96);
            check_crop(png, len, v, W, H, &c, ow, oh);
        }
        free(png);
        free(v);
    }
}
END_TEST

/* An interlaced (Adam7) palette mask, made by libspng's encoder. */
START_TEST(interlaced_palette_mask)
{
    int W = 23, H = 19;
    uint8_t set[4] = {0, 1, 2, 3};
    uint8_t *v = values(W, H, set, 4);
    size_t rb;
    uint8_t *raw = pack(v, W, H, 2, &rb);
    spng_ctx *e = spng_ctx_new(SPNG_CTX_ENCODER);
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(spng_set_option(e, SPNG_ENCODE_TO_BUFFER, 1), 0);
    struct spng_ihdr ih = {.width = (uint32_t)W, .height = (uint32_t)H, .bit_depth = 2,
                           .color_type = SPNG_COLOR_TYPE_INDEXED, .interlace_method = 1};
    ck_assert_int_eq(spng_set_ihdr(e, &ih), 0);
    struct spng_plte pl = {.n_entries = 4};
    for (int i = 0; i < 4; i++)
        pl.entries[i] = (struct spng_plte_entry){(uint8_t)(250 - i), 77, (uint8_t)(9 * i), 255};
    ck_assert_int_eq(spng_set_plte(e, &pl), 0);
    ck_assert_int_eq(spng_encode_image(e, raw, rb * H, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE), 0);
    size_t len;
    int err;
    uint8_t *png = spng_get_png_buffer(e, &len, &err);
    ck_assert_ptr_nonnull(png);
    spng_ctx_free(e);
    ck_assert_int_eq(png[12 + 4 + 8 + 4], 1); /* IHDR says interlaced */
    gf__crop c = {0, 0, W, H, 0};
    check_crop(png, len, v, W, H, &c, W, H);
    gf__crop f = {2.5, 1.25, 17.75, 16.5, 1};
    check_crop(png, len, v, W, H, &f, 40, 9);
    free(png);
    free(raw);
    free(v);
}
END_TEST

/* The scratch grows across calls of other sizes, and shrinks never. */
START_TEST(scratch_is_reused_across_sizes)
{
    static const int sizes[][2] = {{8, 8}, {300, 200}, {3, 2}, {64, 500}};
    for (int s = 0; s < 4; s++) {
        int W = sizes[s][0], H = sizes[s][1];
        uint8_t *v = values(W, H, some_ids, 6);
        size_t len;
        uint8_t *png = mask_png(v, W, H, CT_GREY, 8, &len);
        gf__crop c = {0.5, 0.25, W - 0.75, H - 0.5, s & 1};
        check_crop(png, len, v, W, H, &c, 2 * W, H / 2 + 1);
        free(png);
        free(v);
    }
}
END_TEST

/* ---- refusals ---- */

static int crop_why(const uint8_t *png, size_t len, int W, int H, char *why, size_t why_len)
{
    gf__crop c = {0, 0, W, H, 0};
    uint8_t out[64];
    why[0] = 0;
    return gf__mask_crop(&scratch, png, len, W, H, &c, 8, 8, out, why, why_len);
}

START_TEST(colour_and_16_bit_pngs_are_refused_by_name)
{
    static const struct {
        int ct, depth, bytes; /* bytes a pixel (depth 16: 2 a sample) */
        const char *says;
    } cases[] = {
        {CT_RGB, 8, 3, "mask: RGB PNG; a mask is 8-bit grey or palette (class ids)"},
        {CT_RGBA, 8, 4, "mask: RGBA PNG; a mask is 8-bit grey or palette (class ids)"},
        {CT_GA, 8, 2, "mask: grey+alpha PNG; a mask is 8-bit grey or palette (class ids)"},
        {CT_GREY, 16, 2, "mask: 16-bit grey PNG; a mask is 8-bit grey or palette (class ids)"},
        {CT_RGB, 16, 6, "mask: RGB PNG"},
        {CT_GREY, 4, 1, "mask: grey below 8 bits PNG"},
    };
    int W = 8, H = 8;
    uint8_t raw[8 * 8 * 6];
    for (size_t i = 0; i < sizeof raw; i++)
        raw[i] = (uint8_t)(i * 7);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        size_t len;
        size_t rb = cases[k].depth == 4 ? 4 : (size_t)W * cases[k].bytes;
        uint8_t *png =
            tu_png_raw(W, H, cases[k].depth, cases[k].ct, raw, rb, NULL, 0, NULL, 0, &len);
        char why[256];
        ck_assert_int_eq(crop_why(png, len, W, H, why, sizeof why), GF_EFORMAT);
        ck_assert_msg(strstr(why, cases[k].says), "case %zu: \"%s\"", k, why);
        free(png);
    }
}
END_TEST

START_TEST(another_size_is_refused_naming_both)
{
    int W = 13, H = 9;
    uint8_t *v = values(W, H, some_ids, 6);
    size_t len;
    uint8_t *png = mask_png(v, W, H, CT_GREY, 8, &len);
    char why[256];
    ck_assert_int_eq(crop_why(png, len, W + 1, H, why, sizeof why), GF_ECORRUPT);
    ck_assert_msg(strstr(why, "mask: 13x9 PNG for a 14x9 image"), "\"%s\"", why);
    ck_assert_int_eq(crop_why(png, len, W, H - 1, why, sizeof why), GF_ECORRUPT);
    ck_assert_msg(strstr(why, "mask: 13x9 PNG for a 13x8 image"), "\"%s\"", why);
    ck_assert_int_eq(crop_why(png, len, 4000, 3000, why, sizeof why), GF_ECORRUPT);
    ck_assert_msg(strstr(why, "13x9 PNG for a 4000x3000 image"), "\"%s\"", why);
    ck_assert_int_eq(crop_why(png, len, 1, 1, why, sizeof why), GF_ECORRUPT);
    ck_assert_msg(strstr(why, "13x9 PNG for a 1x1 image"), "\"%s\"", why);
    free(png);
    free(v);
}
END_TEST

START_TEST(truncation_at_every_length_is_refused)
{
    int W = 16, H = 12;
    for (int ct = 0; ct < 2; ct++) {
        uint8_t set[4] = {1, 2, 3, 0};
        uint8_t *v = ct ? values(W, H, set, 4) : values(W, H, some_ids, 6);
        size_t len;
        uint8_t *png = mask_png(v, W, H, ct ? CT_PAL : CT_GREY, ct ? 4 : 8, &len);
        size_t spng_named = 0;
        for (size_t n = 0; n < len; n++) {
            uint8_t *cut = malloc(n ? n : 1); /* its own allocation: ASan sees a read past */
            memcpy(cut, png, n);
            char why[256];
            int rc = crop_why(cut, n, W, H, why, sizeof why);
            if (n < 8) {
                ck_assert_int_eq(rc, GF_EFORMAT);
                ck_assert_msg(strcmp(why, "mask: not a PNG") == 0, "%zu bytes: \"%s\"", n, why);
            } else {
                ck_assert_msg(rc == GF_ECORRUPT, "%zu of %zu bytes: rc %d \"%s\"", n, len, rc, why);
                ck_assert_msg(strstr(why, "mask: PNG cut short ("), "%zu of %zu bytes: \"%s\"", n,
                              len, why);
                spng_named += strstr(why, "(libspng: ") != NULL;
            }
            free(cut);
        }
        /* libspng names all but IEND's last bytes, which it does not read */
        ck_assert_msg(spng_named + 4 + 8 == len, "%zu of %zu named by libspng", spng_named, len);
        char why[256];
        ck_assert_int_eq(crop_why(png, len, W, H, why, sizeof why), 0);
        free(png);
        free(v);
    }
}
END_TEST

START_TEST(a_damaged_byte_is_refused_with_libspngs_reason)
{
    int W = 16, H = 12;
    uint8_t *v = values(W, H, some_ids, 6);
    size_t len;
    uint8_t *png = mask_png(v, W, H, CT_GREY, 8, &len);
    char why[256];
    /* the IDAT's CRC (the chunk before IEND's 12 bytes) */
    png[len - 12 - 1] ^= 0x40;
    ck_assert_int_eq(crop_why(png, len, W, H, why, sizeof why), GF_ECORRUPT);
    ck_assert_msg(strstr(why, "mask: damaged PNG (libspng: invalid chunk checksum)"), "%s", why);
    png[len - 12 - 1] ^= 0x40;
    ck_assert_int_eq(crop_why(png, len, W, H, why, sizeof why), 0);
    /* a byte of the IDAT's deflate data: libspng inflates before the CRC */
    png[8 + 25 + 8 + 3] ^= 0x40;
    ck_assert_int_eq(crop_why(png, len, W, H, why, sizeof why), GF_ECORRUPT);
    ck_assert_msg(strstr(why, "mask: damaged PNG (libspng: "), "\"%s\"", why);
    png[8 + 25 + 8 + 3] ^= 0x40;
    /* the Adler-32 (the IDAT's last 4 bytes), its CRC made right */
    png[len - 12 - 4 - 1] ^= 0x10;
    tu_png_fix_crc(png, 8 + 25);
    ck_assert_int_eq(crop_why(png, len, W, H, why, sizeof why), GF_ECORRUPT);
    ck_assert_msg(strstr(why, "mask: damaged PNG (libspng: IDAT stream error)"), "%s", why);
    /* the IHDR's CRC */
    png[8 + 25 - 1] ^= 1;
    ck_assert_int_eq(crop_why(png, len, W, H, why, sizeof why), GF_ECORRUPT);
    ck_assert_msg(strstr(why, "mask: damaged PNG (libspng: invalid chunk checksum)"), "%s", why);
    free(png);
    free(v);
}
END_TEST

START_TEST(not_a_png_is_refused)
{
    int W = 8, H = 8;
    uint8_t px[8 * 8 * 3] = {0};
    size_t len;
    uint8_t *jpg = tu_jpg_mem(px, W, H, 3, 90, &len);
    char why[256];
    ck_assert_int_eq(crop_why(jpg, len, W, H, why, sizeof why), GF_EFORMAT);
    ck_assert_str_eq(why, "mask: not a PNG");
    free(jpg);
    const uint8_t *text = (const uint8_t *)"hello, world";
    ck_assert_int_eq(crop_why(text, 12, W, H, why, sizeof why), GF_EFORMAT);
    ck_assert_str_eq(why, "mask: not a PNG");
    ck_assert_int_eq(crop_why(NULL, 0, W, H, why, sizeof why), GF_EFORMAT);
    ck_assert_str_eq(why, "mask: not a PNG");
}
END_TEST

/* A zTXt chunk of `inflated` zero bytes (about a thousandth of that in
 * the file), before the IDAT of a W x H grey mask of zeros. */
static uint8_t *ztxt_bomb(int W, int H, size_t inflated, size_t *len)
{
    uint8_t *zero = calloc((size_t)W * H, 1);
    uint8_t *png = tu_png_raw(W, H, 8, CT_GREY, zero, (size_t)W, NULL, 0, NULL, 0, len);
    z_stream z = {0};
    ck_assert_int_eq(deflateInit(&z, 9), Z_OK);
    size_t cap = inflated / 200 + 4096, at = 8 + 25 + 8;
    uint8_t *out = malloc(*len + cap + 12), in[65536] = {0};
    memcpy(out, png, 8 + 25); /* signature, IHDR */
    memcpy(out + at, "k\0\0", 3); /* keyword, its end, method 0 */
    z.next_out = out + at + 3;
    z.avail_out = (uInt)cap;
    for (size_t fed = 0; fed < inflated; fed += sizeof in) {
        z.next_in = in;
        z.avail_in = sizeof in;
        int e = deflate(&z, fed + sizeof in >= inflated ? Z_FINISH : Z_NO_FLUSH);
        ck_assert(e == Z_OK || e == Z_STREAM_END);
    }
    size_t n = 3 + z.total_out;
    deflateEnd(&z);
    uint8_t h[8] = {(uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n,
                    'z', 'T', 'X', 't'};
    memcpy(out + 33, h, 8);
    tu_png_fix_crc(out, 33);
    memcpy(out + at + n + 4, png + 33, *len - 33); /* IDAT, IEND */
    *len += 12 + n;
    free(png);
    free(zero);
    return out;
}

/* In a child: the peak RSS a crop of png adds (KiB), its code and why. */
static void bounded(const uint8_t *png, size_t len, int W, int H, long kib, const char *says)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        struct rusage a, b;
        getrusage(RUSAGE_SELF, &a);
        gf__crop c = {0, 0, W, H, 0};
        uint8_t out[64];
        char why[256] = "";
        int rc = gf__mask_crop(&scratch, png, len, W, H, &c, 8, 8, out, why, sizeof why);
        getrusage(RUSAGE_SELF, &b);
        long grew = b.ru_maxrss - a.ru_maxrss;
        int ok = grew < kib && (says ? rc != 0 && strstr(why, says) : rc == 0);
        if (!ok)
            fprintf(stderr, "rc %d \"%s\", peak RSS grew by %ld KiB\n", rc, why, grew);
        _exit(ok ? 0 : 1);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child failed: status %d", st);
}

/* Hostile masks cost bounded memory: a deflate bomb past the last row (a
 * 1x1 mask, 1 MB of deflate data inflating to 158 MB more: libspng
 * inflates no further than the row, which is whole, and checks the
 * chunk's CRC), a zTXt bomb (64 MiB of text: libspng's cache limit ends
 * it), and a header that claims 60000 x 60000 for a small image (refused
 * before a row). */
START_TEST(hostile_pngs_cost_bounded_memory)
{
    size_t len;
    uint8_t *png = tu_png_bomb(1u << 20, &len);
    bounded(png, len, 1, 1, 16 * 1024, NULL);
    free(png);
    png = ztxt_bomb(8, 8, (size_t)64 << 20, &len);
    ck_assert_uint_lt(len, 1u << 20);
    bounded(png, len, 8, 8, 16 * 1024, "mask: damaged PNG (libspng: reached chunk/cache limits)");
    free(png);
    png = ztxt_bomb(8, 8, 256u << 10, &len); /* the same chunk, under the limits: good */
    bounded(png, len, 8, 8, 16 * 1024, NULL);
    free(png);
    uint8_t zero[64] = {0};
    png = tu_png_raw(8, 8, 8, CT_GREY, zero, 8, NULL, 0, NULL, 0, &len);
    png[16] = png[20] = 0; /* 8 -> 60000 (0xea60) wide and high */
    png[17] = png[21] = 0;
    png[18] = png[22] = 0xea;
    png[19] = png[23] = 0x60;
    tu_png_fix_crc(png, 8);
    bounded(png, len, 8, 8, 16 * 1024, "mask: 60000x60000 PNG for a 8x8 image");
    free(png);
}
END_TEST

#else /* no libspng */

START_TEST(without_libspng_a_mask_is_refused)
{
    uint8_t v[4] = {1, 2, 3, 4}, out[4];
    size_t len;
    uint8_t *png = tu_png_raw(2, 2, 8, CT_GREY, v, 2, NULL, 0, NULL, 0, &len);
    gf__crop c = {0, 0, 2, 2, 0};
    char why[256];
    ck_assert_int_eq(gf__mask_crop(&scratch, png, len, 2, 2, &c, 2, 2, out, why, sizeof why),
                     GF_EFORMAT);
    ck_assert_str_eq(why, "mask: this build has no PNG decoder (libspng)");
    free(png);
}
END_TEST

#endif

static Suite *mask_suite(void)
{
    Suite *s = suite_create("mask");
    TCase *good = tcase_create("crops");
    tcase_add_checked_fixture(good, NULL, teardown);
    TCase *bad = tcase_create("refusals");
    tcase_add_checked_fixture(bad, NULL, teardown);
#if GF_HAVE_SPNG
    tcase_add_test(good, grey_identity_is_the_mask);
    tcase_add_test(good, palette_gives_indices_at_every_depth);
    tcase_add_test(good, integer_crops_are_the_block);
    tcase_add_test(good, planned_crops_match_pil);
    tcase_add_test(good, random_boxes_match_pil);
    tcase_add_test(good, interlaced_palette_mask);
    tcase_add_test(good, scratch_is_reused_across_sizes);
    tcase_add_test(bad, colour_and_16_bit_pngs_are_refused_by_name);
    tcase_add_test(bad, another_size_is_refused_naming_both);
    tcase_add_test(bad, truncation_at_every_length_is_refused);
    tcase_add_test(bad, a_damaged_byte_is_refused_with_libspngs_reason);
    tcase_add_test(bad, not_a_png_is_refused);
    tcase_add_test(bad, hostile_pngs_cost_bounded_memory);
#else
    tcase_add_test(bad, without_libspng_a_mask_is_refused);
#endif
    suite_add_tcase(s, good);
    suite_add_tcase(s, bad);
    return s;
}

int main(void)
{
    return tu_run_suite(mask_suite());
}
