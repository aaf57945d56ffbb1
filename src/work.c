/* The loader's jobs, run on the decode threads (gf-decode-N) through the
 * pool's hooks: read (unless io_uring did; a cached job only from the
 * page cache, else it goes back to io_uring) and decode one cell straight
 * into its pixels, or run the CPU twin over a range of a batch's cells.
 * gf__work_run holds no lock; gf__work_settle, under mu, books the job's
 * times and hands its read buffer back. Init/free on the lifecycle
 * thread. */
#include "work.h"

#include "cell_reader.h"
#include "sample_fields.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* Reads (unless the controller did, through io_uring) and decodes one
 * cell; d gets the outcome. Returns the seconds spent reading (the rest
 * of its time is decoding). */
static double run_decode(gf_loader *l, gf__worker *w, const gf__job *j, gf__done *d)
{
    char why[192] = "";
    int err = 0, used = 0;
    uint8_t cache = GF__PAGE_CACHE_NONE;
    double t0 = gf__now(), t1 = t0;
    gf__buf *in = j->decode.buf;
    gf__buf view;
    if (j->decode.bytes) {
        view = (gf__buf){.data = (uint8_t *)j->decode.bytes, .len = j->decode.n_bytes};
        in = &view;
    } else if (!in) {
        assert(!l->ds.remote); /* the controller's fetcher read it */
        in = &w->buf;
        gf__range_push("gf read");
        gf__read_req r;
        gf__read_req_of(l, (uint64_t)j->decode.sample, &r);
        if (j->decode.cached)
            r.o.flags |= GF__READ_NOWAIT;
        err = gf__read_sample(l->ds.root_fd, r.rel, r.off, r.len, &r.o, in, why, sizeof why);
        gf__range_pop();
        t1 = gf__now();
        if (err == GF__READ_UNCACHED) { /* back to the controller, for io_uring */
            *d = (gf__done){.kind = GF__JOB_DECODE,
                            .slot = j->slot,
                            .decode = {.cell = j->decode.cell, .page_cache = GF__PAGE_CACHE_MISS}};
            return t1 - t0;
        }
        if (j->decode.cached && !err)
            cache = GF__PAGE_CACHE_HIT;
    }
    /* A shard member's bytes come after its header: checked against the
     * index first, so an index pointing elsewhere is never decoded. */
    const uint64_t sample = (uint64_t)j->decode.sample;
    if (!err && l->ds.shard)
        err = gf__dataset_member_check(&l->ds, sample, in->data, in->len, why, sizeof why);
    if (!err && l->ds.schema.image >= 0) {
        size_t img = gf__dataset_image_at(&l->ds, sample);
        size_t n = l->ds.shard ? l->ds.data_len[sample] : in->len;
        gf__range_push("gf decode");
        err = gf__decode(w->dec, in->data + img, n, &l->tf, j->decode.key, j->decode.dst, &used,
                         why, sizeof why);
        gf__range_pop();
    }
    int field = -1;
    if (!err && l->ds.n_var) {
        gf__members m;
        if (l->ds.shard)
            gf__fields_members_in(l, sample, in->data, &m);
        else
            err = gf__fields_read_files(l, sample, in, w->field_bufs, &m, &field, why,
                                        sizeof why);
        if (!err)
            err = gf__fields_take(l, &l->slots[j->slot], j->decode.cell, &m, w->dec, &w->fields,
                                  &field, why, sizeof why);
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
        gf__range_pop();
        w->ran_work_s = gf__now() - t0;
        *d = (gf__done){.kind = GF__JOB_CONVERT, .slot = j->slot};
        return;
    }
    w->ran_read_s = run_decode(l, w, j, d);
    w->ran_work_s = gf__now() - t0 - w->ran_read_s;
    w->ran_got = j->decode.buf || j->decode.bytes ? 0 : w->buf.got;
    gf__budget_done(&l->budget, j->decode.buf ? j->decode.buf : &w->buf);
    w->ran_scratch = w->buf.cap + gf__decoder_scratch_bytes(w->dec);
}

bool gf__work_settle(void *arg, int worker, const gf__job *j, gf__done *d)
{
    gf_loader *l = arg;
    gf__worker *w = &l->workers[worker];
    if (j->kind == GF__JOB_CONVERT) {
        w->convert_s += w->ran_work_s;
        return true;
    }
    w->scratch = w->ran_scratch;
    w->read_s += w->ran_read_s;
    w->decode_s += w->ran_work_s;
    w->bytes += w->ran_got;
    if (j->decode.buf)
        l->free_bufs[l->n_free_bufs++] = j->decode.buf;
    if (l->stopping) { /* cancelled, or too late: stop_pipeline drops it */
        free(d->decode.why);
        return false;
    }
    return true;
}

int gf__work_init(gf_loader *l)
{
    l->workers = calloc((size_t)l->threads, sizeof *l->workers);
    if (!l->workers)
        return gf__fail(l, GF_ENOMEM, "out of memory allocating queues");
    for (int i = 0; i < l->threads; i++) {
        gf__worker *w = &l->workers[i];
        if (gf__decoder_create(&w->dec) < 0)
            return gf__fail(l, GF_ENOMEM, "out of memory creating a decoder");
        gf__decoder_set_cancel(w->dec, &l->cancel);
        l->n_workers++;
    }
    return 0;
}

void gf__work_free(gf_loader *l)
{
    for (int i = 0; i < l->n_workers; i++) {
        gf__decoder_destroy(l->workers[i].dec);
        gf__fields_scratch_free(&l->workers[i].fields);
        for (int k = 0; k < GF__FIELDS_MAX; k++)
            gf__buf_free(&l->workers[i].field_bufs[k]);
        gf__buf_free(&l->workers[i].buf);
    }
    free(l->workers);
}
