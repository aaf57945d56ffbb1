/* Dataset index from WebDataset-style tar shards: members grouped into
 * samples by key (KEY.jpg + KEY.cls), each sample's bytes located by
 * (shard, offset, size). Run once, at open, by the thread that calls
 * gf_open.
 *
 * Shards are scanned once (tar.c reads only the headers and the tiny .cls
 * members, through a small read window); a sample costs its display name
 * "shard.tar:key.jpg" in the arena plus 28 bytes (path offset, label,
 * shard index, data offset, 32-bit size).
 *
 * A damaged shard (the scan stops: see tar.h) fails the open, or (skip)
 * keeps the members the scan passed before the damage: samples whose
 * image and label both lie wholly before it; the key the damage cut is
 * lost. Shards are scanned one after another in source order, so the kept
 * set is a function of the files alone, whatever the thread count.
 * Patterns expand in shard_pattern.c; gf_shard_index's public door,
 * shard_index.c, calls gf__shard_index_fd here, whose sidecar text
 * sidecar_text.c writes. */
#include "dataset_indexers.h"

#include "reader_internal.h"

#include "crc32c.h"
#include "shard_pattern.h"
#include "sidecar_text.h"
#include "tar.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define CLS_MAX 64

static void ds_warn(gf__dataset *ds, const char *fmt, ...)
{
    ds->warnings++;
    if (ds->warning[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ds->warning, sizeof ds->warning, fmt, ap);
    va_end(ap);
}

/* The sample being gathered: consecutive members with one key. */
typedef struct shard_scan {
    gf__dataset *ds;
    gf__builder *b;
    uint32_t shard;
    const char *path;      /* for messages */
    const char *display;   /* its basename, the arena names' prefix */
    size_t display_len;
    int32_t max_label;
    int open;              /* a key is being gathered */
    char *key;             /* current key and image member name */
    size_t key_len, key_cap;
    char *img;
    size_t img_len, img_cap;
    int has_img, has_cls;
    const gf__schema *schema; /* the sample's fields */
    int img_alt;           /* which of the image field's alternatives it is */
    struct {               /* the schema's fields beyond image and label (ds->var_field) */
        int has, alt;
        uint64_t off, size;
        char ext[GF__FIELD_EXT_MAX + 1]; /* the member's, as spelled */
    } var[GF__FIELDS_MAX];
    const char *bad;       /* why the key cannot be a sample */
    int bad_label;         /* ... its .cls, which is no label, or a member too
                              big for its field */
    char bad_ext[GF__FIELD_EXT_MAX + 1]; /* that member's extension, as spelled */
    char missing[64];      /* bad's text when it is made here */
    int bad_label_fails;   /* then the open fails (on_error = fail) */
    uint64_t img_off, img_size, key_at;
    int32_t label;
    struct sidecar_out *out; /* gf_shard_index: the sidecar written instead
                                of samples added; else NULL */
    int line_member;       /* gf_shard_index: the line's member its CRC is of
                              (the parser's rule: its image, else its first
                              member but the .cls): 0 none yet, 1 that first
                              member, 2 an image */
    uint64_t line_off, line_size;
    int from_sidecar;      /* members from a sidecar's line, not the shard:
                              the label is line_label, not read */
    int32_t line_label;
    uint64_t members;      /* this shard's, seen by on_member */
    uint64_t key_members;  /* the current key's */
    char *why;             /* the scan's error message */
    size_t why_len;
} shard_scan;

static int keep_name(char **p, size_t *cap, const char *s, size_t n)
{
    if (GF__GROW(p, cap, n + 1, 64) < 0)
        return GF_ENOMEM;
    memcpy(*p, s, n);
    (*p)[n] = '\0';
    return 0;
}

static int key_is_sample(const shard_scan *c)
{
    for (int k = 0; k < c->ds->n_var; k++)
        if (!c->var[k].has)
            return 0;
    return !c->bad && (c->has_img || c->schema->image < 0) &&
           (c->has_cls || c->schema->label < 0);
}

/* A sample of shard c->shard: "shard.tar:member" in the arena (then its
 * field members' extensions), its label and where its image and
 * those members lie (its CRC32C unknown: a matching sidecar's is set
 * later, gf__shard_sidecar_match). */
static int add_sample(shard_scan *c, const char *name, size_t name_len, int32_t label,
                      uint64_t off, uint64_t size)
{
    gf__builder *b = c->b;
    size_t need = c->display_len + 1 + name_len + 1;
    for (int k = 0; k < b->n_var; k++)
        need += strlen(c->var[k].ext) + 1;
    if (gf__builder_reserve_paths(b, need) < 0 || gf__builder_reserve_samples(b, 1) < 0)
        return GF_ENOMEM;
    char *p = b->arena + b->arena_len;
    memcpy(p, c->display, c->display_len);
    p[c->display_len] = ':';
    memcpy(p + c->display_len + 1, name, name_len);
    p[c->display_len + 1 + name_len] = '\0';
    char *ext = p + c->display_len + 1 + name_len + 1;
    for (int k = 0; k < b->n_var; k++) {
        size_t n = strlen(c->var[k].ext) + 1;
        memcpy(ext, c->var[k].ext, n);
        ext += n;
        b->voff[k][b->n] = c->var[k].off;
        b->vlen[k][b->n] = (uint32_t)c->var[k].size;
    }
    b->off[b->n] = b->arena_len;
    b->labels[b->n] = label;
    b->shard[b->n] = c->shard;
    b->doff[b->n] = off;
    assert(size <= UINT32_MAX); /* larger ones are bad keys */
    b->dlen[b->n] = (uint32_t)size;
    b->dcrc[b->n] = -1;
    b->n++;
    b->arena_len += need;
    if (label > c->max_label)
        c->max_label = label;
    return 0;
}

/* The header block at h announces `name` of size bytes, at off. */
static int header_check(const char *shard, const uint8_t *h, const char *name, size_t name_len,
                        uint64_t size, uint64_t off, char *why, size_t why_len)
{
    char reason[200];
    int rc = gf__tar_member_check(h, name, name_len, size, reason, sizeof reason);
    if (rc < 0)
        gf__why(why, why_len, "%s: offset %llu: %s", shard, (unsigned long long)off, reason);
    return rc;
}

/* The length of member name's KEY: up to the first '.' of its base name. */
static size_t key_length(const char *name)
{
    const char *slash = strrchr(name, '/');
    const char *dot = strchr(slash ? slash + 1 : name, '.');
    return dot ? (size_t)(dot - name) : strlen(name);
}

/* The arena's "base.tar:member" of sample i: the member's name after
 * the shard's base name. */
static const char *member_name(const gf__dataset *ds, uint64_t i)
{
    const char *shard = ds->shard_paths[ds->shard[i]];
    const char *slash = strrchr(shard, '/');
    return gf__dataset_path(ds, i) + strlen(slash ? slash + 1 : shard) + 1;
}

char *gf__dataset_member_path(const gf__dataset *ds, uint64_t i, int f)
{
    if (!gf__dataset_member(ds, i)) { /* a list's field is a file of its own */
        for (int k = 0; k < ds->n_var; k++)
            if (ds->var_field[k] == f)
                return strdup(gf__dataset_field_file(ds, i, k));
        return NULL;
    }
    const char *path = gf__dataset_path(ds, i), *name = member_name(ds, i);
    const char *ext = name + strlen(name) + 1; /* the fields' extensions follow */
    int k = 0;
    for (; k < ds->n_var && ds->var_field[k] != f; k++)
        ext += strlen(ext) + 1;
    if (k == ds->n_var)
        return NULL;
    size_t head = (size_t)(name - path) + key_length(name), n = strlen(ext);
    char *out = malloc(head + 1 + n + 1);
    if (out) {
        memcpy(out, path, head);
        out[head] = '.';
        memcpy(out + head + 1, ext, n + 1);
    }
    return out;
}

/* Sample i's field members' headers in its extent's bytes p,
 * which start at `start` in the shard; name is its image member's. */
static int var_headers_check(const gf__dataset *ds, uint64_t i, const uint8_t *p,
                             uint64_t start, const char *shard, const char *name, char *why,
                             size_t why_len)
{
    size_t key_len = key_length(name);
    const char *ext = name + strlen(name) + 1; /* the fields' extensions follow */
    /* On the decode thread for every sample: the name on the stack, but
     * for the rare key longer than a ustar header holds (a pax name). */
    char stack[320];
    for (int k = 0; k < ds->n_var; k++) {
        size_t ext_len = strlen(ext), len = key_len + 1 + ext_len;
        if (ds->var_off[k][i] == ds->data_off[i]) { /* no image: the sample's own, checked */
            ext += ext_len + 1;
            continue;
        }
        char *vname = len < sizeof stack ? stack : malloc(len + 1);
        if (!vname)
            return GF_ENOMEM;
        memcpy(vname, name, key_len);
        vname[key_len] = '.';
        memcpy(vname + key_len + 1, ext, ext_len + 1);
        uint64_t at = ds->var_off[k][i] - GF__TAR_BLOCK;
        int rc = header_check(shard, p + (at - start), vname, len, ds->var_len[k][i], at, why,
                              why_len);
        if (vname != stack)
            free(vname);
        if (rc < 0)
            return rc;
        ext += ext_len + 1;
    }
    return 0;
}

int gf__dataset_member_check(const gf__dataset *ds, uint64_t i, const uint8_t *p, size_t n,
                             char *why, size_t why_len)
{
    if (!gf__dataset_member(ds, i))
        return 0;
    const char *shard = ds->shard_paths[ds->shard[i]];
    const char *rel;
    uint64_t start, len;
    gf__dataset_extent(ds, i, &rel, &start, &len);
    if (n != len) {
        gf__why(why, why_len, "%s: %zu bytes read for %llu, the sample's members and headers",
                shard, n, (unsigned long long)len);
        return GF_ETRUNC;
    }
    const char *name = member_name(ds, i);
    size_t img = (size_t)(ds->data_off[i] - start);
    int rc = header_check(shard, p + img - GF__TAR_BLOCK, name, strlen(name), ds->data_len[i],
                          ds->data_off[i] - GF__TAR_BLOCK, why, why_len);
    if (rc == 0 && ds->n_var)
        rc = var_headers_check(ds, i, p, start, shard, name, why, why_len);
    if (rc < 0)
        return rc;
    /* The header names the member; only its bytes can tell this shard's
     * from another of the same layout's, or from a damaged copy. */
    if (ds->data_crc && ds->data_crc[i] >= 0) {
        uint32_t got = gf__crc32c(p + img, ds->data_len[i]);
        if (got != (uint32_t)ds->data_crc[i]) {
            gf__why(why, why_len,
                    "%s: member '%s': its index sidecar records member_crc32c %08x, the bytes "
                    "read give %08x: the sidecar is another shard's, or the shard is damaged",
                    shard, name, (unsigned)ds->data_crc[i], (unsigned)got);
            return GF_ECORRUPT;
        }
    }
    return 0;
}

/* gf_shard_index's sidecar: the lines of the samples the scan takes, in
 * DALI's v1.2 form (sidecar_text.c writes them), each with every member
 * of its key the scan kept. */
typedef struct sidecar_out {
    gf__sidecar_text text;
    int fd; /* the shard, read for the images' CRCs */
} sidecar_out;

/* A kept member of the current key into its line, and (as
 * dataset_shard_sidecar.c's parse_line finds it) whether it is the one
 * the line's member_crc32c= value is of: the line's image, else its first
 * member other than the .cls, whatever the scan's schema (so a loader of
 * another schema never checks a CRC against another member's bytes). */
static int list_member(shard_scan *c, const gf__tar_member *m, const char *ext, size_t ext_len)
{
    if (!c->out)
        return 0;
    int img = gf__is_image_suffix(ext, ext_len);
    if ((img && c->line_member < 2) ||
        (!c->line_member && !(ext_len == 3 && strncasecmp(ext, "cls", 3) == 0))) {
        c->line_member = img ? 2 : 1;
        c->line_off = m->offset;
        c->line_size = m->size;
    }
    return gf__sidecar_text_member(&c->out->text, ext, ext_len, m->offset, m->size, m->name,
                                   m->name_len);
}

static int range_crc32c(int fd, uint64_t off, uint64_t size, const char *shard, uint32_t *crc,
                        char *why, size_t why_len);

/* The sample's line, label and image CRC32C. */
static int emit_line(shard_scan *c)
{
    sidecar_out *o = c->out;
    if (!gf__sidecar_text_line_ok(&o->text)) {
        gf__why(c->why, c->why_len,
                "%s: offset %llu: key '%.80s': a member name with white space or without an "
                "extension, which an index sidecar cannot hold",
                c->path, (unsigned long long)c->key_at, c->key);
        return GF_EDATASET;
    }
    uint32_t crc = 0;
    int rc = c->line_member ? range_crc32c(o->fd, c->line_off, c->line_size, c->path, &crc,
                                           c->why, c->why_len)
                            : 0; /* a .cls alone: no value the parser would take */
    return rc < 0 ? rc : gf__sidecar_text_sample(&o->text, c->label, crc);
}

/* A key without field f's member, named for gf_skipped_entry as that
 * member would be (its first alternative): a field declared beyond the
 * image and label is a thing to check, which `gpufeed verify` lists. */
static void note_no_member(shard_scan *c, int f)
{
    gf__dataset *ds = c->ds;
    const gf__schema *sc = c->schema;
    if (ds->n_named_skips < GF_SKIPPED_NAMED_MAX) {
        char full[GF__FIELD_EXT_MAX + 512];
        snprintf(full, sizeof full, "%.*s:%.*s.%s", (int)c->display_len, c->display,
                 (int)GF__MIN(c->key_len, 400u), c->key, sc->field[f].ext[0]);
        gf__fit_path(ds->named_skips[ds->n_named_skips].path, sizeof ds->named_skips[0].path,
                     full);
        ds->named_skips[ds->n_named_skips].kind = GF__SKIP_NO_MEMBER;
        snprintf(ds->named_skips[ds->n_named_skips].why, sizeof ds->named_skips[0].why,
                 "field '%.40s': no .%s member (the key is skipped)", sc->name[f],
                 sc->field[f].ext[0]);
    }
    ds->n_named_skips++;
}

/* Ends the current key: a sample if it has an image and a label. */
static int flush_key(shard_scan *c)
{
    if (!c->open)
        return 0;
    c->open = 0;
    const gf__schema *sc = c->schema;
    if (!c->bad && !c->has_img && sc->image >= 0)
        c->bad = "no image member";
    if (!c->bad && !c->has_cls && sc->label >= 0) {
        snprintf(c->missing, sizeof c->missing, "no .%s member", sc->field[sc->label].ext[0]);
        c->bad = c->missing;
    }
    for (int k = 0; k < c->ds->n_var && !c->bad; k++)
        if (!c->var[k].has) {
            int f = c->ds->var_field[k];
            snprintf(c->missing, sizeof c->missing, "no .%s member", sc->field[f].ext[0]);
            c->bad = c->missing;
            note_no_member(c, f);
        }
    if (c->bad && c->bad_label && c->bad_label_fails) {
        gf__why(c->why, c->why_len,
                "%s: offset %llu: key '%.80s': member '%.80s.%s': %s (on_error = fail)",
                c->path, (unsigned long long)c->key_at, c->key, c->key, c->bad_ext, c->bad);
        return GF_EDATASET;
    }
    if (c->bad) {
        gf__dataset *ds = c->ds;
        ds->skipped_keys++;
        ds_warn(ds, "%s: offset %llu: key '%.80s' skipped: %s", c->path,
                (unsigned long long)c->key_at, c->key, c->bad);
        if (c->bad_label && ds->n_label_skips < GF_RECENT_WARNINGS) {
            gf_sample_error *e = &ds->label_skips[ds->n_label_skips++];
            *e = (gf_sample_error){.sample = -1, .code = GF_ECORRUPT};
            snprintf(e->path, sizeof e->path, "%s:%.*s", c->display, (int)c->key_len, c->key);
            snprintf(e->reason, sizeof e->reason, "offset %llu: key skipped: %s",
                     (unsigned long long)c->key_at, c->bad);
        }
        return 0;
    }
    if (c->out)
        return emit_line(c);
    if (sc->image < 0) { /* no image: the first field's member stands for the sample */
        int n = snprintf(NULL, 0, "%.*s.%s", (int)c->key_len, c->key, c->var[0].ext);
        if (GF__GROW(&c->img, &c->img_cap, (size_t)n + 1, 64) < 0)
            return GF_ENOMEM;
        snprintf(c->img, c->img_cap, "%.*s.%s", (int)c->key_len, c->key, c->var[0].ext);
        c->img_len = (size_t)n;
        c->img_off = c->var[0].off;
        c->img_size = c->var[0].size;
    }
    return add_sample(c, c->img, c->img_len, c->label, c->img_off, c->img_size);
}

int gf__shard_labels_bounded(const gf__builder *b, char *const *shard_paths, char *why,
                             size_t why_len)
{
    char past[160];
    size_t i = gf__builder_label_past(b, past, sizeof past);
    if (i == b->n)
        return 0;
    const char *path = b->arena + b->off[i], *colon = strchr(path, ':');
    gf__why(why, why_len, "%s: member '%s': %s", shard_paths[b->shard[i]],
            colon ? colon + 1 : path, past);
    return GF_EDATASET;
}

/* The label in a .cls member: decimal text, surrounding whitespace allowed. */
const char *gf__parse_cls(const char *t, size_t n, int32_t *out)
{
    size_t a = 0, e = n;
    while (a < e && (gf__is_space(t[a]) || t[a] == '\n'))
        a++;
    while (e > a && (gf__is_space(t[e - 1]) || t[e - 1] == '\n'))
        e--;
    if (a == e)
        return "empty .cls";
    uint64_t v = 0;
    for (size_t i = a; i < e; i++) {
        unsigned d = (unsigned char)t[i] - '0';
        if (d > 9)
            return ".cls is not a non-negative decimal integer";
        v = v * 10 + d;
        if (v > GF__LABEL_MAX)
            return ".cls label is too large (max 2147483646)";
    }
    *out = (int32_t)v;
    return NULL;
}

static int on_member(void *ctx, gf__tar *t, const gf__tar_member *m)
{
    shard_scan *c = ctx;
    c->members++;
    if (m->skip) {
        c->ds->skipped_members++;
        ds_warn(c->ds, "%s: offset %llu: member '%.80s' skipped: %s", c->path,
                (unsigned long long)m->header_offset, m->name, m->skip);
        return 0;
    }
    const char *name = m->name, *end = name + m->name_len;
    const char *slash = memrchr(name, '/', m->name_len);
    const char *base = slash ? slash + 1 : name;
    const char *dot = memchr(base, '.', (size_t)(end - base));
    size_t key_len = dot ? (size_t)(dot - name) : m->name_len;
    const char *ext = dot ? dot + 1 : end;
    size_t ext_len = (size_t)(end - ext);

    if (!c->open || key_len != c->key_len || memcmp(name, c->key, key_len) != 0) {
        int rc = flush_key(c);
        if (rc < 0)
            return rc;
        if (keep_name(&c->key, &c->key_cap, name, key_len) < 0)
            return GF_ENOMEM;
        c->key_len = key_len;
        c->open = 1;
        c->has_img = c->has_cls = 0;
        for (int k = 0; k < c->ds->n_var; k++)
            c->var[k].has = 0;
        c->bad = NULL;
        c->bad_label = 0;
        c->key_at = m->header_offset;
        c->key_members = 0;
        c->line_member = 0;
        if (c->out)
            gf__sidecar_text_new_line(&c->out->text);
    }
    c->key_members++;
    int alt = 0, f = gf__schema_match(c->schema, ext, ext_len, &alt);
    gf_field_kind kind = f < 0 ? GF_FIELD_BYTES : c->schema->field[f].kind;
    if (f >= 0 && kind == GF_FIELD_LABEL) {
        if (c->has_cls) {
            c->ds->skipped_members++;
            ds_warn(c->ds, "%s: offset %llu: member '%.80s' skipped: a second label of its key",
                    c->path, (unsigned long long)m->header_offset, m->name);
            return 0;
        }
        c->has_cls = 1;
        if (list_member(c, m, ext, ext_len) < 0)
            return GF_ENOMEM;
        snprintf(c->bad_ext, sizeof c->bad_ext, "%.*s", (int)ext_len, ext);
        if (m->size > CLS_MAX) {
            if (!c->bad)
                c->bad = ".cls over 64 bytes", c->bad_label = 1;
            return 0;
        }
        if (c->from_sidecar) { /* its labels= (checked), or -1 without */
            c->label = c->line_label;
            return 0;
        }
        char text[CLS_MAX];
        int rc = gf__tar_read(t, m->offset, text, (size_t)m->size, c->why, c->why_len);
        if (rc < 0) {
            c->bad = "its .cls could not be read"; /* the key is lost with the shard */
            return rc;
        }
        const char *bad = gf__parse_cls(text, (size_t)m->size, &c->label);
        if (bad && !c->bad)
            c->bad = bad, c->bad_label = 1;
    } else if (f >= 0 && kind == GF_FIELD_IMAGE) {
        /* An earlier alternative of the field wins ("jpg;png": the jpg),
         * whatever the archive's order; the same one twice is an error. */
        if (c->has_img && alt >= c->img_alt) {
            if (alt > c->img_alt)
                return list_member(c, m, ext, ext_len) < 0 ? GF_ENOMEM : 0;
            c->ds->skipped_members++;
            ds_warn(c->ds, "%s: offset %llu: member '%.80s' skipped: a second image of its key",
                    c->path, (unsigned long long)m->header_offset, m->name);
            return 0;
        }
        c->has_img = 1;
        c->img_alt = alt;
        if (list_member(c, m, ext, ext_len) < 0)
            return GF_ENOMEM;
        if (m->size > UINT32_MAX && !c->bad)
            c->bad = "image member over 4 GiB";
        c->img_off = m->offset;
        c->img_size = m->size;
        if (keep_name(&c->img, &c->img_cap, name, m->name_len) < 0)
            return GF_ENOMEM;
        c->img_len = m->name_len;
    } else if (f >= 0) { /* text, bytes, array, mask, boxes */
        int k = 0;
        while (c->ds->var_field[k] != f)
            k++;
        if (c->var[k].has && alt >= c->var[k].alt) {
            if (alt > c->var[k].alt)
                return list_member(c, m, ext, ext_len) < 0 ? GF_ENOMEM : 0;
            c->ds->skipped_members++;
            ds_warn(c->ds, "%s: offset %llu: member '%.80s' skipped: a second .%.*s of its key",
                    c->path, (unsigned long long)m->header_offset, m->name, (int)ext_len, ext);
            return 0;
        }
        if (list_member(c, m, ext, ext_len) < 0)
            return GF_ENOMEM;
        c->var[k].has = 1;
        c->var[k].alt = alt;
        c->var[k].off = m->offset;
        c->var[k].size = m->size;
        snprintf(c->var[k].ext, sizeof c->var[k].ext, "%.*s", (int)ext_len, ext);
        int big = kind == GF_FIELD_ARRAY || kind == GF_FIELD_MASK;
        if (m->size > (big ? GF_FIELD_ARRAY_BYTES_MAX : GF_FIELD_BYTES_MAX) && !c->bad) {
            snprintf(c->missing, sizeof c->missing, "over %u bytes (%s)",
                     big ? GF_FIELD_ARRAY_BYTES_MAX : GF_FIELD_BYTES_MAX,
                     big ? "GF_FIELD_ARRAY_BYTES_MAX" : "GF_FIELD_BYTES_MAX");
            c->bad = c->missing, c->bad_label = 1;
            snprintf(c->bad_ext, sizeof c->bad_ext, "%.*s", (int)ext_len, ext);
        }
    } else if (c->out && c->schema->label < 0 && ext_len == 3 && strncasecmp(ext, "cls", 3) == 0) {
        /* An index without a label field writes labels= 0: its lines
         * leave the .cls out, so a loader that has one never takes those
         * zeros for the .cls's labels (its scan finds no label member). */
    } else if (list_member(c, m, ext, ext_len) < 0) {
        return GF_ENOMEM;
    }
    return 0; /* other members (key.json, ...) are not ours, but DALI's too */
}

/* ds's schema in force: its fields beyond image and label (var_field). */
static void take_schema(gf__dataset *ds, const gf__schema *schema)
{
    if (schema) /* else ds->schema is the default (gf__dataset_open_with) */
        ds->schema = *schema;
    ds->n_var = gf__schema_var_fields(&ds->schema, ds->var_field);
}

/* A sidecar's lines through on_member and flush_key, one key a line: the
 * samples, fields and skips a scan of the shard's headers gives, as long
 * as the sidecar lists the shard's members truly (each member read is
 * checked against its header: gf__dataset_member_check). */
static int sidecar_lines(shard_scan *c, const gf__sidecar *sc)
{
    gf__builder *b = c->b;
    c->from_sidecar = 1;
    c->members = 0;
    int rc = 0;
    char *name = NULL;
    size_t name_cap = 0;
    for (size_t j = 0; j < sc->n && rc == 0; j++) {
        const gf__sidecar_entry *e = &sc->e[j];
        c->line_label = sc->labelled ? e->label : -1;
        size_t before = b->n;
        gf__sidecar_member sm;
        for (const char *at = NULL; rc == 0 && gf__sidecar_member_next(e, &at, &sm);) {
            if (keep_name(&name, &name_cap, sm.name, sm.name_len) < 0) {
                rc = GF_ENOMEM;
                break;
            }
            /* the parser checked a header's room before each member */
            gf__tar_member m = {.name = name, .name_len = sm.name_len,
                                .header_offset = sm.off - GF__TAR_BLOCK, .offset = sm.off,
                                .size = sm.size, .type = '0'};
            rc = on_member(c, NULL, &m);
        }
        if (rc == 0)
            rc = flush_key(c); /* the parser refused one key on two lines */
        /* The line's image CRC, where the sample's member is that image. */
        if (rc == 0 && b->n > before && b->doff[before] == e->img_off)
            b->dcrc[before] = e->img_crc32c;
    }
    free(name);
    c->from_sidecar = 0;
    return rc;
}

int gf__shard_sidecar_samples(gf__dataset *ds, gf__builder *b, uint32_t k, const char *path,
                              const gf__sidecar *sc, int bad_label_fails, int32_t *max_label,
                              char *why, size_t why_len)
{
    const char *slash = strrchr(path, '/');
    shard_scan c = {.ds = ds, .b = b, .shard = k, .path = path,
                    .display = slash ? slash + 1 : path, .max_label = *max_label,
                    .why = why, .why_len = why_len, .bad_label_fails = bad_label_fails,
                    .schema = &ds->schema};
    c.display_len = strlen(c.display);
    int rc = sidecar_lines(&c, sc);
    free(c.key);
    free(c.img);
    *max_label = c.max_label;
    return rc;
}

void gf__dataset_take_schema(gf__dataset *ds, const gf__schema *schema)
{
    take_schema(ds, schema);
}

/* Whether local shard c->shard's sidecar gives what its scan gave, b's
 * [first, b->n): its lines through the same rule into a builder of their
 * own (its skips counted apart), then compared. 0 (b->dcrc then holds
 * its member CRCs), 2 with why, or GF_ENOMEM. */
static int sidecar_agrees(const shard_scan *c, gf__shard_sidecar *side, gf__builder *b,
                          size_t first, char *why, size_t why_len)
{
    gf__dataset *q = calloc(1, sizeof *q);
    if (!q)
        return GF_ENOMEM;
    q->schema = c->ds->schema;
    q->n_var = c->ds->n_var;
    memcpy(q->var_field, c->ds->var_field, sizeof q->var_field);
    gf__builder w = {.ranged = 1, .n_var = q->n_var};
    int32_t max_label = -1;
    int rc = gf__shard_sidecar_samples(q, &w, c->shard, c->path, &side->sc, 0, &max_label, why,
                                       why_len);
    if (rc == GF_EDATASET)
        rc = 2;
    if (rc == 0)
        rc = gf__shard_sidecar_match(side, b, first, &w, c->display_len + 1, why, why_len);
    gf__builder_free(&w);
    free(q);
    return rc;
}

/* Keeps what the scan of shard c->shard passed before damage d: the key
 * being gathered if it is a whole sample, else its members are lost. */
static int take_damaged(shard_scan *c, const gf__tar_damage *d)
{
    gf__dataset *ds = c->ds;
    uint64_t lost = 0;
    int rc = 0;
    if (c->open && key_is_sample(c))
        rc = flush_key(c);
    else if (c->open)
        lost = c->key_members;
    c->open = 0;
    if (rc < 0)
        return rc;
    size_t rlen = strlen(d->reason) + 1;
    if (GF__GROW(&ds->damage, &ds->damage_cap, ds->n_damage + 1, 4) < 0 ||
        GF__GROW(&ds->damage_text, &ds->damage_text_cap, ds->damage_text_len + rlen, 256) < 0)
        return GF_ENOMEM;
    gf__shard_damage *r = &ds->damage[ds->n_damage++];
    *r = (gf__shard_damage){.shard = c->shard, .code = d->code, .offset = d->offset,
                            .kept = c->members - lost, .lost = lost + (d->header_lost != 0),
                            .reason = ds->damage_text_len};
    memcpy(ds->damage_text + ds->damage_text_len, d->reason, rlen);
    ds->damage_text_len += rlen;
    ds->members_lost += r->lost;
    return 0;
}

void gf__dataset_damage_entry(const gf__dataset *ds, size_t i, gf_sample_error *e)
{
    const gf__shard_damage *d = &ds->damage[i];
    e->sample = -1;
    e->code = d->code;
    gf__fit_path(e->path, sizeof e->path, ds->shard_paths[d->shard]);
    /* The counts survive a long reason: it is what gets shortened. */
    char head[32], tail[64];
    int hn = snprintf(head, sizeof head, "offset %llu: ", (unsigned long long)d->offset);
    int tn = snprintf(tail, sizeof tail, "; %llu members kept, %llu lost",
                      (unsigned long long)d->kept, (unsigned long long)d->lost);
    int room = (int)sizeof e->reason - 1 - hn - tn;
    snprintf(e->reason, sizeof e->reason, "%s%.*s%s", head, room > 0 ? room : 0,
             ds->damage_text + d->reason, tail);
}

int gf__dataset_damage(const gf__dataset *ds, gf_sample_error *out, int max)
{
    size_t n = ds->n_damage < (size_t)INT_MAX ? ds->n_damage : (size_t)INT_MAX;
    for (size_t i = 0; i < n && (int)i < max; i++)
        gf__dataset_damage_entry(ds, i, &out[i]);
    return (int)n;
}

int gf__dataset_open_shards(gf__dataset *ds, const char *src, int skip_damaged,
                            int bad_label_fails, const gf__schema *schema, char *why,
                            size_t why_len)
{
    gf__names paths = {0};
    int rc = gf__shards_expand(src, &paths, why, why_len);
    if (rc < 0) {
        gf__names_free(&paths);
        return rc;
    }
    /* Shard paths are relative to the current directory now. */
    int dfd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    ds->root_fd = dfd < 0 ? -1 : gf__keep_fd(dfd);
    if (ds->root_fd < 0) {
        gf__why_path(why, why_len, src, "cannot open the current directory: %s",
                strerror(errno));
        gf__names_free(&paths);
        return GF_EDATASET;
    }
    /* shard_paths: the pointer array and the strings in one block. */
    size_t block = paths.n * sizeof(char *) + paths.len;
    char **sp = malloc(block);
    if (!sp) {
        gf__names_free(&paths);
        return GF_ENOMEM;
    }
    char *strs = (char *)(sp + paths.n);
    memcpy(strs, paths.buf, paths.len);
    for (size_t k = 0; k < paths.n; k++)
        sp[k] = strs + paths.off[k];
    ds->shard_paths = sp;
    ds->n_shards = (uint32_t)paths.n;
    ds->bytes += block;
    gf__names_free(&paths);
    ds->shard_ids = calloc(ds->n_shards, sizeof *ds->shard_ids);
    if (!ds->shard_ids)
        return GF_ENOMEM;
    ds->bytes += ds->n_shards * sizeof *ds->shard_ids;

    take_schema(ds, schema);
    gf__builder b = {.ranged = 1, .n_var = ds->n_var};
    shard_scan c = {.ds = ds, .b = &b, .max_label = -1, .why = why, .why_len = why_len,
                    .bad_label_fails = bad_label_fails, .schema = &ds->schema};
    for (uint32_t k = 0; k < ds->n_shards && rc == 0; k++) {
        const char *path = sp[k];
        if (gf__shard_gzip_suffix(path, strlen(path))) {
            gf__why_path(why, why_len, path,
                         "a gzip-compressed shard: gpufeed reads uncompressed tar shards "
                         "only (it reads members at their offsets); decompress it first "
                         "(gunzip -k, or zcat SHARD.tar.gz > SHARD.tar) and name the .tar");
            rc = GF_EDATASET;
            break;
        }
        int fd = openat(ds->root_fd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0) {
            gf__why_path(why, why_len, path, "%s", strerror(errno));
            if (fd >= 0)
                close(fd);
            rc = GF_EDATASET;
            break;
        }
        if (!S_ISREG(st.st_mode)) {
            gf__why_path(why, why_len, path, "not a regular file");
            close(fd);
            rc = GF_EDATASET;
            break;
        }
        gf__file_id_of(&ds->shard_ids[k], &st);
        const char *slash = strrchr(path, '/');
        c.shard = k;
        c.path = path;
        c.display = slash ? slash + 1 : path;
        c.display_len = strlen(c.display);
        c.members = 0;
        /* The headers give the index; the sidecar beside them is taken
         * (for its member CRCs) only where it lists exactly what they give. */
        char side_why[224];
        gf__shard_sidecar side;
        int side_rc = gf__shard_sidecar_load(ds->root_fd, path, &st, &side, side_why,
                                             sizeof side_why);
        if (side_rc == 2)
            ds_warn(ds, "index sidecar ignored, the shard's headers give the index: %s",
                    side_why);
        size_t first = b.n;
        gf__tar_damage dmg;
        rc = side_rc == GF_ENOMEM ? side_rc
                                  : gf__tar_scan(fd, (uint64_t)st.st_size, path, on_member, &c,
                                                 &ds->warnings, ds->warning,
                                                 sizeof ds->warning, &dmg, why, why_len);
        if (rc == 0)
            rc = flush_key(&c); /* a key never spans shards */
        else if (rc == GF_EDATASET && skip_damaged)
            rc = take_damaged(&c, &dmg), side_rc = 1; /* reported as damaged */
        int agrees = rc == 0 && side_rc == 0
                         ? sidecar_agrees(&c, &side, &b, first, side_why, sizeof side_why)
                         : 0;
        if (agrees == GF_ENOMEM)
            rc = GF_ENOMEM;
        else if (agrees == 2)
            ds_warn(ds, "index sidecar ignored, the shard's headers give the index: %s",
                    side_why);
        gf__shard_sidecar_free(&side);
        c.open = 0;
        close(fd);
    }
    free(c.key);
    free(c.img);
    if (rc == 0 && b.n == 0 && ds->n_damage) {
        gf_sample_error e;
        gf__dataset_damage(ds, &e, 1);
        gf__why(why, why_len, "%s: no samples in %u shard(s) (%zu damaged; first: %s: %s)", src,
                ds->n_shards, ds->n_damage, e.path, e.reason);
        if (skip_damaged != 2)
            rc = GF_EDATASET;
    } else if (rc == 0 && b.n == 0) {
        gf__why(why, why_len, "%s: no samples in %u shard(s) (%llu keys, %llu members skipped%s%s)",
                src, ds->n_shards, (unsigned long long)ds->skipped_keys,
                (unsigned long long)ds->skipped_members, ds->warning[0] ? "; first: " : "",
                ds->warning);
        rc = GF_EDATASET;
    }
    if (rc == 0)
        rc = gf__shard_labels_bounded(&b, ds->shard_paths, why, why_len);
    if (rc < 0) {
        gf__builder_free(&b);
        return rc;
    }
    ds->n_classes = c.max_label + 1;
    char classes_why[224];
    rc = gf__shard_classes_read(ds, ds->shard_paths[0], classes_why, sizeof classes_why);
    if (rc == GF_ENOMEM) {
        gf__builder_free(&b);
        return rc;
    }
    if (rc == 2)
        ds_warn(ds, "class names ignored, the labels are the classes: %s", classes_why);
    gf__builder_finish(&b, ds);
    return 0;
}

/* The CRC32C of [off, off + size) of the shard, extending *crc: the whole
 * shard's for shard_crc32c= (what ties the sidecar to these bytes and no
 * other shard's of the same size), a member's for member_crc32c=. */
static int range_crc32c(int fd, uint64_t off, uint64_t size, const char *shard, uint32_t *crc,
                        char *why, size_t why_len)
{
    enum { CHUNK = 1 << 20 };
    uint8_t *p = malloc(size < CHUNK ? (size ? (size_t)size : 1) : CHUNK);
    if (!p)
        return GF_ENOMEM;
    for (uint64_t end = off + size; off < end;) {
        size_t want = end - off < CHUNK ? (size_t)(end - off) : CHUNK;
        ssize_t r = pread(fd, p, want, (off_t)off);
        if (r <= 0) {
            gf__why_path(why, why_len, shard, "could not be read at byte %llu: %s",
                         (unsigned long long)off, r < 0 ? strerror(errno) : "it ended early");
            free(p);
            return GF_EIO;
        }
        *crc = gf__crc32c_extend(*crc, p, (size_t)r);
        off += (uint64_t)r;
    }
    free(p);
    return 0;
}

int gf__shard_index_fd(int fd, uint64_t size, const char *shard, const gf__schema *schema,
                       char **text, size_t *len, gf_shard_index_info *info, char *why,
                       size_t why_len)
{
    gf__dataset *ds = calloc(1, sizeof *ds); /* the scan's counters and warning */
    sidecar_out o = {.fd = fd};
    /* The keys the loader's schema takes (NULL: an image and its label).
     * A key's label is its .cls's, or 0 without a label field: the
     * loader's label then (c.label is never set). */
    if (ds) {
        if (!schema)
            (void)gf__schema_parse(NULL, &ds->schema, NULL, 0);
        take_schema(ds, schema);
    }
    shard_scan c = {.ds = ds, .max_label = -1, .why = why, .why_len = why_len, .out = &o,
                    .path = shard, .schema = ds ? &ds->schema : NULL};
    int rc = ds ? 0 : GF_ENOMEM;
    if (rc == 0)
        rc = gf__tar_scan(fd, size, shard, on_member, &c, &ds->warnings, ds->warning,
                          sizeof ds->warning, NULL, why, why_len);
    if (rc == 0)
        rc = flush_key(&c);
    if (rc == 0 && o.text.samples == 0) {
        gf__why_path(why, why_len, shard, "no samples (%llu keys, %llu members skipped%s%s)",
                     (unsigned long long)ds->skipped_keys,
                     (unsigned long long)ds->skipped_members, ds->warning[0] ? "; first: " : "",
                     ds->warning);
        rc = GF_EDATASET;
    }
    uint32_t crc = 0;
    if (rc == 0)
        rc = range_crc32c(fd, 0, size, shard, &crc, why, why_len);
    char *t = NULL;
    size_t tl = 0;
    if (rc == 0)
        rc = gf__sidecar_text_finish(&o.text, size, crc, &t, &tl);
    /* What the loader would not take is never written: the same parser
     * judges it (a name a scan would not take as it is, say). */
    if (rc == 0) {
        gf__sidecar sc;
        int prc = gf__sidecar_parse(t, tl, size, shard, &sc, why, why_len);
        gf__sidecar_free(&sc);
        if (prc != 0)
            rc = prc == 2 ? GF_EDATASET : prc;
    }
    if (rc == 0) {
        *text = t;
        *len = tl;
        t = NULL;
        if (info)
            *info = (gf_shard_index_info){.samples = o.text.samples,
                                          .members = c.members,
                                          .shard_bytes = size,
                                          .skipped_keys = ds->skipped_keys,
                                          .skipped_members = ds->skipped_members};
    }
    free(t);
    gf__sidecar_text_free(&o.text);
    free(c.key);
    free(c.img);
    free(ds);
    return rc;
}

