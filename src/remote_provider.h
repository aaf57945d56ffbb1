/* The remote-provider table: one row per URL scheme a `data` may name
 * (http, https, s3), holding all that differs between stores: how an
 * element's URL is checked and turned into the URL requested, what
 * credentials it needs, how a request is signed, whether a store's
 * region moves it, and how a pattern is listed. The rest of the remote
 * code asks a target's row, never its scheme, so a new store is one file
 * (its row and hooks) and one line in remote_provider.c's table.
 * No libcurl here: always built. Rows are constant; any thread. */
#ifndef GF_REMOTE_PROVIDER_H
#define GF_REMOTE_PROVIDER_H

#include "common.h"

struct gf__remote_auth;   /* remote_auth.h */
struct gf__remote_target; /* remote_url.h */
struct gf__names;         /* shard_pattern.h */
struct curl_slist;

typedef struct gf__remote_provider gf__remote_provider;

/* An element split at its scheme (remote_url.c's split_url): the
 * authority [host, host + host_len) (a host, or a bucket) and the rest
 * from the first '/' after it (never empty: split_url refuses that). */
typedef struct gf__url_parts {
    const gf__remote_provider *p;
    const char *host;
    size_t host_len;
    const char *path; /* at the '/' */
    size_t path_len;
} gf__url_parts;

struct gf__remote_provider {
    const char *prefix;    /* "s3://", lowercase; matched in any case */
    const char *authority; /* what the authority names, for messages: "host", "bucket" */
    const char *path;      /* what follows it: "path", "key" */
    /* The parser's own checks of an expanded element el[0, len), after
     * the shared ones (split, userinfo, ".tar"): 0, or GF_EINVAL with
     * why quoting el (never what comes before an '@'). */
    int (*check)(const char *el, size_t len, const gf__url_parts *u, char *why, size_t why_len);
    /* The URL requested for el into dst (room for the length returned
     * + 1; dst NULL: only measured). a: the credentials (NULL unless
     * auth_load is set). */
    size_t (*url)(char *dst, const char *el, size_t len, const gf__url_parts *u,
                  const struct gf__remote_auth *a);
    int bucket_key; /* 1: a target keeps its bucket (the authority) and key */
    /* Credentials (NULL: none): loaded once at open by the indexer when
     * an element of this row is in the source (gf__remote_auth_load's
     * rules: 0 or GF_E* with why, never a secret); auth_needs names
     * them in "PREFIX shards need AUTH_NEEDS" when absent. */
    int (*auth_load)(struct gf__remote_auth *a, char *why, size_t why_len);
    const char *auth_needs;
    /* The request (remote_curl.c): redirects followed at most (0: one is
     * an error to report); the signer (NULL: unsigned), called last on
     * the easy handle with a's credentials, appending its headers to *h
     * and setting CURLOPT_HTTPHEADER; 0, or GF_EINVAL (no credentials),
     * GF_ENOMEM, GF_ENODEV with why. Built with `remote` only. */
    long max_redirects;
    int (*sign)(void *easy, const struct gf__remote_target *t, const struct gf__remote_auth *a,
                struct curl_slist **h, char *why, size_t why_len);
    /* A store that names another region (a 301, AuthorizationHeaderMalformed)
     * is asked again, signed for it, once (remote_request.c); NULL: never.
     * Writes url moved to region into dst[room] (NULL, 0: measured);
     * returns its length, 0 where the host stays (a's endpoint, say). */
    size_t (*in_region)(const char *url, const char *region, const struct gf__remote_auth *a,
                        char *dst, size_t room);
    /* Listing a pattern on the store (NULL: none lists; a source's {A..B}
     * ranges and commas are expanded locally by gf__shards_expand, the
     * same for every row, so its messages quote the source whole). No
     * row lists yet; remote_url.c's gf__remote_targets is where one
     * would be asked, per element. */
    int (*list)(const char *pattern, size_t len, const struct gf__remote_auth *a,
                struct gf__names *out, char *why, size_t why_len);
};

/* The rows: remote_http.c (http, https), remote_s3.c (s3). */
extern const gf__remote_provider gf__remote_http, gf__remote_https, gf__remote_s3;

/* The row whose prefix s[0, len) begins with (any case), else NULL (a
 * local path). Only a prefix test: gf__remote_targets checks the rest. */
const gf__remote_provider *gf__remote_provider_n(const char *s, size_t len);
/* As gf__remote_provider_n on the whole string; NULL-safe. */
const gf__remote_provider *gf__remote_provider_of(const char *s);

/* The table: *n rows, in lookup order. */
const gf__remote_provider *const *gf__remote_providers(size_t *n);

/* "http://, https:// or s3://": every row's prefix, for messages. */
void gf__remote_prefixes(char *dst, size_t room);

/* 1 if the row re-asks a store that names another region. */
static inline int gf__remote_follows_region(const gf__remote_provider *p)
{
    return p && p->in_region;
}

#endif
