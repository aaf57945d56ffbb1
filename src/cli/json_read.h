/*
 * A small JSON reader for the files gpufeed writes itself (prepare's
 * manifest.json, read back by verify): the whole text into a tree of
 * values. Bounded, since the file may be damaged or hostile: at most
 * CLI_JSON_READ_MAX_BYTES of text, CLI_JSON_READ_MAX_VALUES values (each
 * a node and maybe a string: a text of "[0,0,...]" would otherwise take
 * 40 times its bytes) and CLI_JSON_READ_MAX_DEPTH nested arrays and
 * objects (the recursion's depth). Strict RFC 8259 but for
 * one choice: \u0080..\u00ff read back as that one byte, because json.c
 * writes a byte that is not UTF-8 so (a real U+0080..U+00FF it writes as
 * UTF-8), and the names it wrote must come back as the same bytes. \u0000
 * is refused (values are C strings). Numbers keep their text, so a 64-bit
 * count or nanosecond mtime is read exactly. Any thread; no state.
 */
#ifndef GF_CLI_JSON_READ_H
#define GF_CLI_JSON_READ_H

#include <stddef.h>
#include <stdint.h>

#define CLI_JSON_READ_MAX_BYTES ((size_t)64 << 20)
#define CLI_JSON_READ_MAX_VALUES ((size_t)4 << 20)
#define CLI_JSON_READ_MAX_DEPTH 32

enum { CLI_JV_NULL, CLI_JV_FALSE, CLI_JV_TRUE, CLI_JV_NUMBER, CLI_JV_STRING, CLI_JV_ARRAY,
       CLI_JV_OBJECT };

typedef struct cli_jv {
    int type;             /* CLI_JV_* */
    size_t n;             /* STRING: bytes (no NUL inside); ARRAY, OBJECT: items */
    char *s;              /* STRING: the bytes; NUMBER: its text; NUL-terminated */
    struct cli_jv *items; /* ARRAY, OBJECT: the values, in file order */
    char **keys;          /* OBJECT: each item's name */
} cli_jv;

/* Parses text[0, len) (one value, white space around it). Returns the
 * tree (free with cli_jv_free), or NULL with why = "byte N: reason" (or
 * "out of memory"). */
cli_jv *cli_json_parse(const char *text, size_t len, char *why, size_t why_len);
void cli_jv_free(cli_jv *v);

/* The first member named key of an object; NULL when v is not an object
 * or has none. */
const cli_jv *cli_jv_get(const cli_jv *v, const char *key);
/* A string's bytes, or NULL when v is not a string. */
const char *cli_jv_str(const cli_jv *v);
/* A number written as an integer (no fraction or exponent) in range:
 * 0 and *out, or -1 (not such a number, or v NULL). */
int cli_jv_u64(const cli_jv *v, uint64_t *out);
int cli_jv_i64(const cli_jv *v, int64_t *out);

#endif /* GF_CLI_JSON_READ_H */
