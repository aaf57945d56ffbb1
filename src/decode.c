/* Decode + CPU transform of one sample, straight into its batch cell.
 *
 * Both transforms reduce to one crop rectangle in source coordinates
 * (float), resampled to out_w x out_h and optionally mirrored, so every
 * path is: read the header, check the pixel limit, plan the rectangle,
 * decode only what the resampler will read, convert channels, resample
 * into dst.
 *
 * JPEG through libjpeg-turbo decodes at the smallest DCT scale that still
 * leaves the crop at least as large as the output (never upsampling from
 * a reduced decode), crops columns with jpeg_crop_scanline, skips rows
 * above with jpeg_skip_scanlines and stops after the last row needed.
 * Everything else (and JPEG with decoder = STB) goes through stb_image
 * (stb_image_impl.c), after two checks for inputs that Debian's 2.27
 * mishandles: JPEG Huffman tables of over 256 codes (an out-of-bounds
 * write) and PNM header numbers over INT_MAX (signed overflow).
 *
 * Nothing here prints, exits or aborts: libjpeg's error_exit longjmps back
 * to turbo_decode, its messages are captured into the reason. */
#include "decode.h"

#include "config.h"
#include "resample.h"
#include "stb_image_impl.h"

#include <math.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#if GF_HAVE_TURBO
#include <stdio.h>
#include <jpeglib.h>
#include <jerror.h>
#endif


#define DEFAULT_MAX_PIXELS (64ull << 20)

#if GF_HAVE_TURBO
typedef struct jerr {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    int eof;          /* JWRN_JPEG_EOF seen: the data ran out */
    int corrupt;      /* a corrupt-entropy-data warning was seen */
    char msg[JMSG_LENGTH_MAX];
} jerr;
#endif

struct gf__decoder {
    gf__resampler rs;
    uint8_t *buf;    /* decoded span (libjpeg) */
    uint8_t *conv;   /* span converted to the output channels */
    size_t buf_cap, conv_cap;
    double total_s, resample_s;
    int flipped;     /* the last sample's flip decision */
#if GF_HAVE_TURBO
    struct jpeg_decompress_struct ci;
    jerr err;
    JSAMPROW *rows;
    size_t rows_cap;
#endif
};

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
    t->max_pixels = s->max_pixels ? s->max_pixels : DEFAULT_MAX_PIXELS;
    t->decoder = s->decoder;
    t->defer_flip = s->flip_on_device;
}

/* ---- scratch ---- */

static int grow(uint8_t **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 4096;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n);
    if (!q)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

/* ---- randomness and geometry ---- */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *r)
{
    r->s += 0x9e3779b97f4a7c15ull;
    return gf__mix64(r->s);
}

static double rng_unit(rng *r) /* [0, 1) */
{
    return (double)(rng_next(r) >> 11) * 0x1p-53;
}

static double rng_uniform(rng *r, double a, double b)
{
    return a + (b - a) * rng_unit(r);
}

static int rng_int(rng *r, int n) /* [0, n] */
{
    return (int)(((rng_next(r) >> 32) * (uint64_t)((uint32_t)n + 1)) >> 32);
}

typedef struct crop {
    double x, y, w, h;
    int flip;
} crop;

/* torchvision RandomResizedCrop.get_params, then the flip. */
static void plan_train(const gf__transform *t, int W, int H, uint64_t key, crop *c)
{
    rng r = {key};
    double area = (double)W * H;
    double rmin = t->ratio_min, rmax = t->ratio_max;
    if (!(rmin > 0) || !(rmax > 0) || !isfinite(rmin) || !isfinite(rmax))
        rmin = rmax = 1.0;
    double lr0 = log(rmin), lr1 = log(rmax);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * rng_uniform(&r, t->scale_min, t->scale_max);
        double ar = exp(rng_uniform(&r, lr0, lr1));
        double w = round(sqrt(target * ar)), h = round(sqrt(target / ar));
        if (w >= 1 && w <= W && h >= 1 && h <= H) {
            int i = rng_int(&r, H - (int)h), j = rng_int(&r, W - (int)w);
            *c = (crop){j, i, w, h, 0};
            goto flip;
        }
    }
    {
        /* fallback: central crop, clamped to the ratio range */
        double in_ratio = (double)W / H, w = W, h = H, lo = fmin(rmin, rmax),
               hi = fmax(rmin, rmax);
        if (in_ratio < lo)
            h = fmax(1, fmin(H, round(w / lo)));
        else if (in_ratio > hi)
            w = fmax(1, fmin(W, round(h * hi)));
        *c = (crop){floor((W - w) / 2), floor((H - h) / 2), w, h, 0};
    }
flip:
    c->flip = rng_unit(&r) < t->flip_prob;
}

/* Shorter side to min(out)/crop_fraction (scaled up further if the output
 * would not fit), then a center crop rounded to whole resized pixels; the
 * result mapped back to source coordinates. */
static void plan_eval(const gf__transform *t, int W, int H, crop *c)
{
    double cf = t->crop_fraction > 0 && t->crop_fraction <= 1 ? t->crop_fraction : 1.0;
    double target = GF__MIN(t->out_w, t->out_h) / cf;
    double f = target / GF__MIN(W, H);
    f = fmax(f, fmax((double)t->out_w / W, (double)t->out_h / H));
    double rw = W * f, rh = H * f;
    double left = floor((rw - t->out_w) / 2 + 0.5), top = floor((rh - t->out_h) / 2 + 0.5);
    left = fmax(0, left);
    top = fmax(0, top);
    *c = (crop){left / f, top / f, t->out_w / f, t->out_h / f, 0};
    /* guard the right/bottom edges against rounding past the image */
    c->w = fmin(c->w, W - c->x);
    c->h = fmin(c->h, H - c->y);
}

static void plan(const gf__transform *t, int W, int H, uint64_t key, crop *c)
{
    if (t->kind == GF_TRANSFORM_EVAL)
        plan_eval(t, W, H, c);
    else
        plan_train(t, W, H, key, c);
}

/* ---- format sniffing and completeness checks ---- */

enum { F_UNKNOWN, F_JPEG, F_PNG, F_GIF, F_BMP, F_PSD, F_PNM };
static const char *const fmt_name[] = {"image", "JPEG", "PNG", "GIF", "BMP", "PSD", "PNM"};

static int sniff(const uint8_t *p, size_t n)
{
    static const uint8_t png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (n >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff)
        return F_JPEG;
    if (n >= 8 && memcmp(p, png, 8) == 0)
        return F_PNG;
    if (n >= 4 && memcmp(p, "GIF8", 4) == 0)
        return F_GIF;
    if (n >= 2 && p[0] == 'B' && p[1] == 'M')
        return F_BMP;
    if (n >= 4 && memcmp(p, "8BPS", 4) == 0)
        return F_PSD;
    if (n >= 3 && p[0] == 'P' && (p[1] == '5' || p[1] == '6') &&
        (p[2] == ' ' || p[2] == '\n' || p[2] == '\r' || p[2] == '\t'))
        return F_PNM;
    return F_UNKNOWN;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Byte i of p, or 0 past the end (what stb_image's reader returns). */
static uint8_t byte_at(const uint8_t *p, size_t n, size_t i)
{
    return i < n ? p[i] : 0;
}

/* 1 if the DHT segment whose length field starts at p[i] declares a table
 * of more than 256 codes, read as stb_image reads it (it stops at a bad
 * table class or id, and each table shortens the segment by >= 17). */
static int dht_overfull(const uint8_t *p, size_t n, size_t i)
{
    long left = (long)((unsigned)byte_at(p, n, i) << 8 | byte_at(p, n, i + 1)) - 2;
    for (i += 2; left > 0 && i < n;) {
        uint8_t q = p[i++];
        if (q >> 4 > 1 || (q & 15) > 3)
            return 0;
        unsigned codes = 0;
        for (int k = 0; k < 16; k++)
            codes += byte_at(p, n, i++);
        if (codes > 256)
            return 1;
        i += codes;
        left -= 17 + (long)codes;
    }
    return 0;
}

/* Debian's stb_image (2.27) writes past its Huffman tables when a DHT
 * table declares more than 256 codes (fixed upstream later: nothings/stb
 * #1289). 1 if p (a JPEG to stb_image: FF fill bytes, then SOI) has such
 * a table wherever stb_image could read one: in the segments before the
 * first scan, walked as stb_image walks them (a segment it accepts is
 * exactly its length long), and, from the first scan on, at every FF C4
 * (a marker it may find in or after entropy-coded data). */
static int jpeg_dht_overfull(const uint8_t *p, size_t n)
{
    /* stb_image's SOI: any run of FF fill bytes, then D8. */
    size_t pos = 0;
    while (pos < n && p[pos] == 0xff)
        pos++;
    if (pos == 0 || pos >= n || p[pos] != 0xd8)
        return 0;
    pos++;
    for (;;) {
        while (pos < n && p[pos] != 0xff) /* stb_image skips such bytes */
            pos++;
        while (pos < n && p[pos] == 0xff)
            pos++;
        if (pos + 2 > n)
            return 0;
        uint8_t m = p[pos++];
        if (m == 0xc4 && dht_overfull(p, n, pos))
            return 1;
        if (m == 0xda)
            break;
        if (m == 0xd8 || m == 0xd9 || m == 0x01 || (m >= 0xd0 && m <= 0xd7))
            return 0; /* no length: stb_image gives up here */
        pos += (size_t)byte_at(p, n, pos) << 8 | byte_at(p, n, pos + 1);
    }
    for (const uint8_t *ff; pos + 1 < n; pos = (size_t)(ff - p) + 1) {
        if (!(ff = memchr(p + pos, 0xff, n - 1 - pos)))
            break;
        if (ff[1] == 0xc4 && dht_overfull(p, n, (size_t)(ff - p) + 2))
            return 1;
    }
    return 0;
}

/* stb_image reads a PNM header's width, height and maximum value into an
 * int with no overflow check (undefined behaviour; fixed upstream after
 * 2.27). 1 if one of them, read as stb_image reads the header (whitespace
 * and '#' comments between them, for any data starting P5 or P6), is over
 * INT_MAX. */
static int pnm_number_overflows(const uint8_t *p, size_t n)
{
    if (n < 2 || p[0] != 'P' || (p[1] != '5' && p[1] != '6'))
        return 0;
    size_t pos = 2;
    for (int k = 0; k < 3; k++) {
        for (;;) {
            while (pos < n && (p[pos] == ' ' || (p[pos] >= '\t' && p[pos] <= '\r')))
                pos++;
            if (pos >= n || p[pos] != '#')
                break;
            while (pos < n && p[pos] != '\n' && p[pos] != '\r')
                pos++;
        }
        uint64_t v = 0;
        for (; pos < n && p[pos] >= '0' && p[pos] <= '9'; pos++)
            if ((v = v * 10 + (unsigned)(p[pos] - '0')) > INT32_MAX)
                return 1;
    }
    return 0;
}

/* 1 if the PNG's chunk chain runs out before IEND. */
static int png_truncated(const uint8_t *p, size_t n)
{
    size_t pos = 8;
    while (pos + 8 <= n) {
        uint32_t len = be32(p + pos);
        if (len > 0x7fffffffu)
            return 0; /* corrupt, not truncated: stb will say */
        if (memcmp(p + pos + 4, "IEND", 4) == 0)
            return 0;
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

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

/* Width and height from the header, for the pixel limit, when the format
 * keeps them at a known place; 0 if unknown. stb_image's info call would
 * say "unknown image type" for a header it finds too large, losing why. */
static int header_dims(int fmt, const uint8_t *p, size_t n, uint64_t *W, uint64_t *H)
{
    switch (fmt) {
    case F_PNG:
        if (n < 24 || memcmp(p + 12, "IHDR", 4) != 0)
            return 0;
        *W = be32(p + 16);
        *H = be32(p + 20);
        return 1;
    case F_GIF:
        if (n < 10)
            return 0;
        *W = (uint32_t)p[6] | (uint32_t)p[7] << 8;
        *H = (uint32_t)p[8] | (uint32_t)p[9] << 8;
        return 1;
    case F_BMP:
        if (n < 26)
            return 0;
        *W = (uint64_t)llabs((long long)(int32_t)le32(p + 18));
        *H = (uint64_t)llabs((long long)(int32_t)le32(p + 22));
        return 1;
    case F_PSD:
        if (n < 22)
            return 0;
        *H = be32(p + 14);
        *W = be32(p + 18);
        return 1;
    case F_JPEG:
        for (size_t pos = 2; pos + 4 <= n;) {
            if (p[pos] != 0xff)
                return 0;
            uint8_t m = p[pos + 1];
            if (m == 0xff) {
                pos++;
                continue;
            }
            if (m == 0xd8 || m == 0x01 || (m >= 0xd0 && m <= 0xd7)) {
                pos += 2;
                continue;
            }
            if (m == 0xd9 || m == 0xda)
                return 0;
            size_t L = (size_t)p[pos + 2] << 8 | p[pos + 3];
            int sof = m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc;
            if (sof) {
                if (pos + 9 > n)
                    return 0;
                *H = (uint32_t)p[pos + 5] << 8 | p[pos + 6];
                *W = (uint32_t)p[pos + 7] << 8 | p[pos + 8];
                return 1;
            }
            pos += 2 + L;
        }
        return 0;
    default:
        return 0;
    }
}

static int too_big(const gf__transform *t, int fmt, uint64_t W, uint64_t H, char *why,
                   size_t why_len)
{
    uint64_t lim = t->max_pixels ? t->max_pixels : DEFAULT_MAX_PIXELS;
    if (W * H <= lim)
        return 0;
    gf__why(why, why_len, "%s %llux%llu = %llu pixels over the limit of %llu", fmt_name[fmt],
            (unsigned long long)W, (unsigned long long)H, (unsigned long long)(W * H),
            (unsigned long long)lim);
    return 1;
}

/* ---- channel conversion ---- */

enum { K_GRAY = 1, K_GA = 2, K_RGB = 3, K_RGBA = 4, K_CMYK = 5 };

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

/* Resamples the span [h.lo, h.hi) x [v.lo, v.hi) of a kind-`kind` image
 * (src at the span's top-left) into dst, converting channels first when
 * the source layout is not already t->channels. */
static int finish(gf__decoder *d, const uint8_t *src, size_t stride, int kind,
                  const gf__transform *t, int flip, uint8_t *dst, char *why, size_t why_len)
{
    int C = t->channels;
    if (kind != C) {
        int w = d->rs.h.hi - d->rs.h.lo, h = d->rs.v.hi - d->rs.v.lo;
        if (grow(&d->conv, &d->conv_cap, (size_t)w * h * C))
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

static int set_axes(gf__decoder *d, int sw, int sh, double f, const crop *c,
                    const gf__transform *t)
{
    if (gf__rs_axis_set(&d->rs.h, sw, c->x * f, c->w * f, t->out_w) ||
        gf__rs_axis_set(&d->rs.v, sh, c->y * f, c->h * f, t->out_h))
        return -1;
    return 0;
}

/* ---- stb_image ---- */

static int stb_error(int fmt, char *why, size_t why_len)
{
    const char *r = gf__stb_failure_reason();
    r = r ? r : "unknown error";
    int code = GF_ECORRUPT;
    if (!strcmp(r, "outofmem"))
        code = GF_ENOMEM;
    else if (!strcmp(r, "outofdata"))
        code = GF_ETRUNC;
    else if (!strcmp(r, "too large"))
        code = GF_ETOOBIG;
    else if (fmt == F_UNKNOWN || !strcmp(r, "unknown image type"))
        code = GF_EFORMAT;
    if (code == GF_EFORMAT && fmt == F_UNKNOWN)
        gf__why(why, why_len, "not an image of a known format");
    else
        gf__why(why, why_len, "%s: %s (stb_image: %s)", fmt_name[fmt],
                code == GF_ETRUNC ? "premature end of data (truncated?)" : "corrupt data", r);
    return code;
}

static int stb_decode(gf__decoder *d, const uint8_t *data, size_t len, int fmt,
                      const gf__transform *t, uint64_t key, uint8_t *dst, char *why,
                      size_t why_len)
{
    if (len > INT32_MAX) {
        gf__why(why, why_len, "%s: %zu bytes is over stb_image's 2 GiB limit", fmt_name[fmt], len);
        return GF_ETOOBIG;
    }
    uint64_t hw, hh;
    if (header_dims(fmt, data, len, &hw, &hh) && too_big(t, fmt, hw, hh, why, why_len))
        return GF_ETOOBIG;
    /* stbi_info tries every reader on anything, whatever sniff says. */
    if (jpeg_dht_overfull(data, len)) {
        gf__why(why, why_len, "JPEG: corrupt data (a Huffman table with more than 256 codes)");
        return GF_ECORRUPT;
    }
    if (pnm_number_overflows(data, len)) {
        gf__why(why, why_len, "PNM: corrupt header (a number over 2147483647)");
        return GF_ECORRUPT;
    }
    int W, H, n;
    if (!gf__stb_info(data, (int)len, &W, &H, &n)) {
        /* info tried every format and kept the last one's complaint; for a
         * known format its own loader says what is wrong (in the header:
         * what info rejected, so nothing big is allocated) */
        if (fmt != F_UNKNOWN) {
            void *px = gf__stb_load(data, (int)len, &W, &H, &n);
            if (px) { /* info and load disagree: trust neither */
                gf__stb_free(px);
                gf__why(why, why_len, "%s: corrupt header", fmt_name[fmt]);
                return GF_ECORRUPT;
            }
        }
        return stb_error(fmt, why, why_len);
    }
    if (too_big(t, fmt, (uint64_t)W, (uint64_t)H, why, why_len))
        return GF_ETOOBIG;
    int is16 = gf__stb_is_16_bit(data, (int)len);
    uint8_t *px = is16 ? (uint8_t *)gf__stb_load_16(data, (int)len, &W, &H, &n)
                       : gf__stb_load(data, (int)len, &W, &H, &n);
    if (!px)
        return stb_error(fmt, why, why_len);
    if (is16) { /* narrow in place, rounded: v * 255 / 65535 */
        const uint16_t *s = (const uint16_t *)px;
        size_t cnt = (size_t)W * H * n;
        for (size_t i = 0; i < cnt; i++)
            px[i] = (uint8_t)(((uint32_t)s[i] * 255 + 32767) / 65535);
    }
    crop c;
    plan(t, W, H, key, &c);
    int rc = 0;
    if (set_axes(d, W, H, 1.0, &c, t)) {
        gf__why(why, why_len, "out of memory for the resampler");
        rc = GF_ENOMEM;
    } else {
        size_t stride = (size_t)W * n;
        const uint8_t *src = px + stride * d->rs.v.lo + (size_t)d->rs.h.lo * n;
        rc = finish(d, src, stride, n, t, c.flip, dst, why, why_len);
    }
    gf__stb_free(px);
    return rc;
}

/* ---- libjpeg-turbo ---- */

#if GF_HAVE_TURBO
static void j_error_exit(j_common_ptr ci)
{
    jerr *e = (jerr *)ci->err;
    ci->err->format_message(ci, e->msg);
    longjmp(e->jb, 1);
}

static void j_emit_message(j_common_ptr ci, int level)
{
    jerr *e = (jerr *)ci->err;
    if (level >= 0)
        return; /* trace messages */
    int code = ci->err->msg_code;
    if (code == JWRN_JPEG_EOF) {
        e->eof = 1;
    } else if (code == JWRN_HIT_MARKER || code == JWRN_HUFF_BAD_CODE ||
               code == JWRN_MUST_RESYNC || code == JWRN_ARITH_BAD_CODE) {
        if (!e->corrupt)
            ci->err->format_message(ci, e->msg);
        e->corrupt = 1;
    }
    ci->err->num_warnings++;
}

static void j_output_message(j_common_ptr ci)
{
    (void)ci;
}

static int j_code(const jerr *e, const char *fallback, char *why, size_t why_len)
{
    if (e->eof) {
        gf__why(why, why_len, "JPEG: premature end of data (truncated?)");
        return GF_ETRUNC;
    }
    int code = GF_ECORRUPT;
    switch (e->pub.msg_code) {
    case JERR_NO_SOI: code = GF_EFORMAT; break;
    case JERR_OUT_OF_MEMORY: code = GF_ENOMEM; break;
    case JERR_IMAGE_TOO_BIG:
    case JERR_WIDTH_OVERFLOW: code = GF_ETOOBIG; break;
    default: break;
    }
    gf__why(why, why_len, "JPEG: %s", e->msg[0] ? e->msg : fallback);
    return code;
}

/* Smallest DCT scale num/8 keeping the crop >= the output in both dims.
 * Only 1/8, 2/8, 4/8: libjpeg-turbo has SIMD IDCTs for those (and 8/8),
 * while 3/8, 5/8-7/8 run scaled C IDCTs (12x12, 14x14 for 4:2:0 chroma)
 * that cost more than a full-size decode (measured on 500x375 q90 4:2:0:
 * 1/8 0.26 ms, 2/8 0.30, 3/8 0.39, 4/8 0.34, 5/8 0.61, 6/8 0.82, 7/8 1.65,
 * 8/8 0.55). */
static int pick_scale(const crop *c, const gf__transform *t)
{
    for (int num = 1; num < 8; num *= 2)
        if (c->w * num / 8 >= t->out_w && c->h * num / 8 >= t->out_h)
            return num;
    return 8;
}

/* Runs under turbo_decode's setjmp: may longjmp out of any libjpeg call.
 * Holds nothing that is not in d. */
static int turbo_body(gf__decoder *d, const uint8_t *data, size_t len, const gf__transform *t,
                      uint64_t key, uint8_t *dst, char *why, size_t why_len)
{
    struct jpeg_decompress_struct *ci = &d->ci;
    jpeg_mem_src(ci, data, (unsigned long)len);
    jpeg_read_header(ci, TRUE);
    if (d->err.eof)
        return j_code(&d->err, "", why, why_len);
    int W = (int)ci->image_width, H = (int)ci->image_height;
    if (too_big(t, F_JPEG, (uint64_t)W, (uint64_t)H, why, why_len))
        return GF_ETOOBIG;
    crop c;
    plan(t, W, H, key, &c);
    int num = t->full_decode ? 8 : pick_scale(&c, t);
    ci->scale_num = (unsigned)num;
    ci->scale_denom = 8;
    int C = t->channels, kind;
    if (ci->jpeg_color_space == JCS_CMYK || ci->jpeg_color_space == JCS_YCCK) {
        ci->out_color_space = JCS_CMYK;
        kind = K_CMYK;
    } else {
        ci->out_color_space = C == 1 ? JCS_GRAYSCALE : C == 3 ? JCS_RGB : JCS_EXT_RGBA;
        kind = C;
    }
    jpeg_start_decompress(ci);
    int bpp = ci->output_components;
    if (set_axes(d, (int)ci->output_width, (int)ci->output_height, num / 8.0, &c, t)) {
        gf__why(why, why_len, "out of memory for the resampler");
        return GF_ENOMEM;
    }
    const gf__rs_axis *h = &d->rs.h, *v = &d->rs.v;
    JDIMENSION xoff = (JDIMENSION)h->lo, cw = (JDIMENSION)(h->hi - h->lo);
    int first = t->full_decode ? 0 : v->lo, nrows = t->full_decode ? H : v->hi - first;
    if (cw < ci->output_width && !t->full_decode)
        jpeg_crop_scanline(ci, &xoff, &cw); /* widens to iMCU edges */
    else
        xoff = 0;
    size_t row = (size_t)ci->output_width * bpp; /* cropped width now */
    if (grow(&d->buf, &d->buf_cap, row * nrows) ||
        grow((uint8_t **)&d->rows, &d->rows_cap, sizeof *d->rows * nrows)) {
        gf__why(why, why_len, "out of memory for JPEG scanlines");
        return GF_ENOMEM;
    }
    for (int i = 0; i < nrows; i++)
        d->rows[i] = d->buf + row * i;
    if (first > 0 && jpeg_skip_scanlines(ci, (JDIMENSION)first) != (JDIMENSION)first)
        return j_code(&d->err, "cannot skip to the crop", why, why_len);
    for (int got = 0; got < nrows;) {
        JDIMENSION k = jpeg_read_scanlines(ci, d->rows + got, (JDIMENSION)(nrows - got));
        if (k == 0)
            return j_code(&d->err, "no scanlines", why, why_len);
        got += (int)k;
    }
    if (d->err.eof || d->err.corrupt)
        return j_code(&d->err, "", why, why_len);
    const uint8_t *span = d->buf + row * (size_t)(v->lo - first) + (size_t)(h->lo - (int)xoff) * bpp;
    return finish(d, span, row, kind, t, c.flip, dst, why, why_len);
}

static int turbo_decode(gf__decoder *d, const uint8_t *data, size_t len, const gf__transform *t,
                        uint64_t key, uint8_t *dst, char *why, size_t why_len)
{
    d->err.eof = d->err.corrupt = 0;
    d->err.msg[0] = 0;
    d->err.pub.num_warnings = 0;
    d->err.pub.msg_code = 0;
    int rc;
    if (setjmp(d->err.jb))
        rc = j_code(&d->err, "", why, why_len);
    else
        rc = turbo_body(d, data, len, t, key, dst, why, why_len);
    jpeg_abort_decompress(&d->ci);
    return rc;
}
#endif

/* ---- entry points ---- */

int gf__decoder_create(gf__decoder **out)
{
    *out = NULL;
    gf__decoder *d = calloc(1, sizeof *d);
    if (!d)
        return GF_ENOMEM;
#if GF_HAVE_TURBO
    d->ci.err = jpeg_std_error(&d->err.pub);
    d->err.pub.error_exit = j_error_exit;
    d->err.pub.emit_message = j_emit_message;
    d->err.pub.output_message = j_output_message;
    if (setjmp(d->err.jb)) { /* out of memory in jpeg_create_decompress */
        jpeg_destroy_decompress(&d->ci);
        free(d);
        return GF_ENOMEM;
    }
    jpeg_create_decompress(&d->ci);
#endif
    *out = d;
    return 0;
}

void gf__decoder_destroy(gf__decoder *d)
{
    if (!d)
        return;
#if GF_HAVE_TURBO
    jpeg_destroy_decompress(&d->ci);
    free(d->rows);
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
    n += d->rows_cap;
#endif
    return n;
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
        gf__why(why, why_len, "%s: premature end of data (truncated?)", fmt_name[fmt]);
        return GF_ETRUNC;
    }
#if GF_HAVE_TURBO
    if (fmt == F_JPEG && t->decoder != GF_DECODER_STB) {
        if (used)
            *used = GF__USED_TURBO;
        return turbo_decode(d, data, len, t, key, dst, why, why_len);
    }
#endif
    if (used)
        *used = GF__USED_STB;
    return stb_decode(d, data, len, fmt, t, key, dst, why, why_len);
}

int gf__decode(gf__decoder *d, const uint8_t *data, size_t len, const gf__transform *t,
               uint64_t key, uint8_t *dst, int *used, char *why, size_t why_len)
{
    if (!d)
        return decode(d, data, len, t, key, dst, used, why, why_len);
    d->flipped = 0;
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
    if (!s || s->height < 1 || s->width < 1 ||
        (s->channels != 1 && s->channels != 3 && s->channels != 4))
        return GF_EINVAL;
    gf_decoder *g = calloc(1, sizeof *g);
    if (!g)
        return GF_ENOMEM;
    gf__transform_from_settings(&g->t, s);
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
    int rc = gf_decoder_open(&g, s);
    if (rc < 0) {
        gf__why(why, why_len, "%s", gf_strerror(rc));
        return rc;
    }
    rc = gf_decoder_decode(g, data, len, epoch, index, out, why, why_len);
    gf_decoder_close(&g);
    return rc;
}
