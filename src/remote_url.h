/* Remote shard addressing: what a `data` of http(s):// or s3:// URLs
 * expands to, and the URL each shard (and its index sidecar) is asked
 * for. No libcurl here: always built, so a build without the `remote`
 * feature still tells a remote source from a local one. On gf_open's
 * thread; a list is read-only once made. */
#ifndef GF_REMOTE_URL_H
#define GF_REMOTE_URL_H

#include "common.h"
#include "remote_provider.h"

struct gf__remote_auth; /* remote_auth.h */

/* 1 if data is remote (its first element's prefix names a provider row). */
static inline int gf__data_is_remote(const char *data)
{
    return gf__remote_provider_of(data) != NULL;
}

/* The first row among data's comma-separated elements that needs
 * credentials (the caller loads them with its auth_load before
 * gf__remote_targets), or NULL. */
const gf__remote_provider *gf__remote_auth_provider(const char *data);

/* One shard. Every string lives in the list's block. */
typedef struct gf__remote_target {
    const gf__remote_provider *provider; /* its row: asked, never its scheme */
    const char *display;        /* the user's form, expanded: "s3://bucket/key" or
                                   "https://host/path"; never credentials */
    const char *url;            /* what is requested (http(s) or, for s3, the
                                   endpoint's or AWS's https URL, key encoded) */
    const char *sidecar_display; /* display with ".tar" -> ".idx" (DALI wds2idx) */
    const char *sidecar_url;     /* url likewise */
    const char *bucket;         /* a bucket_key row's (s3) bucket; else NULL */
    const char *key;            /* its key as given (not encoded); else NULL */
} gf__remote_target;

typedef struct gf__remote_list {
    size_t n;
    gf__remote_target *t; /* n of them, in source order; the one block */
} gf__remote_list;

/* data's shards, expanded as local shards are (comma lists, {A..B}
 * ranges: gf__shards_expand), each element a URL ending in ".tar" (any
 * case), checked and made into its request URL by its row
 * (remote_http.c, remote_s3.c):
 *  - http://HOST/PATH or https://HOST/PATH: url is the element with bytes
 *    a URL cannot hold (space, controls, non-ASCII, "<>\"^`|\\") as %XX;
 *    a query or fragment ('?', '#') is refused.
 *  - s3://BUCKET/KEY: a bucket of 3-63 of [a-z0-9.-], starting and ending
 *    with a letter or digit; KEY encoded as SigV4's canonical URI wants
 *    (A-Za-z0-9-._~ and '/' kept, every other byte %XX uppercase, '?'
 *    included, so no query string ever arises: curl 7.88 would sign one
 *    unsorted). With a->endpoint: path-style ENDPOINT/BUCKET/KEY; else
 *    https://BUCKET.s3.REGION.amazonaws.com/KEY, or path-style
 *    https://s3.REGION.amazonaws.com/BUCKET/KEY for a bucket with a dot
 *    (the wildcard certificate does not cover it).
 * Userinfo ("user:pass@", gf__url_has_userinfo) in any element is
 * refused without echoing it (so an s3 key or http path with a ':' and
 * then an '@' is refused too).
 * a may be NULL when no element's row needs credentials.
 * Returns 0 with *out (free with gf__remote_list_free), or GF_EINVAL
 * (a bad URL, bucket or mixed local and remote elements), GF_EDATASET (a
 * bad {A..B} range, more than 2^20 shards: as for local shards) or
 * GF_ENOMEM, with why = "element: reason". */
int gf__remote_targets(const char *data, const struct gf__remote_auth *a, gf__remote_list *out,
                       char *why, size_t why_len);

/* Frees what gf__remote_targets made (one block); zeroes *l. NULL-safe. */
void gf__remote_list_free(gf__remote_list *l);

/* 1 if url[0, len) holds, or may hold, a user name or password: an '@'
 * in its authority, or after a ':' that is not a port's ("user:pa/ss@h"
 * would otherwise be a host and a path, and the password shown). Also an
 * '@' in a string that is not "scheme://...". */
int gf__url_has_userinfo(const char *url, size_t len);
/* What follows el's last '@' (el holds one): messages quote only that,
 * since anything before it may be a password. */
static inline const char *gf__url_after_userinfo(const char *el, size_t len)
{
    const char *at = el + len;
    while (at[-1] != '@')
        at--;
    return at;
}

/* remote_s3.c: 1 if bucket is a name S3 takes (the rules above), else 0. */
int gf__remote_bucket_ok(const char *bucket, size_t len);

/* src[0, n) as SigV4's canonical URI path into dst (room for 3n + 1;
 * NULL: only measured); returns the length written. */
size_t gf__remote_uri_encode(char *dst, const char *src, size_t n);
/* src[0, n) with the bytes a URL cannot hold as %XX (the http rows' rule
 * above), likewise. */
size_t gf__remote_url_encode(char *dst, const char *src, size_t n);

/* remote_s3.c: url, an AWS S3 URL as gf__remote_targets makes it without an endpoint
 * ("https://BUCKET.s3.R.amazonaws.com/KEY", "https://s3.R.amazonaws.com/
 * BUCKET/KEY"), with R replaced by region, into dst[room] (NULL, 0: only
 * measured). Returns its length, or 0 where url is no such URL or region
 * no region's name (a label of [a-z0-9-]): a store's 301 names the
 * bucket's region, whose host is then asked, as the AWS SDKs do. */
size_t gf__s3_url_in_region(const char *url, const char *region, char *dst, size_t room);

#endif
