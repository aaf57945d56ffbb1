/*
 * One small JSON writer for every --json output: objects, arrays, keys,
 * strings (escaped; invalid UTF-8 kept visible as \u00XX), numbers,
 * booleans and null, with the commas and the ": " after keys written for
 * the caller. The layout is the CLI's one-line style:
 *   {"a": 1, "b": [1, 2], "c": {"d": null}}
 * One writer per output, on one thread.
 */
#ifndef GF_CLI_JSON_H
#define GF_CLI_JSON_H

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { CLI_JSON_MAX_DEPTH = 16 };

typedef struct cli_json {
    FILE *f;
    int depth;
    int after_key;                           /* the next value follows a key */
    unsigned char has_item[CLI_JSON_MAX_DEPTH]; /* per open level: needs ", " */
} cli_json;

void cli_json_init(cli_json *j, FILE *f);
void cli_json_object(cli_json *j);      /* { */
void cli_json_object_end(cli_json *j);  /* } */
void cli_json_array(cli_json *j);       /* [ */
void cli_json_array_end(cli_json *j);   /* ] */
void cli_json_key(cli_json *j, const char *key);
void cli_json_str(cli_json *j, const char *s);   /* NULL: "" */
void cli_json_num(cli_json *j, double v);        /* %.6g; non-finite: null */
void cli_json_fixed(cli_json *j, double v, int decimals); /* %.Nf */
void cli_json_int(cli_json *j, int64_t v);
void cli_json_uint(cli_json *j, uint64_t v);
void cli_json_bool(cli_json *j, int v);
void cli_json_null(cli_json *j);
/* A key and its value in one call. */
void cli_json_kstr(cli_json *j, const char *key, const char *s);
void cli_json_kstr_or_null(cli_json *j, const char *key, const char *s); /* NULL/"": null */
void cli_json_knum(cli_json *j, const char *key, double v);
void cli_json_kint(cli_json *j, const char *key, int64_t v);
void cli_json_kuint(cli_json *j, const char *key, uint64_t v);
void cli_json_kbool(cli_json *j, const char *key, int v);
void cli_json_knull(cli_json *j, const char *key);
void cli_json_kints(cli_json *j, const char *key, const int *v, int n); /* [v0, v1] */
/* Ends the document: a newline. */
void cli_json_end(cli_json *j);

#ifdef __cplusplus
}
#endif
#endif /* GF_CLI_JSON_H */
