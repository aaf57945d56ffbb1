/*
 * `gpufeed settings`: the library's settings table (gf_setting_at) with
 * the value each setting has after the loader options given, as bench,
 * verify and train would pass them (before their own choices): what a
 * setting is called, what it takes and what it defaults to, in one place.
 * Main thread.
 */
#include <float.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "json.h"
#include "loader_options.h"

#define CMD "settings"
#define SETTINGS_LOPTS ((1u << CLI_LOPT_COUNT) - 1) /* every face */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpufeed settings [options]\n"
            "\n"
            "Lists every loader setting: its name (a loader command's option is\n"
            "--name, '-' for '_'; Python's keyword is name), its value after the\n"
            "options given here, its default, and what it accepts. A value out of\n"
            "bounds is refused here as bench, verify and train refuse it.\n"
            "\n"
            "options:\n"
            "  --json                print one JSON object {\"name\": \"value\", ...}\n"
            "  -h, --help            this text\n"
            "  the loader options of bench, verify and train (see their --help)\n");
}

/* What row r accepts: its bounds or its choices. */
static void accepts(const gf_setting_info *r, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    if (r->choices) {
        for (int i = 0; r->choices[i] && used < len; i++)
            used += (size_t)snprintf(out + used, len - used, "%s%s", i ? "|" : "",
                                     r->choices[i]);
        for (int i = 0; r->aliases && r->aliases[i] && used < len; i++)
            used += (size_t)snprintf(out + used, len - used, "%s%s", i ? "|" : " (also ",
                                     r->aliases[i]);
        if (r->aliases && used < len)
            snprintf(out + used, len - used, ")");
    } else if (r->type == GF_SETTING_FLAG) {
        snprintf(out, len, "0|1");
    } else if (r->type == GF_SETTING_PATH || r->type == GF_SETTING_TEXT) {
        snprintf(out, len, "%s; none: %s", r->type == GF_SETTING_PATH ? "a path" : "text",
                 r->zero);
        return;
    } else if (r->type == GF_SETTING_INT || r->type == GF_SETTING_U64) {
        snprintf(out, len, "%lld..%llu", (long long)r->min_int, (unsigned long long)r->max_int);
    } else if (r->min_float <= -FLT_MAX) {
        snprintf(out, len, "any finite number%s", r->type == GF_SETTING_FLOAT4 ? "s" : "");
    } else {
        snprintf(out, len, "%s%g..%s", r->flags & GF_SETTING_MIN_EXCLUSIVE ? "above " : "",
                 r->min_float, r->max_float < FLT_MAX ? "" : "inf");
        used = strlen(out);
        if (r->max_float < FLT_MAX)
            snprintf(out + used, len - used, "%g", r->max_float);
    }
    used = strlen(out);
    if ((r->flags & GF_SETTING_ZERO_PICKS) && used < len)
        snprintf(out + used, len - used, "; 0: %s", r->zero);
}

int cmd_settings(int argc, char **argv)
{
    static const struct option own[] = {
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const struct option *longopts = cli_options(own, SETTINGS_LOPTS, NULL);
    gf_settings s;
    gf_default_settings(&s);
    cli_loader_args la = {.s = &s};
    int ch, json = 0;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'j': json = 1; break;
        case 'h': usage(stdout); return CLI_OK;
        case ':': cli_error(CMD, "%s needs a value", argv[optind - 1]); return CLI_USAGE;
        default:
            if (cli_loader_parse_or_reject(CMD, ch, optarg, &la, argv[optind - 1]) < 0)
                return CLI_USAGE;
            break;
        }
    }
    if (optind < argc) {
        cli_error(CMD, "unexpected argument '%s'", argv[optind]);
        return CLI_USAGE;
    }
    char value[160], range[256];
    cli_json j;
    if (json) {
        cli_json_init(&j, stdout);
        cli_json_object(&j);
    } else {
        printf("%-22s %-16s %-16s %s\n", "setting", "value", "default", "accepts");
    }
    for (int i = 0; i < gf_setting_count(); i++) {
        const gf_setting_info *r = gf_setting_at(i);
        gf_settings_get(&s, r->name, value, sizeof value);
        if (json) {
            cli_json_kstr(&j, r->name, value);
            continue;
        }
        accepts(r, range, sizeof range);
        printf("%-22s %-16s %-16s %s\n", r->name, value, r->default_text ? r->default_text : "",
               range);
    }
    if (json) {
        cli_json_object_end(&j);
        cli_json_end(&j);
    }
    return CLI_OK;
}
