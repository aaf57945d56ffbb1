/*
 * The io_uring reader, driven by the controller thread (one owner; see
 * reader.h). Built only where meson found liburing (GF_HAVE_URING).
 *
 * Opening and fstat() happen synchronously in gf__uring_submit (metadata
 * is cached and both are cheaper than an extra linked SQE round trip); the
 * read of the whole file is one IORING_OP_READ, resubmitted for the rest on
 * a short read. Completions wake the controller through an eventfd. With
 * GF__READ_SNIFF a large file is read in two parts, its first bytes and,
 * when they are an image's, the rest; each part's buffer growth passes
 * the read budget, and one it refuses waits here, retried at each reap.
 *
 * Invariant: a request record is in exactly one of four states — free (on
 * the free list), failed (on the error list, waiting to be reaped, no fd),
 * waiting (on the wait list, its fd open, for the budget to let its
 * buffer grow; no SQE) or in flight (the kernel may write into its
 * buffer; an SQE or CQE for it exists). A buffer is never grown, freed or
 * handed back while its record is in flight.
 */
#include "reader_internal.h"

#include "magic.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* The kernel's writes through io_uring are invisible to memcheck; tell it
 * the bytes are defined. The client request is a few no-op instructions
 * when not running under valgrind. */
#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define GF__MARK_DEFINED(p, n) VALGRIND_MAKE_MEM_DEFINED((p), (n))
#endif
#endif
#ifndef GF__MARK_DEFINED
#define GF__MARK_DEFINED(p, n) ((void)(p), (void)(n))
#endif
/* One IORING_OP_READ moves at most this much; Linux caps a single read
 * near 2 GiB anyway and the rest arrives as a short read. */
#define GF__READ_CHUNK ((size_t)1 << 30)
#define GF__NIL UINT32_MAX

enum { REQ_FREE, REQ_FAILED, REQ_WAITING, REQ_INFLIGHT };

typedef struct req {
    gf__buf *buf;
    uint64_t user;
    size_t size, off;  /* bytes to read; bytes read so far */
    size_t part_end;   /* end of the part being read (GF__READ_SNIFF) */
    unsigned flags;    /* GF__READ_* */
    int waited;        /* held back by the budget once already */
    uint64_t base;     /* file offset of the first byte to read */
    int ranged;        /* a member of a shard, not a whole file */
    int fd;
    int state;
    int err;
    uint32_t next;     /* free, error or wait list */
    int cleared_nonblock;
    char why[160];
} req;

struct gf__uring {
    struct io_uring ring;
    int efd;
    unsigned depth;
    unsigned used;       /* records not free */
    unsigned inflight;   /* records in REQ_INFLIGHT */
    size_t max_bytes;
    gf__budget *budget;  /* NULL: none */
    uint32_t free_head;
    uint32_t err_head, err_tail;
    uint32_t wait_head, wait_tail;
    req *reqs;           /* depth records; SQE user_data = index */
};

int gf__have_uring(void)
{
    return 1;
}

/* Why io_uring_queue_init failed, in words an operator can act on. */
static GF__COLD void setup_why(int e, char *why, size_t why_len)
{
    char tmp[96];
    switch (e) {
    case ENOSYS:
        gf__why(why, why_len,
                "io_uring unavailable: kernel too old or built without io_uring "
                "(ENOSYS)");
        break;
    case EPERM: {
        int disabled = -1;
        FILE *f = fopen("/proc/sys/kernel/io_uring_disabled", "re");
        if (f) {
            if (fscanf(f, "%d", &disabled) != 1)
                disabled = -1;
            fclose(f);
        }
        if (disabled > 0)
            gf__why(why, why_len,
                    "io_uring disabled by /proc/sys/kernel/io_uring_disabled=%d "
                    "(EPERM)",
                    disabled);
        else
            gf__why(why, why_len,
                    "io_uring denied (EPERM): blocked by a seccomp filter or "
                    "container policy, or /proc/sys/kernel/io_uring_disabled");
        break;
    }
    case EINVAL:
        gf__why(why, why_len,
                "io_uring setup rejected (EINVAL): kernel too old for these "
                "parameters");
        break;
    case ENOMEM:
        gf__why(why, why_len,
                "io_uring setup out of memory (ENOMEM): on kernels before 5.12 "
                "raise RLIMIT_MEMLOCK (ulimit -l)");
        break;
    default:
        gf__why(why, why_len, "io_uring setup failed: %s", gf__errtext(e, tmp, sizeof tmp));
        break;
    }
}

int gf__uring_create(gf__uring **out, unsigned queue_depth, size_t max_bytes,
                     char *why, size_t why_len)
{
    if (why && why_len)
        why[0] = 0;
    if (!out) {
        gf__why(why, why_len, "NULL output pointer");
        return GF_EINVAL;
    }
    *out = NULL;
    if (queue_depth < 1 || queue_depth > 32768) {
        gf__why(why, why_len, "queue depth %u not in 1..32768", queue_depth);
        return GF_EINVAL;
    }
    gf__uring *u = calloc(1, sizeof *u);
    req *reqs = calloc(queue_depth, sizeof *reqs);
    if (!u || !reqs) {
        free(u);
        free(reqs);
        gf__why(why, why_len, "out of memory for %u io_uring requests", queue_depth);
        return GF_ENOMEM;
    }
    u->reqs = reqs;
    u->depth = queue_depth;
    u->max_bytes = gf__effective_max(max_bytes);
    u->efd = -1;

    /* SQ entries >= depth, so io_uring_get_sqe never runs dry while at most
     * depth records are in flight; the CQ (2x) cannot overflow either. */
    int ret = io_uring_queue_init(queue_depth, &u->ring, 0);
    if (ret < 0) {
        setup_why(-ret, why, why_len);
        free(reqs);
        free(u);
        return GF_ENODEV;
    }

    int err = 0;
    char tmp[96];
    struct io_uring_probe *probe = io_uring_get_probe_ring(&u->ring);
    if (!probe || !io_uring_opcode_supported(probe, IORING_OP_READ)) {
        gf__why(why, why_len,
                "kernel too old: io_uring lacks IORING_OP_READ (needs Linux 5.6)");
        err = GF_ENODEV;
    }
    if (probe)
        io_uring_free_probe(probe);
    if (!err) {
        u->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (u->efd < 0) {
            gf__why(why, why_len, "eventfd: %s", gf__errtext(errno, tmp, sizeof tmp));
            err = GF_ENODEV;
        } else if ((ret = io_uring_register_eventfd(&u->ring, u->efd)) < 0) {
            gf__why(why, why_len, "io_uring_register_eventfd: %s",
                    gf__errtext(-ret, tmp, sizeof tmp));
            err = GF_ENODEV;
        }
    }
    if (err) {
        io_uring_queue_exit(&u->ring);
        if (u->efd >= 0)
            close(u->efd);
        free(reqs);
        free(u);
        return err;
    }

    for (unsigned i = 0; i < queue_depth; i++) {
        reqs[i].fd = -1;
        reqs[i].next = i + 1 < queue_depth ? i + 1 : GF__NIL;
    }
    u->free_head = 0;
    u->err_head = u->err_tail = GF__NIL;
    u->wait_head = u->wait_tail = GF__NIL;
    *out = u;
    return 0;
}

static void signal_efd(gf__uring *u)
{
    /* Only fails if the counter would overflow, and then it is readable. */
    (void)eventfd_write(u->efd, 1);
}

static void put_free(gf__uring *u, uint32_t i)
{
    req *r = &u->reqs[i];
    assert(r->fd < 0 && u->used > 0);
    r->state = REQ_FREE;
    r->buf = NULL;
    r->fd = -1;
    r->next = u->free_head;
    u->free_head = i;
    u->used--;
}

void gf__uring_set_budget(gf__uring *u, gf__budget *g)
{
    if (u)
        u->budget = g;
}

/* Appends record i to the list (*head, *tail). */
static void list_push(gf__uring *u, uint32_t *head, uint32_t *tail, uint32_t i)
{
    u->reqs[i].next = GF__NIL;
    if (*tail == GF__NIL)
        *head = i;
    else
        u->reqs[*tail].next = i;
    *tail = i;
}

static uint32_t list_pop(gf__uring *u, uint32_t *head, uint32_t *tail)
{
    uint32_t i = *head;
    *head = u->reqs[i].next;
    if (*head == GF__NIL)
        *tail = GF__NIL;
    return i;
}

static void push_failed(gf__uring *u, uint32_t i)
{
    req *r = &u->reqs[i];
    assert(r->err && r->fd < 0); /* failed: no fd */
    r->state = REQ_FAILED;
    list_push(u, &u->err_head, &u->err_tail, i);
}

/* Queues the read of the rest of r's current part. Returns 0, or -1 if no SQE (cannot
 * happen while depth <= SQ entries; handled anyway). */
static int queue_read(gf__uring *u, uint32_t i)
{
    req *r = &u->reqs[i];
    assert(r->fd >= 0 && r->off < r->part_end && r->part_end <= r->size);
    struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
    if (!sqe) {
        io_uring_submit(&u->ring);
        sqe = io_uring_get_sqe(&u->ring);
        if (!sqe)
            return -1;
    }
    size_t n = GF__MIN(r->part_end - r->off, GF__READ_CHUNK);
    io_uring_prep_read(sqe, r->fd, r->buf->data + r->off, (unsigned)n, r->base + r->off);
    sqe->user_data = i;
    return 0;
}

/* Grows r's buffer for its current part and queues the read. Returns 0
 * (queued), GF__BUDGET_LATER (the budget refused; r->off is 0 if that
 * dropped the first part), or an error, set in r with its reason. */
static int start_part(gf__uring *u, uint32_t i)
{
    req *r = &u->reqs[i];
    size_t kept = r->off;
    int rc = gf__buf_reserve(r->buf, r->part_end, &kept, u->max_bytes, u->budget, 0,
                             &r->waited, r->why, sizeof r->why);
    r->off = kept; /* 0 if the first part was dropped to wait: read again */
    if (rc == GF__BUDGET_LATER)
        return rc;
    if (!rc && queue_read(u, i) != 0) {
        gf__why(r->why, sizeof r->why, "io_uring submission queue full");
        rc = GF_EIO;
    }
    r->err = rc;
    return rc;
}

/* Record i, its fd open, leaves the states it was in for the one
 * start_part's result rc puts it in. */
static void after_start(gf__uring *u, uint32_t i, int rc)
{
    req *r = &u->reqs[i];
    if (rc == 0) {
        r->state = REQ_INFLIGHT;
        u->inflight++;
    } else if (rc == GF__BUDGET_LATER) {
        r->state = REQ_WAITING;
        list_push(u, &u->wait_head, &u->wait_tail, i);
    } else {
        close(r->fd);
        r->fd = -1;
        push_failed(u, i);
    }
}

/* Hands SQEs to the kernel. On failure they stay queued in the SQ ring;
 * the eventfd is signalled so that the next reap retries. */
static void flush(gf__uring *u)
{
    if (!io_uring_sq_ready(&u->ring))
        return;
    int ret;
    do
        ret = io_uring_submit(&u->ring);
    while (ret == -EINTR);
    if (ret < 0)
        signal_efd(u);
}

int gf__uring_submit_sample(gf__uring *u, int root_fd, const char *rel, uint64_t offset,
                            uint64_t length, unsigned flags, const gf__file_id *expect,
                            gf__file_seen *seen, gf__buf *buf, uint64_t user)
{
    if (!u || !rel || !buf || u->free_head == GF__NIL)
        return GF_EINVAL;
    /* Growing a buffer the kernel is writing into would be a use after
     * free; refuse it. O(depth) compares next to three syscalls. */
    for (unsigned k = 0; k < u->depth; k++)
        if (u->reqs[k].state != REQ_FREE && u->reqs[k].buf == buf)
            return GF_EINVAL;

    uint32_t i = u->free_head;
    req *r = &u->reqs[i];
    assert(r->state == REQ_FREE && r->fd < 0);
    u->free_head = r->next;
    u->used++;
    r->buf = buf;
    r->user = user;
    r->off = 0;
    r->err = 0;
    r->why[0] = 0;
    r->cleared_nonblock = 0;
    r->waited = 0;
    r->flags = flags;
    r->ranged = length != GF__WHOLE_FILE;
    r->base = r->ranged ? offset : 0;
    buf->len = buf->got = 0;

    r->err = gf__open_sized(root_fd, rel, offset, length, u->max_bytes, expect, seen, &r->fd,
                            &r->size, r->why, sizeof r->why);
    if (r->err) {
        push_failed(u, i);
        signal_efd(u);
        return 0;
    }
    r->part_end = gf__first_part(r->size, flags);
    /* Behind reads already waiting: the budget serves them in order. */
    int rc = u->wait_head != GF__NIL ? GF__BUDGET_LATER : start_part(u, i);
    after_start(u, i, rc);
    if (rc < 0)
        signal_efd(u);
    flush(u);
    return 0;
}

/* Hands back a failed or finished record: its fd is closed, the kernel
 * no longer writes into its buffer. */
static void deliver(gf__uring *u, uint32_t i, gf__read_done *d)
{
    req *r = &u->reqs[i];
    assert(r->state == REQ_FAILED || (r->state == REQ_INFLIGHT && r->fd < 0));
    d->user = r->user;
    d->buf = r->buf;
    d->err = r->err;
    memcpy(d->why, r->why, sizeof d->why);
    r->buf->len = r->err ? 0 : r->size;
    put_free(u, i);
}

/* Handles one CQE. Returns 1 if request i finished (closed, its error set),
 * 0 if it was requeued. */
static int on_cqe(gf__uring *u, uint32_t i, int res)
{
    req *r = &u->reqs[i];
    char tmp[96];
    if (res > 0) {
        GF__MARK_DEFINED(r->buf->data + r->off, (size_t)res);
        r->off += (size_t)res;
        r->buf->got += (size_t)res;
        if (r->off >= r->size)
            goto finished;
        if (r->off >= r->part_end) {
            /* The first part is in: an image's, or the file is refused. */
            size_t skip = gf__sniff_skip(r->flags);
            if ((r->err = gf__sniff_refuses(r->buf->data + skip, r->off - skip, r->why,
                                            sizeof r->why)))
                goto finished;
            r->part_end = r->size;
            int rc = start_part(u, i);
            if (rc == GF__BUDGET_LATER) {
                u->inflight--;
                r->state = REQ_WAITING;
                list_push(u, &u->wait_head, &u->wait_tail, i);
                return 0;
            }
            if (rc == 0)
                return 0;
            goto finished;
        }
        if (queue_read(u, i) == 0)
            return 0;
        gf__why(r->why, sizeof r->why, "io_uring submission queue full");
        r->err = GF_EIO;
    } else if (res == 0 && r->ranged) {
        gf__why(r->why, sizeof r->why,
                "shard ended inside member: %zu of %zu bytes at offset %llu", r->off,
                r->size, (unsigned long long)r->base);
        r->err = GF_ETRUNC;
    } else if (res == 0) {
        gf__why(r->why, sizeof r->why, "file shrank while reading: %zu of %zu bytes",
                r->off, r->size);
        r->err = GF_EIO;
    } else if (res == -EINTR || (res == -EAGAIN && !r->cleared_nonblock)) {
        /* -EAGAIN: a file system without non-blocking reads honours the
         * O_NONBLOCK we opened with; clear it once and retry. */
        if (res == -EAGAIN) {
            int fl = fcntl(r->fd, F_GETFL);
            if (fl >= 0)
                fcntl(r->fd, F_SETFL, fl & ~O_NONBLOCK);
            r->cleared_nonblock = 1;
        }
        if (queue_read(u, i) == 0)
            return 0;
        gf__why(r->why, sizeof r->why, "io_uring submission queue full");
        r->err = GF_EIO;
    } else {
        gf__why(r->why, sizeof r->why, "read at byte %zu: %s", r->off,
                gf__errtext(-res, tmp, sizeof tmp));
        r->err = GF_EIO;
    }
finished:
    close(r->fd);
    r->fd = -1;
    u->inflight--;
    return 1;
}

int gf__uring_reap(gf__uring *u, gf__read_done *done, int max)
{
    if (!u || !done || max <= 0)
        return 0;
    /* Drain first, then look: a completion that lands after the peek
     * signals the eventfd again, so none is ever left unsignalled. */
    eventfd_t v;
    (void)eventfd_read(u->efd, &v);
    /* Reads the budget held back, in order, while it lets them. */
    while (u->wait_head != GF__NIL) {
        int rc = start_part(u, u->wait_head);
        if (rc == GF__BUDGET_LATER)
            break;
        after_start(u, list_pop(u, &u->wait_head, &u->wait_tail), rc);
    }
    flush(u); /* these, and SQEs a failed submit left queued */

    int n = 0;
    while (n < max && u->err_head != GF__NIL)
        deliver(u, list_pop(u, &u->err_head, &u->err_tail), &done[n++]);
    while (n < max) {
        struct io_uring_cqe *cqe;
        if (io_uring_peek_cqe(&u->ring, &cqe) != 0)
            break;
        uint32_t i = (uint32_t)cqe->user_data;
        int res = cqe->res;
        io_uring_cqe_seen(&u->ring, cqe);
        if (i >= u->depth || u->reqs[i].state != REQ_INFLIGHT)
            continue; /* not ours; cannot happen */
        if (on_cqe(u, i, res))
            deliver(u, i, &done[n++]);
    }
    flush(u); /* requeued short reads */
    if (u->err_head != GF__NIL || io_uring_cq_ready(&u->ring))
        signal_efd(u); /* done[] was full: the caller must come back */
    return n;
}

void gf__uring_destroy(gf__uring *u)
{
    if (!u)
        return;
    while (u->inflight > 0) {
        struct io_uring_cqe *cqe;
        /* submit_and_wait also hands over SQEs a failed submit left queued. */
        int ret = io_uring_submit_and_wait(&u->ring, 1);
        if (ret == -EINTR)
            continue;
        if (ret >= 0)
            ret = io_uring_peek_cqe(&u->ring, &cqe);
        if (ret == -EAGAIN)
            continue;
        if (ret < 0)
            break; /* the ring is broken; queue_exit below still tears it down */
        uint32_t i = (uint32_t)cqe->user_data;
        io_uring_cqe_seen(&u->ring, cqe);
        if (i < u->depth && u->reqs[i].state == REQ_INFLIGHT) {
            req *r = &u->reqs[i];
            close(r->fd);
            r->fd = -1;
            r->state = REQ_FREE;
            u->inflight--;
        }
    }
    while (u->wait_head != GF__NIL)
        close(u->reqs[list_pop(u, &u->wait_head, &u->wait_tail)].fd);
    io_uring_queue_exit(&u->ring);
    close(u->efd);
    free(u->reqs);
    free(u);
}

int gf__uring_eventfd(const gf__uring *u)
{
    return u ? u->efd : -1;
}

unsigned gf__uring_room(const gf__uring *u)
{
    assert(!u || (u->inflight <= u->used && u->used <= u->depth));
    return u ? u->depth - u->used : 0;
}
