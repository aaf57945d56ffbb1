/*
 * prepare's records of what it made (prepare.h): the fingerprint a
 * rerun must match to resume (the settings, the source's identity and
 * gpufeed's version, one line), OUT/classes.txt, and OUT/manifest.json.
 * Nothing here depends on time or threads: a resumed run's manifest is
 * the same bytes as an uninterrupted one's.
 *
 * The source's identity: its kind; each source file's path, size and
 * mtime (the tar shards, or the list file; an ImageFolder's files are
 * too many to list, so its root) and, for every kind, an FNV-1a-64 of
 * the index (each sample's path and label, in order), so a folder that
 * gained, lost or relabelled a file is another source.
 *
 * Class names: an ImageFolder's are its class folders' names. The public
 * API has no call for them yet, so they are listed here the way the
 * library lists them (sub-directories, links to directories included,
 * hidden ones not, sorted by bytes: torchvision's find_classes) and each
 * sample's path is checked to lie in its label's folder. Other sources
 * have only numbers: their names are the labels, "0" .. "K-1".
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../mix.h" /* header-only: gf__fnv1a64 */
#include "cli.h"
#include "json.h"
#include "prepare.h"

static const char *source_kind(const prep_opts *o, gf_index *ix)
{
    struct stat st;
    if (gf_index_shards(ix))
        return "shards";
    return stat(o->src, &st) == 0 && S_ISDIR(st.st_mode) ? "folder" : "list";
}

uint64_t prep_index_digest(gf_index *ix)
{
    uint64_t h = GF__FNV1A64_BASIS, n = gf_index_count(ix);
    for (uint64_t i = 0; i < n; i++) {
        char lab[24];
        const char *p = gf_index_path(ix, i);
        int ln = snprintf(lab, sizeof lab, "\n%d\n", gf_index_label(ix, i));
        h = gf__fnv1a64(h, p, strlen(p));
        h = gf__fnv1a64(h, lab, (size_t)ln);
    }
    return h;
}

/* The source files whose identity is recorded: shards, the list, or the root. */
static uint32_t n_files(const prep_opts *o, gf_index *ix)
{
    (void)o;
    uint32_t n = gf_index_shards(ix);
    return n ? n : 1;
}

static const char *file_at(const prep_opts *o, gf_index *ix, uint32_t k)
{
    return gf_index_shards(ix) ? gf_index_shard_path(ix, k) : o->src;
}

typedef struct ident {
    long long bytes, mtime_ns;
} ident;

static int ident_of(const char *path, int is_dir, ident *id)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    id->bytes = is_dir ? -1 : (long long)st.st_size;
    id->mtime_ns = is_dir ? -1 : (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
    return 0;
}

const char *const prep_settings_kept[] = {"channels", "on_error", "strictness", "decoder",
                                            "extensions", "on_shard_error", "max_pixels",
                                            "max_file_bytes", NULL};

char *prep_fingerprint(const prep_opts *o, gf_index *ix)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        cli_error("prepare", "out of memory");
        return NULL;
    }
    gf_probe_info pi;
    gf_probe(&pi);
    const char *kind = source_kind(o, ix);
    fprintf(f, "gpufeed=%s turbo=%d src=", gf_version(), pi.turbo_version);
    prep_put_escaped(f, o->src);
    fprintf(f, " kind=%s samples=%llu classes=%d index=%016llx", kind,
            (unsigned long long)gf_index_count(ix), gf_index_classes(ix),
            (unsigned long long)prep_index_digest(ix));
    for (uint32_t k = 0; k < n_files(o, ix); k++) {
        ident id;
        const char *p = file_at(o, ix, k);
        if (ident_of(p, strcmp(kind, "folder") == 0, &id) != 0) {
            cli_error("prepare", "%s: %s", p, strerror(errno));
            fclose(f);
            free(buf);
            return NULL;
        }
        fputs(" file=", f);
        prep_put_escaped(f, p);
        fprintf(f, ":%lld:%lld", id.bytes, id.mtime_ns);
    }
    fprintf(f, " name=");
    prep_put_escaped(f, o->name);
    fprintf(f, " max_side=%d format=%s quality=%d subsampling=%s raw_max_pixels=%llu "
            "raw_max_bytes=%llu keep_original=%d shard_bytes=%llu shard_samples=%llu",
            o->max_side, prep_format_names[o->format], o->quality,
            prep_subsampling_names[o->subsampling], (unsigned long long)o->raw_max_pixels,
            (unsigned long long)o->raw_max_bytes, o->keep_original,
            (unsigned long long)o->shard_bytes, (unsigned long long)o->shard_samples);
    for (int i = 0; prep_settings_kept[i]; i++) {
        char v[64];
        gf_settings_get(&o->s, prep_settings_kept[i], v, sizeof v);
        fprintf(f, " %s=%s", prep_settings_kept[i], v);
    }
    if (o->s.fields && o->s.fields[0]) { /* only when given: a run without is as before */
        fputs(" fields=", f);
        prep_put_escaped(f, o->s.fields);
    }
    if (fclose(f) != 0) {
        cli_error("prepare", "out of memory");
        free(buf);
        return NULL;
    }
    return buf;
}

/* ---- classes ---- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The class names in label order: n of them, malloc'd (free_names), or
 * NULL with the message printed. */
static char **class_names(const prep_opts *o, gf_index *ix, int *n)
{
    int k = gf_index_classes(ix);
    char **v = calloc(k > 0 ? (size_t)k : 1, sizeof *v);
    *n = 0;
    if (!v) {
        cli_error("prepare", "out of memory");
        return NULL;
    }
    if (strcmp(source_kind(o, ix), "folder") != 0) {
        for (; *n < k; (*n)++) {
            char num[16];
            snprintf(num, sizeof num, "%d", *n);
            if (!(v[*n] = strdup(num)))
                goto oom;
        }
        return v;
    }
    DIR *d = opendir(o->src);
    if (!d) {
        cli_error("prepare", "%s: %s", o->src, strerror(errno));
        free(v);
        return NULL;
    }
    for (struct dirent *e; (e = readdir(d));) {
        char path[4096];
        struct stat st;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue; /* hidden folders are classes, as the library lists them */
        snprintf(path, sizeof path, "%s/%s", o->src, e->d_name);
        if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        if (*n == k) {
            cli_error("prepare", "%s: more class folders than the index has classes (%d): "
                      "it changed while being read", o->src, k);
            closedir(d);
            goto fail;
        }
        if (!(v[*n] = strdup(e->d_name))) {
            closedir(d);
            goto oom;
        }
        (*n)++;
    }
    closedir(d);
    qsort(v, (size_t)*n, sizeof *v, cmp_str);
    /* each sample lies in its label's folder, or these are not its names */
    for (uint64_t i = 0; i < gf_index_count(ix); i++) {
        const char *p = gf_index_path(ix, i);
        int lab = gf_index_label(ix, i);
        size_t cn = lab >= 0 && lab < *n ? strlen(v[lab]) : 0;
        if (!cn || strncmp(p, v[lab], cn) != 0 || p[cn] != '/') {
            cli_error("prepare", "%s: sample %s has label %d, but the class folders listed "
                      "give it another: the folder changed while being read", o->src, p, lab);
            goto fail;
        }
    }
    if (*n != k) {
        cli_error("prepare", "%s: %d class folders, the index has %d: it changed while being "
                  "read", o->src, *n, k);
        goto fail;
    }
    return v;
oom:
    cli_error("prepare", "out of memory");
fail:
    for (int i = 0; i < *n; i++)
        free(v[i]);
    free(v);
    return NULL;
}

static void free_names(char **v, int n)
{
    for (int i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

/* path.tmp written by fn, then renamed to path. */
static int write_whole(const char *path, int (*fn)(FILE *, void *), void *ctx)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.partial", path);
    FILE *f = prep_create(tmp);
    if (!f) {
        cli_error("prepare", "%s: %s", tmp, strerror(errno));
        return -1;
    }
    int rc = fn(f, ctx);
    if (fflush(f) != 0 || ferror(f))
        rc = -1;
    if (fclose(f) != 0)
        rc = -1;
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -1;
    if (rc < 0)
        cli_error("prepare", "%s: %s", path, strerror(errno ? errno : EIO));
    return rc;
}

typedef struct names_ctx {
    char **v;
    int n;
} names_ctx;

static int put_classes(FILE *f, void *ctx)
{
    names_ctx *c = ctx;
    for (int i = 0; i < c->n; i++)
        fprintf(f, "%s\n", c->v[i]);
    return 0;
}

int prep_write_classes(const prep_opts *o, gf_index *ix)
{
    names_ctx c;
    if (!(c.v = class_names(o, ix, &c.n)))
        return -1;
    for (int i = 0; i < c.n; i++) {
        size_t len = strlen(c.v[i]);
        /* classes.txt is one name a line, a CR before the newline dropped */
        if (strchr(c.v[i], '\n') || (len && c.v[i][len - 1] == '\r')) {
            cli_error("prepare", "%s/%s: a class folder's name holds a newline or ends in a "
                      "carriage return: classes.txt cannot list it", o->src, c.v[i]);
            free_names(c.v, c.n);
            return -1;
        }
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/classes.txt", o->out);
    int rc = write_whole(path, put_classes, &c);
    free_names(c.v, c.n);
    return rc;
}

/* ---- the manifest ---- */

typedef struct manifest_ctx {
    const prep_opts *o;
    gf_index *ix;
    const prep_result *r;
    names_ctx classes;
} manifest_ctx;

static int put_manifest(FILE *f, void *ctx)
{
    manifest_ctx *m = ctx;
    const prep_opts *o = m->o;
    const prep_result *r = m->r;
    gf_index *ix = m->ix;
    const char *kind = source_kind(o, ix);
    cli_json j;
    char v[64], hex[20], path[4096];
    cli_json_init(&j, f);
    cli_json_object(&j);
    cli_json_kstr(&j, "format", "gpufeed prepared set");
    cli_json_kint(&j, "manifest_version", 1);
    cli_json_kstr(&j, "gpufeed_version", gf_version());

    cli_json_key(&j, "source");
    cli_json_object(&j);
    cli_json_kstr(&j, "data", o->src);
    cli_json_kstr(&j, "kind", kind);
    cli_json_kuint(&j, "samples", gf_index_count(ix));
    cli_json_kint(&j, "classes", gf_index_classes(ix));
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)prep_index_digest(ix));
    cli_json_kstr(&j, "index_fnv1a64", hex);
    cli_json_key(&j, "files");
    cli_json_array(&j);
    for (uint32_t k = 0; k < n_files(o, ix); k++) {
        ident id = {-1, -1};
        const char *p = file_at(o, ix, k);
        ident_of(p, strcmp(kind, "folder") == 0, &id);
        cli_json_object(&j);
        cli_json_kstr(&j, "path", p);
        if (id.bytes >= 0) {
            cli_json_kint(&j, "bytes", id.bytes);
            cli_json_kint(&j, "mtime_ns", id.mtime_ns);
        }
        cli_json_object_end(&j);
    }
    cli_json_array_end(&j);
    cli_json_object_end(&j);

    cli_json_key(&j, "settings");
    cli_json_object(&j);
    cli_json_kstr(&j, "name", o->name);
    cli_json_kint(&j, "max_side", o->max_side);
    cli_json_kstr(&j, "resize", "full-size decode, then the antialiased triangle filter "
                  "(PIL/torchvision bilinear, antialias=True) to the longer side max_side, "
                  "the shorter rounded half up; never enlarged");
    cli_json_kstr(&j, "format", prep_format_names[o->format]);
    cli_json_kint(&j, "quality", o->quality);
    cli_json_kstr(&j, "subsampling", prep_subsampling_names[o->subsampling]);
    cli_json_kuint(&j, "raw_max_pixels", o->raw_max_pixels);
    cli_json_kuint(&j, "raw_max_bytes", o->raw_max_bytes);
    cli_json_kbool(&j, "keep_original", o->keep_original);
    cli_json_kuint(&j, "shard_bytes", o->shard_bytes);
    cli_json_kuint(&j, "shard_samples", o->shard_samples);
    for (int i = 0; prep_settings_kept[i]; i++) {
        gf_settings_get(&o->s, prep_settings_kept[i], v, sizeof v);
        cli_json_kstr(&j, prep_settings_kept[i], v);
    }
    if (o->s.fields && o->s.fields[0])
        cli_json_kstr(&j, "fields", o->s.fields);
    cli_json_object_end(&j);

    cli_json_kuint(&j, "samples", r->samples);
    cli_json_kuint(&j, "bad", r->n_bad);
    cli_json_kstr(&j, "classes_file", "classes.txt");
    cli_json_key(&j, "classes");
    cli_json_array(&j);
    for (int i = 0; i < m->classes.n; i++)
        cli_json_str(&j, m->classes.v[i]);
    cli_json_array_end(&j);
    cli_json_key(&j, "members");
    cli_json_array(&j);
    cli_json_str(&j, "KEY.jpg, KEY.ppm or KEY.pgm: the image");
    cli_json_str(&j, "KEY.cls: the label, decimal");
    cli_json_str(&j, "KEY.key: the sample's path in the source");
    cli_json_array_end(&j);
    cli_json_key(&j, "shards");
    cli_json_array(&j);
    for (size_t k = 0; k < r->n_shards; k++) {
        const prep_shard *s = &r->shards[k];
        const char *slash;
        cli_json_object(&j);
        prep_shard_path(o, k, "tar", path, sizeof path);
        slash = strrchr(path, '/');
        cli_json_kstr(&j, "file", slash ? slash + 1 : path);
        prep_shard_path(o, k, "idx", path, sizeof path);
        slash = strrchr(path, '/');
        cli_json_kstr(&j, "index", slash ? slash + 1 : path);
        cli_json_kuint(&j, "samples", s->samples);
        cli_json_kuint(&j, "bytes", s->bytes);
        cli_json_kstr(&j, "sha256", s->sha256);
        cli_json_kuint(&j, "source_first", s->first);
        cli_json_kuint(&j, "source_end", s->next);
        for (int t = 0; t < PREP_OUT_KINDS; t++)
            cli_json_kuint(&j, prep_out_names[t], s->kinds[t]);
        cli_json_object_end(&j);
    }
    cli_json_array_end(&j);
    prep_put_bad_samples(&j, ix, r);
    cli_json_object_end(&j);
    cli_json_end(&j);
    return 0;
}

void prep_put_bad_samples(cli_json *j, gf_index *ix, const prep_result *r)
{
    cli_json_key(j, "bad_samples");
    cli_json_array(j);
    for (size_t i = 0; i < r->n_bad; i++) {
        cli_json_object(j);
        cli_json_kuint(j, "index", r->bad[i].index);
        cli_json_kstr(j, "path", gf_index_path(ix, r->bad[i].index));
        cli_json_kstr(j, "error", gf_err_name(r->bad[i].code));
        cli_json_kstr(j, "reason", r->bad[i].reason);
        cli_json_object_end(j);
    }
    cli_json_array_end(j);
}

int prep_write_manifest(const prep_opts *o, gf_index *ix, const prep_result *r)
{
    manifest_ctx m = {o, ix, r, {0}};
    if (!(m.classes.v = class_names(o, ix, &m.classes.n)))
        return -1;
    char path[4096];
    snprintf(path, sizeof path, "%s/manifest.json", o->out);
    int rc = write_whole(path, put_manifest, &m);
    free_names(m.classes.v, m.classes.n);
    return rc;
}
