/* Shard patterns: a data source's comma-separated elements, each with
 * its {FIRST..LAST} ranges expanded into names (local paths and remote
 * URLs alike). Pure string work, no file system, on gf_open's thread (or
 * gf_shard_paths' caller). One expander, so a pattern means the same
 * local or remote. A leaf: dataset.c, the local indexer, remote_url.c
 * (for the remote one) and shard_index.c call it; it calls none of them. */
#include "shard_pattern.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Bounds on what a pattern may expand to, checked as it expands: a short
 * pattern such as "{0..999}{0..999}{0..999}.tar" must not take the
 * memory of a billion names before the first one is found missing. */
#define SHARDS_MAX ((size_t)1 << 20)
#define SHARD_NAMES_MAX_BYTES ((size_t)64 << 20)

/* 1 if name[0, n) ends in a gzip'd tar's suffix (webdataset reads those). */
int gf__shard_gzip_suffix(const char *name, size_t n)
{
    return (n >= 7 && strncasecmp(name + n - 7, ".tar.gz", 7) == 0) ||
           (n >= 4 && strncasecmp(name + n - 4, ".tgz", 4) == 0);
}

/* The length of the element that s starts with: commas outside braces
 * separate elements ("a{0,1}.tar,b.tar": two). */
static size_t element_len(const char *s)
{
    int depth = 0;
    size_t i = 0;
    for (; s[i] && !(s[i] == ',' && depth == 0); i++) {
        if (s[i] == '{')
            depth++;
        else if (s[i] == '}' && depth > 0)
            depth--;
    }
    return i;
}

/* 1 if src has at least one element and every one ends in ".tar" (or
 * ".tar.gz"/".tgz": refused by name when opened, not read as a list
 * file). */
int gf__dataset_is_shards(const char *src)
{
    for (const char *e = src;; e++) {
        size_t n = element_len(e);
        if ((n < 4 || strncasecmp(e + n - 4, ".tar", 4) != 0) && !gf__shard_gzip_suffix(e, n))
            return 0;
        e += n;
        if (!*e)
            return 1;
    }
}

/* One {FIRST..LAST} range, ob at its '{'. */
typedef struct brace_range {
    unsigned long long lo, hi;
    int width;        /* zero-padded to this many digits, 0: not padded */
    const char *a, *b; /* the bounds' digits, for messages */
    size_t alen, blen;
    const char *rest; /* past the '}' */
} brace_range;

/* 0, or -1 if ob[0, end) does not start with a well-formed range. */
static int parse_range(const char *ob, const char *end, brace_range *r)
{
    const char *a = ob + 1, *p = a;
    while (p < end && *p >= '0' && *p <= '9')
        p++;
    size_t alen = (size_t)(p - a);
    const char *b = p + 2, *q = b;
    while (q < end && *q >= '0' && *q <= '9')
        q++;
    size_t bl = (size_t)(q - b);
    if (alen == 0 || alen > 18 || end - p < 2 || p[0] != '.' || p[1] != '.' || bl == 0 ||
        bl > 18 || q >= end || *q != '}')
        return -1;
    *r = (brace_range){.lo = strtoull(a, NULL, 10), .hi = strtoull(b, NULL, 10),
                       .width = ((alen > 1 && a[0] == '0') || (bl > 1 && b[0] == '0'))
                                    ? (int)GF__MAX(alen, bl)
                                    : 0,
                       .a = a, .b = b, .alen = alen, .blen = bl, .rest = q + 1};
    return 0;
}

/* How many names pat[0, len) expands to, capped at SHARDS_MAX + 1; 0 if a
 * range is malformed or descending (the expander names which). Counted
 * first, so that a pattern of too many names fails before it takes the
 * time and memory of a million of them. */
static size_t count_names(const char *pat, size_t len)
{
    const char *end = pat + len;
    size_t n = 1;
    for (const char *ob; (ob = memchr(pat, '{', (size_t)(end - pat)));) {
        brace_range r;
        if (parse_range(ob, end, &r) < 0 || r.lo > r.hi)
            return 0;
        if (r.hi - r.lo >= SHARDS_MAX || n * (r.hi - r.lo + 1) > SHARDS_MAX)
            return SHARDS_MAX + 1;
        n *= r.hi - r.lo + 1;
        pat = r.rest;
    }
    return n;
}

/* Expands the brace ranges of pat[0, len) after the prefix buf[0, blen)
 * (buf has room for the whole element: an expansion is never longer than
 * its pattern) into out. */
static int expand_braces(const char *pat, size_t len, char *buf, size_t blen, gf__names *out,
                         const char *src, char *why, size_t why_len)
{
    const char *ob = memchr(pat, '{', len);
    if (!ob) {
        memcpy(buf + blen, pat, len);
        buf[blen + len] = '\0';
        if (out->n >= SHARDS_MAX) {
            gf__why_path(why, why_len, src, "more than %zu shards", SHARDS_MAX);
            return GF_EDATASET;
        }
        if (out->len + blen + len + 1 > SHARD_NAMES_MAX_BYTES) {
            gf__why_path(why, why_len, src, "its shard names take more than %zu MiB",
                    SHARD_NAMES_MAX_BYTES >> 20);
            return GF_EDATASET;
        }
        return gf__names_add(out, buf);
    }
    size_t pre = (size_t)(ob - pat);
    const char *end = pat + len;
    brace_range r;
    if (parse_range(ob, end, &r) < 0) {
        gf__why(why, why_len,
                "%s: bad brace pattern (expected {FIRST..LAST} with decimal bounds, e.g. "
                "{000000..000127})",
                src);
        return GF_EDATASET;
    }
    if (r.lo > r.hi) {
        gf__why_path(why, why_len, src, "brace range {%.*s..%.*s} is descending", (int)r.alen,
                r.a, (int)r.blen, r.b);
        return GF_EDATASET;
    }
    if (r.hi - r.lo >= SHARDS_MAX) {
        gf__why_path(why, why_len, src, "more than %zu shards", SHARDS_MAX);
        return GF_EDATASET;
    }
    memcpy(buf + blen, pat, pre);
    for (unsigned long long v = r.lo;; v++) {
        int w = sprintf(buf + blen + pre, "%0*llu", r.width, v);
        int rc = expand_braces(r.rest, (size_t)(end - r.rest), buf, blen + pre + (size_t)w, out,
                               src, why, why_len);
        if (rc < 0)
            return rc;
        if (v == r.hi)
            break;
    }
    return 0;
}

int gf__shards_expand(const char *src, gf__names *out, char *why, size_t why_len)
{
    size_t len = strlen(src);
    char *buf = malloc(len + 1);
    if (!buf)
        return GF_ENOMEM;
    int rc = 0;
    for (const char *e = src; rc == 0; e++) {
        size_t n = element_len(e);
        if (out->n + count_names(e, n) > SHARDS_MAX) {
            gf__why_path(why, why_len, src, "more than %zu shards", SHARDS_MAX);
            rc = GF_EDATASET;
            break;
        }
        rc = expand_braces(e, n, buf, 0, out, src, why, why_len);
        e += n;
        if (!*e)
            break;
    }
    free(buf);
    return rc;
}
