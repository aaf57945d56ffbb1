/*
 * The reader: whole-file reads, or reads of one byte range of a file (a
 * member of a tar shard), into grow-only buffers.
 *
 * Two backends share the open/size/limit checks and the buffer policy,
 * both here:
 *  - gf__read_file / gf__read_range: a blocking pread() loop, run on the
 *    decode threads (this file; thread-safe).
 *  - gf__uring: io_uring, driven by the controller thread
 *    (reader_uring.c, built where liburing is; below, the stubs that say
 *    GF_ENODEV where it is not).
 *
 * io = AUTO with io_uring: a decode thread first reads its sample itself
 * under GF__READ_NOWAIT (preadv2 RWF_NOWAIT), so the bytes land in the
 * cache of the core that decodes them, where io_uring's copy lands on
 * the controller's (bench/RESULTS.md, issue 27). What would block goes
 * back to the controller and on to io_uring, ahead of the reads queued,
 * and is read again whole, never in part (RWF_NOWAIT starts readahead,
 * which a fast disk may finish before the kernel looks again). Which
 * reader read a sample never changes its bytes.
 *
 * A folder or list sample's file is checked from its first read on
 * (gf__file_seen), not stat'ed at index time: a stat per file would catch
 * growth or a touch before that read, but costs 1.4 us a file against
 * 0.53 us for the whole folder index (3.5x); a check of index time
 * against ctime needs no memory but gives false positives under NFS
 * clock skew.
 */
#include "reader_internal.h"

#include "config.h"
#include "grow.h"
#include "magic.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef RWF_NOWAIT
#define RWF_NOWAIT 0x00000008 /* Linux 4.14 */
#endif

const char *gf__errtext(int e, char *tmp, size_t n)
{
#if defined(__GLIBC__) && defined(_GNU_SOURCE)
    return strerror_r(e, tmp, n);
#else
    if (strerror_r(e, tmp, n) != 0)
        snprintf(tmp, n, "errno %d", e);
    return tmp;
#endif
}

/* b's memory back, however it was had; b->data NULL. */
static void release(gf__buf *b)
{
    if (b->mapped && b->data)
        munmap(b->data, b->cap);
    else
        free(b->data);
    b->data = NULL;
    b->mapped = false;
}

void gf__buf_free(gf__buf *b)
{
    if (!b)
        return;
    release(b);
    b->len = b->cap = 0;
}

int gf__buf_map(gf__buf *b, size_t cap)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    cap = (cap + page - 1) / page * page;
    gf__buf_free(b);
    void *p = mmap(NULL, cap ? cap : page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED)
        return GF_ENOMEM;
    gf__advise_huge(p, cap); /* a shard fills it whole */
    b->data = p;
    b->cap = cap ? cap : page;
    b->mapped = true;
    return 0;
}

/* ---- the read budget ---- */

void gf__budget_init(gf__budget *g, size_t limit, unsigned buffers, const atomic_int *cancel)
{
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->freed, NULL);
    g->limit = limit;
    g->keep = limit / (2 * (size_t)GF__MAX(buffers, 1u));
    g->cancel = cancel;
}

void gf__budget_restart(gf__budget *g, unsigned buffers)
{
    pthread_mutex_lock(&g->mu);
    g->keep = g->limit / (2 * (size_t)GF__MAX(buffers, 1u));
    g->held = g->big = 0;
    pthread_mutex_unlock(&g->mu);
}

void gf__budget_destroy(gf__budget *g)
{
    pthread_cond_destroy(&g->freed);
    pthread_mutex_destroy(&g->mu);
}

static size_t big_part(const gf__budget *g, size_t cap)
{
    return cap > g->keep ? cap : 0;
}

/* With g->mu held: a buffer's capacity goes from old to cap. */
static void budget_move(gf__budget *g, size_t old, size_t cap)
{
    g->held = g->held - old + cap;
    g->big = g->big - big_part(g, old) + big_part(g, cap);
    if (g->held > g->peak)
        g->peak = g->held;
}

/* Takes cap - old more bytes of g; see gf__buf_reserve. */
static int budget_take(gf__budget *g, size_t old, size_t cap, int wait, int *waited,
                       char *why, size_t why_len)
{
    int rc = 0;
    pthread_mutex_lock(&g->mu);
    /* Only other large buffers are freed when their read is done: with
     * none in use, waiting would wait for ever. */
    while (g->held - old + cap > g->limit && g->big - big_part(g, old) > 0) {
        if (!*waited) {
            *waited = 1;
            g->waits++;
        }
        if (!wait) {
            rc = GF__BUDGET_LATER;
            break;
        }
        if (g->cancel && atomic_load_explicit(g->cancel, memory_order_relaxed)) {
            gf__why(why, why_len, "cancelled while waiting for the read budget");
            rc = GF_EIO;
            break;
        }
        pthread_cond_wait(&g->freed, &g->mu);
    }
    if (!rc)
        budget_move(g, old, cap);
    pthread_mutex_unlock(&g->mu);
    return rc;
}

/* With g->mu not held: b's memory goes back to g. */
static void budget_drop(gf__budget *g, gf__buf *b)
{
    pthread_mutex_lock(&g->mu);
    budget_move(g, b->cap, 0);
    pthread_cond_broadcast(&g->freed);
    pthread_mutex_unlock(&g->mu);
    release(b);
    b->cap = 0;
}

void gf__budget_done(gf__budget *g, gf__buf *b)
{
    if (g && b->cap > g->keep)
        budget_drop(g, b);
}

void gf__budget_wake(gf__budget *g)
{
    pthread_mutex_lock(&g->mu);
    pthread_cond_broadcast(&g->freed);
    pthread_mutex_unlock(&g->mu);
}

void gf__budget_stats(gf__budget *g, uint64_t *peak, uint64_t *waits)
{
    pthread_mutex_lock(&g->mu);
    *peak = g->peak;
    *waits = g->waits;
    pthread_mutex_unlock(&g->mu);
}

/* Grows b: doubling from 4 KiB while it stays small enough to keep
 * between reads, exactly need when it is larger (it is freed after this
 * read), never past max(need, max_bytes). Without keep_len the old
 * contents are dropped first, which keeps the peak low. */
int gf__buf_reserve(gf__buf *b, size_t need, size_t *keep, size_t max_bytes, gf__budget *g,
                    int wait, int *waited, char *why, size_t why_len)
{
    if (need <= b->cap)
        return 0;
    size_t cap = b->exact ? need : gf__grow_cap(b->cap, need, 4096, 1);
    size_t ceiling = g ? GF__MIN(max_bytes, g->keep) : max_bytes;
    if (g && need > g->keep)
        cap = need;
    else if (cap > ceiling)
        cap = GF__MAX(need, ceiling);
    int rc = g ? budget_take(g, b->cap, cap, 0, waited, why, why_len) : 0;
    if (rc == GF__BUDGET_LATER && big_part(g, b->cap)) {
        budget_drop(g, b);
        *keep = 0;
    }
    if (rc == GF__BUDGET_LATER && wait)
        rc = budget_take(g, b->cap, cap, 1, waited, why, why_len);
    if (rc)
        return rc;
    uint8_t *p;
    if (*keep) {
        if ((p = malloc(cap)) != NULL)
            memcpy(p, b->data, *keep);
        release(b);
    } else {
        release(b);
        p = malloc(cap);
    }
    b->data = p;
    b->cap = p ? cap : 0;
    if (!p) {
        if (g)
            budget_drop(g, b);
        gf__why(why, why_len, "out of memory for a %zu-byte read buffer", cap);
        return GF_ENOMEM;
    }
    return 0;
}

int gf__sniff_refuses(const uint8_t *p, size_t n, char *why, size_t why_len)
{
    if (gf__magic(p, n) != GF__MAGIC_NONE)
        return 0;
    gf__why(why, why_len, "not an image of a known format");
    return GF_EFORMAT;
}

static GF__COLD int open_error(int e, char *why, size_t why_len)
{
    char tmp[96];
    switch (e) {
    case ENOENT:
    case ENOTDIR:
        gf__why(why, why_len, "no such file");
        return GF_ENOENT;
    case ENOMEM:
        gf__why(why, why_len, "open: out of memory");
        return GF_ENOMEM;
    default:
        gf__why(why, why_len, "open: %s", gf__errtext(e, tmp, sizeof tmp));
        return GF_EIO;
    }
}

static const char *file_kind(mode_t m)
{
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISSOCK(m))
        return "a socket";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    return "a special file";
}

void gf__file_id_of(gf__file_id *id, const struct stat *st)
{
    *id = (gf__file_id){.dev = (uint64_t)st->st_dev,
                        .ino = (uint64_t)st->st_ino,
                        .size = (uint64_t)st->st_size,
                        .mtime_s = (int64_t)st->st_mtim.tv_sec,
                        .mtime_ns = (int64_t)st->st_mtim.tv_nsec};
}

/* GF_EIO with why if st is not the file expect describes. */
static int check_identity(const gf__file_id *expect, const struct stat *st, char *why,
                          size_t why_len)
{
    gf__file_id now;
    gf__file_id_of(&now, st);
    const char *what = now.dev != expect->dev || now.ino != expect->ino ? "replaced: another inode"
                       : now.size != expect->size
                           ? "its size"
                           : now.mtime_s != expect->mtime_s || now.mtime_ns != expect->mtime_ns
                                 ? "its mtime"
                                 : NULL;
    if (!what)
        return 0;
    gf__why(why, why_len, "changed since it was indexed (%s; size %llu, then %llu)", what,
            (unsigned long long)now.size, (unsigned long long)expect->size);
    return GF_EIO;
}

/* gf__file_seen.stamp of the file st describes. */
static uint64_t seen_stamp(const struct stat *st)
{
    uint64_t h = ((uint64_t)st->st_dev * 0x9e3779b97f4a7c15ull) ^ (uint64_t)st->st_mtim.tv_sec;
    h = (h * 0xff51afd7ed558ccdull) ^ (uint64_t)st->st_mtim.tv_nsec;
    h *= 0xc4ceb9fe1a85ec53ull;
    uint64_t size = (uint64_t)st->st_size < GF__SEEN_SIZE_MAX ? (uint64_t)st->st_size
                                                               : GF__SEEN_SIZE_MAX;
    return 1ull << 63 | (h >> 41) << 40 | size;
}

/* As check_identity, for a folder or list sample: records what seen lacks
 * (the first read), then compares. */
static int check_seen(gf__file_seen *seen, const struct stat *st, char *why, size_t why_len)
{
    uint64_t ino = (uint64_t)st->st_ino, stamp = seen_stamp(st);
    uint64_t was_ino = atomic_load_explicit(&seen->ino, memory_order_relaxed);
    uint64_t was = atomic_load_explicit(&seen->stamp, memory_order_relaxed);
    if (GF__UNLIKELY(!was_ino) &&
        atomic_compare_exchange_strong_explicit(&seen->ino, &was_ino, ino,
                                                memory_order_relaxed, memory_order_relaxed))
        was_ino = ino;
    if (GF__UNLIKELY(!was) &&
        atomic_compare_exchange_strong_explicit(&seen->stamp, &was, stamp,
                                                memory_order_relaxed, memory_order_relaxed))
        was = stamp;
    if (GF__LIKELY(was_ino == ino && was == stamp))
        return 0;
    uint64_t was_size = was & GF__SEEN_SIZE_MAX, size = stamp & GF__SEEN_SIZE_MAX;
    if (was_ino != ino)
        gf__why(why, why_len,
                "changed since it was indexed (replaced: another inode, %llu bytes)",
                (unsigned long long)st->st_size);
    else if (was_size != size)
        gf__why(why, why_len,
                "changed since it was indexed (its size: %llu bytes, %llu when first read)",
                (unsigned long long)st->st_size, (unsigned long long)was_size);
    else
        gf__why(why, why_len, "changed since it was indexed (its mtime, same size)");
    return GF_EIO;
}

/* A member's range in a file of file_size bytes, checked before anything
 * is read. */
static int check_range(uint64_t file_size, uint64_t offset, uint64_t length, size_t max_bytes,
                       char *why, size_t why_len)
{
    if (length == 0) {
        gf__why(why, why_len, "member is empty");
        return GF_EEMPTY;
    }
    if (length > (uint64_t)max_bytes) {
        gf__why(why, why_len, "member is %llu bytes, over the %zu-byte limit",
                (unsigned long long)length, max_bytes);
        return GF_ETOOBIG;
    }
    if (offset > file_size || length > file_size - offset) {
        gf__why(why, why_len, "shard ended inside member: it ends at byte %llu, the file has %llu",
                (unsigned long long)(offset + length), (unsigned long long)file_size);
        return GF_ETRUNC;
    }
    return 0;
}

int gf__open_sized(int root_fd, const char *rel, uint64_t offset, uint64_t length,
                   size_t max_bytes, const gf__file_id *expect, gf__file_seen *seen,
                   int *fd_out, size_t *size_out,
                   char *why, size_t why_len)
{
    *fd_out = -1;
    int fd, err = 0;
    do
        fd = openat(root_fd, rel, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    while (fd < 0 && errno == EINTR);
    struct stat st;
    if (fd < 0) {
        /* A socket cannot be opened at all (ENXIO), nor some devices: name
         * the kind of file, as for those that open, not the errno. */
        int e = errno;
        if (e != ENOENT && e != ENOTDIR && e != ENOMEM && fstatat(root_fd, rel, &st, 0) == 0 &&
            !S_ISREG(st.st_mode)) {
            gf__why(why, why_len, "not a regular file: %s", file_kind(st.st_mode));
            return GF_EIO;
        }
        err = open_error(e, why, why_len);
        errno = e; /* for the descriptor cache: EMFILE */
        return err;
    }

    char tmp[96];
    if (fstat(fd, &st) != 0) {
        gf__why(why, why_len, "fstat: %s", gf__errtext(errno, tmp, sizeof tmp));
        err = GF_EIO;
    } else if (!S_ISREG(st.st_mode)) {
        gf__why(why, why_len, "not a regular file: %s", file_kind(st.st_mode));
        err = GF_EIO;
    } else if (expect && (err = check_identity(expect, &st, why, why_len)) != 0) {
        /* the reason is set */
    } else if (seen && (err = check_seen(seen, &st, why, why_len)) != 0) {
        /* the reason is set */
    } else if (length != GF__WHOLE_FILE) {
        err = check_range((uint64_t)st.st_size, offset, length, max_bytes, why, why_len);
        if (!err) {
            *fd_out = fd;
            *size_out = (size_t)length;
            return 0;
        }
    } else if (st.st_size <= 0) {
        gf__why(why, why_len, "file is empty");
        err = GF_EEMPTY;
    } else if ((uint64_t)st.st_size > (uint64_t)max_bytes) {
        gf__why(why, why_len, "file is %llu bytes, over the %zu-byte limit",
                (unsigned long long)st.st_size, max_bytes);
        err = GF_ETOOBIG;
    }
    if (err) {
        close(fd);
        return err;
    }
    *fd_out = fd;
    *size_out = (size_t)st.st_size;
    return 0;
}

int gf__fd_cache_init(gf__fd_cache *c, uint32_t n)
{
    *c = (gf__fd_cache){0};
    if (!n)
        return 0;
    c->e = malloc((size_t)n * sizeof *c->e);
    if (!c->e)
        return GF_ENOMEM;
    for (uint32_t i = 0; i < n; i++)
        c->e[i] = (gf__fd_cache_entry){.fd = -1};
    c->n = n;
    return 0;
}

void gf__fd_cache_drop(gf__fd_cache *c)
{
    for (uint32_t i = 0; i < c->n; i++)
        if (c->e[i].fd >= 0) {
            close(c->e[i].fd);
            c->e[i].fd = -1;
        }
}

void gf__fd_cache_free(gf__fd_cache *c)
{
    gf__fd_cache_drop(c);
    free(c->e);
    *c = (gf__fd_cache){0};
}

/* A ranged read's descriptor from e (file's, when it holds it), else
 * opened, checked and kept there. Out of descriptors, the cache gives all
 * of its back and the file is opened once more. */
static int open_kept(gf__fd_cache_entry *e, gf__fd_cache *c, uint32_t file, double now, int root_fd,
                     const char *rel, uint64_t offset, uint64_t length, size_t max_bytes,
                     const gf__file_id *expect, int *fd, size_t *size, char *why,
                     size_t why_len)
{
    if (e->fd >= 0 && e->file == file) {
        struct stat st;
        char tmp[96];
        int err = 0;
        if (now - e->checked < GF__FD_CHECK_S)
            err = check_range(expect->size, offset, length, max_bytes, why, why_len);
        else if (fstat(e->fd, &st) != 0) {
            gf__why(why, why_len, "fstat: %s", gf__errtext(errno, tmp, sizeof tmp));
            err = GF_EIO;
        } else if (!(err = check_identity(expect, &st, why, why_len))) {
            err = check_range((uint64_t)st.st_size, offset, length, max_bytes, why, why_len);
            e->checked = now;
        }
        if (err) { /* opened afresh by the next read */
            close(e->fd);
            e->fd = -1;
            return err;
        }
        *fd = e->fd;
        *size = (size_t)length;
        return 0;
    }
    if (e->fd >= 0) {
        close(e->fd);
        e->fd = -1;
    }
    int err = gf__open_sized(root_fd, rel, offset, length, max_bytes, expect, NULL, fd, size, why,
                             why_len);
    if (err == GF_EIO && (errno == EMFILE || errno == ENFILE)) {
        gf__fd_cache_drop(c);
        err = gf__open_sized(root_fd, rel, offset, length, max_bytes, expect, NULL, fd, size, why,
                             why_len);
    }
    if (!err)
        *e = (gf__fd_cache_entry){.fd = *fd, .file = file, .checked = now};
    return err;
}

int gf__read_file(int root_fd, const char *rel, gf__buf *b, size_t max_bytes,
                  char *why, size_t why_len)
{
    return gf__read_range(root_fd, rel, 0, GF__WHOLE_FILE, b, max_bytes, why, why_len);
}

int gf__read_range(int root_fd, const char *rel, uint64_t offset, uint64_t length,
                   gf__buf *b, size_t max_bytes, char *why, size_t why_len)
{
    const gf__read_opts o = {.max_bytes = max_bytes};
    return gf__read_sample(root_fd, rel, offset, length, &o, b, why, why_len);
}

/* The iovecs reading [off, to) of b's range: b's bytes, but the holes'. */
static int hole_iov(gf__buf *b, size_t off, size_t to, const gf__read_hole *h, int n_holes,
                    struct iovec *v, int max)
{
    int n = 0;
    for (int i = 0; i < n_holes && off < to && n < max; i++) {
        if (h[i].at + h[i].len <= off)
            continue;
        if (off < h[i].at) {
            size_t end = GF__MIN(h[i].at, to);
            v[n++] = (struct iovec){.iov_base = b->data + off, .iov_len = end - off};
            off = end;
        }
        if (off < to && n < max) {
            size_t end = GF__MIN(h[i].at + h[i].len, to);
            v[n++] = (struct iovec){.iov_base = h[i].dst + (off - h[i].at), .iov_len = end - off};
            off = end;
        }
    }
    if (off < to && n < max)
        v[n++] = (struct iovec){.iov_base = b->data + off, .iov_len = to - off};
    return n;
}

/* Reads bytes [from, to) of the size-byte part at base of fd into b (the
 * holes' to theirs); nowait: from the page cache only, else
 * GF__READ_UNCACHED. */
static int pread_part(int fd, gf__buf *b, size_t from, size_t to, size_t size, uint64_t base,
                      int ranged, int nowait, const gf__read_hole *holes, int n_holes,
                      char *why, size_t why_len)
{
    char tmp[96];
    for (size_t off = from; off < to;) {
        ssize_t n;
        struct iovec v[8];
        int nv = 1;
        if (n_holes)
            nv = hole_iov(b, off, to, holes, n_holes, v, 8);
        else
            v[0] = (struct iovec){.iov_base = b->data + off, .iov_len = to - off};
        if (nowait)
            n = preadv2(fd, v, nv, (off_t)(base + off), RWF_NOWAIT);
        else if (nv > 1)
            n = preadv(fd, v, nv, (off_t)(base + off));
        else
            n = pread(fd, v[0].iov_base, v[0].iov_len, (off_t)(base + off));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            /* EAGAIN: not cached. The others: no RWF_NOWAIT here (old
             * kernel, file system); the blocking reader will say what
             * else may be wrong. */
            if (nowait && (errno == EAGAIN || errno == EOPNOTSUPP || errno == EINVAL ||
                           errno == ENOSYS))
                return GF__READ_UNCACHED;
            gf__why(why, why_len, "read at byte %zu: %s", off,
                    gf__errtext(errno, tmp, sizeof tmp));
            return GF_EIO;
        }
        if (n == 0 && ranged) {
            gf__why(why, why_len, "shard ended inside member: %zu of %zu bytes at offset %llu",
                    off, size, (unsigned long long)base);
            return GF_ETRUNC;
        }
        if (n == 0) {
            gf__why(why, why_len, "file shrank while reading: %zu of %zu bytes", off, size);
            return GF_EIO;
        }
        off += (size_t)n;
        b->got += (size_t)n;
    }
    return 0;
}

int gf__read_sample(int root_fd, const char *rel, uint64_t offset, uint64_t length,
                    const gf__read_opts *o, gf__buf *b, char *why, size_t why_len)
{
    if (why && why_len)
        why[0] = 0;
    if (!rel || !b || !o) {
        gf__why(why, why_len, "NULL path, buffer or options");
        return GF_EINVAL;
    }
    b->len = b->got = 0;
    int fd, waited = 0;
    size_t size, max = gf__effective_max(o->max_bytes);
    int ranged = length != GF__WHOLE_FILE;
    gf__fd_cache_entry *kept_fd = ranged && o->expect && o->fds && o->fds->n
                                      ? &o->fds->e[o->file % o->fds->n]
                                      : NULL;
    int err = kept_fd ? open_kept(kept_fd, o->fds, o->file, o->now ? o->now : gf__now(), root_fd,
                                  rel, offset, length, max, o->expect, &fd, &size, why, why_len)
                      : gf__open_sized(root_fd, rel, offset, length, max, o->expect, o->seen,
                                       &fd, &size, why, why_len);
    if (err)
        return err;
    uint64_t base = ranged ? offset : 0;
    /* The first part, then (when it is an image) the rest: a large file
     * that is none costs its first bytes, not its size. */
    size_t first = gf__first_part(size, o->flags), kept = 0;
    int nowait = (o->flags & GF__READ_NOWAIT) != 0;
    err = gf__buf_reserve(b, first, &kept, max, o->budget, !nowait, &waited, why, why_len);
    if (!err)
        err = pread_part(fd, b, 0, first, size, base, ranged, nowait, o->holes, o->n_holes, why,
                         why_len);
    if (!err && first < size) {
        size_t skip = gf__sniff_skip(o->flags);
        err = gf__sniff_refuses(b->data + skip, first - skip, why, why_len);
        kept = first; /* unless waiting for the budget drops it */
        if (!err)
            err = gf__buf_reserve(b, size, &kept, max, o->budget, !nowait, &waited, why,
                                  why_len);
        if (!err)
            err = pread_part(fd, b, kept, size, size, base, ranged, nowait, o->holes, o->n_holes,
                             why, why_len);
    }
    if (err == GF__BUDGET_LATER)
        err = GF__READ_UNCACHED; /* io_uring waits without a thread */
    if (!kept_fd)
        close(fd);
    else if (err && err != GF__READ_UNCACHED) { /* opened afresh by the next read */
        close(fd);
        kept_fd->fd = -1;
    }
    if (!err)
        b->len = size;
    return err;
}

/* The whole-file and flagless submits, for either backend. */
int gf__uring_submit(gf__uring *u, int root_fd, const char *rel, gf__buf *buf,
                     uint64_t user)
{
    return gf__uring_submit_sample(u, root_fd, rel, 0, GF__WHOLE_FILE, 0, NULL, NULL, buf, user);
}

int gf__uring_submit_range(gf__uring *u, int root_fd, const char *rel, uint64_t offset,
                           uint64_t length, gf__buf *buf, uint64_t user)
{
    return gf__uring_submit_sample(u, root_fd, rel, offset, length, 0, NULL, NULL, buf, user);
}

int gf__read_prepare(int root_fd, const char *rel, uint64_t offset, uint64_t length,
                     const gf__read_opts *o, gf__buf *b, gf__batched_read *r, char *why,
                     size_t why_len)
{
    if (!o->fds || !o->fds->n || !o->expect || length == GF__WHOLE_FILE ||
        (o->flags & GF__READ_SNIFF) || length > INT32_MAX)
        return GF__READ_UNCACHED;
    b->len = b->got = 0;
    size_t size, max = gf__effective_max(o->max_bytes);
    int fd, waited = 0;
    int err = open_kept(&o->fds->e[o->file % o->fds->n], o->fds, o->file,
                        o->now ? o->now : gf__now(), root_fd, rel, offset, length, max, o->expect,
                        &fd, &size, why, why_len);
    if (err)
        return err;
    size_t keep = 0;
    err = gf__buf_reserve(b, size, &keep, max, o->budget, 0, &waited, why, why_len);
    if (err)
        return err;
    *r = (gf__batched_read){.fd = fd, .offset = offset, .len = size, .res = -EAGAIN};
    r->nv = hole_iov(b, 0, size, o->holes, o->n_holes, r->v, GF__READ_IOV_MAX);
    size_t covered = 0;
    for (int i = 0; i < r->nv; i++)
        covered += r->v[i].iov_len;
    return covered == size ? 0 : GF__READ_UNCACHED;
}

int gf__read_finish(const gf__batched_read *r, gf__buf *b)
{
    if (r->res < 0 || (size_t)r->res != r->len)
        return GF__READ_UNCACHED;
    b->len = b->got = r->len;
    return 0;
}

/* ---- without io_uring ---- */

#if !GF_HAVE_URING
int gf__have_uring(void)
{
    return 0;
}

int gf__uring_create(gf__uring **out, unsigned queue_depth, size_t max_bytes,
                     char *why, size_t why_len)
{
    (void)queue_depth;
    (void)max_bytes;
    if (out)
        *out = NULL;
    gf__why(why, why_len, "built without io_uring (liburing not found or -Dio_uring=disabled)");
    return GF_ENODEV;
}

void gf__uring_destroy(gf__uring *u)
{
    (void)u;
}

int gf__uring_eventfd(const gf__uring *u)
{
    (void)u;
    return -1;
}

unsigned gf__uring_room(const gf__uring *u)
{
    (void)u;
    return 0;
}

void gf__uring_set_budget(gf__uring *u, gf__budget *g)
{
    (void)u;
    (void)g;
}

int gf__uring_submit_sample(gf__uring *u, int root_fd, const char *rel, uint64_t offset,
                            uint64_t length, unsigned flags, const gf__file_id *expect,
                            gf__file_seen *seen, gf__buf *buf, uint64_t user)
{
    (void)flags;
    (void)expect;
    (void)seen;
    (void)u;
    (void)root_fd;
    (void)rel;
    (void)offset;
    (void)length;
    (void)buf;
    (void)user;
    return GF_EINVAL;
}

int gf__uring_reap(gf__uring *u, gf__read_done *done, int max)
{
    (void)u;
    (void)done;
    (void)max;
    return 0;
}

#endif
