/*
 * Errors, strict option parsing and mkdir -p for the gpufeed commands; see
 * cli.h.
 */
#include "cli.h"

#include "gpufeed.h"
#include "quote.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    if (cmd && *cmd)
        fprintf(stderr, "gpufeed %s: ", cmd);
    else
        fputs("gpufeed: ", stderr);
    /* Messages name files (the library's, the user's arguments): escaped,
     * so a name cannot write to the terminal. */
    char small[1024], *msg = small;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof small && (msg = malloc((size_t)n + 1)) != NULL) {
        va_start(ap, fmt);
        vsnprintf(msg, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    cli_put_quoted(stderr, msg ? msg : small);
    if (msg != small)
        free(msg);
    fputc('\n', stderr);
}

void cli_error_msg(const char *cmd, const char *msg, int rc)
{
    cli_error(cmd, "%s", msg && *msg ? msg : gf_strerror(rc));
}

int cli_parse_int(const char *cmd, const char *opt, const char *s, long min,
                  long max, int *out)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (end == s || *end || errno) {
        cli_error(cmd, "--%s: '%s' is not an integer", opt, s);
        return -1;
    }
    if (v < min || v > max) {
        cli_error(cmd, "--%s: %ld is out of range [%ld, %ld]", opt, v, min, max);
        return -1;
    }
    *out = (int)v;
    return 0;
}

int cli_parse_u64(const char *cmd, const char *opt, const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;
    errno = 0;
    if (*s == '-' || !isdigit((unsigned char)*s)) {
        cli_error(cmd, "--%s: '%s' is not a non-negative integer", opt, s);
        return -1;
    }
    v = strtoull(s, &end, 0);
    if (end == s || *end || errno) {
        cli_error(cmd, "--%s: '%s' is not a non-negative integer", opt, s);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

int cli_parse_double(const char *cmd, const char *opt, const char *s, double min,
                     double max, double *out)
{
    char *end;
    double v;
    errno = 0;
    v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v)) {
        cli_error(cmd, "--%s: '%s' is not a number", opt, s);
        return -1;
    }
    if (v < min || v > max) {
        cli_error(cmd, "--%s: %g is out of range [%g, %g]", opt, v, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_size(const char *cmd, const char *opt, const char *s, int max,
                   int *w, int *h)
{
    char *end;
    long a, b;
    errno = 0;
    a = strtol(s, &end, 10);
    if (end == s || errno)
        goto bad;
    if (*end == 'x' || *end == 'X') {
        const char *t = end + 1;
        b = strtol(t, &end, 10);
        if (end == t || errno)
            goto bad;
    } else {
        b = a;
    }
    if (*end)
        goto bad;
    if (a < 1 || b < 1 || a > max || b > max) {
        cli_error(cmd, "--%s: %s is out of range (1..%d per side)", opt, s, max);
        return -1;
    }
    *w = (int)a;
    *h = (int)b;
    return 0;
bad:
    cli_error(cmd, "--%s: '%s' is not a size (WxH or S)", opt, s);
    return -1;
}

int cli_parse_choice(const char *cmd, const char *opt, const char *s,
                     const char *const *names)
{
    char list[256] = "";
    size_t used = 0;
    for (int i = 0; names[i]; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    for (int i = 0; names[i] && used < sizeof list; i++) {
        int n = snprintf(list + used, sizeof list - used, "%s%s", i ? "|" : "",
                         names[i]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    cli_error(cmd, "--%s: '%s' is not one of %s", opt, s, list);
    return -1;
}

int cli_parse_int_list(const char *cmd, const char *opt, const char *s, long min, long max,
                       int *out, int max_n, int *n)
{
    const char *p = s;
    *n = 0;
    for (;;) {
        char item[32], *end;
        long v;
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof item) {
            cli_error(cmd, "--%s: '%s' is not a list of integers (e.g. 1,2,4)", opt, s);
            return -1;
        }
        memcpy(item, p, len);
        item[len] = 0;
        errno = 0;
        v = strtol(item, &end, 10);
        if (end == item || *end || errno) {
            cli_error(cmd, "--%s: '%s' is not an integer", opt, item);
            return -1;
        }
        if (v < min || v > max) {
            cli_error(cmd, "--%s: %ld is out of range [%ld, %ld]", opt, v, min, max);
            return -1;
        }
        if (*n == max_n) {
            cli_error(cmd, "--%s: at most %d values", opt, max_n);
            return -1;
        }
        out[(*n)++] = (int)v;
        p += len;
        if (!*p)
            return 0;
        p++; /* the comma: a trailing one leaves an empty item, refused above */
    }
}

int cli_mkdir_p(const char *path)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf)
        return -ENAMETOOLONG;
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char save = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return -errno;
            buf[i] = save;
        }
    }
    return 0;
}
