/* Autotune, a timer on the controller's loop: every window in which the
 * consumer waited more than 5% of it, it adds a decode thread if the
 * active ones were busy (input-bound), else a batch of depth (jitter, or
 * reads in flight). It never shrinks: a loader that stopped stalling stays
 * where it got. Runs on the controller thread (gf__autotune_start: the
 * thread that starts the pipeline, before the controller exists). */
#include "loader_impl.h"

/* Busy seconds of the readers and decoders so far; under mu. */
static double busy_s(const gf_loader *l)
{
    double busy = l->uring_submit_s;
    for (int i = 0; i < l->n_workers; i++)
        busy += l->workers[i].read_s + l->workers[i].decode_s + l->workers[i].convert_s;
    return busy;
}

static void on_tune(uv_timer_t *h)
{
    gf_loader *l = h->data;
    double now = gf__now();
    pthread_mutex_lock(&l->mu);
    double wait = l->wait_s + (l->waiting_since > 0 ? now - l->waiting_since : 0);
    double busy = busy_s(l);
    double dt = now - l->tune_t;
    double stall = dt > 0 ? (wait - l->tune_wait) / dt : 0;
    double per_thread = dt > 0 ? (busy - l->tune_busy) / (dt * l->active_threads) : 0;
    bool grew = false;
    if (stall > 0.05 && !l->exhausted) {
        if (per_thread > 0.7 && l->active_threads < l->n_workers) {
            l->active_threads++;
            pthread_cond_broadcast(&l->pool.work);
            grew = true;
        } else if (l->active_depth < l->D) {
            l->active_depth++;
            grew = true;
        }
    }
    if (grew)
        l->tune_changes++;
    l->tune_t = now;
    l->tune_wait = wait;
    l->tune_busy = busy;
    pthread_mutex_unlock(&l->mu);
    if (grew)
        gf__pump(l); /* a deeper ring may take a batch now */
}

void gf__autotune_start(gf_loader *l)
{
    l->tuning = l->s.autotune != 0;
    if (!l->tuning)
        return;
    uv_timer_init(&l->loop, &l->tune_timer);
    l->tune_timer.data = l;
    l->tune_t = gf__now();
    l->tune_wait = l->wait_s;
    l->tune_busy = busy_s(l);
    uv_timer_start(&l->tune_timer, on_tune, 100, 100);
}
