/* A segmentation mask cropped and flipped with its image (mask.h): the
 * PNG's stored samples, decoded by libspng, then PIL's nearest neighbour
 * through a column and a row table made once per call. Nearest, never a
 * filter, because a mask's values are class ids: a blend of two ids is
 * a third class, not an edge.
 *
 * The sampling rule is Pillow's (9.4, as installed here), so a mask
 * lines up with what PIL makes of it. Image.resize(size, NEAREST, box)
 * reaches _resize() in src/_imaging.c, which parses the box as C floats
 * ("(ii)|i(ffff)") and, for NEAREST, sets
 *     a[0] = (double)(box[2] - box[0]) / xsize;  a[2] = box[0];
 * (the difference in float; a[4], a[5] the same for y), then
 * ImagingTransform -> ImagingTransformAffine -> ImagingScaleAffine
 * (src/libImaging/Geometry.c), which tabulates the columns as
 *     xo = a[2] + a[0] * 0.5;
 *     for (x = x0; x < x1; x++) { xin = COORD(xo); ...; xo += a[0]; }
 * and the rows the same way (yo = a[5] + a[4] * 0.5; yo += a[4]), with
 * COORD(v) = v < 0 ? -1 : (int)v: a running sum in double, truncated.
 * pil_axis() below is that loop. (A box of integer edges whose size is
 * the output's takes ImagingCrop instead: the same pixels.) Where PIL
 * leaves a pixel at 0 (a sample outside the image, which a box inside
 * the image can reach only by the running sum's rounding) the nearest
 * edge pixel is taken here instead, so every output value is one of the
 * mask's; a box outside the image, which PIL refuses, is clamped to it.
 * ImageOps.mirror is the column table reversed.
 *
 * Memory is bounded by the image: the mask must be img_w x img_h before a
 * row is inflated, and ancillary chunks (text, ICC, EXIF, which libspng
 * inflates into its cache) are capped by spng_set_chunk_limits. The
 * whole file is read, on to IEND: every chunk's CRC is checked, the
 * Adler-32 where the deflate stream ends with the last row (libspng
 * inflates no further: deflate data past the rows, a bomb, is skipped,
 * under its chunk's CRC), and a file cut short anywhere is refused. A
 * mask has no crop-sized shortcut worth a damaged class map. */
#include "mask.h"

#include "decode_formats.h"
#include "grow.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#if GF_HAVE_SPNG
#include <spng.h>
#endif

void gf__mask_scratch_free(gf__mask_scratch *s)
{
    if (!s)
        return;
    free(s->buf);
    s->buf = NULL;
    s->cap = 0;
}

#if GF_HAVE_SPNG

/* out entries: the source index each output column (or row) of the box
 * [lo, lo + len) takes, reversed when mirror. Pillow's ImagingScaleAffine
 * loop (see the top): the edges as floats, the step from their float
 * difference, a running sum from the first centre, truncated. */
static void pil_axis(double lo, double len, int src, int out, int mirror, int32_t *tab)
{
    /* Clamped to the image first (NaN to 0), which PIL asks of the box:
     * the conversions to float and int below stay defined. */
    double d0 = lo >= 0.0 ? (lo <= src ? lo : src) : 0.0;
    double hi = lo + len;
    double d1 = hi >= d0 ? (hi <= src ? hi : src) : d0;
    float b0 = (float)d0, b1 = (float)d1;
    float span = b1 - b0; /* in float, as box[2] - box[0] in _resize() */
    double a = (double)span / out;
    double o = (double)b0 + a * 0.5;
    for (int i = 0; i < out; i++, o += a) {
        int32_t v = o < (double)src ? (int32_t)o : src - 1; /* o >= 0 */
        tab[mirror ? out - 1 - i : i] = v;
    }
}

static const char *const refuse_tail = "; a mask is 8-bit grey or palette (class ids)";

/* libspng's error e, worded. */
static int spng_fail(int e, char *why, size_t why_len)
{
    if (e == SPNG_EMEM) {
        gf__why(why, why_len, "mask: out of memory in libspng");
        return GF_ENOMEM;
    }
    if (e == SPNG_IO_EOF || e == SPNG_EOF || e == SPNG_IO_ERROR)
        gf__why(why, why_len, "mask: PNG cut short (libspng: %s)", spng_strerror(e));
    else
        gf__why(why, why_len, "mask: damaged PNG (libspng: %s)", spng_strerror(e));
    return GF_ECORRUPT;
}

int gf__mask_crop(gf__mask_scratch *s, const uint8_t *png, size_t n, int img_w, int img_h,
                  const gf__crop *c, int out_w, int out_h, uint8_t *dst, char *why,
                  size_t why_len)
{
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (!s || !c || !dst || (!png && n) || img_w < 1 || img_h < 1 || out_w < 1 || out_h < 1) {
        gf__why(why, why_len, "mask: invalid argument");
        return GF_EINVAL;
    }
    if (n < 8 || memcmp(png, sig, 8) != 0) {
        gf__why(why, why_len, "mask: not a PNG");
        return GF_EFORMAT;
    }
    spng_ctx *ctx = spng_ctx_new(0);
    if (!ctx) {
        gf__why(why, why_len, "mask: out of memory for libspng");
        return GF_ENOMEM;
    }
    int rc = 0;
    /* the cache for text, ICC and EXIF chunks: a mask needs none of them */
    int e = spng_set_chunk_limits(ctx, 1u << 20, 4u << 20);
    if (!e)
        e = spng_set_png_buffer(ctx, png, n);
    struct spng_ihdr ih;
    if (!e)
        e = spng_get_ihdr(ctx, &ih);
    if (e) {
        rc = spng_fail(e, why, why_len);
        goto out;
    }
    const char *kind = NULL;
    switch (ih.color_type) {
    case SPNG_COLOR_TYPE_GRAYSCALE:
        if (ih.bit_depth != 8)
            kind = ih.bit_depth == 16 ? "16-bit grey" : "grey below 8 bits";
        break;
    case SPNG_COLOR_TYPE_INDEXED:
        break; /* 1, 2, 4 or 8 bits: the indices */
    case SPNG_COLOR_TYPE_TRUECOLOR:
        kind = "RGB";
        break;
    case SPNG_COLOR_TYPE_GRAYSCALE_ALPHA:
        kind = "grey+alpha";
        break;
    default:
        kind = "RGBA";
        break;
    }
    if (kind) {
        gf__why(why, why_len, "mask: %s PNG%s", kind, refuse_tail);
        rc = GF_EFORMAT;
        goto out;
    }
    if (ih.width != (uint32_t)img_w || ih.height != (uint32_t)img_h) {
        gf__why(why, why_len, "mask: %" PRIu32 "x%" PRIu32 " PNG for a %dx%d image; a mask is its "
                "image's size", ih.width, ih.height, img_w, img_h);
        rc = GF_ECORRUPT;
        goto out;
    }
    size_t img_bytes;
    if ((e = spng_decoded_image_size(ctx, SPNG_FMT_PNG, &img_bytes))) {
        rc = spng_fail(e, why, why_len);
        goto out;
    }
    size_t rowbytes = img_bytes / (size_t)img_h;
    /* the tables (int32), then the mask as stored: packed below 8 bits */
    size_t tabs = ((size_t)out_w + (size_t)out_h) * sizeof(int32_t);
    size_t at = (tabs + 63) & ~(size_t)63;
    if (at < tabs || img_bytes > SIZE_MAX - at ||
        GF__GROW(&s->buf, &s->cap, at + img_bytes, 4096)) {
        gf__why(why, why_len, "mask: out of memory for a %dx%d mask", img_w, img_h);
        rc = GF_ENOMEM;
        goto out;
    }
    int32_t *cols = (int32_t *)(void *)s->buf, *rows = cols + out_w;
    uint8_t *img = s->buf + at;
    if (ih.bit_depth < 8) /* libspng ORs packed samples into place (Adam7) */
        memset(img, 0, img_bytes);
    if ((e = spng_decode_image(ctx, img, img_bytes, SPNG_FMT_PNG, 0)) ||
        (e = spng_decode_chunks(ctx))) { /* on to IEND: the last CRCs */
        rc = spng_fail(e, why, why_len);
        goto out;
    }
    if (gf__png_truncated(png, n)) { /* libspng stops at IEND's type */
        gf__why(why, why_len, "mask: PNG cut short (the chunks end before IEND's CRC)");
        rc = GF_ECORRUPT;
        goto out;
    }
    pil_axis(c->x, c->w, img_w, out_w, c->flip != 0, cols);
    pil_axis(c->y, c->h, img_h, out_h, 0, rows);
    int depth = ih.bit_depth;
    for (int oy = 0; oy < out_h; oy++) {
        const uint8_t *r = img + rowbytes * (size_t)rows[oy];
        uint8_t *o = dst + (size_t)out_w * oy;
        if (depth == 8) {
            for (int ox = 0; ox < out_w; ox++)
                o[ox] = r[cols[ox]];
        } else {
            unsigned mask = (1u << depth) - 1;
            for (int ox = 0; ox < out_w; ox++) {
                size_t bit = (size_t)cols[ox] * (size_t)depth;
                o[ox] = (uint8_t)((r[bit >> 3] >> (8 - depth - (int)(bit & 7))) & mask);
            }
        }
    }
out:
    spng_ctx_free(ctx);
    return rc;
}

#else /* no libspng */

int gf__mask_crop(gf__mask_scratch *s, const uint8_t *png, size_t n, int img_w, int img_h,
                  const gf__crop *c, int out_w, int out_h, uint8_t *dst, char *why,
                  size_t why_len)
{
    (void)s, (void)png, (void)n, (void)img_w, (void)img_h, (void)c, (void)out_w, (void)out_h;
    (void)dst;
    gf__why(why, why_len, "mask: this build has no PNG decoder (libspng)");
    return GF_EFORMAT;
}

#endif

/* The public door for tools (gpufeed prepare): the whole mask, no flip,
 * with a scratch of its own. */
int gf_mask_resize(const void *png, size_t len, int width, int height, int out_w, int out_h,
                   uint8_t *out, char *why, size_t why_len)
{
    gf__mask_scratch s = {0};
    gf__crop c = {0, 0, width, height, 0};
    int rc = gf__mask_crop(&s, png, len, width, height, &c, out_w, out_h, out, why, why_len);
    gf__mask_scratch_free(&s);
    return rc;
}
