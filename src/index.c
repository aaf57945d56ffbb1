/*
 * The public index handle (gf_index, gpufeed.h): a data set's index over
 * the dataset module, without a loader. Any thread may call it; a handle
 * is read-only after open except for its error message (gf_index_read).
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "dataset.h"
#include "reader.h"
#include "settings.h"

struct gf_index {
    gf__dataset ds;
    size_t max_file_bytes;
    char msg[384];
};

int gf_index_open(gf_index **out, const gf_settings *s)
{
    if (!out)
        return GF_EINVAL;
    *out = calloc(1, sizeof **out);
    gf_index *ix = *out;
    if (!ix)
        return GF_ENOMEM;
    int rc = gf__check_settings(s, GF__CHECK_DATA, ix->msg, sizeof ix->msg);
    if (rc < 0)
        return rc;
    gf_settings r = *s;
    gf__resolve_settings(&r);
    ix->max_file_bytes = (size_t)r.max_file_bytes;
    gf__dataset_opts o;
    gf__dataset_default_opts(&o);
    o.extensions = s->extensions;
    o.folder_walk = s->folder_walk;
    o.shard_skip = gf__shard_skip_of(s); /* the kept set gf_open would index */
    o.ca_file = s->ca_file;
    o.remote_settings = &r; /* remote sidecars: the stall, retries and deadline asked */
    o.mix_labels = s->mix_labels; /* a mix: the labels gf_open gives */
    /* A key whose .cls is no label: as gf_open, an error under fail, else
     * a warning (prepare would otherwise leave it out without a word). */
    o.bad_label_fails = s->on_error == GF_ON_ERROR_FAIL;
    gf__schema schema;
    rc = gf__schema_of_settings(s, &schema, &o.schema, ix->msg, sizeof ix->msg);
    if (rc == 0)
        rc = gf__dataset_open_with(&ix->ds, s->data, &o, ix->msg, sizeof ix->msg);
    for (int i = 0; rc == 0 && s->on_sample_warning && i < ix->ds.n_label_skips; i++) {
        const gf_sample_error *e = &ix->ds.label_skips[i];
        s->on_sample_warning(s->on_sample_warning_user, e->sample, e->path, e->code, e->reason);
    }
    return rc;
}

uint64_t gf_index_count(const gf_index *ix)
{
    return ix ? ix->ds.n : 0;
}

int gf_index_classes(const gf_index *ix)
{
    return ix ? ix->ds.n_classes : 0;
}

uint32_t gf_index_shards(const gf_index *ix)
{
    return ix ? ix->ds.n_shards : 0;
}

const char *gf_index_shard_path(const gf_index *ix, uint32_t k)
{
    return ix && k < ix->ds.n_shards ? ix->ds.shard_paths[k] : NULL;
}

int gf_index_damaged_shards(const gf_index *ix, gf_sample_error *out, int max)
{
    if (!ix || (!out && max > 0) || max < 0)
        return GF_EINVAL;
    return gf__dataset_damage(&ix->ds, out, max);
}

uint64_t gf_index_skipped_entry(const gf_index *ix, uint64_t i, const char **path,
                                const char **reason)
{
    if (!ix)
        return 0;
    return gf__dataset_skipped_entry(&ix->ds, i, path, reason);
}

const char *gf_index_path(const gf_index *ix, uint64_t i)
{
    return ix && i < ix->ds.n ? gf__dataset_path(&ix->ds, i) : NULL;
}

int32_t gf_index_label(const gf_index *ix, uint64_t i)
{
    return ix && i < ix->ds.n ? ix->ds.labels[i] : GF_EINVAL;
}

int gf_index_read(gf_index *ix, uint64_t i, void **data, size_t *len, char *why, size_t why_len)
{
    if (!ix) {
        if (data)
            *data = NULL;
        if (len)
            *len = 0;
        if (why && why_len)
            why[0] = '\0';
        return GF_EINVAL;
    }
    /* ix->msg is the last failure's: a success leaves it. */
    char reason[sizeof ix->msg];
    int rc = gf__dataset_read_sample(&ix->ds, i, ix->max_file_bytes, data, len, reason,
                                     sizeof reason);
    if (rc < 0)
        gf__why(ix->msg, sizeof ix->msg, "%s", reason);
    if (why && why_len)
        gf__why(why, why_len, "%s", rc < 0 ? reason : "");
    return rc;
}

int gf_index_fields(const gf_index *ix)
{
    return ix ? ix->ds.n_var : 0;
}

const char *gf_index_field_name(const gf_index *ix, int k, gf_field_kind *kind)
{
    if (!ix || k < 0 || k >= ix->ds.n_var)
        return NULL;
    int f = ix->ds.var_field[k];
    if (kind)
        *kind = ix->ds.schema.field[f].kind;
    return ix->ds.schema.name[f];
}

int gf_index_read_fields(gf_index *ix, uint64_t i, void **data, size_t *len, size_t *at,
                         size_t *size, const char **ext, int n, char *why, size_t why_len)
{
    if (!ix || !at || !size || !ext || n < 1 + ix->ds.n_var) {
        if (data)
            *data = NULL;
        if (len)
            *len = 0;
        if (why && why_len)
            gf__why(why, why_len, "gf_index_read_fields: %s",
                    ix ? "no room for the fields" : "no index");
        return GF_EINVAL;
    }
    const gf__dataset *ds = &ix->ds;
    if (!gf__dataset_member(ds, i) && ds->n_var) { /* a list's fields are files, not members */
        gf__why(why, why_len, "gf_index_read_fields: a list's fields are files of their own, "
                              "not members of a shard");
        gf__why(ix->msg, sizeof ix->msg, "gf_index_read_fields: a list's fields are files");
        if (data)
            *data = NULL;
        if (len)
            *len = 0;
        return GF_EINVAL;
    }
    char reason[sizeof ix->msg];
    int rc = gf__dataset_read_extent(ds, i, ix->max_file_bytes, data, len, reason,
                                     sizeof reason);
    if (why && why_len)
        gf__why(why, why_len, "%s", rc < 0 ? reason : "");
    if (rc < 0) {
        gf__why(ix->msg, sizeof ix->msg, "%s", reason);
        return rc;
    }
    at[0] = gf__dataset_image_at(ds, i);
    size[0] = gf__dataset_member(ds, i) ? ds->data_len[i] : *len;
    ext[0] = "";
    if (!gf__dataset_member(ds, i))
        return 0;
    /* The arena: "base.tar:MEMBER" (MEMBER's key to the first '.' of
     * its base name), NUL, then each field's extension. */
    const char *rel;
    uint64_t start, extent;
    gf__dataset_extent(ds, i, &rel, &start, &extent);
    const char *path = gf__dataset_path(ds, i), *shard_base = strrchr(rel, '/');
    const char *name = path + strlen(shard_base ? shard_base + 1 : rel) + 1;
    const char *slash = strrchr(name, '/'), *dot = strchr(slash ? slash + 1 : name, '.');
    ext[0] = dot ? dot + 1 : "";
    const char *e = path + strlen(path) + 1;
    for (int k = 0; k < ds->n_var; k++) {
        at[1 + k] = (size_t)(ds->var_off[k][i] - start);
        size[1 + k] = ds->var_len[k][i];
        ext[1 + k] = e;
        e += strlen(e) + 1;
    }
    return 0;
}

const char *gf_index_last_error(const gf_index *ix)
{
    return ix ? ix->msg : "";
}

void gf_index_close(gf_index **ix)
{
    if (!ix || !*ix)
        return;
    gf__dataset_close(&(*ix)->ds);
    free(*ix);
    *ix = NULL;
}
