/*
 * The loader behind a Python Loader (gfp_core) and its held slots
 * (gfp_slot): reference counts, the wait for the next batch, the batch
 * a KeyboardInterrupt took back, and the fork() check. Runs on the Python
 * thread that iterates and (the last unref of a slot) on whatever thread
 * drops the last export, with or without the GIL: the unrefs touch no
 * Python object; the rest runs with the GIL.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpufeed_py.h"

/* How long one wait for a batch lasts before looking for Ctrl-C. */
#define GFP_SIGNAL_POLL_NS (50 * 1000 * 1000)

int gfp_core_open(gfp_core **out, const gf_settings *s, char *why, size_t why_len)
{
    return gfp_core_open_samples(out, s, NULL, NULL, 0, why, why_len);
}

int gfp_core_open_samples(gfp_core **out, const gf_settings *s, const char *const *paths,
                          const int32_t *labels, uint64_t n, char *why, size_t why_len)
{
    *out = NULL;
    gfp_core *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(why, why_len, "out of memory");
        return GF_ENOMEM;
    }
    atomic_init(&c->refs, 1);
    atomic_init(&c->held, 0);
    c->pid = getpid();
    int rc = paths ? gf_open_samples(&c->l, s, paths, labels, n) : gf_open(&c->l, s);
    if (rc == 0) {
        gf_stats st;
        gf_get_stats(c->l, &st);
        c->prefetch_depth = st.prefetch_depth;
        c->device_id = st.device_id;
    }
    if (rc < 0) {
        snprintf(why, why_len, "%s", c->l ? gf_last_error(c->l) : gf_strerror(rc));
        if (!why[0])
            snprintf(why, why_len, "%s", gf_strerror(rc));
        gfp_core_unref(c);
        return rc;
    }
    *out = c;
    return 0;
}

int gfp_inherited(const gfp_core *c)
{
    return c->pid != getpid();
}

int gfp_refuse_inherited(const gfp_core *c, const char *what)
{
    if (!gfp_inherited(c))
        return 0;
    char msg[300];
    snprintf(msg, sizeof msg, "%s: this loader was opened in process %d and inherited across "
             "fork(); its threads and batches stay the parent's: open a new gpufeed.Loader in "
             "this process (dropping this one here is safe)", what, (int)c->pid);
    gfp_raise(GF_EINVAL, msg, NULL);
    return -1;
}

void gfp_core_unref(gfp_core *c)
{
    /* A fork()ed child's copy: its threads and ring are the parent's
     * (gf_close would join threads that do not exist here); leaked. */
    if (!c || gfp_inherited(c) || atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    if (c->pending)
        gf_release(c->l, c->pending);
    gf_close(&c->l);
    free(c);
}

void gfp_core_drop_pending(gfp_core *c)
{
    if (c->pending)
        gf_release(c->l, c->pending);
    c->pending = c->last = NULL;
}

void gfp_core_state(gfp_core *c, gf_state *st)
{
    if (c->pending)
        *st = c->pending_state;
    else
        gf_get_state(c->l, st);
}

int gfp_core_next(gfp_core *c, gf_batch **b)
{
    if (c->pending) {
        *b = c->last = c->pending;
        c->last_state = c->pending_state;
        c->pending = NULL;
        return 0;
    }
    gf_state before;
    gf_get_state(c->l, &before); /* no gf_next overlaps: the state before *b */
    for (;;) {
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = gf_next_timed(c->l, b, GFP_SIGNAL_POLL_NS);
        Py_END_ALLOW_THREADS
        if (rc == 0) {
            /* A signal during the last slice: the handler's exception
             * would drop the Batch on its way up; keep the batch instead. */
            if (PyErr_CheckSignals() < 0) {
                c->pending = *b;
                c->pending_state = before;
                c->last = NULL;
                return 1;
            }
            c->last = *b;
            c->last_state = before;
            return 0;
        }
        if (rc != GF_EAGAIN)
            return rc;
        /* Nothing was taken: after a KeyboardInterrupt the next call
         * delivers the batch this one was waiting for. */
        if (PyErr_CheckSignals() < 0)
            return 1;
    }
}

gfp_slot *gfp_slot_new(gfp_core *c, gf_batch *b)
{
    gfp_slot *s = malloc(sizeof *s + (size_t)b->count * sizeof s->labels64[0]);
    if (!s)
        return NULL;
    for (int i = 0; i < b->count; i++)
        s->labels64[i] = b->labels[i];
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

int gfp_slot_take_back(gfp_slot *s)
{
    gfp_core *c = s->core;
    /* Only the newest delivery, held by nothing else, and not while
     * another thread waits in next(): the order stays the loader's. The
     * Loader's own reference (not closed) keeps c. */
    if (gfp_inherited(c) || c->closed || c->busy || c->pending || c->last != s->b ||
        atomic_load(&s->refs) != 1)
        return 0;
    c->pending = s->b;
    c->pending_state = c->last_state;
    c->last = NULL;
    atomic_fetch_sub(&c->held, 1);
    free(s);
    gfp_core_unref(c);
    return 1;
}

void gfp_slot_unref(gfp_slot *s)
{
    /* In a fork()ed child the slot is the parent's: nothing to give back. */
    if (gfp_inherited(s->core) || atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    gfp_core *c = s->core;
    /* Ordered after the consumer's stream on CUDA; the host ignores it. */
    gf_release_stream(c->l, s->b, (void *)atomic_load(&s->stream));
    atomic_fetch_sub(&c->held, 1);
    free(s);
    gfp_core_unref(c);
}
