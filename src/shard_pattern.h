/* Shard patterns (shard_pattern.c): a leaf below dataset.c, the local
 * indexer, remote_url.c and shard_index.c; string work only, on the
 * caller's thread. */
#ifndef GF_SHARD_PATTERN_H
#define GF_SHARD_PATTERN_H

#include "dataset_builder.h" /* gf__names */

/* 1 if src names tar shards (every comma-separated element ends in .tar). */
int gf__dataset_is_shards(const char *src);
/* src's comma-separated elements, each with its
 * {FIRST..LAST} ranges expanded, appended to out in order (local paths
 * and remote_url.c's URLs alike). At most 2^20 names of 64 MiB in all:
 * past that, or a bad range, GF_EDATASET with why = "src: reason";
 * GF_ENOMEM. Nothing else is checked (not the .tar suffix). */
int gf__shards_expand(const char *src, gf__names *out, char *why, size_t why_len);
/* 1 if name[0, n) ends in a gzip'd tar's suffix (webdataset reads those). */
int gf__shard_gzip_suffix(const char *name, size_t n);

#endif
