/* Remote shard addressing (remote_url.h): a remote `data` expanded into
 * one block of targets, each with the URL shown to the user and the URL
 * requested. What is shared lives here (elements, userinfo, ".tar", the
 * block); what differs by store, its row's hooks (remote_provider.h)
 * decide. On gf_open's thread.
 *
 * Userinfo is refused on the raw elements, before expansion: the
 * expander's messages quote the source whole, so a password must never
 * reach it. */
#include "remote_url.h"

#include "shard_pattern.h" /* gf__shards_expand, gf__names */
#include "remote_auth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The targets' block beyond the names: at most about 10x their 64 MiB. */
#define REMOTE_BLOCK_MAX ((size_t)256 << 20)

/* The next element of src[0, total] from *at: top-level commas split,
 * as gf__shards_expand does (so "" is one empty element). Returns 0 past
 * the end. */
static int next_element(const char *src, size_t total, size_t *at, const char **el, size_t *len)
{
    if (*at > total)
        return 0;
    size_t i = *at;
    int depth = 0;
    for (; i < total; i++) {
        char c = src[i];
        if (c == '{')
            depth++;
        else if (c == '}' && depth > 0)
            depth--;
        else if (c == ',' && depth == 0)
            break;
    }
    *el = src + *at;
    *len = i - *at;
    *at = i + 1;
    return 1;
}

const gf__remote_provider *gf__remote_auth_provider(const char *data)
{
    if (!data)
        return NULL;
    size_t at = 0, len, total = strlen(data);
    const char *el;
    while (next_element(data, total, &at, &el, &len)) {
        const gf__remote_provider *p = gf__remote_provider_n(el, len);
        if (p && p->auth_load)
            return p;
    }
    return NULL;
}

static int sigv4_keeps(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_' || c == '~' || c == '/';
}

/* What a URL may hold as is (RFC 3986's unreserved and reserved, and '%'
 * so that the user's own escapes stay). */
static int url_keeps(unsigned char c)
{
    return sigv4_keeps(c) || (c && strchr(":?#[]@!$&'()*+,;=%", c) != NULL);
}

static size_t encode(char *dst, const char *src, size_t n, int (*keep)(unsigned char))
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)src[i];
        if (keep(c)) {
            if (dst)
                dst[o] = (char)c;
            o++;
        } else {
            if (dst) {
                dst[o] = '%';
                dst[o + 1] = hex[c >> 4];
                dst[o + 2] = hex[c & 15];
            }
            o += 3;
        }
    }
    if (dst)
        dst[o] = '\0';
    return o;
}

size_t gf__remote_uri_encode(char *dst, const char *src, size_t n)
{
    return encode(dst, src, n, sigv4_keeps);
}

size_t gf__remote_url_encode(char *dst, const char *src, size_t n)
{
    return encode(dst, src, n, url_keeps);
}

/* Splits el[0, len); 0, or GF_EINVAL with why. The message shows the
 * element only when it holds no userinfo, and then never the userinfo. */
static int split_url(const char *el, size_t len, gf__url_parts *u, char *why, size_t why_len)
{
    u->p = gf__remote_provider_n(el, len);
    if (!u->p) {
        char prefixes[128];
        gf__remote_prefixes(prefixes, sizeof prefixes);
        gf__why(why, why_len,
                "%.*s: data mixes local paths and URLs: every element must be %s",
                (int)GF__MIN(len, 512), el, prefixes);
        return GF_EINVAL;
    }
    size_t sl = strlen(u->p->prefix);
    const char *a = el + sl, *end = el + len;
    const char *slash = memchr(a, '/', (size_t)(end - a));
    const char *aend = slash ? slash : end;
    if (gf__url_has_userinfo(el, len)) {
        const char *at = gf__url_after_userinfo(el, len);
        gf__why(why, why_len,
                "%.*s<userinfo>@%.*s: a URL that holds (or looks to hold) a user name or "
                "password is refused (credentials would show in messages and logs): for s3:// "
                "set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a profile; a ':' or '@' meant "
                "in an http(s) path is written %%3A, %%40",
                (int)sl, el, (int)GF__MIN((size_t)(end - at), 512), at);
        return GF_EINVAL;
    }
    u->host = a;
    u->host_len = (size_t)(aend - a);
    u->path = aend;
    u->path_len = (size_t)(end - aend);
    if (u->host_len == 0) {
        gf__why(why, why_len, "%.*s: no %s", (int)GF__MIN(len, 512), el, u->p->authority);
        return GF_EINVAL;
    }
    if (u->path_len <= 1) {
        gf__why(why, why_len, "%.*s: no %s after the %s", (int)GF__MIN(len, 512), el,
                u->p->path, u->p->authority);
        return GF_EINVAL;
    }
    return 0;
}

int gf__url_has_userinfo(const char *url, size_t len)
{
    const char *end = url + len, *a = memchr(url, ':', len);
    if (!a || end - a < 3 || a[1] != '/' || a[2] != '/')
        return memchr(url, '@', len) != NULL;
    a += 3;
    const char *at = memchr(a, '@', (size_t)(end - a));
    if (!at)
        return 0;
    const char *slash = memchr(a, '/', (size_t)(end - a));
    if (!slash || at < slash)
        return 1; /* RFC 3986's userinfo */
    /* "user:pa/ss@host": a ':' before the '@' that is not a port's. */
    for (const char *p = a; p < at; p++) {
        if (*p != ':')
            continue;
        const char *q = p + 1;
        while (q < at && *q >= '0' && *q <= '9')
            q++;
        if (p >= slash || q == p + 1 || q == at || *q != '/')
            return 1;
    }
    return 0;
}

/* The checks an expanded element needs beyond split_url's: the shared
 * ".tar", then its row's. */
static int check_target(const char *el, size_t len, const gf__url_parts *u, char *why,
                        size_t why_len)
{
    if (len < 4 || strncasecmp(el + len - 4, ".tar", 4) != 0) {
        gf__why(why, why_len, "%s: a remote shard's name must end in .tar", el);
        return GF_EINVAL;
    }
    return u->p->check ? u->p->check(el, len, u, why, why_len) : 0;
}

/* Element el's strings into t, from *p on (when p is not NULL); returns
 * the bytes they take. */
static size_t fill(gf__remote_target *t, char **p, const char *el, const gf__url_parts *u,
                   const gf__remote_auth *a)
{
    size_t len = strlen(el), used = 0;
    char *w = p ? *p : NULL;
#define PUT(field, n)                                                                              \
    do {                                                                                           \
        if (w) {                                                                                   \
            t->field = w;                                                                          \
            w += (n) + 1;                                                                          \
        }                                                                                          \
        used += (n) + 1;                                                                           \
    } while (0)
    char *at = w;
    PUT(display, len);
    if (at)
        memcpy(at, el, len + 1);
    at = w;
    PUT(sidecar_display, len);
    if (at) {
        memcpy(at, el, len - 4);
        memcpy(at + len - 4, ".idx", 5);
    }
    at = w;
    size_t ul = u->p->url(at, el, len, u, a);
    PUT(url, ul);
    const char *url = at;
    at = w;
    PUT(sidecar_url, ul);
    if (at) {
        memcpy(at, url, ul - 4);
        memcpy(at + ul - 4, ".idx", 5);
    }
    if (u->p->bucket_key) {
        at = w;
        PUT(bucket, u->host_len);
        if (at) {
            memcpy(at, u->host, u->host_len);
            at[u->host_len] = '\0';
        }
        at = w;
        PUT(key, u->path_len - 1);
        if (at)
            memcpy(at, u->path + 1, u->path_len); /* with its NUL */
    }
#undef PUT
    if (t && w)
        t->provider = u->p;
    if (p)
        *p = w;
    return used;
}

int gf__remote_targets(const char *data, const gf__remote_auth *a, gf__remote_list *out,
                       char *why, size_t why_len)
{
    if (!out)
        return GF_EINVAL;
    memset(out, 0, sizeof *out);
    if (!data || !*data) {
        gf__why(why, why_len, "no data set given");
        return GF_EINVAL;
    }
    /* The raw elements first: no userinfo may reach the expander's
     * messages, and local paths do not mix with URLs. */
    size_t at = 0, len, total = strlen(data);
    const char *el;
    gf__url_parts u;
    while (next_element(data, total, &at, &el, &len)) {
        int rc = split_url(el, len, &u, why, why_len);
        if (rc < 0)
            return rc;
        if (u.p->auth_load && (!a || !a->region)) {
            gf__why(why, why_len, "%.*s: %s shards need %s", (int)GF__MIN(len, 512), el,
                    u.p->prefix, u.p->auth_needs);
            return GF_EINVAL;
        }
    }
    /* No row lists (gf__remote_provider.list): every pattern expands here. */
    gf__names names = {0};
    int rc = gf__shards_expand(data, &names, why, why_len);
    if (rc < 0) {
        gf__names_free(&names);
        return rc;
    }
    /* Sizes first, then the one block. */
    size_t bytes = names.n * sizeof(gf__remote_target);
    for (size_t i = 0; i < names.n && rc == 0; i++) {
        const char *e = names.buf + names.off[i];
        if ((rc = split_url(e, strlen(e), &u, why, why_len)) < 0 ||
            (rc = check_target(e, strlen(e), &u, why, why_len)) < 0)
            break;
        bytes += fill(NULL, NULL, e, &u, a);
        if (bytes > REMOTE_BLOCK_MAX) {
            gf__why_path(why, why_len, data, "its shards' URLs take more than %zu MiB",
                         REMOTE_BLOCK_MAX >> 20);
            rc = GF_EDATASET;
        }
    }
    char *block = rc == 0 ? malloc(bytes ? bytes : 1) : NULL;
    if (rc == 0 && !block)
        rc = GF_ENOMEM;
    if (rc < 0) {
        gf__names_free(&names);
        return rc;
    }
    gf__remote_target *t = (gf__remote_target *)block;
    char *w = block + names.n * sizeof *t;
    for (size_t i = 0; i < names.n; i++) {
        const char *e = names.buf + names.off[i];
        split_url(e, strlen(e), &u, NULL, 0);
        t[i] = (gf__remote_target){0};
        fill(&t[i], &w, e, &u, a);
    }
    out->n = names.n;
    out->t = t;
    gf__names_free(&names);
    return 0;
}

void gf__remote_list_free(gf__remote_list *l)
{
    if (!l)
        return;
    free(l->t);
    memset(l, 0, sizeof *l);
}
