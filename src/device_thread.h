/* Threads bound to one CUDA device (src/device_thread.c), for device.c
 * only: the device's helper (gf-cuda), which runs calls that must happen
 * on the loader's device without changing the caller's current device,
 * and, when host slots are pageable, its copy thread (gf-copy), which
 * queues their copies so the controller never blocks in one. Each runs
 * posted calls one at a time, in the order posted. */
#ifndef GF_DEVICE_THREAD_H
#define GF_DEVICE_THREAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* A posted call. A caller that waits for it keeps it on its stack; one
 * posted to run later lives in its owner (a device slot) until it has
 * run. */
typedef struct gf__call {
    void (*fn)(void *);
    void *arg;
    uint64_t seq;          /* its place in the order, set by posting */
    struct gf__call *next;
} gf__call;

typedef struct gf__dthread {
    pthread_t thread;
    bool started, quit;
    int device;
    const char *name;
    pthread_mutex_t mu;
    pthread_cond_t cv;     /* a call posted or finished, or quit */
    gf__call *head, *tail; /* posted, not yet run */
    uint64_t posted, finished;
    int set;               /* the thread's cudaSetDevice, a cudaError_t:
                              set before any call runs */
} gf__dthread;

/* Starts a thread named `name` bound to `device`. Returns whether it
 * started; without it, calls run in place, on the caller's thread (whose
 * current device then becomes `device`). */
bool gf__dthread_start(gf__dthread *t, int device, const char *name);
/* Runs what was posted, then joins the thread. Safe on one that never
 * started (but was zeroed). */
void gf__dthread_stop(gf__dthread *t);
/* fn(arg) on t, once the calls posted before it have run; returns when it
 * has run, with the cudaSetDevice error, if any (fn did not run then). */
int gf__dthread_call(gf__dthread *t, void (*fn)(void *), void *arg);
/* c->fn(c->arg) on t, later, after the calls posted before it; c must
 * stay valid until it has run. Without a thread it runs now. It runs
 * even if cudaSetDevice failed (it owes its owner a callback): it reads
 * t->set first. */
void gf__dthread_post(gf__dthread *t, gf__call *c);
/* Returns once every call posted so far has run. */
void gf__dthread_drain(gf__dthread *t);

#endif
