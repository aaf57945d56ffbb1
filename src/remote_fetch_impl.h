/* The fetcher's insides, shared by its two files (remote_fetch.h is the
 * API). remote_fetch.c owns the fetcher's life (create, submit, reap,
 * close, destroy) and the libcurl-multi <-> libuv glue (sockets, curl's
 * timer); remote_request.c owns one request's life (its budget, start,
 * the answer's checks, retry, finish) and the stall timer's rounds. Both
 * run on the loop's thread (gf-control's, or gf__fetch_each's caller's);
 * built only with the `remote` feature. Fields: sock_ctx, socks, timer
 * and the request slots' set-up are remote_fetch.c's; a req's transfer
 * state is remote_request.c's; the done ring is filled by finish
 * (remote_request.c) and emptied by gf__fetcher_reap (remote_fetch.c). */
#ifndef GF_REMOTE_FETCH_IMPL_H
#define GF_REMOTE_FETCH_IMPL_H

#include "remote_fetch.h"

#include "config.h"

#if GF_HAVE_REMOTE

#include <curl/curl.h>
#include <stdbool.h>

typedef struct sock_ctx {
    uv_poll_t poll;
    struct sock_ctx *next, *prev; /* live ones, closed at the end */
    struct gf__fetcher *f;
    curl_socket_t fd;
} sock_ctx;

typedef struct req {
    CURL *e;
    struct curl_slist *hdrs;
    uv_timer_t backoff;
    struct gf__fetcher *f;
    gf__fetch_target *t;
    gf__buf *buf;
    gf__budget *budget;
    uint64_t user, off, len;
    size_t got;                /* bytes of [off, off + len) in buf */
    unsigned tries;
    long status;               /* the last response's */
    bool active, in_multi, waiting; /* waiting: backoff timer running */
    bool budget_wait;          /* its buffer waits for the read budget */
    int budget_waited;         /* gf__buf_reserve's *waited */
    bool body_ok, discard;     /* this response: bytes go to buf / are dropped */
    bool changed;              /* size or ETag differs from the target's */
    bool too_big;              /* an object of unknown size passed max_bytes */
    bool has_range;            /* this response's Content-Range parsed */
    bool unproven;             /* a resume without the validator: start over */
    bool range_done;           /* a 200's body past the range: cut on purpose */
    char wrong_range[112];     /* a 206 for other bytes than asked: why */
    char etag[96], last_modified[64], bucket_region[32];
    uint64_t total;            /* this response's Content-Range total, or 0 */
    uint64_t cr_first, cr_last;
    uint64_t skip;             /* a 200's bytes before the range, still to drop */
    char err_body[1024];       /* an error response's first bytes (S3's XML) */
    size_t err_body_len;
    bool region_followed;      /* re-signed once for the region the store named */
    double heard;              /* when it started, or its last GF__STALL_MIN_BYTES */
    size_t unheard;            /* body bytes since heard */
    double began;              /* the first try's start (its connection,
                                  not its wait for one): the deadline's */
    char err[CURL_ERROR_SIZE];
} req;

struct gf__fetcher {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer;
    uv_timer_t stall_timer;    /* looks for transfers silent for stall_s */
    gf__fetch_opts o;
    req *reqs;
    unsigned n_active;
    unsigned n_budget_wait;    /* active requests with budget_wait */
    gf__read_done *done;       /* a ring of o.requests */
    unsigned done_head, done_len;
    sock_ctx *socks;
    bool closing;
    uint64_t rng;
    gf__fetch_counts counts;
};

/* remote_request.c's, called by remote_fetch.c: r's buffer grown within
 * its budget and r started (or left waiting, or finished); r put on the
 * done ring with err and why; curl's finished transfers made done or
 * retried; the stall timer's callback. */
void gf__fetch_reserve_and_start(gf__fetcher *f, req *r);
void gf__fetch_finish(gf__fetcher *f, req *r, int err, const char *why);
void gf__fetch_check_done(gf__fetcher *f);
void gf__fetch_on_stall_check(uv_timer_t *h);

#endif
#endif
