/*
 * prepare's sample fields (prepare.h; --fields, the loader's
 * settings.fields): each of a sample's members beyond its image and label
 * carried into the prepared shard under its own extension, so the set
 * loads with the same fields after its images were made smaller:
 *   - mask: its class ids resized with the image's exact fit by nearest
 *     neighbour (gf_mask_resize: PIL's NEAREST, the loader's rule, so
 *     every value is one of the source's), then stored as an 8-bit PNG of
 *     the source's colour type, grey or palette (its PLTE and tRNS kept);
 *   - boxes: scaled by the fit (boxes.c, the loader's kernel for the
 *     whole-image crop), rows left with no area dropped, stored as a .npy
 *     of the source's dtype and columns;
 *   - array: its header checked (npy.c), its bytes copied;
 *   - text, bytes: copied byte for byte (the loader checks text's UTF-8).
 * A damaged member is the sample's error, naming the field. The output is
 * a function of the member alone, so the shards stay the same bytes
 * whatever --threads. One prep_fields per worker thread; nothing shared.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../boxes.h"
#include "../npy.h"
#include "prepare.h"

#if GF_CLI_HAVE_SPNG
#include <spng.h>
#endif

struct prep_fields {
    int n;
    gf_field_kind kind[PREP_FIELDS_MAX];
    const char *name[PREP_FIELDS_MAX];
    uint8_t *ids;   /* a mask's resized class ids */
    size_t ids_cap;
    double *boxes;  /* a boxes member's values */
    size_t boxes_cap;
    float *kept;    /* its rows, moved (a float32 member's) */
    size_t kept_cap;
    double *boxes64; /* a float64 member's */
    size_t boxes64_cap;
};

prep_fields *prep_fields_new(gf_index *ix, char *why, size_t why_len)
{
    int n = gf_index_fields(ix);
    if (n > PREP_FIELDS_MAX) { /* fields.h allows no more */
        snprintf(why, why_len, "fields: %d beyond the image and label, at most %d", n,
                 PREP_FIELDS_MAX);
        return NULL;
    }
    prep_fields *f = calloc(1, sizeof *f);
    if (!f) {
        snprintf(why, why_len, "out of memory");
        return NULL;
    }
    f->n = n;
    for (int k = 0; k < n; k++)
        f->name[k] = gf_index_field_name(ix, k, &f->kind[k]);
    return f;
}

void prep_fields_free(prep_fields *f)
{
    if (!f)
        return;
    free(f->ids);
    free(f->boxes);
    free(f->kept);
    free(f->boxes64);
    free(f);
}

/* *p grown to hold n bytes (elem each): 0, or -1 out of memory. */
static int grow(void *pp, size_t *cap, size_t n, size_t elem)
{
    void **p = pp;
    if (n <= *cap)
        return 0;
    if (n > SIZE_MAX / elem)
        return -1;
    void *q = realloc(*p, n * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

static int member_set(prep_member *m, const void *data, size_t len)
{
    if (grow(&m->data, &m->cap, len ? len : 1, 1) < 0)
        return GF_ENOMEM;
    memcpy(m->data, data, len);
    m->len = len;
    return 0;
}

/* ---- masks ---- */

#if GF_CLI_HAVE_SPNG
/* The resized ids w x h as an 8-bit PNG of src's colour type: grey, or
 * palette with src's PLTE (and tRNS), so the file still shows as the
 * source did. */
static int mask_png(const uint8_t *src, size_t n, const uint8_t *ids, int w, int h,
                    prep_member *m, char *why, size_t why_len)
{
    struct spng_ihdr ihdr;
    struct spng_plte plte;
    struct spng_trns trns;
    int has_plte = 0, has_trns = 0, e;
    spng_ctx *in = spng_ctx_new(0);
    if (!in)
        return GF_ENOMEM;
    e = spng_set_png_buffer(in, src, n);
    if (!e)
        e = spng_get_ihdr(in, &ihdr);
    if (!e && ihdr.color_type == SPNG_COLOR_TYPE_INDEXED) {
        e = spng_get_plte(in, &plte);
        has_plte = e == 0;
        if (!e)
            has_trns = spng_get_trns(in, &trns) == 0;
    }
    spng_ctx_free(in);
    if (e) { /* gf_mask_resize read it whole: not expected */
        snprintf(why, why_len, "mask: its palette: libspng: %s", spng_strerror(e));
        return GF_ECORRUPT;
    }
    spng_ctx *out = spng_ctx_new(SPNG_CTX_ENCODER);
    if (!out)
        return GF_ENOMEM;
    struct spng_ihdr oh = {.width = (uint32_t)w, .height = (uint32_t)h, .bit_depth = 8,
                           .color_type = has_plte ? SPNG_COLOR_TYPE_INDEXED
                                                  : SPNG_COLOR_TYPE_GRAYSCALE};
    spng_set_option(out, SPNG_ENCODE_TO_BUFFER, 1);
    e = spng_set_ihdr(out, &oh);
    if (!e && has_plte)
        e = spng_set_plte(out, &plte);
    if (!e && has_trns)
        e = spng_set_trns(out, &trns);
    if (!e)
        e = spng_encode_image(out, ids, (size_t)w * (size_t)h, SPNG_FMT_PNG,
                              SPNG_ENCODE_FINALIZE);
    size_t len = 0;
    void *png = e ? NULL : spng_get_png_buffer(out, &len, &e);
    spng_ctx_free(out);
    if (!png) {
        snprintf(why, why_len, "mask: encoding the resized mask: libspng: %s",
                 spng_strerror(e));
        return e == SPNG_EMEM ? GF_ENOMEM : GF_ECORRUPT;
    }
    int rc = member_set(m, png, len);
    free(png);
    return rc;
}
#endif

static int take_mask(prep_fields *f, const uint8_t *p, size_t n, const prep_fit *fit,
                     prep_member *m, char *why, size_t why_len)
{
    size_t px = (size_t)fit->w * (size_t)fit->h;
    if (grow(&f->ids, &f->ids_cap, px, 1) < 0)
        return GF_ENOMEM;
    int rc = gf_mask_resize(p, n, fit->src_w, fit->src_h, fit->w, fit->h, f->ids, why, why_len);
    if (rc < 0)
        return rc;
#if GF_CLI_HAVE_SPNG
    return mask_png(p, n, f->ids, fit->w, fit->h, m, why, why_len);
#else
    (void)m; /* gf_mask_resize refuses first: the library has no PNG decoder either */
    snprintf(why, why_len, "mask: this build has no PNG encoder (libspng)");
    return GF_EFORMAT;
#endif
}

/* ---- boxes ---- */

/* a's header as NumPy writes a (rows, cols) array of dtype descr, padded
 * with spaces to a multiple of 64 bytes, '\n' last (format 1.0). */
static size_t npy_header(char *h, size_t cap, const char *descr, long rows, int cols)
{
    int dict = snprintf(h + 10, cap - 10,
                        "{'descr': '%s', 'fortran_order': False, 'shape': (%ld, %d), }", descr,
                        rows, cols);
    size_t total = (10 + (size_t)dict + 1 + 63) / 64 * 64;
    memset(h + 10 + dict, ' ', total - 10 - (size_t)dict - 1);
    h[total - 1] = '\n';
    memcpy(h, "\x93NUMPY\x01\x00", 8);
    h[8] = (char)((total - 10) & 0xff);
    h[9] = (char)((total - 10) >> 8);
    return total;
}

static int take_boxes(prep_fields *f, const uint8_t *p, size_t n, const prep_fit *fit,
                      prep_member *m, char *why, size_t why_len)
{
    gf__npy a;
    char reason[200];
    int rc = gf__npy_parse(p, n, &a, reason, sizeof reason);
    if (rc < 0) {
        snprintf(why, why_len, "%s", reason);
        return rc;
    }
    if (a.ndim != 2 || (a.shape[1] != 4 && a.shape[1] != 5)) {
        snprintf(why, why_len, "boxes are (N, 4) or (N, 5): x1 y1 x2 y2 [class]");
        return GF_ECORRUPT;
    }
    if (a.dtype != GF_DTYPE_FLOAT32 && a.dtype != GF_DTYPE_FLOAT64) {
        snprintf(why, why_len, "boxes are float32 or float64");
        return GF_ECORRUPT;
    }
    size_t rows = (size_t)a.shape[0], cols = (size_t)a.shape[1], values = rows * cols;
    if (grow(&f->boxes, &f->boxes_cap, values ? values : 1, sizeof *f->boxes) < 0 ||
        grow(&f->kept, &f->kept_cap, values ? values : 1, sizeof *f->kept) < 0 ||
        grow(&f->boxes64, &f->boxes64_cap, values ? values : 1, sizeof *f->boxes64) < 0)
        return GF_ENOMEM;
    gf__boxes_load(p + a.header_bytes, a.dtype, values, f->boxes);
    /* the loader's kernel for the whole image fitted, in the member's own
     * dtype: a float64 one keeps float64's precision */
    gf__crop c = {0, 0, fit->src_w, fit->src_h, 0};
    size_t elem = a.dtype == GF_DTYPE_FLOAT64 ? 8 : 4;
    char h[128];
    size_t hn = sizeof h;
    if (grow(&m->data, &m->cap, hn + values * elem + 1, 1) < 0)
        return GF_ENOMEM;
    long kept = elem == 8 ? gf__boxes_apply64(&c, fit->w, fit->h, f->boxes, rows, (int)cols,
                                              f->boxes64, why, why_len)
                          : gf__boxes_apply(&c, fit->w, fit->h, f->boxes, rows, (int)cols, f->kept,
                                            why, why_len);
    if (kept < 0)
        return GF_ECORRUPT;
    size_t body = (size_t)kept * cols * elem;
    hn = npy_header(h, sizeof h, elem == 8 ? "<f8" : "<f4", kept, (int)cols);
    memcpy(m->data, h, hn);
    memcpy(m->data + hn, elem == 8 ? (const void *)f->boxes64 : (const void *)f->kept, body);
    m->len = hn + body;
    return 0;
}

/* ---- a sample ---- */

int prep_fields_take(prep_fields *f, const uint8_t *sample, const size_t *at, const size_t *size,
                     const char *const *ext, const prep_fit *fit, prep_member *out, char *why,
                     size_t why_len)
{
    char reason[256];
    for (int k = 0; k < f->n; k++) {
        const uint8_t *p = sample + at[1 + k];
        size_t n = size[1 + k];
        prep_member *m = &out[k];
        m->ext = ext[1 + k];
        int rc = 0;
        reason[0] = '\0';
        switch (f->kind[k]) {
        case GF_FIELD_MASK:
            rc = take_mask(f, p, n, fit, m, reason, sizeof reason);
            break;
        case GF_FIELD_BOXES:
            rc = take_boxes(f, p, n, fit, m, reason, sizeof reason);
            break;
        case GF_FIELD_ARRAY: {
            gf__npy a; /* copied as it is, once its header reads as the loader reads it */
            rc = gf__npy_parse(p, n, &a, reason, sizeof reason);
            if (rc == 0)
                rc = member_set(m, p, n);
            break;
        }
        default: /* text, bytes */
            rc = member_set(m, p, n);
        }
        if (rc < 0) {
            snprintf(why, why_len, "field '%s': %s", f->name[k],
                     reason[0] ? reason : "out of memory");
            return rc;
        }
    }
    return 0;
}
