/*
 * Threads bound to one CUDA device (device_thread.h): a FIFO of calls and
 * the thread that runs them, bound to the device from its start to its
 * stop. device.c runs two of these per open device: its helper (gf-cuda:
 * setup, teardown, pinned allocations, releases and waits asked from a
 * thread bound to another device) and, with pageable host slots, its copy
 * thread (gf-copy). The thread itself runs only the posted calls; posting,
 * waiting and stopping happen on the callers' threads, under t->mu.
 *
 * Why a thread rather than switching the caller's device and back: saving
 * and restoring it would create a context on device 0 in every process
 * whose thread had none (cudaGetDevice says 0 then), hundreds of MB on
 * GPU 0 per rank under mpirun. One thread for the device's life, not one
 * per call: a consumer on another device's thread releases every batch
 * through it.
 */
#include "device_thread.h"

#include "config.h"

#if GF_HAVE_CUDA

#include <cuda_runtime_api.h>

/* Calls that wait for their end skip the work when the thread could not
 * bind; posted ones run anyway and read t->set (they owe a callback). */
typedef struct waited {
    gf__call c;
    void (*fn)(void *);
    void *arg;
} waited;

static void run_waited(void *p)
{
    waited *w = p;
    w->fn(w->arg);
}

static void *thread_main(void *p)
{
    gf__dthread *t = p;
    pthread_setname_np(pthread_self(), t->name);
    int set = (int)cudaSetDevice(t->device);
    pthread_mutex_lock(&t->mu);
    t->set = set;
    for (;;) {
        while (!t->head && !t->quit)
            pthread_cond_wait(&t->cv, &t->mu);
        gf__call *c = t->head;
        if (!c)
            break; /* quit, and nothing left */
        if (!(t->head = c->next))
            t->tail = NULL;
        pthread_mutex_unlock(&t->mu);
        if (set == cudaSuccess || c->fn != run_waited)
            c->fn(c->arg);
        /* c may be gone now (its waiter returns once finished moves). */
        pthread_mutex_lock(&t->mu);
        t->finished++;
        pthread_cond_broadcast(&t->cv);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

bool gf__dthread_start(gf__dthread *t, int device, const char *name)
{
    t->device = device;
    t->name = name;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    t->started = pthread_create(&t->thread, NULL, thread_main, t) == 0;
    return t->started;
}

void gf__dthread_stop(gf__dthread *t)
{
    if (!t->name)
        return; /* never started */
    if (t->started) {
        pthread_mutex_lock(&t->mu);
        t->quit = true;
        pthread_cond_broadcast(&t->cv);
        pthread_mutex_unlock(&t->mu);
        pthread_join(t->thread, NULL);
        t->started = false;
    }
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    t->name = NULL;
}

/* Without a thread: binds the caller and runs c there. */
static int run_in_place(gf__dthread *t, gf__call *c)
{
    t->set = (int)cudaSetDevice(t->device);
    if (t->set == cudaSuccess || c->fn != run_waited)
        c->fn(c->arg);
    return t->set;
}

/* Appends c; returns its sequence number. With t->mu held. */
static uint64_t push_locked(gf__dthread *t, gf__call *c)
{
    c->next = NULL;
    c->seq = ++t->posted;
    if (t->tail)
        t->tail->next = c;
    else
        t->head = c;
    t->tail = c;
    pthread_cond_broadcast(&t->cv);
    return c->seq;
}

int gf__dthread_call(gf__dthread *t, void (*fn)(void *), void *arg)
{
    waited w = {.c = {.fn = run_waited, .arg = &w}, .fn = fn, .arg = arg};
    if (!t->started)
        return run_in_place(t, &w.c);
    pthread_mutex_lock(&t->mu);
    uint64_t mine = push_locked(t, &w.c);
    while (t->finished < mine)
        pthread_cond_wait(&t->cv, &t->mu);
    int set = t->set;
    pthread_mutex_unlock(&t->mu);
    return set;
}

void gf__dthread_post(gf__dthread *t, gf__call *c)
{
    if (!t->started) {
        run_in_place(t, c);
        return;
    }
    pthread_mutex_lock(&t->mu);
    push_locked(t, c);
    pthread_mutex_unlock(&t->mu);
}

void gf__dthread_drain(gf__dthread *t)
{
    if (!t->started)
        return;
    pthread_mutex_lock(&t->mu);
    const uint64_t all = t->posted;
    while (t->finished < all)
        pthread_cond_wait(&t->cv, &t->mu);
    pthread_mutex_unlock(&t->mu);
}

#endif
