/* Ranged GETs on a libuv loop through libcurl's multi interface: curl
 * names the sockets and the one timeout it wants watched (on_socket,
 * on_curl_timer), the loop's poll and timer handles call it back
 * (curl_multi_socket_action), finished transfers land on a done list the
 * owner reaps. Every answer is checked against the request (a 206's range,
 * start and end; a 200 is the whole object, sliced) and the object (size,
 * ETag). A transfer cut short (reset, 5xx, a stall: too few body bytes in
 * stall_s) is retried from the byte it reached, If-Range its validator
 * (without one, from the range's start), with exponential backoff and
 * jitter, up to `retries` times; what cannot succeed (4xx, a changed
 * object, the retries spent) completes with the status, the store's
 * reason and the bytes received. Every request, its tries together, ends
 * within deadline_s: a body that trickles just fast enough to beat the
 * stall rule (or a resume after resume) would otherwise run for ever.
 * Here: the fetcher's life, its API and the curl <-> libuv glue; one
 * request's checks and retries are remote_request.c's, the parsers
 * remote_answer.c's (issue 38: files sized to be read). */
#include "remote_fetch_impl.h"

#include "reader_internal.h"
#include "remote_auth.h"

#include "config.h"

#if GF_HAVE_REMOTE

#include <curl/curl.h>
#include <inttypes.h>
#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void sock_closed(uv_handle_t *h)
{
    free(h->data);
}

static void unlink_sock(gf__fetcher *f, sock_ctx *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        f->socks = c->next;
    if (c->next)
        c->next->prev = c->prev;
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    sock_ctx *c = h->data;
    gf__fetcher *f = c->f;
    int flags = status < 0 ? CURL_CSELECT_ERR
                           : (events & UV_READABLE ? CURL_CSELECT_IN : 0) |
                                 (events & UV_WRITABLE ? CURL_CSELECT_OUT : 0);
    int running;
    curl_multi_socket_action(f->multi, c->fd, flags, &running);
    gf__fetch_check_done(f);
}

static int on_socket(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
    (void)e;
    gf__fetcher *f = userp;
    sock_ctx *c = socketp;
    if (f->closing)
        return 0;
    if (what == CURL_POLL_REMOVE) {
        if (c) {
            unlink_sock(f, c);
            uv_close((uv_handle_t *)&c->poll, sock_closed);
            curl_multi_assign(f->multi, s, NULL);
        }
        return 0;
    }
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c || uv_poll_init_socket(f->loop, &c->poll, s) != 0) {
            free(c);
            return -1; /* curl fails the transfer: retried */
        }
        c->poll.data = c;
        c->f = f;
        c->fd = s;
        c->next = f->socks;
        if (f->socks)
            f->socks->prev = c;
        f->socks = c;
        curl_multi_assign(f->multi, s, c);
    }
    int ev = (what & CURL_POLL_IN ? UV_READABLE : 0) | (what & CURL_POLL_OUT ? UV_WRITABLE : 0);
    uv_poll_start(&c->poll, ev, on_poll);
    return 0;
}

static void on_timeout(uv_timer_t *h)
{
    gf__fetcher *f = h->data;
    int running;
    curl_multi_socket_action(f->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    gf__fetch_check_done(f);
}

static int on_curl_timer(CURLM *m, long ms, void *userp)
{
    (void)m;
    gf__fetcher *f = userp;
    if (f->closing)
        return 0;
    if (ms < 0)
        uv_timer_stop(&f->timer);
    else
        uv_timer_start(&f->timer, on_timeout, (uint64_t)ms, 0);
    return 0;
}

static void global_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

int gf__fetcher_create(gf__fetcher **out, uv_loop_t *loop, const gf__fetch_opts *o, char *why,
                       size_t why_len)
{
    *out = NULL;
    if (!o->requests || o->requests > 4096 || !o->connections)
        return gf__why(why, why_len, "bad fetcher options"), GF_EINVAL;
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, global_init);
    gf__fetcher *f = calloc(1, sizeof *f);
    if (!f)
        return gf__why(why, why_len, "out of memory"), GF_ENOMEM;
    f->loop = loop;
    f->o = *o;
    if (!f->o.stall_s) /* settings not yet resolved: the default, not "no time" */
        f->o.stall_s = GF__REMOTE_STALL_S;
    if (!f->o.deadline_s) { /* derived: every try may stall 20 times over */
        uint64_t d = (uint64_t)f->o.stall_s * GF__DEADLINE_STALLS * ((uint64_t)f->o.retries + 1);
        f->o.deadline_s = (unsigned)GF__MIN(d, (uint64_t)UINT32_MAX);
    }
    f->rng = (uint64_t)(uintptr_t)f ^ (uint64_t)(gf__now() * 1e9);
    f->reqs = calloc(o->requests, sizeof *f->reqs);
    f->done = calloc(o->requests, sizeof *f->done);
    f->multi = curl_multi_init();
    if (!f->reqs || !f->done || !f->multi)
        goto oom;
    for (unsigned i = 0; i < o->requests; i++) {
        f->reqs[i].f = f;
        if (!(f->reqs[i].e = curl_easy_init()))
            goto oom;
    }
    /* Handles last: nothing fails after them, so a failure frees plainly. */
    for (unsigned i = 0; i < o->requests; i++) {
        uv_timer_init(loop, &f->reqs[i].backoff);
        f->reqs[i].backoff.data = &f->reqs[i];
    }
    uv_timer_init(loop, &f->timer);
    f->timer.data = f;
    uv_timer_init(loop, &f->stall_timer);
    f->stall_timer.data = f;
    /* A quarter of the shorter limit: each is seen within 1.25 times it. */
    uint64_t every = GF__MAX((uint64_t)GF__MIN(f->o.stall_s, f->o.deadline_s) * 250, 100);
    uv_timer_start(&f->stall_timer, gf__fetch_on_stall_check, every, every);
    curl_multi_setopt(f->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(f->multi, CURLMOPT_SOCKETDATA, f);
    curl_multi_setopt(f->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
    curl_multi_setopt(f->multi, CURLMOPT_TIMERDATA, f);
    curl_multi_setopt(f->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)o->connections);
    curl_multi_setopt(f->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)o->connections);
    curl_multi_setopt(f->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    *out = f;
    return 0;
oom:
    gf__fetcher_destroy(f);
    return gf__why(why, why_len, "out of memory creating the fetcher"), GF_ENOMEM;
}

unsigned gf__fetcher_room(const gf__fetcher *f)
{
    return f->o.requests - f->n_active - f->done_len;
}

int gf__fetcher_submit(gf__fetcher *f, gf__fetch_target *t, uint64_t off, uint64_t len,
                       gf__buf *buf, gf__budget *g, uint64_t user)
{
    if (!gf__fetcher_room(f) || !t || !buf || f->closing)
        return GF_EINVAL;
    req *r = NULL;
    for (unsigned i = 0; i < f->o.requests && !r; i++)
        if (!f->reqs[i].active)
            r = &f->reqs[i];
    assert(r);
    r->active = true;
    f->n_active++;
    r->t = t;
    r->buf = buf;
    r->budget = g;
    r->user = user;
    r->off = off;
    r->len = len;
    r->got = 0;
    r->tries = 0;
    r->budget_waited = 0;
    r->region_followed = false;
    char why[160] = "";
    size_t max = gf__effective_max(f->o.max_bytes);
    if (len == 0) {
        gf__fetch_finish(f, r, GF_EEMPTY, "member is empty");
    } else if (len != GF__WHOLE_FILE && len > max) {
        snprintf(why, sizeof why, "%" PRIu64 " bytes, over max_file_bytes (%zu)", len, max);
        gf__fetch_finish(f, r, GF_ETOOBIG, why);
    } else {
        gf__fetch_reserve_and_start(f, r);
    }
    return 0; /* a request finished here is reaped by the owner's next round */
}

int gf__fetcher_reap(gf__fetcher *f, gf__read_done *done, int max)
{
    int n = 0;
    /* Each reap follows a decode or read done: budget may have come back. */
    for (unsigned i = 0; f->n_budget_wait && i < f->o.requests && !f->closing; i++)
        if (f->reqs[i].active && f->reqs[i].budget_wait)
            gf__fetch_reserve_and_start(f, &f->reqs[i]);
    while (n < max && f->done_len) {
        done[n++] = f->done[f->done_head];
        f->done_head = (f->done_head + 1) % f->o.requests;
        f->done_len--;
    }
    return n;
}

unsigned gf__fetcher_in_flight(const gf__fetcher *f)
{
    return f->n_active;
}

bool gf__fetcher_has_done(const gf__fetcher *f)
{
    return f->done_len > 0;
}

void gf__fetcher_counts(const gf__fetcher *f, gf__fetch_counts *c)
{
    *c = f->counts;
}

void gf__fetcher_close(gf__fetcher *f)
{
    if (!f || f->closing)
        return;
    f->closing = true;
    /* The polls first, while curl's sockets are still open. */
    for (sock_ctx *c = f->socks, *next; c; c = next) {
        next = c->next;
        uv_close((uv_handle_t *)&c->poll, sock_closed);
    }
    f->socks = NULL;
    for (unsigned i = 0; i < f->o.requests; i++) {
        req *r = &f->reqs[i];
        if (r->in_multi)
            curl_multi_remove_handle(f->multi, r->e);
        r->in_multi = false;
        uv_close((uv_handle_t *)&r->backoff, NULL);
    }
    uv_close((uv_handle_t *)&f->timer, NULL);
    uv_close((uv_handle_t *)&f->stall_timer, NULL);
}

void gf__fetcher_destroy(gf__fetcher *f)
{
    if (!f)
        return;
    if (f->multi)
        curl_multi_cleanup(f->multi);
    for (unsigned i = 0; f->reqs && i < f->o.requests; i++) {
        curl_easy_cleanup(f->reqs[i].e);
        curl_slist_free_all(f->reqs[i].hdrs);
    }
    free(f->reqs);
    free(f->done);
    free(f);
}

static void no_progress(void *arg)
{
    (void)arg;
}

int gf__fetch_each(gf__fetch_target *const *t, const uint64_t *off, const uint64_t *len, size_t n,
                   const gf__fetch_opts *o, gf__fetch_got_fn got, void *ctx, char *why,
                   size_t why_len)
{
    uv_loop_t loop;
    if (uv_loop_init(&loop) != 0)
        return gf__why(why, why_len, "uv_loop_init failed"), GF_ENOMEM;
    gf__fetch_opts each = *o;
    each.requests = (unsigned)GF__MIN((size_t)o->requests, n ? n : 1);
    each.progress = no_progress;
    gf__fetcher *f;
    gf__buf *bufs = calloc(each.requests, sizeof *bufs);
    gf__buf **free_bufs = calloc(each.requests, sizeof *free_bufs);
    int rc = bufs && free_bufs ? gf__fetcher_create(&f, &loop, &each, why, why_len)
                               : (gf__why(why, why_len, "out of memory"), GF_ENOMEM);
    if (rc == 0) {
        unsigned n_free = each.requests;
        for (unsigned i = 0; i < each.requests; i++)
            free_bufs[i] = &bufs[i];
        size_t next = 0, finished = 0;
        while (rc == 0 && finished < n) {
            while (next < n && n_free && gf__fetcher_room(f)) {
                gf__buf *b = free_bufs[--n_free];
                if (gf__fetcher_submit(f, t[next], off ? off[next] : 0,
                                       len ? len[next] : GF__WHOLE_FILE, b, NULL, next) < 0) {
                    gf__why(why, why_len, "internal error: the fetcher refused a request");
                    rc = GF_EINVAL;
                    break;
                }
                next++;
            }
            gf__read_done d;
            while (rc == 0 && gf__fetcher_reap(f, &d, 1) == 1) {
                finished++;
                rc = got(ctx, (size_t)d.user, d.buf, d.err, d.why);
                free_bufs[n_free++] = d.buf;
            }
            if (rc == 0 && finished < n && !f->done_len)
                uv_run(&loop, UV_RUN_ONCE);
        }
        gf__fetcher_close(f);
        uv_run(&loop, UV_RUN_DEFAULT);
        gf__fetcher_destroy(f);
    }
    for (unsigned i = 0; bufs && i < each.requests; i++)
        gf__buf_free(&bufs[i]);
    free(bufs);
    free(free_bufs);
    uv_loop_close(&loop);
    return rc;
}

#else /* !GF_HAVE_REMOTE: no remote data set opens, so none of this runs */

struct gf__fetcher {
    int unused;
};

int gf__fetcher_create(gf__fetcher **out, uv_loop_t *loop, const gf__fetch_opts *o, char *why,
                       size_t why_len)
{
    (void)loop;
    (void)o;
    *out = NULL;
    gf__why(why, why_len, "this build has the `remote` feature off (meson -Dremote=enabled)");
    return GF_EINVAL;
}

unsigned gf__fetcher_room(const gf__fetcher *f)
{
    (void)f;
    return 0;
}

int gf__fetcher_submit(gf__fetcher *f, gf__fetch_target *t, uint64_t off, uint64_t len,
                       gf__buf *buf, gf__budget *g, uint64_t user)
{
    (void)f, (void)t, (void)off, (void)len, (void)buf, (void)g, (void)user;
    return GF_EINVAL;
}

int gf__fetcher_reap(gf__fetcher *f, gf__read_done *done, int max)
{
    (void)f, (void)done, (void)max;
    return 0;
}

unsigned gf__fetcher_in_flight(const gf__fetcher *f)
{
    (void)f;
    return 0;
}

bool gf__fetcher_has_done(const gf__fetcher *f)
{
    (void)f;
    return false;
}

void gf__fetcher_counts(const gf__fetcher *f, gf__fetch_counts *c)
{
    (void)f;
    *c = (gf__fetch_counts){0};
}

void gf__fetcher_close(gf__fetcher *f)
{
    (void)f;
}

void gf__fetcher_destroy(gf__fetcher *f)
{
    (void)f;
}

#endif
