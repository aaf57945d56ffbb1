/* Starting work on a cell (src/dispatch.c): the cell's sample from the
 * cursor, then an io_uring read or a decode job. The one place a decode
 * job or a read of a sample is described: the controller's dispatch and
 * reaped reads, a decode thread's pread, io_uring's submission. */
#ifndef GF_DISPATCH_H
#define GF_DISPATCH_H

#include "loader_impl.h"

/* How a sample's bytes are read, alike by pread and by io_uring. */
typedef struct gf__read_req {
    const char *rel;
    uint64_t off, len;
    gf__read_opts o;
} gf__read_req;

void gf__read_req_of(gf_loader *l, uint64_t sample, gf__read_req *r);

/* js holds one job per cell at most (l->js_cap): a cell has one read or
 * decode outstanding, and a converting slot has no cell outstanding. */
static inline gf__job *gf__add_job(gf_loader *l, gf__job *js, int *n_jobs)
{
    assert(*n_jobs < l->js_cap);
    (void)l;
    return &js[(*n_jobs)++];
}

/* Controller: the job that decodes cell c of sl (its bytes in buf, read
 * by io_uring, or NULL: the decode thread reads them). */
gf__job gf__decode_job(gf_loader *l, gf__slot *sl, int c, gf__buf *buf);

/* Controller: starts work on cell c of sl at sampler position pos: an
 * io_uring read, or a decode job appended to js (with l->page_cache_first, a
 * cached one unless recent ones missed). */
void gf__dispatch_cell(gf_loader *l, gf__job *js, int *n_jobs, gf__slot *sl, int c, uint64_t pos);

/* Controller: cell c of sl waits for an io_uring (or remote) read; first:
 * ahead of those queued (a cached job's miss: its batch is older). */
void gf__queue_read(gf_loader *l, gf__slot *sl, int c, bool first);

/* Controller: a cached job's read found its bytes in the page cache
 * (hit), or not (its cell goes to gf__queue_read). */
void gf__page_cache_outcome(gf_loader *l, bool hit);

#endif
