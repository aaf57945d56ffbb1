/* Dataset index from a list file: "relative/path label" per line, paths
 * relative to the list file's directory; with settings.fields, a token a
 * field in the fields' order (a path, or the label's number), separated
 * by tabs (a path may hold spaces). Run once, at open, by the thread that calls gf_open.
 *
 * The file is read with one read() into a buffer that becomes the arena:
 * each line's path is moved down over the bytes of the lines before it
 * (whose labels and newlines are no longer needed), NUL-terminated in
 * place, and the buffer is shrunk at the end. */
#include "dataset_indexers.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int list_error(char *why, size_t why_len, const char *src, uint64_t line,
                      const char *fmt, const char *tok, size_t tok_len)
{
    char msg[160];
    /* A garbage token can be huge: show its start only. */
    int shown = tok_len > 40 ? 40 : (int)tok_len;
    snprintf(msg, sizeof msg, fmt, shown, tok, tok_len > 40 ? "..." : "");
    char where[4096 + 24];
    snprintf(where, sizeof where, "%s:%llu", src, (unsigned long long)line);
    gf__why_path(why, why_len, where, "%s", msg);
    return GF_EDATASET;
}

/* A fields line [a, e) of line: a tab-separated token a field in the
 * schema's order (the label's a number). The sample's own path
 * (the image's, or the first field's without an image) goes to buf + w,
 * then each other field's, NUL after each, through scratch (the line's
 * paths are not in the arena's order); *w and *label are set. */
static int parse_fields_line(const gf__schema *s, char *line, size_t a, size_t e, char *buf,
                             size_t *w, char *scratch, uint64_t *label, const char *src,
                             uint64_t lineno, char *why, size_t why_len)
{
    size_t start[GF__FIELDS_MAX], end[GF__FIELDS_MAX];
    size_t at = a;
    for (int f = 0; f < s->n; f++) {
        char *tab = memchr(line + at, '\t', e - at);
        size_t te = f + 1 < s->n ? (tab ? (size_t)(tab - line) : e) : e;
        if ((f + 1 < s->n && !tab) || (f + 1 == s->n && tab)) {
            char msg[96];
            snprintf(msg, sizeof msg, "expected %d tab-separated fields (%s), got '%%.*s%%s'", s->n,
                     s->label >= 0 ? "a path each, the label's number" : "a path each");
            return list_error(why, why_len, src, lineno, msg, line + a, e - a);
        }
        size_t ta = at;
        while (ta < te && gf__is_space(line[ta]))
            ta++;
        size_t tz = te;
        while (tz > ta && gf__is_space(line[tz - 1]))
            tz--;
        if (ta == tz)
            return list_error(why, why_len, src, lineno, "field %.*s%s is empty", s->name[f],
                              strlen(s->name[f]));
        if (memchr(line + ta, '\0', tz - ta))
            return list_error(why, why_len, src, lineno, "NUL byte in path%.*s%s", "", 0);
        start[f] = ta;
        end[f] = tz;
        at = te + 1;
    }
    *label = 0;
    if (s->label >= 0) {
        size_t ls = start[s->label], le = end[s->label];
        for (size_t i = ls; i < le; i++) {
            unsigned d = (unsigned char)line[i] - '0';
            if (d > 9 || *label * 10 + d > GF__LABEL_MAX)
                return list_error(why, why_len, src, lineno,
                                  d > 9 ? "label '%.*s%s' is not a non-negative integer"
                                        : "label '%.*s%s' is too large (max 2147483646)",
                                  line + ls, le - ls);
            *label = *label * 10 + d;
        }
    }
    /* The sample's own path first, then the other fields' in order. */
    int order[GF__FIELDS_MAX], n = 0;
    if (s->image >= 0)
        order[n++] = s->image;
    for (int f = 0; f < s->n; f++)
        if (f != s->image && f != s->label)
            order[n++] = f;
    size_t len = 0;
    for (int j = 0; j < n; j++) {
        size_t k = end[order[j]] - start[order[j]];
        memcpy(scratch + len, line + start[order[j]], k);
        scratch[len + k] = '\0';
        len += k + 1;
    }
    memcpy(buf + *w, scratch, len); /* no longer than the line's bytes */
    *w += len;
    return 0;
}

/* Parses buf[0, size) in place. Lines are "path label": the label is the
 * last whitespace-separated token, the path everything before the last run
 * of whitespace (so it may hold spaces); leading and trailing whitespace
 * (CR of CRLF included) is ignored. Each path is moved to b->arena_len and
 * NUL-terminated; it never overtakes the bytes still to be parsed because a
 * line gives up at least its label and separator. Returns the largest
 * label + 1, *max_line the line of its first sample (the one
 * gf__builder_label_past names: the text is gone once parsed). */
static int parse_list(gf__builder *b, char *buf, size_t size, const char *src,
                      const gf__schema *schema, uint64_t *max_line, char *why, size_t why_len)
{
    char *scratch = NULL;
    if (schema && !(scratch = malloc(size + 1)))
        return GF_ENOMEM;
    int rc = 0;
    int32_t max_label = -1;
    size_t w = 0; /* write position: end of the arena */
    uint64_t lineno = 0;
    /* A UTF-8 byte-order mark (Windows editors write one) is not part of
     * the first path. */
    size_t start = size >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;
    for (size_t pos = start; pos < size;) {
        lineno++;
        char *line = buf + pos;
        char *nl = memchr(line, '\n', size - pos);
        size_t len = nl ? (size_t)(nl - line) : size - pos;
        pos += len + (nl != NULL);

        size_t a = 0, e = len;
        while (a < e && gf__is_space(line[a]))
            a++;
        while (e > a && gf__is_space(line[e - 1]))
            e--;
        if (a == e || line[a] == '#')
            continue;
        if (b->n == b->cap && gf__builder_reserve_samples(b, 1) < 0) {
            rc = GF_ENOMEM;
            goto out;
        }
        /* every earlier line left its newline behind, at least */
        assert(w <= (size_t)(line + a - buf));
        uint64_t v = 0;
        b->off[b->n] = w;
        if (schema) {
            rc = parse_fields_line(schema, line, a, e, buf, &w, scratch, &v, src, lineno, why,
                                   why_len);
            if (rc < 0)
                goto out;
        } else {
            size_t ls = e; /* label start */
            while (ls > a && !gf__is_space(line[ls - 1]))
                ls--;
            if (ls == a) {
                rc = list_error(why, why_len, src, lineno, "expected 'path label', got '%.*s%s'",
                                line + a, e - a);
                goto out;
            }
            size_t pe = ls; /* path end */
            while (pe > a && gf__is_space(line[pe - 1]))
                pe--;
            for (size_t i = ls; i < e; i++) {
                unsigned d = (unsigned char)line[i] - '0';
                if (d > 9 || v * 10 + d > GF__LABEL_MAX) {
                    rc = list_error(why, why_len, src, lineno,
                                    d > 9 ? "label '%.*s%s' is not a non-negative integer"
                                          : "label '%.*s%s' is too large (max 2147483646)",
                                    line + ls, e - ls);
                    goto out;
                }
                v = v * 10 + d;
            }
            if (memchr(line + a, '\0', pe - a)) {
                rc = list_error(why, why_len, src, lineno, "NUL byte in path%.*s%s", "", 0);
                goto out;
            }
            memmove(buf + w, line + a, pe - a);
            w += pe - a;
            buf[w++] = '\0';
        }
        b->labels[b->n] = (int32_t)v;
        b->n++;
        if ((int32_t)v > max_label) {
            max_label = (int32_t)v;
            *max_line = lineno;
        }
    }
    b->arena_len = w;
    rc = max_label + 1;
out:
    free(scratch);
    return rc;
}

int gf__dataset_open_list(gf__dataset *ds, const char *src, int fd, const struct stat *st,
                          const gf__schema *schema, char *why, size_t why_len)
{
    gf__builder b = {0};
    if ((uint64_t)st->st_size >= SIZE_MAX) {
        gf__why_path(why, why_len, src, "file too large");
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
            gf__why_path(why, why_len, src, "%s", strerror(errno));
            gf__builder_free(&b);
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
    int rc = gf__builder_reserve_samples(&b, lines);
    if (rc < 0) {
        gf__builder_free(&b);
        return rc;
    }
    uint64_t max_line = 0;
    rc = parse_list(&b, b.arena, got, src, schema, &max_line, why, why_len);
    if (rc < 0) {
        gf__builder_free(&b);
        return rc;
    }
    if (b.n == 0) {
        gf__why_path(why, why_len, src, "no samples (every line blank or a comment)");
        gf__builder_free(&b);
        return GF_EDATASET;
    }
    char past[160];
    if (gf__builder_label_past(&b, past, sizeof past) < b.n) {
        char where[4096 + 24];
        snprintf(where, sizeof where, "%s:%llu", src, (unsigned long long)max_line);
        gf__why_path(why, why_len, where, "%s", past);
        gf__builder_free(&b);
        return GF_EDATASET;
    }
    ds->n_classes = rc;
    gf__builder_finish(&b, ds);
    if (schema) { /* each field a file: its region is the kind's cap */
        ds->schema = *schema;
        ds->n_var = gf__schema_var_fields(schema, ds->var_field);
        for (int k = 0; k < ds->n_var; k++) {
            gf_field_kind kind = schema->field[ds->var_field[k]].kind;
            ds->var_max[k] = kind == GF_FIELD_ARRAY || kind == GF_FIELD_MASK
                                 ? GF_FIELD_ARRAY_BYTES_MAX
                                 : GF_FIELD_BYTES_MAX;
        }
    }
    /* No stat per line here (an index of 25 ns a sample would take ~1 us):
     * each file's identity is recorded at its first read. */
    if (gf__dataset_seen_init(ds, NULL) < 0)
        return GF_ENOMEM;

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
    ds->root_fd = dfd < 0 ? -1 : gf__keep_fd(dfd);
    if (ds->root_fd < 0) {
        gf__why_path(why, why_len, src, "cannot open its directory: %s", strerror(errno));
        return GF_EDATASET;
    }
    return 0;
}
