/*
 * The JSON writer of --json outputs; see json.h.
 */
#include "json.h"
#include "quote.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

/* s as a JSON string literal, quotes included. */
static void json_string(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    fputc('"', f);
    while (*p) {
        unsigned c = *p;
        int n;
        switch (c) {
        case '"': fputs("\\\"", f); p++; continue;
        case '\\': fputs("\\\\", f); p++; continue;
        case '\b': fputs("\\b", f); p++; continue;
        case '\f': fputs("\\f", f); p++; continue;
        case '\n': fputs("\\n", f); p++; continue;
        case '\r': fputs("\\r", f); p++; continue;
        case '\t': fputs("\\t", f); p++; continue;
        default: break;
        }
        if (c < 0x20 || c == 0x7F) {
            fprintf(f, "\\u%04x", c);
            p++;
            continue;
        }
        n = cli_utf8_len(p);
        if (n == 0) { /* not UTF-8: keep the byte visible, output stays valid */
            fprintf(f, "\\u%04x", c);
            p++;
            continue;
        }
        fwrite(p, 1, (size_t)n, f);
        p += n;
    }
    fputc('"', f);
}

/* A finite double as %.6g, non-finite values as null. */
static void json_double(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fputs("null", f);
}

void cli_json_init(cli_json *j, FILE *f)
{
    memset(j, 0, sizeof *j);
    j->f = f;
}

/* Before any value: the comma between items of the open level. */
static void item(cli_json *j)
{
    if (j->after_key) {
        j->after_key = 0;
        return;
    }
    if (j->depth > 0) {
        if (j->has_item[j->depth - 1])
            fputs(", ", j->f);
        j->has_item[j->depth - 1] = 1;
    }
}

static void open_level(cli_json *j, int ch)
{
    item(j);
    fputc(ch, j->f);
    assert(j->depth < CLI_JSON_MAX_DEPTH);
    j->has_item[j->depth++] = 0;
}

static void close_level(cli_json *j, int ch)
{
    assert(j->depth > 0 && !j->after_key);
    j->depth--;
    fputc(ch, j->f);
}

void cli_json_object(cli_json *j) { open_level(j, '{'); }
void cli_json_object_end(cli_json *j) { close_level(j, '}'); }
void cli_json_array(cli_json *j) { open_level(j, '['); }
void cli_json_array_end(cli_json *j) { close_level(j, ']'); }

void cli_json_key(cli_json *j, const char *key)
{
    item(j);
    json_string(j->f, key);
    fputs(": ", j->f);
    j->after_key = 1;
}

void cli_json_str(cli_json *j, const char *s)
{
    item(j);
    json_string(j->f, s);
}

void cli_json_num(cli_json *j, double v)
{
    item(j);
    json_double(j->f, v);
}

void cli_json_fixed(cli_json *j, double v, int decimals)
{
    item(j);
    if (isfinite(v))
        fprintf(j->f, "%.*f", decimals, v);
    else
        fputs("null", j->f);
}

void cli_json_int(cli_json *j, int64_t v)
{
    item(j);
    fprintf(j->f, "%" PRId64, v);
}

void cli_json_uint(cli_json *j, uint64_t v)
{
    item(j);
    fprintf(j->f, "%" PRIu64, v);
}

void cli_json_bool(cli_json *j, int v)
{
    item(j);
    fputs(v ? "true" : "false", j->f);
}

void cli_json_null(cli_json *j)
{
    item(j);
    fputs("null", j->f);
}

void cli_json_kstr(cli_json *j, const char *key, const char *s)
{
    cli_json_key(j, key);
    cli_json_str(j, s);
}

void cli_json_kstr_or_null(cli_json *j, const char *key, const char *s)
{
    cli_json_key(j, key);
    if (s && *s)
        cli_json_str(j, s);
    else
        cli_json_null(j);
}

void cli_json_knum(cli_json *j, const char *key, double v)
{
    cli_json_key(j, key);
    cli_json_num(j, v);
}

void cli_json_kint(cli_json *j, const char *key, int64_t v)
{
    cli_json_key(j, key);
    cli_json_int(j, v);
}

void cli_json_kuint(cli_json *j, const char *key, uint64_t v)
{
    cli_json_key(j, key);
    cli_json_uint(j, v);
}

void cli_json_kbool(cli_json *j, const char *key, int v)
{
    cli_json_key(j, key);
    cli_json_bool(j, v);
}

void cli_json_knull(cli_json *j, const char *key)
{
    cli_json_key(j, key);
    cli_json_null(j);
}

void cli_json_kints(cli_json *j, const char *key, const int *v, int n)
{
    cli_json_key(j, key);
    cli_json_array(j);
    for (int i = 0; i < n; i++)
        cli_json_int(j, v[i]);
    cli_json_array_end(j);
}

void cli_json_end(cli_json *j)
{
    assert(j->depth == 0);
    fputc('\n', j->f);
}
