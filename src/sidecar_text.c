/* The index sidecar's text, written (sidecar_text.h): the line format and
 * the header's tokens live here alone, so a shard indexed by `gpufeed
 * index` and the same shard written by `gpufeed prepare` get the same
 * sidecar bytes. */
#include "sidecar_text.h"

#include "common.h"
#include "grow.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int put_text(char **p, size_t *len, size_t *cap, const char *fmt, ...) GF__PRINTF(4, 5);
static int put_text(char **p, size_t *len, size_t *cap, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(*p ? *p + *len : NULL, *p ? *cap - *len : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            return GF_ENOMEM;
        if (*p && (size_t)n < *cap - *len) {
            *len += (size_t)n;
            return 0;
        }
        if (GF__GROW(p, cap, *len + (size_t)n + 1, 4096) < 0)
            return GF_ENOMEM;
    }
}

void gf__sidecar_text_clear(gf__sidecar_text *t)
{
    t->len = t->llen = t->crlen = t->clen = 0;
    t->samples = 0;
    t->cur_bad = 0;
}

void gf__sidecar_text_free(gf__sidecar_text *t)
{
    free(t->lines);
    free(t->labels);
    free(t->crcs);
    free(t->cur);
    *t = (gf__sidecar_text){0};
}

void gf__sidecar_text_new_line(gf__sidecar_text *t)
{
    t->clen = 0;
    t->cur_bad = 0;
}

int gf__sidecar_text_member(gf__sidecar_text *t, const char *ext, size_t ext_len, uint64_t off,
                            uint64_t size, const char *name, size_t name_len)
{
    /* the parser's token separators, and a line end */
    for (size_t i = 0; i < name_len; i++)
        if (name[i] && strchr(" \t\r\v\f\n", name[i]))
            t->cur_bad = 1;
    if (ext_len == 0 || t->cur_bad) {
        t->cur_bad = 1;
        return 0;
    }
    return put_text(&t->cur, &t->clen, &t->ccap, " %.*s %llu %llu %.*s", (int)ext_len, ext,
                    (unsigned long long)off, (unsigned long long)size, (int)name_len, name);
}

int gf__sidecar_text_line_ok(const gf__sidecar_text *t)
{
    return !t->cur_bad && t->clen > 0;
}

int gf__sidecar_text_sample(gf__sidecar_text *t, int32_t label, uint32_t image_crc)
{
    if (!gf__sidecar_text_line_ok(t))
        return GF_EDATASET;
    const char *sep = t->samples ? "," : "";
    if (put_text(&t->lines, &t->len, &t->cap, "%s\n", t->cur + 1) < 0 ||
        put_text(&t->labels, &t->llen, &t->lcap, "%s%d", sep, (int)label) < 0 ||
        put_text(&t->crcs, &t->crlen, &t->crcap, "%s%08x", sep, (unsigned)image_crc) < 0)
        return GF_ENOMEM;
    t->samples++;
    gf__sidecar_text_new_line(t);
    return 0;
}

int gf__sidecar_text_finish(const gf__sidecar_text *t, uint64_t shard_bytes, uint32_t shard_crc,
                            char **text, size_t *len)
{
    char *p = NULL;
    size_t n = 0, cap = 0;
    /* DALI reads the first two tokens; gpufeed's own facts follow them on
     * this line, where DALI does not look (dataset_shard_sidecar.c). */
    int rc = put_text(&p, &n, &cap,
                      "v1.2 %llu shard_bytes=%llu shard_crc32c=%08x labels=%.*s "
                      "member_crc32c=%.*s\n",
                      (unsigned long long)t->samples, (unsigned long long)shard_bytes,
                      (unsigned)shard_crc, (int)t->llen, t->labels ? t->labels : "",
                      (int)t->crlen, t->crcs ? t->crcs : "");
    if (rc == 0)
        rc = GF__GROW(&p, &cap, n + t->len + 1, 4096);
    if (rc < 0) {
        free(p);
        return GF_ENOMEM;
    }
    if (t->len)
        memcpy(p + n, t->lines, t->len);
    n += t->len;
    p[n] = '\0';
    *text = p;
    *len = n;
    return 0;
}
