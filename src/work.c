/* The loader's jobs, run on the decode threads (gf-decode-N) through the
 * pool's hooks: read (unless io_uring did; a cached job only from the
 * page cache, else it goes back to io_uring) and decode one cell straight
 * into its pixels, or run the CPU twin over a range of a batch's cells,
 * or (augment's mix, once they are all done) mix a range of every
 * sample's elements.
 * gf__work_run holds no lock; gf__work_settle, under mu, books the job's
 * times and hands its read buffer back. Init/free on the lifecycle
 * thread. */
#include "work.h"

#include "cell_reader.h"
#include "sample_fields.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* The shard read a cell's job makes on its decode thread: r for sample,
 * its descriptor kept in w's cache, an array's data straight into the
 * cell's region (holes, *in_place). */
static void read_req_for(gf_loader *l, gf__worker *w, const gf__job *j, double t0,
                         gf__read_req *r, gf__read_hole holes[GF__FIELDS_MAX],
                         uint32_t *in_place)
{
    gf__read_req_of(l, (uint64_t)j->decode.sample, r);
    if (j->decode.cached)
        r->o.flags |= GF__READ_NOWAIT;
    *in_place = 0;
    if (!gf__dataset_member(&l->ds, (uint64_t)j->decode.sample))
        return;
    r->o.fds = &w->fds;
    r->o.file = l->ds.shard[j->decode.sample];
    r->o.now = t0;
    if (l->ds.n_var) {
        r->o.holes = holes;
        r->o.n_holes = gf__fields_holes(l, &l->slots[j->slot], (int)j->decode.cell,
                                        (uint64_t)j->decode.sample, r->off, holes, in_place);
    }
}

/* A cached job whose bytes the page cache lacked: back to the controller,
 * for io_uring. */
static void uncached(const gf__job *j, gf__done *d)
{
    *d = (gf__done){.kind = GF__JOB_DECODE,
                    .slot = j->slot,
                    .decode = {.cell = j->decode.cell, .page_cache = GF__PAGE_CACHE_MISS}};
}

/* The cell's bytes `in` read (err: the read's failure, with why): its
 * headers checked, its image decoded into the cell's pixels and its
 * fields taken; d gets the outcome. */
static void decode_read(gf_loader *l, gf__worker *w, const gf__job *j, const gf__buf *in, int err,
                        char *why, size_t why_len, uint32_t in_place, uint8_t cache, gf__done *d)
{
    int used = 0;
    /* A shard member's bytes come after its header: checked against the
     * index first, so an index pointing elsewhere is never decoded. */
    const uint64_t sample = (uint64_t)j->decode.sample;
    if (!err && gf__dataset_member(&l->ds, sample))
        err = gf__dataset_member_check(&l->ds, sample, in->data, in->len, why, why_len);
    if (!err && l->ds.schema.image >= 0) {
        size_t img = gf__dataset_image_at(&l->ds, sample);
        size_t n = gf__dataset_member(&l->ds, sample) ? l->ds.data_len[sample] : in->len;
        gf__range_push("gf decode");
        err = gf__decode(w->dec, in->data + img, n, &l->tf, j->decode.key, j->decode.dst, &used,
                         why, why_len);
        gf__range_pop();
    }
    int field = -1;
    if (!err && l->ds.n_var) {
        gf__members m;
        if (gf__dataset_member(&l->ds, sample)) {
            gf__fields_members_in(l, sample, in->data, &m);
            m.in_place = in_place;
        } else {
            err = gf__fields_read_files(l, sample, in, w->field_bufs, &m, &field, why, why_len);
        }
        if (!err)
            err = gf__fields_take(l, &l->slots[j->slot], j->decode.cell, &m, w->dec, &w->fields,
                                  &field, why, why_len);
    }
    /* A warning (LENIENT) is as rare as an error, so its reason travels
     * the same way. */
    int warn_code = 0;
    const char *reason = err ? (why[0] ? why : gf_strerror(err))
                         : used & GF__WARNED ? gf__decoder_warning(w->dec, &warn_code) : NULL;
    *d = (gf__done){.kind = GF__JOB_DECODE,
                    .slot = j->slot,
                    .decode = {.cell = j->decode.cell,
                               .err = err,
                               .member = err && field >= 0 ? (uint8_t)(field + 1) : 0,
                               .used = used,
                               .warn_code = warn_code,
                               .why = reason ? strdup(reason) : NULL,
                               .page_cache = cache}};
}

/* Reads (unless the controller did, through io_uring) and decodes one
 * cell, begun at t0; d gets the outcome. Returns the seconds spent
 * reading (the rest of its time is decoding). */
static double run_decode(gf_loader *l, gf__worker *w, const gf__job *j, double t0, gf__done *d)
{
    char why[192] = "";
    int err = 0;
    uint8_t cache = GF__PAGE_CACHE_NONE;
    double t1 = t0;
    gf__buf *in = j->decode.buf;
    gf__buf view;
    uint32_t in_place = 0; /* fields whose data the read put in place */
    if (j->decode.bytes) {
        view = (gf__buf){.data = (uint8_t *)j->decode.bytes, .len = j->decode.n_bytes};
        in = &view;
    } else if (!in) {
        assert(!l->ds.remote); /* the controller's fetcher read it */
        in = &w->buf;
        gf__range_push("gf read");
        gf__read_req r;
        gf__read_hole holes[GF__FIELDS_MAX];
        read_req_for(l, w, j, t0, &r, holes, &in_place);
        err = gf__read_sample(l->ds.root_fd, r.rel, r.off, r.len, &r.o, in, why, sizeof why);
        gf__range_pop();
        t1 = gf__now();
        if (err == GF__READ_UNCACHED) {
            uncached(j, d);
            return t1 - t0;
        }
        if (j->decode.cached && !err)
            cache = GF__PAGE_CACHE_HIT;
    }
    decode_read(l, w, j, in, err, why, sizeof why, in_place, cache, d);
    return t1 - t0;
}

void gf__work_run(void *arg, int worker, const gf__job *j, gf__done *d)
{
    gf_loader *l = arg;
    gf__worker *w = &l->workers[worker];
    double t0 = gf__now();
    if (j->kind == GF__JOB_CONVERT) {
        gf__slot *sl = &l->slots[j->slot];
        gf__range_push("gf convert");
        gf__convert_cpu(&l->cv, sl->pixels, sl->out, sl->flips, j->convert.first,
                        j->convert.count);
        if (l->aug.erase && !l->tf.erase_in_cell)
            for (int i = j->convert.first; i < j->convert.first + j->convert.count; i++)
                gf__erase_out(&l->aug, &l->cv,
                              gf__sample_key(sl->seed, sl->cells[i].key_epoch, (uint64_t)sl->indices[i]),
                              (uint8_t *)sl->out + (size_t)i * gf__convert_sample_bytes(&l->cv));
        gf__range_pop();
        w->ran_work_s += gf__now() - t0;
        *d = (gf__done){.kind = GF__JOB_CONVERT, .slot = j->slot};
        return;
    }
    if (j->kind == GF__JOB_MIX) { /* after the batch's convert jobs, all of them */
        gf__slot *sl = &l->slots[j->slot];
        gf__range_push("gf mix");
        gf__mix_cpu(&sl->mix, &l->cv, sl->out, sl->count, j->mix.first, j->mix.n);
        if (j->mix.first == 0)
            gf__mix_targets(&sl->mix, sl->labels, sl->count, l->aug.mix_classes, sl->targets);
        gf__range_pop();
        w->ran_work_s += gf__now() - t0;
        *d = (gf__done){.kind = GF__JOB_MIX, .slot = j->slot};
        return;
    }
    double read_s = run_decode(l, w, j, t0, d);
    w->ran_read_s += read_s;
    w->ran_work_s += gf__now() - t0 - read_s;
    w->ran_got += j->decode.buf || j->decode.bytes ? 0 : w->buf.got;
    gf__budget_done(&l->budget, j->decode.buf ? j->decode.buf : &w->buf);
    w->ran_scratch = w->buf.cap + gf__decoder_scratch_bytes(w->dec);
}

/* A job whose read can go in the worker's batch: a local shard member,
 * from the page cache only (misses go back to the controller). */
static bool batchable(const gf_loader *l, const gf__job *j)
{
    return j->kind == GF__JOB_DECODE && !j->decode.buf && !j->decode.bytes && j->decode.cached &&
           gf__dataset_member(&l->ds, (uint64_t)j->decode.sample);
}

void gf__work_run_batch(void *arg, int worker, const gf__job *js, int n, gf__done *ds)
{
    gf_loader *l = arg;
    gf__worker *w = &l->workers[worker];
    if (!w->batch) {
        for (int i = 0; i < n; i++)
            gf__work_run(arg, worker, &js[i], &ds[i]);
        return;
    }
    double t0 = gf__now();
    gf__batched_read r[GF__POOL_GRAB_MAX];
    gf__read_hole holes[GF__POOL_GRAB_MAX][GF__FIELDS_MAX];
    uint32_t in_place[GF__POOL_GRAB_MAX];
    int at[GF__POOL_GRAB_MAX], m = 0; /* job i's read r[at[i]], or -1: run alone */
    char why[192];
    for (int i = 0; i < n; i++) {
        at[i] = -1;
        if (!batchable(l, &js[i]))
            continue;
        gf__read_req q;
        read_req_for(l, w, &js[i], t0, &q, holes[i], &in_place[i]);
        if (gf__read_prepare(l->ds.root_fd, q.rel, q.off, q.len, &q.o, &w->batch_bufs[i], &r[m],
                             why, sizeof why) == 0)
            at[i] = m++;
    }
    gf__read_batch_run(w->batch, r, m);
    double t1 = gf__now();
    w->ran_read_s += t1 - t0;
    for (int i = 0; i < n; i++) {
        if (at[i] < 0) { /* not batched, or refused before its read: read alone, as ever */
            gf__work_run(arg, worker, &js[i], &ds[i]);
            continue;
        }
        gf__buf *b = &w->batch_bufs[i];
        if (gf__read_finish(&r[at[i]], b) != 0) {
            uncached(&js[i], &ds[i]);
        } else {
            why[0] = 0;
            decode_read(l, w, &js[i], b, 0, why, sizeof why, in_place[i], GF__PAGE_CACHE_HIT,
                        &ds[i]);
            w->ran_got += b->got;
        }
        gf__budget_done(&l->budget, b);
    }
    w->ran_work_s += gf__now() - t1;
    size_t held = w->buf.cap + gf__decoder_scratch_bytes(w->dec);
    for (int i = 0; i < GF__POOL_GRAB_MAX; i++)
        held += w->batch_bufs[i].cap;
    w->ran_scratch = held;
}

bool gf__work_settle(void *arg, int worker, const gf__job *j, gf__done *d)
{
    gf_loader *l = arg;
    gf__worker *w = &l->workers[worker];
    /* The times of the jobs run since the last settle, this one's among
     * them (a worker may run several before settling them). */
    if (j->kind == GF__JOB_CONVERT || j->kind == GF__JOB_MIX) {
        w->convert_s += w->ran_work_s;
        w->ran_work_s = 0;
        return true;
    }
    w->scratch = w->ran_scratch;
    w->read_s += w->ran_read_s;
    w->decode_s += w->ran_work_s;
    w->bytes += w->ran_got;
    w->ran_read_s = w->ran_work_s = 0;
    w->ran_got = 0;
    if (j->decode.buf)
        l->free_bufs[l->n_free_bufs++] = j->decode.buf;
    if (l->stopping) { /* cancelled, or too late: stop_pipeline drops it */
        free(d->decode.why);
        return false;
    }
    return true;
}

/* Descriptors a decode thread keeps open: every shard's while they are
 * few; their sum a modest share of a process's usual 1024. */
enum { KEPT_FDS_THREAD = 32, KEPT_FDS_ALL = 256 };

int gf__work_init(gf_loader *l)
{
    l->workers = calloc((size_t)l->threads, sizeof *l->workers);
    if (!l->workers)
        return gf__fail(l, GF_ENOMEM, "out of memory allocating queues");
    uint32_t kept = 0;
    if (l->ds.shard && !l->ds.remote) {
        kept = GF__MIN((uint32_t)KEPT_FDS_THREAD, (uint32_t)(KEPT_FDS_ALL / l->threads));
        kept = GF__MIN(GF__MAX(kept, 1u), l->ds.n_shards);
    }
    for (int i = 0; i < l->threads; i++) {
        gf__worker *w = &l->workers[i];
        if (gf__decoder_create(&w->dec) < 0)
            return gf__fail(l, GF_ENOMEM, "out of memory creating a decoder");
        gf__decoder_set_cancel(w->dec, &l->cancel);
        l->n_workers++;
        if (gf__fd_cache_init(&w->fds, kept) < 0)
            return gf__fail(l, GF_ENOMEM, "out of memory creating a decoder");
        /* No image: reads of a few microseconds, whose system calls cost
         * as much again; one call a batch of them (none: one at a time). */
        if (kept && l->ds.schema.image < 0)
            gf__read_batch_create(&w->batch, GF__POOL_GRAB_MAX);
    }
    return 0;
}

void gf__work_free(gf_loader *l)
{
    for (int i = 0; i < l->n_workers; i++) {
        gf__read_batch_destroy(l->workers[i].batch);
        for (int k = 0; k < GF__POOL_GRAB_MAX; k++)
            gf__buf_free(&l->workers[i].batch_bufs[k]);
        gf__decoder_destroy(l->workers[i].dec);
        gf__fields_scratch_free(&l->workers[i].fields);
        for (int k = 0; k < GF__FIELDS_MAX; k++)
            gf__buf_free(&l->workers[i].field_bufs[k]);
        gf__buf_free(&l->workers[i].buf);
        gf__fd_cache_free(&l->workers[i].fds);
    }
    free(l->workers);
}
