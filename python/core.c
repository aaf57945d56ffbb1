/*
 * The loader behind a Python Loader (gfp_core) and its held slots
 * (gfp_slot): reference counts, and the fetcher thread that runs gf_next.
 * Runs on the Python thread that iterates, on the fetcher, and (the last
 * unref of a slot) on whatever thread drops the last export, with or
 * without the GIL: nothing here touches a Python object except
 * gfp_core_next's signal check, which runs with the GIL.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpufeed_py.h"

/* How often a consumer waiting for a batch looks for Ctrl-C. */
#define GFP_SIGNAL_POLL_NS (50 * 1000 * 1000)

static void *fetcher_main(void *arg)
{
    gfp_core *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->want && !c->stop)
            pthread_cond_wait(&c->cv, &c->mu);
        if (!c->want) /* stop, and nothing asked */
            break;
        c->want = 0;
        pthread_mutex_unlock(&c->mu);
        gf_batch *b = NULL;
        int rc = gf_next(c->l, &b);
        gf_state st;
        if (gf_get_state(c->l, &st) < 0)
            memset(&st, 0, sizeof st);
        pthread_mutex_lock(&c->mu);
        c->rc = rc;
        c->b = b;
        c->after = st;
        c->done = 1;
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

int gfp_core_open(gfp_core **out, const gf_settings *s, char *why, size_t why_len)
{
    *out = NULL;
    gfp_core *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(why, why_len, "out of memory");
        return GF_ENOMEM;
    }
    atomic_init(&c->refs, 1);
    atomic_init(&c->held, 0);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    int rc = gf_open(&c->l, s);
    if (rc == 0) {
        gf_stats st;
        gf_get_stats(c->l, &st);
        c->prefetch_depth = st.prefetch_depth;
        c->device_id = st.device_id;
        gf_get_state(c->l, &c->delivered);
        /* Ctrl-C belongs to the Python thread: the fetcher blocks signals. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        int e = pthread_create(&c->fetcher, NULL, fetcher_main, c);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (e)
            rc = GF_ETHREAD;
        else
            c->fetcher_started = 1;
    }
    if (rc < 0) {
        snprintf(why, why_len, "%s", rc == GF_ETHREAD ? "could not start the fetcher thread"
                                     : c->l ? gf_last_error(c->l) : gf_strerror(rc));
        if (!why[0])
            snprintf(why, why_len, "%s", gf_strerror(rc));
        gfp_core_unref(c);
        return rc;
    }
    *out = c;
    return 0;
}

void gfp_core_settle(gfp_core *c)
{
    pthread_mutex_lock(&c->mu);
    while (c->in_flight && !c->done)
        pthread_cond_wait(&c->cv, &c->mu);
    gf_batch *b = c->in_flight && c->rc == 0 ? c->b : NULL;
    c->in_flight = c->done = 0;
    c->b = NULL;
    pthread_mutex_unlock(&c->mu);
    if (b)
        gf_release(c->l, b);
}

void gfp_core_unref(gfp_core *c)
{
    if (!c || atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    if (c->fetcher_started) {
        gfp_core_settle(c);
        pthread_mutex_lock(&c->mu);
        c->stop = 1;
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->fetcher, NULL);
    }
    gf_close(&c->l);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

int gfp_core_next(gfp_core *c, gf_batch **b)
{
    *b = NULL;
    pthread_mutex_lock(&c->mu);
    if (!c->in_flight) {
        c->in_flight = 1;
        c->want = 1;
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    for (;;) {
        int got;
        Py_BEGIN_ALLOW_THREADS
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += GFP_SIGNAL_POLL_NS;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&c->mu);
        while (!c->done && pthread_cond_timedwait(&c->cv, &c->mu, &until) != ETIMEDOUT)
            ;
        got = c->done;
        pthread_mutex_unlock(&c->mu);
        Py_END_ALLOW_THREADS
        if (got)
            break;
        if (PyErr_CheckSignals() < 0)
            return 1;
    }
    pthread_mutex_lock(&c->mu);
    int rc = c->rc;
    *b = c->b;
    if (rc == 0)
        c->delivered = c->after;
    c->in_flight = c->done = 0;
    c->b = NULL;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

gfp_slot *gfp_slot_new(gfp_core *c, gf_batch *b)
{
    gfp_slot *s = malloc(sizeof *s);
    if (!s)
        return NULL;
    atomic_init(&s->refs, 1);
    atomic_init(&s->stream, 0);
    s->core = c;
    s->b = b;
    atomic_fetch_add(&c->refs, 1);
    atomic_fetch_add(&c->held, 1);
    return s;
}

void gfp_slot_ref(gfp_slot *s)
{
    atomic_fetch_add(&s->refs, 1);
}

void gfp_slot_unref(gfp_slot *s)
{
    if (atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    gfp_core *c = s->core;
    /* Ordered after the consumer's stream on CUDA; the host ignores it. */
    gf_release_stream(c->l, s->b, (void *)atomic_load(&s->stream));
    atomic_fetch_sub(&c->held, 1);
    free(s);
    gfp_core_unref(c);
}
