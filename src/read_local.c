/* The cell reader of local files (cell_reader.h), on gf-control: io_uring
 * reads a cell into a read buffer, or, POSIX, the decode thread preads it
 * (nothing here then). io = AUTO on io_uring: a cell's decode thread
 * first reads what the page cache holds (its bytes land in its core's
 * cache); a miss comes back here and waits for io_uring ahead of the
 * queued cells, its batch being older. gf__read_req_of also runs on
 * decode threads: it only reads the index, read-only after gf_open. */
#include "cell_reader.h"

#include "magic.h"

#include <stdlib.h>
#include <string.h>

typedef struct local {
    gf_loader *l;
    gf__uring *u; /* NULL: POSIX */
    bool page_cache_first;
    uint32_t gap, skip; /* the page cache's backoff (page_cache_try) */
    gf__cell_queue q;
    gf__read_done reaped[GF__REAP_BATCH];
} local;

void gf__read_req_of(gf_loader *l, uint64_t sample, gf__read_req *r)
{
    gf__dataset_extent(&l->ds, sample, &r->rel, &r->off, &r->len);
    /* A member's range has its header first (and a sample's text and
     * bytes members, with theirs): the cap is on the image member. */
    size_t header = gf__dataset_member(&l->ds, sample) ? (size_t)(r->len - l->ds.data_len[sample]) : 0;
    size_t max = l->s.max_file_bytes;
    /* A .tga has no magic: nothing to sniff; nor where the image need
     * not come first. */
    bool sniff = l->ds.n_var == 0 && !gf__name_is_tga(gf__dataset_path(&l->ds, sample));
    r->o = (gf__read_opts){
        .max_bytes = max && max <= SIZE_MAX - header ? max + header : max,
        .budget = &l->budget,
        .flags = (sniff ? GF__READ_SNIFF : 0) | (header ? GF__READ_TAR_HEADER : 0),
        .expect = gf__dataset_file_id(&l->ds, sample),
        .seen = gf__dataset_file_seen(&l->ds, sample)};
}

static int create(gf_loader *l, void **self)
{
    local *r = calloc(1, sizeof *r);
    if (!r || gf__cell_queue_alloc(&r->q, (uint32_t)l->js_cap) < 0) {
        free(r);
        return gf__fail(l, GF_ENOMEM, "out of memory allocating queues");
    }
    r->l = l;
    *self = r;
    return 0;
}

static void stop(void *self)
{
    local *r = self;
    gf__uring_destroy(r->u); /* waits for reads still in flight */
    r->u = NULL;
}

static void destroy(void *self)
{
    local *r = self;
    stop(r);
    free(r->q.cells);
    free(r);
}

static int restart(void *self)
{
    local *r = self;
    gf_loader *l = r->l;
    r->q.q.head = r->q.q.tail = 0;
    r->gap = r->skip = 0;
    r->page_cache_first = false;
    if (l->io == GF_IO_POSIX)
        return 0;
    char why[192] = "";
    int rc = gf__uring_create(&r->u, (unsigned)l->s.queue_depth, l->s.max_file_bytes, why,
                              sizeof why);
    if (rc < 0 && l->s.io == GF_IO_URING)
        return gf__fail_locking(l, GF_ENODEV, "io_uring requested but unavailable: %s", why);
    pthread_mutex_lock(&l->mu);
    l->io = rc < 0 ? GF_IO_POSIX : GF_IO_URING;
    pthread_mutex_unlock(&l->mu);
    /* reader.c's head says why AUTO tries the page cache first. */
    r->page_cache_first = r->u && l->s.io == GF_IO_AUTO;
    gf__uring_set_budget(r->u, &l->budget);
    return 0;
}

static void queue(local *r, gf__slot *sl, int c, bool first)
{
    if (!gf__cell_queue_push(&r->q, (uint32_t)(sl - r->l->slots), (uint32_t)c, first))
        gf__halt(r->l, GF_ENOMEM, "internal error: the read queue is full");
}

/* Cold data must not pay a failed try per sample. Warm (gap 0), every
 * cell tries the cache; after a miss, one cell tries and the next `gap`
 * go to io_uring straight, counted at dispatch, since outcomes come back
 * a ring's worth of cells later. The gap doubles with each miss up to
 * GAP_MAX, and a hit makes it 0. */
enum { GAP_MAX = 64 };

static bool page_cache_try(local *r)
{
    if (r->gap == 0)
        return true;
    if (r->skip > 0) {
        r->skip--;
        return false;
    }
    r->skip = r->gap;
    return true;
}

static int take(void *self, gf__slot *sl, int c, uint64_t pos, gf__cell_out *out, int max)
{
    local *r = self;
    (void)pos;
    assert(max >= 1);
    if (r->u && r->page_cache_first && page_cache_try(r)) {
        *out = gf__cell_out_of(r->l, sl, c);
        out->cached = true;
        return 1;
    }
    if (r->u) {
        queue(r, sl, c, false);
        return 0;
    }
    *out = gf__cell_out_of(r->l, sl, c);
    return 1;
}

static bool decoded(void *self, gf__slot *sl, int c, uint8_t page_cache)
{
    local *r = self;
    if (page_cache == GF__PAGE_CACHE_HIT) {
        r->gap = r->skip = 0;
        return false;
    }
    if (page_cache != GF__PAGE_CACHE_MISS)
        return false;
    if (r->gap == 0)
        r->skip = 1;
    r->gap = r->gap ? GF__MIN(2 * r->gap, GAP_MAX) : 1;
    queue(r, sl, c, true);
    return true;
}

static unsigned room(void *self)
{
    local *r = self;
    return gf__fifo_len(&r->q.q) ? gf__uring_room(r->u) : 0;
}

static int submit(void *self, gf__buf *buf)
{
    local *r = self;
    gf_loader *l = r->l;
    uint64_t cell = r->q.cells[gf__fifo_pop(&r->q.q)];
    uint64_t sample = (uint64_t)l->slots[cell >> 32].indices[(uint32_t)cell];
    gf__read_req q;
    gf__read_req_of(l, sample, &q);
    return gf__uring_submit_sample(r->u, l->ds.root_fd, q.rel, q.off, q.len, q.o.flags,
                                   q.o.expect, q.o.seen, buf, cell);
}

static int reap(void *self, gf__cell_out *out, int max, uint64_t *bytes)
{
    local *r = self;
    int n = 0, k;
    while (n == 0 && (k = gf__uring_reap(r->u, r->reaped, GF__MIN(max, GF__REAP_BATCH))) > 0) {
        for (int i = 0; i < k; i++) {
            gf__read_done *d = &r->reaped[i];
            *bytes += d->buf->got;
            out[n] = (gf__cell_out){.slot = (uint32_t)(d->user >> 32),
                                    .cell = (uint32_t)d->user,
                                    .err = d->err,
                                    .buf = d->buf};
            if (d->err)
                out[n].why = strdup(d->why[0] ? d->why : gf_strerror(d->err));
            n++;
        }
    }
    return n;
}

static int poll_fd(void *self)
{
    return gf__uring_eventfd(((local *)self)->u);
}

static bool uses_buffers(void *self)
{
    return ((local *)self)->u != NULL;
}

const gf__cell_reader_ops gf__local_reader = {
    .create = create,
    .destroy = destroy,
    .restart = restart,
    .stop = stop,
    .take = take,
    .decoded = decoded,
    .room = room,
    .submit = submit,
    .reap = reap,
    .poll_fd = poll_fd,
    .uses_buffers = uses_buffers,
};
