/* What the reader's two backends share (reader.c: pread and the common
 * checks; reader_uring.c: io_uring): opening and sizing a file or a
 * member, and error text. Thread-safe: no state. */
#ifndef GF_READER_INTERNAL_H
#define GF_READER_INTERNAL_H

#include "reader.h"

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
 * within max_bytes and inside the file) and makes b large enough; *size_out
 * is the number of bytes to read. O_NONBLOCK so that a FIFO in the tree
 * cannot block the caller in open(); it does not affect reads of regular
 * files by pread(). On failure the file is closed and *fd_out is -1. */
int gf__open_sized(int root_fd, const char *rel, uint64_t offset, uint64_t length,
                   size_t max_bytes, gf__buf *b, int *fd_out, size_t *size_out, char *why,
                   size_t why_len);

#endif
