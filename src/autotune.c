/* Autotune's decision, once per window of the controller's 100 ms timer
 * (controller.c owns the timer): when the consumer waited more than 5%
 * of the window, a decode thread more if the active ones were busy
 * (input-bound), else a batch of depth (jitter, or reads in flight). It
 * never shrinks: a loader that stopped stalling stays where it got. On
 * the controller thread. */
#include "autotune.h"

#include "work.h"

/* Busy seconds of the readers and decoders so far; under mu. */
static double busy_s(const gf_loader *l)
{
    double busy = l->uring_submit_s;
    for (int i = 0; i < l->n_workers; i++)
        busy += l->workers[i].read_s + l->workers[i].decode_s + l->workers[i].convert_s;
    return busy;
}

void gf__autotune_begin(gf_loader *l)
{
    l->tune_t = gf__now();
    pthread_mutex_lock(&l->mu); /* the decode threads run already */
    l->tune_wait = l->wait_s;
    l->tune_busy = busy_s(l);
    pthread_mutex_unlock(&l->mu);
}

bool gf__autotune_window(gf_loader *l)
{
    double now = gf__now();
    pthread_mutex_lock(&l->mu);
    double wait = l->wait_s + (l->waiting_since > 0 ? now - l->waiting_since : 0);
    double busy = busy_s(l);
    double dt = now - l->tune_t;
    double stall = dt > 0 ? (wait - l->tune_wait) / dt : 0;
    double per_thread = dt > 0 ? (busy - l->tune_busy) / (dt * l->pool.active) : 0;
    bool grew = false;
    if (stall > 0.05 && !l->exhausted) {
        if (per_thread > 0.7 && gf__pool_grow_locked(&l->pool)) {
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
    return grew;
}
