/* The sample schema (fields.h): the kinds' table and the fields' parser.
 * Pure string work, on gf_open's thread. */
#include "fields.h"

#include "common.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* ---- the image extensions ---- */

/* torchvision's IMG_EXTENSIONS first (GF_EXT_TORCHVISION), then the ones
 * only GF_EXT_ALL takes, in GF_SKIPPED_GIF's order. */
static const char *const image_ext[] = {"jpg", "jpeg", "png", "ppm", "bmp", "pgm", "tif",
                                        "tiff", "webp", "gif", "tga", "psd", "pnm", "pbm"};
enum { N_TORCHVISION_EXT = 9, N_IMAGE_EXT = sizeof image_ext / sizeof image_ext[0] };

/* image_ext's index of ext[0, len), or -1. */
static int image_ext_index(const char *ext, size_t len)
{
    for (int i = 0; i < N_IMAGE_EXT; i++)
        if (strlen(image_ext[i]) == len && strncasecmp(image_ext[i], ext, len) == 0)
            return i;
    return -1;
}

int gf__is_image_suffix(const char *ext, size_t len)
{
    return image_ext_index(ext, len) >= 0;
}

int gf__folder_skip_kind(const char *ext, size_t len, gf_extensions which)
{
    int i = ext ? image_ext_index(ext, len) : -1;
    if (i < 0)
        return GF_SKIPPED_OTHER;
    return i < N_TORCHVISION_EXT || which == GF_EXT_ALL ? -1 : GF_SKIPPED_GIF + i - N_TORCHVISION_EXT;
}

/* ---- the kinds ---- */

/* A row a kind: its name and the extensions (the member name's last
 * dot-separated part) that imply it. */
enum { N_KINDS = 7 };
static const struct {
    const char *name;
    const char *implied_by[3];
} kinds[N_KINDS] = {
    [GF_FIELD_IMAGE] = {"image", {NULL}}, /* image_ext's */
    [GF_FIELD_LABEL] = {"label", {"cls"}},
    [GF_FIELD_TEXT] = {"text", {"txt", "text"}},
    [GF_FIELD_BYTES] = {"bytes", {NULL}}, /* what no row implies */
    [GF_FIELD_ARRAY] = {"array", {"npy"}},
    [GF_FIELD_MASK] = {"mask", {NULL}},   /* only when named */
    [GF_FIELD_BOXES] = {"boxes", {NULL}}, /* only when named */
};

static int implied_kind(const char *ext)
{
    const char *last = strrchr(ext, '.');
    last = last ? last + 1 : ext;
    if (gf__is_image_suffix(last, strlen(last)))
        return GF_FIELD_IMAGE;
    for (int k = 0; k < N_KINDS; k++)
        for (int i = 0; i < 3 && kinds[k].implied_by[i]; i++)
            if (strcasecmp(kinds[k].implied_by[i], last) == 0)
                return k;
    return GF_FIELD_BYTES;
}

/* s[0, n) without the spaces around it. */
static void trim(const char **s, size_t *n)
{
    while (*n && (gf__is_space(**s) || **s == '\n'))
        (*s)++, (*n)--;
    while (*n && (gf__is_space((*s)[*n - 1]) || (*s)[*n - 1] == '\n'))
        (*n)--;
}

static int parse_field(const char *p, size_t n, gf__field *f, char *why, size_t why_len)
{
    *f = (gf__field){0};
    const char *colon = memchr(p, ':', n);
    size_t exts = colon ? (size_t)(colon - p) : n;
    int kind = -1;
    if (colon) {
        const char *k = colon + 1;
        size_t kn = n - exts - 1;
        trim(&k, &kn);
        for (int i = 0; i < N_KINDS && kind < 0; i++)
            if (strlen(kinds[i].name) == kn && strncasecmp(kinds[i].name, k, kn) == 0)
                kind = i;
        if (kind < 0) {
            gf__why(why, why_len,
                    "field '%.*s': no kind '%.*s' (image, label, text, bytes, array, mask, "
                    "boxes)",
                    (int)n, p, (int)kn, k);
            return GF_EINVAL;
        }
    }
    for (const char *a = p, *end = p + exts; a <= end;) {
        const char *semi = memchr(a, ';', (size_t)(end - a));
        const char *e = a;
        size_t en = (size_t)((semi ? semi : end) - a);
        trim(&e, &en);
        if (en > 0 && e[0] == '.') /* ".jpg" as "jpg" */
            e++, en--;
        if (en == 0) {
            gf__why(why, why_len, "field '%.*s': an empty extension", (int)n, p);
            return GF_EINVAL;
        }
        if (en > GF__FIELD_EXT_MAX) {
            gf__why(why, why_len, "field '%.*s': extension over %d bytes", (int)n, p,
                    GF__FIELD_EXT_MAX);
            return GF_EINVAL;
        }
        if (f->n_ext == GF__FIELD_ALTS_MAX) {
            gf__why(why, why_len, "field '%.*s': more than %d alternatives", (int)n, p,
                    GF__FIELD_ALTS_MAX);
            return GF_EINVAL;
        }
        for (int a = 0; a < f->n_ext; a++)
            if (strlen(f->ext[a]) == en && strncasecmp(f->ext[a], e, en) == 0) {
                gf__why(why, why_len, "field '%.*s': extension '%.*s' twice", (int)n, p,
                        (int)en, e);
                return GF_EINVAL;
            }
        for (size_t i = 0; i < en; i++) {
            char c = e[i];
            if (c == '/' || c == ',' || (unsigned char)c < 0x21 || c == 0x7f) {
                gf__why(why, why_len, "field '%.*s': '%c' in an extension", (int)n, p,
                        (unsigned char)c < 0x21 || c == 0x7f ? '?' : c);
                return GF_EINVAL;
            }
            f->ext[f->n_ext][i] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
        }
        int implied = implied_kind(f->ext[f->n_ext]);
        if (kind < 0 && f->n_ext > 0 && implied != (int)f->kind) {
            gf__why(why, why_len,
                    "field '%.*s': its alternatives are a %s and a %s (name the kind: "
                    "'%.*s:KIND')",
                    (int)n, p, kinds[f->kind].name, kinds[implied].name, (int)exts, p);
            return GF_EINVAL;
        }
        if (kind < 0)
            f->kind = (gf_field_kind)implied;
        f->n_ext++;
        if (!semi)
            break;
        a = semi + 1;
    }
    if (kind >= 0)
        f->kind = (gf_field_kind)kind;
    return 0;
}

int gf__schema_parse(const char *spec, gf__schema *s, char *why, size_t why_len)
{
    *s = (gf__schema){.image = -1, .label = -1};
    const char *p = spec ? spec : "";
    size_t all = strlen(p);
    trim(&p, &all);
    if (all == 0) { /* the default: any image, and its label */
        s->field[0] = (gf__field){.kind = GF_FIELD_IMAGE};
        s->field[1] = (gf__field){.ext = {"cls"}, .n_ext = 1, .kind = GF_FIELD_LABEL};
        snprintf(s->name[0], sizeof s->name[0], "image");
        snprintf(s->name[1], sizeof s->name[1], "cls");
        s->n = 2, s->image = 0, s->label = 1;
        return 0;
    }
    for (const char *end = p + all;;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *f = p;
        size_t n = (size_t)((comma ? comma : end) - p);
        trim(&f, &n);
        if (n == 0) {
            gf__why(why, why_len, "fields '%s': an empty field", spec);
            return GF_EINVAL;
        }
        if (s->n == GF__FIELDS_MAX) {
            gf__why(why, why_len, "fields '%s': more than %d fields", spec, GF__FIELDS_MAX);
            return GF_EINVAL;
        }
        gf__field *fd = &s->field[s->n];
        int rc = parse_field(f, n, fd, why, why_len);
        if (rc < 0)
            return rc;
        for (int a = 0; a < fd->n_ext; a++) {
            int alt, other = gf__schema_match(s, fd->ext[a], strlen(fd->ext[a]), &alt);
            if (other >= 0) {
                gf__why(why, why_len, "fields '%s': extension '%s' is in two fields", spec,
                        fd->ext[a]);
                return GF_EINVAL;
            }
        }
        if (fd->kind == GF_FIELD_LABEL && s->label >= 0) {
            gf__why(why, why_len, "fields '%s': two label fields", spec);
            return GF_EINVAL;
        }
        size_t at = 0;
        for (int a = 0; a < fd->n_ext; a++)
            at += (size_t)snprintf(s->name[s->n] + at, sizeof s->name[s->n] - at, "%s%s",
                                   a ? ";" : "", fd->ext[a]);
        if (fd->kind == GF_FIELD_LABEL)
            s->label = s->n;
        if (fd->kind == GF_FIELD_IMAGE && s->image < 0)
            s->image = s->n;
        s->n++;
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

int gf__schema_of_settings(const gf_settings *settings, gf__schema *s, const gf__schema **use,
                           char *why, size_t why_len)
{
    *use = NULL;
    const char *spec = settings->fields ? settings->fields : "";
    size_t len = strlen(spec);
    trim(&spec, &len);
    if (len == 0) /* unset: the default, as gf__schema_parse gives it */
        return 0;
    spec = settings->fields;
    char fwhy[224] = "";
    if (gf__schema_parse(spec, s, fwhy, sizeof fwhy) < 0) {
        gf__why(why, why_len, "fields: %s", fwhy);
        return GF_EINVAL;
    }
    int images = 0, moved = -1, others = 0;
    for (int f = 0; f < s->n; f++) {
        gf_field_kind k = s->field[f].kind;
        images += k == GF_FIELD_IMAGE;
        if (k == GF_FIELD_MASK || k == GF_FIELD_BOXES)
            moved = f;
        others += k != GF_FIELD_IMAGE && k != GF_FIELD_LABEL;
    }
    if (images > 1) {
        gf__why(why, why_len,
                "fields '%s': more than one image field; the loader reads one (the batch's "
                "pixels)",
                spec);
        return GF_EINVAL;
    }
    if (images == 0 && moved >= 0) {
        gf__why(why, why_len, "fields '%s': '%s' is a %s, moved with its image, and no field is "
                "an image", spec, s->name[moved], kinds[s->field[moved].kind].name);
        return GF_EINVAL;
    }
    if (images == 0 && others == 0) {
        gf__why(why, why_len, "fields '%s': a label alone; name the members to read", spec);
        return GF_EINVAL;
    }
    *use = s;
    return 0;
}

int gf__schema_var_fields(const gf__schema *s, int var_field[GF__FIELDS_MAX])
{
    int n = 0;
    for (int f = 0; f < s->n; f++)
        if (s->field[f].kind != GF_FIELD_IMAGE && s->field[f].kind != GF_FIELD_LABEL)
            var_field[n++] = f;
    return n;
}

int gf__schema_match(const gf__schema *s, const char *ext, size_t len, int *alt)
{
    for (int i = 0; i < s->n; i++) {
        const gf__field *f = &s->field[i];
        if (f->n_ext == 0 && f->kind == GF_FIELD_IMAGE && gf__is_image_suffix(ext, len)) {
            *alt = 0;
            return i;
        }
        for (int a = 0; a < f->n_ext; a++)
            if (strlen(f->ext[a]) == len && strncasecmp(f->ext[a], ext, len) == 0) {
                *alt = a;
                return i;
            }
    }
    return -1;
}

size_t gf__schema_format(const gf__schema *s, char *out, size_t out_len)
{
    size_t n = 0;
    for (int i = 0; i < s->n; i++) {
        const gf__field *f = &s->field[i];
        const char *sep = i ? "," : "";
        if (f->n_ext == 0)
            n += (size_t)snprintf(out + GF__MIN(n, out_len - 1), out_len - GF__MIN(n, out_len - 1),
                                  "%s*", sep);
        for (int a = 0; a < f->n_ext; a++)
            n += (size_t)snprintf(out + GF__MIN(n, out_len - 1), out_len - GF__MIN(n, out_len - 1),
                                  "%s%s", a ? ";" : sep, f->ext[a]);
        n += (size_t)snprintf(out + GF__MIN(n, out_len - 1), out_len - GF__MIN(n, out_len - 1),
                              ":%s", kinds[f->kind].name);
    }
    return n;
}
