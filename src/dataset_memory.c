/* Dataset index from samples the caller holds in memory (gf_open_samples):
 * n paths and labels, copied into the same table a list file builds, so
 * the reader, sample accessors and bad-sample reports see no difference.
 * Run once, at open, by the thread that calls gf_open_samples.
 *
 * Two passes over the arrays: the first checks every entry and sums the
 * path bytes, so the arena and arrays are allocated once at their size
 * and a bad entry is refused before anything is copied; the labels'
 * bound (gf__builder_label_past, as for lists and shards) is checked on
 * the copied table. */
#include "dataset_indexers.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

int gf__dataset_open_memory(gf__dataset *ds, const char *root, const char *const *paths,
                            const int32_t *labels, uint64_t n, char *why, size_t why_len)
{
    if (n == 0) {
        gf__why(why, why_len, "samples: none given (n = 0)");
        return GF_EINVAL;
    }
    if (!paths || !labels) {
        gf__why(why, why_len, "samples: the %s array is NULL", !paths ? "paths" : "labels");
        return GF_EINVAL;
    }
    if (n > SIZE_MAX / sizeof(uint64_t)) {
        gf__why(why, why_len, "samples: %llu are more than this machine can index",
                (unsigned long long)n);
        return GF_EINVAL;
    }
    size_t bytes = 0;
    int32_t max_label = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (!paths[i]) {
            gf__why(why, why_len, "samples: path %llu is NULL", (unsigned long long)i);
            return GF_EINVAL;
        }
        if (labels[i] < 0 || labels[i] > GF__LABEL_MAX) {
            gf__why(why, why_len, "samples: label %llu is %ld: labels are 0 .. %d",
                    (unsigned long long)i, (long)labels[i], GF__LABEL_MAX);
            return GF_EINVAL;
        }
        size_t len = strlen(paths[i]) + 1;
        if (len > SIZE_MAX - bytes)
            return GF_ENOMEM;
        bytes += len;
        if (labels[i] > max_label)
            max_label = labels[i];
    }

    gf__builder b = {0};
    if (gf__builder_reserve_paths(&b, bytes) < 0 ||
        gf__builder_reserve_samples(&b, (size_t)n) < 0) {
        gf__builder_free(&b);
        return GF_ENOMEM;
    }
    for (uint64_t i = 0; i < n; i++) {
        size_t len = strlen(paths[i]) + 1;
        memcpy(b.arena + b.arena_len, paths[i], len);
        b.off[b.n] = b.arena_len;
        b.labels[b.n] = labels[i];
        b.n++;
        b.arena_len += len;
    }
    char past[160];
    size_t at = gf__builder_label_past(&b, past, sizeof past);
    if (at < b.n) {
        gf__why(why, why_len, "samples: sample %zu: %s", at, past);
        gf__builder_free(&b);
        return GF_EINVAL;
    }
    ds->n_classes = max_label + 1;
    gf__builder_finish(&b, ds);
    /* As for lists: each file's identity is recorded at its first read. */
    if (gf__dataset_seen_init(ds, NULL) < 0)
        return GF_ENOMEM;

    /* Relative paths are relative to root, or to the current directory
     * at open time (a later chdir does not move them); absolute ones
     * ignore it (openat). */
    const char *dir = root && *root ? root : ".";
    int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    ds->root_fd = dfd < 0 ? -1 : gf__keep_fd(dfd);
    if (ds->root_fd < 0) {
        gf__why_path(why, why_len, dir, "cannot open it as the samples' root directory: %s",
                     strerror(errno));
        return GF_EDATASET;
    }
    return 0;
}
