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
 */
#include "reader_internal.h"

#include "config.h"
#include "grow.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

void gf__buf_free(gf__buf *b)
{
    if (!b)
        return;
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* Grows b to hold need bytes: doubling from 4 KiB, grow-only, never past
 * max(need, max_bytes). The old contents are dropped (free before malloc
 * keeps the peak low). */
static int buf_reserve(gf__buf *b, size_t need, size_t max_bytes, char *why,
                       size_t why_len)
{
    if (need <= b->cap)
        return 0;
    size_t cap = gf__grow_cap(b->cap, need, 4096, 1);
    if (cap > max_bytes)
        cap = GF__MAX(need, max_bytes);
    free(b->data);
    b->data = malloc(cap);
    if (!b->data) {
        b->cap = 0;
        gf__why(why, why_len, "out of memory for a %zu-byte read buffer", cap);
        return GF_ENOMEM;
    }
    b->cap = cap;
    return 0;
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

int gf__open_sized(int root_fd, const char *rel, uint64_t offset, uint64_t length,
                   size_t max_bytes, gf__buf *b, int *fd_out, size_t *size_out, char *why,
                   size_t why_len)
{
    *fd_out = -1;
    int fd;
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
        return open_error(e, why, why_len);
    }

    int err = 0;
    char tmp[96];
    if (fstat(fd, &st) != 0) {
        gf__why(why, why_len, "fstat: %s", gf__errtext(errno, tmp, sizeof tmp));
        err = GF_EIO;
    } else if (!S_ISREG(st.st_mode)) {
        gf__why(why, why_len, "not a regular file: %s", file_kind(st.st_mode));
        err = GF_EIO;
    } else if (length != GF__WHOLE_FILE) {
        if (length == 0) {
            gf__why(why, why_len, "member is empty");
            err = GF_EEMPTY;
        } else if (length > (uint64_t)max_bytes) {
            gf__why(why, why_len, "member is %llu bytes, over the %zu-byte limit",
                    (unsigned long long)length, max_bytes);
            err = GF_ETOOBIG;
        } else if (offset > (uint64_t)st.st_size || length > (uint64_t)st.st_size - offset) {
            gf__why(why, why_len,
                    "shard ended inside member: it ends at byte %llu, the file has %llu",
                    (unsigned long long)(offset + length), (unsigned long long)st.st_size);
            err = GF_ETRUNC;
        } else {
            err = buf_reserve(b, (size_t)length, max_bytes, why, why_len);
        }
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
    } else {
        err = buf_reserve(b, (size_t)st.st_size, max_bytes, why, why_len);
    }
    if (err) {
        close(fd);
        return err;
    }
    *fd_out = fd;
    *size_out = (size_t)st.st_size;
    return 0;
}

int gf__read_file(int root_fd, const char *rel, gf__buf *b, size_t max_bytes,
                  char *why, size_t why_len)
{
    return gf__read_range(root_fd, rel, 0, GF__WHOLE_FILE, b, max_bytes, why, why_len);
}

int gf__read_range(int root_fd, const char *rel, uint64_t offset, uint64_t length,
                   gf__buf *b, size_t max_bytes, char *why, size_t why_len)
{
    if (why && why_len)
        why[0] = 0;
    if (!rel || !b) {
        gf__why(why, why_len, "NULL path or buffer");
        return GF_EINVAL;
    }
    b->len = 0;
    int fd;
    size_t size;
    int err = gf__open_sized(root_fd, rel, offset, length, gf__effective_max(max_bytes), b, &fd,
                         &size, why, why_len);
    uint64_t base = length == GF__WHOLE_FILE ? 0 : offset;
    if (err)
        return err;

    size_t off = 0;
    char tmp[96];
    while (off < size) {
        ssize_t n = pread(fd, b->data + off, size - off, (off_t)(base + off));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            gf__why(why, why_len, "read at byte %zu: %s", off,
                    gf__errtext(errno, tmp, sizeof tmp));
            err = GF_EIO;
            break;
        }
        if (n == 0 && length != GF__WHOLE_FILE) {
            gf__why(why, why_len, "shard ended inside member: %zu of %zu bytes at offset %llu",
                    off, size, (unsigned long long)base);
            err = GF_ETRUNC;
            break;
        }
        if (n == 0) {
            gf__why(why, why_len, "file shrank while reading: %zu of %zu bytes", off,
                    size);
            err = GF_EIO;
            break;
        }
        off += (size_t)n;
    }
    close(fd);
    if (!err)
        b->len = size;
    return err;
}

/* The whole-file submit, for either backend. */
int gf__uring_submit(gf__uring *u, int root_fd, const char *rel, gf__buf *buf,
                     uint64_t user)
{
    return gf__uring_submit_range(u, root_fd, rel, 0, GF__WHOLE_FILE, buf, user);
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

int gf__uring_submit_range(gf__uring *u, int root_fd, const char *rel, uint64_t offset,
                           uint64_t length, gf__buf *buf, uint64_t user)
{
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
