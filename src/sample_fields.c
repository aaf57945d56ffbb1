/* A sample's text and bytes fields in its batch slot (sample_fields.h):
 * their regions, taken on the decode threads, moved with their cells,
 * delivered as offsets and lengths. */
#include "sample_fields.h"

#include "loader_impl.h"

#include <stdlib.h>
#include <string.h>

/* A field's region: its largest member's bytes (at least one). */
static size_t region_bytes(const gf_loader *l, int k)
{
    return l->ds.var_max[k] ? l->ds.var_max[k] : 1;
}

void gf__fields_free(gf__slot *sl)
{
    for (int k = 0; k < GF__FIELDS_MAX; k++) {
        free(sl->var_bytes[k]);
        free(sl->var_len[k]);
        free(sl->var_offsets[k]);
        free(sl->var_lengths[k]);
        free(sl->out_var_bytes[k]);
        free(sl->out_var_offsets[k]);
        free(sl->out_var_lengths[k]);
    }
    free(sl->home);
    free(sl->fields);
    free(sl->out_fields);
}

/* The batch's table: each field's name and kind, and where its samples
 * are (bytes, offsets, lengths: the slot's own, or on CUDA the copies). */
static gf_field *field_table(const gf_loader *l, uint8_t *const *bytes,
                             uint64_t *const *offsets, uint32_t *const *lengths)
{
    const gf__dataset *ds = &l->ds;
    gf_field *t = calloc((size_t)ds->schema.n, sizeof *t);
    if (!t)
        return NULL;
    for (int f = 0, k = 0; f < ds->schema.n; f++) {
        t[f] = (gf_field){.name = ds->schema.name[f], .kind = ds->schema.field[f].kind};
        if (k < ds->n_var && ds->var_field[k] == f) {
            t[f].data = bytes[k];
            t[f].offsets = offsets[k];
            t[f].lengths = lengths[k];
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
        if (!sl->home)
            return GF_ENOMEM;
        for (size_t c = 0; c < B; c++)
            sl->home[c] = (int32_t)c;
    }
    for (int k = 0; k < n_var; k++) {
        size_t cap = region_bytes(l, k);
        if (!(sl->var_bytes[k] = malloc(B * cap)) ||
            !(sl->var_len[k] = calloc(B, sizeof *sl->var_len[k])) ||
            !(sl->var_offsets[k] = calloc(B, sizeof *sl->var_offsets[k])) ||
            !(sl->var_lengths[k] = calloc(B, sizeof *sl->var_lengths[k])))
            return GF_ENOMEM;
        if (l->dev && (!(sl->out_var_bytes[k] = malloc(B * cap)) ||
                       !(sl->out_var_offsets[k] = calloc(B, sizeof *sl->out_var_offsets[k])) ||
                       !(sl->out_var_lengths[k] = calloc(B, sizeof *sl->out_var_lengths[k]))))
            return GF_ENOMEM;
    }
    if (!(sl->fields = field_table(l, sl->var_bytes, sl->var_offsets, sl->var_lengths)))
        return GF_ENOMEM;
    if (l->dev && !(sl->out_fields = field_table(l, sl->out_var_bytes, sl->out_var_offsets,
                                                 sl->out_var_lengths)))
        return GF_ENOMEM;
    return 0;
}

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

int gf__fields_take(const gf_loader *l, gf__slot *sl, int cell, uint64_t sample,
                    const uint8_t *bytes, char *why, size_t why_len)
{
    const gf__dataset *ds = &l->ds;
    const char *rel;
    uint64_t start, len;
    gf__dataset_extent(ds, sample, &rel, &start, &len);
    int32_t region = sl->home[cell];
    for (int k = 0; k < ds->n_var; k++) {
        const uint8_t *p = bytes + (ds->var_off[k][sample] - start);
        uint32_t n = ds->var_len[k][sample];
        const gf__field *f = &ds->schema.field[ds->var_field[k]];
        if (f->kind == GF_FIELD_TEXT) {
            size_t ok = utf8_valid(p, n);
            if (ok < n) {
                gf__why(why, why_len, "field '%s': not UTF-8 at byte %zu of %u",
                        ds->schema.name[ds->var_field[k]], ok, (unsigned)n);
                return GF_ECORRUPT;
            }
        }
        memcpy(sl->var_bytes[k] + (size_t)region * region_bytes(l, k), p, n);
        sl->var_len[k][region] = n;
    }
    return 0;
}

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

void gf__fields_deliver(const gf_loader *l, gf__slot *sl, int count)
{
    for (int k = 0; k < l->ds.n_var; k++) {
        size_t cap = region_bytes(l, k);
        for (int c = 0; c < count; c++) {
            sl->var_offsets[k][c] = (uint64_t)sl->home[c] * cap;
            sl->var_lengths[k][c] = sl->var_len[k][sl->home[c]];
        }
    }
}

void gf__fields_copy_out(const gf_loader *l, const gf__slot *src, gf__slot *out, int count)
{
    for (int k = 0; k < l->ds.n_var; k++) {
        uint64_t at = 0;
        for (int c = 0; c < count; c++) {
            uint32_t n = src->var_lengths[k][c];
            memcpy(out->out_var_bytes[k] + at, src->var_bytes[k] + src->var_offsets[k][c], n);
            out->out_var_offsets[k][c] = at;
            out->out_var_lengths[k][c] = n;
            at += n;
        }
    }
}
