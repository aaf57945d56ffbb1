/* A tar shard's samples from its index sidecar instead of its headers:
 * SHARD.idx beside SHARD.tar, in the text format NVIDIA DALI's wds2idx
 * writes (and readers.webdataset's index_paths read), version v1.2:
 *
 *   v1.2 N
 *   EXT OFFSET SIZE NAME [EXT OFFSET SIZE NAME ...]     (N lines, one a key)
 *
 * OFFSET is a member's data offset, NAME its whole member name. DALI
 * reads the first line's first two tokens only; gpufeed prepare adds a
 * third, "shard_bytes=N", the shard's size when the sidecar was written.
 * The format holds no checksum of the shard, so "matches" is what can be
 * checked without reading headers: the shard's size as recorded (or, for
 * a sidecar without one, not older than the shard: a plain copy that
 * loses mtimes then costs a warning and a scan, never a wrong index), members in
 * file order, 512-aligned, with room for a header before each and inside
 * the file, names a scan would take as they are, every key one image and
 * one .cls, and every .cls (read, as a scan reads it) a label. Anything
 * else and the caller scans the headers instead, with a warning: a
 * sidecar is a shortcut, never a second truth. Run by the thread that
 * opens the data set. */
#include "dataset_indexers.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Larger sidecars are ignored (the headers are scanned): about 200,000
 * samples of long names, far above a shard's usual few thousand. */
#define SIDECAR_MAX_BYTES ((size_t)64 << 20)
#define CLS_MAX 64
#define BLOCK 512
#define WINDOW ((size_t)64 << 10)

typedef struct entry {
    const char *name;     /* the image member's name, in the sidecar text */
    size_t name_len;
    uint64_t img_off, img_size, cls_off, cls_size;
} entry;

/* "SHARD.tar" -> "SHARD.idx" (the caller checked the suffix). */
static char *sidecar_path(const char *shard)
{
    size_t n = strlen(shard);
    if (n < 4 || strcasecmp(shard + n - 4, ".tar") != 0)
        return NULL;
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, shard, n - 4);
        memcpy(p + n - 4, ".idx", 5);
    }
    return p;
}

static int parse_u64(const char *s, size_t n, uint64_t *out)
{
    if (n == 0 || n > 19)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return 0;
}

/* The next token of [*p, end) on this line; 0 at the line's end. */
static size_t token(const char **p, const char *end, const char **tok)
{
    const char *s = *p;
    while (s < end && (*s == ' ' || *s == '\t' || *s == '\r'))
        s++;
    const char *e = s;
    while (e < end && *e != ' ' && *e != '\t' && *e != '\r')
        e++;
    *tok = s;
    *p = e;
    return (size_t)(e - s);
}

/* 1 if a scan takes the name as it is: not absolute, no "." or ".."
 * component, no empty one (the scanner strips "./" and refuses ".."). */
static int name_as_scanned(const char *s, size_t n)
{
    if (n == 0 || n >= 65536 || s[0] == '/')
        return 0;
    size_t a = 0;
    for (size_t i = 0; i <= n; i++)
        if (i == n || s[i] == '/') {
            size_t c = i - a;
            if (c == 0 || (c == 1 && s[a] == '.') || (c == 2 && s[a] == '.' && s[a + 1] == '.'))
                return 0;
            a = i + 1;
        }
    return 1;
}

/* One line: its components checked against the file and each other; the
 * image and the label kept. *end: where the last member's data ends. */
static const char *parse_line(const char *p, const char *eol, uint64_t file_size,
                              uint64_t *end, entry *e)
{
    const char *key = NULL;
    size_t key_len = 0;
    int imgs = 0, clss = 0;
    for (;;) {
        const char *ext, *off_s, *size_s, *name;
        size_t ext_n = token(&p, eol, &ext);
        if (ext_n == 0)
            break;
        size_t off_n = token(&p, eol, &off_s), size_n = token(&p, eol, &size_s),
               name_n = token(&p, eol, &name);
        uint64_t off, size;
        if (!name_n || parse_u64(off_s, off_n, &off) || parse_u64(size_s, size_n, &size))
            return "a component is not 'EXT OFFSET SIZE NAME'";
        uint64_t room = (*end + BLOCK - 1) / BLOCK * BLOCK + BLOCK; /* a header first */
        if (off % BLOCK || off < room)
            return "member offsets out of order or not 512-aligned";
        if (off > file_size || size > file_size - off)
            return "a member runs past the end of the shard";
        if (!name_as_scanned(name, name_n))
            return "a member name a scan would not take as it is";
        const char *base = memrchr(name, '/', name_n);
        base = base ? base + 1 : name;
        const char *dot = memchr(base, '.', (size_t)(name + name_n - base));
        size_t k_n = dot ? (size_t)(dot - name) : name_n;
        if (!dot || (size_t)(name + name_n - dot - 1) != ext_n || memcmp(dot + 1, ext, ext_n))
            return "an extension that is not its name's";
        if (key && (k_n != key_len || memcmp(key, name, k_n)))
            return "two keys on one line";
        key = name;
        key_len = k_n;
        *end = off + size;
        if (ext_n == 3 && strncasecmp(ext, "cls", 3) == 0) {
            clss++;
            e->cls_off = off;
            e->cls_size = size;
        } else if (gf__is_image_suffix(ext, ext_n)) {
            imgs++;
            e->name = name;
            e->name_len = name_n;
            e->img_off = off;
            e->img_size = size;
        }
    }
    if (!key)
        return "an empty line";
    if (imgs != 1 || clss != 1)
        return "a key without exactly one image and one .cls";
    if (e->cls_size > CLS_MAX || e->img_size > UINT32_MAX)
        return "a .cls over 64 bytes or an image over 4 GiB";
    return NULL;
}

/* Reads the whole sidecar (regular, not over SIDECAR_MAX_BYTES); *older:
 * its mtime is before the shard's. Returns 0, 1 if there is none, 2 with
 * *bad, or GF_ENOMEM. */
static int load(int root_fd, const char *path, const struct stat *shard_st, char **text,
                size_t *len, int *older, const char **bad)
{
    int fd = openat(root_fd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return errno == ENOENT ? 1 : (*bad = "cannot be opened", 2);
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return *bad = "not a regular file", 2;
    }
    *older = st.st_mtim.tv_sec < shard_st->st_mtim.tv_sec ||
             (st.st_mtim.tv_sec == shard_st->st_mtim.tv_sec &&
              st.st_mtim.tv_nsec < shard_st->st_mtim.tv_nsec);
    int rc = 2;
    if ((uint64_t)st.st_size > SIDECAR_MAX_BYTES)
        *bad = "over 64 MiB";
    else if (!(*text = malloc((size_t)st.st_size + 1)))
        rc = GF_ENOMEM;
    else {
        size_t got = 0, want = (size_t)st.st_size;
        while (got < want) {
            ssize_t r = pread(fd, *text + got, want - got, (off_t)got);
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        if (got == want) {
            (*text)[want] = '\0';
            *len = want;
            rc = 0;
        } else {
            *bad = "could not be read";
        }
    }
    close(fd);
    return rc;
}

/* Every line parsed into es (n of them). Returns 0, 2 with *bad and
 * *line (1: the first), or GF_ENOMEM. */
static int parse(const char *text, size_t len, uint64_t file_size, entry **es, size_t *n,
                 int64_t *recorded_size, const char **bad, size_t *line)
{
    const char *p = text, *end = text + len;
    const char *eol = memchr(p, '\n', len);
    if (!eol)
        eol = end;
    const char *tok;
    size_t tn = token(&p, eol, &tok);
    uint64_t count;
    *line = 1;
    if (tn != 4 || memcmp(tok, "v1.2", 4) != 0)
        return *bad = "not a v1.2 index", 2;
    tn = token(&p, eol, &tok);
    /* a sample takes two members (1 KiB of shard at least) and a line of
     * 24 bytes at least: the entries allocated are bounded by both files */
    if (parse_u64(tok, tn, &count) || count == 0 || count > file_size / (2 * BLOCK) ||
        count > len / 24)
        return *bad = "no plausible sample count", 2;
    uint64_t sz;
    tn = token(&p, eol, &tok);
    *recorded_size = tn > 12 && memcmp(tok, "shard_bytes=", 12) == 0 &&
                             parse_u64(tok + 12, tn - 12, &sz) == 0 && sz <= INT64_MAX
                         ? (int64_t)sz
                         : -1;
    entry *v = calloc((size_t)count, sizeof *v);
    if (!v)
        return GF_ENOMEM;
    uint64_t data_end = 0;
    size_t got = 0;
    const char *why = NULL;
    for (p = eol < end ? eol + 1 : end; p < end && !why; p = eol < end ? eol + 1 : end) {
        (*line)++;
        eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        if (got < count) {
            why = parse_line(p, eol, file_size, &data_end, &v[got++]);
        } else {
            const char *q = p;
            if (token(&q, eol, &tok))
                why = "more lines than its sample count";
        }
    }
    if (!why && got != count) {
        why = "fewer lines than its sample count";
        *line = 0;
    }
    if (why) {
        free(v);
        return *bad = why, 2;
    }
    *es = v;
    *n = got;
    return 0;
}

/* The key of an image member name: up to the first '.' of its base name. */
static size_t key_len_of(const entry *e)
{
    const char *base = memrchr(e->name, '/', e->name_len);
    base = base ? base + 1 : e->name;
    return (size_t)((const char *)memchr(base, '.', (size_t)(e->name + e->name_len - base)) -
                    e->name);
}

int gf__shard_sidecar_read(int root_fd, const char *shard_path, int shard_fd,
                           const struct stat *shard_st, gf__sidecar_add_fn add, void *ctx,
                           char *why, size_t why_len)
{
    char *path = sidecar_path(shard_path);
    if (!path)
        return 1;
    char *text = NULL;
    size_t len = 0, n = 0, line = 0;
    const char *bad = NULL;
    entry *es = NULL;
    int32_t *labels = NULL;
    int older = 0;
    int64_t recorded = -1;
    int rc = load(root_fd, path, shard_st, &text, &len, &older, &bad);
    if (rc == 0)
        rc = parse(text, len, (uint64_t)shard_st->st_size, &es, &n, &recorded, &bad, &line);
    if (rc == 0 && recorded >= 0 && recorded != (int64_t)shard_st->st_size) {
        bad = "written for a shard of another size";
        line = 1;
        rc = 2;
    } else if (rc == 0 && recorded < 0 && older) {
        bad = "older than its shard";
        rc = 2;
    }
    for (size_t i = 1; rc == 0 && i < n; i++) {
        size_t ka = key_len_of(&es[i - 1]), kb = key_len_of(&es[i]);
        if (ka == kb && memcmp(es[i - 1].name, es[i].name, ka) == 0) {
            bad = "one key on two lines";
            line = i + 2;
            rc = 2;
        }
    }
    /* The labels through a read window: small samples share a read. */
    uint8_t *win = NULL;
    uint64_t win_off = 0, win_len = 0, file_size = (uint64_t)shard_st->st_size;
    if (rc == 0 && (!(labels = malloc(n * sizeof *labels)) || !(win = malloc(WINDOW))))
        rc = GF_ENOMEM;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        uint64_t at = es[i].cls_off, want = es[i].cls_size;
        if (at < win_off || at + want > win_off + win_len) {
            size_t len = file_size - at < WINDOW ? (size_t)(file_size - at) : WINDOW;
            ssize_t r = pread(shard_fd, win, len, (off_t)at);
            win_off = at;
            win_len = r > 0 ? (uint64_t)r : 0;
        }
        const char *b = at + want <= win_off + win_len
                            ? gf__parse_cls((const char *)win + (at - win_off), (size_t)want,
                                            &labels[i])
                            : "a .cls could not be read";
        if (b) {
            bad = b;
            line = i + 2;
            rc = 2;
        }
    }
    if (rc == 2 && line)
        gf__why(why, why_len, "%s: line %zu: %s", path, line, bad);
    else if (rc == 2)
        gf__why(why, why_len, "%s: %s", path, bad);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = add(ctx, es[i].name, es[i].name_len, labels[i], es[i].img_off, es[i].img_size);
    free(win);
    free(labels);
    free(es);
    free(text);
    free(path);
    return rc;
}
