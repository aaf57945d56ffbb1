/*
 * The consumer's calls: gf_next and gf_next_timed (the next batch in
 * sequence, growing the ring when held batches leave too few slots),
 * gf_release and gf_release_stream (a held batch handed back), and
 * gf_batch_wait. Runs on the consumer's thread (gf_release* on any),
 * while gf-control runs: every step of a slot under mu, never across a
 * device call. Apart from loader.c, whose lifecycle calls run while no
 * consumer call does: this is the one side of the API that meets the
 * running pipeline on every batch. loader_impl.h says who owns what.
 */
#include "loader_impl.h"

#include "controller.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Under mu: the delivery side is free again; on the CPU it is the host
 * slot too. */
static void free_out(gf_loader *l, gf__slot *sl, int from)
{
    gf__slot_set_out(sl, from, GF__OUT_FREE);
    if (!l->dev)
        gf__slot_set_host(sl, GF__HOST_OUT, GF__HOST_FREE);
}

/* A whole epoch gave no batch: every sample failed (on_error = skip) or a
 * short last batch was dropped. Under mu. */
static GF__COLD int no_sample_in_epoch(gf_loader *l, uint64_t epoch)
{
    if (l->n_recent == 0)
        return gf__fail(l, GF_EDATASET, "epoch %llu delivered no batch: its %llu samples are "
                    "fewer than a batch of %d, and drop_last drops them",
                    (unsigned long long)epoch, (unsigned long long)l->epoch_len, l->B);
    const gf_sample_error *e =
        &l->recent[(l->recent_at - 1 + GF_RECENT_ERRORS) % GF_RECENT_ERRORS];
    return gf__fail(l, GF_EDATASET, "epoch %llu delivered no batch: none of its %llu samples "
                "could be used (%llu sample errors so far; the last: %s: %s)",
                (unsigned long long)epoch, (unsigned long long)l->epoch_len,
                (unsigned long long)l->errors, e->path, e->reason);
}

/* timeout_ns from now on ready_cv's clock (CLOCK_MONOTONIC, gf_open). */
static struct timespec deadline_after(int64_t timeout_ns)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    int64_t ns = t.tv_nsec + timeout_ns % 1000000000;
    t.tv_sec += (time_t)(timeout_ns / 1000000000 + ns / 1000000000);
    t.tv_nsec = (long)(ns % 1000000000);
    return t;
}

static bool ts_before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec != b->tv_sec ? a->tv_sec < b->tv_sec : a->tv_nsec < b->tv_nsec;
}

/* The end waits this long for the shard cache's next write at most: a
 * stuck disk does not hold gf_next forever (gf_close waits for the rest). */
#define EOF_WRITE_WAIT_S 30

/* Under mu, every batch delivered: whether the end waits for the shard
 * cache's writes. A loader kept open past its end (Python's last batch
 * keeps a closed Loader open) while the next opens on the same cache_dir,
 * which looks for copies at its open, would miss shards still being
 * written. Each write that finishes gives the next one its time. */
static bool writes_owed(gf_loader *l)
{
    if (l->unwritten != l->eof_unwritten) {
        l->eof_unwritten = l->unwritten;
        l->eof_until = deadline_after(EOF_WRITE_WAIT_S * 1000000000ll);
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return l->unwritten > 0 && ts_before(&now, &l->eof_until);
}

int gf_next(gf_loader *l, gf_batch **out)
{
    return gf_next_timed(l, out, -1);
}

/* Under mu: the delivery slot of batch seq, ready or empty, or NULL. */
static gf__slot *ready_slot(gf_loader *l, uint64_t seq)
{
    for (int i = 0; i < l->n_slots; i++) {
        gf__slot *sl = &l->slots[i];
        if (sl->out_seq == seq &&
            (sl->out_state == GF__OUT_READY || sl->out_state == GF__OUT_EMPTY))
            return sl;
    }
    return NULL;
}

/* Under mu: GF_EBUSY, the message naming the held batches, oldest first
 * by (epoch, position), a few of them. */
static GF__COLD int held_busy(gf_loader *l, const char *why)
{
    char list[200] = "";
    size_t len = 0;
    int shown = 0;
    uint64_t after_e = 0, after_p = 0;
    int after_i = -1;
    for (; shown < 4; shown++) {
        const gf__slot *best = NULL;
        for (int i = 0; i < l->n_slots; i++) {
            const gf__slot *sl = &l->slots[i];
            const gf_batch *b = &sl->batch;
            if (sl->out_state != GF__OUT_HELD)
                continue;
            bool later = after_i < 0 || b->epoch > after_e ||
                         (b->epoch == after_e &&
                          (b->position > after_p || (b->position == after_p && i > after_i)));
            bool earlier = !best || b->epoch < best->batch.epoch ||
                           (b->epoch == best->batch.epoch &&
                            b->position < best->batch.position);
            if (later && earlier)
                best = sl;
        }
        if (!best)
            break;
        after_e = best->batch.epoch;
        after_p = best->batch.position;
        after_i = (int)(best - l->slots);
        int n = snprintf(list + len, sizeof list - len, "%s(epoch %llu, position %llu)",
                         shown ? ", " : "", (unsigned long long)after_e,
                         (unsigned long long)after_p);
        len = n < 0 ? len : GF__MIN(len + (size_t)n, sizeof list - 1);
    }
    return gf__fail(l, GF_EBUSY, "%s: %d batches are held: %s%s; release one first", why,
                    l->held, list, l->held > shown ? ", ..." : "");
}

/* The consumer's thread, outside mu: adds slots until prefetch_depth are
 * not held (the batch gf_next hands out next takes one of them), within
 * max_held_batches. A refusal (memory caps) is kept in why; the pipeline
 * then runs on the slots it has, and a later gf_next tries again only
 * when none is left (force). Returns 0 or the refusal's code. */
static int keep_depth_free(gf_loader *l, bool force, char *why, size_t why_len)
{
    for (;;) {
        pthread_mutex_lock(&l->mu);
        bool need = l->n_slots < l->max_slots &&
                    (force ? l->held >= l->n_slots : l->n_slots < l->held + l->D);
        pthread_mutex_unlock(&l->mu);
        if (!need || (!force && l->grow_refused))
            return 0;
        int rc = gf__ring_grow(l, why, why_len);
        l->grow_refused = rc < 0;
        if (rc < 0)
            return rc;
        gf__wake_controller(l); /* the new slot may take a batch */
        force = false;
    }
}

int gf_next_timed(gf_loader *l, gf_batch **out, int64_t timeout_ns)
{
    if (!l || !out)
        return GF_EINVAL;
    *out = NULL;
    double t0 = gf__now();
    struct timespec until = {0, 0};
    if (timeout_ns > 0)
        until = deadline_after(timeout_ns);
    char why[256] = "";
    if (l->running)
        keep_depth_free(l, false, why, sizeof why);
    int rc = 0;
    pthread_mutex_lock(&l->mu);
    l->waiting_since = t0;
    for (;;) {
        if (l->fail_code) {
            rc = l->fail_code;
            break;
        }
        if (!l->running) {
            rc = GF_EINVAL;
            break;
        }
        gf__slot *sl = ready_slot(l, l->head);
        if (sl) {
            if (sl->out_state == GF__OUT_EMPTY || sl->out_status < 0) {
                rc = sl->out_status;
                /* The rest of an epoch a change of world split may be
                 * under a batch a rank: drop_last drops it. */
                bool rest = l->sampler.rest.on && !l->order.idx &&
                            sl->batch.epoch == l->sampler.rest.epoch;
                /* So may a mix's epoch under mix_epoch first, each its own
                 * length, once one has delivered. */
                rest |= l->blend.src && l->s.mix_epoch == GF_MIX_EPOCH_FIRST && l->live_any;
                if (rc == 0 && !rest && (!l->live_any || sl->batch.epoch > l->live_epoch))
                    rc = no_sample_in_epoch(l, sl->batch.epoch);
                free_out(l, sl, sl->out_state);
                l->head++;
                gf__wake_controller(l);
                if (rc < 0) {
                    l->fail_code = rc;
                    break;
                }
                continue;
            }
            if (l->held >= l->s.max_held_batches) {
                rc = held_busy(l, "gf_next: max_held_batches reached");
                break;
            }
            gf__slot_set_out(sl, GF__OUT_READY, GF__OUT_HELD);
            l->held++;
            l->head++;
            /* A free slot may be waiting only for head to move (tail -
             * head at active_depth): the held slots are not the bound. */
            gf__wake_controller(l);
            l->samples += (uint64_t)sl->batch.count;
            l->batches++;
            if (l->blend.src) {
                for (int i = 0; i < sl->batch.count; i++) {
                    int k = gf__dataset_source_of(&l->ds, (uint64_t)sl->batch.indices[i]);
                    sl->sources[i] = k;
                    l->src_samples[k]++;
                }
                l->src_wait_s[sl->out_last_source] += gf__now() - t0;
            }
            l->live_any = true;
            l->live_epoch = sl->batch.epoch;
            l->next_epoch = sl->batch.epoch;
            l->next_pos = sl->batch.position;
            if (l->next_pos >= gf__cursor_len(&l->cur, l->next_epoch)) {
                l->next_epoch++;
                l->next_pos = 0;
            }
            /* The epoch a change of world split is shorter than the next. */
            l->epoch_len = gf__cursor_len(&l->cur, l->next_epoch);
            *out = &sl->batch;
            break;
        }
        if (l->halt_code) {
            rc = l->fail_code = l->halt_code;
            break;
        }
        if (l->exhausted && l->head == l->tail) {
            if (!writes_owed(l)) {
                rc = GF_EOF;
                break;
            }
            /* Until the writes are done or their time is up, within the
             * caller's timeout (as a batch is waited for). */
            bool theirs = timeout_ns >= 0 && !ts_before(&l->eof_until, &until);
            if (timeout_ns == 0 ||
                (pthread_cond_timedwait(&l->ready_cv, &l->mu, theirs ? &until : &l->eof_until) ==
                     ETIMEDOUT &&
                 theirs)) {
                rc = GF_EAGAIN;
                break;
            }
            continue;
        }
        if (l->held >= l->s.max_held_batches) {
            rc = held_busy(l, "gf_next: max_held_batches reached");
            break;
        }
        /* Every slot is held: the next batch has none to go to. */
        if (l->held >= l->n_slots) {
            pthread_mutex_unlock(&l->mu);
            int grew = keep_depth_free(l, true, why, sizeof why);
            pthread_mutex_lock(&l->mu);
            if (grew == 0 && l->held < l->n_slots)
                continue;
            if (l->held >= l->n_slots) {
                char what[320];
                snprintf(what, sizeof what, "gf_next: all %d batch slots are held and no other "
                         "can be added (%s)", l->n_slots, why[0] ? why : "no reason given");
                rc = held_busy(l, what);
                break;
            }
            continue; /* one was released meanwhile */
        }
        if (timeout_ns < 0) {
            pthread_cond_wait(&l->ready_cv, &l->mu);
        } else if (timeout_ns == 0 ||
                   pthread_cond_timedwait(&l->ready_cv, &l->mu, &until) == ETIMEDOUT) {
            /* Nothing ready in time: nothing was taken, so the next call
             * goes on exactly from here. */
            rc = GF_EAGAIN;
            break;
        }
    }
    l->wait_s += gf__now() - t0;
    l->waiting_since = 0;
    pthread_mutex_unlock(&l->mu);
    return rc;
}

int gf_release_stream(gf_loader *l, gf_batch *b, void *stream)
{
    if (!l || !b || !l->slots)
        return GF_EINVAL;
    pthread_mutex_lock(&l->mu);
    bool ours = b->slot_ < (uint32_t)l->n_slots && &l->slots[b->slot_].batch == b;
    gf__slot *sl = ours ? &l->slots[b->slot_] : NULL;
    bool held = sl && sl->out_state == GF__OUT_HELD;
    pthread_mutex_unlock(&l->mu);
    if (!held)
        return GF_EINVAL;
    /* Only the consumer moves a held slot on, so the state cannot change
     * while the event is recorded outside the lock. */
    char why[256];
    int rc = l->dev ? gf__device_release(l->dev, (int)b->slot_, stream, why, sizeof why) : 0;
    if (rc == GF_EINVAL) { /* a bad stream: still held, release it again */
        pthread_mutex_lock(&l->mu);
        gf__fail(l, GF_EINVAL, "gf_release_stream: %s", why);
        pthread_mutex_unlock(&l->mu);
        return GF_EINVAL;
    }
    if (rc < 0) {
        /* The device is lost (a fault): the slot cannot be reused safely,
         * and gf_next says why, not "held". */
        char msg[320];
        snprintf(msg, sizeof msg, "gf_release_stream: the CUDA device failed: %s", why);
        gf__halt(l, GF_ENODEV, msg);
        return GF_ENODEV;
    }
    pthread_mutex_lock(&l->mu);
    free_out(l, sl, GF__OUT_HELD);
    assert(l->held > 0);
    l->held--;
    bool wake = l->running; /* a failed gf_seek left no loop to wake */
    pthread_mutex_unlock(&l->mu);
    if (wake)
        gf__wake_controller(l);
    return 0;
}

int gf_release(gf_loader *l, gf_batch *b)
{
    return gf_release_stream(l, b, NULL);
}

int gf_batch_wait(const gf_batch *b, void *stream)
{
    if (!b)
        return GF_EINVAL;
    return b->device == GF_DEVICE_CUDA ? gf__device_wait(b->ready_event, stream) : 0;
}
