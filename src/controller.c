/* The controller (gf-control), a libuv loop woken by the decode pool, the
 * cell reader (its fd, or its own handles: cell_reader.h), the consumer
 * and CUDA callbacks, and ticked by autotune's timer. Each wake-up runs
 * pump: take completions, reap and submit reads, finalise and deliver
 * batches in order, assign free slots new batches. The loop's whole life is here: gf__controller_start and
 * gf__controller_stop on the lifecycle thread; everything else runs on the
 * controller thread, except host_slot_copied (a CUDA thread, or gf-copy),
 * gf__wake_controller (any thread) and gf__controller_job_done (a decode
 * thread). */
#include "controller.h"

#include "assemble.h"
#include "autotune.h"
#include "descriptors.h"
#include "dispatch.h"
#include "sample_fields.h"

#include <stdlib.h>
#include <string.h>

static bool epochs_left(const gf_loader *l, uint64_t epoch)
{
    return gf__cursor_epoch_live(&l->cur, epoch, l->s.epochs);
}

static void push_jobs(gf_loader *l, const gf__job *js, int n)
{
    if (n == 0)
        return;
    pthread_mutex_lock(&l->mu);
    if (gf__pool_push_locked(&l->pool, js, n) < 0)
        gf__halt_locked(l, GF_ENOMEM, "internal error: the job queue is full");
    pthread_mutex_unlock(&l->mu);
}

/* CUDA thread (or gf-copy, when it could not queue the copy): the copy
 * into delivery slot o has run, or the copy stream failed (cuda_error, a
 * cudaError_t); the host slot it read may be refilled, and o given
 * another batch once released. Everything happens under mu and the count
 * of callbacks in flight drops last: stop_pipeline waits for it to reach
 * 0 (a failed stream's synchronize may return before its callbacks have
 * run) and then may free l. While stopping, the controller is gone or
 * going: nothing wakes it. */
static void host_slot_copied(void *arg, int cuda_error)
{
    gf__slot *o = arg;
    gf_loader *l = o->l;
    char why[160];
    if (cuda_error)
        snprintf(why, sizeof why,
                 "the CUDA copy stream failed with cudaError_t %d (an earlier kernel or copy "
                 "of this process may have faulted)",
                 cuda_error);
    pthread_mutex_lock(&l->mu);
    gf__slot_set_host(&l->slots[o->out_src], GF__HOST_OUT, GF__HOST_FREE);
    o->copying = false;
    if (cuda_error)
        gf__halt_locked(l, GF_ENODEV, why);
    if (!l->stopping)
        gf__wake_controller(l);
    assert(l->copies_in_flight > 0);
    l->copies_in_flight--;
    pthread_cond_broadcast(&l->ready_cv);
    pthread_mutex_unlock(&l->mu);
}

/* gf-copy: the copy, kernel and ready event into delivery slot o are
 * queued; the consumer may have it. */
static void batch_queued(void *arg)
{
    gf__slot *o = arg;
    gf_loader *l = o->l;
    pthread_mutex_lock(&l->mu);
    gf__slot_set_out(o, GF__OUT_COPYING, GF__OUT_READY);
    pthread_cond_broadcast(&l->ready_cv);
    pthread_mutex_unlock(&l->mu);
}

/* CUDA: queues the copy + kernel of finalised batch l->xfer from host
 * slot h into delivery slot o; h is OUT until host_slot_copied. Returns 0
 * (queued), 1 (posted to the copy thread: o is COPYING until
 * batch_queued), or GF_ENODEV having halted. */
static int queue_copy(gf_loader *l, gf__slot *h, gf__slot *o)
{
    memcpy(o->out_labels, h->labels, (size_t)h->count * sizeof *h->labels);
    memcpy(o->out_indices, h->indices, (size_t)h->count * sizeof *h->indices);
    gf__fields_copy_out(l, h, o, h->count);
    /* mix: its draw and targets in h, read by the copy until done() */
    gf__device_mix mix = {0};
    if (l->aug.mix) {
        gf__mix_draw_of(&l->aug, gf__mix_key(h->seed, h->epoch, h->end_pos), &h->mix);
        gf__mix_targets(&h->mix, h->labels, h->count, l->aug.mix_classes, h->targets);
        mix = (gf__device_mix){&h->mix, h->targets, l->aug.mix_classes};
    }
    char why[256] = "";
    const bool posted = gf__device_offloads(l->dev);
    /* Before the enqueue: its callbacks may free the host slot, or make
     * the batch ready, before this thread takes mu again. */
    pthread_mutex_lock(&l->mu);
    l->copies_in_flight++;
    gf__slot_set_host(h, GF__HOST_FINAL, GF__HOST_OUT);
    o->out_src = (int)(h - l->slots);
    o->copying = true;
    if (posted) {
        o->out_seq = l->xfer;
        o->out_status = 0;
        gf__slot_set_out(o, GF__OUT_FREE, GF__OUT_COPYING);
    }
    pthread_mutex_unlock(&l->mu);
    int rc = gf__device_enqueue(l->dev, (int)(o - l->slots), h->pixels,
                                l->s.flip_on_device ? h->flips : NULL, h->tensors,
                                l->aug.mix ? &mix : NULL, h->count,
                                l->cell_bytes,
                                &l->cv, host_slot_copied, batch_queued, o, posted, why,
                                sizeof why);
    if (rc >= 0)
        return rc;
    char msg[320];
    snprintf(msg, sizeof msg,
             "the CUDA device failed: %s (an earlier kernel or copy of this process may have "
             "faulted)",
             why);
    pthread_mutex_lock(&l->mu);
    l->copies_in_flight--; /* its callback was not queued */
    o->copying = false;
    gf__halt_locked(l, GF_ENODEV, msg);
    pthread_mutex_unlock(&l->mu);
    return GF_ENODEV;
}

/* CPU: the CPU twin of batch sl as jobs for the pool, about two per
 * thread; their completions make it READY (drain_dones). */
static void queue_convert(gf_loader *l, gf__slot *sl, gf__job *js, int *n_jobs)
{
    int chunks = GF__MIN(sl->count, 2 * l->threads);
    int per = (sl->count + chunks - 1) / chunks;
    sl->converting = 0;
    for (int first = 0; first < sl->count; first += per) {
        *gf__add_job(l, js, n_jobs) = (gf__job){
            .kind = GF__JOB_CONVERT,
            .slot = (uint32_t)(sl - l->slots),
            .convert = {.first = first, .count = GF__MIN(per, sl->count - first)}};
        sl->converting++;
    }
}

/* CPU, settings.augment's mix: batch sl is converted; its draw, then mix
 * jobs over element ranges of every sample (a range's samples mixed from
 * the last down, so ranges run in parallel), at most one per cell (the
 * job queue's room: the slot's cells hold nothing else now). The one
 * whose range starts at 0 writes the targets. sl stays CONVERTING until
 * the last is done. */
static void queue_mix(gf_loader *l, gf__slot *sl, gf__job *js, int *n_jobs)
{
    gf__mix_draw_of(&l->aug, gf__mix_key(sl->seed, sl->epoch, sl->end_pos), &sl->mix);
    const size_t E = (size_t)l->cv.h * (size_t)l->cv.w * (size_t)l->cv.c;
    size_t chunks = (size_t)GF__MIN(sl->count, 2 * l->threads);
    size_t per = (E + chunks - 1) / chunks;
    sl->converting = 0;
    for (size_t first = 0; first < E; first += per) {
        *gf__add_job(l, js, n_jobs) = (gf__job){
            .kind = GF__JOB_MIX,
            .slot = (uint32_t)(sl - l->slots),
            .mix = {.first = first, .n = GF__MIN(per, E - first)}};
        sl->converting++;
    }
}

/* Under mu: the delivery side for host slot h's batch. CPU: h's own (the
 * same memory; FREE, since h was). CUDA: h's device slot if free, else
 * any free one whose last copy's done() has run (it owns the slot's
 * in-flight record); NULL when all are held or busy. */
static gf__slot *delivery_slot(gf_loader *l, gf__slot *h)
{
    if (!l->dev) {
        assert(h->out_state == GF__OUT_FREE);
        return h;
    }
    if (h->out_state == GF__OUT_FREE && !h->copying)
        return h;
    for (int i = 0; i < l->n_slots; i++) {
        gf__slot *o = &l->slots[i];
        if (o->out_state == GF__OUT_FREE && !o->copying)
            return o;
    }
    return NULL;
}

/* Hands finalised batch l->xfer to a delivery side: on the CPU its own
 * slot's straight away (after the CPU twin when one is asked for), on
 * CUDA by queueing copy + kernel into a free device slot. Returns true
 * when it did; false when no device slot is free (CUDA) or the device
 * failed. */
static bool deliver_next(gf_loader *l, gf__job *js, int *n_jobs)
{
    assert(l->xfer < l->fin);
    gf__slot *h = gf__slot_of(l, l->xfer);
    assert(h->seq == l->xfer);
    pthread_mutex_lock(&l->mu);
    /* Not FINAL: its copy could not be queued and the loader has halted. */
    gf__slot *o = h->host == GF__HOST_FINAL ? delivery_slot(l, h) : NULL;
    pthread_mutex_unlock(&l->mu);
    if (!o)
        return false;

    gf_batch *b = &o->batch;
    b->count = h->count;
    b->epoch = h->epoch;
    b->position = h->end_pos;
    o->out_last_source = h->last_source; /* h refills while o is held (CUDA) */
    int out = h->empty ? GF__OUT_EMPTY : GF__OUT_READY;
    bool has_pixels = !h->empty && h->status == 0;
    int posted = 0; /* CUDA: the delivery side is COPYING already */
    if (has_pixels && l->dev) {
        if ((posted = queue_copy(l, h, o)) < 0)
            return false;
    } else if (has_pixels && l->convert) {
        queue_convert(l, h, js, n_jobs);
        out = GF__OUT_CONVERTING;
    }
    pthread_mutex_lock(&l->mu);
    if (!posted) {
        o->out_seq = l->xfer;
        o->out_status = h->status;
        gf__slot_set_out(o, GF__OUT_FREE, out);
    }
    /* CUDA: the host slot is free once copied (host_slot_copied), or now
     * if there is nothing to copy; CPU: it is the batch, free when the
     * consumer is done. */
    if (!l->dev)
        gf__slot_set_host(h, GF__HOST_FINAL, GF__HOST_OUT);
    else if (!has_pixels)
        gf__slot_set_host(h, GF__HOST_FINAL, GF__HOST_FREE);
    l->xfer++;
    pthread_cond_broadcast(&l->ready_cv);
    pthread_mutex_unlock(&l->mu);
    return true;
}

/* Under mu: a slot whose host side is free (the lowest), or NULL. */
static gf__slot *free_host_slot(gf_loader *l)
{
    for (int i = 0; i < l->n_slots; i++)
        if (l->slots[i].host == GF__HOST_FREE)
            return &l->slots[i];
    return NULL;
}

/* Gives new batches free slots while the cursor has samples. */
static void assign_batches(gf_loader *l, gf__job *js, int *n_jobs)
{
    for (;;) {
        gf__cursor_normalise(&l->cur);
        pthread_mutex_lock(&l->mu);
        gf__slot *sl = !l->halted && !l->stopping &&
                               l->tail - l->head < (uint64_t)l->active_depth
                           ? free_host_slot(l)
                           : NULL;
        bool more = epochs_left(l, l->cur.epoch);
        if (!more && !l->exhausted) {
            l->exhausted = true;
            pthread_cond_broadcast(&l->ready_cv);
        }
        if (sl && more)
            gf__slot_set_host(sl, GF__HOST_FREE, GF__HOST_FILLING);
        pthread_mutex_unlock(&l->mu);
        if (!sl || !more)
            return;
        assert(sl->n_errs == 0); /* cleared when finalised, or by stop_pipeline */

        /* Batches from xfer to tail are fewer than D: seq % D is unique. */
        l->seq_slot[l->tail % (uint64_t)l->D] = (uint32_t)(sl - l->slots);
        sl->seq = l->tail;
        sl->epoch = l->cur.epoch;
        sl->seed = l->cur.seed;
        sl->end_pos = 0;
        sl->pending = 0;
        sl->n_cells = (int)GF__MIN((uint64_t)l->B, l->cur.len - l->cur.pos);
        for (int c = 0; c < sl->n_cells; c++)
            gf__dispatch_cell(l, js, n_jobs, sl, c, l->cur.pos++);
        pthread_mutex_lock(&l->mu);
        l->tail++;
        pthread_mutex_unlock(&l->mu);
    }
}

/* A free read buffer, or NULL. */
static gf__buf *take_buf(gf_loader *l)
{
    pthread_mutex_lock(&l->mu);
    gf__buf *buf = l->n_free_bufs ? l->free_bufs[--l->n_free_bufs] : NULL;
    pthread_mutex_unlock(&l->mu);
    return buf;
}

/* Starts the queued reads the reader has room and buffers for. */
static void submit_reads(gf_loader *l)
{
    const gf__cell_reader_ops *rd = l->rd;
    if (!rd->uses_buffers(l->rd_self))
        return;
    double t0 = gf__now();
    while (rd->room && rd->room(l->rd_self) > 0) {
        gf__buf *buf = take_buf(l);
        if (!buf)
            break;
        /* Room and a free buffer were checked: a refusal is a bug, and
         * would leave the cell pending for ever. */
        if (rd->submit(l->rd_self, buf) < 0) {
            gf__halt(l, GF_EINVAL, "internal error: the reader refused a read it had room for");
            break;
        }
    }
    l->ctl_submit_s += gf__now() - t0;
    /* The buffers' capacity, as the read budget counts it (every growth
     * of them passes it, every free of a large one too): summing their
     * `cap` here raced with the decode threads, which free a large one
     * when its sample is decoded (gf__budget_done). */
    pthread_mutex_lock(&l->budget.mu);
    l->ctl_buf_bytes = l->budget.held;
    pthread_mutex_unlock(&l->budget.mu);
}

static void reap_reads(gf_loader *l, gf__job *js, int *n_jobs)
{
    if (!l->rd->reap)
        return;
    int n;
    while ((n = l->rd->reap(l->rd_self, l->outs, l->js_cap, &l->ctl_uring_bytes)) > 0)
        gf__cells_out(l, l->outs, n, js, n_jobs);
}

/* Takes the completions queued so far into their slots (a batch's last
 * convert job queues its mix jobs in js, with mix). Returns how many; the
 * caller pops them (after reap_reads, before anything is finalised). */
static uint32_t drain_dones(gf_loader *l, gf__job *js, int *n_jobs)
{
    pthread_mutex_lock(&l->mu);
    uint32_t n_done = gf__pool_dones_locked(&l->pool);
    /* None: pump's round may be its last, so the next completion wakes
     * the loop. Some: pump drains again before it sleeps. */
    l->ctl_may_sleep = n_done == 0;
    pthread_mutex_unlock(&l->mu);
    for (uint32_t i = 0; i < n_done; i++) {
        gf__done d = gf__pool_done(&l->pool, i);
        gf__slot *sl = &l->slots[d.slot];
        if (d.kind == GF__JOB_DECODE) {
            if (d.decode.page_cache == GF__PAGE_CACHE_HIT)
                l->ctl_page_cache_hits++;
            else if (d.decode.page_cache == GF__PAGE_CACHE_MISS)
                l->ctl_page_cache_misses++;
            /* A miss: the cell is the reader's again, for a real read. */
            if (l->rd->decoded &&
                l->rd->decoded(l->rd_self, sl, (int)d.decode.cell, d.decode.page_cache))
                continue;
        }
        if (d.kind == GF__JOB_CONVERT || d.kind == GF__JOB_MIX) {
            assert(sl->converting > 0);
            if (--sl->converting == 0 && d.kind == GF__JOB_CONVERT && l->aug.mix) {
                queue_mix(l, sl, js, n_jobs);
            } else if (sl->converting == 0) {
                pthread_mutex_lock(&l->mu);
                gf__slot_set_out(sl, GF__OUT_CONVERTING, GF__OUT_READY);
                pthread_cond_broadcast(&l->ready_cv);
                pthread_mutex_unlock(&l->mu);
            }
            continue;
        }
        if (!d.decode.err) {
            if (l->cell_bytes) /* else no image: nothing was decoded */
                l->ctl_decoded[gf__decoded_by(d.decode.used)]++;
            if (d.decode.used & GF__WARNED) {
                l->ctl_warned++;
                gf__record_warning(l, sl->indices[d.decode.cell], d.decode.warn_code, d.decode.why);
                free(d.decode.why);
                d.decode.why = NULL;
            }
            sl->flips[d.decode.cell] = (d.decode.used & GF__FLIPPED) != 0;
        }
        gf__cell_finished(l, sl, (int)d.decode.cell, d.decode.err, d.decode.member,
                          d.decode.why);
    }
    return n_done;
}

/* Reads that finished at submission (refused by size): reaped next round. */
static bool reads_finished(gf_loader *l)
{
    return l->rd->has_done && l->rd->has_done(l->rd_self);
}

/* remote_wait_s: the time since the last round counts when, at its end,
 * cells waited for remote bytes (a cell's ranged read in flight, or its
 * shard) and no decode job was queued. Shards fetched ahead while every
 * cell is decoded or the ring is full are not a wait. */
static void tally_remote_wait(gf_loader *l)
{
    if (!l->rd->waiting)
        return;
    double now = gf__now();
    bool in_flight = l->rd->waiting(l->rd_self);
    pthread_mutex_lock(&l->mu);
    if (l->ctl_remote_waiting)
        l->remote_wait_s += now - l->ctl_remote_since;
    l->ctl_remote_waiting = in_flight && gf__fifo_len(&l->pool.job_q) == 0;
    pthread_mutex_unlock(&l->mu);
    l->ctl_remote_since = now;
}

/* Under mu: the reader's requests, retries and bytes, with earlier
 * runs'. */
static void publish_counts_locked(gf_loader *l, const gf__fetch_counts *fc)
{
    l->remote_requests = l->remote_base.requests + fc->requests;
    l->remote_retries = l->remote_base.retries + fc->retries;
    l->remote_bytes = l->remote_base.bytes + fc->bytes;
}

static void pump(gf_loader *l)
{
    gf__job *js = l->js;
    gf__device_harvest(l->dev); /* copies done since: their times, for stats */
    for (;;) {
        int n_jobs = 0;
        uint32_t n_done = drain_dones(l, js, &n_jobs);
        reap_reads(l, js, &n_jobs);
        /* A shard arrives (and is queued) in a round before its cells'
         * batch is delivered: the count is never behind the last batch. */
        unsigned unwritten = l->rd->unwritten ? l->rd->unwritten(l->rd_self) : 0;
        /* Published before any batch they count is finalised. */
        pthread_mutex_lock(&l->mu);
        if (unwritten != l->unwritten) { /* a consumer at the end waits on it */
            l->unwritten = unwritten;
            pthread_cond_broadcast(&l->ready_cv);
        }
        gf__pool_pop_dones_locked(&l->pool, n_done);
        for (int i = 0; i < GF__DECODERS; i++)
            l->decoded[i] += l->ctl_decoded[i];
        l->decode_warnings += l->ctl_warned;
        l->uring_bytes += l->ctl_uring_bytes;
        l->uring_submit_s += l->ctl_submit_s;
        l->page_cache_reads += l->ctl_page_cache_hits;
        l->page_cache_misses += l->ctl_page_cache_misses;
        l->buf_bytes = l->ctl_buf_bytes;
        if (l->rd->counts) {
            gf__fetch_counts fc;
            l->rd->counts(l->rd_self, &fc);
            publish_counts_locked(l, &fc);
        }
        pthread_mutex_unlock(&l->mu);
        memset(l->ctl_decoded, 0, sizeof l->ctl_decoded);
        l->ctl_warned = l->ctl_uring_bytes = 0;
        l->ctl_submit_s = 0;
        l->ctl_page_cache_hits = l->ctl_page_cache_misses = 0;

        while (gf__finalise_oldest(l, js, &n_jobs))
            ;
        while (l->xfer < l->fin && deliver_next(l, js, &n_jobs))
            ;
        assign_batches(l, js, &n_jobs);
        int n;
        if (l->rd->ahead && !l->halted && (n = l->rd->ahead(l->rd_self, l->outs, l->js_cap)) > 0)
            gf__cells_out(l, l->outs, n, js, &n_jobs);
        push_jobs(l, js, n_jobs);
        submit_reads(l);
        if (n_done == 0 && n_jobs == 0 && !reads_finished(l))
            break;
    }
    tally_remote_wait(l);
}

static void close_handles(gf_loader *l)
{
    if (l->rd->close)
        l->rd->close(l->rd_self);
    uv_close((uv_handle_t *)&l->wake, NULL);
    if (l->read_polling)
        uv_close((uv_handle_t *)&l->read_poll, NULL);
    if (l->tuning)
        uv_close((uv_handle_t *)&l->tune_timer, NULL);
}

static void on_wake(uv_async_t *h)
{
    gf_loader *l = h->data;
    pthread_mutex_lock(&l->mu);
    bool stop = l->stopping;
    pthread_mutex_unlock(&l->mu);
    if (stop) {
        close_handles(l);
        return;
    }
    pump(l);
}

static void on_read_fd(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    on_wake(&((gf_loader *)h->data)->wake);
}

/* The reader has completions (called on the loop, from its own handles'
 * callbacks, never from inside pump). */
static void on_read_ready(void *arg)
{
    gf_loader *l = arg;
    pthread_mutex_lock(&l->mu);
    bool stop = l->stopping;
    pthread_mutex_unlock(&l->mu);
    if (!stop)
        pump(l);
}

static void wake(void *arg)
{
    gf__wake_controller(arg);
}

static void on_tune(uv_timer_t *h)
{
    gf_loader *l = h->data;
    if (gf__autotune_window(l))
        pump(l); /* a deeper ring may take a batch now */
}

static void *controller_main(void *arg)
{
    gf_loader *l = arg;
    pthread_setname_np(pthread_self(), "gf-control");
    if (gf__device_bind(l->dev) < 0)
        gf__halt(l, GF_ENODEV, "cannot make the loader's CUDA device current");
    pump(l);
    uv_run(&l->loop, UV_RUN_DEFAULT);
    return NULL;
}

int gf__controller_start(gf_loader *l)
{
    if (gf__check_descriptors(l) < 0) /* before libuv, which may abort */
        return GF_EMFILE;
    if (uv_loop_init(&l->loop) != 0)
        return gf__fail_locking(l, GF_ENOMEM, "uv_loop_init failed");
    uv_async_init(&l->loop, &l->wake, on_wake);
    l->wake.data = l;
    const gf__reader_hooks hooks = {
        .loop = &l->loop, .ready = on_read_ready, .wake = wake, .ctx = l};
    if (l->rd->start && l->rd->start(l->rd_self, &hooks) < 0) {
        uv_close((uv_handle_t *)&l->wake, NULL);
        uv_run(&l->loop, UV_RUN_DEFAULT);
        uv_loop_close(&l->loop);
        return l->fail_code ? l->fail_code : GF_ENOMEM;
    }
    int fd = l->rd->poll_fd ? l->rd->poll_fd(l->rd_self) : -1;
    l->read_polling = fd >= 0;
    if (l->read_polling) {
        uv_poll_init(&l->loop, &l->read_poll, fd);
        l->read_poll.data = l;
        uv_poll_start(&l->read_poll, UV_READABLE, on_read_fd);
    }
    l->tuning = l->s.autotune != 0;
    if (l->tuning) {
        uv_timer_init(&l->loop, &l->tune_timer);
        l->tune_timer.data = l;
        gf__autotune_begin(l);
        uv_timer_start(&l->tune_timer, on_tune, 100, 100);
    }
    int rc = pthread_create(&l->controller, NULL, controller_main, l);
    if (rc == 0)
        return 0;
    /* Closed without running. */
    close_handles(l);
    uv_run(&l->loop, UV_RUN_DEFAULT);
    uv_loop_close(&l->loop);
    return rc; /* the lifecycle's unwinding stops the reader */
}

void gf__controller_stop(gf_loader *l)
{
    uv_async_send(&l->wake);
    pthread_join(l->controller, NULL);
    /* Callbacks still to come see `stopping` and leave the loop alone. */
    uv_loop_close(&l->loop);
    if (l->rd->counts) {
        gf__fetch_counts fc;
        l->rd->counts(l->rd_self, &fc);
        l->remote_base.requests += fc.requests;
        l->remote_base.retries += fc.retries;
        l->remote_base.bytes += fc.bytes;
        /* What the last pump did not publish (observers read under mu). */
        pthread_mutex_lock(&l->mu);
        publish_counts_locked(l, &(gf__fetch_counts){0});
        pthread_mutex_unlock(&l->mu);
    }
}

void gf__wake_controller(gf_loader *l)
{
    uv_async_send(&l->wake);
}

void gf__controller_job_done(void *arg, bool queued)
{
    gf_loader *l = arg;
    if (!queued) {
        gf__halt_locked(l, GF_ENOMEM, "internal error: the completion queue is full");
    } else if (l->ctl_may_sleep) { /* else it drains again before it sleeps */
        l->ctl_may_sleep = false;
        gf__wake_controller(l);
    }
}
