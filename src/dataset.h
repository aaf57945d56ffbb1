/* Dataset index: a compact table of (relative path, label). */
#ifndef GF_DATASET_H
#define GF_DATASET_H

#include "common.h"

typedef struct gf__dataset {
    uint64_t n;          /* samples */
    int root_fd;         /* directory the paths are relative to (O_PATH) */
    char *arena;         /* NUL-terminated relative paths, back to back */
    uint64_t *path_off;  /* n offsets into arena */
    int32_t *labels;     /* n labels */
    int n_classes;
    char **class_names;  /* n_classes names (ImageFolder), or NULL */
    size_t bytes;        /* heap bytes held, for stats */
} gf__dataset;

/* source is a directory (ImageFolder: label = index of the sub-folder in
 * sorted order, files sorted within; hidden entries skipped) or a regular
 * file (list: "relative/path label" per line, paths relative to the list
 * file's directory, '#' comments and blank lines skipped).
 *
 * ImageFolder: classes are the root's non-hidden sub-directories in byte
 * order (an empty one still takes its label); each class's image files
 * (extension checked case-insensitively) are found recursively, following
 * symlinks but not loops, in torchvision's order: by directory path, then
 * file name. Files in the root are ignored. class_names holds the names.
 * List: the label is the last whitespace-separated token (decimal, 0 ..
 * 2147483646), the path everything before it, so paths may hold spaces;
 * leading/trailing whitespace and CR are ignored. n_classes = max label + 1,
 * class_names NULL. A bad line fails with why = "list.txt:17: ...".
 *
 * Paths are relative to root_fd (O_PATH). On failure ds holds nothing and
 * root_fd is -1. Returns 0, or GF_EDATASET / GF_ENOMEM with why naming the
 * file and reason. */
int gf__dataset_open(gf__dataset *ds, const char *source, char *why, size_t why_len);
/* Frees everything and closes root_fd; safe on a zeroed, failed or closed
 * struct (a zeroed struct's root_fd 0 is never closed: an open data set's
 * root_fd is always > 0). */
void gf__dataset_close(gf__dataset *ds);

static inline const char *gf__dataset_path(const gf__dataset *ds, uint64_t i)
{
    return ds->arena + ds->path_off[i];
}

#endif
