/* What the three indexers (dataset_list.c, dataset_folder.c,
 * dataset_shards.c) share with dataset.c: the growing table they fill, a
 * block of names, image extensions. Run by whichever thread opens the data
 * set (gf_open's caller); nothing here is shared between threads. */
#ifndef GF_DATASET_INTERNAL_H
#define GF_DATASET_INTERNAL_H

#include "dataset.h"

#include "grow.h"

#include <sys/stat.h>

/* Label limit: n_classes = max label + 1 must fit in an int. */
#define GF__LABEL_MAX (INT32_MAX - 1)

/* The table being built (geometric growth; offsets, never pointers, into
 * the arena so that a realloc moves nothing that is referenced). */
typedef struct gf__builder {
    char *arena;
    size_t arena_len, arena_cap;
    uint64_t *off;
    int32_t *labels;
    int with_ino;      /* ImageFolder: ino too (gf__file_seen.ino) */
    uint64_t *ino;
    int ranged;        /* tar shards: the three arrays below too */
    uint32_t *shard;
    uint64_t *doff;
    uint32_t *dlen;
    size_t n, cap;
} gf__builder;

void gf__builder_free(gf__builder *b);
/* Room for `bytes` more path bytes / `more` more samples; 0 or GF_ENOMEM. */
int gf__builder_reserve_paths(gf__builder *b, size_t bytes);
int gf__builder_reserve_samples(gf__builder *b, size_t more);
/* Shrinks the arrays to their contents and moves them into ds. */
void gf__builder_finish(gf__builder *b, gf__dataset *ds);
/* ds->seen for ds->n samples, ino from `ino` (NULL: all unknown), which
 * is freed; 0 or GF_ENOMEM. */
int gf__dataset_seen_init(gf__dataset *ds, uint64_t *ino);

/* A list of names in one block, for one directory's sub-directories, the
 * class names and the shard paths. */
typedef struct gf__names {
    char *buf;
    size_t len, cap;
    size_t *off;
    size_t n, ncap;
} gf__names;

int gf__names_add(gf__names *s, const char *name);
void gf__names_free(gf__names *s);

/* An fd of at least 1, so that a zeroed struct (root_fd 0) never owns one. */
int gf__keep_fd(int fd);

/* 1 if ext[0, len) (after the dot) is an image extension, any case: one
 * of GF_EXT_ALL's (tar shards take these). */
int gf__is_image_suffix(const char *ext, size_t len);
/* For an ImageFolder file named ext[0, len) after its last dot: -1 if
 * `which` takes it, else its GF_SKIPPED_* entry. */
int gf__folder_skip_kind(const char *ext, size_t len, gf_extensions which);

static inline int gf__is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* The three indexers; on failure ds may hold part of what they built
 * (gf__dataset_open closes it). */
int gf__dataset_open_list(gf__dataset *ds, const char *src, int fd, const struct stat *st,
                          char *why, size_t why_len);
int gf__dataset_open_folder(gf__dataset *ds, const char *src, const gf__dataset_opts *o,
                            char *why, size_t why_len);
/* 1 if src names tar shards (every comma-separated element ends in .tar). */
int gf__dataset_is_shards(const char *src);
int gf__dataset_open_shards(gf__dataset *ds, const char *src, int skip_damaged, char *why,
                            size_t why_len);

#endif
