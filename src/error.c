/*
 * The library's stateless entry points: its version, the names and texts
 * of its error codes (generated from the one table in gpufeed.h, as are
 * the sample error kinds), and gf_free. Any thread.
 */
#include "common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The table's sample errors run down from GF_ENOENT without a gap, so the
 * documented errors_by_kind[GF_ENOENT - code] is the kind, and fit it. */
#define GF_KIND_IS_OFFSET_(name, value, text)                                  \
    _Static_assert(GF_KIND_##name == GF_ENOENT - (value),                      \
                   "GF_" #name " breaks the run of sample error values");
GF_SAMPLE_ERRNO_MAP(GF_KIND_IS_OFFSET_)
#undef GF_KIND_IS_OFFSET_
_Static_assert(GF_SAMPLE_ERROR_KINDS <= GF_SAMPLE_ERROR_KINDS_MAX,
               "more sample error kinds than stats.errors_by_kind holds");

const char *gf_version(void)
{
    return GF_VERSION;
}

const char *gf_strerror(int code)
{
    switch (code) {
    case 0:
        return "success";
#define GF_STRERROR_CASE_(name, value, text)                                   \
    case value:                                                                \
        return text;
        GF_ERRNO_MAP(GF_STRERROR_CASE_)
#undef GF_STRERROR_CASE_
    }
    return "unknown error";
}

const char *gf_err_name(int code)
{
    switch (code) {
    case 0:
        return "GF_OK";
#define GF_ERR_NAME_CASE_(name, value, text)                                   \
    case value:                                                                \
        return "GF_" #name;
        GF_ERRNO_MAP(GF_ERR_NAME_CASE_)
#undef GF_ERR_NAME_CASE_
    }
    return "GF_E?";
}

int gf_sample_error_kind(int code)
{
    switch (code) {
#define GF_KIND_CASE_(name, value, text)                                       \
    case value:                                                                \
        return GF_KIND_##name;
        GF_SAMPLE_ERRNO_MAP(GF_KIND_CASE_)
#undef GF_KIND_CASE_
    }
    return -1;
}

void gf_free(void *p)
{
    free(p);
}

void gf__fit_path(char *dst, size_t len, const char *path)
{
    static const char dots[] = "\xe2\x80\xa6";
    size_t n = strlen(path), cut = sizeof dots - 1;
    if (!len)
        return;
    if (n < len || len < cut + 3) {
        snprintf(dst, len, "%s", path);
        return;
    }
    size_t keep = len - 1 - cut, head = keep / 3, tail = keep - head;
    while (head > 0 && ((unsigned char)path[head] & 0xc0) == 0x80)
        head--; /* not inside a UTF-8 sequence */
    while (tail > 0 && ((unsigned char)path[n - tail] & 0xc0) == 0x80)
        tail--;
    memcpy(dst, path, head);
    memcpy(dst + head, dots, cut);
    memcpy(dst + head + cut, path + n - tail, tail + 1);
}

GF__COLD void gf__why_path(char *why, size_t len, const char *path, const char *fmt, ...)
{
    if (!why || !len)
        return;
    char reason[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    /* The path keeps 32 bytes at least, so a long reason still says whose. */
    size_t r = strlen(reason) + 2, room = len > r + 32 ? len - r : len < 32 ? len : 32;
    gf__fit_path(why, room, path);
    size_t at = strlen(why);
    snprintf(why + at, len - at, ": %s", reason);
}
