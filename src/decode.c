/* Decode + CPU transform of one sample, straight into its batch cell:
 * the decoder object, format sniffing and the dispatch through the format
 * table (each format's checks and decoders are its own files; what they
 * share is decoder.c, below them). A gf__decoder belongs to one decode
 * thread; gf_decoder (the public one-image API) to whichever thread
 * opened it.
 *
 * Every path is: read the header, check the pixel limit, plan the crop
 * rectangle (crop.c), decode only what the resampler will read, convert
 * channels, resample into dst. JPEG goes through libjpeg-turbo
 * (decode_jpeg.c) and PNG through libspng (decode_png.c) where built,
 * binary PNM at maxval 255 is resampled in place (decode_pnm_raw.c), at
 * other maxvals scaled as PIL scales them, under every decoder,
 * everything else (and JPEG, PNG and maxval-255 PNM with decoder = STB)
 * through stb_image (decode_stb.c).
 *
 * Nothing here prints, exits or aborts. */
#include "decode.h"
#include "decode_formats.h"

#include "augment.h"
#include "grow.h"
#include "settings.h"

#include "magic.h"

#include <stdlib.h>
#include <string.h>

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
    t->interp = s->interpolation;
    t->defer_flip = s->flip_on_device;
    t->strictness = s->strictness;
}

/* ---- format sniffing and the format table ---- */

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
    if (fmt == F_PNM && p[1] >= '1' && p[1] <= '4') /* the magic holds "P" and a digit */
        return F_PNM_PLAIN;
    return fmt; /* TIFF: in torchvision's list, so ImageFolders index it */
}

/* What a sniffed format goes through, in this order: its truncation
 * check; its own decoder where built (unless decoder = STB, where
 * stb_image also reads the format); else, or where the own decoder
 * declines the file (GF__DECLINED), a refusal; else the checks stb_image
 * needs, then stb_image. A zeroed entry: stb_image alone. */
typedef struct format_entry {
    int (*truncated)(const uint8_t *p, size_t n);
    gf__format_decode_fn *own;
    int own_used;       /* GF__USED_* */
    int own_always;     /* whatever t->decoder: stb_image cannot read it */
    const char *refused; /* GF_EFORMAT's reason */
    gf__format_check_fn *stb_check;
} format_entry;

static const format_entry formats[F_COUNT] = {
    [F_JPEG] = {
        .truncated = gf__jpeg_truncated,
#if GF_HAVE_TURBO
        .own = gf__decode_jpeg, .own_used = GF__USED_TURBO,
#endif
        .stb_check = gf__jpeg_stb_refuses,
    },
    [F_PNG] = {
        .truncated = gf__png_truncated,
#if GF_HAVE_SPNG
        .own = gf__decode_png, .own_used = GF__USED_SPNG,
#endif
        .stb_check = gf__png_check_crcs, /* stb_image checks no chunk CRC */
    },
#if GF_HAVE_WEBP
    [F_WEBP] = {.own = gf__decode_webp, .own_used = GF__USED_WEBP, .own_always = 1},
#else
    [F_WEBP] = {.refused = "WebP: this build has no WebP decoder (libwebp, the webp feature)"},
#endif
    [F_TIFF] = {.refused = "TIFF: not a supported format"},
    /* stb_image's path, though not stb_image's code */
    [F_PNM_PLAIN] = {.own = gf__decode_pnm_plain, .own_used = GF__USED_STB, .own_always = 1},
    /* always: stb_image misreads maxval != 255 (the raw path declines 255 under STB) */
    [F_PNM] = {.own = gf__decode_pnm_raw, .own_used = GF__USED_RAW, .own_always = 1},
};

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
    free(d->fit_out);
    free(d->buf);
    free(d->conv);
    free(d->aug_scratch);
    free(d);
}

size_t gf__decoder_scratch_bytes(const gf__decoder *d)
{
    size_t n = d->buf_cap + d->conv_cap + d->fit_cap + gf__resampler_bytes(&d->rs);
#if GF_HAVE_TURBO
    n += d->rows_cap * sizeof *d->rows;
#endif
    return n;
}

void gf__decoder_geometry(const gf__decoder *d, int *src_w, int *src_h, gf__crop *crop)
{
    *src_w = d->src_w;
    *src_h = d->src_h;
    *crop = d->planned;
}

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
    const format_entry *f = &formats[fmt];
    if (f->truncated && f->truncated(data, len)) {
        gf__why(why, why_len, "%s: premature end of data (truncated?)", gf__fmt_name[fmt]);
        return GF_ETRUNC;
    }
    int rc = GF__DECLINED, by = 0;
    if (f->own && (f->own_always || t->decoder != GF_DECODER_STB)) {
        by = f->own_used;
        rc = f->own(d, data, len, t, key, dst, why, why_len);
    }
    if (rc == GF__DECLINED) {
        if (f->refused) {
            gf__why(why, why_len, "%s", f->refused);
            return GF_EFORMAT;
        }
        if (f->stb_check && (rc = f->stb_check(d, data, len, t, why, why_len)) < 0)
            return rc;
        by = GF__USED_STB;
        rc = gf__decode_stb(d, data, len, fmt, t, key, dst, why, why_len);
    }
    if (rc == 0 && used)
        *used = by | (d->warned ? GF__WARNED : 0);
    return rc;
}

/* The stages after the crop and flip, on the cell's pixels. */
static int augment(gf__decoder *d, const gf__transform *t, uint64_t key, uint8_t *dst, char *why,
                   size_t why_len)
{
    const gf__augment *a = t->augment;
    if (a->n_stages) {
        if (GF__GROW(&d->aug_scratch, &d->aug_cap, (size_t)t->out_w * t->out_h * t->channels,
                     4096)) {
            gf__why(why, why_len, "out of memory for the augmentations");
            return GF_ENOMEM;
        }
        gf__augment_cell(a, key, dst, d->aug_scratch);
    }
    if (t->erase_in_cell)
        gf__erase_cell(a, key, dst);
    return 0;
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
    if (rc == 0 && t->augment && !t->fit)
        rc = augment(d, t, key, dst, why, why_len);
    d->total_s += gf__now() - t0;
    if (rc == 0 && used && d->flipped && t->defer_flip)
        *used |= GF__FLIPPED;
    return rc;
}

struct gf_decoder {
    gf__transform t;
    gf__augment aug;
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
    if (gf__augment_parse(r.augment, r.width, r.height, r.channels, &g->aug, NULL, 0) == 0 &&
        (g->aug.n_stages || g->aug.erase)) { /* checked above: it parses */
        g->t.augment = &g->aug;
        g->t.erase_in_cell = g->aug.erase; /* its output is uint8 */
    }
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

int gf_decoder_decode_fit(gf_decoder *g, const void *data, size_t len, int max_side,
                          const uint8_t **pixels, int *width, int *height, int *src_width,
                          int *src_height, char *why, size_t why_len)
{
    if (why && why_len)
        why[0] = 0;
    if (pixels)
        *pixels = NULL;
    if (!g || !pixels || !width || !height || (!data && len) || max_side < 0) {
        gf__why(why, why_len, "invalid argument");
        return GF_EINVAL;
    }
    /* Whole, at full size (no DCT scaling): one filter does the whole
     * reduction, and every row is decoded, so damage anywhere is seen. */
    gf__transform t = g->t;
    t.fit = 1;
    t.fit_max_side = max_side;
    t.full_decode = 1;
    t.out_w = t.out_h = 1; /* gf__plan sets the size from the header */
    uint8_t placeholder[4];
    int used;
    int rc = gf__decode(g->d, data, len, &t, 0, placeholder, &used, why, why_len);
    if (rc < 0)
        return rc;
    *pixels = g->d->fit_out;
    *width = g->d->fitted.out_w;
    *height = g->d->fitted.out_h;
    if (src_width)
        *src_width = g->d->fit_src_w;
    if (src_height)
        *src_height = g->d->fit_src_h;
    return 0;
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
