/* One request's life in the fetcher (remote_fetch_impl.h): its buffer
 * reserved within the read budget, its transfer started (or resumed from
 * the byte reached, If-Range its validator), each answer's headers and
 * body checked against the request and the object, its end made done, a
 * retry after backoff or a failure with the reason, and the stall timer's
 * rounds. On the loop's thread, called by remote_fetch.c's glue and API.
 * Apart from remote_fetch.c (issue 38): these checks are its bulk. */
#include "remote_fetch_impl.h"

#include "reader_internal.h"
#include "remote_auth.h"
#include "remote_provider.h"

#include "config.h"

#if GF_HAVE_REMOTE

#include <curl/curl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Transfers of at least BIG_TRANSFER bytes (whole shards) receive into
 * curl buffers of BIG_RECV_BUFFER; smaller ones (a sample, a sidecar)
 * keep curl's 16 KiB, so 64 requests in flight cost no 16 MiB. */
#define BIG_TRANSFER (1u << 20)
#define BIG_RECV_BUFFER (256L << 10)

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

void gf__fetch_finish(gf__fetcher *f, req *r, int err, const char *why)
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
        gf__fetch_finish(f, r, rc, why);
    gf__fetch_check_done(f);
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
        gf__fetch_finish(f, r, GF_EIO, why);
        return;
    }
    if (r->too_big) {
        snprintf(why, sizeof why, "over max_file_bytes (%zu) after %zu bytes",
                 gf__effective_max(f->o.max_bytes), r->got);
        gf__fetch_finish(f, r, GF_ETOOBIG, why);
        return;
    }
    bool whole = r->len == GF__WHOLE_FILE &&
                 (!r->total || r->off + r->got == r->total);
    /* A range past the object's end gets what there is, as a short pread
     * does: no retry can add bytes (the object's size is checked apart). */
    bool ended = r->total && r->off + r->got == r->total;
    if (c == CURLE_OK && r->body_ok && (r->got == r->len || whole || ended)) {
        gf__fetch_finish(f, r, 0, NULL);
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
    if (gf__remote_follows_region(r->t->provider) && wrong_region && region[0] &&
        !r->region_followed && strcmp(region, r->t->region) != 0 &&
        strspn(region, "abcdefghijklmnopqrstuvwxyz0123456789-") == strlen(region)) {
        r->region_followed = true;
        snprintf(r->t->region, sizeof r->t->region, "%s", region);
        int rc = start(f, r, why, sizeof why);
        if (rc < 0)
            gf__fetch_finish(f, r, rc, why);
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
    gf__fetch_finish(f, r, c == CURLE_OK && r->status == 404 ? GF_ENOENT : GF_EIO, why);
}

/* Curl's own low-speed limit averages over seconds of history, so a
 * transfer that stalls after a fast start is seen late: silence is timed
 * here instead. */
void gf__fetch_on_stall_check(uv_timer_t *h)
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

void gf__fetch_check_done(gf__fetcher *f)
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

/* Grows r's buffer within its budget and starts r, or finishes it with
 * why. The budget refuses only while other large buffers are in use (a
 * lone read over it goes ahead): then r waits, holding no large buffer,
 * and is tried again at each reap, as the io_uring reader's wait list is,
 * so the controller never blocks and the budget's count stays exact. */
void gf__fetch_reserve_and_start(gf__fetcher *f, req *r)
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
        gf__fetch_finish(f, r, rc, why);
}

#endif
