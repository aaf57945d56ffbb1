/*
 * Dataset index: turns an ImageFolder tree (dataset_folder.c), a list file
 * (dataset_list.c), WebDataset-style tar shards (dataset_shards.c) or the
 * caller's arrays of paths and labels (dataset_memory.c) into
 * one compact table of (relative path, label); for shards also (shard,
 * data offset, size) per sample. This file: the choice among them, and
 * closing; the table they build and what they share is dataset_builder.c,
 * below them all. Run once, at open, by the thread that calls gf_open;
 * the table is read-only afterwards.
 *
 * Memory is a few blocks whatever the size: one arena of NUL-terminated
 * relative paths back to back, one array of offsets into it and one array of
 * labels (plus, for ImageFolder, one block of class names), and for
 * folders and lists one gf__file_seen per sample (16 bytes: the file's
 * identity, checked at each read). There is no allocation per sample: a
 * million-line list costs path + 29 bytes a sample.
 */
#include "dataset.h"
#include "dataset_indexers.h"
#include "remote_url.h"
#include "shard_pattern.h"

#include "config.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- open, close ---- */

void gf__dataset_default_opts(gf__dataset_opts *o)
{
    *o = (gf__dataset_opts){.extensions = GF_EXT_TORCHVISION,
                            .max_depth = GF_FOLDER_MAX_DEPTH,
                            .max_entries = GF_FOLDER_MAX_ENTRIES};
}

int gf__dataset_open(gf__dataset *ds, const char *source, char *why, size_t why_len)
{
    return gf__dataset_open_with(ds, source, NULL, why, why_len);
}

/* A folder's sample is a file: one image and its label. */
static int no_fields(const char *source, char *why, size_t why_len)
{
    gf__why_path(why, why_len, source,
                 "fields name the members of a tar shard's samples or a list's files; a "
                 "folder's sample is one image file and its label (leave fields unset)");
    return GF_EINVAL;
}

/* Every source's samples have the default fields unless the shard
 * indexer was given others. */
static void default_fields(gf__dataset *ds)
{
    (void)gf__schema_parse(NULL, &ds->schema, NULL, 0);
}

int gf__dataset_open_with(gf__dataset *ds, const char *source, const gf__dataset_opts *opts,
                          char *why, size_t why_len)
{
    gf__dataset_opts defaults;
    if (!opts) {
        gf__dataset_default_opts(&defaults);
        opts = &defaults;
    }
    if (!ds)
        return GF_EINVAL;
    memset(ds, 0, sizeof *ds);
    default_fields(ds);
    ds->root_fd = -1;
    if (why && why_len)
        why[0] = '\0';
    if (!source || !*source) {
        gf__why(why, why_len, "no data set given");
        return GF_EDATASET;
    }
    if (gf__data_is_mix(source)) {
        int rc = gf__dataset_open_mix(ds, source, opts, why, why_len);
        if (rc == GF_ENOMEM && !(why && why[0]))
            gf__why(why, why_len, "mix: out of memory while indexing");
        if (rc < 0)
            gf__dataset_close(ds);
        assert(rc < 0 || ds->root_fd > 0);
        return rc;
    }
    if (gf__data_is_remote(source)) {
#if GF_HAVE_REMOTE
        int rc = gf__dataset_open_remote(ds, source, opts, why, why_len);
        if (rc == GF_ENOMEM)
            gf__why(why, why_len, "remote shards: out of memory while indexing");
        if (rc < 0)
            gf__dataset_close(ds);
        assert(rc < 0 || ds->root_fd > 0);
        return rc;
#else
        /* Not the source itself when it may hold a password. */
        char hidden[32];
        snprintf(hidden, sizeof hidden, "%s...", gf__remote_provider_of(source)->prefix);
        const char *shown = strchr(source, '@') ? hidden : source;
        gf__why_path(why, why_len, shown,
                     "remote shards need libcurl: this build has the `remote` feature off "
                     "(meson -Dremote=enabled)");
        return GF_EINVAL;
#endif
    }
    struct stat st;
    if (gf__dataset_is_shards(source) &&
        !(strpbrk(source, ",{") == NULL && stat(source, &st) == 0 && S_ISDIR(st.st_mode))) {
        int rc = gf__dataset_open_shards(ds, source, opts->shard_skip, opts->bad_label_fails,
                                         opts->schema, why, why_len);
        if (rc == GF_ENOMEM)
            gf__why_path(why, why_len, source, "out of memory while indexing");
        if (rc < 0)
            gf__dataset_close(ds);
        assert(rc < 0 || ds->root_fd > 0); /* what close relies on */
        return rc;
    }
    /* Opened once and fstat'ed, so the type checked is the file read. */
    int fd = open(source, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0 || fstat(fd, &st) != 0) {
        gf__why_path(why, why_len, source, "%s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return GF_EDATASET;
    }
    int rc;
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        char *pattern = NULL;
        rc = gf__prepared_pattern(source, &pattern, why, why_len);
        if (rc > 0)
            rc = gf__dataset_open_shards(ds, pattern, opts->shard_skip, opts->bad_label_fails,
                                         opts->schema, why, why_len);
        else if (rc == 0 && opts->schema)
            rc = no_fields(source, why, why_len);
        else if (rc == 0)
            rc = gf__dataset_open_folder(ds, source, opts, why, why_len);
        free(pattern);
    } else if (S_ISREG(st.st_mode)) {
        rc = gf__dataset_open_list(ds, source, fd, &st, opts->schema, why, why_len);
        close(fd);
    } else {
        close(fd);
        gf__why_path(why, why_len, source, "not a directory or a regular file");
        rc = GF_EDATASET;
    }
    if (rc == GF_ENOMEM)
        gf__why_path(why, why_len, source, "out of memory while indexing");
    if (rc < 0)
        gf__dataset_close(ds);
    assert(rc < 0 || ds->root_fd > 0);
    return rc;
}

int gf__dataset_open_samples(gf__dataset *ds, const char *root, const char *const *paths,
                             const int32_t *labels, uint64_t n, char *why, size_t why_len)
{
    if (!ds)
        return GF_EINVAL;
    memset(ds, 0, sizeof *ds);
    default_fields(ds);
    ds->root_fd = -1;
    if (why && why_len)
        why[0] = '\0';
    int rc = gf__dataset_open_memory(ds, root, paths, labels, n, why, why_len);
    if (rc == GF_ENOMEM)
        gf__why(why, why_len, "samples: out of memory while indexing %llu of them",
                (unsigned long long)n);
    if (rc < 0)
        gf__dataset_close(ds);
    assert(rc < 0 || ds->root_fd > 0);
    return rc;
}

void gf__dataset_close(gf__dataset *ds)
{
    if (!ds)
        return;
    free(ds->arena);
    free(ds->path_off);
    free(ds->labels);
    free(ds->class_names);
    free(ds->shard_paths);
    free(ds->shard_ids);
    free(ds->seen);
    free(ds->shard);
    free(ds->data_off);
    free(ds->data_len);
    free(ds->data_crc);
    for (int k = 0; k < ds->n_var; k++) {
        free(ds->var_off[k]);
        free(ds->var_len[k]);
    }
    free(ds->damage);
    free(ds->damage_text);
    free(ds->remote);
    free(ds->shard_crc32c);
    for (int k = 0; k < ds->n_sources; k++) {
        free(ds->sources[k].data);
        free(ds->sources[k].root);
    }
    free(ds->sources);
#if GF_HAVE_REMOTE
    for (int k = 0; k < ds->n_more_ctx; k++)
        gf__remote_ctx_free(ds->more_ctx[k]);
    free(ds->more_ctx);
    gf__remote_ctx_free(ds->remote_ctx);
#endif
    if (ds->root_fd > 0)
        close(ds->root_fd);
    memset(ds, 0, sizeof *ds);
    ds->root_fd = -1;
}
