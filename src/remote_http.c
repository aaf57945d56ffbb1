/* The http:// and https:// rows of the remote-provider table
 * (remote_provider.h): a URL is requested as given, bytes a URL cannot
 * hold encoded; no credentials, no signing; a server may move a file a
 * few hops. Always built; constant. */
#include "remote_provider.h"
#include "remote_url.h"

#include <string.h>

/* A server may move a file; a few hops, not a loop (never from https to
 * http: remote_curl.c). */
#define HTTP_MAX_REDIRECTS 5L

/* A query or fragment would be part of the name the sidecar is derived
 * from, and ".tar" would not end it. */
static int http_check(const char *el, size_t len, const gf__url_parts *u, char *why,
                      size_t why_len)
{
    (void)u;
    if (memchr(el, '?', len) || memchr(el, '#', len)) {
        gf__why(why, why_len,
                "%s: a URL with a query or fragment ('?', '#') is not taken: its name must "
                "end in .tar",
                el);
        return GF_EINVAL;
    }
    return 0;
}

static size_t http_url(char *dst, const char *el, size_t len, const gf__url_parts *u,
                       const struct gf__remote_auth *a)
{
    (void)u;
    (void)a;
    return gf__remote_url_encode(dst, el, len);
}

const gf__remote_provider gf__remote_http = {
    .prefix = "http://",
    .authority = "host",
    .path = "path",
    .check = http_check,
    .url = http_url,
    .max_redirects = HTTP_MAX_REDIRECTS,
};

const gf__remote_provider gf__remote_https = {
    .prefix = "https://",
    .authority = "host",
    .path = "path",
    .check = http_check,
    .url = http_url,
    .max_redirects = HTTP_MAX_REDIRECTS,
};
