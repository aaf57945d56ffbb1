/* The CLI's JSON reader (src/cli/json_read.c), which verify runs on a
 * prepared set's manifest.json, a file anyone may have damaged: any bytes
 * are refused with a reason or read into a tree; a tree the writer
 * (json.c) can hold writes back as text the reader reads as the same
 * tree (strings, names and every byte of them exactly: the reader's
 * \u0080..\u00ff rule is the writer's); an integer read exactly prints
 * back as its text. */
#include "fuzz.h"
#include "json.h"
#include "json_read.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int depth(const cli_jv *v)
{
    int d = 0;
    if (v->type == CLI_JV_ARRAY || v->type == CLI_JV_OBJECT)
        for (size_t i = 0; i < v->n; i++) {
            int k = depth(&v->items[i]);
            d = k > d ? k : d;
        }
    return d + (v->type == CLI_JV_ARRAY || v->type == CLI_JV_OBJECT);
}

static void put(cli_json *j, const cli_jv *v)
{
    switch (v->type) {
    case CLI_JV_NULL: cli_json_null(j); break;
    case CLI_JV_FALSE: cli_json_bool(j, 0); break;
    case CLI_JV_TRUE: cli_json_bool(j, 1); break;
    case CLI_JV_NUMBER: cli_json_int(j, 0); break; /* numbers: compared by type only */
    case CLI_JV_STRING: cli_json_str(j, v->s); break;
    default:
        if (v->type == CLI_JV_ARRAY)
            cli_json_array(j);
        else
            cli_json_object(j);
        for (size_t i = 0; i < v->n; i++) {
            if (v->type == CLI_JV_OBJECT)
                cli_json_key(j, v->keys[i]);
            put(j, &v->items[i]);
        }
        if (v->type == CLI_JV_ARRAY)
            cli_json_array_end(j);
        else
            cli_json_object_end(j);
    }
}

static void same(const cli_jv *a, const cli_jv *b)
{
    FUZZ_CHECK(a->type == b->type);
    if (a->type == CLI_JV_STRING)
        FUZZ_CHECK(a->n == b->n && memcmp(a->s, b->s, a->n) == 0);
    if (a->type != CLI_JV_ARRAY && a->type != CLI_JV_OBJECT)
        return;
    FUZZ_CHECK(a->n == b->n);
    for (size_t i = 0; i < a->n; i++) {
        if (a->type == CLI_JV_OBJECT)
            FUZZ_CHECK(strcmp(a->keys[i], b->keys[i]) == 0);
        same(&a->items[i], &b->items[i]);
    }
}

static void numbers(const cli_jv *v)
{
    char text[32];
    uint64_t u;
    int64_t i;
    if (v->type == CLI_JV_STRING)
        FUZZ_CHECK(strlen(v->s) == v->n); /* no NUL inside */
    if (v->type == CLI_JV_NUMBER) {
        if (cli_jv_u64(v, &u) == 0) {
            snprintf(text, sizeof text, "%" PRIu64, u);
            FUZZ_CHECK(strcmp(text, v->s) == 0);
        }
        if (cli_jv_i64(v, &i) == 0 && strcmp(v->s, "-0") != 0) {
            snprintf(text, sizeof text, "%" PRId64, i);
            FUZZ_CHECK(strcmp(text, v->s) == 0);
        }
    }
    if (v->type == CLI_JV_ARRAY || v->type == CLI_JV_OBJECT)
        for (size_t k = 0; k < v->n; k++)
            numbers(&v->items[k]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[160];
    why[0] = '\0';
    cli_jv *v = cli_json_parse((const char *)data, size, why, sizeof why);
    if (!v) {
        FUZZ_CHECK(why[0] != '\0');
        return 0;
    }
    numbers(v);
    cli_jv_get(v, "format");
    if (depth(v) < CLI_JSON_MAX_DEPTH) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        FUZZ_CHECK(f);
        cli_json j;
        cli_json_init(&j, f);
        put(&j, v);
        cli_json_end(&j);
        FUZZ_CHECK(fclose(f) == 0);
        cli_jv *w = cli_json_parse(buf, len, why, sizeof why);
        if (!w)
            fprintf(stderr, "written back, not read: %s\n%s", why, buf);
        FUZZ_CHECK(w);
        same(v, w);
        cli_jv_free(w);
        free(buf);
    }
    cli_jv_free(v);
    return 0;
}

void fuzz_seeds(fuzz_emit emit)
{
    static const char *const seeds[] = {
        "{\"format\": \"gpufeed prepared set\", \"manifest_version\": 1, \"source\": "
        "{\"data\": \"src\", \"kind\": \"shards\", \"files\": [{\"path\": \"a.tar\", "
        "\"bytes\": 10240, \"mtime_ns\": 1733000000123456789}]}, \"samples\": 22, "
        "\"shards\": [{\"file\": \"train-000000.tar\", \"sha256\": \"00ff\", \"bytes\": 1}], "
        "\"classes\": [\"cat\", \"dog\"], \"keep_original\": false, \"x\": null}\n",
        "[\"\\u00ff\\u0001\\n\\\"\\\\\\/\\ud83d\\ude00\\u00e9\", \"\xc3\xa9\", -0, 1.5e-3, "
        "18446744073709551615, -9223372036854775808, 18446744073709551616, true]",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
        "{\"a\": {\"b\": {\"c\": \"\\ud800\"}}}",
    };
    for (size_t i = 0; i < sizeof seeds / sizeof *seeds; i++) {
        char name[16];
        snprintf(name, sizeof name, "json-%zu", i);
        emit(name, seeds[i], strlen(seeds[i]));
    }
}
