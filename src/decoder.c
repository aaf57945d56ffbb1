/* What every format's decoder shares, below them all (decode.c
 * dispatches to them; none calls back into it): format names, the pixel
 * limit, channel conversion, the resampler's axes and the resampling
 * every path ends with, and the process-wide test counters. Run on the
 * decoding thread, with its own gf__decoder.
 *
 * Nothing here prints, exits or aborts. */
#include "decoder.h"

#include "grow.h"

#include <math.h>
#include <string.h>

const char *const gf__fmt_name[F_COUNT] = {"image", "JPEG", "PNG", "GIF", "BMP", "PSD", "PNM", "TGA", "WebP", "TIFF",
                                            "PNM"};

int gf__too_big(const gf__transform *t, int fmt, uint64_t W, uint64_t H, char *why,
                size_t why_len)
{
    uint64_t lim = t->max_pixels;
    if (W * H <= lim)
        return 0;
    gf__why(why, why_len, "%s %llux%llu = %llu pixels over the limit of %llu", gf__fmt_name[fmt],
            (unsigned long long)W, (unsigned long long)H, (unsigned long long)(W * H),
            (unsigned long long)lim);
    return 1;
}

/* ---- channel conversion ---- */

static inline uint8_t luma(int r, int g, int b) /* BT.601, libjpeg's constants */
{
    return (uint8_t)((19595 * r + 38470 * g + 7471 * b + 32768) >> 16);
}

static inline uint8_t blinn(int x, int y) /* x * y / 255, rounded (stb's) */
{
    unsigned t = (unsigned)(x * y) + 128;
    return (uint8_t)((t + (t >> 8)) >> 8);
}

/* w x h pixels of source kind `kind` (rows `stride` bytes apart) to C
 * channels, packed. CMYK is Adobe's inverted CMYK (what Photoshop writes
 * and what libjpeg and stb_image hand back): R = C * K / 255. */
static void convert(const uint8_t *src, size_t stride, int kind, int w, int h, uint8_t *dst,
                    int C)
{
    for (int y = 0; y < h; y++) {
        const uint8_t *s = src + stride * y;
        uint8_t *o = dst + (size_t)w * C * y;
        for (int x = 0; x < w; x++, o += C) {
            int r, g, b, a = 255;
            switch (kind) {
            case K_GRAY: r = g = b = s[x]; break;
            case K_GA: r = g = b = s[2 * x]; a = s[2 * x + 1]; break;
            case K_RGB: r = s[3 * x]; g = s[3 * x + 1]; b = s[3 * x + 2]; break;
            case K_RGBA:
                r = s[4 * x]; g = s[4 * x + 1]; b = s[4 * x + 2]; a = s[4 * x + 3];
                break;
            default: {
                int k = s[4 * x + 3];
                r = blinn(s[4 * x], k);
                g = blinn(s[4 * x + 1], k);
                b = blinn(s[4 * x + 2], k);
            }
            }
            if (C == 1) {
                o[0] = kind <= K_GA ? (uint8_t)r : luma(r, g, b);
            } else {
                o[0] = (uint8_t)r;
                o[1] = (uint8_t)g;
                o[2] = (uint8_t)b;
                if (C == 4)
                    o[3] = (uint8_t)a;
            }
        }
    }
}

int gf__decode_finish(gf__decoder *d, const uint8_t *src, size_t stride, int kind,
                      const gf__transform *t, int flip, uint8_t *dst, char *why,
                      size_t why_len)
{
    int C = t->channels;
    if (kind != C) {
        int w = d->rs.h.hi - d->rs.h.lo, h = d->rs.v.hi - d->rs.v.lo;
        if (GF__GROW(&d->conv, &d->conv_cap, (size_t)w * h * C, 4096))
            goto nomem;
        convert(src, stride, kind, w, h, d->conv, C);
        src = d->conv;
        stride = (size_t)w * C;
    }
    double t0 = gf__now();
    d->flipped = flip; /* decided here; applied here unless the device does it */
    int rc = gf__resample(&d->rs, src, stride, C, dst, (size_t)t->out_w * C,
                          flip && !t->defer_flip);
    d->resample_s += gf__now() - t0;
    if (rc == 0)
        return 0;
nomem:
    gf__why(why, why_len, "out of memory for the resampler");
    return GF_ENOMEM;
}

const gf__transform *gf__plan_whole(gf__decoder *d, const gf__transform *t, int W, int H,
                                    uint64_t key, gf__crop *c, uint8_t **dst, char *why,
                                    size_t why_len)
{
    if (!(t = gf__plan(d, t, W, H, key, c, dst))) {
        gf__why(why, why_len, "out of memory for the output");
        return NULL;
    }
    if (gf__decode_set_axes(d, W, H, 1.0, c, t)) {
        gf__why(why, why_len, "out of memory for the resampler");
        return NULL;
    }
    return t;
}

void gf__fit_size(int W, int H, int max_side, int *w, int *h)
{
    int lng = GF__MAX(W, H), shrt = GF__MIN(W, H);
    if (max_side <= 0 || lng <= max_side) {
        *w = W;
        *h = H;
        return;
    }
    /* round(shrt * max_side / lng), half up, in integers */
    uint64_t s = ((uint64_t)shrt * (uint64_t)max_side * 2 + (uint64_t)lng) / (2 * (uint64_t)lng);
    int scaled = s < 1 ? 1 : (int)s;
    *w = W >= H ? max_side : scaled;
    *h = W >= H ? scaled : max_side;
}

const gf__transform *gf__plan(gf__decoder *d, const gf__transform *t, int W, int H,
                              uint64_t key, gf__crop *c, uint8_t **dst)
{
    d->src_w = W;
    d->src_h = H;
    if (!t->fit) {
        gf__crop_plan(t, W, H, key, c);
        d->planned = *c;
        return t;
    }
    /* The whole image onto the whole output, each axis on its own: PIL's
     * Image.resize, so the sub-pixel aspect error of rounding is spread
     * over the image rather than cropped off an edge. */
    d->fitted = *t;
    gf__fit_size(W, H, t->fit_max_side, &d->fitted.out_w, &d->fitted.out_h);
    *c = (gf__crop){0, 0, W, H, 0};
    d->planned = *c;
    size_t need = (size_t)d->fitted.out_w * (size_t)d->fitted.out_h * (size_t)t->channels;
    if (GF__GROW(&d->fit_out, &d->fit_cap, need, 4096))
        return NULL;
    d->fit_src_w = W;
    d->fit_src_h = H;
    *dst = d->fit_out;
    return &d->fitted;
}

/* NEAREST on one axis of n samples, box [x, x + len) onto out: what
 * torchvision does on PIL. Train (and a fitted decode) crops whole pixels,
 * then resizes the crop. Eval resizes the whole image to Resize's size,
 * then CenterCrop takes out samples from an offset: crop.c's box is that
 * offset and out times n / size, so both whole numbers come back by
 * rounding, and PIL's running sum is run over the whole resized axis. */
static int nearest_axis(gf__rs_axis *a, int n, double x, double len, int out, int resized)
{
    if (!resized)
        return gf__rs_axis_set_nearest(a, n, (int)fmax(floor(x), -1), len, out, 0, out);
    double size = floor(out * (double)n / len + 0.5), skip = floor(x * size / n + 0.5);
    if (!(size >= 1 && size <= INT32_MAX && skip >= 0 && skip <= INT32_MAX))
        return -1;
    return gf__rs_axis_set_nearest(a, n, 0, n, (int)size, (int)skip, out);
}

int gf__decode_set_axes(gf__decoder *d, int sw, int sh, double f, const gf__crop *c,
                        const gf__transform *t)
{
    if (t->interp == GF_INTERP_NEAREST) {
        int resized = t->kind == GF_TRANSFORM_EVAL && !t->fit;
        return nearest_axis(&d->rs.h, sw, c->x * f, c->w * f, t->out_w, resized) ||
                       nearest_axis(&d->rs.v, sh, c->y * f, c->h * f, t->out_h, resized)
                   ? -1
                   : 0;
    }
    if (gf__rs_axis_set(&d->rs.h, sw, c->x * f, c->w * f, t->out_w, t->interp) ||
        gf__rs_axis_set(&d->rs.v, sh, c->y * f, c->h * f, t->out_h, t->interp))
        return -1;
    return 0;
}

/* Test hooks (decoder.h), counted process-wide. */
atomic_uint gf__jpeg_long_decodes, gf__decode_cancels, gf__jpeg_held;
atomic_int gf__jpeg_hold;

int gf__have_turbo(void)
{
    return GF_HAVE_TURBO;
}
