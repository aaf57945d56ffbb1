/* Ranged GETs of remote objects on a libuv loop (src/remote_fetch.c,
 * remote_request.c; insides in remote_fetch_impl.h):
 * libcurl's multi interface driven by the loop's own poll and timer
 * handles, so no thread is added. Owned by the thread that runs the loop
 * (gf-control); the completions come back as io_uring's do. */
#ifndef GF_REMOTE_FETCH_H
#define GF_REMOTE_FETCH_H

#include "reader.h"

#include <stdbool.h>
#include <uv.h>

/* One remote object (a shard) as the index knows it. The fetcher checks
 * every response against it: size (Content-Range's total) when known, and
 * the ETag (or Last-Modified), recorded by the first response and
 * compared after; so an
 * object replaced during a run is an error, never another object's bytes
 * under this one's labels. Written only by the fetcher's thread. */
typedef struct gf__fetch_target {
    const char *url;     /* the request URL (s3: path-style, encoded) */
    const struct gf__remote_provider *provider; /* its row (signing, region); NULL: plain */
    uint64_t size;       /* bytes, 0 = unknown */
    char etag[96];       /* "" until the first response */
    char last_modified[64]; /* as etag: what a resume's If-Range names without one */
    char region[32];     /* a row with in_region (s3): the region the store named
                            (signed for); "" = the configured */
} gf__fetch_target;

struct curl_slist;
/* Sets what a request to t needs beyond the URL (auth, TLS, headers) on a
 * CURL easy handle; appends headers to *h. Returns 0 or a GF_E* code with
 * why. */
typedef int (*gf__fetch_setup_fn)(void *ctx, void *easy, const gf__fetch_target *t,
                                  struct curl_slist **h, char *why, size_t why_len);

/* Remote reads' defaults. */
#define GF__REMOTE_CONNECTIONS 8
#define GF__REMOTE_RETRIES 5
#define GF__REMOTE_BACKOFF_MS 100
#define GF__REMOTE_BACKOFF_MAX_MS 5000
#define GF__REMOTE_STALL_S 30
/* A transfer must bring this many body bytes (or its end) every stall_s:
 * a body trickled a byte a second, or a head that never ends (header
 * bytes are no progress), is a stall. */
#define GF__STALL_MIN_BYTES 1024
/* deadline_s 0: this many times stall_s for each try, stall_s x 20 x
 * (retries + 1): 3600 s at the defaults (settings.remote_deadline_s). */
#define GF__DEADLINE_STALLS 20
/* An index sidecar larger than this is refused (64 bytes a line: 4 M samples). */
#define GF__SIDECAR_MAX_BYTES ((size_t)256 << 20)

typedef struct gf__fetch_opts {
    unsigned requests;       /* in flight at most (1 .. 4096) */
    unsigned connections;    /* per host and in all */
    unsigned retries;        /* after the first try, per request */
    unsigned backoff_ms;     /* first retry's delay; doubled each time */
    unsigned backoff_max_ms;
    unsigned stall_s;        /* under GF__STALL_MIN_BYTES of body in this long: retried;
                                0: GF__REMOTE_STALL_S */
    unsigned deadline_s;     /* a request's tries all done within this (its wait
                                for a first connection not counted), else it
                                fails "the deadline passed"; 0: derived
                                (GF__DEADLINE_STALLS) */
    size_t max_bytes;        /* as gf__read_file's */
    gf__fetch_setup_fn setup;
    void *setup_ctx;
    void (*progress)(void *ctx); /* on the loop: completions to reap */
    void *progress_ctx;
} gf__fetch_opts;

/* What a fetcher did, for gf_stats. */
typedef struct gf__fetch_counts {
    uint64_t requests, retries, bytes;
} gf__fetch_counts;

typedef struct gf__fetcher gf__fetcher;

/* On the loop's thread, before it runs. Returns 0, GF_ENOMEM or GF_EINVAL
 * with why. */
int gf__fetcher_create(gf__fetcher **out, uv_loop_t *loop, const gf__fetch_opts *o,
                       char *why, size_t why_len);
/* Requests that may still be started. */
unsigned gf__fetcher_room(const gf__fetcher *f);
/* Starts fetching len bytes at off of t into buf (grown within budget g);
 * completes through gf__fetcher_reap. Returns 0, or GF_EINVAL when full. */
int gf__fetcher_submit(gf__fetcher *f, gf__fetch_target *t, uint64_t off, uint64_t len,
                       gf__buf *buf, gf__budget *g, uint64_t user);
/* Finished requests, without blocking (why: the reason without the URL). */
int gf__fetcher_reap(gf__fetcher *f, gf__read_done *done, int max);
void gf__fetcher_counts(const gf__fetcher *f, gf__fetch_counts *c);
/* Requests started and not yet finished. */
unsigned gf__fetcher_in_flight(const gf__fetcher *f);
/* Completions wait to be reaped. */
bool gf__fetcher_has_done(const gf__fetcher *f);
/* On the loop, when it is to end: drops every request and closes the
 * handles (the loop then runs until their close callbacks have run). */
void gf__fetcher_close(gf__fetcher *f);
/* After the loop has run its close callbacks (or never ran): frees. */
void gf__fetcher_destroy(gf__fetcher *f);

/* Blocking fetches on the calling thread (index sidecars at open,
 * gf_read_sample), up to o->requests at once on a private loop: object i
 * is len[i] bytes at off[i] of *t[i] (NULL arrays: whole objects, which
 * GF__WHOLE_FILE also asks for), each retried as the fetcher does. got()
 * sees each outcome as it lands (b valid until it returns); a nonzero
 * return stops the rest and is returned. */
typedef int (*gf__fetch_got_fn)(void *ctx, size_t i, gf__buf *b, int err, const char *why);
int gf__fetch_each(gf__fetch_target *const *t, const uint64_t *off, const uint64_t *len, size_t n,
                   const gf__fetch_opts *o, gf__fetch_got_fn got, void *ctx, char *why,
                   size_t why_len);

/* Response parsing, pure (remote_answer.c; fuzz_remote): a Content-Range value v[0..n)
 * "bytes FIRST-LAST/TOTAL" (a total of "*": 0) or "bytes STAR/TOTAL" (first 1,
 * last 0: no range; STAR is "*"). Returns 0, or -1 malformed. */
int gf__content_range_parse(const char *v, size_t n, uint64_t *first, uint64_t *last,
                            uint64_t *total);
/* An S3 error body's <Code>, <Message> and <Region> (each "" when absent),
 * control characters dropped. */
void gf__s3_error_parse(const char *body, size_t n, char *code, size_t code_len, char *msg,
                        size_t msg_len, char *region, size_t region_len);

#endif
