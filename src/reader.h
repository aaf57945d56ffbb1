/* Reads whole files: io_uring with many reads in flight, or pread(). */
#ifndef GF_READER_H
#define GF_READER_H

#include "common.h"

typedef struct gf__buf {
    uint8_t *data;
    size_t len, cap;
} gf__buf;

void gf__buf_free(gf__buf *b);

/* Blocking read of root_fd/rel into b (grown as needed, capped at
 * max_bytes). Returns 0, GF_ENOENT, GF_EIO, GF_EEMPTY or GF_ETOOBIG with
 * why. Thread-safe. */
int gf__read_file(int root_fd, const char *rel, gf__buf *b, size_t max_bytes,
                  char *why, size_t why_len);

/* The io_uring reader; owned and driven by one thread. */
typedef struct gf__uring gf__uring;

typedef struct gf__read_done {
    uint64_t user;       /* as submitted */
    gf__buf *buf;        /* as submitted, filled: buf->len bytes */
    int err;             /* 0 or GF_E* */
    char why[160];
} gf__read_done;

/* Returns 0, or GF_ENODEV when this build or kernel has no usable io_uring
 * (ENOSYS, EPERM from seccomp, EINVAL), with why. */
int gf__uring_create(gf__uring **out, unsigned queue_depth, size_t max_bytes,
                     char *why, size_t why_len);
void gf__uring_destroy(gf__uring *u);
/* eventfd that becomes readable when completions are ready. */
int gf__uring_eventfd(const gf__uring *u);
/* Free submission capacity (reads that may still be started). */
unsigned gf__uring_room(const gf__uring *u);
/* Starts reading root_fd/rel into buf. Open errors complete through
 * gf__uring_reap like any other. Returns 0 or GF_EINVAL when full. */
int gf__uring_submit(gf__uring *u, int root_fd, const char *rel, gf__buf *buf,
                     uint64_t user);
/* Finished reads, without blocking; returns how many were written. */
int gf__uring_reap(gf__uring *u, gf__read_done *done, int max);
/* 1 if built with io_uring. */
int gf__have_uring(void);

#endif
