/* A sample's fields beyond its image and label in its batch slot
 * (sample_fields.h): their layouts, decided at open; their regions,
 * taken on the decode threads, moved with their cells, delivered as
 * offsets and lengths or gathered into one tensor. */
#include "sample_fields.h"

#include "boxes.h"
#include "config.h"
#include "loader_impl.h"
#include "npy.h"

#include <stdlib.h>
#include <string.h>

static gf_field_kind kind_of(const gf_loader *l, int k)
{
    return l->ds.schema.field[l->ds.var_field[k]].kind;
}

static const char *name_of(const gf_loader *l, int k)
{
    return l->ds.schema.name[l->ds.var_field[k]];
}

/* Arrays and masks are delivered as one tensor, the rest sample by sample. */
static int packed(gf_field_kind kind)
{
    return kind == GF_FIELD_ARRAY || kind == GF_FIELD_MASK;
}

static size_t region_bytes(const gf_loader *l, int k)
{
    return l->field_layout[k].region;
}

void gf__fields_scratch_free(gf__fields_scratch *s)
{
    gf__mask_scratch_free(&s->mask);
    free(s->boxes);
    memset(s, 0, sizeof *s);
}

/* ---- the layouts, at open ---- */

/* Sample i's member of field k: *member, *len bytes inside *buf (the
 * caller frees *buf). A shard's through its whole extent, as a sample is
 * read (its members' headers checked, locally or remotely); a list's is
 * its own file. */
static int read_member(const gf_loader *l, uint64_t i, int k, void **buf, const uint8_t **member,
                       size_t *len, char *why, size_t why_len)
{
    const gf__dataset *ds = &l->ds;
    if (gf__dataset_member(ds, i)) {
        size_t n;
        int rc = gf__dataset_read_extent(ds, i, l->s.max_file_bytes, buf, &n, why, why_len);
        if (rc < 0)
            return rc;
        const char *rel;
        uint64_t start, extent;
        gf__dataset_extent(ds, i, &rel, &start, &extent);
        *member = (const uint8_t *)*buf + (ds->var_off[k][i] - start);
        *len = ds->var_len[k][i];
        return 0;
    }
    gf__buf b = {0}; /* malloc'd (never mapped): the caller frees data */
    gf__read_opts o = {.max_bytes = ds->var_max[k]};
    const char *path = gf__dataset_field_file(ds, i, k);
    char reason[160];
    int rc = gf__read_sample(ds->root_fd, path, 0, GF__WHOLE_FILE, &o, &b, reason, sizeof reason);
    if (rc < 0) {
        gf__why(why, why_len, "%s: %s", path, reason);
        gf__buf_free(&b);
        return rc;
    }
    *buf = b.data;
    *member = b.data;
    *len = b.len;
    return 0;
}

/* Boxes: (N, 4) or (N, 5) of float32 or float64. */
static const char *boxes_refused(const gf__npy *a)
{
    if (a->ndim != 2 || (a->shape[1] != 4 && a->shape[1] != 5))
        return "boxes are (N, 4) or (N, 5): x1 y1 x2 y2 [class]";
    if (a->dtype != GF_DTYPE_FLOAT32 && a->dtype != GF_DTYPE_FLOAT64)
        return "boxes are float32 or float64";
    return NULL;
}

/* An array or boxes field's layout from the first sample whose member
 * parses (a few are tried: a damaged one is that sample's error, not the
 * data set's). A member that cannot be read fails the open: skipping it
 * would let a transient error pick another sample's layout. */
static int plan_from_members(gf_loader *l, int k)
{
    const gf__dataset *ds = &l->ds;
    gf__field_layout *fl = &l->field_layout[k];
    char why[256] = "";
    for (uint64_t i = 0; i < ds->n && i < 16; i++) {
        void *buf;
        const uint8_t *p;
        size_t n;
        int rc = read_member(l, i, k, &buf, &p, &n, why, sizeof why);
        if (rc < 0)
            return gf__fail(l, rc, "field '%s': its layout from %s: %s", name_of(l, k),
                            gf__dataset_path(ds, i), rc == GF_ENOMEM ? "out of memory" : why);
        gf__npy a;
        char pwhy[200];
        rc = gf__npy_parse(p, n, &a, pwhy, sizeof pwhy);
        free(buf);
        const char *bad = rc < 0 ? pwhy : kind_of(l, k) == GF_FIELD_BOXES ? boxes_refused(&a) : NULL;
        if (bad) {
            gf__why(why, sizeof why, "%s: %s", gf__dataset_path(ds, i), bad);
            continue;
        }
        if (kind_of(l, k) == GF_FIELD_BOXES) {
            *fl = (gf__field_layout){.region = GF__MAX(ds->var_max[k], 1u),
                                     .dtype = GF_DTYPE_FLOAT32,
                                     .ndim = 2,
                                     .shape = {0, a.shape[1]}};
        } else {
            *fl = (gf__field_layout){.region = a.data_bytes ? a.data_bytes : 1,
                                     .dtype = a.dtype,
                                     .ndim = a.ndim,
                                     .npy_header = a.data_bytes ? a.header_bytes : 0};
            memcpy(fl->shape, a.shape, sizeof a.shape);
        }
        return 0;
    }
    return gf__fail(l, GF_EDATASET, "field '%s': no sample's member could be read for its %s: %s",
                    name_of(l, k), kind_of(l, k) == GF_FIELD_BOXES ? "columns" : "shape", why);
}

size_t gf__fields_tensor_bytes(const gf_loader *l)
{
    size_t n = 0;
    for (int k = 0; k < l->ds.n_var; k++)
        if (packed(kind_of(l, k)))
            n = l->field_layout[k].tensor_at + (size_t)l->B * l->field_layout[k].region;
    return n;
}

size_t gf__fields_slot_bytes(const gf_loader *l)
{
    size_t n = gf__fields_tensor_bytes(l);
    for (int k = 0; k < l->ds.n_var; k++)
        n += (size_t)l->B * l->field_layout[k].region;
    return n;
}

int gf__fields_plan(gf_loader *l)
{
    const gf__dataset *ds = &l->ds;
    for (int k = 0; k < ds->n_var; k++) {
        gf__field_layout *fl = &l->field_layout[k];
        switch (kind_of(l, k)) {
        case GF_FIELD_MASK:
            if (!GF_HAVE_SPNG) /* stb_image gives a palette's colours, not its indices */
                return gf__fail(l, GF_EINVAL, "field '%s': a mask needs libspng, which this build "
                                              "lacks (meson -Dspng=enabled)",
                                name_of(l, k));
            *fl = (gf__field_layout){.region = (size_t)l->s.width * (size_t)l->s.height,
                                     .dtype = GF_DTYPE_UINT8,
                                     .ndim = 2,
                                     .shape = {l->s.height, l->s.width}};
            break;
        case GF_FIELD_ARRAY:
        case GF_FIELD_BOXES:
            if (ds->n == 0) {
                *fl = (gf__field_layout){.region = 1, .dtype = GF_DTYPE_UINT8, .ndim = 1};
                break;
            }
            int rc = plan_from_members(l, k);
            if (rc < 0)
                return rc;
            break;
        default: /* text, bytes */
            *fl = (gf__field_layout){.region = GF__MAX(ds->var_max[k], 1u),
                                     .dtype = GF_DTYPE_UINT8};
        }
    }
    /* The arrays' and masks' tensors one after another, each 64-byte
     * aligned, in one block a slot (one copy to the device). */
    size_t at = 0;
    for (int k = 0; k < ds->n_var; k++) {
        if (!packed(kind_of(l, k)))
            continue;
        size_t bytes = (size_t)l->B * l->field_layout[k].region;
        if (bytes / (size_t)l->B != l->field_layout[k].region || at + bytes + 63 < at)
            return gf__fail(l, GF_EINVAL, "field '%s': a batch of %d is too large", name_of(l, k),
                            l->B);
        l->field_layout[k].tensor_at = at;
        at = (at + bytes + 63) & ~(size_t)63;
    }
    return 0;
}

/* ---- the slots' memory ---- */

void gf__fields_free(gf__slot *sl)
{
    for (int k = 0; k < GF__FIELDS_MAX; k++) {
        if (!(sl->var_in_tensors & 1u << k))
            free(sl->var_bytes[k]);
        free(sl->var_len[k]);
        free(sl->var_offsets[k]);
        free(sl->var_lengths[k]);
        free(sl->out_var_bytes[k]);
        free(sl->out_var_offsets[k]);
        free(sl->out_var_lengths[k]);
    }
    if (sl->tensors)
        gf__host_free(sl->l->dev, sl->tensors, sl->tensors_pinned);
    free(sl->home);
    free(sl->home_cell);
    free(sl->fields);
    free(sl->out_fields);
}

/* The batch's table: each field's name, kind and layout, and where its
 * samples are (the slot's own, or on CUDA the copies). */
static gf_field *field_table(const gf_loader *l, gf__slot *sl, int copies)
{
    const gf__dataset *ds = &l->ds;
    gf_field *t = calloc((size_t)ds->schema.n, sizeof *t);
    if (!t)
        return NULL;
    for (int f = 0, k = 0; f < ds->schema.n; f++) {
        gf_field_kind kind = ds->schema.field[f].kind;
        t[f] = (gf_field){.name = ds->schema.name[f],
                          .kind = kind,
                          .device = copies && kind == GF_FIELD_IMAGE ? GF_DEVICE_CUDA
                                                                     : GF_DEVICE_CPU};
        if (k < ds->n_var && ds->var_field[k] == f) {
            const gf__field_layout *fl = &l->field_layout[k];
            t[f].dtype = fl->dtype;
            if (packed(t[f].kind)) {
                /* on CUDA the device slot's, the delivery slot's index */
                t[f].data = copies ? (uint8_t *)gf__device_fields(l->dev, (int)(sl - l->slots)) +
                                         fl->tensor_at
                                   : sl->tensors + fl->tensor_at;
                t[f].device = copies ? GF_DEVICE_CUDA : GF_DEVICE_CPU;
                t[f].ndim = 1 + fl->ndim;
                memcpy(t[f].shape + 1, fl->shape, (size_t)fl->ndim * sizeof *fl->shape);
            } else {
                t[f].data = copies ? sl->out_var_bytes[k] : sl->var_bytes[k];
                t[f].offsets = copies ? sl->out_var_offsets[k] : sl->var_offsets[k];
                t[f].lengths = copies ? sl->out_var_lengths[k] : sl->var_lengths[k];
                t[f].ndim = t[f].kind == GF_FIELD_BOXES ? 2 : 1;
                if (t[f].kind == GF_FIELD_BOXES)
                    t[f].shape[1] = fl->shape[1];
            }
            k++;
        }
    }
    return t;
}

int gf__fields_alloc(gf_loader *l, gf__slot *sl)
{
    size_t B = (size_t)l->B;
    int n_var = l->ds.n_var;
    if (n_var) {
        sl->home = malloc(B * sizeof *sl->home);
        sl->home_cell = malloc(B * sizeof *sl->home_cell);
        if (!sl->home || !sl->home_cell)
            return GF_ENOMEM;
        for (size_t c = 0; c < B; c++)
            sl->home[c] = (int32_t)c;
    }
    size_t tensors = gf__fields_tensor_bytes(l);
    char note[160];
    if (tensors && !(sl->tensors = gf__host_alloc(l->dev, tensors, &sl->tensors_pinned, note,
                                                  sizeof note)))
        return GF_ENOMEM;
    for (int k = 0; k < n_var; k++) {
        size_t cap = region_bytes(l, k);
        if (cap && B * cap / cap != B)
            return GF_ENOMEM;
        if (packed(kind_of(l, k))) { /* taken straight into the batch's tensor */
            sl->var_bytes[k] = sl->tensors + l->field_layout[k].tensor_at;
            sl->var_in_tensors |= 1u << k;
        } else if (!(sl->var_bytes[k] = malloc(B * cap))) {
            return GF_ENOMEM;
        }
        if (!(sl->var_len[k] = calloc(B, sizeof *sl->var_len[k])) ||
            !(sl->var_offsets[k] = calloc(B, sizeof *sl->var_offsets[k])) ||
            !(sl->var_lengths[k] = calloc(B, sizeof *sl->var_lengths[k])))
            return GF_ENOMEM;
        if (l->dev && !packed(kind_of(l, k)) && (!(sl->out_var_bytes[k] = malloc(B * cap)) ||
                       !(sl->out_var_offsets[k] = calloc(B, sizeof *sl->out_var_offsets[k])) ||
                       !(sl->out_var_lengths[k] = calloc(B, sizeof *sl->out_var_lengths[k]))))
            return GF_ENOMEM;
    }
    if (!(sl->fields = field_table(l, sl, 0)))
        return GF_ENOMEM;
    if (l->dev && !(sl->out_fields = field_table(l, sl, 1)))
        return GF_ENOMEM;
    return 0;
}

/* ---- taking a sample's members, on its decode thread ---- */

/* The length of p[0, n)'s valid UTF-8 prefix (RFC 3629: no overlongs,
 * no surrogates, nothing past U+10FFFF). */
static size_t utf8_valid(const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
                     : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        if (len == 0 || n - i < len)
            return i;
        uint8_t lo = 0x80, hi = 0xbf; /* the second byte's range */
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f;
        else if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
        if (p[i + 1] < lo || p[i + 1] > hi)
            return i;
        for (size_t k = 2; k < len; k++)
            if ((p[i + k] & 0xc0) != 0x80)
                return i;
        i += len;
    }
    return i;
}

/* An array member: its data, if its dtype and shape are the field's
 * (already at dst when the read put it there). */
static int take_array(const gf__field_layout *fl, const uint8_t *p, uint32_t n, uint8_t *dst,
                      bool in_place, char *why, size_t why_len)
{
    gf__npy a;
    int rc = gf__npy_parse(p, n, &a, why, why_len);
    if (rc < 0)
        return rc;
    if (a.dtype != fl->dtype || a.ndim != fl->ndim ||
        memcmp(a.shape, fl->shape, (size_t)a.ndim * sizeof *a.shape) != 0) {
        gf__npy want = {.dtype = fl->dtype, .ndim = fl->ndim};
        memcpy(want.shape, fl->shape, sizeof want.shape);
        char got_s[96], want_s[96];
        gf__npy_shape_text(&a, got_s, sizeof got_s);
        gf__npy_shape_text(&want, want_s, sizeof want_s);
        gf__why(why, why_len, "%s %s, the field's is %s %s (its first sample's)",
                gf__npy_dtype_name(a.dtype), got_s, gf__npy_dtype_name(fl->dtype), want_s);
        return GF_ECORRUPT;
    }
    if (!in_place)
        memcpy(dst, p + a.header_bytes, (size_t)a.data_bytes);
    return 0;
}

/* A boxes member, moved by the image's crop: float32 rows into dst, *len
 * their bytes. */
static int take_boxes(const gf_loader *l, const gf__field_layout *fl, const uint8_t *p,
                      uint32_t n, const gf__decoder *d, gf__fields_scratch *ws, uint8_t *dst,
                      uint32_t *len, char *why, size_t why_len)
{
    gf__npy a;
    int rc = gf__npy_parse(p, n, &a, why, why_len);
    if (rc < 0)
        return rc;
    const char *bad = boxes_refused(&a);
    if (!bad && a.shape[1] != fl->shape[1])
        bad = a.shape[1] == 4 ? "(N, 4) boxes; the field's first sample has a class column"
                              : "(N, 5) boxes; the field's first sample has no class column";
    if (bad) {
        gf__why(why, why_len, "%s", bad);
        return GF_ECORRUPT;
    }
    size_t values = (size_t)(a.shape[0] * a.shape[1]);
    if (GF__GROW(&ws->boxes, &ws->boxes_cap, values, 64) < 0)
        return GF_ENOMEM;
    gf__boxes_load(p + a.header_bytes, a.dtype, values, ws->boxes);
    gf__crop c;
    int W, H;
    gf__decoder_geometry(d, &W, &H, &c);
    long kept = gf__boxes_apply(&c, l->s.width, l->s.height, ws->boxes, (size_t)a.shape[0],
                                (int)a.shape[1], (float *)(void *)dst, why, why_len);
    if (kept < 0)
        return GF_ECORRUPT;
    *len = (uint32_t)((size_t)kept * (size_t)a.shape[1] * sizeof(float));
    return 0;
}

int gf__fields_holes(const gf_loader *l, const gf__slot *sl, int cell, uint64_t sample,
                     uint64_t start, gf__read_hole *h, uint32_t *in_place)
{
    const gf__dataset *ds = &l->ds;
    int n = 0;
    *in_place = 0;
    for (int k = 0; k < ds->n_var; k++) {
        const gf__field_layout *fl = &l->field_layout[k];
        if (kind_of(l, k) != GF_FIELD_ARRAY || !fl->npy_header ||
            ds->var_len[k][sample] != fl->npy_header + fl->region)
            continue;
        /* the sample's own member, whose CRC32C the member check takes
         * over the bytes read */
        if (ds->data_crc && ds->data_crc[sample] >= 0 && ds->var_off[k][sample] == ds->data_off[sample])
            continue;
        h[n++] = (gf__read_hole){
            .at = (size_t)(ds->var_off[k][sample] - start) + fl->npy_header,
            .len = fl->region,
            .dst = sl->var_bytes[k] + (size_t)sl->home[cell] * fl->region};
        *in_place |= 1u << k;
    }
    return n;
}

void gf__fields_members_in(const gf_loader *l, uint64_t sample, const uint8_t *bytes,
                           gf__members *m)
{
    m->in_place = 0;
    const gf__dataset *ds = &l->ds;
    const char *rel;
    uint64_t start, len;
    gf__dataset_extent(ds, sample, &rel, &start, &len);
    for (int k = 0; k < ds->n_var; k++) {
        m->p[k] = bytes + (ds->var_off[k][sample] - start);
        m->n[k] = ds->var_len[k][sample];
    }
}

int gf__fields_read_files(const gf_loader *l, uint64_t sample, const gf__buf *own,
                          gf__buf bufs[GF__FIELDS_MAX], gf__members *m, int *field, char *why,
                          size_t why_len)
{
    const gf__dataset *ds = &l->ds;
    m->in_place = 0;
    for (int k = 0; k < ds->n_var; k++) {
        const gf__buf *b = &bufs[k];
        const char *path = gf__dataset_field_file(ds, sample, k);
        if (ds->schema.image < 0 && k == 0) {
            b = own; /* the sample's own file, read with the loader's cap */
            if (own->len > ds->var_max[k]) {
                gf__why(why, why_len, "field '%s': %s: %zu bytes, over the field's %u",
                        name_of(l, k), path, own->len, (unsigned)ds->var_max[k]);
                *field = ds->var_field[k];
                return GF_ETOOBIG;
            }
        } else {
            gf__read_opts o = {.max_bytes = ds->var_max[k]};
            char reason[160];
            int rc = gf__read_sample(ds->root_fd, path, 0, GF__WHOLE_FILE, &o, &bufs[k], reason,
                                     sizeof reason);
            if (rc < 0) {
                gf__why(why, why_len, "field '%s': %s: %s", name_of(l, k), path, reason);
                *field = ds->var_field[k];
                return rc;
            }
        }
        m->p[k] = b->data;
        m->n[k] = (uint32_t)b->len;
    }
    return 0;
}

int gf__fields_take(const gf_loader *l, gf__slot *sl, int cell, const gf__members *m,
                    const gf__decoder *d, gf__fields_scratch *ws, int *field, char *why,
                    size_t why_len)
{
    const gf__dataset *ds = &l->ds;
    int32_t region = sl->home[cell];
    for (int k = 0; k < ds->n_var; k++) {
        const uint8_t *p = m->p[k];
        uint32_t n = m->n[k], got = n;
        if (n > ds->var_max[k]) { /* the readers cap it: never past the region */
            gf__why(why, why_len, "field '%s': %u bytes, over its %u", name_of(l, k), (unsigned)n,
                    (unsigned)ds->var_max[k]);
            *field = ds->var_field[k];
            return GF_ETOOBIG;
        }
        const gf__field_layout *fl = &l->field_layout[k];
        uint8_t *dst = sl->var_bytes[k] + (size_t)region * fl->region;
        char reason[200] = "";
        int rc = 0;
        switch (kind_of(l, k)) {
        case GF_FIELD_TEXT: {
            size_t ok = utf8_valid(p, n);
            if (ok < n) {
                snprintf(reason, sizeof reason, "not UTF-8 at byte %zu of %u", ok, (unsigned)n);
                rc = GF_ECORRUPT;
                break;
            }
            memcpy(dst, p, n);
            break;
        }
        case GF_FIELD_ARRAY:
            /* In place: the member is its field's first's length, so a
             * header that parses to the field's shape is as long as that
             * one's, and the data is where the read put it. */
            rc = take_array(fl, p, n, dst, (m->in_place >> k) & 1, reason, sizeof reason);
            got = (uint32_t)fl->region;
            break;
        case GF_FIELD_MASK: {
            gf__crop c;
            int W, H;
            gf__decoder_geometry(d, &W, &H, &c);
            rc = gf__mask_crop(&ws->mask, p, n, W, H, &c, l->s.width, l->s.height, dst, reason,
                               sizeof reason);
            got = (uint32_t)fl->region;
            break;
        }
        case GF_FIELD_BOXES:
            rc = take_boxes(l, fl, p, n, d, ws, dst, &got, reason, sizeof reason);
            break;
        default: /* bytes */
            memcpy(dst, p, n);
        }
        if (rc < 0) {
            gf__why(why, why_len, "field '%s': %s", name_of(l, k), reason);
            *field = ds->var_field[k];
            return rc;
        }
        sl->var_len[k][region] = got;
    }
    return 0;
}

/* ---- moving and delivering, on gf-control ---- */

void gf__fields_move(const gf_loader *l, gf__slot *from, int fc, gf__slot *to, int tc)
{
    if (!from->home)
        return;
    if (from == to) {
        int32_t h = to->home[tc];
        to->home[tc] = from->home[fc];
        from->home[fc] = h;
        return;
    }
    int32_t src = from->home[fc], dst = to->home[tc];
    for (int k = 0; k < l->ds.n_var; k++) {
        size_t cap = region_bytes(l, k);
        memcpy(to->var_bytes[k] + (size_t)dst * cap, from->var_bytes[k] + (size_t)src * cap,
               from->var_len[k][src]);
        to->var_len[k][dst] = from->var_len[k][src];
    }
}

/* Regions a and b of field k exchanged, bytes and lengths. */
static void swap_regions(const gf_loader *l, gf__slot *sl, int k, int32_t a, int32_t b)
{
    size_t cap = region_bytes(l, k);
    uint8_t *pa = sl->var_bytes[k] + (size_t)a * cap, *pb = sl->var_bytes[k] + (size_t)b * cap;
    uint32_t la = sl->var_len[k][a], lb = sl->var_len[k][b];
    size_t n = GF__MAX(la, lb);
    uint8_t tmp[512];
    for (size_t at = 0; at < n; at += sizeof tmp) {
        size_t m = GF__MIN(sizeof tmp, n - at);
        memcpy(tmp, pa + at, m);
        memcpy(pa + at, pb + at, m);
        memcpy(pb + at, tmp, m);
    }
    sl->var_len[k][a] = lb;
    sl->var_len[k][b] = la;
}

/* Every cell's regions made its own (home the identity): a swap a cell
 * whose bytes moved (holes filled, the batch sorted), none otherwise, so
 * an array's or mask's tensor is delivered where it was taken. */
static void regions_in_place(const gf_loader *l, gf__slot *sl)
{
    if (!sl->home)
        return;
    int B = l->B, c = 0;
    while (c < B && sl->home[c] == c)
        c++;
    if (c == B)
        return;
    for (int i = 0; i < B; i++)
        sl->home_cell[sl->home[i]] = i;
    for (int r = 0; r < B; r++) {
        while (sl->home_cell[r] != r) { /* region r holds cell m's; m's place holds another's */
            int m = sl->home_cell[r];
            for (int k = 0; k < l->ds.n_var; k++)
                swap_regions(l, sl, k, r, m);
            sl->home_cell[r] = sl->home_cell[m];
            sl->home_cell[m] = m;
        }
    }
    for (int i = 0; i < B; i++)
        sl->home[i] = i;
}

void gf__fields_deliver(const gf_loader *l, gf__slot *sl, int count)
{
    regions_in_place(l, sl);
    for (int k = 0; k < l->ds.n_var; k++) {
        size_t cap = region_bytes(l, k);
        int f = l->ds.var_field[k];
        if (packed(kind_of(l, k))) {
            sl->fields[f].shape[0] = count;
            continue;
        }
        for (int c = 0; c < count; c++) {
            sl->var_offsets[k][c] = (uint64_t)c * cap;
            sl->var_lengths[k][c] = sl->var_len[k][c];
        }
        if (kind_of(l, k) != GF_FIELD_BOXES)
            sl->fields[f].shape[0] = count;
    }
}

void gf__fields_copy_out(const gf_loader *l, const gf__slot *src, gf__slot *out, int count)
{
    for (int k = 0; k < l->ds.n_var; k++) {
        int f = l->ds.var_field[k];
        if (packed(kind_of(l, k))) { /* copied to the device with the pixels */
            out->out_fields[f].shape[0] = count;
            continue;
        }
        uint64_t at = 0;
        for (int c = 0; c < count; c++) {
            uint32_t n = src->var_lengths[k][c];
            memcpy(out->out_var_bytes[k] + at, src->var_bytes[k] + src->var_offsets[k][c], n);
            out->out_var_offsets[k][c] = at;
            out->out_var_lengths[k][c] = n;
            at += n;
        }
        out->out_fields[f].shape[0] = src->fields[f].shape[0];
    }
}
