/* The decode pool: worker threads (gf-decode-N) that take jobs from a
 * bounded queue, run them through the user's function and report each on
 * the completion queue. The queues are pushed and popped under the user's
 * mutex; the work itself runs without it. Runs on the decode threads,
 * except alloc/reset/start/join/free (gf_open, gf_seek, gf_close's thread)
 * and gf__pool_push_locked/gf__pool_grow_locked (the controller). */
#include "pool.h"

#include <stdio.h>
#include <stdlib.h>

void *gf__fifo_alloc(gf__fifo *f, uint32_t min, size_t item_size)
{
    uint32_t n = 1;
    while (n < min)
        n <<= 1;
    f->mask = n - 1;
    f->head = f->tail = 0;
    return calloc(n, item_size);
}

/* With mu held: the next jobs this worker may take (at most the user's
 * grab, and its share of those queued, so every active worker gets some),
 * 0 when stopping. */
static int take_jobs(gf__pool_thread *t, gf__job *js)
{
    gf__pool *p = t->p;
    while (!p->stopping && (gf__fifo_len(&p->job_q) == 0 || t->id >= p->active))
        pthread_cond_wait(&p->work, p->mu);
    if (p->stopping)
        return 0;
    uint32_t share = (gf__fifo_len(&p->job_q) + (uint32_t)p->active - 1) / (uint32_t)p->active;
    int n = (int)GF__MIN(share, (uint32_t)GF__MAX(p->user.grab, 1));
    for (int i = 0; i < n; i++)
        js[i] = p->jobs[gf__fifo_pop(&p->job_q)];
    return n;
}

/* With mu held. A completion always has room: it is for a job taken from
 * the job queue, and both hold as many (gf__pool_capacity). */
static bool report(gf__pool *p, const gf__done *d)
{
    uint32_t i = gf__fifo_push(&p->done_q);
    if (GF__UNLIKELY(i == UINT32_MAX)) {
        free(d->decode.why);
        p->user.completed(p->user.arg, false);
        return false;
    }
    p->dones[i] = *d;
    return true;
}

static void *worker_main(void *arg)
{
    gf__pool_thread *t = arg;
    gf__pool *p = t->p;
    char name[16];
    snprintf(name, sizeof name, "gf-decode-%d", t->id);
    pthread_setname_np(pthread_self(), name);

    gf__job js[GF__POOL_GRAB_MAX];
    gf__done ds[GF__POOL_GRAB_MAX];
    int n;
    pthread_mutex_lock(p->mu);
    while ((n = take_jobs(t, js)) > 0) {
        pthread_mutex_unlock(p->mu);
        if (n > 1 && p->user.run_batch)
            p->user.run_batch(p->user.arg, t->id, js, n, ds);
        else
            for (int i = 0; i < n; i++)
                p->user.run(p->user.arg, t->id, &js[i], &ds[i]);
        pthread_mutex_lock(p->mu);
        bool queued = false;
        for (int i = 0; i < n; i++)
            if (p->user.settle(p->user.arg, t->id, &js[i], &ds[i]))
                queued |= report(p, &ds[i]);
        if (queued)
            p->user.completed(p->user.arg, true);
    }
    pthread_mutex_unlock(p->mu);
    return NULL;
}

int gf__pool_push_locked(gf__pool *p, const gf__job *js, int n)
{
    if (n == 0)
        return 0;
    assert((uint32_t)n <= gf__fifo_room(&p->job_q));
    if (GF__UNLIKELY((uint32_t)n > gf__fifo_room(&p->job_q)))
        return GF_ENOMEM;
    for (int i = 0; i < n; i++)
        p->jobs[gf__fifo_push(&p->job_q)] = js[i];
    /* A signal could wake a parked (inactive) worker and be lost. */
    if (n == 1 && p->active == p->n_threads)
        pthread_cond_signal(&p->work);
    else
        pthread_cond_broadcast(&p->work);
    return 0;
}

bool gf__pool_grow_locked(gf__pool *p)
{
    if (p->active >= p->n_threads)
        return false;
    p->active++;
    pthread_cond_broadcast(&p->work);
    return true;
}

void gf__pool_init(gf__pool *p, pthread_mutex_t *mu)
{
    p->mu = mu;
    pthread_cond_init(&p->work, NULL);
}

int gf__pool_alloc(gf__pool *p, uint32_t capacity, int threads, int active, gf__pool_user user)
{
    p->user = user;
    p->user.grab = GF__MIN(GF__MAX(user.grab, 1), (int)GF__POOL_GRAB_MAX);
    p->active = active;
    p->jobs = gf__fifo_alloc(&p->job_q, capacity, sizeof *p->jobs);
    p->dones = gf__fifo_alloc(&p->done_q, capacity, sizeof *p->dones);
    p->threads = calloc((size_t)threads, sizeof *p->threads);
    if (!p->jobs || !p->dones || !p->threads)
        return GF_ENOMEM;
    for (int i = 0; i < threads; i++)
        p->threads[i] = (gf__pool_thread){.p = p, .id = i};
    p->n_threads = threads;
    return 0;
}

void gf__pool_reset(gf__pool *p)
{
    while (gf__fifo_len(&p->done_q))
        free(p->dones[gf__fifo_pop(&p->done_q)].decode.why);
    p->job_q.head = p->job_q.tail = 0;
    p->done_q.head = p->done_q.tail = 0;
    p->stopping = false;
}

int gf__pool_start(gf__pool *p)
{
    int started = 0, rc = 0;
    for (; started < p->n_threads; started++) {
        gf__pool_thread *t = &p->threads[started];
        if ((rc = pthread_create(&t->thread, NULL, worker_main, t)) != 0)
            break;
    }
    if (rc == 0)
        return 0;
    pthread_mutex_lock(p->mu);
    gf__pool_stop_locked(p);
    pthread_mutex_unlock(p->mu);
    for (int i = 0; i < started; i++)
        pthread_join(p->threads[i].thread, NULL);
    return rc;
}

void gf__pool_stop_locked(gf__pool *p)
{
    p->stopping = true;
    pthread_cond_broadcast(&p->work);
}

void gf__pool_join(gf__pool *p)
{
    for (int i = 0; i < p->n_threads; i++)
        pthread_join(p->threads[i].thread, NULL);
}

void gf__pool_free(gf__pool *p)
{
    free(p->threads);
    free(p->jobs);
    free(p->dones);
    if (p->mu)
        pthread_cond_destroy(&p->work);
}
