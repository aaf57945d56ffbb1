/*
 * A prepared set against its manifest (verify_prepared.h): which data
 * sets are prepared sets, reading manifest.json, and the checks of what
 * prepare wrote beside it. The manifest is untrusted input like the
 * shards: read through the bounded reader, its shard names taken only in
 * prepare's form (NAME-NNNNNN.tar, no folder), so a damaged or hostile
 * one cannot point verify at other files.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpufeed.h"
#include "sha256.h"
#include "verify_prepared.h"

#define FORMAT "gpufeed prepared set" /* prepare_manifest.c's "format" */
#define MANIFEST_VERSION 1

const char *const cli_source_names[] = {"unchecked", "unchanged", "changed", "unreachable",
                                        NULL};

void cli_finding_add(cli_findings *f, const char *path, const char *fmt, ...)
{
    va_list ap;
    f->total++;
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 8;
        cli_finding *v = realloc(f->v, cap * sizeof *v);
        if (!v)
            return;
        f->v = v;
        f->cap = cap;
    }
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *reason = n >= 0 ? malloc((size_t)n + 1) : NULL, *p = strdup(path);
    if (!reason || !p) {
        free(reason);
        free(p);
        return;
    }
    va_start(ap, fmt);
    vsnprintf(reason, (size_t)n + 1, fmt, ap);
    va_end(ap);
    f->v[f->n++] = (cli_finding){p, reason};
}

static void free_findings(cli_findings *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->v[i].path);
        free(f->v[i].reason);
    }
    free(f->v);
}

/* dir/name, or name when dir is "" (the current folder). malloc'd. */
static char *join(const char *dir, const char *name)
{
    size_t ld = strlen(dir);
    int slash = ld && dir[ld - 1] != '/';
    char *p = malloc(ld + (size_t)slash + strlen(name) + 1);
    if (p)
        sprintf(p, "%s%s%s", dir, slash ? "/" : "", name);
    return p;
}

/* path opened for reading when it is a regular file, else NULL with
 * errno (EINVAL: not one). O_NONBLOCK: a FIFO named like one of the set's
 * files must not hang verify. */
static FILE *open_regular(const char *path, struct stat *st)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    int e = fstat(fd, st) != 0 ? errno : !S_ISREG(st->st_mode) ? EINVAL : 0;
    if (e) {
        close(fd);
        errno = e;
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f)
        close(fd);
    return f;
}

/* A whole file of at most max bytes, NUL-terminated, or NULL with errno
 * (EFBIG past max). */
static char *read_all(const char *path, size_t max, size_t *len)
{
    struct stat st;
    FILE *f = open_regular(path, &st);
    if (!f)
        return NULL;
    if ((uint64_t)st.st_size > max) {
        fclose(f);
        errno = EFBIG;
        return NULL;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    size_t n = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
    int bad = !buf || ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        errno = buf ? EIO : ENOMEM;
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* NAME-NNNNNN.EXT (NNNNNN: six digits or more) with NAME given, or any
 * name of prepare's alphabet when name is NULL: the shard number, or -1.
 * *name_len: the NAME's length. */
static long long shard_number(const char *file, const char *name, const char *ext,
                              size_t *name_len)
{
    const char *dash = strrchr(file, '-'), *dot = strrchr(file, '.');
    if (!dash || !dot || dot < dash || strcmp(dot + 1, ext) != 0)
        return -1;
    size_t ln = (size_t)(dash - file), nd = (size_t)(dot - dash - 1);
    if (name ? strlen(name) != ln || strncmp(file, name, ln) != 0
             : !ln || ln > 64 || strspn(file, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVW"
                                                "XYZ0123456789_-") < ln)
        return -1;
    if (nd < 6 || nd > 12 || strspn(dash + 1, "0123456789") != nd)
        return -1;
    *name_len = ln;
    return strtoll(dash + 1, NULL, 10);
}

/* The shards in dir named like prepare's, when they share one name:
 * "dir/NAME-{000000..N}.tar" when they run from 0 without a gap, else a
 * comma list. For a folder whose manifest cannot be read. NULL: none, or
 * several names. */
static char *shards_on_disk(const char *dir)
{
    DIR *d = opendir(dir[0] ? dir : ".");
    char name[80] = "", *out = NULL;
    long long max = -1, count = 0;
    size_t cap = 0, len = 0;
    if (!d)
        return NULL;
    for (struct dirent *e; (e = readdir(d));) {
        size_t ln;
        long long k = shard_number(e->d_name, NULL, "tar", &ln);
        if (k < 0)
            continue;
        if (!name[0])
            snprintf(name, sizeof name, "%.*s", (int)ln, e->d_name);
        else if (strlen(name) != ln || strncmp(name, e->d_name, ln) != 0) {
            closedir(d);
            free(out);
            return NULL; /* two sets: which one is not ours to guess */
        }
        char *path = join(dir, e->d_name);
        size_t need = len + (path ? strlen(path) : 0) + 2;
        char *o = need > cap ? realloc(out, cap = need * 2) : out;
        if (!path || !o) {
            free(path);
            free(o ? o : out);
            closedir(d);
            return NULL;
        }
        out = o;
        len += (size_t)sprintf(out + len, "%s%s", len ? "," : "", path);
        free(path);
        max = k > max ? k : max;
        count++;
    }
    closedir(d);
    if (count && count == max + 1) {
        char pat[160], *p;
        snprintf(pat, sizeof pat, "%s-{%06d..%06lld}.tar", name, 0, max);
        if ((p = join(dir, pat))) {
            free(out);
            out = p;
        }
    }
    return out;
}

static const char *shard_field(const cli_jv *s, const char *key)
{
    return cli_jv_str(cli_jv_get(s, key));
}

/* The manifest's shape, where verify relies on it: names, counts and
 * digests in prepare's form. 0, or -1 with the mismatch recorded. */
static int check_shape(cli_prepared *p)
{
    const cli_jv *r = p->root, *shards = cli_jv_get(r, "shards");
    uint64_t version = 0;
    if (cli_jv_u64(cli_jv_get(r, "manifest_version"), &version) < 0 ||
        version != MANIFEST_VERSION) {
        cli_finding_add(&p->mismatches, p->manifest,
                        "manifest_version is not %d: written by another gpufeed, or edited",
                        MANIFEST_VERSION);
        return -1;
    }
    const char *name = cli_jv_str(cli_jv_get(cli_jv_get(r, "settings"), "name"));
    size_t ln;
    char probe[96];
    snprintf(probe, sizeof probe, "%s-000000.tar", name ? name : "");
    if (!name || shard_number(probe, NULL, "tar", &ln) != 0 || ln != strlen(name)) {
        cli_finding_add(&p->mismatches, p->manifest, "no valid settings.name");
        return -1;
    }
    if (cli_jv_u64(cli_jv_get(r, "samples"), &p->samples) < 0 || !shards ||
        shards->type != CLI_JV_ARRAY) {
        cli_finding_add(&p->mismatches, p->manifest, "no valid 'samples' or 'shards'");
        return -1;
    }
    for (size_t k = 0; k < shards->n; k++) {
        const cli_jv *s = &shards->items[k];
        const char *file = shard_field(s, "file"), *idx = shard_field(s, "index"),
                   *sha = shard_field(s, "sha256");
        uint64_t v;
        char want_tar[96], want_idx[96]; /* prepare's names, digit for digit */
        snprintf(want_tar, sizeof want_tar, "%s-%06zu.tar", name, k);
        snprintf(want_idx, sizeof want_idx, "%s-%06zu.idx", name, k);
        if (!file || strcmp(file, want_tar) != 0 || !idx || strcmp(idx, want_idx) != 0 ||
            !sha || strlen(sha) != 64 ||
            strspn(sha, "0123456789abcdef") != 64 || cli_jv_u64(cli_jv_get(s, "bytes"), &v) ||
            cli_jv_u64(cli_jv_get(s, "samples"), &v)) {
            cli_finding_add(&p->mismatches, p->manifest,
                            "shard %zu is not listed as prepare lists it (%s-%06zu.tar, its "
                            ".idx, bytes, samples, sha256)", k, name, k);
            return -1;
        }
    }
    p->name = name;
    p->shards = shards->n;
    return 0;
}

/* dir form: the listed shards that are there, as the loader's data. */
static char *listed_present(const cli_prepared *p)
{
    const cli_jv *shards = cli_jv_get(p->root, "shards");
    char *out = NULL;
    size_t len = 0, cap = 0, present = 0;
    for (size_t k = 0; k < p->shards; k++) {
        char *path = join(p->dir, shard_field(&shards->items[k], "file"));
        struct stat st;
        if (path && stat(path, &st) == 0) {
            size_t need = len + strlen(path) + 2;
            char *o = need > cap ? realloc(out, cap = need * 2) : out;
            if (!o) {
                free(path);
                free(out);
                return NULL;
            }
            out = o;
            len += (size_t)sprintf(out + len, "%s%s", len ? "," : "", path);
            present++;
        }
        free(path);
    }
    if (present && present == p->shards) {
        char pat[160], *pp;
        snprintf(pat, sizeof pat, "%s-{%06d..%06zu}.tar", p->name, 0, (size_t)p->shards - 1);
        if ((pp = join(p->dir, pat))) {
            free(out);
            out = pp;
        }
    }
    return out;
}

int cli_prepared_find(const char *cmd, const char *data, cli_prepared *p)
{
    struct stat st;
    size_t n = strlen(data), len = 0;
    memset(p, 0, sizeof *p);
    p->dir_form = stat(data, &st) == 0 && S_ISDIR(st.st_mode);
    if (p->dir_form) {
        p->dir = strdup(data);
        while (p->dir && strlen(p->dir) > 1 && p->dir[strlen(p->dir) - 1] == '/')
            p->dir[strlen(p->dir) - 1] = '\0';
    } else {
        const char *slash = strrchr(data, '/');
        if (strchr(data, ',') || n < 4 || strcmp(data + n - 4, ".tar") != 0)
            return 0;
        p->dir = slash ? strndup(data, slash > data ? (size_t)(slash - data) : 1) : strdup("");
    }
    if (!p->dir || !(p->manifest = join(p->dir, "manifest.json")))
        goto oom;
    if (strpbrk(p->dir, "{,") || stat(p->manifest, &st) != 0 || !S_ISREG(st.st_mode)) {
        cli_prepared_free(p);
        return 0;
    }
    char why[160];
    char *text = read_all(p->manifest, CLI_JSON_READ_MAX_BYTES, &len);
    if (!text) {
        snprintf(why, sizeof why, "%s", strerror(errno));
    } else if (!(p->root = cli_json_parse(text, len, why, sizeof why)) &&
               strcmp(why, "out of memory") == 0) {
        free(text);
        goto oom;
    }
    free(text);
    const char *format = cli_jv_str(cli_jv_get(p->root, "format"));
    if (p->root && (!format || strcmp(format, FORMAT) != 0)) {
        cli_prepared_free(p); /* valid JSON of another kind: not prepare's */
        return 0;
    }
    if (!p->root)
        cli_finding_add(&p->mismatches, p->manifest,
                        "cannot be read as JSON (%s): cut short or damaged", why);
    else
        p->readable = check_shape(p) == 0;
    if (p->dir_form) {
        p->data = p->readable ? listed_present(p) : shards_on_disk(p->dir);
        if (!p->readable && !p->data && !p->root) {
            cli_prepared_free(p); /* no shards beside it: a folder of another kind */
            return 0;
        }
    }
    return 1;
oom:
    cli_error(cmd, "out of memory");
    cli_prepared_free(p);
    return -1;
}

/* The first line of a sidecar, "v1.2 N ...": N, or -1. */
static long long sidecar_count(const char *path)
{
    char line[128];
    unsigned long long n;
    struct stat st;
    FILE *f = open_regular(path, &st);
    if (!f)
        return -1;
    int ok = fgets(line, sizeof line, f) && sscanf(line, "v1.2 %llu", &n) == 1;
    fclose(f);
    return ok ? (long long)n : -1;
}

static int sha256_file(const char *path, char hex[65])
{
    struct stat st;
    FILE *f = open_regular(path, &st);
    static unsigned char buf[1 << 20];
    cli_sha256 h;
    size_t n;
    if (!f)
        return -1;
    cli_sha256_init(&h);
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        cli_sha256_update(&h, buf, n);
    int bad = ferror(f);
    fclose(f);
    if (bad)
        return -1;
    cli_sha256_hex(&h, hex);
    return 0;
}

/* Each listed shard: there, of its bytes and SHA-256, its sidecar's
 * sample count the listed one. */
static void check_shards(cli_prepared *p)
{
    const cli_jv *shards = cli_jv_get(p->root, "shards");
    uint64_t sum = 0;
    for (size_t k = 0; k < p->shards; k++) {
        const cli_jv *s = &shards->items[k];
        const char *sha = shard_field(s, "sha256");
        uint64_t bytes, samples;
        struct stat st;
        char hex[65];
        cli_jv_u64(cli_jv_get(s, "bytes"), &bytes);
        cli_jv_u64(cli_jv_get(s, "samples"), &samples);
        sum += samples;
        char *tar = join(p->dir, shard_field(s, "file")), *idx = join(p->dir, shard_field(s, "index"));
        size_t before = p->mismatches.total;
        if (!tar || !idx) {
            cli_finding_add(&p->mismatches, p->manifest, "out of memory");
        } else if (stat(tar, &st) != 0) {
            cli_finding_add(&p->mismatches, tar, "missing (%s): the manifest lists it, %llu "
                            "samples in %llu bytes", strerror(errno), (unsigned long long)samples,
                            (unsigned long long)bytes);
        } else if ((uint64_t)st.st_size != bytes) {
            cli_finding_add(&p->mismatches, tar, "%llu bytes, the manifest lists %llu",
                            (unsigned long long)st.st_size, (unsigned long long)bytes);
        } else if (sha256_file(tar, hex) != 0) {
            cli_finding_add(&p->mismatches, tar, "cannot be read: %s", strerror(errno));
        } else if (strcmp(hex, sha) != 0) {
            cli_finding_add(&p->mismatches, tar, "SHA-256 differs from the manifest (%s, the "
                            "manifest lists %s): its bytes changed since prepare wrote it",
                            hex, sha);
        }
        if (tar && idx) {
            long long n = sidecar_count(idx);
            if (n < 0)
                cli_finding_add(&p->mismatches, idx, "%s: the manifest lists this index sidecar",
                                access(idx, F_OK) == 0 ? "not a v1.2 index" : "missing");
            else if ((uint64_t)n != samples)
                cli_finding_add(&p->mismatches, idx, "%lld samples, the manifest lists %llu", n,
                                (unsigned long long)samples);
        }
        p->shards_ok += p->mismatches.total == before;
        free(tar);
        free(idx);
    }
    if (sum != p->samples)
        cli_finding_add(&p->mismatches, p->manifest, "its shards list %llu samples, its total "
                        "says %llu", (unsigned long long)sum, (unsigned long long)p->samples);
}

/* Files of the set's name the manifest does not list; a .partial is an
 * unfinished rerun's, a note. */
static void check_extras(cli_prepared *p)
{
    DIR *d = opendir(p->dir[0] ? p->dir : ".");
    if (!d) {
        cli_finding_add(&p->mismatches, p->dir, "cannot list the folder: %s", strerror(errno));
        return;
    }
    for (struct dirent *e; (e = readdir(d));) {
        size_t ln, l = strlen(e->d_name);
        long long k;
        if (l > 8 && strcmp(e->d_name + l - 8, ".partial") == 0) {
            char base[256];
            snprintf(base, sizeof base, "%.*s", (int)(l - 8), e->d_name);
            if (shard_number(base, p->name, "tar", &ln) >= 0 ||
                shard_number(base, p->name, "idx", &ln) >= 0) {
                char *path = join(p->dir, e->d_name);
                cli_finding_add(&p->notes, path ? path : e->d_name,
                                "a partial file of an unfinished prepare run: not part of the set");
                free(path);
            }
            continue;
        }
        if ((k = shard_number(e->d_name, p->name, "tar", &ln)) < 0)
            k = shard_number(e->d_name, p->name, "idx", &ln);
        if (k >= 0 && (uint64_t)k >= p->shards) {
            char *path = join(p->dir, e->d_name);
            cli_finding_add(&p->mismatches, path ? path : e->d_name,
                            "not in the manifest, which lists %llu shards of this name",
                            (unsigned long long)p->shards);
            free(path);
        }
    }
    closedir(d);
}

/* classes.txt: the manifest's "classes", one a line. */
static void check_classes(cli_prepared *p)
{
    const cli_jv *cls = cli_jv_get(p->root, "classes");
    const char *file = cli_jv_str(cli_jv_get(p->root, "classes_file"));
    if (!cls || cls->type != CLI_JV_ARRAY || !file || strchr(file, '/') || !file[0]) {
        cli_finding_add(&p->mismatches, p->manifest, "no valid 'classes' or 'classes_file'");
        return;
    }
    char *path = join(p->dir, file), *text;
    size_t len = 0, i = 0;
    int differs = 0;
    if (!path || !(text = read_all(path, CLI_JSON_READ_MAX_BYTES, &len))) {
        cli_finding_add(&p->mismatches, path ? path : file, "%s: the manifest lists it",
                        strerror(errno));
        free(path);
        return;
    }
    const char *line = text, *end = text + len;
    for (; i < cls->n && line < end; i++) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        const char *want = cli_jv_str(&cls->items[i]);
        size_t ll = nl ? (size_t)(nl - line) : (size_t)(end - line);
        if (!want || strlen(want) != ll || memcmp(want, line, ll) != 0) {
            cli_finding_add(&p->mismatches, path, "line %zu is '%.*s', the manifest lists '%s'",
                            i + 1, (int)ll, line, want ? want : "(not a name)");
            differs = 1;
            break;
        }
        line = nl ? nl + 1 : end;
    }
    if (!differs) {
        size_t lines = 0;
        for (const char *c = text; c < end; c++)
            lines += *c == '\n';
        lines += len && text[len - 1] != '\n';
        if (lines != cls->n)
            cli_finding_add(&p->mismatches, path, "%zu lines, the manifest lists %zu classes",
                            lines, cls->n);
        else
            p->classes_ok = 1;
    }
    free(text);
    free(path);
}

void cli_prepared_check(cli_prepared *p)
{
    if (!p->readable)
        return; /* the one mismatch is the manifest; members still follow */
    check_shards(p);
    check_extras(p);
    check_classes(p);
    const char *v = cli_jv_str(cli_jv_get(p->root, "gpufeed_version"));
    if (v && strcmp(v, gf_version()) != 0)
        cli_finding_add(&p->notes, p->manifest, "written by gpufeed %s; this is %s", v,
                        gf_version());
}

void cli_prepared_free(cli_prepared *p)
{
    free(p->dir);
    free(p->manifest);
    free(p->data);
    cli_jv_free(p->root);
    free_findings(&p->mismatches);
    free_findings(&p->changes);
    free_findings(&p->notes);
    memset(p, 0, sizeof *p);
}
