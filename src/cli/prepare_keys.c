/*
 * prepare's member keys (prepare.h). A WebDataset key is a member name
 * up to the first '.' of its base name, so the source's key has to lose
 * its dots and slashes; and it must be a safe ustar name of at most 100
 * bytes with its extension. The rule, a pure function of the index:
 *   - the source key: a tar source's member name up to its first '.'
 *     (its WebDataset key), else the path without its last extension;
 *   - every byte outside [A-Za-z0-9_-] becomes '_';
 *   - over 80 bytes: the first 63, '_' and 16 hex digits of its FNV-1a;
 *   - a key made before (two sources differing only in what became '_')
 *     takes "_<index>" (and "_<n>" after that, until unique).
 * The original path is kept beside it in the sample's .key member.
 * Uniqueness is checked against a set of 64-bit hashes of the keys made:
 * a hash collision only renames a key, the same way in every run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../mix.h" /* header-only: gf__fnv1a64 */
#include "prepare.h"

#define KEY_MAX 80

struct prep_keys {
    uint64_t *slot; /* open addressing; 0 = empty (a hash of 0 is stored as 1) */
    size_t cap, n;
};

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = gf__fnv1a64(GF__FNV1A64_BASIS, s, n);
    return h ? h : 1; /* 0 marks an empty slot */
}

prep_keys *prep_keys_new(void)
{
    return calloc(1, sizeof(prep_keys));
}

void prep_keys_free(prep_keys *k)
{
    if (k)
        free(k->slot);
    free(k);
}

/* 1 if h was added, 0 if present, -1 out of memory. */
static int add(prep_keys *k, uint64_t h)
{
    if (2 * (k->n + 1) > k->cap) {
        size_t cap = k->cap ? 2 * k->cap : 1024;
        uint64_t *s = calloc(cap, sizeof *s);
        if (!s)
            return -1;
        for (size_t i = 0; i < k->cap; i++)
            if (k->slot[i]) {
                size_t j = (size_t)(k->slot[i] >> 7) & (cap - 1);
                while (s[j])
                    j = (j + 1) & (cap - 1);
                s[j] = k->slot[i];
            }
        free(k->slot);
        k->slot = s;
        k->cap = cap;
    }
    size_t j = (size_t)(h >> 7) & (k->cap - 1);
    while (k->slot[j]) {
        if (k->slot[j] == h)
            return 0;
        j = (j + 1) & (k->cap - 1);
    }
    k->slot[j] = h;
    k->n++;
    return 1;
}

int prep_key_next(prep_keys *k, const char *path, int is_shards, uint64_t index, char *out,
                  size_t out_len)
{
    const char *s = path;
    size_t n = strlen(path);
    if (is_shards) { /* "shard.tar:member": the member's WebDataset key */
        const char *m = strstr(path, ".tar:");
        if (m)
            s = m + 5;
        const char *slash = strrchr(s, '/');
        const char *dot = strchr(slash ? slash + 1 : s, '.');
        n = dot ? (size_t)(dot - s) : strlen(s);
    } else {
        const char *slash = strrchr(s, '/');
        const char *dot = strrchr(slash ? slash + 1 : s, '.');
        if (dot && dot != (slash ? slash + 1 : s))
            n = (size_t)(dot - s);
    }
    char key[KEY_MAX + 32];
    size_t kn = 0;
    for (size_t i = 0; i < n && kn < KEY_MAX + 1; i++) {
        char c = s[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '-';
        key[kn++] = ok ? c : '_';
    }
    if (kn == 0)
        key[kn++] = '_';
    if (n > KEY_MAX)
        kn = (size_t)snprintf(key + 63, sizeof key - 63, "_%016llx",
                              (unsigned long long)fnv1a(s, n)) + 63;
    key[kn] = '\0';
    int r = add(k, fnv1a(key, kn));
    char tried[KEY_MAX + 32];
    for (uint64_t again = 0; r == 0; again++) {
        char more[64];
        int mn = again ? snprintf(more, sizeof more, "_%llu_%llu", (unsigned long long)index,
                                  (unsigned long long)again)
                       : snprintf(more, sizeof more, "_%llu", (unsigned long long)index);
        size_t base = kn + (size_t)mn > KEY_MAX ? KEY_MAX - (size_t)mn : kn;
        memcpy(tried, key, base);
        memcpy(tried + base, more, (size_t)mn + 1);
        r = add(k, fnv1a(tried, strlen(tried)));
        if (r != 0)
            memcpy(key, tried, strlen(tried) + 1);
    }
    if (r < 0)
        return -1;
    snprintf(out, out_len, "%s", key);
    return 0;
}
