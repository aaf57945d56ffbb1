/* A folder `gpufeed prepare` wrote, named as data: OUT holds manifest.json
 * beside NAME-000000.tar..NAME-NNNNNN.tar and no sub-directory, and reads
 * as the pattern OUT/NAME-{000000..NNNNNN}.tar. The manifest is not read
 * here (`gpufeed verify` checks a set against it): the folder's names say
 * which shards there are, and the shards' own checks apply as for any
 * pattern. */
#include "dataset_indexers.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { DIGITS = 6 };

static int is_dir(int dfd, const struct dirent *e)
{
    struct stat st;
    if (e->d_type != DT_UNKNOWN)
        return e->d_type == DT_DIR;
    return fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

/* NAME-DDDDDD.tar: the length of NAME and the number, else -1. */
static long shard_number(const char *n, size_t *prefix_len)
{
    size_t len = strlen(n);
    if (len < DIGITS + 6 || strcmp(n + len - 4, ".tar") != 0 || n[len - DIGITS - 5] != '-')
        return -1;
    long v = 0;
    for (const char *d = n + len - DIGITS - 4; d < n + len - 4; d++) {
        if (*d < '0' || *d > '9')
            return -1;
        v = v * 10 + (*d - '0');
    }
    *prefix_len = len - DIGITS - 5;
    return v;
}

int gf__prepared_pattern(const char *dir, char **pattern, char *why, size_t why_len)
{
    *pattern = NULL;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return 0; /* the folder indexer says why */
    struct stat st;
    DIR *d = NULL;
    if (fstatat(fd, "manifest.json", &st, 0) != 0 || !S_ISREG(st.st_mode) ||
        !(d = fdopendir(fd))) {
        close(fd);
        return 0;
    }
    char prefix[NAME_MAX + 1] = ""; /* a name's part: always fits */
    long last = -1;
    size_t count = 0;
    int subdirs = 0, mixed = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        if (is_dir(dirfd(d), e)) {
            subdirs++;
            continue;
        }
        size_t pl;
        long v = shard_number(e->d_name, &pl);
        if (v < 0)
            continue;
        if (count == 0) {
            memcpy(prefix, e->d_name, pl);
            prefix[pl] = '\0';
        } else if (pl != strlen(prefix) || memcmp(prefix, e->d_name, pl) != 0) {
            mixed = 1;
        }
        count++;
        last = v > last ? v : last;
    }
    closedir(d);
    if (subdirs || count == 0)
        return 0; /* an ImageFolder (a manifest.json of its own), or nothing */
    if (mixed || count != (size_t)last + 1) {
        gf__why_path(why, why_len, dir,
                     "has a manifest.json but not one run of shards %s-000000.tar.."
                     "%s-%06ld.tar (%zu *-NNNNNN.tar files): give the shards' pattern",
                     prefix, prefix, last, count);
        return GF_EDATASET;
    }
    if (strpbrk(dir, ",{}") || strpbrk(prefix, ",{}")) {
        gf__why_path(why, why_len, dir,
                     "a prepared set, but ',', '{' or '}' in its path would be read as a "
                     "pattern: give the shards' pattern, or rename");
        return GF_EDATASET;
    }
    size_t dl = strlen(dir);
    const char *slash = dl && dir[dl - 1] == '/' ? "" : "/";
    size_t n = dl + strlen(prefix) + 32;
    if (!(*pattern = malloc(n)))
        return GF_ENOMEM;
    snprintf(*pattern, n, "%s%s%s-{%0*d..%0*ld}.tar", dir, slash, prefix, DIGITS, 0, DIGITS,
             last);
    return 1;
}
