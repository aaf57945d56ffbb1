/* The remote-provider table (remote_provider.h): which row a URL's
 * prefix names. A new store adds its row here, in the order its prefix
 * is tried (no prefix here begins another). Any thread. */
#include "remote_provider.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static const gf__remote_provider *const rows[] = {
    &gf__remote_http,
    &gf__remote_https,
    &gf__remote_s3,
};

#define N_ROWS (sizeof rows / sizeof rows[0])

const gf__remote_provider *gf__remote_provider_n(const char *s, size_t len)
{
    for (size_t i = 0; s && i < N_ROWS; i++) {
        size_t pl = strlen(rows[i]->prefix);
        if (len >= pl && strncasecmp(s, rows[i]->prefix, pl) == 0)
            return rows[i];
    }
    return NULL;
}

const gf__remote_provider *gf__remote_provider_of(const char *s)
{
    return s ? gf__remote_provider_n(s, strlen(s)) : NULL;
}

const gf__remote_provider *const *gf__remote_providers(size_t *n)
{
    *n = N_ROWS;
    return rows;
}

void gf__remote_prefixes(char *dst, size_t room)
{
    size_t at = 0;
    if (room)
        dst[0] = '\0';
    for (size_t i = 0; i < N_ROWS && at < room; i++) {
        const char *sep = i == 0 ? "" : i + 1 == N_ROWS ? " or " : ", ";
        int n = snprintf(dst + at, room - at, "%s%s", sep, rows[i]->prefix);
        if (n < 0)
            break;
        at += (size_t)n;
    }
}
