/* Reads whole files: io_uring with many reads in flight, or pread(). */
#ifndef GF_READER_H
#define GF_READER_H

#include "common.h"

#include <pthread.h>
#include <sys/uio.h>
#include <stdatomic.h>
#include <stdbool.h>

/* A read buffer. Grow-only: reused across samples, so the steady state
 * allocates nothing. Contents are not kept when it grows. */
typedef struct gf__buf {
    uint8_t *data;
    size_t len, cap;
    size_t got; /* bytes the last read took from the file, failed ones too */
    bool mapped; /* data is gf__buf_map's mapping, not malloc's */
    /* Sized to each read, not doubled: a one-off buffer handed to a caller
     * (gf_index_read). Doubled, a 96 KiB file took a 128 KiB block, past
     * malloc's mmap threshold: a fresh mapping, faulted in and unmapped
     * (a TLB shootdown) for every sample. */
    bool exact;
} gf__buf;

/* Frees b->data and zeroes *b. NULL is a no-op. */
void gf__buf_free(gf__buf *b);

/* b's memory becomes an anonymous mapping of cap bytes (rounded up to a
 * page), its old memory freed: for whole remote shards, so a dropped one
 * goes back to the system at once instead of staying in malloc's heap
 * (where glibc's moving mmap threshold put it). GF_ENOMEM: b freed. */
int gf__buf_map(gf__buf *b, size_t cap);

/* What a file was when the index was made: a read checks it (one fstat,
 * the one the open makes anyway), so a file replaced (mv) or rewritten
 * since is an error, not another file's bytes under this one's labels. */
typedef struct gf__file_id {
    uint64_t dev, ino, size;
    int64_t mtime_s, mtime_ns;
} gf__file_id;

/* What a folder or list sample's file was (16 bytes a sample): ino from
 * the folder walk's readdir (0: unknown, lists), stamp 0 until the first
 * read records it (bit 63 | 23-bit hash of device and mtime << 40 | size,
 * capped at 2^40 - 1). A read records what is missing, then checks the
 * rest: a file replaced (mv) since indexing, or grown, shrunk or touched
 * since its first read, is GF_EIO "changed since it was indexed". Written
 * by whichever thread reads first (relaxed atomics: each word stands
 * alone), so no syscall beyond the open's fstat. */
#define GF__SEEN_SIZE_MAX ((1ull << 40) - 1)
typedef struct gf__file_seen {
    _Atomic uint64_t ino, stamp;
} gf__file_seen;

/* The read budget: a cap on the bytes a loader's read buffers hold
 * (settings.read_budget_bytes). Every growth of a buffer passes it; a
 * buffer over `keep` bytes belongs to one read in flight and is freed when
 * that sample is done (gf__budget_done), so the small ones left between
 * reads hold at most limit / 2 in all. A growth that would take `held`
 * past `limit` waits (or, for the io_uring reader, is retried later) while
 * another such large buffer is in use; with none, it proceeds alone, so a
 * file larger than the budget still gets read. Thread-safe. */
typedef struct gf__budget {
    pthread_mutex_t mu;
    pthread_cond_t freed;   /* a large buffer was freed, or cancel raised */
    size_t limit, keep;
    size_t held;            /* capacity of every buffer */
    size_t big;             /* of which buffers over keep */
    size_t peak;            /* the most held at once */
    uint64_t waits;         /* reads held back for the budget */
    const atomic_int *cancel; /* raised: waiting reads give up */
} gf__budget;

/* buffers: how many buffers will share it (keep = limit / (2 buffers)). */
void gf__budget_init(gf__budget *g, size_t limit, unsigned buffers, const atomic_int *cancel);
void gf__budget_destroy(gf__budget *g);
/* With every buffer freed and no read in flight: starts counting again
 * for `buffers` buffers (the peak and waits stay). */
void gf__budget_restart(gf__budget *g, unsigned buffers);
/* After each use of b (its read failed, or its sample is decoded): frees
 * it if it is large. */
void gf__budget_done(gf__budget *g, gf__buf *b);
/* With *cancel raised: wakes reads waiting for the budget. */
void gf__budget_wake(gf__budget *g);
void gf__budget_stats(gf__budget *g, uint64_t *peak, uint64_t *waits);

/* A file larger than this is read in two parts: these first bytes, then,
 * if GF__READ_SNIFF finds them an image, the rest. */
#define GF__SNIFF_BYTES ((size_t)64 << 10)

/* gf__read_sample flags. SNIFF: refuse a file (or member) larger than
 * GF__SNIFF_BYTES whose first bytes are no image magic (magic.h) with
 * GF_EFORMAT "not an image of a known format", before reading the rest.
 * The caller leaves it out for a name ending in .tga (no magic). NOWAIT:
 * read only what the page cache holds (preadv2 RWF_NOWAIT), never waiting
 * for the disk or the budget: GF__READ_UNCACHED when it would have. */
/* TAR_HEADER: the range starts with the member's 512-byte tar header
 * block (its caller checks it): SNIFF looks at the bytes after it. */
enum { GF__READ_SNIFF = 1, GF__READ_NOWAIT = 2, GF__READ_TAR_HEADER = 4 };

/* gf__read_sample under GF__READ_NOWAIT: not every byte was in the page
 * cache (or the budget, or the kernel's RWF_NOWAIT, said no); nothing is
 * wrong with the sample, read it again without the flag. Not a GF_E*. */
#define GF__READ_UNCACHED 2

/* A decode thread's open shards: a ranged read of a file it has read
 * before reuses that file's descriptor, opened and checked (a regular
 * file, its identity) once, instead of an open, an fstat and a close a
 * member. It is fstat'ed against what was indexed again when its last
 * check is GF__FD_CHECK_S old, so a shard rewritten in place is caught
 * within that much of reading; every read still checks its members'
 * headers (and CRCs where a sidecar has them). Direct-mapped by file number; one thread's alone. A file replaced (mv)
 * while its descriptor is kept is read as it was indexed, through it;
 * the loader drops them at each start (gf_seek), so one replaced before
 * is an error. */
typedef struct gf__fd_cache_entry {
    int fd;        /* -1: empty */
    uint32_t file;
    double checked; /* gf__now() of its last fstat */
} gf__fd_cache_entry;
/* How long a kept descriptor's last check holds: reads within it skip the
 * fstat (a syscall, as costly as the read of a small member). */
#define GF__FD_CHECK_S 0.002
typedef struct gf__fd_cache {
    gf__fd_cache_entry *e;
    uint32_t n;
} gf__fd_cache;
/* n entries (0: none, every read opens). 0 or GF_ENOMEM. */
int gf__fd_cache_init(gf__fd_cache *c, uint32_t n);
/* Closes every descriptor, keeping the table. */
void gf__fd_cache_drop(gf__fd_cache *c);
/* Closes every descriptor and frees it; safe on a zeroed cache. */
void gf__fd_cache_free(gf__fd_cache *c);

/* How a loader reads its samples. */
typedef struct gf__read_opts {
    size_t max_bytes;   /* 0: no cap */
    gf__budget *budget; /* NULL: none */
    unsigned flags;     /* GF__READ_* */
    const gf__file_id *expect; /* NULL, or the file must still be this one:
                           else GF_EIO "changed since it was indexed" */
    gf__file_seen *seen; /* NULL, or a folder/list sample's record, as above */
    gf__fd_cache *fds;  /* NULL, or a ranged read with expect set keeps
                           file `file`'s descriptor open here */
    uint32_t file;
    double now;         /* gf__now() at the read's start (0: it asks) */
    /* Parts of the range read straight to where they are wanted (an
     * array's data into its batch tensor), in order, not overlapping:
     * the buffer keeps the range's layout, those bytes left unwritten. */
    const struct gf__read_hole *holes;
    int n_holes;
} gf__read_opts;

typedef struct gf__read_hole {
    size_t at, len; /* within the range */
    uint8_t *dst;
} gf__read_hole;

/* A decode thread's batch of small ranged reads through an io_uring of
 * its own (read_batch.c): one system call for them all, each from the
 * page cache only; whatever it does not read whole is read the usual
 * way (gf__read_sample, or the controller's io_uring), which names any
 * error. Where a system call costs as much as a small read (a VM's), it
 * halves a latent's cost. */
typedef struct gf__read_batch gf__read_batch;

/* A range's iovecs: its buffer's parts and up to 8 holes (GF__FIELDS_MAX). */
#define GF__READ_IOV_MAX 17

typedef struct gf__batched_read {
    int fd;
    uint64_t offset;
    size_t len;
    struct iovec v[GF__READ_IOV_MAX];
    int nv;
    int res; /* gf__read_batch_run's: the bytes read, or -errno */
} gf__batched_read;

/* *out a ring of depth entries, or NULL (no io_uring here, or none to be
 * had): the caller reads one at a time. Never fails otherwise. */
void gf__read_batch_create(gf__read_batch **out, unsigned depth);
void gf__read_batch_destroy(gf__read_batch *rb);
/* Reads r[0, n) (n <= depth) at once, RWF_NOWAIT, and waits for them all:
 * each r[i].res (-EAGAIN for any the ring could not take). */
void gf__read_batch_run(gf__read_batch *rb, gf__batched_read *r, int n);

/* A ranged read made ready for a batch: its descriptor from o->fds (o->fds
 * and o->expect required), the checks gf__read_sample makes, b reserved
 * (never waiting for the budget), r's iovecs over b and o's holes. 0, or
 * nonzero: read it the usual way. */
int gf__read_prepare(int root_fd, const char *rel, uint64_t offset, uint64_t length,
                     const gf__read_opts *o, gf__buf *b, gf__batched_read *r, char *why,
                     size_t why_len);
/* After the batch: 0 with b->len the range's length when all of it was
 * read, else GF__READ_UNCACHED (read it the usual way). */
int gf__read_finish(const gf__batched_read *r, gf__buf *b);

/* Blocking read of root_fd/rel (openat rules: rel may be absolute, root_fd
 * may be AT_FDCWD) into b, grown as needed; b->len is the file size, or 0
 * on failure. max_bytes caps the file size (0 = no cap); an oversized file
 * is refused before anything is allocated or read. Returns 0, GF_ENOENT,
 * GF_EIO (not a regular file, permission, I/O error, file shrank while
 * reading), GF_EEMPTY, GF_ETOOBIG, GF_ENOMEM or GF_EINVAL, with the reason
 * (without the path) in why. Never blocks on a FIFO. Thread-safe. */
int gf__read_file(int root_fd, const char *rel, gf__buf *b, size_t max_bytes,
                  char *why, size_t why_len);

/* As length for a range: the whole file (gf__read_file's behaviour). */
#define GF__WHOLE_FILE UINT64_MAX

/* Blocking read of exactly length bytes at offset of root_fd/rel (a member
 * of a tar shard) into b; b->len = length, or 0 on failure. length
 * GF__WHOLE_FILE is gf__read_file. Checked before anything is allocated:
 * length 0 is GF_EEMPTY ("member is empty"), over max_bytes GF_ETOOBIG, a
 * range past the end of the file GF_ETRUNC ("shard ended inside member");
 * a short read is GF_ETRUNC too. Otherwise as gf__read_file. */
int gf__read_range(int root_fd, const char *rel, uint64_t offset, uint64_t length,
                   gf__buf *b, size_t max_bytes, char *why, size_t why_len);
/* gf__read_range under o: its budget (blocks while the budget is spent
 * by other reads; GF_EIO "cancelled" once o->budget's cancel is raised)
 * and flags; with GF__READ_NOWAIT it may return GF__READ_UNCACHED. */
int gf__read_sample(int root_fd, const char *rel, uint64_t offset, uint64_t length,
                    const gf__read_opts *o, gf__buf *b, char *why, size_t why_len);

/* The io_uring reader; owned and driven by one thread (create, submit,
 * reap and destroy may be called from different threads only if the
 * caller orders them, e.g. destroy after joining the owner). */
typedef struct gf__uring gf__uring;

typedef struct gf__read_done {
    uint64_t user;       /* as submitted */
    gf__buf *buf;        /* as submitted, filled: buf->len bytes (0 on error) */
    int err;             /* 0 or GF_E* as gf__read_file returns them */
    char why[160];       /* reason when err != 0, else "" */
} gf__read_done;

/* queue_depth: reads in flight at most (1 .. 32768); max_bytes as for
 * gf__read_file. Returns 0, GF_EINVAL, GF_ENOMEM, or GF_ENODEV when this
 * build or kernel has no usable io_uring (ENOSYS: kernel too old; EPERM:
 * io_uring_disabled sysctl or seccomp; EINVAL; ENOMEM: RLIMIT_MEMLOCK on
 * old kernels; no IORING_OP_READ before Linux 5.6), with why. */
int gf__uring_create(gf__uring **out, unsigned queue_depth, size_t max_bytes,
                     char *why, size_t why_len);
/* Buffers grow within g from now on (NULL: no budget); a growth the
 * budget refuses waits inside the reader and is retried at each reap. */
void gf__uring_set_budget(gf__uring *u, gf__budget *g);
/* Waits for reads still in flight (so the kernel no longer writes into any
 * submitted buffer), closes their files and frees the reader; their
 * completions are dropped. The buffers stay the caller's. NULL is a no-op. */
void gf__uring_destroy(gf__uring *u);
/* eventfd (non-blocking) that becomes readable when gf__uring_reap has
 * something to return; gf__uring_reap drains it. -1 without io_uring. */
int gf__uring_eventfd(const gf__uring *u);
/* Free submission capacity (reads that may still be started): queue_depth
 * minus reads submitted and not yet returned by gf__uring_reap. */
unsigned gf__uring_room(const gf__uring *u);
/* Starts reading root_fd/rel into buf: opens and sizes the file now
 * (synchronously), reads it asynchronously. buf must not be touched until
 * its completion is reaped. Open/size errors complete through
 * gf__uring_reap like any other (and signal the eventfd). Returns 0, or
 * GF_EINVAL when full (room is 0), on NULL arguments, or when buf already
 * has a read in flight. */
int gf__uring_submit(gf__uring *u, int root_fd, const char *rel, gf__buf *buf,
                     uint64_t user);
/* gf__uring_submit for length bytes at offset (GF__WHOLE_FILE: the whole
 * file); range errors as gf__read_range reports them. */
int gf__uring_submit_range(gf__uring *u, int root_fd, const char *rel, uint64_t offset,
                           uint64_t length, gf__buf *buf, uint64_t user);
/* gf__uring_submit_range with GF__READ_* flags, and expect and seen as
 * gf__read_opts has it (kept by the caller until the read is reaped). */
int gf__uring_submit_sample(gf__uring *u, int root_fd, const char *rel, uint64_t offset,
                            uint64_t length, unsigned flags, const gf__file_id *expect,
                            gf__file_seen *seen, gf__buf *buf, uint64_t user);
/* Finished reads, without blocking; returns how many were written to done
 * (at most max). If more remain, the eventfd stays readable. */
int gf__uring_reap(gf__uring *u, gf__read_done *done, int max);
/* 1 if built with io_uring. */
int gf__have_uring(void);

#endif
