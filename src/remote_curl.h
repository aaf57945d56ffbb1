/* A libcurl easy handle set up for one remote shard (remote_curl.c):
 * the URL, S3's SigV4 signing, TLS and protocol limits. Built only with
 * the `remote` feature (GF_HAVE_REMOTE). On the thread that owns the
 * handle (the fetcher's: the controller's loop). */
#ifndef GF_REMOTE_CURL_H
#define GF_REMOTE_CURL_H

#include "remote_auth.h"
#include "remote_url.h"

#include <curl/curl.h>

/* Sets e up to GET t->url (the caller may then point CURLOPT_URL at
 * t->sidecar_url; to add a header, such as Range, append it to *headers
 * and set CURLOPT_HTTPHEADER to *headers again):
 *  - protocols http and https only, redirects too; s3 follows none, http(s)
 *    up to 5, never from https to http;
 *  - TLS verified (peer and host), against ca_file when not NULL;
 *    HTTP/2 over TLS where the server offers it; TCP keepalive; no
 *    signals (CURLOPT_NOSIGNAL: the controller's thread); paths as is
 *    (S3 keys are literal: "a/../b" is a key, not a walk);
 *  - s3: SigV4 ("aws:amz:REGION:s3") with the access key and secret as
 *    CURLOPT_USERNAME and CURLOPT_PASSWORD apart (a key may hold ':',
 *    which CURLOPT_USERPWD would split at), "x-amz-content-sha256:
 *    UNSIGNED-PAYLOAD" (curl 7.88 does not add it, and S3 needs it) and
 *    "x-amz-security-token" with a session token. Credentials go only to
 *    s3 targets. CURLOPT_VERBOSE stays off, so no Authorization header
 *    is ever printed.
 * *headers: the caller's list, appended to (start it NULL); the caller
 * frees it with curl_slist_free_all after the transfer, and not before
 * (curl keeps the pointer). curl copies the strings it is given, so a
 * may be freed after this call.
 * Returns 0, GF_EINVAL (s3 without credentials) or GF_ENOMEM / GF_ENODEV
 * (an option this libcurl refuses), with why naming the option. */
int gf__remote_easy_setup(CURL *e, const gf__remote_target *t, const gf__remote_auth *a,
                          const char *ca_file, struct curl_slist **headers, char *why,
                          size_t why_len);

#endif
