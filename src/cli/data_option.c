/*
 * --data given several times and --weights made into a mix's text; see
 * data_option.h.
 */
#include "data_option.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define MIX_PREFIX "mix:"

int cli_data_add(const char *cmd, const char *opt, cli_data *d, const char *arg)
{
    const char **list = realloc(d->list, (size_t)(d->n + 1) * sizeof *list);
    if (!list) {
        cli_error(cmd, "--%s: out of memory", opt);
        return -1;
    }
    d->list = list;
    d->list[d->n++] = arg;
    return 0;
}

/* w as its shortest text that reads back as w: 0.7 is "0.7", as Python's
 * repr writes it, so both faces make the same mix text. */
static void weight_text(double w, char *out, size_t len)
{
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(out, len, "%.*g", digits, w);
        if (strtod(out, NULL) == w)
            return;
    }
}

/* Item k of --weights (comma-separated) into *w. Returns 0, or -1 with
 * the reason printed. */
static int weight_at(const char *cmd, const char *weights, int k, double *w)
{
    const char *p = weights;
    for (int i = 0; i < k; i++)
        p = strchr(p, ',') + 1; /* the caller counted k commas */
    size_t len = strcspn(p, ",");
    char item[64], *end;
    if (len == 0 || len >= sizeof item) {
        cli_error(cmd, "--weights: '%s': weight %d is %s (a positive number each, e.g. "
                       "0.7,0.3)", weights, k + 1, len ? "too long" : "empty");
        return -1;
    }
    memcpy(item, p, len);
    item[len] = '\0';
    errno = 0;
    *w = strtod(item, &end);
    /* strtod skips leading blanks; a weight is the number alone. */
    if (end == item || *end || item[0] == ' ' || item[0] == '\t' || errno || !isfinite(*w) ||
        !(*w > 0)) {
        cli_error(cmd, "--weights: '%s' is not a positive number (a weight is more than 0 "
                       "and finite; they need not sum to 1)", item);
        return -1;
    }
    return 0;
}

int cli_data_text(const char *cmd, const char *opt, cli_data *d, const char **data)
{
    *data = d->n ? d->list[0] : NULL;
    if (d->n < 2) {
        if (d->weights) {
            cli_error(cmd, "--weights weighs the data sets of a mix: give --%s more than once "
                           "(one weight each, in their order)", opt);
            return -1;
        }
        return 0;
    }
    int n_weights = 1;
    for (const char *p = d->weights; p && *p; p++)
        n_weights += *p == ',';
    if (d->weights && n_weights != d->n) {
        cli_error(cmd, "--weights: %d weight%s for %d --%s (one per --%s, in their order)",
                  n_weights, n_weights == 1 ? "" : "s", d->n, opt, opt);
        return -1;
    }
    size_t len = sizeof MIX_PREFIX;
    for (int k = 0; k < d->n; k++) {
        const char *src = d->list[k];
        /* '|' parts the mix's sources; a mix is no source of another. */
        if (strchr(src, '|')) {
            cli_error(cmd, "--%s '%s': a data set in a mix cannot have '|' in its name (it "
                           "parts the mix's data sets)", opt, src);
            return -1;
        }
        if (strncmp(src, MIX_PREFIX, strlen(MIX_PREFIX)) == 0) {
            cli_error(cmd, "--%s '%s': a mix cannot be one of a mix's data sets: give each of "
                           "its data sets as a --%s", opt, src, opt);
            return -1;
        }
        len += strlen(src) + 32; /* '|', the weight and '=' */
    }
    if (!(d->mix = malloc(len))) {
        cli_error(cmd, "--%s: out of memory", opt);
        return -1;
    }
    size_t at = (size_t)snprintf(d->mix, len, MIX_PREFIX);
    for (int k = 0; k < d->n; k++) {
        double w = 1;
        char wt[32];
        if (d->weights && weight_at(cmd, d->weights, k, &w) < 0)
            return -1;
        weight_text(w, wt, sizeof wt);
        at += (size_t)snprintf(d->mix + at, len - at, "%s%s=%s", k ? "|" : "", wt, d->list[k]);
    }
    *data = d->mix;
    return 0;
}

void cli_data_free(cli_data *d)
{
    free(d->list);
    free(d->mix);
    memset(d, 0, sizeof *d);
}
