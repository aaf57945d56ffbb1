/*
 * Dataset index: turns an ImageFolder tree or a list file into one compact
 * table of (relative path, label).
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
 */
#include "dataset.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
    size_t n, cap;
} builder;

static void builder_free(builder *b)
{
    free(b->arena);
    free(b->off);
    free(b->labels);
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

static int builder_reserve_samples(builder *b, size_t more)
{
    size_t need = b->n + more;
    size_t cap = b->cap;
    int rc = grow((void **)&b->off, &cap, need, sizeof *b->off, 1024);
    if (rc < 0)
        return rc;
    size_t lcap = b->cap;
    rc = grow((void **)&b->labels, &lcap, need, sizeof *b->labels, 1024);
    if (rc < 0)
        return rc; /* off grew, labels did not: keep cap at the smaller */
    b->cap = cap;
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
    }
    ds->n = b->n;
    ds->arena = b->arena;
    ds->path_off = b->off;
    ds->labels = b->labels;
    ds->bytes += b->arena_len + b->n * (sizeof *b->off + sizeof *b->labels);
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
    /* Opened once and fstat'ed, so the type checked is the file read. */
    int fd = open(source, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
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
    if (ds->root_fd > 0)
        close(ds->root_fd);
    memset(ds, 0, sizeof *ds);
    ds->root_fd = -1;
}
