/* The s3:// row of the remote-provider table (remote_provider.h): a
 * bucket's name checked, the key encoded as SigV4's canonical URI, the
 * URL on the configured endpoint or AWS's regional host; AWS credentials
 * (remote_auth.c); SigV4 signing through libcurl; no redirect followed,
 * but a store that names the bucket's region is asked there. The parser
 * is always built; the signer only with `remote`. Constant. */
#include "remote_provider.h"

#include "config.h"
#include "remote_auth.h"
#include "remote_url.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if GF_HAVE_REMOTE
#include "remote_curl.h"
#endif

int gf__remote_bucket_ok(const char *b, size_t n)
{
    if (n < 3 || n > 63)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = b[i];
        int alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && c != '.' && c != '-')
            return 0;
        if ((i == 0 || i == n - 1) && !alnum)
            return 0;
    }
    return 1;
}

static int s3_check(const char *el, size_t len, const gf__url_parts *u, char *why, size_t why_len)
{
    if (!gf__remote_bucket_ok(u->host, u->host_len) && memchr(el, '@', len)) {
        /* "s3://SECRET@bucket/key" with a '/' in the secret: its start
         * parses as a bucket; quote nothing before the '@'. */
        const char *at = gf__url_after_userinfo(el, len);
        gf__why(why, why_len,
                "s3://<userinfo>@%s: not a bucket name, and a URL that may hold a user "
                "name or password is refused: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY "
                "or a profile",
                at);
        return GF_EINVAL;
    }
    if (!gf__remote_bucket_ok(u->host, u->host_len)) {
        gf__why(why, why_len,
                "%s: bad bucket name '%.*s': S3 takes 3 to 63 lowercase letters, digits, "
                "'.' and '-', starting and ending with a letter or digit",
                el, (int)GF__MIN(u->host_len, 128), u->host);
        return GF_EINVAL;
    }
    return 0;
}

/* The URL's part before the encoded key into dst[room] (NULL, 0: only
 * measured); returns its length. */
static size_t s3_prefix(char *dst, size_t room, const gf__url_parts *u, const gf__remote_auth *a)
{
    const char *ep = a->endpoint;
    int n;
    if (ep && *ep) {
        size_t el = strlen(ep);
        while (el > 0 && ep[el - 1] == '/')
            el--;
        n = snprintf(dst, room, "%.*s/%.*s", (int)el, ep, (int)u->host_len,
                     u->host);
    } else if (memchr(u->host, '.', u->host_len)) {
        /* *.s3.REGION.amazonaws.com's certificate has one label for '*'. */
        n = snprintf(dst, room, "https://s3.%s.amazonaws.com/%.*s", a->region,
                     (int)u->host_len, u->host);
    } else {
        n = snprintf(dst, room, "https://%.*s.s3.%s.amazonaws.com",
                     (int)u->host_len, u->host, a->region);
    }
    return n < 0 ? 0 : (size_t)n;
}

static size_t s3_url(char *dst, const char *el, size_t len, const gf__url_parts *u,
                     const gf__remote_auth *a)
{
    (void)el;
    (void)len;
    size_t pl = s3_prefix(NULL, 0, u, a);
    if (dst)
        s3_prefix(dst, pl + 1, u, a);
    return pl + gf__remote_uri_encode(dst ? dst + pl : NULL, u->path, u->path_len);
}

size_t gf__s3_url_in_region(const char *url, const char *region, char *dst, size_t room)
{
    static const char scheme[] = "https://", suffix[] = ".amazonaws.com";
    size_t rn = strlen(region);
    if (rn == 0 || rn > 63 || strspn(region, "abcdefghijklmnopqrstuvwxyz0123456789-") != rn ||
        strncmp(url, scheme, sizeof scheme - 1) != 0)
        return 0;
    const char *host = url + sizeof scheme - 1;
    size_t hl = strcspn(host, "/");
    size_t sl = sizeof suffix - 1;
    if (hl <= sl || memcmp(host + hl - sl, suffix, sl) != 0)
        return 0;
    /* the region: the label between "s3." (the host's first label, or
     * after a bucket's dot) and ".amazonaws.com" */
    const char *end = host + hl - sl, *r = end;
    while (r > host && r[-1] != '.')
        r--;
    if (r == end || r - host < 3 || memcmp(r - 3, "s3.", 3) != 0 ||
        (r - 3 > host && r[-4] != '.'))
        return 0;
    int n = snprintf(dst, room, "%.*s%s%s", (int)(r - url), url, region, end);
    return n < 0 ? 0 : (size_t)n;
}

/* An endpoint of the user's is asked again, only re-signed: its host
 * holds no region. */
static size_t s3_in_region(const char *url, const char *region, const gf__remote_auth *a,
                           char *dst, size_t room)
{
    if (a && a->endpoint && *a->endpoint)
        return 0;
    return gf__s3_url_in_region(url, region, dst, room);
}

static int s3_auth_load(gf__remote_auth *a, char *why, size_t why_len)
{
    return gf__remote_auth_load(a, 1, why, why_len);
}

#if GF_HAVE_REMOTE
/* SigV4 with the key and secret as CURLOPT_USERNAME and CURLOPT_PASSWORD
 * apart (a key may hold ':', which CURLOPT_USERPWD would split at). */
static int s3_sign(void *easy, const gf__remote_target *t, const gf__remote_auth *a,
                   struct curl_slist **headers, char *why, size_t why_len)
{
    CURL *e = easy;
    if (!a || !a->access_key || !a->secret_key || !a->region) {
        gf__why(why, why_len, "%s: s3:// needs AWS credentials and a region", t->display);
        return GF_EINVAL;
    }
    char sigv4[96];
    snprintf(sigv4, sizeof sigv4, "aws:amz:%s:s3", a->region);
    GF__CURL_SET(CURLOPT_AWS_SIGV4, sigv4);
    GF__CURL_SET(CURLOPT_USERNAME, a->access_key);
    GF__CURL_SET(CURLOPT_PASSWORD, a->secret_key);
    /* curl 7.88 does not add it, and S3 needs it. */
    int rc = gf__remote_add_header(headers, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (rc == 0 && a->session_token) {
        size_t n = strlen(a->session_token);
        char *line = malloc(n + 23);
        if (!line)
            return GF_ENOMEM;
        memcpy(line, "x-amz-security-token: ", 22);
        memcpy(line + 22, a->session_token, n + 1);
        rc = gf__remote_add_header(headers, line);
        explicit_bzero(line, n + 22);
        free(line);
    }
    if (rc < 0) {
        gf__why(why, why_len, "%s: out of memory for the request's headers", t->display);
        return rc;
    }
    GF__CURL_SET(CURLOPT_HTTPHEADER, *headers);
    return 0;
}
#define S3_SIGN s3_sign
#else
#define S3_SIGN NULL
#endif

const gf__remote_provider gf__remote_s3 = {
    .prefix = "s3://",
    .authority = "bucket",
    .path = "key",
    .check = s3_check,
    .url = s3_url,
    .bucket_key = 1,
    .auth_load = s3_auth_load,
    .auth_needs = "AWS credentials and a region",
    /* A signed request is for one URL: a redirect (a wrong region) is an
     * error to report, not to follow unsigned. */
    .max_redirects = 0,
    .sign = S3_SIGN,
    .in_region = s3_in_region,
};
