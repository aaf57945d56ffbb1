/* A libcurl easy handle set up for one remote shard (remote_curl.c):
 * the URL, TLS and protocol limits, then its provider row's redirects and
 * signer (remote_provider.h). Built only with the `remote` feature
 * (GF_HAVE_REMOTE). On the thread that owns the handle (the fetcher's:
 * the controller's loop). */
#ifndef GF_REMOTE_CURL_H
#define GF_REMOTE_CURL_H

#include "remote_auth.h"
#include "remote_provider.h"
#include "remote_url.h"

#include <curl/curl.h>

/* Sets e up to GET t->url (the caller may then point CURLOPT_URL at
 * t->sidecar_url; to add a header, such as Range, append it to *headers
 * and set CURLOPT_HTTPHEADER to *headers again):
 *  - protocols http and https only, redirects too; as many followed as
 *    t's row says (s3 none, http(s) 5), never from https to http;
 *  - TLS verified (peer and host), against ca_file when not NULL;
 *    HTTP/2 over TLS where the server offers it; TCP keepalive; no
 *    signals (CURLOPT_NOSIGNAL: the controller's thread); paths as is
 *    (S3 keys are literal: "a/../b" is a key, not a walk);
 *  - t's row's signer, if it has one (s3: SigV4 "aws:amz:REGION:s3",
 *    "x-amz-content-sha256: UNSIGNED-PAYLOAD" and "x-amz-security-token"
 *    with a session token; remote_s3.c). Credentials go only to a row
 *    that signs. CURLOPT_VERBOSE stays off, so no Authorization header
 *    is ever printed.
 * *headers: the caller's list, appended to (start it NULL); the caller
 * frees it with curl_slist_free_all after the transfer, and not before
 * (curl keeps the pointer). curl copies the strings it is given, so a
 * may be freed after this call.
 * Returns 0, GF_EINVAL (a signer without its credentials) or GF_ENOMEM /
 * GF_ENODEV (an option this libcurl refuses), with why naming the option. */
int gf__remote_easy_setup(CURL *e, const gf__remote_target *t, const gf__remote_auth *a,
                          const char *ca_file, struct curl_slist **headers, char *why,
                          size_t why_len);

/* For the rows' signers: line appended to *h; 0 or GF_ENOMEM. */
int gf__remote_add_header(struct curl_slist **h, const char *line);

/* curl_easy_setopt(e, opt, val), returning GF_ENOMEM / GF_ENODEV from the
 * caller with why naming t->display and the option; needs e, t, why and
 * why_len in scope. */
#define GF__CURL_SET(opt, val)                                                                     \
    do {                                                                                           \
        CURLcode c_ = curl_easy_setopt(e, opt, val);                                               \
        if (c_ != CURLE_OK) {                                                                      \
            gf__why(why, why_len, "%s: libcurl refused %s: %s", t->display, #opt,                \
                    curl_easy_strerror(c_));                                                       \
            return c_ == CURLE_OUT_OF_MEMORY ? GF_ENOMEM : GF_ENODEV;                              \
        }                                                                                          \
    } while (0)

#endif
