/* Pure response parsing for the fetcher (declared in remote_fetch.h): a
 * Content-Range value, an S3 error body's XML. Any thread, no state.
 * Always built: fuzz_remote calls them without the `remote` feature. */
#include "remote_fetch.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static bool parse_u64(const char **p, const char *end, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;
    while (s < end && *s >= '0' && *s <= '9') {
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
        s++;
    }
    if (s == *p)
        return false;
    *p = s;
    *out = v;
    return true;
}

int gf__content_range_parse(const char *v, size_t n, uint64_t *first, uint64_t *last,
                            uint64_t *total)
{
    const char *p = v, *end = v + n;
    *first = 1, *last = 0, *total = 0;
    if (n < 6 || strncasecmp(p, "bytes", 5) != 0 || (p[5] != ' ' && p[5] != '='))
        return -1;
    p += 6;
    while (p < end && *p == ' ')
        p++;
    if (p < end && *p == '*') {
        p++;
    } else {
        uint64_t a, b;
        if (!parse_u64(&p, end, &a) || p >= end || *p++ != '-' || !parse_u64(&p, end, &b) ||
            b < a)
            return -1;
        *first = a, *last = b;
    }
    if (p >= end || *p++ != '/')
        return -1;
    if (p < end && *p == '*' && p + 1 == end)
        return *first <= *last ? 0 : -1; /* no range and no total says nothing */
    uint64_t t;
    if (!parse_u64(&p, end, &t) || p != end || (*first <= *last && *last >= t))
        return -1;
    *total = t;
    return 0;
}

/* The text of <tag>...</tag> in body, control characters dropped. */
static void xml_text(const char *body, size_t n, const char *tag, char *out, size_t cap)
{
    out[0] = 0;
    char open[40], close[40];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    size_t ol = strlen(open), cl = strlen(close);
    for (size_t i = 0; i + ol <= n; i++) {
        if (memcmp(body + i, open, ol) != 0)
            continue;
        size_t k = 0;
        for (size_t j = i + ol; j < n && k + 1 < cap; j++) {
            if (j + cl <= n && memcmp(body + j, close, cl) == 0)
                break;
            unsigned char ch = (unsigned char)body[j];
            if (ch >= 0x20 && ch != 0x7f)
                out[k++] = (char)ch;
        }
        out[k] = 0;
        return;
    }
}

void gf__s3_error_parse(const char *body, size_t n, char *code, size_t code_len, char *msg,
                        size_t msg_len, char *region, size_t region_len)
{
    xml_text(body, n, "Code", code, code_len);
    xml_text(body, n, "Message", msg, msg_len);
    xml_text(body, n, "Region", region, region_len);
}
