/* A decode thread's batch of small ranged reads through an io_uring of
 * its own (reader.h): the reads of the jobs it took at once, submitted
 * in one system call, each RWF_NOWAIT so that only the page cache answers
 * (a miss is -EAGAIN, read by the controller's io_uring as any miss is).
 * Buffered reads the page cache holds complete inline, in the submitting
 * thread: one call instead of one a member. A ring that fails is given
 * up, and its owner reads one at a time from then on. The owning decode
 * thread's alone; created and destroyed on the lifecycle thread. */
#include "reader.h"

#include "config.h"

#include <errno.h>
#include <stdlib.h>

#if GF_HAVE_URING
#include <liburing.h>

struct gf__read_batch {
    struct io_uring ring;
    unsigned depth;
    int broken; /* a submit failed: SQEs may be left in the ring */
};

void gf__read_batch_create(gf__read_batch **out, unsigned depth)
{
    *out = NULL;
    gf__read_batch *rb = calloc(1, sizeof *rb);
    if (!rb)
        return;
    if (io_uring_queue_init(depth, &rb->ring, 0) < 0) {
        free(rb);
        return;
    }
    rb->depth = depth;
    *out = rb;
}

void gf__read_batch_destroy(gf__read_batch *rb)
{
    if (!rb)
        return;
    io_uring_queue_exit(&rb->ring);
    free(rb);
}

void gf__read_batch_run(gf__read_batch *rb, gf__batched_read *r, int n)
{
    for (int i = 0; i < n; i++)
        r[i].res = -EAGAIN;
    if (!rb || rb->broken || n <= 0 || (unsigned)n > rb->depth)
        return;
    for (int i = 0; i < n; i++) {
        struct io_uring_sqe *q = io_uring_get_sqe(&rb->ring);
        if (!q) { /* the ring holds depth: not while it is whole */
            rb->broken = 1;
            return;
        }
        io_uring_prep_readv(q, r[i].fd, r[i].v, (unsigned)r[i].nv, r[i].offset);
        q->rw_flags = RWF_NOWAIT;
        io_uring_sqe_set_data64(q, (uint64_t)i);
    }
    int sent;
    do
        sent = io_uring_submit_and_wait(&rb->ring, (unsigned)n);
    while (sent == -EINTR);
    if (sent < n) /* those not taken stay queued: never submit on this ring again */
        rb->broken = 1;
    for (int got = 0; got < (sent > 0 ? sent : 0);) {
        struct io_uring_cqe *c;
        int rc = io_uring_wait_cqe(&rb->ring, &c);
        if (rc == -EINTR)
            continue;
        if (rc < 0) {
            rb->broken = 1;
            return;
        }
        uint64_t i = io_uring_cqe_get_data64(c);
        if (i < (uint64_t)n)
            r[i].res = c->res;
        io_uring_cqe_seen(&rb->ring, c);
        got++;
    }
}

#else

void gf__read_batch_create(gf__read_batch **out, unsigned depth)
{
    (void)depth;
    *out = NULL;
}

void gf__read_batch_destroy(gf__read_batch *rb)
{
    (void)rb;
}

void gf__read_batch_run(gf__read_batch *rb, gf__batched_read *r, int n)
{
    (void)rb;
    for (int i = 0; i < n; i++)
        r[i].res = -EAGAIN;
}

#endif
