/* The decode pool: worker threads (gf-decode-N) that take jobs from a
 * bounded queue (read + decode one cell, or convert a range of cells on
 * the CPU) and report each on the completion queue, which the controller
 * drains. The queues are pushed and popped under the loader's mutex; the
 * work itself runs without it. Runs on the decode threads, except
 * init/start/join/free (gf_open, gf_seek, gf_close's thread) and
 * gf__pool_push_locked (the controller). */
#include "loader_impl.h"

#include "magic.h"

#include <stdlib.h>
#include <string.h>

void *gf__fifo_alloc(gf__fifo *f, uint32_t min, size_t item_size)
{
    uint32_t n = 1;
    while (n < min)
        n <<= 1;
    f->mask = n - 1;
    f->head = f->tail = 0;
    return calloc(n, item_size);
}

/* Reads (unless the controller did, through io_uring) and decodes one
 * cell; d gets the outcome. Returns the seconds spent reading (the rest
 * of its time is decoding). */
static double run_decode(worker *w, const gf__job *j, gf__done *d)
{
    gf_loader *l = w->l;
    char why[192] = "";
    int err = 0, used = 0;
    double t0 = gf__now(), t1 = t0;
    gf__buf *in = j->decode.buf;
    if (!in) {
        in = &w->buf;
        gf__range_push("gf read");
        const char *rel;
        uint64_t off, len;
        gf__dataset_extent(&l->ds, (uint64_t)j->decode.sample, &rel, &off, &len);
        const gf__read_opts o = {
            .max_bytes = l->s.max_file_bytes,
            .budget = &l->budget,
            .flags = gf__name_is_tga(gf__dataset_path(&l->ds, (uint64_t)j->decode.sample))
                         ? 0
                         : GF__READ_SNIFF,
            .expect = gf__dataset_file_id(&l->ds, (uint64_t)j->decode.sample),
            .seen = gf__dataset_file_seen(&l->ds, (uint64_t)j->decode.sample)};
        err = gf__read_sample(l->ds.root_fd, rel, off, len, &o, in, why, sizeof why);
        gf__range_pop();
        t1 = gf__now();
    }
    if (!err) {
        gf__range_push("gf decode");
        err = gf__decode(w->dec, in->data, in->len, &l->tf, j->decode.key, j->decode.dst, &used,
                         why, sizeof why);
        gf__range_pop();
    }
    /* A warning (LENIENT) is as rare as an error, so its reason travels
     * the same way. */
    int warn_code = 0;
    const char *reason = err ? (why[0] ? why : gf_strerror(err))
                         : used & GF__WARNED ? gf__decoder_warning(w->dec, &warn_code) : NULL;
    *d = (gf__done){.kind = JOB_DECODE,
                    .slot = j->slot,
                    .decode = {.cell = j->decode.cell,
                               .err = err,
                               .used = used,
                               .warn_code = warn_code,
                               .why = reason ? strdup(reason) : NULL}};
    return t1 - t0;
}

static void run_convert(worker *w, const gf__job *j)
{
    gf_loader *l = w->l;
    slot *sl = &l->slots[j->slot];
    gf__range_push("gf convert");
    gf__convert_cpu(&l->cv, sl->pixels, sl->out, sl->flips, j->convert.first, j->convert.count);
    gf__range_pop();
}

/* With mu held: the next job this worker may take, false when stopping. */
static bool take_job(worker *w, gf__job *j)
{
    gf_loader *l = w->l;
    gf__pool *p = &l->pool;
    while (!l->stopping && (gf__fifo_len(&p->job_q) == 0 || w->id >= l->active_threads))
        pthread_cond_wait(&p->work, &l->mu);
    if (l->stopping)
        return false;
    *j = p->jobs[gf__fifo_pop(&p->job_q)];
    return true;
}

/* With mu held. A completion always has room: it is for a job taken from
 * the job queue, and both hold as many (gf__pool_capacity). */
static void report(gf_loader *l, const gf__done *d)
{
    gf__pool *p = &l->pool;
    uint32_t i = gf__fifo_push(&p->done_q);
    if (GF__UNLIKELY(i == UINT32_MAX)) {
        free(d->decode.why);
        gf__halt_locked(l, GF_ENOMEM, "internal error: the completion queue is full");
        return;
    }
    p->dones[i] = *d;
    wake_controller(l);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    gf_loader *l = w->l;
    char name[16];
    snprintf(name, sizeof name, "gf-decode-%d", w->id);
    pthread_setname_np(pthread_self(), name);

    gf__job j;
    pthread_mutex_lock(&l->mu);
    while (take_job(w, &j)) {
        pthread_mutex_unlock(&l->mu);
        double t0 = gf__now();
        if (j.kind == JOB_CONVERT) {
            run_convert(w, &j);
            double t1 = gf__now();
            pthread_mutex_lock(&l->mu);
            w->convert_s += t1 - t0;
            report(l, &(gf__done){.kind = JOB_CONVERT, .slot = j.slot});
            continue;
        }
        gf__done d;
        double read_s = run_decode(w, &j, &d);
        double t2 = gf__now();
        size_t got = j.decode.buf ? 0 : w->buf.got;
        gf__budget_done(&l->budget, j.decode.buf ? j.decode.buf : &w->buf);
        size_t scratch = w->buf.cap + gf__decoder_scratch_bytes(w->dec);
        pthread_mutex_lock(&l->mu);
        w->scratch = scratch;
        w->read_s += read_s;
        w->decode_s += t2 - t0 - read_s;
        w->bytes += got;
        if (j.decode.buf)
            l->free_bufs[l->n_free_bufs++] = j.decode.buf;
        if (l->stopping) /* cancelled, or too late: stop_pipeline drops it */
            free(d.decode.why);
        else
            report(l, &d);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

int gf__pool_push_locked(gf_loader *l, const gf__job *js, int n)
{
    gf__pool *p = &l->pool;
    if (n == 0)
        return 0;
    assert((uint32_t)n <= gf__fifo_room(&p->job_q));
    if (GF__UNLIKELY((uint32_t)n > gf__fifo_room(&p->job_q)))
        return GF_ENOMEM;
    for (int i = 0; i < n; i++)
        p->jobs[gf__fifo_push(&p->job_q)] = js[i];
    /* A signal could wake a parked (inactive) worker and be lost. */
    if (n == 1 && l->active_threads == l->n_workers)
        pthread_cond_signal(&p->work);
    else
        pthread_cond_broadcast(&p->work);
    return 0;
}

int gf__pool_init(gf_loader *l, uint32_t capacity)
{
    gf__pool *p = &l->pool;
    p->jobs = gf__fifo_alloc(&p->job_q, capacity, sizeof *p->jobs);
    p->dones = gf__fifo_alloc(&p->done_q, capacity, sizeof *p->dones);
    l->workers = calloc((size_t)l->threads, sizeof *l->workers);
    if (!p->jobs || !p->dones || !l->workers)
        return gf__fail(l, GF_ENOMEM, "out of memory allocating queues");
    for (int i = 0; i < l->threads; i++) {
        worker *w = &l->workers[i];
        w->l = l;
        w->id = i;
        if (gf__decoder_create(&w->dec) < 0)
            return gf__fail(l, GF_ENOMEM, "out of memory creating a decoder");
        gf__decoder_set_cancel(w->dec, &l->cancel);
        l->n_workers++;
    }
    return 0;
}

void gf__pool_reset(gf_loader *l)
{
    gf__pool *p = &l->pool;
    while (gf__fifo_len(&p->done_q))
        free(p->dones[gf__fifo_pop(&p->done_q)].decode.why);
    p->job_q.head = p->job_q.tail = 0;
    p->done_q.head = p->done_q.tail = 0;
}

int gf__pool_start(gf_loader *l)
{
    int started = 0, rc = 0;
    for (; started < l->n_workers; started++) {
        worker *w = &l->workers[started];
        if ((rc = pthread_create(&w->thread, NULL, worker_main, w)) != 0)
            break;
    }
    if (rc == 0)
        return 0;
    pthread_mutex_lock(&l->mu);
    l->stopping = true;
    pthread_cond_broadcast(&l->pool.work);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < started; i++)
        pthread_join(l->workers[i].thread, NULL);
    return rc;
}

void gf__pool_join(gf_loader *l)
{
    for (int i = 0; i < l->n_workers; i++)
        pthread_join(l->workers[i].thread, NULL);
}

void gf__pool_free(gf_loader *l)
{
    for (int i = 0; i < l->n_workers; i++) {
        gf__decoder_destroy(l->workers[i].dec);
        gf__buf_free(&l->workers[i].buf);
    }
    free(l->workers);
    free(l->pool.jobs);
    free(l->pool.dones);
}
