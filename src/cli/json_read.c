/*
 * The JSON reader (json_read.h): recursive descent, the depth bounded so
 * the recursion is. A value's slot is zeroed before it is parsed and
 * counts only what was filled, so a failure anywhere frees cleanly.
 */
#include "json_read.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
    const char *start, *p, *end;
    int depth;
    size_t values;
    char *why;
    size_t why_len;
} parser;

static int fail(parser *ps, const char *fmt, ...)
{
    if (!ps->why_len)
        return -1;
    int n = snprintf(ps->why, ps->why_len, "byte %zu: ", (size_t)(ps->p - ps->start));
    if (n >= 0 && (size_t)n < ps->why_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ps->why + n, ps->why_len - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int oom(parser *ps)
{
    if (ps->why_len)
        snprintf(ps->why, ps->why_len, "out of memory");
    return -1;
}

static void skip_ws(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' ||
                               *ps->p == '\r'))
        ps->p++;
}

static int hex4(const char *p)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

static char *put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        *o++ = (char)cp;
    } else if (cp < 0x800) {
        *o++ = (char)(0xC0 | cp >> 6);
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *o++ = (char)(0xE0 | cp >> 12);
        *o++ = (char)(0x80 | (cp >> 6 & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else {
        *o++ = (char)(0xF0 | cp >> 18);
        *o++ = (char)(0x80 | (cp >> 12 & 0x3F));
        *o++ = (char)(0x80 | (cp >> 6 & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
    }
    return o;
}

/* At the opening quote: the string's bytes into *s (malloc'd), *n of them.
 * Decoded, a string is never longer than its text, so the text's length
 * is the buffer's. */
static int parse_string(parser *ps, char **s, size_t *n)
{
    const char *q = ++ps->p;
    while (q < ps->end && *q != '"') {
        if ((unsigned char)*q < 0x20) {
            ps->p = q;
            return fail(ps, "a control byte inside a string");
        }
        q += *q == '\\' ? 2 : 1;
    }
    if (q >= ps->end)
        return fail(ps, "a string without its closing quote");
    char *out = malloc((size_t)(q - ps->p) + 1), *o = out;
    if (!out)
        return oom(ps);
    while (ps->p < q) {
        char c = *ps->p;
        if (c != '\\') {
            *o++ = c;
            ps->p++;
            continue;
        }
        char e = ps->p[1];
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            *o++ = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
            ps->p += 2;
            continue;
        }
        int cp = e == 'u' && q - ps->p >= 6 ? hex4(ps->p + 2) : -1;
        if (cp < 0) {
            free(out);
            return fail(ps, "a bad escape in a string");
        }
        ps->p += 6;
        if (cp == 0) {
            free(out);
            return fail(ps, "\\u0000 in a string");
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            int lo = q - ps->p >= 6 && ps->p[0] == '\\' && ps->p[1] == 'u' ? hex4(ps->p + 2) : -1;
            if (lo < 0xDC00 || lo > 0xDFFF) {
                free(out);
                return fail(ps, "a lone surrogate in a string");
            }
            ps->p += 6;
            o = put_utf8(o, 0x10000u + ((unsigned)(cp - 0xD800) << 10) + (unsigned)(lo - 0xDC00));
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            free(out);
            return fail(ps, "a lone surrogate in a string");
        } else if (cp >= 0x80 && cp <= 0xFF) {
            *o++ = (char)cp; /* json.c's byte that is not UTF-8 */
        } else {
            o = put_utf8(o, (unsigned)cp);
        }
    }
    *o = '\0';
    ps->p = q + 1;
    *s = out;
    *n = (size_t)(o - out);
    return 0;
}

static int digits(parser *ps)
{
    const char *d = ps->p;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
        ps->p++;
    return ps->p > d ? 0 : fail(ps, "a digit expected");
}

static int parse_number(parser *ps, cli_jv *v)
{
    const char *b = ps->p;
    if (ps->p < ps->end && *ps->p == '-')
        ps->p++;
    if (ps->p < ps->end && *ps->p == '0')
        ps->p++;
    else if (digits(ps) < 0)
        return -1;
    if (ps->p < ps->end && *ps->p == '.') {
        ps->p++;
        if (digits(ps) < 0)
            return -1;
    }
    if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
        ps->p++;
        if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
            ps->p++;
        if (digits(ps) < 0)
            return -1;
    }
    size_t n = (size_t)(ps->p - b);
    if (!(v->s = malloc(n + 1)))
        return oom(ps);
    memcpy(v->s, b, n);
    v->s[n] = '\0';
    v->type = CLI_JV_NUMBER;
    return 0;
}

static int parse_value(parser *ps, cli_jv *v);

/* Room for one more item (and key) in an array or object. */
static int grow(parser *ps, cli_jv *v, size_t *cap)
{
    if (v->n < *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 4;
    cli_jv *items = realloc(v->items, c * sizeof *items);
    if (!items)
        return oom(ps);
    v->items = items;
    if (v->type == CLI_JV_OBJECT) {
        char **keys = realloc(v->keys, c * sizeof *keys);
        if (!keys)
            return oom(ps);
        v->keys = keys;
    }
    *cap = c;
    return 0;
}

/* At '[' or '{'. */
static int parse_container(parser *ps, cli_jv *v, int object)
{
    char close = object ? '}' : ']';
    size_t cap = 0;
    if (++ps->depth > CLI_JSON_READ_MAX_DEPTH)
        return fail(ps, "nested deeper than %d", CLI_JSON_READ_MAX_DEPTH);
    v->type = object ? CLI_JV_OBJECT : CLI_JV_ARRAY;
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        ps->depth--;
        return 0;
    }
    for (;;) {
        if (grow(ps, v, &cap) < 0)
            return -1;
        cli_jv *item = &v->items[v->n];
        char *key = NULL;
        memset(item, 0, sizeof *item);
        if (object) {
            size_t kn;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != '"')
                return fail(ps, "a member name expected");
            if (parse_string(ps, &key, &kn) < 0)
                return -1;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                free(key);
                return fail(ps, "':' expected after a member name");
            }
            ps->p++;
        }
        int rc = parse_value(ps, item);
        if (object)
            v->keys[v->n] = key;
        v->n++; /* filled or not, freed with the rest */
        if (rc < 0)
            return -1;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            ps->depth--;
            return 0;
        }
        return fail(ps, object ? "',' or '}' expected" : "',' or ']' expected");
    }
}

static int literal(parser *ps, cli_jv *v, const char *word, int type)
{
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
        return fail(ps, "a value expected");
    ps->p += n;
    v->type = type;
    return 0;
}

static int parse_value(parser *ps, cli_jv *v)
{
    if (++ps->values > CLI_JSON_READ_MAX_VALUES)
        return fail(ps, "more than %zu values", CLI_JSON_READ_MAX_VALUES);
    skip_ws(ps);
    if (ps->p >= ps->end)
        return fail(ps, "the text ends where a value should be");
    switch (*ps->p) {
    case '{': return parse_container(ps, v, 1);
    case '[': return parse_container(ps, v, 0);
    case '"':
        v->type = CLI_JV_STRING;
        return parse_string(ps, &v->s, &v->n);
    case 't': return literal(ps, v, "true", CLI_JV_TRUE);
    case 'f': return literal(ps, v, "false", CLI_JV_FALSE);
    case 'n': return literal(ps, v, "null", CLI_JV_NULL);
    default:
        if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9'))
            return parse_number(ps, v);
        return fail(ps, "a value expected");
    }
}

static void free_items(cli_jv *v)
{
    size_t n = v->type == CLI_JV_ARRAY || v->type == CLI_JV_OBJECT ? v->n : 0;
    for (size_t i = 0; i < n; i++) {
        free_items(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->s);
}

void cli_jv_free(cli_jv *v)
{
    if (v) {
        free_items(v);
        free(v);
    }
}

cli_jv *cli_json_parse(const char *text, size_t len, char *why, size_t why_len)
{
    parser ps = {.start = text, .p = text, .end = text + len, .why = why, .why_len = why_len};
    if (len > CLI_JSON_READ_MAX_BYTES) {
        if (why_len)
            snprintf(why, why_len, "%zu bytes, over the reader's %zu MiB", len,
                     CLI_JSON_READ_MAX_BYTES >> 20);
        return NULL;
    }
    cli_jv *v = calloc(1, sizeof *v);
    if (!v) {
        oom(&ps);
        return NULL;
    }
    int rc = parse_value(&ps, v);
    if (rc == 0) {
        skip_ws(&ps);
        if (ps.p < ps.end)
            rc = fail(&ps, "text after the value");
    }
    if (rc < 0) {
        cli_jv_free(v);
        return NULL;
    }
    return v;
}

const cli_jv *cli_jv_get(const cli_jv *v, const char *key)
{
    if (!v || v->type != CLI_JV_OBJECT)
        return NULL;
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(v->keys[i], key) == 0)
            return &v->items[i];
    return NULL;
}

const char *cli_jv_str(const cli_jv *v)
{
    return v && v->type == CLI_JV_STRING ? v->s : NULL;
}

int cli_jv_u64(const cli_jv *v, uint64_t *out)
{
    if (!v || v->type != CLI_JV_NUMBER || strspn(v->s, "0123456789") != strlen(v->s))
        return -1;
    errno = 0;
    unsigned long long x = strtoull(v->s, NULL, 10);
    if (errno)
        return -1;
    *out = x;
    return 0;
}

int cli_jv_i64(const cli_jv *v, int64_t *out)
{
    const char *d = v && v->type == CLI_JV_NUMBER ? v->s + (v->s[0] == '-') : NULL;
    if (!d || strspn(d, "0123456789") != strlen(d))
        return -1;
    errno = 0;
    long long x = strtoll(v->s, NULL, 10);
    if (errno)
        return -1;
    *out = x;
    return 0;
}
