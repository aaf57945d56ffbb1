/*
 * Dataset index: turns an ImageFolder tree (dataset_folder.c), a list file
 * (dataset_list.c) or WebDataset-style tar shards (dataset_shards.c) into
 * one compact table of (relative path, label); for shards also (shard,
 * data offset, size) per sample. This file: the table they build, what
 * they share, and the choice among them. Run once, at open, by the thread
 * that calls gf_open; the table is read-only afterwards.
 *
 * Memory is a few blocks whatever the size: one arena of NUL-terminated
 * relative paths back to back, one array of offsets into it and one array of
 * labels (plus, for ImageFolder, one block of class names), and for
 * folders and lists one gf__file_seen per sample (16 bytes: the file's
 * identity, checked at each read). There is no allocation per sample: a
 * million-line list costs path + 29 bytes a sample.
 */
#include "dataset_internal.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the table being built ---- */

void gf__builder_free(gf__builder *b)
{
    free(b->arena);
    free(b->off);
    free(b->labels);
    free(b->shard);
    free(b->doff);
    free(b->dlen);
    free(b->ino);
    memset(b, 0, sizeof *b);
}

int gf__builder_reserve_paths(gf__builder *b, size_t bytes)
{
    if (bytes > SIZE_MAX - b->arena_len)
        return GF_ENOMEM;
    return GF__GROW(&b->arena, &b->arena_cap, b->arena_len + bytes, 1 << 16);
}

static int resize(void **p, size_t bytes)
{
    void *q = realloc(*p, bytes ? bytes : 1);
    if (!q)
        return GF_ENOMEM;
    *p = q;
    return 0;
}

/* Every per-sample array holds at least cap entries; one that grew before
 * another failed is merely larger than cap. */
int gf__builder_reserve_samples(gf__builder *b, size_t more)
{
    if (more > SIZE_MAX - b->n)
        return GF_ENOMEM;
    size_t need = b->n + more;
    if (need <= b->cap)
        return 0;
    size_t c = gf__grow_cap(b->cap, need, 1024, sizeof(uint64_t));
    if (!c)
        return GF_ENOMEM;
    if (resize((void **)&b->off, c * sizeof *b->off) < 0 ||
        resize((void **)&b->labels, c * sizeof *b->labels) < 0)
        return GF_ENOMEM;
    if (b->with_ino && resize((void **)&b->ino, c * sizeof *b->ino) < 0)
        return GF_ENOMEM;
    if (b->ranged && (resize((void **)&b->shard, c * sizeof *b->shard) < 0 ||
                      resize((void **)&b->doff, c * sizeof *b->doff) < 0 ||
                      resize((void **)&b->dlen, c * sizeof *b->dlen) < 0))
        return GF_ENOMEM;
    b->cap = c;
    return 0;
}

void gf__builder_finish(gf__builder *b, gf__dataset *ds)
{
    assert(b->n <= b->cap && b->arena_len <= b->arena_cap);
    if (b->arena_len < b->arena_cap) {
        char *a = realloc(b->arena, b->arena_len ? b->arena_len : 1);
        if (a)
            b->arena = a;
    }
    if (b->n < b->cap) {
        uint64_t *o = realloc(b->off, b->n * sizeof *o);
        if (o)
            b->off = o;
        int32_t *l = realloc(b->labels, b->n * sizeof *l);
        if (l)
            b->labels = l;
        if (b->ranged) {
            (void)resize((void **)&b->shard, b->n * sizeof *b->shard);
            (void)resize((void **)&b->doff, b->n * sizeof *b->doff);
            (void)resize((void **)&b->dlen, b->n * sizeof *b->dlen);
        }
    }
    ds->n = b->n;
    ds->arena = b->arena;
    ds->path_off = b->off;
    ds->labels = b->labels;
    ds->bytes += b->arena_len + b->n * (sizeof *b->off + sizeof *b->labels);
    if (b->ranged) {
        ds->shard = b->shard;
        ds->data_off = b->doff;
        ds->data_len = b->dlen;
        ds->bytes += b->n * (sizeof *b->shard + sizeof *b->doff + sizeof *b->dlen);
    }
    memset(b, 0, sizeof *b);
}

int gf__dataset_seen_init(gf__dataset *ds, uint64_t *ino)
{
    ds->seen = calloc(ds->n ? ds->n : 1, sizeof *ds->seen);
    if (!ds->seen) {
        free(ino);
        return GF_ENOMEM;
    }
    for (uint64_t i = 0; ino && i < ds->n; i++)
        atomic_init(&ds->seen[i].ino, ino[i]);
    free(ino);
    ds->bytes += ds->n * sizeof *ds->seen;
    return 0;
}

int gf__keep_fd(int fd)
{
    if (fd == 0) {
        int hi = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        close(fd);
        return hi;
    }
    return fd;
}

/* ---- names, extensions ---- */

/* torchvision's IMG_EXTENSIONS first, then the rest of GF_EXT_ALL in
 * GF_SKIPPED_* order. */
static const char *const image_ext[] = {"jpg", "jpeg", "png", "ppm", "bmp", "pgm", "tif",
                                        "tiff", "webp", "gif", "tga", "psd", "pnm", "pbm"};
enum { N_TORCHVISION_EXT = 9, N_IMAGE_EXT = sizeof image_ext / sizeof image_ext[0] };

/* image_ext's index of ext[0, len), or -1. */
static int image_ext_index(const char *ext, size_t len)
{
    for (int i = 0; i < N_IMAGE_EXT; i++)
        if (strlen(image_ext[i]) == len && strncasecmp(image_ext[i], ext, len) == 0)
            return i;
    return -1;
}

int gf__is_image_suffix(const char *ext, size_t len)
{
    return image_ext_index(ext, len) >= 0;
}

int gf__folder_skip_kind(const char *ext, size_t len, gf_extensions which)
{
    int i = ext ? image_ext_index(ext, len) : -1;
    if (i < 0)
        return GF_SKIPPED_OTHER;
    return i < N_TORCHVISION_EXT || which == GF_EXT_ALL ? -1 : GF_SKIPPED_GIF + i - N_TORCHVISION_EXT;
}

int gf__names_add(gf__names *s, const char *name)
{
    size_t l = strlen(name) + 1;
    if (GF__GROW(&s->buf, &s->cap, s->len + l, 256) < 0 ||
        GF__GROW(&s->off, &s->ncap, s->n + 1, 16) < 0)
        return GF_ENOMEM;
    memcpy(s->buf + s->len, name, l);
    s->off[s->n++] = s->len;
    s->len += l;
    return 0;
}

void gf__names_free(gf__names *s)
{
    free(s->buf);
    free(s->off);
    memset(s, 0, sizeof *s);
}

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
    ds->root_fd = -1;
    if (why && why_len)
        why[0] = '\0';
    if (!source || !*source) {
        gf__why(why, why_len, "no data set given");
        return GF_EDATASET;
    }
    struct stat st;
    if (gf__dataset_is_shards(source) &&
        !(strpbrk(source, ",{") == NULL && stat(source, &st) == 0 && S_ISDIR(st.st_mode))) {
        int rc = gf__dataset_open_shards(ds, source, opts->shard_skip, why, why_len);
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
        rc = gf__dataset_open_folder(ds, source, opts, why, why_len);
    } else if (S_ISREG(st.st_mode)) {
        rc = gf__dataset_open_list(ds, source, fd, &st, why, why_len);
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
    free(ds->damage);
    free(ds->damage_text);
    if (ds->root_fd > 0)
        close(ds->root_fd);
    memset(ds, 0, sizeof *ds);
    ds->root_fd = -1;
}
