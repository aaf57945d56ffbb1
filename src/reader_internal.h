/* What the reader's two backends share (reader.c: pread and the common
 * checks; reader_uring.c: io_uring): opening and sizing a file or a
 * member, and error text. Thread-safe: no state. */
#ifndef GF_READER_INTERNAL_H
#define GF_READER_INTERNAL_H

#include "reader.h"

#include <sys/stat.h>

/* Thread-safe strerror for both strerror_r flavours: e's text, in tmp or
 * static storage. */
const char *gf__errtext(int e, char *tmp, size_t n);

/* max_bytes as the API takes it (0 = no cap) to a cap. */
static inline size_t gf__effective_max(size_t max_bytes)
{
    return max_bytes ? max_bytes : SIZE_MAX;
}

/* Opens root_fd/rel, checks it is a non-empty regular file within
 * max_bytes (or, for a range, that [offset, offset + length) is non-empty,
 * within max_bytes and inside the file), from fstat alone: nothing is
 * read or allocated; *size_out is the number of bytes to read. O_NONBLOCK so that a FIFO in the tree
 * cannot block the caller in open(); it does not affect reads of regular
 * files by pread(). On failure the file is closed and *fd_out is -1. */
int gf__open_sized(int root_fd, const char *rel, uint64_t offset, uint64_t length,
                   size_t max_bytes, const gf__file_id *expect, gf__file_seen *seen,
                   int *fd_out, size_t *size_out,
                   char *why, size_t why_len);
/* (expect, seen: gf__read_opts.) */
/* The identity of the file st describes. */
void gf__file_id_of(gf__file_id *id, const struct stat *st);

/* Returned by gf__buf_reserve when the budget refuses and wait is 0. */
#define GF__BUDGET_LATER 1

/* Makes b hold need bytes (at most max_bytes, but need always), within g
 * (NULL: none), keeping its first *keep bytes; but a large buffer is
 * dropped, contents and all (*keep = 0), before waiting for the budget:
 * reads that wait while holding memory could wait for each other for
 * ever. wait 0: GF__BUDGET_LATER instead of waiting. *waited: set (and
 * the budget's count of waits raised) the first time this read is held
 * back. Returns 0, GF__BUDGET_LATER, GF_ENOMEM, or GF_EIO when cancelled
 * while waiting. */
int gf__buf_reserve(gf__buf *b, size_t need, size_t *keep, size_t max_bytes, gf__budget *g,
                    int wait, int *waited, char *why, size_t why_len);

/* Bytes to read first of a size-byte file under flags. */
static inline size_t gf__sniff_skip(unsigned flags)
{
    return flags & GF__READ_TAR_HEADER ? 512 : 0; /* the header block first */
}

static inline size_t gf__first_part(size_t size, unsigned flags)
{
    size_t first = gf__sniff_skip(flags) + GF__SNIFF_BYTES;
    return (flags & GF__READ_SNIFF) && size > first ? first : size;
}

/* GF_EFORMAT with why if p[0, n) starts like no image the decoder knows;
 * else 0. */
int gf__sniff_refuses(const uint8_t *p, size_t n, char *why, size_t why_len);

#endif
