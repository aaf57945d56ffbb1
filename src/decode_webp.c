/* WebP (lossy VP8, lossless VP8L, either with alpha) through libwebp, on
 * the decode threads; a call holds nothing between samples but the
 * decoder's scratch (d->buf). Compiled only where meson found libwebp
 * (GF_HAVE_WEBP).
 *
 * The RIFF size is checked against the data first: a file cut anywhere is
 * GF_ETRUNC before libwebp sees it, whatever the crop (libwebp decodes
 * only the rows a crop needs and so would not notice a cut below them).
 * Then the pixel limit from the header, the crop plan, and a decode of
 * the span the resampler reads (libwebp's cropping), straight into d->buf
 * as RGB, or RGBA when the image has alpha or the output wants four
 * channels.
 *
 * The cropped decode gives the pixels of a whole decode: lossless
 * trivially; lossy because libwebp decodes (and loop-filters) every
 * macroblock the crop depends on, and the one thing that differs at a
 * crop's edge, the fancy chroma upsampler (which mirrors chroma at the
 * first and last row and column it emits, and assumes an even first
 * column and row), is kept off the span by a one-pixel margin on every
 * side that is not the image's edge, with the top-left corner at even
 * coordinates. One exception, measured: libwebp 1.2.4 hands back a lossy
 * file's alpha plane (its ALPH chunk) wrong below a crop_top > 0 (the
 * plane's prediction filter restarts at the crop), so such files are
 * decoded from row 0; what the rows above cost is their colour
 * conversion, as VP8 reconstructs every macroblock above a crop anyway.
 *
 * libwebp has no warnings: a WebP decodes or fails, so LENIENT is STRICT.
 * Animated files are refused: their first frame is a sub-rectangle to be
 * composed on a canvas (libwebpdemux's job), not an image. */
#include "decode_formats.h"

#include "grow.h"

#include <string.h>
#include <webp/decode.h>

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

static uint32_t le24(const uint8_t *p)
{
    return (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

static int webp_status(VP8StatusCode st, char *why, size_t why_len)
{
    switch (st) {
    case VP8_STATUS_NOT_ENOUGH_DATA:
    case VP8_STATUS_SUSPENDED:
        /* the container holds all its bytes (check_container): the
         * bitstream runs past its chunk */
        gf__why(why, why_len, "WebP: premature end of data in the image chunk (truncated or corrupt)");
        return GF_ETRUNC;
    case VP8_STATUS_OUT_OF_MEMORY:
        gf__why(why, why_len, "WebP: out of memory (libwebp)");
        return GF_ENOMEM;
    case VP8_STATUS_UNSUPPORTED_FEATURE:
        gf__why(why, why_len, "WebP: unsupported feature (libwebp)");
        return GF_EFORMAT;
    case VP8_STATUS_INVALID_PARAM:
        gf__why(why, why_len, "WebP: corrupt data (libwebp: invalid parameter)");
        return GF_ECORRUPT;
    default:
        gf__why(why, why_len, "WebP: corrupt data (libwebp: bitstream error)");
        return GF_ECORRUPT;
    }
}

/* What the container says before libwebp parses it: a RIFF size past the
 * data is a cut file, and a VP8X canvas over the pixel limit is refused
 * here, with its size named (libwebp itself rejects a canvas of 2^32
 * pixels or more as a bitstream error, which would hide why). */
static int check_container(const uint8_t *p, size_t n, const gf__transform *t, char *why,
                           size_t why_len)
{
    if (n < 12 || (uint64_t)le32(p + 4) + 8 > n) {
        gf__why(why, why_len, "WebP: premature end of data (truncated?)");
        return GF_ETRUNC;
    }
    if (n >= 30 && memcmp(p + 12, "VP8X", 4) == 0 &&
        gf__too_big(t, F_WEBP, (uint64_t)le24(p + 24) + 1, (uint64_t)le24(p + 27) + 1, why,
                    why_len))
        return GF_ETOOBIG;
    return 0;
}

/* The decoded rectangle [x0, x1) x [y0, y1) holding span [lo, hi) of each
 * axis with the upsampler's margin (see the top of the file). */
static void margin(int lo, int hi, int n, int *a, int *b)
{
    *a = lo > 0 ? (lo - 1) & ~1 : 0;
    *b = hi < n ? hi + 1 : n;
}

int gf__decode_webp(gf__decoder *d, const uint8_t *data, size_t len, const gf__transform *t,
                    uint64_t key, uint8_t *dst, char *why, size_t why_len)
{
    int rc = check_container(data, len, t, why, why_len);
    if (rc)
        return rc;
    WebPDecoderConfig cfg;
    if (!WebPInitDecoderConfig(&cfg)) {
        gf__why(why, why_len, "WebP: libwebp's ABI does not match its header");
        return GF_EFORMAT;
    }
    VP8StatusCode st = WebPGetFeatures(data, len, &cfg.input);
    if (st != VP8_STATUS_OK)
        return webp_status(st, why, why_len);
    if (cfg.input.has_animation) {
        gf__why(why, why_len, "WebP: animated files are not supported");
        return GF_EFORMAT;
    }
    int W = cfg.input.width, H = cfg.input.height;
    if (gf__too_big(t, F_WEBP, (uint64_t)W, (uint64_t)H, why, why_len))
        return GF_ETOOBIG;
    gf__crop c;
    if (!(t = gf__plan_whole(d, t, W, H, key, &c, &dst, why, why_len)))
        return GF_ENOMEM;
    const gf__rs_axis *h = &d->rs.h, *v = &d->rs.v;
    int x0 = 0, x1 = W, y0 = 0, y1 = H;
    if (!t->full_decode && t->strictness != GF_STRICT_WHOLE) {
        margin(h->lo, h->hi, W, &x0, &x1);
        margin(v->lo, v->hi, H, &y0, &y1);
        if (cfg.input.has_alpha && cfg.input.format == 1)
            y0 = 0; /* the ALPH plane: see the top of the file */
    }
    int kind = cfg.input.has_alpha || t->channels == 4 ? K_RGBA : K_RGB;
    size_t stride = (size_t)(x1 - x0) * kind, size = stride * (size_t)(y1 - y0);
    if (GF__GROW(&d->buf, &d->buf_cap, size, 4096)) {
        gf__why(why, why_len, "out of memory for WebP pixels");
        return GF_ENOMEM;
    }
    if (x0 || y0 || x1 < W || y1 < H) {
        cfg.options.use_cropping = 1;
        cfg.options.crop_left = x0;
        cfg.options.crop_top = y0;
        cfg.options.crop_width = x1 - x0;
        cfg.options.crop_height = y1 - y0;
    }
    cfg.output.colorspace = kind == K_RGBA ? MODE_RGBA : MODE_RGB;
    cfg.output.is_external_memory = 1;
    cfg.output.u.RGBA.rgba = d->buf;
    cfg.output.u.RGBA.stride = (int)stride;
    cfg.output.u.RGBA.size = size;
    st = WebPDecode(data, len, &cfg);
    WebPFreeDecBuffer(&cfg.output); /* nothing of ours: external memory */
    if (st != VP8_STATUS_OK)
        return webp_status(st, why, why_len);
    const uint8_t *span = d->buf + stride * (size_t)(v->lo - y0) + (size_t)(h->lo - x0) * kind;
    return gf__decode_finish(d, span, stride, kind, t, c.flip, dst, why, why_len);
}
