/* Decode + CPU transform of one sample, straight into its batch cell:
 * the decoder object, format sniffing and dispatch, the completeness
 * checks, channel conversion and the resampling every path ends with.
 * A gf__decoder belongs to one decode thread; gf_decoder (the public
 * one-image API) to whichever thread opened it.
 *
 * Every path is: read the header, check the pixel limit, plan the crop
 * rectangle (crop.c), decode only what the resampler will read, convert
 * channels, resample into dst. JPEG goes through libjpeg-turbo
 * (decode_jpeg.c) and PNG through libspng (decode_png.c) where built,
 * everything else (and JPEG, PNG with decoder = STB) through stb_image
 * (decode_stb.c).
 *
 * Nothing here prints, exits or aborts. */
#include "decode_internal.h"

#include "settings.h"

#include "grow.h"
#include "magic.h"

#include <stdlib.h>
#include <string.h>

int gf__have_turbo(void)
{
    return GF_HAVE_TURBO;
}

void gf__transform_from_settings(gf__transform *t, const gf_settings *s)
{
    memset(t, 0, sizeof *t);
    t->out_w = s->width;
    t->out_h = s->height;
    t->channels = s->channels;
    t->kind = s->transform;
    t->scale_min = s->scale_min;
    t->scale_max = s->scale_max;
    t->ratio_min = s->ratio_min;
    t->ratio_max = s->ratio_max;
    t->flip_prob = s->flip_prob;
    t->crop_fraction = s->crop_fraction;
    t->max_pixels = s->max_pixels; /* resolved: gf__resolve_settings */
    t->decoder = s->decoder;
    t->defer_flip = s->flip_on_device;
    t->strictness = s->strictness;
}

/* ---- format sniffing and completeness checks ---- */

const char *const gf__fmt_name[] = {"image", "JPEG", "PNG", "GIF", "BMP", "PSD", "PNM", "TGA", "WebP", "TIFF"};

static int sniff(const uint8_t *p, size_t n)
{
    static const int fmt_of[] = {
        [GF__MAGIC_NONE] = F_UNKNOWN, [GF__MAGIC_JPEG] = F_JPEG, [GF__MAGIC_PNG] = F_PNG,
        [GF__MAGIC_GIF] = F_GIF,      [GF__MAGIC_BMP] = F_BMP,   [GF__MAGIC_PSD] = F_PSD,
        [GF__MAGIC_PNM] = F_PNM,      [GF__MAGIC_WEBP] = F_WEBP, [GF__MAGIC_TIFF] = F_TIFF,
    };
    int fmt = fmt_of[gf__magic(p, n)];
    if (fmt == F_UNKNOWN && gf__sniff_tga(p, n)) /* no magic: last, as stb_image tries it */
        return F_TGA;
    return fmt; /* TIFF: in torchvision's list, so ImageFolders index it */
}

/* 1 if the PNG's chunk chain runs out before IEND. */
static int png_truncated(const uint8_t *p, size_t n)
{
    size_t pos = 8;
    while (pos + 8 <= n) {
        uint32_t len = gf__be32(p + pos);
        if (len > 0x7fffffffu)
            return 0; /* corrupt, not truncated: stb will say */
        if (memcmp(p + pos + 4, "IEND", 4) == 0)
            return pos + 12 > n; /* its CRC too */
        pos += 12 + (size_t)len;
    }
    return 1;
}

/* 1 if the JPEG has no EOI after its first SOS. Marker segments before
 * SOS are length-prefixed (so an EXIF thumbnail's EOI is skipped), and in
 * entropy-coded data 0xFF is always stuffed or an RST/real marker, so any
 * FF D9 after SOS is the end of the image: a backward scan finds it at
 * once in a whole file. */
static int jpeg_truncated(const uint8_t *p, size_t n)
{
    size_t pos = 2;
    for (;;) {
        if (pos >= n)
            return 1;
        if (p[pos] != 0xff)
            return 0; /* not a marker: corrupt, the decoder will say */
        while (pos < n && p[pos] == 0xff)
            pos++;
        if (pos >= n)
            return 1;
        uint8_t m = p[pos++];
        if (m == 0xd8 || m == 0x01 || (m >= 0xd0 && m <= 0xd7))
            continue;
        if (m == 0xd9)
            return 0; /* EOI before any image: the decoder will say */
        if (pos + 2 > n)
            return 1;
        size_t L = (size_t)p[pos] << 8 | p[pos + 1];
        if (L < 2)
            return 0;
        pos += L;
        if (m == 0xda)
            break;
    }
    if (pos > n)
        return 1;
    for (size_t i = n - 1; i > pos; i--)
        if (p[i] == 0xd9 && p[i - 1] == 0xff)
            return 0;
    return 1;
}

/* What stb_image cannot decode, seen from the markers: a frame (SOFn,
 * before the first scan: later "markers" may be damaged entropy data)
 * other than baseline/extended/progressive Huffman, or not 8-bit, and
 * more than GF__JPEG_MAX_SCANS scans (libjpeg's progress monitor caps
 * those on the other path). Walks segments by their length and entropy
 * data by memchr. 0, or GF_EFORMAT / GF_ECORRUPT with why. */
static int jpeg_stb_refuses(const uint8_t *p, size_t n, char *why, size_t why_len)
{
    int scans = 0;
    for (size_t pos = 2; pos + 4 <= n;) {
        const uint8_t *ff = memchr(p + pos, 0xff, n - pos - 1);
        if (!ff)
            break;
        pos = (size_t)(ff - p);
        uint8_t m = p[pos + 1];
        if (m == 0xff || m == 0 || m == 0x01 || m == 0xd8 || (m >= 0xd0 && m <= 0xd7)) {
            pos += m == 0xff ? 1 : 2; /* fill, stuffing, restart: no length */
            continue;
        }
        if (m == 0xd9 || pos + 4 > n)
            break;
        if (scans == 0 && m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc) {
            const char *what = m >= 0xc9 ? "arithmetic coding"
                               : m == 0xc3 ? "lossless coding"
                               : m >= 0xc5 ? "hierarchical coding" : NULL;
            if (what) {
                gf__why(why, why_len, "JPEG: %s is not supported by stb_image", what);
                return GF_EFORMAT;
            }
            if (pos + 4 < n && p[pos + 4] != 8) {
                gf__why(why, why_len, "JPEG: %d-bit samples are not supported", p[pos + 4]);
                return GF_EFORMAT;
            }
        }
        if (m == 0xda && ++scans > GF__JPEG_MAX_SCANS) {
            gf__why(why, why_len, "JPEG: more than %d scans (a decompression-time bomb?)",
                    GF__JPEG_MAX_SCANS);
            return GF_ECORRUPT;
        }
        pos += 2 + ((size_t)p[pos + 2] << 8 | p[pos + 3]);
    }
    return 0;
}

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

int gf__decode_set_axes(gf__decoder *d, int sw, int sh, double f, const gf__crop *c,
                        const gf__transform *t)
{
    if (gf__rs_axis_set(&d->rs.h, sw, c->x * f, c->w * f, t->out_w) ||
        gf__rs_axis_set(&d->rs.v, sh, c->y * f, c->h * f, t->out_h))
        return -1;
    return 0;
}

/* ---- entry points ---- */

int gf__decoder_create(gf__decoder **out)
{
    *out = NULL;
    gf__decoder *d = calloc(1, sizeof *d);
    if (!d)
        return GF_ENOMEM;
#if GF_HAVE_TURBO
    if (gf__decode_jpeg_init(d) < 0) {
        free(d);
        return GF_ENOMEM;
    }
#endif
    *out = d;
    return 0;
}

void gf__decoder_destroy(gf__decoder *d)
{
    if (!d)
        return;
#if GF_HAVE_TURBO
    gf__decode_jpeg_free(d);
#endif
    gf__resampler_free(&d->rs);
    free(d->buf);
    free(d->conv);
    free(d);
}

size_t gf__decoder_scratch_bytes(const gf__decoder *d)
{
    size_t n = d->buf_cap + d->conv_cap + gf__resampler_bytes(&d->rs);
#if GF_HAVE_TURBO
    n += d->rows_cap * sizeof *d->rows;
#endif
    return n;
}

atomic_uint gf__jpeg_long_decodes, gf__decode_cancels, gf__jpeg_held;
atomic_int gf__jpeg_hold;

void gf__decoder_set_cancel(gf__decoder *d, const atomic_int *cancel)
{
    d->cancel = cancel;
}

const char *gf__decoder_warning(const gf__decoder *d, int *code)
{
    *code = d->warn_code ? d->warn_code : GF_ECORRUPT;
    return d->warn;
}

void gf__decoder_times(const gf__decoder *d, double *total_s, double *resample_s)
{
    *total_s = d->total_s;
    *resample_s = d->resample_s;
}

static int decode(gf__decoder *d, const uint8_t *data, size_t len, const gf__transform *t,
                  uint64_t key, uint8_t *dst, int *used, char *why, size_t why_len)
{
    if (used)
        *used = 0;
    if (why && why_len)
        why[0] = 0;
    if (!d || !t || !dst || (!data && len) || t->out_w <= 0 || t->out_h <= 0 ||
        (t->channels != 1 && t->channels != 3 && t->channels != 4)) {
        gf__why(why, why_len, "invalid decode arguments");
        return GF_EINVAL;
    }
    if (len == 0) {
        gf__why(why, why_len, "empty file");
        return GF_EEMPTY;
    }
    int fmt = sniff(data, len);
    if ((fmt == F_PNG && png_truncated(data, len)) || (fmt == F_JPEG && jpeg_truncated(data, len))) {
        gf__why(why, why_len, "%s: premature end of data (truncated?)", gf__fmt_name[fmt]);
        return GF_ETRUNC;
    }
    int rc, by;
#if GF_HAVE_TURBO
    if (fmt == F_JPEG && t->decoder != GF_DECODER_STB) {
        by = GF__USED_TURBO;
        rc = gf__decode_jpeg(d, data, len, t, key, dst, why, why_len);
    } else
#endif
#if GF_HAVE_WEBP /* the refusal below is then for builds without libwebp only */
    if (fmt == F_WEBP) {
        by = GF__USED_WEBP;
        rc = gf__decode_webp(d, data, len, t, key, dst, why, why_len);
    } else
#endif
#if GF_HAVE_SPNG
    if (fmt == F_PNG && t->decoder != GF_DECODER_STB) {
        by = GF__USED_SPNG;
        rc = gf__decode_png(d, data, len, t, key, dst, why, why_len);
    } else
#endif
    if (fmt == F_WEBP) {
        gf__why(why, why_len, "WebP: this build has no WebP decoder (libwebp, the webp feature)");
        return GF_EFORMAT;
    } else if (fmt == F_TIFF) {
        gf__why(why, why_len, "TIFF: not a supported format");
        return GF_EFORMAT;
    } else {
        if (fmt == F_JPEG && (rc = jpeg_stb_refuses(data, len, why, why_len)) < 0)
            return rc;
        by = GF__USED_STB;
        /* stb_image checks no chunk CRC: png_check.c does */
        rc = fmt == F_PNG ? gf__png_check_crcs(d, data, len, t, why, why_len) : 0;
        if (rc == 0)
            rc = gf__decode_stb(d, data, len, fmt, t, key, dst, why, why_len);
    }
    if (rc == 0 && used)
        *used = by | (d->warned ? GF__WARNED : 0);
    return rc;
}

int gf__decode(gf__decoder *d, const uint8_t *data, size_t len, const gf__transform *t,
               uint64_t key, uint8_t *dst, int *used, char *why, size_t why_len)
{
    if (!d)
        return decode(d, data, len, t, key, dst, used, why, why_len);
    d->flipped = d->warned = d->warn_code = 0;
    d->warn[0] = 0;
    double t0 = gf__now();
    int rc = decode(d, data, len, t, key, dst, used, why, why_len);
    d->total_s += gf__now() - t0;
    if (rc == 0 && used && d->flipped && t->defer_flip)
        *used |= GF__FLIPPED;
    return rc;
}

struct gf_decoder {
    gf__transform t;
    uint64_t seed;
    gf__decoder *d;
};

int gf_decoder_open(gf_decoder **out, const gf_settings *s)
{
    if (!out)
        return GF_EINVAL;
    *out = NULL;
    int rc = gf__check_settings(s, 0, NULL, 0);
    if (rc < 0)
        return rc;
    gf_settings r = *s;
    gf__resolve_settings(&r);
    gf_decoder *g = calloc(1, sizeof *g);
    if (!g)
        return GF_ENOMEM;
    gf__transform_from_settings(&g->t, &r);
    g->t.defer_flip = 0; /* no device kernel follows: mirror here */
    g->seed = s->seed;
    if (gf__decoder_create(&g->d) < 0) {
        free(g);
        return GF_ENOMEM;
    }
    *out = g;
    return 0;
}

int gf_decoder_decode(gf_decoder *g, const void *data, size_t len, uint64_t epoch,
                      uint64_t index, uint8_t *out, char *why, size_t why_len)
{
    if (why && why_len)
        why[0] = 0;
    if (!g || !out || (!data && len)) {
        gf__why(why, why_len, "invalid argument");
        return GF_EINVAL;
    }
    int used;
    return gf__decode(g->d, data, len, &g->t, gf__sample_key(g->seed, epoch, index), out, &used,
                      why, why_len);
}

void gf_decoder_close(gf_decoder **g)
{
    if (!g || !*g)
        return;
    gf__decoder_destroy((*g)->d);
    free(*g);
    *g = NULL;
}

int gf_decode_image(const gf_settings *s, const void *data, size_t len, uint64_t epoch,
                    uint64_t index, uint8_t *out, char *why, size_t why_len)
{
    gf_decoder *g;
    /* gf_decoder_open's check again, as it keeps no message */
    int rc = gf__check_settings(s, 0, why, why_len);
    if (rc < 0)
        return rc;
    if ((rc = gf_decoder_open(&g, s)) < 0) {
        gf__why(why, why_len, "%s", gf_strerror(rc));
        return rc;
    }
    rc = gf_decoder_decode(g, data, len, epoch, index, out, why, why_len);
    gf_decoder_close(&g);
    return rc;
}
