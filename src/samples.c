/*
 * The data set's samples by index, for tools (gpufeed.h): their encoded
 * bytes (gf__dataset_read_sample, which gf_index_read shares), display
 * paths and labels. Any thread, alongside the pipeline.
 */
#include "loader_impl.h"

#include "config.h"
#include "dataset_indexers.h"

#include <stdlib.h>
#include <string.h>

/* The index is immutable from the end of gf_open() to gf_close(), so the
 * sample accessors below read it without the mutex and touch no loader
 * state: any thread may call them while the pipeline runs. */

int gf__dataset_read_extent(const gf__dataset *ds, uint64_t index, size_t max_bytes, void **data,
                            size_t *len, char *why, size_t why_len)
{
    if (data)
        *data = NULL;
    if (len)
        *len = 0;
    if (why && why_len)
        why[0] = '\0';
    if (!data || !len)
        return GF_EINVAL;
    if (index >= ds->n) {
        gf__why(why, why_len, "sample %llu: out of range (%llu samples)",
                (unsigned long long)index, (unsigned long long)ds->n);
        return GF_EINVAL;
    }
    const char *rel;
    uint64_t off, length;
    gf__dataset_extent(ds, index, &rel, &off, &length);
    gf__buf b = {.exact = true};
    /* The cap is on the member, not its header (nor a sample's other
     * fields, read with it). */
    size_t around = gf__dataset_member(ds, index) ? (size_t)(length - ds->data_len[index]) : 0;
    if (gf__dataset_member(ds, index) && max_bytes && max_bytes <= SIZE_MAX - around)
        max_bytes += around;
    char reason[192] = "";
    int rc;
#if GF_HAVE_REMOTE
    if (gf__dataset_remote_member(ds, index)) /* a mix's local samples beside */
        rc = gf__remote_read(ds, ds->shard[index], off, length, max_bytes, &b, reason,
                             sizeof reason);
    else
#endif
        rc = gf__read_range(ds->root_fd, rel, off, length, &b, max_bytes, reason, sizeof reason);
    if (rc < 0) {
        gf__buf_free(&b);
        gf__why(why, why_len, "%s: %s", gf__dataset_path(ds, index),
                reason[0] ? reason : gf_strerror(rc));
        return rc;
    }
    if (gf__dataset_member(ds, index)) { /* the members' headers: checked */
        rc = gf__dataset_member_check(ds, index, b.data, b.len, reason, sizeof reason);
        if (rc < 0) {
            gf__buf_free(&b);
            gf__why(why, why_len, "%s: %s", gf__dataset_path(ds, index), reason);
            return rc;
        }
    }
    if (b.cap > b.len) { /* the remote reader's buffer, or an empty file */
        uint8_t *p = realloc(b.data, b.len ? b.len : 1);
        if (p)
            b.data = p;
    }
    *data = b.data;
    *len = b.len;
    return 0;
}

int gf__dataset_read_sample(const gf__dataset *ds, uint64_t index, size_t max_bytes, void **data,
                            size_t *len, char *why, size_t why_len)
{
    int rc = gf__dataset_read_extent(ds, index, max_bytes, data, len, why, why_len);
    if (rc < 0 || !gf__dataset_member(ds, index))
        return rc;
    /* the image's bytes alone: its header and the other members dropped */
    uint8_t *p = *data;
    *len = ds->data_len[index];
    memmove(p, p + gf__dataset_image_at(ds, index), *len);
    uint8_t *q = realloc(p, *len ? *len : 1);
    *data = q ? q : p;
    return 0;
}

int gf_read_sample(gf_loader *l, uint64_t index, void **data, size_t *len, char *why,
                   size_t why_len)
{
    if (!l) {
        if (data)
            *data = NULL;
        if (len)
            *len = 0;
        if (why && why_len)
            why[0] = '\0';
        return GF_EINVAL;
    }
    return gf__dataset_read_sample(&l->ds, index, (size_t)l->s.max_file_bytes, data, len, why,
                                   why_len);
}

const char *gf_sample_path(gf_loader *l, uint64_t index)
{
    return l && index < l->ds.n ? gf__dataset_path(&l->ds, index) : NULL;
}

int32_t gf_sample_label(gf_loader *l, uint64_t index)
{
    return l && index < l->ds.n ? l->ds.labels[index] : GF_EINVAL;
}

int gf_class_count(gf_loader *l)
{
    return l ? l->ds.n_classes : 0;
}

const char *gf_class_name(gf_loader *l, int i)
{
    return l && l->ds.class_names && i >= 0 && i < l->ds.n_classes ? l->ds.class_names[i]
                                                                    : NULL;
}

uint64_t gf_index_hash(gf_loader *l)
{
    if (!l)
        return 0;
    uint64_t h = atomic_load(&l->index_hash);
    if (h)
        return h;
    h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
    for (uint64_t i = 0; i < l->ds.n; i++) {
        /* The path's bytes and its NUL, then the label's 4 bytes little-endian:
         * no two (path, label) sequences feed the same bytes. */
        for (const unsigned char *p = (const unsigned char *)gf__dataset_own_path(&l->ds, i);; p++) {
            h = (h ^ *p) * 0x100000001b3ull;
            if (!*p)
                break;
        }
        uint32_t label = (uint32_t)l->ds.labels[i];
        for (int k = 0; k < 4; k++)
            h = (h ^ ((label >> (8 * k)) & 0xff)) * 0x100000001b3ull;
    }
    /* A mix's order is its weights' and epoch's too: a state saved under
     * others names other samples. */
    for (int s = 0; l->blend.src && s <= l->blend.n; s++)
        for (int k = 0; k < 4; k++)
            h = (h ^ ((l->blend.b.cum[s] >> (8 * k)) & 0xff)) * 0x100000001b3ull;
    if (l->blend.src)
        h = (h ^ (uint64_t)(l->s.mix_epoch + 1)) * 0x100000001b3ull;
    if (!h)
        h = 1;
    atomic_store(&l->index_hash, h); /* a racing first call stores the same */
    return h;
}

uint64_t gf_skipped_entry(gf_loader *l, uint64_t i, const char **path, const char **reason)
{
    if (!l)
        return 0;
    return gf__dataset_skipped_entry(&l->ds, i, path, reason);
}
