/* One remote shard's libcurl easy handle (remote_curl.h): what every
 * request shares, then its provider row's redirects and signer. Built
 * with the `remote` feature only; the fetcher calls it on the thread
 * that owns the handle. */
#include "remote_curl.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SET GF__CURL_SET

int gf__remote_add_header(struct curl_slist **h, const char *line)
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
    if (!e || !t || !t->provider || !headers)
        return GF_EINVAL;
    const gf__remote_provider *p = t->provider;
    SET(CURLOPT_URL, t->url);
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_VERBOSE, 0L);
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    /* An https shard never continues over plain http. */
    SET(CURLOPT_REDIR_PROTOCOLS_STR,
        strncasecmp(t->url, "https:", 6) == 0 ? "https" : "http,https");
    SET(CURLOPT_FOLLOWLOCATION, p->max_redirects > 0 ? 1L : 0L);
    SET(CURLOPT_MAXREDIRS, p->max_redirects);
    SET(CURLOPT_SSL_VERIFYPEER, 1L);
    SET(CURLOPT_SSL_VERIFYHOST, 2L);
    if (ca_file)
        SET(CURLOPT_CAINFO, ca_file);
    SET(CURLOPT_TCP_KEEPALIVE, 1L);
    SET(CURLOPT_PATH_AS_IS, 1L);
    /* A libcurl without nghttp2 refuses this: HTTP/1.1 then, not an error. */
    (void)curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    return p->sign ? p->sign(e, t, a, headers, why, why_len) : 0;
}
