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
 * stall rule (or a resume after resume) would otherwise run for ever. */
#include "remote_fetch.h"

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

/* Transfers of at least BIG_TRANSFER bytes (whole shards) receive into
 * curl buffers of BIG_RECV_BUFFER; smaller ones (a sample, a sidecar)
 * keep curl's 16 KiB, so 64 requests in flight cost no 16 MiB. */
#define BIG_TRANSFER (1u << 20)
#define BIG_RECV_BUFFER (256L << 10)

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

static void check_done(gf__fetcher *f);

static void on_poll(uv_poll_t *h, int status, int events)
{
    sock_ctx *c = h->data;
    gf__fetcher *f = c->f;
    int flags = status < 0 ? CURL_CSELECT_ERR
                           : (events & UV_READABLE ? CURL_CSELECT_IN : 0) |
                                 (events & UV_WRITABLE ? CURL_CSELECT_OUT : 0);
    int running;
    curl_multi_socket_action(f->multi, c->fd, flags, &running);
    check_done(f);
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
    check_done(f);
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

/* Header p[0..len)'s value, trimmed, if its name is name (with ':'). */
static bool header_value(const char *p, size_t len, const char *name, const char **v,
                         size_t *vlen)
{
    size_t k = strlen(name);
    if (len <= k || strncasecmp(p, name, k) != 0)
        return false;
    const char *a = p + k, *end = p + len;
    while (a < end && (*a == ' ' || *a == '\t'))
        a++;
    while (end > a && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
        end--;
    *v = a;
    *vlen = (size_t)(end - a);
    return true;
}

static void copy_value(char *dst, size_t cap, const char *v, size_t n)
{
    n = GF__MIN(n, cap - 1);
    memcpy(dst, v, n);
    dst[n] = 0;
}

/* A response's headers: its status line resets what the last one said.
 * Header bytes are not progress: a head that never ends stalls. */
static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
    req *r = arg;
    size_t len = size * n;
    const char *v;
    size_t vn;
    if (len >= 5 && memcmp(p, "HTTP/", 5) == 0) {
        r->etag[0] = r->last_modified[0] = r->bucket_region[0] = 0;
        r->total = 0;
        r->has_range = false;
        r->body_ok = r->discard = false;
        return len;
    }
    if (header_value(p, len, "ETag:", &v, &vn)) {
        copy_value(r->etag, sizeof r->etag, v, vn);
    } else if (header_value(p, len, "Last-Modified:", &v, &vn)) {
        copy_value(r->last_modified, sizeof r->last_modified, v, vn);
    } else if (header_value(p, len, "x-amz-bucket-region:", &v, &vn)) {
        copy_value(r->bucket_region, sizeof r->bucket_region, v, vn);
    } else if (header_value(p, len, "Content-Range:", &v, &vn)) {
        r->has_range = gf__content_range_parse(v, vn, &r->cr_first, &r->cr_last, &r->total) == 0;
        if (!r->has_range)
            r->total = 0;
    }
    return len;
}

/* Whether response r continues what t's first response was: a resume
 * spliced onto the bytes received must be of the same object. */
static bool same_object(const req *r, const gf__fetch_target *t)
{
    if (t->etag[0])
        return strcmp(t->etag, r->etag) == 0;
    return t->last_modified[0] && strcmp(t->last_modified, r->last_modified) == 0;
}

/* A 206 must name the bytes asked for: from `from` to the range's end (or
 * the object's, when the range passes it). Returns false with why. */
static bool range_matches(req *r, uint64_t from)
{
    uint64_t want_last = r->len == GF__WHOLE_FILE ? UINT64_MAX : r->off + r->len - 1;
    bool ok = r->has_range && r->cr_first == from && r->cr_first <= r->cr_last &&
              (r->cr_last == want_last ||
               (r->total && r->cr_last == r->total - 1 && r->cr_last < want_last));
    if (ok)
        return true;
    char asked[48];
    if (want_last == UINT64_MAX)
        snprintf(asked, sizeof asked, "%" PRIu64 "-", from);
    else
        snprintf(asked, sizeof asked, "%" PRIu64 "-%" PRIu64, from, want_last);
    if (!r->has_range)
        snprintf(r->wrong_range, sizeof r->wrong_range,
                 "a 206 without a valid Content-Range for bytes %s", asked);
    else
        snprintf(r->wrong_range, sizeof r->wrong_range,
                 "the server answered bytes %" PRIu64 "-%" PRIu64 " for bytes %s", r->cr_first,
                 r->cr_last, asked);
    return false;
}

/* The first byte of a body decides where it goes: a 206 naming our range
 * into buf; a 200 (the whole object, the range ignored) into buf from the
 * range's first byte on; anything else (an error page) kept apart for its
 * reason. A body that would overrun the range aborts. */
static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    req *r = arg;
    size_t len = size * n;
    r->unheard += len;
    if (r->unheard >= GF__STALL_MIN_BYTES) {
        r->heard = gf__now();
        r->unheard = 0;
    }
    if (!r->body_ok && !r->discard) {
        curl_easy_getinfo(r->e, CURLINFO_RESPONSE_CODE, &r->status);
        uint64_t from = r->off + r->got;
        if (r->status == 206 || r->status == 200) {
            uint64_t total = r->status == 206 ? r->total : 0;
            curl_off_t cl = -1;
            curl_easy_getinfo(r->e, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
            if (r->status == 200 && cl >= 0)
                total = (uint64_t)cl;
            if (r->status == 206 && !range_matches(r, from))
                return 0;
            gf__fetch_target *t = r->t;
            if ((t->size && total && total != t->size) ||
                (t->etag[0] && r->etag[0] && strcmp(t->etag, r->etag) != 0)) {
                r->changed = true;
                return 0;
            }
            /* An answer without the validator an earlier one gave (a
             * resume, or another range of the object) may be another
             * object's bytes: the range again from its start. */
            if ((t->etag[0] || t->last_modified[0]) && !same_object(r, t)) {
                r->unproven = true;
                return 0;
            }
            if (!t->etag[0] && r->etag[0])
                memcpy(t->etag, r->etag, sizeof t->etag);
            if (!t->last_modified[0] && r->last_modified[0])
                memcpy(t->last_modified, r->last_modified, sizeof t->last_modified);
            if (!t->size && total)
                t->size = total;
            r->total = total;
            r->skip = r->status == 200 ? from : 0;
            r->body_ok = true;
        } else {
            r->discard = true;
        }
    }
    if (r->discard) {
        size_t k = GF__MIN(len, sizeof r->err_body - 1 - r->err_body_len);
        memcpy(r->err_body + r->err_body_len, p, k);
        r->err_body_len += k;
        r->err_body[r->err_body_len] = 0;
        return len;
    }
    if (r->skip) {
        size_t k = (size_t)GF__MIN((uint64_t)len, r->skip);
        r->skip -= k;
        p += k;
        len -= k;
        if (!len)
            return size * n;
    }
    if (r->status == 200 && r->len != GF__WHOLE_FILE && len >= r->len - r->got) {
        /* The whole object for a range: what follows the range is not read. */
        memcpy(r->buf->data + r->got, p, (size_t)(r->len - r->got));
        r->got = (size_t)r->len;
        r->range_done = true;
        return 0;
    }
    if (r->len == GF__WHOLE_FILE) { /* an object of unknown size */
        size_t keep = r->got;
        int waited = 0;
        char why[8];
        size_t max = gf__effective_max(r->f->o.max_bytes);
        if (len > max - r->got) {
            r->too_big = true;
            return 0;
        }
        if (gf__buf_reserve(r->buf, r->got + len, &keep, max, NULL, 0, &waited, why,
                            sizeof why) < 0)
            return 0;
    } else if (len > r->len - r->got) {
        return 0; /* more than the range: the server's bug, not retried */
    }
    memcpy(r->buf->data + r->got, p, len);
    r->got += len;
    return len;
}

static void finish(gf__fetcher *f, req *r, int err, const char *why)
{
    unsigned at = (f->done_head + f->done_len) % f->o.requests;
    gf__read_done *d = &f->done[at];
    f->done_len++;
    *d = (gf__read_done){.user = r->user, .buf = r->buf, .err = err};
    r->buf->len = err ? 0 : r->got;
    r->buf->got = r->got;
    f->counts.bytes += r->got;
    if (why)
        snprintf(d->why, sizeof d->why, "%s", why);
    r->active = false;
    f->n_active--;
}

/* Starts (or restarts from the byte reached) r's transfer. */
static int start(gf__fetcher *f, req *r, char *why, size_t why_len)
{
    CURL *e = r->e;
    curl_easy_reset(e);
    curl_slist_free_all(r->hdrs);
    r->hdrs = NULL;
    r->body_ok = r->discard = r->changed = r->too_big = false;
    r->has_range = r->unproven = r->range_done = false;
    r->wrong_range[0] = 0;
    r->skip = 0;
    r->err_body_len = 0;
    r->err_body[0] = 0;
    r->unheard = 0;
    r->status = 0;
    r->err[0] = 0;
    char range[64];
    uint64_t from = r->off + r->got;
    if (r->len != GF__WHOLE_FILE)
        snprintf(range, sizeof range, "%" PRIu64 "-%" PRIu64, from, r->off + r->len - 1);
    else
        snprintf(range, sizeof range, "%" PRIu64 "-", from);
    curl_easy_setopt(e, CURLOPT_URL, r->t->url);
    /* A whole object is a plain GET until a retry resumes it. */
    if (from > 0 || r->len != GF__WHOLE_FILE)
        curl_easy_setopt(e, CURLOPT_RANGE, range);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->err);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(e, CURLOPT_PRIVATE, r);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, (long)f->o.stall_s);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    /* A shard in 256 KiB reads, not 16 KiB ones (curl's default): a recv,
     * a poll and a callback each, 8x fewer (bench/RESULTS.md, afternoon). */
    uint64_t size = r->len != GF__WHOLE_FILE ? r->len : r->t->size;
    if (size >= BIG_TRANSFER)
        curl_easy_setopt(e, CURLOPT_BUFFERSIZE, BIG_RECV_BUFFER);
    int rc = f->o.setup ? f->o.setup(f->o.setup_ctx, e, r->t, &r->hdrs, why, why_len) : 0;
    if (rc < 0)
        return rc;
    /* A resume names the object it continues: another one answers 200
     * (whole, checked as a new object) instead of its bytes at `from`. A
     * weak ETag cannot (RFC 9110 13.1.5): the date then. */
    const gf__fetch_target *t = r->t;
    if (r->got) {
        char line[128];
        line[0] = 0;
        if (t->etag[0] && t->etag[0] == '"')
            snprintf(line, sizeof line, "If-Range: %s", t->etag);
        else if (t->last_modified[0])
            snprintf(line, sizeof line, "If-Range: %s", t->last_modified);
        struct curl_slist *h = line[0] ? curl_slist_append(r->hdrs, line) : r->hdrs;
        if (!h)
            return gf__why(why, why_len, "out of memory for a request's headers"), GF_ENOMEM;
        r->hdrs = h;
    }
    if (r->hdrs)
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->hdrs);
    if (curl_multi_add_handle(f->multi, e) != CURLM_OK)
        return gf__why(why, why_len, "libcurl refused a transfer"), GF_ENOMEM;
    r->in_multi = true;
    r->heard = gf__now();
    f->counts.requests++;
    return 0;
}

static void on_backoff(uv_timer_t *h)
{
    req *r = h->data;
    gf__fetcher *f = r->f;
    char why[160] = "";
    r->waiting = false;
    int rc = start(f, r, why, sizeof why);
    if (rc < 0)
        finish(f, r, rc, why);
    check_done(f);
}

/* Curl's codes worth another try: the connection, not the request. */
static bool transient(CURLcode c)
{
    switch (c) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
        return true;
    default:
        return false;
    }
}

static const char *reason_of(long status)
{
    switch (status) {
    case 403: return " Forbidden";
    case 404: return " Not Found";
    case 412: return " Precondition Failed";
    case 416: return " Range Not Satisfiable";
    case 429: return " Too Many Requests";
    case 500: return " Internal Server Error";
    case 502: return " Bad Gateway";
    case 503: return " Service Unavailable";
    case 504: return " Gateway Timeout";
    default: return "";
    }
}

/* The delay before try `tries` (1: the first retry): backoff_ms doubled
 * each time, at most backoff_max_ms, half to all of it at random (jitter:
 * retries of many readers spread out). */
static uint64_t backoff_ms(gf__fetcher *f, unsigned tries)
{
    uint64_t cap = f->o.backoff_max_ms ? f->o.backoff_max_ms : 1;
    uint64_t d = (uint64_t)f->o.backoff_ms << GF__MIN(tries - 1, 20u);
    d = GF__MIN(d, cap);
    f->rng = f->rng * 6364136223846793005ull + 1442695040888963407ull;
    return d / 2 + (d / 2 + 1) * (f->rng >> 33) / (1ull << 31);
}

/* A finished transfer: done, retried after a backoff, or failed. A
 * stalled one, or one past its deadline, ends as CURLE_OPERATION_TIMEDOUT. */
static void transfer_done(gf__fetcher *f, req *r, CURLcode c)
{
    curl_multi_remove_handle(f->multi, r->e);
    r->in_multi = false;
    if (c == CURLE_OPERATION_TIMEDOUT && !r->err[0])
        snprintf(r->err, sizeof r->err, "no byte for %u s", f->o.stall_s);
    if (!r->status)
        curl_easy_getinfo(r->e, CURLINFO_RESPONSE_CODE, &r->status);
    char why[sizeof f->done->why];
    if (r->range_done)
        c = CURLE_OK; /* cut after the range, by on_body */
    if (r->changed) {
        snprintf(why, sizeof why,
                 "the object changed since it was first read (its size or ETag differs), after "
                 "%zu bytes",
                 r->got);
        finish(f, r, GF_EIO, why);
        return;
    }
    if (r->too_big) {
        snprintf(why, sizeof why, "over max_file_bytes (%zu) after %zu bytes",
                 gf__effective_max(f->o.max_bytes), r->got);
        finish(f, r, GF_ETOOBIG, why);
        return;
    }
    bool whole = r->len == GF__WHOLE_FILE &&
                 (!r->total || r->off + r->got == r->total);
    /* A range past the object's end gets what there is, as a short pread
     * does: no retry can add bytes (the object's size is checked apart). */
    bool ended = r->total && r->off + r->got == r->total;
    if (c == CURLE_OK && r->body_ok && (r->got == r->len || whole || ended)) {
        finish(f, r, 0, NULL);
        return;
    }
    char code[64], msg[256], region[32];
    gf__s3_error_parse(r->err_body, r->err_body_len, code, sizeof code, msg, sizeof msg, region,
                       sizeof region);
    if (!region[0])
        snprintf(region, sizeof region, "%s", r->bucket_region);
    /* As the AWS SDKs: a store that names the bucket's region is asked
     * again, signed for it (once: a second refusal is reported). */
    bool wrong_region = r->status == 301 || r->status == 307 ||
                        (r->status == 400 && strcmp(code, "AuthorizationHeaderMalformed") == 0);
    if (r->t->s3 && wrong_region && region[0] && !r->region_followed &&
        strcmp(region, r->t->region) != 0 &&
        strspn(region, "abcdefghijklmnopqrstuvwxyz0123456789-") == strlen(region)) {
        r->region_followed = true;
        snprintf(r->t->region, sizeof r->t->region, "%s", region);
        int rc = start(f, r, why, sizeof why);
        if (rc < 0)
            finish(f, r, rc, why);
        return;
    }
    /* Another range than asked (a cache's mistake, say): asked again. */
    bool retry = (c == CURLE_OK && r->body_ok) /* cut short */ || r->unproven || r->wrong_range[0] ||
                 (c != CURLE_OK && c != CURLE_WRITE_ERROR && transient(c)) ||
                 (c == CURLE_OK && (r->status >= 500 || r->status == 429 || r->status == 408));
    uint64_t d = retry && r->tries < f->o.retries ? backoff_ms(f, r->tries + 1) : 0;
    /* A try that would start past the deadline is not made. */
    bool late = gf__now() + (double)d / 1000 - r->began > f->o.deadline_s;
    if (retry && r->tries < f->o.retries && !late) {
        /* A resume needs a validator to prove it continues the object. */
        const gf__fetch_target *t = r->t;
        if (r->unproven || !((t->etag[0] == '"') || t->last_modified[0]))
            r->got = 0;
        r->tries++;
        f->counts.retries++;
        r->waiting = true;
        uv_timer_start(&r->backoff, on_backoff, d, 0);
        return;
    }
    uint64_t size = r->len != GF__WHOLE_FILE ? r->len : r->total;
    char of[32] = "";
    if (size)
        snprintf(of, sizeof of, " of %" PRIu64, size);
    if (late && retry)
        snprintf(why, sizeof why,
                 "the deadline passed: not done within %u s (remote_deadline_s), %u tries, "
                 "after %zu%s bytes",
                 f->o.deadline_s, r->tries + 1, r->got, of);
    else if (r->wrong_range[0])
        snprintf(why, sizeof why, "%s (%u tries)", r->wrong_range, r->tries + 1);
    else if (r->unproven)
        snprintf(why, sizeof why,
                 "a resumed transfer did not prove it continued the same object (no ETag or "
                 "Last-Modified as the first response's), %u tries",
                 r->tries + 1);
    else if (c == CURLE_OK && r->body_ok)
        snprintf(why, sizeof why, "the transfer ended after %zu%s bytes (%u tries)", r->got, of,
                 r->tries + 1);
    else if ((c == CURLE_OK || c == CURLE_WRITE_ERROR) && code[0]) {
        /* The store's own reason (S3's XML): its message never holds our
         * secret, redacted all the same. */
        char full[512], tail[64] = "";
        if (region[0] && !strstr(msg, region))
            snprintf(tail, sizeof tail, " (the bucket's region: %s)", region);
        snprintf(full, sizeof full, "HTTP %ld %s: %s%s (%u tries)", r->status, code, msg, tail,
                 r->tries + 1);
        gf__remote_redact(full, sizeof full, NULL);
        size_t k = strnlen(full, sizeof why - 1); /* cut after redacting */
        memcpy(why, full, k);
        why[k] = 0;
    } else if (c == CURLE_OK || c == CURLE_WRITE_ERROR)
        snprintf(why, sizeof why, "HTTP %ld%s after %zu%s bytes (%u tries)", r->status,
                 reason_of(r->status), r->got, of, r->tries + 1);
    else
        snprintf(why, sizeof why, "%.96s after %zu%s bytes (%u tries)",
                 r->err[0] ? r->err : curl_easy_strerror(c), r->got, of, r->tries + 1);
    finish(f, r, c == CURLE_OK && r->status == 404 ? GF_ENOENT : GF_EIO, why);
}

/* Curl's own low-speed limit averages over seconds of history, so a
 * transfer that stalls after a fast start is seen late: silence is timed
 * here instead. */
static void on_stall_check(uv_timer_t *h)
{
    gf__fetcher *f = h->data;
    double now = gf__now();
    unsigned before = f->done_len;
    for (unsigned i = 0; i < f->o.requests; i++) {
        req *r = &f->reqs[i];
        if (!r->in_multi)
            continue;
        /* Queued for a connection (remote_connections) is not silence,
         * nor, on the first try, the request's own time: it waits its
         * turn behind others. Connecting is bounded by
         * CURLOPT_CONNECTTIMEOUT. */
        curl_off_t pre = 0;
        curl_easy_getinfo(r->e, CURLINFO_PRETRANSFER_TIME_T, &pre);
        if (pre == 0) {
            r->heard = now;
            if (r->tries == 0)
                r->began = now;
            continue;
        }
        if (now - r->began > f->o.deadline_s) {
            transfer_done(f, r, CURLE_OPERATION_TIMEDOUT);
        } else if (now - r->heard > f->o.stall_s) {
            snprintf(r->err, sizeof r->err, "under %d bytes in %u s", GF__STALL_MIN_BYTES,
                     f->o.stall_s);
            transfer_done(f, r, CURLE_OPERATION_TIMEDOUT);
        }
    }
    if (f->done_len != before && f->o.progress)
        f->o.progress(f->o.progress_ctx);
}

static void check_done(gf__fetcher *f)
{
    CURLMsg *m;
    int left;
    unsigned before = f->done_len;
    while ((m = curl_multi_info_read(f->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        req *r = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
        transfer_done(f, r, m->data.result);
    }
    if (f->done_len != before && f->o.progress)
        f->o.progress(f->o.progress_ctx);
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
    uv_timer_start(&f->stall_timer, on_stall_check, every, every);
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

/* Grows r's buffer within its budget and starts r, or finishes it with
 * why. The budget refuses only while other large buffers are in use (a
 * lone read over it goes ahead): then r waits, holding no large buffer,
 * and is tried again at each reap, as the io_uring reader's wait list is,
 * so the controller never blocks and the budget's count stays exact. */
static void reserve_and_start(gf__fetcher *f, req *r)
{
    char why[160] = "";
    size_t keep = 0;
    size_t need = r->len == GF__WHOLE_FILE ? 0 : (size_t)r->len;
    int rc = gf__buf_reserve(r->buf, need, &keep, gf__effective_max(f->o.max_bytes), r->budget,
                             0, &r->budget_waited, why, sizeof why);
    if (rc == GF__BUDGET_LATER) {
        if (!r->budget_wait)
            f->n_budget_wait++;
        r->budget_wait = true;
        return;
    }
    if (r->budget_wait)
        f->n_budget_wait--;
    r->budget_wait = false;
    r->began = gf__now();
    if (rc == 0)
        rc = start(f, r, why, sizeof why);
    if (rc < 0)
        finish(f, r, rc, why);
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
        finish(f, r, GF_EEMPTY, "member is empty");
    } else if (len != GF__WHOLE_FILE && len > max) {
        snprintf(why, sizeof why, "%" PRIu64 " bytes, over max_file_bytes (%zu)", len, max);
        finish(f, r, GF_ETOOBIG, why);
    } else {
        reserve_and_start(f, r);
    }
    return 0; /* a request finished here is reaped by the owner's next round */
}

int gf__fetcher_reap(gf__fetcher *f, gf__read_done *done, int max)
{
    int n = 0;
    /* Each reap follows a decode or read done: budget may have come back. */
    for (unsigned i = 0; f->n_budget_wait && i < f->o.requests && !f->closing; i++)
        if (f->reqs[i].active && f->reqs[i].budget_wait)
            reserve_and_start(f, &f->reqs[i]);
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

/* Always built: fuzz_remote calls them without the `remote` feature. */
#include <stdint.h>
#include <string.h>

static bool parse_u64(const char **p, const char *end, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;
    while (s < end && *s >= '0' && *s <= '9') {
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
        s++;
    }
    if (s == *p)
        return false;
    *p = s;
    *out = v;
    return true;
}

int gf__content_range_parse(const char *v, size_t n, uint64_t *first, uint64_t *last,
                            uint64_t *total)
{
    const char *p = v, *end = v + n;
    *first = 1, *last = 0, *total = 0;
    if (n < 6 || strncasecmp(p, "bytes", 5) != 0 || (p[5] != ' ' && p[5] != '='))
        return -1;
    p += 6;
    while (p < end && *p == ' ')
        p++;
    if (p < end && *p == '*') {
        p++;
    } else {
        uint64_t a, b;
        if (!parse_u64(&p, end, &a) || p >= end || *p++ != '-' || !parse_u64(&p, end, &b) ||
            b < a)
            return -1;
        *first = a, *last = b;
    }
    if (p >= end || *p++ != '/')
        return -1;
    if (p < end && *p == '*' && p + 1 == end)
        return *first <= *last ? 0 : -1; /* no range and no total says nothing */
    uint64_t t;
    if (!parse_u64(&p, end, &t) || p != end || (*first <= *last && *last >= t))
        return -1;
    *total = t;
    return 0;
}

/* The text of <tag>...</tag> in body, control characters dropped. */
static void xml_text(const char *body, size_t n, const char *tag, char *out, size_t cap)
{
    out[0] = 0;
    char open[40], close[40];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    size_t ol = strlen(open), cl = strlen(close);
    for (size_t i = 0; i + ol <= n; i++) {
        if (memcmp(body + i, open, ol) != 0)
            continue;
        size_t k = 0;
        for (size_t j = i + ol; j < n && k + 1 < cap; j++) {
            if (j + cl <= n && memcmp(body + j, close, cl) == 0)
                break;
            unsigned char ch = (unsigned char)body[j];
            if (ch >= 0x20 && ch != 0x7f)
                out[k++] = (char)ch;
        }
        out[k] = 0;
        return;
    }
}

void gf__s3_error_parse(const char *body, size_t n, char *code, size_t code_len, char *msg,
                        size_t msg_len, char *region, size_t region_len)
{
    xml_text(body, n, "Code", code, code_len);
    xml_text(body, n, "Message", msg, msg_len);
    xml_text(body, n, "Region", region, region_len);
}
