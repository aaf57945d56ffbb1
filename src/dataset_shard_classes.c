/* A shard set's class names: classes.txt beside its first shard, one name
 * per line in label order (what gpufeed prepare writes, so a prepared
 * set's classes are its source's, names and count, as torchvision's
 * ImageFolder numbers them). Taken only when it names every label the
 * shards use; else ignored with the loader's warning, and the classes are
 * the labels as before. Run by the thread that opens the data set. */
#include "dataset_indexers.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A million classes of long names; more is no class list. */
#define CLASSES_MAX_BYTES ((size_t)64 << 20)

static char *classes_path(const char *shard)
{
    const char *slash = strrchr(shard, '/');
    size_t dir = slash ? (size_t)(slash - shard) + 1 : 0;
    char *p = malloc(dir + sizeof "classes.txt");
    if (p) {
        memcpy(p, shard, dir);
        memcpy(p + dir, "classes.txt", sizeof "classes.txt");
    }
    return p;
}

/* The file's bytes (NUL added), or NULL with *absent set when there is none. */
static char *read_all(int root_fd, const char *path, size_t *len, int *absent, char *why,
                      size_t why_len)
{
    *absent = 0;
    int fd = openat(root_fd, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        *absent = errno == ENOENT;
        gf__why(why, why_len, "%s", strerror(errno));
        return NULL;
    }
    struct stat st;
    char *buf = NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        gf__why(why, why_len, "not a regular file");
    } else if ((uint64_t)st.st_size > CLASSES_MAX_BYTES) {
        gf__why(why, why_len, "over %zu bytes", CLASSES_MAX_BYTES);
    } else if ((buf = malloc((size_t)st.st_size + 1))) {
        size_t got = 0, want = (size_t)st.st_size;
        ssize_t r = 1;
        while (got < want && (r = pread(fd, buf + got, want - got, (off_t)got)) > 0)
            got += (size_t)r;
        if (got < want) {
            gf__why(why, why_len, "%s", r < 0 ? strerror(errno) : "shorter than its size");
            free(buf);
            buf = NULL;
        } else {
            buf[got] = '\0';
            *len = got;
        }
    } else {
        gf__why(why, why_len, "out of memory");
    }
    close(fd);
    return buf;
}

int gf__shard_classes_read(gf__dataset *ds, const char *first_shard, char *why, size_t why_len)
{
    char *path = classes_path(first_shard);
    if (!path)
        return GF_ENOMEM;
    size_t len = 0;
    int absent;
    char *text = read_all(ds->root_fd, path, &len, &absent, why, why_len);
    if (!text) {
        int rc = absent ? 1 : 2;
        if (rc == 2) {
            char reason[160];
            snprintf(reason, sizeof reason, "%s", why);
            gf__why(why, why_len, "%s: %s", path, reason);
        }
        free(path);
        return rc;
    }
    /* Lines end in \n (a CR before it is dropped); the last may lack it. */
    size_t n = 0;
    const char *bad = NULL;
    for (size_t i = 0; i < len && !bad;) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - text) : len;
        size_t stop = end > i && text[end - 1] == '\r' ? end - 1 : end;
        if (stop == i)
            bad = "an empty line";
        else if (memchr(text + i, '\0', stop - i))
            bad = "a NUL byte";
        text[stop] = '\0';
        n++;
        i = end + 1;
    }
    int rc = 0;
    if (!bad && (uint64_t)n < (uint64_t)ds->n_classes)
        bad = "fewer names than the shards' labels";
    if (!bad && n > (size_t)GF__LABEL_MAX + 1)
        bad = "more names than labels can number";
    if (bad) {
        gf__why(why, why_len, "%s: %s (%zu names, labels up to %d)", path, bad, n,
                ds->n_classes - 1);
        free(text);
        free(path);
        return 2;
    }
    /* The pointer array and the strings in one block, as a folder's. */
    char **names = malloc(n * sizeof *names + len + 1);
    if (!names) {
        rc = GF_ENOMEM;
    } else {
        char *strs = (char *)(names + n);
        memcpy(strs, text, len + 1);
        size_t k = 0;
        for (size_t i = 0; k < n; k++) {
            names[k] = strs + i;
            i += strlen(strs + i) + 1;
            if (i < len && strs[i] == '\n') /* after a dropped CR */
                i++;
        }
        ds->class_names = names;
        ds->n_classes = (int)n;
        ds->bytes += n * sizeof *names + len + 1;
    }
    free(text);
    free(path);
    return rc;
}
