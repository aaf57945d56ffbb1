/* The cell reader of remote samples one ranged GET each (cell_reader.h),
 * the global order's: a cell waits in the read queue for a request and a
 * read buffer, then the fetcher (remote_fetch.h) brings its member's
 * bytes, header block first, as a local member's read does. On
 * gf-control; built with `remote` only. */
#include "cell_reader.h"

#include "dataset_indexers.h"

#include <stdlib.h>
#include <string.h>

typedef struct ranged {
    gf_loader *l;
    gf__fetcher *f; /* this run's, from start to stop */
    gf__cell_queue q;
    gf__read_done reaped[GF__REAP_BATCH];
} ranged;

static int create(gf_loader *l, void **self)
{
    ranged *r = calloc(1, sizeof *r);
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
    ranged *r = self;
    gf__fetcher_destroy(r->f);
    r->f = NULL;
}

static void destroy(void *self)
{
    ranged *r = self;
    stop(r);
    free(r->q.cells);
    free(r);
}

static int restart(void *self)
{
    ranged *r = self;
    r->q.q.head = r->q.q.tail = 0;
    return 0;
}

static int start(void *self, const gf__reader_hooks *h)
{
    ranged *r = self;
    char why[192] = "";
    gf__fetch_opts o = gf__remote_fetch_opts(&r->l->s, &r->l->ds);
    o.progress = h->ready;
    o.progress_ctx = h->ctx;
    int rc = gf__fetcher_create(&r->f, h->loop, &o, why, sizeof why);
    return rc < 0 ? gf__fail_locking(r->l, rc, "remote reads: %s", why) : 0;
}

static void close_(void *self)
{
    gf__fetcher_close(((ranged *)self)->f);
}

static int take(void *self, gf__slot *sl, int c, uint64_t pos, gf__cell_out *out, int max)
{
    ranged *r = self;
    (void)pos, (void)out, (void)max;
    if (!gf__cell_queue_push(&r->q, (uint32_t)(sl - r->l->slots), (uint32_t)c, false))
        gf__halt(r->l, GF_ENOMEM, "internal error: the read queue is full");
    return 0;
}

static unsigned room(void *self)
{
    ranged *r = self;
    return gf__fifo_len(&r->q.q) ? gf__fetcher_room(r->f) : 0;
}

static int submit(void *self, gf__buf *buf)
{
    ranged *r = self;
    gf_loader *l = r->l;
    uint64_t cell = r->q.cells[gf__fifo_pop(&r->q.q)];
    uint64_t sample = (uint64_t)l->slots[cell >> 32].indices[(uint32_t)cell];
    const char *rel;
    uint64_t off, len;
    gf__dataset_extent(&l->ds, sample, &rel, &off, &len);
    return gf__fetcher_submit(r->f, &l->ds.remote[l->ds.shard[sample]], off, len, buf,
                              &l->budget, cell);
}

/* A failed read's reason names its object's URL: the sample's name has
 * only the shard's base name. */
static char *reason(gf_loader *l, uint64_t sample, const gf__read_done *d)
{
    const char *why = d->why[0] ? d->why : gf_strerror(d->err);
    const char *url = l->ds.shard_paths[l->ds.shard[sample]];
    size_t n = strlen(url) + strlen(why) + 3;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s: %s", url, why);
    return s;
}

static int reap(void *self, gf__cell_out *out, int max, uint64_t *bytes)
{
    ranged *r = self;
    gf_loader *l = r->l;
    int n = 0, k;
    while (n == 0 && (k = gf__fetcher_reap(r->f, r->reaped, GF__MIN(max, GF__REAP_BATCH))) > 0) {
        for (int i = 0; i < k; i++) {
            gf__read_done *d = &r->reaped[i];
            *bytes += d->buf->got;
            gf__slot *sl = &l->slots[d->user >> 32];
            out[n] = (gf__cell_out){.slot = (uint32_t)(d->user >> 32),
                                    .cell = (uint32_t)d->user,
                                    .err = d->err,
                                    .buf = d->buf};
            if (d->err)
                out[n].why = reason(l, (uint64_t)sl->indices[(uint32_t)d->user], d);
            n++;
        }
    }
    return n;
}

static bool has_done(void *self)
{
    return gf__fetcher_has_done(((ranged *)self)->f);
}

static bool waiting(void *self)
{
    return gf__fetcher_in_flight(((ranged *)self)->f) > 0;
}

static void counts(void *self, gf__fetch_counts *c)
{
    gf__fetcher_counts(((ranged *)self)->f, c);
}

static bool uses_buffers(void *self)
{
    (void)self;
    return true;
}

static const gf__cell_reader_ops ops = {
    .create = create,
    .destroy = destroy,
    .restart = restart,
    .start = start,
    .close = close_,
    .stop = stop,
    .take = take,
    .room = room,
    .submit = submit,
    .reap = reap,
    .has_done = has_done,
    .waiting = waiting,
    .counts = counts,
    .uses_buffers = uses_buffers,
};

const gf__cell_reader_ops *const gf__ranged_reader = &ops;
