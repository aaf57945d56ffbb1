/* Dataset index from an ImageFolder tree: label = index of the class
 * sub-directory in sorted order, files found recursively. Run once, at
 * open, by the thread that calls gf_open.
 *
 * Follows torchvision's ImageFolder/make_dataset so that sample indices
 * agree with a PyTorch run on the same tree: classes are the
 * sub-directories of the root sorted by name (byte order), a class's files
 * are found with os.walk(followlinks=True) and ordered as sorted(os.walk())
 * then sorted(fnames) do, i.e. by (directory path, file name), with
 * torchvision's extensions by default (opts->extensions; files left out
 * are counted per extension in ds->skipped_ext). Hidden entries are taken
 * as torchvision takes them (a ".ipynb_checkpoints" beside the classes is
 * a class), and a class folder that links to another directory is walked
 * as that directory.
 * Differences, on purpose, under opts->folder_walk GPUFEED (the default),
 * each left-out entry named (gf_skipped_entry) and warned of
 * (ds->warning): macOS's AppleDouble "._x.jpg" (metadata, no image) is
 * left out; a link inside a class to a directory outside that class folder
 * (the root, another class, anywhere else: os.walk would relabel or loop)
 * is not walked; within a class each directory (by device and inode) is
 * walked once: a symlink loop is not followed, and a second link to a
 * directory already walked adds nothing (os.walk would list its files
 * again, so that 30 levels of two links each would make 2^30 samples of
 * one file). Also a directory named like an image file is a (bad) sample
 * as well as walked.
 * Under TORCHVISION (the setting that matches torchvision) none of those:
 * AppleDouble files are samples (bad ones, as PIL fails on them), links
 * out of a class are walked under its label, a second link is walked
 * again, a directory is never a sample; only a link back to a directory on
 * the walk's own path (a loop, class/up -> ..; found by resolved path,
 * and by inode on entry for what does not resolve) is not followed and is
 * named (GF__SKIP_LOOP): os.walk goes round it until the kernel's ELOOP,
 * which no setting can match. The entry cap (below) bounds what second
 * links multiply.
 * In both a class folder that is the root or above it (a loop by itself)
 * is not walked, and keeps its label, named; a directory that cannot be
 * read is an error instead of silently dropped, and a class with no image
 * keeps its label (torchvision refuses the tree).
 * In either mode the walk is capped at GF_FOLDER_MAX_DEPTH levels below a
 * class and GF_FOLDER_MAX_ENTRIES entries (gpufeed.h): GF_EDATASET naming the
 * directory where it stopped. FIFOs, sockets, devices and
 * links that lead nowhere are samples, as in torchvision, that fail when
 * read (GF_EIO, "not a regular file: a FIFO"): never silently dropped.
 *
 * Each file's inode comes from readdir's d_ino (free; a link's target's
 * from the stat that resolves it), so a file replaced (mv) after indexing
 * is an error when read (gf__file_seen). Where d_ino is not st_ino (some
 * overlay set-ups), checked on one file a directory, that directory's
 * inodes are left to the first read to record. */
#include "dataset_indexers.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

/* -1 if the folder takes the file `name`, else its GF_SKIPPED_* entry. */
static int skip_kind(const char *name, size_t len, gf_extensions which)
{
    const char *dot = memrchr(name, '.', len);
    return dot ? gf__folder_skip_kind(dot + 1, len - (size_t)(dot - name) - 1, which)
               : GF_SKIPPED_OTHER;
}

const char *gf__skip_reason(int kind)
{
    switch (kind) {
    case GF__SKIP_APPLEDOUBLE:
        return "a macOS AppleDouble file (metadata named like an image, no image): left out";
    case GF__SKIP_DIR_AGAIN:
        return "a directory reached again through a link (a loop, or a second link): walked "
               "once";
    case GF__SKIP_LINK_OUT:
        return "a link to a directory outside its class folder (the root, another class or "
               "elsewhere): not walked, unlike torchvision";
    case GF__SKIP_LOOP: /* under 150 bytes: ds->warning's room for it */
        return "a link back into its own walk (a loop): not walked; torchvision follows it "
               "round until ELOOP, which no setting matches";
    default:
        return "a class folder that is the data set's root or above it: not walked, its label "
               "kept without samples";
    }
}

static int cmp_names(const void *x, const void *y, void *ctx)
{
    const char *buf = ctx;
    return strcmp(buf + *(const size_t *)x, buf + *(const size_t *)y);
}

/* By name, a leading '/' (a link out of the class, not walked) aside. */
static int cmp_subdirs(const void *x, const void *y, void *ctx)
{
    const char *p = (const char *)ctx + *(const size_t *)x;
    const char *q = (const char *)ctx + *(const size_t *)y;
    return strcmp(p + (*p == '/'), q + (*q == '/'));
}

/* Order of os.walk roots then file names: compare the directory parts as
 * whole strings ("c/a-b" < "c/a/b", as Python sorts them), then the names. */
static int cmp_walk_order(const void *x, const void *y, void *ctx)
{
    const char *arena = ctx;
    const char *p = arena + *(const uint64_t *)x;
    const char *q = arena + *(const uint64_t *)y;
    const char *ps = strrchr(p, '/'), *qs = strrchr(q, '/');
    size_t pl = (size_t)(ps - p), ql = (size_t)(qs - q);
    int c = memcmp(p, q, pl < ql ? pl : ql);
    if (c)
        return c;
    if (pl != ql)
        return pl < ql ? -1 : 1;
    return strcmp(ps + 1, qs + 1);
}

/* Sorts samples [first, b->n) in walk order, their inodes with them. */
static int sort_class(gf__builder *b, size_t first)
{
    size_t n = b->n - first;
    uint64_t(*pair)[2] = malloc(n * sizeof *pair);
    if (!pair)
        return GF_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        pair[i][0] = b->off[first + i];
        pair[i][1] = b->ino[first + i];
    }
    qsort_r(pair, n, sizeof *pair, cmp_walk_order, b->arena); /* by pair[i][0] */
    for (size_t i = 0; i < n; i++) {
        b->off[first + i] = pair[i][0];
        b->ino[first + i] = pair[i][1];
    }
    free(pair);
    return 0;
}

/* Directories walked, by (st_dev, st_ino): open addressing, grown at half
 * full; ino 0 marks a free slot (no directory has inode 0). */
typedef struct dir_id {
    dev_t dev;
    ino_t ino;
} dir_id;

typedef struct dir_set {
    dir_id *v;
    size_t cap, n; /* cap: a power of two, or 0 */
} dir_set;

/* folder_walk TORCHVISION: a directory on the path being walked. */
typedef struct path_dir {
    dev_t dev;
    ino_t ino;
    size_t real; /* its resolved path's offset in walk.reals */
} path_dir;

static size_t dir_slot(const dir_set *set, dev_t dev, ino_t ino)
{
    uint64_t h = ((uint64_t)ino ^ ((uint64_t)dev << 32)) * 0x9e3779b97f4a7c15ull;
    size_t i = (size_t)(h >> 17) & (set->cap - 1);
    while (set->v[i].ino && !(set->v[i].ino == ino && set->v[i].dev == dev))
        i = (i + 1) & (set->cap - 1);
    return i;
}

/* 1 if (dev, ino) was added, 0 if it was there already, or GF_ENOMEM. */
static int dir_set_add(dir_set *set, dev_t dev, ino_t ino)
{
    if (set->cap && set->v[dir_slot(set, dev, ino)].ino)
        return 0;
    if (2 * (set->n + 1) > set->cap) {
        dir_set bigger = {calloc(set->cap ? 2 * set->cap : 64, sizeof(dir_id)),
                          set->cap ? 2 * set->cap : 64, set->n};
        if (!bigger.v)
            return GF_ENOMEM;
        for (size_t i = 0; i < set->cap; i++)
            if (set->v[i].ino)
                bigger.v[dir_slot(&bigger, set->v[i].dev, set->v[i].ino)] = set->v[i];
        free(set->v);
        *set = bigger;
    }
    set->v[dir_slot(set, dev, ino)] = (dir_id){dev, ino};
    set->n++;
    return 1;
}

typedef struct walk {
    gf__builder *b;
    gf__dataset *ds;
    const gf__dataset_opts *o;
    int root_fd;
    int32_t label;
    const char *src;
    char *why;
    size_t why_len;
    dir_set seen;        /* GPUFEED: every directory walked so far in this class */
    int tv;              /* o->folder_walk is GF_FOLDER_WALK_TORCHVISION */
    /* TORCHVISION: the directories on the path being walked, by depth (the
     * class folder first), and their resolved paths back to back, each
     * NUL-terminated ("" where it did not resolve): what a loop leads back
     * to, told from a second link, which os.walk walks again. */
    path_dir *on_path;   /* o->max_depth + 1 */
    char *reals;
    size_t reals_len, reals_cap;
    char class_real[PATH_MAX]; /* the class folder, resolved ("" if not) */
    uint64_t entries;    /* entries read so far, for o->max_entries */
    char path[PATH_MAX]; /* relative path of the directory being read */
} walk;

enum { KIND_FILE, KIND_DIR };

/* Resolves DT_UNKNOWN and symlinks by stat (following links, as os.walk
 * with followlinks=True does). Whatever is not a directory counts as a
 * file: a dangling link or a link loop, as in torchvision, and also a FIFO,
 * socket or device, which torchvision would hand to PIL. Each is then a bad
 * sample that the reader names ("not a regular file: a FIFO"; it opens
 * with O_NONBLOCK and fstats before reading, so none blocks), not an entry
 * that vanishes from the count; indices still match torchvision's. */
static int entry_kind(int dfd, const struct dirent *d, uint64_t *ino)
{
    unsigned char t = d->d_type;
    *ino = (uint64_t)d->d_ino;
    if (t == DT_UNKNOWN || t == DT_LNK) {
        struct stat st;
        if (fstatat(dfd, d->d_name, &st, 0) != 0) {
            *ino = 0;
            return KIND_FILE;
        }
        *ino = (uint64_t)st.st_ino;
        return S_ISDIR(st.st_mode) ? KIND_DIR : KIND_FILE;
    }
    return t == DT_DIR ? KIND_DIR : KIND_FILE;
}

/* 1 if readdir's d_ino is the file's st_ino (checked once a directory). */
static int d_ino_is_st_ino(int dfd, const struct dirent *d)
{
    struct stat st;
    return fstatat(dfd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
           (uint64_t)st.st_ino == (uint64_t)d->d_ino;
}

/* "src/path[/name]: strerror(err)" into w->why, the reason kept whole. */
static GF__COLD void walk_why(const walk *w, const char *name, int err)
{
    char p[2 * PATH_MAX + 2];
    snprintf(p, sizeof p, "%s/%s%s%s", w->src, w->path, name ? "/" : "", name ? name : "");
    gf__why_path(w->why, w->why_len, p, "%s", strerror(err));
}

/* Counts and, while there is room, names an entry left out for what it is
 * (gf_skipped_entry, GF__SKIP_* kind): w->path, plus /name when name is
 * not NULL. Each is a warning; the first is described in ds->warning. */
static void note_skipped(walk *w, const char *name, int kind)
{
    gf__dataset *ds = w->ds;
    char full[2 * PATH_MAX + 2];
    snprintf(full, sizeof full, "%s%s%s", w->path, name ? "/" : "", name ? name : "");
    if (ds->n_named_skips < GF_SKIPPED_NAMED_MAX) {
        gf__fit_path(ds->named_skips[ds->n_named_skips].path, sizeof ds->named_skips[0].path,
                     full);
        ds->named_skips[ds->n_named_skips].kind = kind;
    }
    if (!ds->warning[0])
        snprintf(ds->warning, sizeof ds->warning, "%.100s: %.150s", full, gf__skip_reason(kind));
    ds->n_named_skips++;
    ds->warnings++;
}

/* 1 if the entry is a symbolic link (to be resolved before walking). */
static int is_link(int dfd, const struct dirent *d)
{
    struct stat st;
    if (d->d_type != DT_UNKNOWN)
        return d->d_type == DT_LNK;
    return fstatat(dfd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
}

/* 1 if the directory that link w->path/name leads to lies inside the
 * class folder being walked, by resolved path: else walking it would
 * give another class's files (or the root's, or anyone's) this label. */
static int link_stays_in_class(const walk *w, const char *name)
{
    char p[2 * PATH_MAX + 2], real[PATH_MAX];
    size_t cl = strlen(w->class_real);
    if (snprintf(p, sizeof p, "%s/%s/%s", w->src, w->path, name) >= (int)sizeof p || !cl ||
        !realpath(p, real))
        return 0;
    /* The class folder itself is a loop, which the walk stops as such. */
    return cl == 1 || (strncmp(real, w->class_real, cl) == 0 && (real[cl] == '/' || !real[cl]));
}

/* TORCHVISION: 1 if link w->path/name leads to a directory on the walk's
 * path or above one (class/up -> ..), by resolved path: os.walk would go
 * round it until the kernel's ELOOP. 0 if not, or if it does not resolve
 * (then first_visit's check by inode stops a loop on entry). */
static int link_loops(const walk *w, const char *name)
{
    char p[2 * PATH_MAX + 2], real[PATH_MAX];
    if (snprintf(p, sizeof p, "%s/%s/%s", w->src, w->path, name) >= (int)sizeof p ||
        !realpath(p, real))
        return 0;
    size_t rl = strlen(real);
    for (const char *r = w->reals; r < w->reals + w->reals_len; r += strlen(r) + 1)
        if (*r && (rl == 1 || (strncmp(r, real, rl) == 0 && (r[rl] == '/' || !r[rl]))))
            return 1;
    return 0;
}

/* TORCHVISION: records directory w->path (length plen), just opened, as
 * on the walk's path at depth: its resolved path is its parent's plus its
 * name, or resolved anew where it is a link (or the class folder). */
static int push_on_path(walk *w, size_t plen, int depth, const struct stat *st)
{
    char buf[PATH_MAX] = "";
    const char *real = buf;
    struct stat lst;
    if (depth == 0) {
        real = w->class_real;
    } else if (fstatat(w->root_fd, w->path, &lst, AT_SYMLINK_NOFOLLOW) == 0 &&
               S_ISLNK(lst.st_mode)) {
        char p[2 * PATH_MAX + 2];
        if (snprintf(p, sizeof p, "%s/%s", w->src, w->path) >= (int)sizeof p || !realpath(p, buf))
            buf[0] = '\0';
    } else {
        const char *parent = w->reals + w->on_path[depth - 1].real;
        const char *name = memrchr(w->path, '/', plen) + 1;
        if (*parent && snprintf(buf, sizeof buf, "%s/%s", strcmp(parent, "/") ? parent : "",
                                name) >= (int)sizeof buf)
            buf[0] = '\0';
    }
    size_t rl = strlen(real) + 1;
    if (GF__GROW(&w->reals, &w->reals_cap, w->reals_len + rl, 256) < 0)
        return GF_ENOMEM;
    memcpy(w->reals + w->reals_len, real, rl);
    w->on_path[depth] = (path_dir){st->st_dev, st->st_ino, w->reals_len};
    w->reals_len += rl;
    return 0;
}

/* 1 if directory w->path, just opened (st), is to be walked, 0 if not
 * (named), or GF_ENOMEM. GPUFEED: the first time in its class.
 * TORCHVISION: unless it is on the walk's path already (a loop that its
 * link's resolved path did not show: a bind mount, or a link that did not
 * resolve); then it is recorded there. */
static int first_visit(walk *w, size_t plen, int depth, const struct stat *st)
{
    if (w->tv) {
        for (int i = 0; i < depth && st->st_ino; i++)
            if (w->on_path[i].ino == st->st_ino && w->on_path[i].dev == st->st_dev) {
                w->ds->dirs_again++;
                note_skipped(w, NULL, GF__SKIP_LOOP);
                return 0;
            }
        int rc = push_on_path(w, plen, depth, st);
        return rc < 0 ? rc : 1;
    }
    int added = st->st_ino ? dir_set_add(&w->seen, st->st_dev, st->st_ino) : 1;
    if (added == 0) { /* a loop, or a second link to a directory walked */
        w->ds->dirs_again++;
        note_skipped(w, NULL, GF__SKIP_DIR_AGAIN);
    }
    return added;
}

/* Reads directory w->path (length plen): appends its image files, then
 * descends into its sub-directories (after closing it, so that the number
 * of open descriptors does not grow with depth). */
static int walk_dir(walk *w, size_t plen, int depth)
{
    int fd = openat(w->root_fd, w->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        walk_why(w, NULL, errno);
        return GF_EDATASET;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        walk_why(w, NULL, errno);
        close(fd);
        return GF_EDATASET;
    }
    size_t reals_len = w->reals_len; /* TORCHVISION: its path's, popped on return */
    int added = first_visit(w, plen, depth, &st);
    if (added <= 0) {
        close(fd);
        return added;
    }
    w->ds->dirs++;
    DIR *dir = fdopendir(fd);
    if (!dir) {
        walk_why(w, NULL, errno);
        close(fd);
        return GF_EDATASET;
    }
    gf__names subdirs = {0};
    size_t left_out = 0; /* of subdirs: links not walked, marked '/' */
    int rc = 0, d_ino_ok = -1; /* -1: not checked yet */
    for (;;) {
        errno = 0;
        struct dirent *d = readdir(dir);
        if (!d) {
            if (errno) {
                walk_why(w, NULL, errno);
                rc = GF_EDATASET;
            }
            break;
        }
        if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
            continue;
        size_t nl = strlen(d->d_name);
        if (!w->tv && d->d_name[0] == '.' && d->d_name[1] == '_' &&
            skip_kind(d->d_name + 2, nl - 2, w->o->extensions) < 0) {
            w->ds->skipped_ext[GF_SKIPPED_APPLEDOUBLE]++; /* "._x.jpg": macOS's */
            note_skipped(w, d->d_name, GF__SKIP_APPLEDOUBLE);
            continue;
        }
        if (++w->entries > w->o->max_entries) {
            gf__why(w->why, w->why_len,
                    "%s/%s: the tree has over %llu entries; indexing stopped here",
                    w->src, w->path, (unsigned long long)w->o->max_entries);
            rc = GF_EDATASET;
            break;
        }
        uint64_t ino;
        int kind = entry_kind(dirfd(dir), d, &ino);
        if (kind == KIND_DIR && is_link(dirfd(dir), d) &&
            (w->tv ? link_loops(w, d->d_name) : !link_stays_in_class(w, d->d_name))) {
            /* Named with the sub-directories, in name order: marked '/'. */
            char marked[sizeof d->d_name + 1] = "/";
            memcpy(marked + 1, d->d_name, nl + 1);
            if ((rc = gf__names_add(&subdirs, marked)) < 0)
                break;
            left_out++;
            continue;
        }
        if (d->d_type == DT_REG) {
            if (d_ino_ok < 0)
                d_ino_ok = d_ino_is_st_ino(dirfd(dir), d);
            if (!d_ino_ok)
                ino = 0; /* the first read records it */
        }
        if (kind == KIND_DIR && (rc = gf__names_add(&subdirs, d->d_name)) < 0)
            break;
        /* A directory named like an image (x.jpg/) is walked and is also a
         * sample, which fails as "not a regular file: a directory": a user
         * who meant a file learns of it, one who did not loses nothing
         * (but the indices after it then differ from torchvision's, which
         * TORCHVISION keeps: there it is no sample). */
        int skip = skip_kind(d->d_name, nl, w->o->extensions);
        if (skip >= 0 && kind != KIND_DIR)
            w->ds->skipped_ext[skip]++;
        if (skip < 0 && !(w->tv && kind == KIND_DIR)) {
            gf__builder *b = w->b;
            if ((rc = gf__builder_reserve_paths(b, plen + 1 + nl + 1)) < 0 ||
                (rc = gf__builder_reserve_samples(b, 1)) < 0)
                break;
            char *p = b->arena + b->arena_len;
            memcpy(p, w->path, plen);
            p[plen] = '/';
            memcpy(p + plen + 1, d->d_name, nl + 1);
            b->off[b->n] = b->arena_len;
            b->labels[b->n] = w->label;
            b->ino[b->n] = ino;
            b->n++;
            b->arena_len += plen + 1 + nl + 1;
        }
    }
    closedir(dir);
    if (rc == 0 && subdirs.n > left_out && depth >= w->o->max_depth) {
        gf__why(w->why, w->why_len,
                "%s/%s: sub-directories over %d levels below the class; indexing stopped here",
                w->src, w->path, w->o->max_depth);
        rc = GF_EDATASET;
    }
    /* In name order, so that which link to a directory is walked (the
     * first) does not depend on readdir's order. */
    if (subdirs.n > 1) /* none: off is NULL, which qsort_r must not get */
        qsort_r(subdirs.off, subdirs.n, sizeof *subdirs.off, cmp_subdirs, subdirs.buf);
    for (size_t i = 0; rc == 0 && i < subdirs.n; i++) {
        const char *name = subdirs.buf + subdirs.off[i];
        if (name[0] == '/') {
            w->ds->dirs_again += w->tv; /* a loop's directory is on the walk */
            note_skipped(w, name + 1, w->tv ? GF__SKIP_LOOP : GF__SKIP_LINK_OUT);
            continue;
        }
        size_t nl = strlen(name);
        if (plen + 1 + nl >= sizeof w->path) {
            walk_why(w, name, ENAMETOOLONG);
            rc = GF_EDATASET;
            break;
        }
        w->path[plen] = '/';
        memcpy(w->path + plen + 1, name, nl + 1);
        rc = walk_dir(w, plen + 1 + nl, depth + 1);
        w->path[plen] = '\0';
    }
    gf__names_free(&subdirs);
    w->reals_len = reals_len;
    return rc;
}

int gf__dataset_open_folder(gf__dataset *ds, const char *src, const gf__dataset_opts *o,
                            char *why, size_t why_len)
{
    int dfd = open(src, O_PATH | O_DIRECTORY | O_CLOEXEC);
    ds->root_fd = dfd < 0 ? -1 : gf__keep_fd(dfd);
    if (ds->root_fd < 0) {
        gf__why_path(why, why_len, src, "%s", strerror(errno));
        return GF_EDATASET;
    }
    int fd = openat(ds->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *dir = fd < 0 ? NULL : fdopendir(fd);
    if (!dir) {
        gf__why_path(why, why_len, src, "%s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return GF_EDATASET;
    }
    /* Classes: the root's sub-directories, hidden ones too, and links to
     * directories, as torchvision's find_classes (files in the root are
     * ignored). */
    gf__names classes = {0};
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *d = readdir(dir);
        if (!d) {
            if (errno) {
                gf__why_path(why, why_len, src, "%s", strerror(errno));
                rc = GF_EDATASET;
            }
            break;
        }
        uint64_t ino;
        if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, "..") ||
            entry_kind(dirfd(dir), d, &ino) != KIND_DIR)
            continue;
        if ((rc = gf__names_add(&classes, d->d_name)) < 0)
            break;
    }
    closedir(dir);
    if (rc == 0 && classes.n == 0) {
        gf__why_path(why, why_len, src, "no class sub-directories");
        rc = GF_EDATASET;
    }
    if (rc == 0 && classes.n > (size_t)INT32_MAX) {
        gf__why_path(why, why_len, src, "too many classes");
        rc = GF_EDATASET;
    }
    if (rc < 0) {
        gf__names_free(&classes);
        return rc;
    }
    qsort_r(classes.off, classes.n, sizeof *classes.off, cmp_names, classes.buf);

    /* class_names: the pointer array and the strings in one block. */
    size_t names_bytes = classes.n * sizeof(char *) + classes.len;
    char **cn = malloc(names_bytes);
    if (!cn) {
        gf__names_free(&classes);
        return GF_ENOMEM;
    }
    char *strs = (char *)(cn + classes.n);
    memcpy(strs, classes.buf, classes.len);
    for (size_t k = 0; k < classes.n; k++)
        cn[k] = strs + classes.off[k];
    size_t n_classes = classes.n;
    gf__names_free(&classes);
    ds->class_names = cn;
    ds->bytes += names_bytes;

    gf__builder b = {.with_ino = 1};
    walk *w = calloc(1, sizeof *w);
    if (!w)
        return GF_ENOMEM;
    w->b = &b;
    w->ds = ds;
    w->o = o;
    w->root_fd = ds->root_fd;
    w->src = src;
    w->why = why;
    w->why_len = why_len;
    w->tv = o->folder_walk == GF_FOLDER_WALK_TORCHVISION;
    if (w->tv && !(w->on_path = calloc((size_t)o->max_depth + 1, sizeof *w->on_path))) {
        free(w);
        return GF_ENOMEM;
    }
    char root_real[PATH_MAX];
    if (!realpath(src, root_real))
        root_real[0] = '\0';
    for (size_t k = 0; k < n_classes; k++) {
        size_t nl = strlen(cn[k]);
        if (nl >= sizeof w->path) {
            gf__why(why, why_len, "%s/%s: %s", src, cn[k], strerror(ENAMETOOLONG));
            rc = GF_EDATASET;
            break;
        }
        memcpy(w->path, cn[k], nl + 1);
        w->label = (int32_t)k;
        w->reals_len = 0;
        if (w->seen.cap) /* loops and second links are per class, as each
                            class's os.walk is its own */
            memset(w->seen.v, 0, w->seen.cap * sizeof *w->seen.v);
        w->seen.n = 0;
        char p[2 * PATH_MAX + 2];
        snprintf(p, sizeof p, "%s/%s", src, cn[k]);
        if (!realpath(p, w->class_real))
            w->class_real[0] = '\0'; /* then walk_dir names why it cannot open it */
        size_t cl = strlen(w->class_real);
        if (cl && root_real[0] && strncmp(root_real, w->class_real, cl) == 0 &&
            (root_real[cl] == '\0' || root_real[cl] == '/' || cl == 1)) {
            note_skipped(w, NULL, GF__SKIP_CLASS_ROOT);
            continue;
        }
        size_t first = b.n;
        if ((rc = walk_dir(w, nl, 0)) < 0)
            break;
        if (b.n - first > 1 && (rc = sort_class(&b, first)) < 0)
            break;
    }
    free(w->seen.v);
    free(w->on_path);
    free(w->reals);
    free(w);
    if (rc == 0 && b.n == 0) {
        gf__why_path(why, why_len, src, "no image files in any class sub-directory");
        rc = GF_EDATASET;
    }
    if (rc < 0) {
        gf__builder_free(&b);
        return rc;
    }
    ds->n_classes = (int)n_classes;
    uint64_t *ino = b.ino;
    b.ino = NULL;
    gf__builder_finish(&b, ds);
    return gf__dataset_seen_init(ds, ino);
}
