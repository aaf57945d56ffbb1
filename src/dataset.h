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
 * Returns 0, or GF_EDATASET / GF_ENOMEM with why naming file and reason. */
int gf__dataset_open(gf__dataset *ds, const char *source, char *why, size_t why_len);
void gf__dataset_close(gf__dataset *ds);

static inline const char *gf__dataset_path(const gf__dataset *ds, uint64_t i)
{
    return ds->arena + ds->path_off[i];
}

#endif
