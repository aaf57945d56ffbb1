/* Starting work on a cell, on the controller thread: its sample from the
 * cursor, its label and index, then an io_uring read (the read queue) or
 * a decode job for the pool (io = AUTO: one that reads from the page
 * cache only, back here for io_uring when the bytes are not all there).
 * gf__read_req_of also runs on decode threads: it only reads the index,
 * read-only after gf_open. */
#include "dispatch.h"

#include "magic.h"
#include "remote_read.h"

void gf__read_req_of(gf_loader *l, uint64_t sample, gf__read_req *r)
{
    gf__dataset_extent(&l->ds, sample, &r->rel, &r->off, &r->len);
    /* A member's range has its header first: the cap is on the member. */
    size_t header = l->ds.shard ? GF__TAR_BLOCK : 0, max = l->s.max_file_bytes;
    r->o = (gf__read_opts){
        .max_bytes = max && max <= SIZE_MAX - header ? max + header : max,
        .budget = &l->budget,
        /* A .tga has no magic: nothing to sniff. */
        .flags = (gf__name_is_tga(gf__dataset_path(&l->ds, sample)) ? 0 : GF__READ_SNIFF) |
                 (header ? GF__READ_TAR_HEADER : 0),
        .expect = gf__dataset_file_id(&l->ds, sample),
        .seen = gf__dataset_file_seen(&l->ds, sample)};
}

gf__job gf__decode_job(gf_loader *l, gf__slot *sl, int c, gf__buf *buf)
{
    uint64_t sample = (uint64_t)sl->indices[c];
    return (gf__job){.kind = GF__JOB_DECODE,
                     .slot = (uint32_t)(sl - l->slots),
                     .decode = {.dst = gf__cell_pixels(sl, c),
                                .buf = buf,
                                .sample = (int64_t)sample,
                                .key = gf__sample_key(l->cur.seed, sl->epoch, sample),
                                .cell = (uint32_t)c}};
}

void gf__queue_read(gf_loader *l, gf__slot *sl, int c, bool first)
{
    /* Room: one entry per cell of the ring, like the pool's queues; a
     * cell is in it once at most. */
    uint32_t i = first ? gf__fifo_push_front(&l->read_q) : gf__fifo_push(&l->read_q);
    if (GF__UNLIKELY(i == UINT32_MAX))
        gf__halt(l, GF_ENOMEM, "internal error: the read queue is full");
    else
        l->reads[i] = (uint64_t)(sl - l->slots) << 32 | (uint32_t)c;
}

/* Cold data must not pay a failed try per sample. Warm (gap 0), every
 * cell tries the cache; after a miss, one cell tries and the next `gap`
 * go to io_uring straight, counted at dispatch, since outcomes come back
 * a ring's worth of cells later. The gap doubles with each miss up to
 * GF__PAGE_CACHE_GAP_MAX, and a hit makes it 0. */
enum { GF__PAGE_CACHE_GAP_MAX = 64 };

static bool page_cache_try(gf_loader *l)
{
    if (l->ctl_page_cache_gap == 0)
        return true;
    if (l->ctl_page_cache_skip > 0) {
        l->ctl_page_cache_skip--;
        return false;
    }
    l->ctl_page_cache_skip = l->ctl_page_cache_gap;
    return true;
}

void gf__page_cache_outcome(gf_loader *l, bool hit)
{
    if (hit) {
        l->ctl_page_cache_hits++;
        l->ctl_page_cache_gap = l->ctl_page_cache_skip = 0;
        return;
    }
    l->ctl_page_cache_misses++;
    if (l->ctl_page_cache_gap == 0)
        l->ctl_page_cache_skip = 1;
    uint32_t gap = l->ctl_page_cache_gap;
    l->ctl_page_cache_gap = gap ? GF__MIN(2 * gap, GF__PAGE_CACHE_GAP_MAX) : 1;
}

void gf__dispatch_cell(gf_loader *l, gf__job *js, int *n_jobs, gf__slot *sl, int c, uint64_t pos)
{
    uint64_t sample = gf__cursor_sample(&l->cur, sl->epoch, pos);
    sl->cells[c] = (gf__cell){.pos = pos, .state = GF__CELL_PENDING};
    sl->indices[c] = (int64_t)sample;
    sl->labels[c] = l->ds.labels[sample];
    sl->flips[c] = 0;
    sl->pending++;
    if (pos + 1 > sl->end_pos)
        sl->end_pos = pos + 1;
    if (l->rr) {
        gf__remote_read_cell(l, sl, c, pos, js, n_jobs);
        return;
    }
    if (l->uring && l->page_cache_first && page_cache_try(l)) {
        gf__job *j = gf__add_job(l, js, n_jobs);
        *j = gf__decode_job(l, sl, c, NULL);
        j->decode.cached = true;
        return;
    }
    if (l->uring || l->fetch) {
        gf__queue_read(l, sl, c, false);
        return;
    }
    *gf__add_job(l, js, n_jobs) = gf__decode_job(l, sl, c, NULL);
}
