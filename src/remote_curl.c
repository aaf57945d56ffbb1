/* One remote shard's libcurl easy handle (remote_curl.h). Built with
 * the `remote` feature only; the fetcher calls it on the thread that
 * owns the handle. */
#include "remote_curl.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* http(s) servers may move a file; a few hops, not a loop. */
#define HTTP_MAX_REDIRECTS 5L

#define SET(opt, val)                                                                              \
    do {                                                                                           \
        CURLcode c_ = curl_easy_setopt(e, opt, val);                                               \
        if (c_ != CURLE_OK) {                                                                      \
            gf__why(why, why_len, "%s: libcurl refused %s: %s", t->display, #opt,                \
                    curl_easy_strerror(c_));                                                       \
            return c_ == CURLE_OUT_OF_MEMORY ? GF_ENOMEM : GF_ENODEV;                              \
        }                                                                                          \
    } while (0)

static int add_header(struct curl_slist **h, const char *line)
{
    struct curl_slist *n = curl_slist_append(*h, line);
    if (!n)
        return GF_ENOMEM;
    *h = n;
    return 0;
}

int gf__remote_easy_setup(CURL *e, const gf__remote_target *t, const gf__remote_auth *a,
                          const char *ca_file, struct curl_slist **headers, char *why,
                          size_t why_len)
{
    if (!e || !t || !headers)
        return GF_EINVAL;
    int s3 = t->scheme == GF__REMOTE_S3;
    if (s3 && (!a || !a->access_key || !a->secret_key || !a->region)) {
        gf__why(why, why_len, "%s: s3:// needs AWS credentials and a region", t->display);
        return GF_EINVAL;
    }
    SET(CURLOPT_URL, t->url);
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_VERBOSE, 0L);
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    /* An https shard never continues over plain http. */
    SET(CURLOPT_REDIR_PROTOCOLS_STR,
        strncasecmp(t->url, "https:", 6) == 0 ? "https" : "http,https");
    /* A signed S3 request is for one URL: a redirect (a wrong region)
     * is an error to report, not to follow unsigned. */
    SET(CURLOPT_FOLLOWLOCATION, s3 ? 0L : 1L);
    SET(CURLOPT_MAXREDIRS, s3 ? 0L : HTTP_MAX_REDIRECTS);
    SET(CURLOPT_SSL_VERIFYPEER, 1L);
    SET(CURLOPT_SSL_VERIFYHOST, 2L);
    if (ca_file)
        SET(CURLOPT_CAINFO, ca_file);
    SET(CURLOPT_TCP_KEEPALIVE, 1L);
    SET(CURLOPT_PATH_AS_IS, 1L);
    /* A libcurl without nghttp2 refuses this: HTTP/1.1 then, not an error. */
    (void)curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    if (!s3)
        return 0;

    char sigv4[96];
    snprintf(sigv4, sizeof sigv4, "aws:amz:%s:s3", a->region);
    SET(CURLOPT_AWS_SIGV4, sigv4);
    SET(CURLOPT_USERNAME, a->access_key);
    SET(CURLOPT_PASSWORD, a->secret_key);
    int rc = add_header(headers, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (rc == 0 && a->session_token) {
        size_t n = strlen(a->session_token);
        char *line = malloc(n + 23);
        if (!line)
            return GF_ENOMEM;
        memcpy(line, "x-amz-security-token: ", 22);
        memcpy(line + 22, a->session_token, n + 1);
        rc = add_header(headers, line);
        explicit_bzero(line, n + 22);
        free(line);
    }
    if (rc < 0) {
        gf__why(why, why_len, "%s: out of memory for the request's headers", t->display);
        return rc;
    }
    SET(CURLOPT_HTTPHEADER, *headers);
    return 0;
}
