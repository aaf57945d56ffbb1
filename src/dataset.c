/*
 * Dataset index: turns an ImageFolder tree, a list file or WebDataset-style
 * tar shards into one compact table of (relative path, label); for shards
 * also (shard, data offset, size) per sample.
 *
 * Memory is a few blocks whatever the size: one arena of NUL-terminated
 * relative paths back to back, one array of offsets into it and one array of
 * labels (plus, for ImageFolder, one block of class names). There is no
 * allocation per sample: a million-line list costs path + 13 bytes a sample.
 *
 * A list file is read with one read() into a buffer that becomes the arena:
 * each line's path is moved down over the bytes of the lines before it
 * (whose labels and newlines are no longer needed), NUL-terminated in place,
 * and the buffer is shrunk at the end.
 *
 * ImageFolder follows torchvision's ImageFolder/make_dataset so that sample
 * indices agree with a PyTorch run on the same tree: classes are the
 * sub-directories of the root sorted by name (byte order), a class's files
 * are found with os.walk(followlinks=True) and ordered as sorted(os.walk())
 * then sorted(fnames) do, i.e. by (directory path, file name). Differences,
 * on purpose: hidden entries (leading '.') are skipped at every level,
 * FIFOs/sockets/devices are skipped (reading one would block a reader), a
 * directory that cannot be read is an error instead of silently dropped, and
 * a symlink loop is not followed twice.
 *
 * Tar shards are scanned once at open (src/tar.c reads only the headers
 * and the tiny .cls members, through a small read window); a sample costs
 * its display name "shard.tar:key.jpg" in the arena plus 28 bytes (path
 * offset, label, shard index, data offset, 32-bit size).
 */
#include "dataset.h"
#include "tar.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

/* Label limit: n_classes = max label + 1 must fit in an int. */
#define LABEL_MAX (INT32_MAX - 1)

/* ------------------------------------------------------------------------ */
/* Growable tables (geometric growth; offsets, never pointers, into the arena
 * so that a realloc moves nothing that is referenced). */

typedef struct builder {
    char *arena;
    size_t arena_len, arena_cap;
    uint64_t *off;
    int32_t *labels;
    int ranged;        /* tar shards: the three arrays below too */
    uint32_t *shard;
    uint64_t *doff;
    uint32_t *dlen;
    size_t n, cap;
} builder;

static void builder_free(builder *b)
{
    free(b->arena);
    free(b->off);
    free(b->labels);
    free(b->shard);
    free(b->doff);
    free(b->dlen);
    memset(b, 0, sizeof *b);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem, size_t min_cap)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : min_cap;
    while (c < need) {
        if (c > SIZE_MAX / 2 / elem)
            return GF_ENOMEM;
        c *= 2;
    }
    void *q = realloc(*p, c * elem);
    if (!q)
        return GF_ENOMEM;
    *p = q;
    *cap = c;
    return 0;
}

static int builder_reserve_paths(builder *b, size_t bytes)
{
    if (bytes > SIZE_MAX - b->arena_len)
        return GF_ENOMEM;
    return grow((void **)&b->arena, &b->arena_cap, b->arena_len + bytes, 1, 1 << 16);
}

static int resize(void **p, size_t bytes)
{
    void *q = realloc(*p, bytes ? bytes : 1);
    if (!q)
        return GF_ENOMEM;
    *p = q;
    return 0;
}

/* Every per-sample array holds at least cap entries; one that grew before
 * another failed is merely larger than cap. */
static int builder_reserve_samples(builder *b, size_t more)
{
    if (more > SIZE_MAX - b->n)
        return GF_ENOMEM;
    size_t need = b->n + more;
    if (need <= b->cap)
        return 0;
    size_t c = b->cap ? b->cap : 1024;
    while (c < need) {
        if (c > SIZE_MAX / 2 / sizeof(uint64_t))
            return GF_ENOMEM;
        c *= 2;
    }
    if (resize((void **)&b->off, c * sizeof *b->off) < 0 ||
        resize((void **)&b->labels, c * sizeof *b->labels) < 0)
        return GF_ENOMEM;
    if (b->ranged && (resize((void **)&b->shard, c * sizeof *b->shard) < 0 ||
                      resize((void **)&b->doff, c * sizeof *b->doff) < 0 ||
                      resize((void **)&b->dlen, c * sizeof *b->dlen) < 0))
        return GF_ENOMEM;
    b->cap = c;
    return 0;
}

/* Shrinks the arrays to their contents and moves them into ds. */
static void builder_finish(builder *b, gf__dataset *ds)
{
    if (b->arena_len < b->arena_cap) {
        char *a = realloc(b->arena, b->arena_len ? b->arena_len : 1);
        if (a)
            b->arena = a;
    }
    if (b->n < b->cap) {
        uint64_t *o = realloc(b->off, b->n * sizeof *o);
        if (o)
            b->off = o;
        int32_t *l = realloc(b->labels, b->n * sizeof *l);
        if (l)
            b->labels = l;
        if (b->ranged) {
            (void)resize((void **)&b->shard, b->n * sizeof *b->shard);
            (void)resize((void **)&b->doff, b->n * sizeof *b->doff);
            (void)resize((void **)&b->dlen, b->n * sizeof *b->dlen);
        }
    }
    ds->n = b->n;
    ds->arena = b->arena;
    ds->path_off = b->off;
    ds->labels = b->labels;
    ds->bytes += b->arena_len + b->n * (sizeof *b->off + sizeof *b->labels);
    if (b->ranged) {
        ds->shard = b->shard;
        ds->data_off = b->doff;
        ds->data_len = b->dlen;
        ds->bytes += b->n * (sizeof *b->shard + sizeof *b->doff + sizeof *b->dlen);
    }
    memset(b, 0, sizeof *b);
}

/* An fd of at least 1, so that a zeroed struct (root_fd 0) never owns one. */
static int keep_fd(int fd)
{
    if (fd == 0) {
        int hi = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        close(fd);
        return hi;
    }
    return fd;
}

/* ------------------------------------------------------------------------ */
/* List file */

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static int list_error(char *why, size_t why_len, const char *src, uint64_t line,
                      const char *fmt, const char *tok, size_t tok_len)
{
    char msg[160];
    /* A garbage token can be huge: show its start only. */
    int shown = tok_len > 40 ? 40 : (int)tok_len;
    snprintf(msg, sizeof msg, fmt, shown, tok, tok_len > 40 ? "..." : "");
    gf__why(why, why_len, "%s:%llu: %s", src, (unsigned long long)line, msg);
    return GF_EDATASET;
}

/* Parses buf[0, size) in place. Lines are "path label": the label is the
 * last whitespace-separated token, the path everything before the last run
 * of whitespace (so it may hold spaces); leading and trailing whitespace
 * (CR of CRLF included) is ignored. Each path is moved to b->arena_len and
 * NUL-terminated; it never overtakes the bytes still to be parsed because a
 * line gives up at least its label and separator. */
static int parse_list(builder *b, char *buf, size_t size, const char *src, char *why,
                      size_t why_len)
{
    int32_t max_label = -1;
    size_t w = 0; /* write position: end of the arena */
    uint64_t lineno = 0;
    for (size_t pos = 0; pos < size;) {
        lineno++;
        char *line = buf + pos;
        char *nl = memchr(line, '\n', size - pos);
        size_t len = nl ? (size_t)(nl - line) : size - pos;
        pos += len + (nl != NULL);

        size_t a = 0, e = len;
        while (a < e && is_space(line[a]))
            a++;
        while (e > a && is_space(line[e - 1]))
            e--;
        if (a == e || line[a] == '#')
            continue;
        size_t ls = e; /* label start */
        while (ls > a && !is_space(line[ls - 1]))
            ls--;
        if (ls == a)
            return list_error(why, why_len, src, lineno,
                              "expected 'path label', got '%.*s%s'", line + a, e - a);
        size_t pe = ls; /* path end */
        while (pe > a && is_space(line[pe - 1]))
            pe--;

        uint64_t v = 0;
        for (size_t i = ls; i < e; i++) {
            unsigned d = (unsigned char)line[i] - '0';
            if (d > 9)
                return list_error(why, why_len, src, lineno,
                                  "label '%.*s%s' is not a non-negative integer", line + ls,
                                  e - ls);
            v = v * 10 + d;
            if (v > LABEL_MAX)
                return list_error(why, why_len, src, lineno,
                                  "label '%.*s%s' is too large (max 2147483646)", line + ls,
                                  e - ls);
        }
        if (memchr(line + a, '\0', pe - a))
            return list_error(why, why_len, src, lineno, "NUL byte in path%.*s%s", "", 0);

        if (b->n == b->cap && builder_reserve_samples(b, 1) < 0)
            return GF_ENOMEM;
        /* w <= line + a - buf: every earlier line left >= 2 bytes behind. */
        memmove(buf + w, line + a, pe - a);
        b->off[b->n] = w;
        b->labels[b->n] = (int32_t)v;
        b->n++;
        w += pe - a;
        buf[w++] = '\0';
        if ((int32_t)v > max_label)
            max_label = (int32_t)v;
    }
    b->arena_len = w;
    return max_label + 1;
}

static int open_list(gf__dataset *ds, const char *src, int fd, const struct stat *st,
                     char *why, size_t why_len)
{
    builder b = {0};
    if ((uint64_t)st->st_size >= SIZE_MAX) {
        gf__why(why, why_len, "%s: file too large", src);
        return GF_EDATASET;
    }
    size_t size = (size_t)st->st_size;
    b.arena = malloc(size + 1);
    if (!b.arena)
        return GF_ENOMEM;
    b.arena_cap = size + 1;
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, b.arena + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            gf__why(why, why_len, "%s: %s", src, strerror(errno));
            builder_free(&b);
            return GF_EDATASET;
        }
        if (r == 0)
            break; /* shrank while we read: index what is there */
        got += (size_t)r;
    }
    /* One sample per line at most: count lines for an exact first size. */
    size_t lines = 1;
    for (const char *p = b.arena, *end = b.arena + got;
         (p = memchr(p, '\n', (size_t)(end - p))) != NULL; p++)
        lines++;
    int rc = builder_reserve_samples(&b, lines);
    if (rc < 0) {
        builder_free(&b);
        return rc;
    }
    rc = parse_list(&b, b.arena, got, src, why, why_len);
    if (rc < 0) {
        builder_free(&b);
        return rc;
    }
    if (b.n == 0) {
        gf__why(why, why_len, "%s: no samples (every line blank or a comment)", src);
        builder_free(&b);
        return GF_EDATASET;
    }
    ds->n_classes = rc;
    builder_finish(&b, ds);

    /* The paths are relative to the list file's directory. */
    const char *slash = strrchr(src, '/');
    int dfd;
    if (!slash) {
        dfd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    } else if (slash == src) {
        dfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    } else {
        size_t dl = (size_t)(slash - src);
        char *dir = malloc(dl + 1);
        if (!dir)
            return GF_ENOMEM;
        memcpy(dir, src, dl);
        dir[dl] = '\0';
        dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        free(dir);
    }
    ds->root_fd = dfd < 0 ? -1 : keep_fd(dfd);
    if (ds->root_fd < 0) {
        gf__why(why, why_len, "%s: cannot open its directory: %s", src, strerror(errno));
        return GF_EDATASET;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* ImageFolder */

static const char *const image_ext[] = {".jpg", ".jpeg", ".png", ".ppm", ".pgm",
                                        ".pbm", ".pnm",  ".bmp", ".gif", ".tga",
                                        ".psd", ".tif",  ".tiff", ".webp"};

static int has_image_ext(const char *name, size_t len)
{
    const char *dot = memrchr(name, '.', len);
    if (!dot)
        return 0;
    size_t el = len - (size_t)(dot - name);
    for (size_t i = 0; i < sizeof image_ext / sizeof image_ext[0]; i++)
        if (strlen(image_ext[i]) == el && strncasecmp(dot, image_ext[i], el) == 0)
            return 1;
    return 0;
}

/* A list of names in one block, for one directory's sub-directories and for
 * the class names. */
typedef struct names {
    char *buf;
    size_t len, cap;
    size_t *off;
    size_t n, ncap;
} names;

static int names_add(names *s, const char *name)
{
    size_t l = strlen(name) + 1;
    if (grow((void **)&s->buf, &s->cap, s->len + l, 1, 256) < 0 ||
        grow((void **)&s->off, &s->ncap, s->n + 1, sizeof *s->off, 16) < 0)
        return GF_ENOMEM;
    memcpy(s->buf + s->len, name, l);
    s->off[s->n++] = s->len;
    s->len += l;
    return 0;
}

static void names_free(names *s)
{
    free(s->buf);
    free(s->off);
    memset(s, 0, sizeof *s);
}

static int cmp_names(const void *x, const void *y, void *ctx)
{
    const char *buf = ctx;
    return strcmp(buf + *(const size_t *)x, buf + *(const size_t *)y);
}

/* Order of os.walk roots then file names: compare the directory parts as
 * whole strings ("c/a-b" < "c/a/b", as Python sorts them), then the names. */
static int cmp_walk_order(const void *x, const void *y, void *ctx)
{
    const char *arena = ctx;
    const char *p = arena + *(const uint64_t *)x;
    const char *q = arena + *(const uint64_t *)y;
    const char *ps = strrchr(p, '/'), *qs = strrchr(q, '/');
    size_t pl = (size_t)(ps - p), ql = (size_t)(qs - q);
    int c = memcmp(p, q, pl < ql ? pl : ql);
    if (c)
        return c;
    if (pl != ql)
        return pl < ql ? -1 : 1;
    return strcmp(ps + 1, qs + 1);
}

typedef struct walk {
    builder *b;
    int root_fd;
    int32_t label;
    const char *src;
    char *why;
    size_t why_len;
    char path[PATH_MAX]; /* relative path of the directory being read */
} walk;

typedef struct ancestor {
    dev_t dev;
    ino_t ino;
    const struct ancestor *up;
} ancestor;

enum { KIND_SKIP, KIND_FILE, KIND_DIR };

/* Resolves DT_UNKNOWN and symlinks by stat (following links, as os.walk
 * with followlinks=True does). A dangling link counts as a file, as in
 * torchvision: it is then reported as a bad sample, and indices still match. */
static int entry_kind(int dfd, const struct dirent *d)
{
    unsigned char t = d->d_type;
    if (t == DT_UNKNOWN || t == DT_LNK) {
        struct stat st;
        if (fstatat(dfd, d->d_name, &st, 0) != 0)
            return t == DT_LNK ? KIND_FILE : KIND_SKIP;
        if (S_ISDIR(st.st_mode))
            return KIND_DIR;
        return S_ISREG(st.st_mode) ? KIND_FILE : KIND_SKIP;
    }
    if (t == DT_DIR)
        return KIND_DIR;
    return t == DT_REG ? KIND_FILE : KIND_SKIP;
}

/* Reads directory w->path (length plen): appends its image files, then
 * descends into its sub-directories (after closing it, so that the number
 * of open descriptors does not grow with depth). */
static int walk_dir(walk *w, size_t plen, const ancestor *up)
{
    int fd = openat(w->root_fd, w->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        gf__why(w->why, w->why_len, "%s/%s: %s", w->src, w->path, strerror(errno));
        return GF_EDATASET;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        gf__why(w->why, w->why_len, "%s/%s: %s", w->src, w->path, strerror(errno));
        close(fd);
        return GF_EDATASET;
    }
    for (const ancestor *a = up; a; a = a->up)
        if (a->dev == st.st_dev && a->ino == st.st_ino) {
            close(fd); /* a link back to an ancestor: os.walk would loop */
            return 0;
        }
    ancestor self = {st.st_dev, st.st_ino, up};
    DIR *dir = fdopendir(fd);
    if (!dir) {
        gf__why(w->why, w->why_len, "%s/%s: %s", w->src, w->path, strerror(errno));
        close(fd);
        return GF_EDATASET;
    }
    names subdirs = {0};
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *d = readdir(dir);
        if (!d) {
            if (errno) {
                gf__why(w->why, w->why_len, "%s/%s: %s", w->src, w->path, strerror(errno));
                rc = GF_EDATASET;
            }
            break;
        }
        if (d->d_name[0] == '.')
            continue; /* hidden, and "." and ".." */
        size_t nl = strlen(d->d_name);
        int kind = entry_kind(dirfd(dir), d);
        if (kind == KIND_DIR) {
            if ((rc = names_add(&subdirs, d->d_name)) < 0)
                break;
        } else if (kind == KIND_FILE && has_image_ext(d->d_name, nl)) {
            builder *b = w->b;
            if ((rc = builder_reserve_paths(b, plen + 1 + nl + 1)) < 0 ||
                (rc = builder_reserve_samples(b, 1)) < 0)
                break;
            char *p = b->arena + b->arena_len;
            memcpy(p, w->path, plen);
            p[plen] = '/';
            memcpy(p + plen + 1, d->d_name, nl + 1);
            b->off[b->n] = b->arena_len;
            b->labels[b->n] = w->label;
            b->n++;
            b->arena_len += plen + 1 + nl + 1;
        }
    }
    closedir(dir);
    for (size_t i = 0; rc == 0 && i < subdirs.n; i++) {
        const char *name = subdirs.buf + subdirs.off[i];
        size_t nl = strlen(name);
        if (plen + 1 + nl >= sizeof w->path) {
            gf__why(w->why, w->why_len, "%s/%s/%s: %s", w->src, w->path, name,
                    strerror(ENAMETOOLONG));
            rc = GF_EDATASET;
            break;
        }
        w->path[plen] = '/';
        memcpy(w->path + plen + 1, name, nl + 1);
        rc = walk_dir(w, plen + 1 + nl, &self);
        w->path[plen] = '\0';
    }
    names_free(&subdirs);
    return rc;
}

static int open_folder(gf__dataset *ds, const char *src, char *why, size_t why_len)
{
    int dfd = open(src, O_PATH | O_DIRECTORY | O_CLOEXEC);
    ds->root_fd = dfd < 0 ? -1 : keep_fd(dfd);
    if (ds->root_fd < 0) {
        gf__why(why, why_len, "%s: %s", src, strerror(errno));
        return GF_EDATASET;
    }
    int fd = openat(ds->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *dir = fd < 0 ? NULL : fdopendir(fd);
    if (!dir) {
        gf__why(why, why_len, "%s: %s", src, strerror(errno));
        if (fd >= 0)
            close(fd);
        return GF_EDATASET;
    }
    /* Classes: the root's sub-directories (files in the root are ignored). */
    names classes = {0};
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *d = readdir(dir);
        if (!d) {
            if (errno) {
                gf__why(why, why_len, "%s: %s", src, strerror(errno));
                rc = GF_EDATASET;
            }
            break;
        }
        if (d->d_name[0] == '.' || entry_kind(dirfd(dir), d) != KIND_DIR)
            continue;
        if ((rc = names_add(&classes, d->d_name)) < 0)
            break;
    }
    closedir(dir);
    if (rc == 0 && classes.n == 0) {
        gf__why(why, why_len, "%s: no class sub-directories", src);
        rc = GF_EDATASET;
    }
    if (rc == 0 && classes.n > (size_t)INT32_MAX) {
        gf__why(why, why_len, "%s: too many classes", src);
        rc = GF_EDATASET;
    }
    if (rc < 0) {
        names_free(&classes);
        return rc;
    }
    qsort_r(classes.off, classes.n, sizeof *classes.off, cmp_names, classes.buf);

    /* class_names: the pointer array and the strings in one block. */
    size_t names_bytes = classes.n * sizeof(char *) + classes.len;
    char **cn = malloc(names_bytes);
    if (!cn) {
        names_free(&classes);
        return GF_ENOMEM;
    }
    char *strs = (char *)(cn + classes.n);
    memcpy(strs, classes.buf, classes.len);
    for (size_t k = 0; k < classes.n; k++)
        cn[k] = strs + classes.off[k];
    size_t n_classes = classes.n;
    names_free(&classes);
    ds->class_names = cn;
    ds->bytes += names_bytes;

    builder b = {0};
    walk *w = malloc(sizeof *w);
    if (!w)
        return GF_ENOMEM;
    w->b = &b;
    w->root_fd = ds->root_fd;
    w->src = src;
    w->why = why;
    w->why_len = why_len;
    for (size_t k = 0; k < n_classes; k++) {
        size_t nl = strlen(cn[k]);
        if (nl >= sizeof w->path) {
            gf__why(why, why_len, "%s/%s: %s", src, cn[k], strerror(ENAMETOOLONG));
            rc = GF_EDATASET;
            break;
        }
        memcpy(w->path, cn[k], nl + 1);
        w->label = (int32_t)k;
        size_t first = b.n;
        if ((rc = walk_dir(w, nl, NULL)) < 0)
            break;
        if (b.n - first > 1)
            qsort_r(b.off + first, b.n - first, sizeof *b.off, cmp_walk_order, b.arena);
    }
    free(w);
    if (rc == 0 && b.n == 0) {
        gf__why(why, why_len, "%s: no image files in any class sub-directory", src);
        rc = GF_EDATASET;
    }
    if (rc < 0) {
        builder_free(&b);
        return rc;
    }
    ds->n_classes = (int)n_classes;
    builder_finish(&b, ds);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Tar shards (WebDataset) */

/* Bounds on what a pattern may expand to, checked as it expands: a short
 * pattern such as "{0..999}{0..999}{0..999}.tar" must not take the
 * memory of a billion names before the first one is found missing. */
#define SHARDS_MAX ((size_t)1 << 20)
#define SHARD_NAMES_MAX_BYTES ((size_t)64 << 20)
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

/* Commas outside braces separate elements; 1 if there is at least one and
 * every one ends in ".tar". */
static int is_shard_source(const char *src)
{
    int depth = 0;
    size_t start = 0, len = strlen(src);
    for (size_t i = 0; i <= len; i++) {
        char c = src[i];
        if (c == '{')
            depth++;
        else if (c == '}' && depth > 0)
            depth--;
        if ((c == ',' && depth == 0) || c == '\0') {
            size_t el = i - start;
            if (el < 4 || strncasecmp(src + i - 4, ".tar", 4) != 0)
                return 0;
            start = i + 1;
        }
    }
    return 1;
}

/* Expands the brace ranges of pat[0, len) after the prefix buf[0, blen)
 * (buf has room for the whole element: an expansion is never longer than
 * its pattern) into out. */
static int expand_braces(const char *pat, size_t len, char *buf, size_t blen, names *out,
                         const char *src, char *why, size_t why_len)
{
    const char *ob = memchr(pat, '{', len);
    if (!ob) {
        memcpy(buf + blen, pat, len);
        buf[blen + len] = '\0';
        if (out->n >= SHARDS_MAX) {
            gf__why(why, why_len, "%s: more than %zu shards", src, SHARDS_MAX);
            return GF_EDATASET;
        }
        if (out->len + blen + len + 1 > SHARD_NAMES_MAX_BYTES) {
            gf__why(why, why_len, "%s: its shard names take more than %zu MiB", src,
                    SHARD_NAMES_MAX_BYTES >> 20);
            return GF_EDATASET;
        }
        return names_add(out, buf);
    }
    size_t pre = (size_t)(ob - pat);
    const char *a = ob + 1, *end = pat + len;
    const char *p = a;
    while (p < end && *p >= '0' && *p <= '9')
        p++;
    size_t alen = (size_t)(p - a);
    const char *b = p + 2;
    const char *q = b;
    while (q < end && *q >= '0' && *q <= '9')
        q++;
    size_t bl = (size_t)(q - b);
    if (alen == 0 || alen > 18 || end - p < 2 || p[0] != '.' || p[1] != '.' || bl == 0 ||
        bl > 18 || q >= end || *q != '}') {
        gf__why(why, why_len,
                "%s: bad brace pattern (expected {FIRST..LAST} with decimal bounds, e.g. "
                "{000000..000127})",
                src);
        return GF_EDATASET;
    }
    unsigned long long lo = strtoull(a, NULL, 10), hi = strtoull(b, NULL, 10);
    if (lo > hi) {
        gf__why(why, why_len, "%s: brace range {%.*s..%.*s} is descending", src, (int)alen,
                a, (int)bl, b);
        return GF_EDATASET;
    }
    if (hi - lo >= SHARDS_MAX) {
        gf__why(why, why_len, "%s: more than %zu shards", src, SHARDS_MAX);
        return GF_EDATASET;
    }
    int width = ((alen > 1 && a[0] == '0') || (bl > 1 && b[0] == '0'))
                    ? (int)GF__MAX(alen, bl)
                    : 0;
    memcpy(buf + blen, pat, pre);
    const char *rest = q + 1;
    for (unsigned long long v = lo;; v++) {
        int w = sprintf(buf + blen + pre, "%0*llu", width, v);
        int rc = expand_braces(rest, (size_t)(end - rest), buf, blen + pre + (size_t)w, out,
                               src, why, why_len);
        if (rc < 0)
            return rc;
        if (v == hi)
            break;
    }
    return 0;
}

static int expand_source(const char *src, names *out, char *why, size_t why_len)
{
    size_t len = strlen(src);
    char *buf = malloc(len + 1);
    if (!buf)
        return GF_ENOMEM;
    int depth = 0, rc = 0;
    size_t start = 0;
    for (size_t i = 0; i <= len && rc == 0; i++) {
        char c = src[i];
        if (c == '{')
            depth++;
        else if (c == '}' && depth > 0)
            depth--;
        if ((c == ',' && depth == 0) || c == '\0') {
            rc = expand_braces(src + start, i - start, buf, 0, out, src, why, why_len);
            start = i + 1;
        }
    }
    free(buf);
    return rc;
}

/* The sample being gathered: consecutive members with one key. */
typedef struct shard_scan {
    gf__dataset *ds;
    builder *b;
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
    const char *bad;       /* why the key cannot be a sample */
    uint64_t img_off, img_size, key_at;
    int32_t label;
    char *why;             /* the scan's error message */
    size_t why_len;
} shard_scan;

static int keep_name(char **p, size_t *cap, const char *s, size_t n)
{
    if (grow((void **)p, cap, n + 1, 1, 64) < 0)
        return GF_ENOMEM;
    memcpy(*p, s, n);
    (*p)[n] = '\0';
    return 0;
}

/* Ends the current key: a sample if it has an image and a label. */
static int flush_key(shard_scan *c)
{
    if (!c->open)
        return 0;
    c->open = 0;
    if (!c->bad && !c->has_img)
        c->bad = "no image member";
    if (!c->bad && !c->has_cls)
        c->bad = "no .cls member";
    if (c->bad) {
        c->ds->skipped_keys++;
        ds_warn(c->ds, "%s: offset %llu: key '%.80s' skipped: %s", c->path,
                (unsigned long long)c->key_at, c->key, c->bad);
        return 0;
    }
    builder *b = c->b;
    size_t need = c->display_len + 1 + c->img_len + 1;
    if (builder_reserve_paths(b, need) < 0 || builder_reserve_samples(b, 1) < 0)
        return GF_ENOMEM;
    char *p = b->arena + b->arena_len;
    memcpy(p, c->display, c->display_len);
    p[c->display_len] = ':';
    memcpy(p + c->display_len + 1, c->img, c->img_len + 1);
    b->off[b->n] = b->arena_len;
    b->labels[b->n] = c->label;
    b->shard[b->n] = c->shard;
    b->doff[b->n] = c->img_off;
    b->dlen[b->n] = (uint32_t)c->img_size;
    b->n++;
    b->arena_len += need;
    if (c->label > c->max_label)
        c->max_label = c->label;
    return 0;
}

static int is_image_suffix(const char *ext, size_t len)
{
    for (size_t i = 0; i < sizeof image_ext / sizeof image_ext[0]; i++)
        if (strlen(image_ext[i]) - 1 == len && strncasecmp(image_ext[i] + 1, ext, len) == 0)
            return 1;
    return 0;
}

/* The label in a .cls member: decimal text, surrounding whitespace allowed. */
static const char *parse_cls(const char *t, size_t n, int32_t *out)
{
    size_t a = 0, e = n;
    while (a < e && (is_space(t[a]) || t[a] == '\n'))
        a++;
    while (e > a && (is_space(t[e - 1]) || t[e - 1] == '\n'))
        e--;
    if (a == e)
        return "empty .cls";
    uint64_t v = 0;
    for (size_t i = a; i < e; i++) {
        unsigned d = (unsigned char)t[i] - '0';
        if (d > 9)
            return ".cls is not a non-negative decimal integer";
        v = v * 10 + d;
        if (v > LABEL_MAX)
            return ".cls label is too large (max 2147483646)";
    }
    *out = (int32_t)v;
    return NULL;
}

static int on_member(void *ctx, gf__tar *t, const gf__tar_member *m)
{
    shard_scan *c = ctx;
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
        c->bad = NULL;
        c->key_at = m->header_offset;
    }
    if (ext_len == 3 && strncasecmp(ext, "cls", 3) == 0) {
        if (c->has_cls) {
            c->ds->skipped_members++;
            ds_warn(c->ds, "%s: offset %llu: member '%.80s' skipped: a second label of its key",
                    c->path, (unsigned long long)m->header_offset, m->name);
            return 0;
        }
        c->has_cls = 1;
        if (m->size > CLS_MAX) {
            if (!c->bad)
                c->bad = ".cls over 64 bytes";
            return 0;
        }
        char text[CLS_MAX];
        int rc = gf__tar_read(t, m->offset, text, (size_t)m->size, c->why, c->why_len);
        if (rc < 0)
            return rc;
        const char *bad = parse_cls(text, (size_t)m->size, &c->label);
        if (bad && !c->bad)
            c->bad = bad;
    } else if (is_image_suffix(ext, ext_len)) {
        if (c->has_img) {
            c->ds->skipped_members++;
            ds_warn(c->ds, "%s: offset %llu: member '%.80s' skipped: a second image of its key",
                    c->path, (unsigned long long)m->header_offset, m->name);
            return 0;
        }
        c->has_img = 1;
        if (m->size > UINT32_MAX && !c->bad)
            c->bad = "image member over 4 GiB";
        c->img_off = m->offset;
        c->img_size = m->size;
        if (keep_name(&c->img, &c->img_cap, name, m->name_len) < 0)
            return GF_ENOMEM;
        c->img_len = m->name_len;
    }
    return 0; /* other members (key.json, ...) are not ours */
}

static int open_shards(gf__dataset *ds, const char *src, char *why, size_t why_len)
{
    names paths = {0};
    int rc = expand_source(src, &paths, why, why_len);
    if (rc < 0) {
        names_free(&paths);
        return rc;
    }
    /* Shard paths are relative to the current directory now. */
    int dfd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    ds->root_fd = dfd < 0 ? -1 : keep_fd(dfd);
    if (ds->root_fd < 0) {
        gf__why(why, why_len, "%s: cannot open the current directory: %s", src,
                strerror(errno));
        names_free(&paths);
        return GF_EDATASET;
    }
    /* shard_paths: the pointer array and the strings in one block. */
    size_t block = paths.n * sizeof(char *) + paths.len;
    char **sp = malloc(block);
    if (!sp) {
        names_free(&paths);
        return GF_ENOMEM;
    }
    char *strs = (char *)(sp + paths.n);
    memcpy(strs, paths.buf, paths.len);
    for (size_t k = 0; k < paths.n; k++)
        sp[k] = strs + paths.off[k];
    ds->shard_paths = sp;
    ds->n_shards = (uint32_t)paths.n;
    ds->bytes += block;
    names_free(&paths);

    builder b = {.ranged = 1};
    shard_scan c = {.ds = ds, .b = &b, .max_label = -1, .why = why, .why_len = why_len};
    for (uint32_t k = 0; k < ds->n_shards && rc == 0; k++) {
        const char *path = sp[k];
        int fd = openat(ds->root_fd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0) {
            gf__why(why, why_len, "%s: %s", path, strerror(errno));
            if (fd >= 0)
                close(fd);
            rc = GF_EDATASET;
            break;
        }
        if (!S_ISREG(st.st_mode)) {
            gf__why(why, why_len, "%s: not a regular file", path);
            close(fd);
            rc = GF_EDATASET;
            break;
        }
        const char *slash = strrchr(path, '/');
        c.shard = k;
        c.path = path;
        c.display = slash ? slash + 1 : path;
        c.display_len = strlen(c.display);
        rc = gf__tar_scan(fd, (uint64_t)st.st_size, path, on_member, &c, &ds->warnings,
                          ds->warning, sizeof ds->warning, why, why_len);
        if (rc == 0)
            rc = flush_key(&c); /* a key never spans shards */
        c.open = 0;
        close(fd);
    }
    free(c.key);
    free(c.img);
    if (rc == 0 && b.n == 0) {
        gf__why(why, why_len, "%s: no samples in %u shard(s) (%llu keys, %llu members skipped%s%s)",
                src, ds->n_shards, (unsigned long long)ds->skipped_keys,
                (unsigned long long)ds->skipped_members, ds->warning[0] ? "; first: " : "",
                ds->warning);
        rc = GF_EDATASET;
    }
    if (rc < 0) {
        builder_free(&b);
        return rc;
    }
    ds->n_classes = c.max_label + 1;
    builder_finish(&b, ds);
    return 0;
}

/* ------------------------------------------------------------------------ */

int gf__dataset_open(gf__dataset *ds, const char *source, char *why, size_t why_len)
{
    if (!ds)
        return GF_EINVAL;
    memset(ds, 0, sizeof *ds);
    ds->root_fd = -1;
    if (why && why_len)
        why[0] = '\0';
    if (!source || !*source) {
        gf__why(why, why_len, "no data set given");
        return GF_EDATASET;
    }
    struct stat st;
    if (is_shard_source(source) &&
        !(strpbrk(source, ",{") == NULL && stat(source, &st) == 0 && S_ISDIR(st.st_mode))) {
        int rc = open_shards(ds, source, why, why_len);
        if (rc == GF_ENOMEM)
            gf__why(why, why_len, "%s: out of memory while indexing", source);
        if (rc < 0)
            gf__dataset_close(ds);
        return rc;
    }
    /* Opened once and fstat'ed, so the type checked is the file read. */
    int fd = open(source, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0 || fstat(fd, &st) != 0) {
        gf__why(why, why_len, "%s: %s", source, strerror(errno));
        if (fd >= 0)
            close(fd);
        return GF_EDATASET;
    }
    int rc;
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        rc = open_folder(ds, source, why, why_len);
    } else if (S_ISREG(st.st_mode)) {
        rc = open_list(ds, source, fd, &st, why, why_len);
        close(fd);
    } else {
        close(fd);
        gf__why(why, why_len, "%s: not a directory or a regular file", source);
        rc = GF_EDATASET;
    }
    if (rc == GF_ENOMEM)
        gf__why(why, why_len, "%s: out of memory while indexing", source);
    if (rc < 0)
        gf__dataset_close(ds);
    return rc;
}

void gf__dataset_close(gf__dataset *ds)
{
    if (!ds)
        return;
    free(ds->arena);
    free(ds->path_off);
    free(ds->labels);
    free(ds->class_names);
    free(ds->shard_paths);
    free(ds->shard);
    free(ds->data_off);
    free(ds->data_len);
    if (ds->root_fd > 0)
        close(ds->root_fd);
    memset(ds, 0, sizeof *ds);
    ds->root_fd = -1;
}
