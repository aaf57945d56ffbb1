/* Dataset index: a compact table of (relative path, label), and for tar
 * shards where each sample's bytes lie. */
#ifndef GF_DATASET_H
#define GF_DATASET_H

#include "dataset_indexers.h" /* and the table, dataset_builder.h */
#include "tar.h"

/* Whether data is a mix, "mix:W=SOURCE|W=SOURCE..." (dataset_mix.c). */
bool gf__data_is_mix(const char *data);
/* The source of a mix (ds->n_sources > 0) that sample i is in. */
int gf__dataset_source_of(const gf__dataset *ds, uint64_t i);
/* Sample i's path as its source names it: a mix's file without the root
 * its path was made absolute from (another machine mounts it elsewhere),
 * else gf__dataset_path (gf_index_hash). */
const char *gf__dataset_own_path(const gf__dataset *ds, uint64_t i);
/* Whether a mix names a remote source (order auto: shards). */
bool gf__mix_has_remote(const char *data);

/* GF_EXT_TORCHVISION, GF_FOLDER_MAX_DEPTH, GF_FOLDER_MAX_ENTRIES, shard_skip 0. */
void gf__dataset_default_opts(gf__dataset_opts *o);

/* source is tar shards, a directory or a list file.
 *
 * Tar shards (WebDataset): source is a comma-separated list of elements
 * that all end in ".tar", each a path or a pattern with numeric brace
 * ranges, "dir/train-{000000..000127}.tar" (expanded in order; a range
 * whose bounds have leading zeros keeps their width). A single ".tar" path
 * that is a directory is an ImageFolder. Shard paths are relative to the
 * current directory at open time (root_fd is an O_PATH descriptor of "."
 * then, so a later chdir does not matter) or absolute. Members are grouped
 * into samples by key, as WebDataset does: the member name up to the first
 * '.' of its basename; consecutive members with the same key form one
 * sample. A sample needs an image member (an image extension, as for
 * ImageFolder: key.jpg, key.png, ...) and key.cls (the label as decimal
 * text, at most 64 bytes); other members (key.json, ...) are ignored. Keys
 * that lack either are skipped and counted; so are members that are not
 * regular files or have absolute or '..' names. Samples are in shard order,
 * then archive order; n_classes = max label + 1, class_names NULL, unless
 * classes.txt beside the first shard names every label (one name per
 * line, in label order: gpufeed prepare's): then those names and their
 * count, and a file that cannot be taken is a warning. A malformed archive
 * (also zero bytes, or no member) fails with why = "shard: offset N:
 * reason", or under opts->shard_skip is taken in part and recorded in
 * ds->damage (the kept set depends only on the files: shards are scanned
 * one after another in source order). Member names are never used as
 * file-system paths.
 *
 * A directory (ImageFolder: label = index of the sub-folder in
 * sorted order, files sorted within; hidden entries taken) or a regular
 * file (list: "relative/path label" per line, paths relative to the list
 * file's directory, '#' comments and blank lines skipped).
 *
 * ImageFolder: classes are the root's sub-directories (hidden ones and
 * links to directories too, as torchvision's) in byte order (an empty one
 * still takes its label); each class's image files (opts->extensions'
 * list, checked case-insensitively; others counted in skipped_ext) are
 * found recursively, following symlinks, in torchvision's order: by
 * directory path, then file name; but a link to a directory outside its
 * class folder is not walked, nor a class that is the root or above it,
 * and within a class each directory (device, inode) is walked once,
 * through the first link in name order (so no loop, and no copies through
 * a second link): each of those named (named_skips) and a warning. Under
 * opts->folder_walk TORCHVISION the walk is os.walk's (dataset_folder.c):
 * only loops, and a class that is the root or above, are left out; at most
 * opts->max_depth levels below the class and opts->max_entries entries in
 * all (beyond: GF_EDATASET naming the directory). Files in the root are ignored. class_names holds the names.
 * List: the label is the last whitespace-separated token (decimal, 0 ..
 * 2147483646), the path everything before it, so paths may hold spaces;
 * leading/trailing whitespace and CR, and a UTF-8 byte-order mark opening
 * the file, are ignored. n_classes = max label + 1,
 * class_names NULL. A bad line fails with why = "list.txt:17: ...".
 *
 * Paths are relative to root_fd (O_PATH). On failure ds holds nothing and
 * root_fd is -1. Returns 0, or GF_EDATASET / GF_ENOMEM with why naming the
 * file and reason. */
int gf__dataset_open(gf__dataset *ds, const char *source, char *why, size_t why_len);
/* gf__dataset_open with opts (NULL: the defaults). */
int gf__dataset_open_with(gf__dataset *ds, const char *source, const gf__dataset_opts *opts,
                          char *why, size_t why_len);
/* The samples given in memory (gf_open_samples): n paths (copied; any
 * bytes but NUL) relative to the directory root (NULL or "": the current
 * directory at open time) or absolute, and their labels (0 ..
 * GF__LABEL_MAX); n_classes = max label + 1, class_names NULL. Read as a
 * list file's samples are. Returns 0; GF_EINVAL (n == 0, a NULL path or
 * array, a label out of range: why names the index); GF_EDATASET (root
 * is not a directory, named); GF_ENOMEM. On failure ds holds nothing. */
int gf__dataset_open_samples(gf__dataset *ds, const char *root, const char *const *paths,
                             const int32_t *labels, uint64_t n, char *why, size_t why_len);
/* Frees everything and closes root_fd; safe on a zeroed, failed or closed
 * struct (a zeroed struct's root_fd 0 is never closed: an open data set's
 * root_fd is always > 0). */
void gf__dataset_close(gf__dataset *ds);

/* on_shard_error resolved: 1 for SKIP, or FOLLOW under on_error = skip. */
static inline int gf__shard_skip_of(const gf_settings *s)
{
    return s->on_shard_error == GF_SHARD_SKIP ||
           (s->on_shard_error == GF_SHARD_FOLLOW && s->on_error == GF_ON_ERROR_SKIP);
}

/* Sample index's encoded bytes, read whole on the calling thread (a
 * malloc'd buffer the caller frees with gf_free), or an error code with why
 * naming the file and the reason (src/samples.c; gf_read_sample and
 * gf_index_read). */
int gf__dataset_read_sample(const gf__dataset *ds, uint64_t index, size_t max_bytes, void **data,
                            size_t *len, char *why, size_t why_len);
/* As gf__dataset_read_sample, but a shard sample's whole extent
 * (gf__dataset_extent: its members and their headers, each checked), for
 * gf_index_read_fields; a folder's or list's file as it is. */
int gf__dataset_read_extent(const gf__dataset *ds, uint64_t index, size_t max_bytes, void **data,
                            size_t *len, char *why, size_t why_len);

/* Shard sample i's n bytes read from gf__dataset_extent's range (p: its
 * header block, then the member; with text or bytes fields, every
 * member's header where the index puts it): 0 if each header announces
 * the member the index says (name, size, a regular file), else
 * GF_ECORRUPT with why = "SHARD: what disagreed" (dataset_shards.c);
 * with the image's CRC32C from its sidecar, its bytes too. Folders and
 * lists: 0. */
int gf__dataset_member_check(const gf__dataset *ds, uint64_t i, const uint8_t *p, size_t n,
                             char *why, size_t why_len);

/* Sample i's member of schema field f (one beyond image and label),
 * named as its image is: "shard.tar:KEY.ext", the extension as spelled
 * (dataset_shards.c). malloc'd; NULL out of memory or when i has no
 * such member (not a shard sample). */
char *gf__dataset_member_path(const gf__dataset *ds, uint64_t i, int f);

/* What sample i's file must still be (its shard as indexed), or NULL
 * for folders and lists (gf__dataset_file_seen). */
static inline const gf__file_id *gf__dataset_file_id(const gf__dataset *ds, uint64_t i)
{
    return ds->shard_ids && gf__dataset_member(ds, i) ? &ds->shard_ids[ds->shard[i]] : NULL;
}

/* Sample i's record to check its file by (folders and lists), or NULL. */
static inline gf__file_seen *gf__dataset_file_seen(const gf__dataset *ds, uint64_t i)
{
    return ds->seen && !gf__dataset_member(ds, i) ? &ds->seen[i] : NULL;
}

#endif
