/* The cell reader of a mix with remote sources beside local ones
 * (cell_reader.h): two readers under one ops table, the local one
 * (read_local.c) for files and local members and the remote one (whole
 * shards, remote_read.c, or a ranged GET a cell, read_ranged.c) for
 * remote members, each cell routed by its sample
 * (gf__dataset_remote_member). Both run on the one loop: io_uring's
 * eventfd is the local reader's, the fetcher's sockets the remote's.
 * Reads take the controller's buffers first for the local queue, then the
 * remote one. On gf-control, as its two readers. */
#include "cell_reader.h"

#include <stdlib.h>

enum { LOCAL, REMOTE };

typedef struct mixed {
    gf_loader *l;
    const gf__cell_reader_ops *rd[2];
    void *self[2];
} mixed;

static int of_cell(const mixed *m, const gf__slot *sl, int c)
{
    return gf__dataset_remote_member(&m->l->ds, (uint64_t)sl->indices[c]) ? REMOTE : LOCAL;
}

static void destroy(void *self)
{
    mixed *m = self;
    for (int k = 0; k < 2; k++)
        if (m->self[k])
            m->rd[k]->destroy(m->self[k]);
    free(m);
}

static int create_with(gf_loader *l, const gf__cell_reader_ops *remote, void **self)
{
    if (!remote)
        return gf__fail(l, GF_EINVAL, "remote data: this build has the `remote` feature off");
    mixed *m = calloc(1, sizeof *m);
    if (!m)
        return gf__fail(l, GF_ENOMEM, "out of memory allocating queues");
    *m = (mixed){.l = l, .rd = {&gf__local_reader, remote}};
    for (int k = 0; k < 2; k++) {
        int rc = m->rd[k]->create(l, &m->self[k]);
        if (rc < 0) {
            m->self[k] = NULL;
            destroy(m);
            return rc;
        }
    }
    *self = m;
    return 0;
}

static int create_shards(gf_loader *l, void **self)
{
    return create_with(l, gf__shard_reader, self);
}

static int create_ranged(gf_loader *l, void **self)
{
    return create_with(l, gf__ranged_reader, self);
}

static int restart(void *self)
{
    mixed *m = self;
    for (int k = 0; k < 2; k++) {
        int rc = m->rd[k]->restart(m->self[k]);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int start(void *self, const gf__reader_hooks *h)
{
    mixed *m = self;
    for (int k = 0; k < 2; k++) {
        int rc = m->rd[k]->start ? m->rd[k]->start(m->self[k], h) : 0;
        if (rc < 0)
            return rc;
    }
    return 0;
}

static void close_(void *self)
{
    mixed *m = self;
    for (int k = 0; k < 2; k++)
        if (m->rd[k]->close)
            m->rd[k]->close(m->self[k]);
}

static void stop(void *self)
{
    mixed *m = self;
    for (int k = 0; k < 2; k++)
        m->rd[k]->stop(m->self[k]);
}

static int take(void *self, gf__slot *sl, int c, uint64_t pos, gf__cell_out *out, int max)
{
    mixed *m = self;
    int k = of_cell(m, sl, c);
    return m->rd[k]->take(m->self[k], sl, c, pos, out, max);
}

static bool decoded(void *self, gf__slot *sl, int c, uint8_t page_cache)
{
    mixed *m = self;
    int k = of_cell(m, sl, c);
    return m->rd[k]->decoded && m->rd[k]->decoded(m->self[k], sl, c, page_cache);
}

static unsigned room_of(const mixed *m, int k)
{
    return m->rd[k]->room && m->rd[k]->uses_buffers(m->self[k]) ? m->rd[k]->room(m->self[k])
                                                                 : 0;
}

static unsigned room(void *self)
{
    mixed *m = self;
    return room_of(m, LOCAL) + room_of(m, REMOTE);
}

static int submit(void *self, gf__buf *buf)
{
    mixed *m = self;
    int k = room_of(m, LOCAL) ? LOCAL : REMOTE;
    return m->rd[k]->submit(m->self[k], buf);
}

/* out[0, max): the local reader's outcomes, then the remote one's. */
static int reap(void *self, gf__cell_out *out, int max, uint64_t *bytes)
{
    mixed *m = self;
    int n = 0;
    for (int k = 0; k < 2 && n < max; k++)
        if (m->rd[k]->reap)
            n += m->rd[k]->reap(m->self[k], out + n, max - n, bytes);
    return n;
}

static int ahead(void *self, gf__cell_out *out, int max)
{
    mixed *m = self;
    int n = 0;
    for (int k = 0; k < 2 && n < max; k++)
        if (m->rd[k]->ahead)
            n += m->rd[k]->ahead(m->self[k], out + n, max - n);
    return n;
}

static bool uses_buffers(void *self)
{
    mixed *m = self;
    return m->rd[LOCAL]->uses_buffers(m->self[LOCAL]) ||
           m->rd[REMOTE]->uses_buffers(m->self[REMOTE]);
}

static int poll_fd(void *self)
{
    mixed *m = self;
    return m->rd[LOCAL]->poll_fd(m->self[LOCAL]);
}

static bool has_done(void *self)
{
    mixed *m = self;
    for (int k = 0; k < 2; k++)
        if (m->rd[k]->has_done && m->rd[k]->has_done(m->self[k]))
            return true;
    return false;
}

static bool waiting(void *self)
{
    mixed *m = self;
    return m->rd[REMOTE]->waiting && m->rd[REMOTE]->waiting(m->self[REMOTE]);
}

static unsigned unwritten(void *self)
{
    mixed *m = self;
    return m->rd[REMOTE]->unwritten ? m->rd[REMOTE]->unwritten(m->self[REMOTE]) : 0;
}

static void counts(void *self, gf__fetch_counts *c)
{
    mixed *m = self;
    m->rd[REMOTE]->counts(m->self[REMOTE], c);
}

static void cache_stats(void *self, uint64_t *hits, uint64_t *misses, char *warning,
                        size_t warning_len)
{
    mixed *m = self;
    if (m->rd[REMOTE]->cache_stats) {
        m->rd[REMOTE]->cache_stats(m->self[REMOTE], hits, misses, warning, warning_len);
        return;
    }
    *hits = *misses = 0;
    if (warning_len)
        warning[0] = '\0';
}

#define MIXED_OPS(create_fn)                                                                    \
    {.create = create_fn,                                                                       \
     .destroy = destroy,                                                                        \
     .restart = restart,                                                                        \
     .start = start,                                                                            \
     .close = close_,                                                                           \
     .stop = stop,                                                                              \
     .take = take,                                                                              \
     .decoded = decoded,                                                                        \
     .room = room,                                                                              \
     .submit = submit,                                                                          \
     .reap = reap,                                                                              \
     .ahead = ahead,                                                                            \
     .uses_buffers = uses_buffers,                                                              \
     .poll_fd = poll_fd,                                                                        \
     .has_done = has_done,                                                                      \
     .waiting = waiting,                                                                        \
     .unwritten = unwritten,                                                                    \
     .counts = counts,                                                                          \
     .cache_stats = cache_stats}

const gf__cell_reader_ops gf__mixed_shard_reader = MIXED_OPS(create_shards);
const gf__cell_reader_ops gf__mixed_ranged_reader = MIXED_OPS(create_ranged);
