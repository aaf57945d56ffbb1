/* Dataset index of remote tar shards (any provider row: http, https, s3;
 * remote_provider.h), its credentials loaded as its row says: every shard's
 * index sidecar (SHARD.idx, DALI wds2idx's text with gpufeed's labels=)
 * fetched at open, many at once, and no byte of a shard: opening 1,000
 * shards costs 1,000 small GETs, not the data set. A sidecar without
 * labels (as DALI writes them) would need every .cls member fetched, one
 * request a sample: refused, naming `gpufeed index`, which writes
 * labelled ones. A sidecar is the only source of a remote sample's label,
 * so it must be tied to its shard: one without shard_crc32c= (checked
 * when the shard is fetched whole, or served from the cache) and
 * member_crc32c= (checked before each member is decoded: the global
 * order's only check) is refused too, naming the sidecar and the same
 * command (issue 37: an older gpufeed's, or a hand-written, sidecar
 * beside another shard of the same layout would label every sample
 * wrong, unseen). A sidecar line lists every member of its key, so
 * settings.fields' members come from it by the scan's own rule
 * (gf__shard_sidecar_samples), each checked against its tar header when
 * read. Run once, on gf_open's thread. */
#include "dataset_indexers.h"

#include "remote_auth.h"
#include "remote_curl.h"
#include "remote_fetch.h"
#include "remote_url.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* What remote reads need beyond the table: the targets' strings, the
 * credentials that sign them, a CA file, and the limits every request
 * through them obeys (the settings' stall, retries and deadline), so a
 * sidecar at open or gf_read_sample's read waits no longer than the
 * loader's own. */
typedef struct gf__remote_ctx gf__remote_ctx;
struct gf__remote_ctx {
    gf__remote_list list;
    gf__remote_auth auth;
    int has_auth;
    char *ca_file;
    unsigned retries, stall_s, deadline_s; /* gf__fetch_opts'; 0 stall, deadline: the defaults */
};

/* Sidecars fetched at once at open. */
#define SIDECAR_REQUESTS 32

bool gf__remote_ctx_signs(const struct gf__remote_ctx *c)
{
    return c && c->has_auth;
}

void gf__remote_ctx_free(struct gf__remote_ctx *c)
{
    if (!c)
        return;
    gf__remote_list_free(&c->list);
    if (c->has_auth)
        gf__remote_auth_free(&c->auth);
    free(c->ca_file);
    free(c);
}

/* gf__fetch_setup_fn for the shard or sidecar t: ctx's credentials and CA,
 * for the target whose url t carries, as its row sets requests up. */
static int setup_request(void *ctx, void *easy, const gf__fetch_target *t, struct curl_slist **h,
                         char *why, size_t why_len)
{
    const struct gf__remote_ctx *c = ctx;
    gf__remote_target rt = {.provider = t->provider, .url = t->url};
    gf__remote_auth a = c->auth;
    char *in_region = NULL;
    if (t->region[0] && gf__remote_follows_region(t->provider)) {
        a.region = t->region; /* the store named the bucket's region */
        /* Where the region is in the host too, that host is asked (the
         * row says; else the same one, re-signed). */
        size_t n = t->provider->in_region(t->url, t->region, &a, NULL, 0);
        if (n && (in_region = malloc(n + 1)))
            t->provider->in_region(t->url, t->region, &a, in_region, n + 1);
        else if (n)
            return gf__why(why, why_len, "out of memory for a URL"), GF_ENOMEM;
        if (in_region)
            rt.url = in_region;
    }
    int rc = gf__remote_easy_setup(easy, &rt, c->has_auth ? &a : NULL, c->ca_file, h, why,
                                   why_len);
    free(in_region); /* curl keeps its own copy of the URL */
    return rc;
}

/* A fetch through c at its limits: requests in flight over as many
 * connections, objects within max_bytes. */
static gf__fetch_opts opts_of(gf__remote_ctx *c, unsigned requests, size_t max_bytes)
{
    return (gf__fetch_opts){
        .requests = requests,
        .connections = GF__MIN(requests, (unsigned)GF__REMOTE_CONNECTIONS),
        .retries = c->retries,
        .backoff_ms = GF__REMOTE_BACKOFF_MS,
        .backoff_max_ms = GF__REMOTE_BACKOFF_MAX_MS,
        .stall_s = c->stall_s,
        .deadline_s = c->deadline_s,
        .max_bytes = max_bytes,
        .setup = setup_request,
        .setup_ctx = c,
    };
}

gf__fetch_opts gf__remote_fetch_opts(const gf_settings *s, const gf__dataset *ds)
{
    gf__fetch_opts o = opts_of(ds->remote_ctx, (unsigned)s->queue_depth, (size_t)s->max_file_bytes);
    o.connections = (unsigned)s->remote_connections;
    o.retries = (unsigned)s->remote_retries;
    o.stall_s = (unsigned)s->remote_stall_s;
    o.deadline_s = (unsigned)s->remote_deadline_s;
    return o;
}

/* c's requests obey s's stall, retries and deadline (s NULL: the
 * defaults). s may be unresolved: a 0 stall or deadline is the
 * fetcher's default then, as resolved settings would give. */
static void obey(gf__remote_ctx *c, const gf_settings *s)
{
    c->retries = s ? (unsigned)s->remote_retries : GF__REMOTE_RETRIES;
    c->stall_s = s && s->remote_stall_s > 0 ? (unsigned)s->remote_stall_s : 0;
    c->deadline_s = s && s->remote_deadline_s > 0 ? (unsigned)s->remote_deadline_s : 0;
}

typedef struct sidecars {
    gf__remote_ctx *ctx;
    char **text;      /* each shard's sidecar, NUL-terminated */
    size_t *len;
    char *why;
    size_t why_len;
} sidecars;

static int got_sidecar(void *arg, size_t i, gf__buf *b, int err, const char *reason)
{
    sidecars *s = arg;
    const gf__remote_target *t = &s->ctx->list.t[i];
    if (err == GF_ENOENT) {
        gf__why(s->why, s->why_len,
                "%s: no index sidecar (%s): write one with `gpufeed index %s --out DIR` and "
                "upload it beside the shard",
                t->display, t->sidecar_display, t->display);
        return GF_EDATASET;
    }
    if (err) {
        gf__why(s->why, s->why_len, "%s: %s", t->sidecar_display, reason);
        return err == GF_ENOMEM ? GF_ENOMEM : GF_EDATASET;
    }
    if (!(s->text[i] = malloc(b->len + 1)))
        return GF_ENOMEM;
    memcpy(s->text[i], b->data, b->len);
    s->text[i][b->len] = '\0';
    s->len[i] = b->len;
    return 0;
}

/* What sc lacks of the CRCs that tie a sidecar to its shard, or NULL:
 * shard_crc32c= (the shard order's check, on the whole shard) and
 * member_crc32c= (each member's, in either order; the parser keeps the
 * list only when it is whole, so a line without one means none). */
static const char *untied(const gf__sidecar *sc)
{
    bool members = sc->n > 0;
    for (size_t j = 0; j < sc->n && members; j++)
        members = sc->e[j].img_crc32c >= 0;
    if (sc->shard_crc32c < 0 && !members)
        return "neither shard_crc32c= nor member_crc32c=";
    if (sc->shard_crc32c < 0)
        return "no shard_crc32c=";
    return members ? NULL : "no member_crc32c=";
}

static int index_shards(gf__dataset *ds, const char *src, sidecars *s, int bad_label_fails,
                        char *why, size_t why_len)
{
    gf__remote_ctx *c = ds->remote_ctx;
    size_t n = c->list.n;
    gf__fetch_target *side = calloc(n, sizeof *side);
    gf__fetch_target **tp = calloc(n, sizeof *tp);
    int rc = side && tp ? 0 : GF_ENOMEM;
    for (size_t i = 0; i < n && rc == 0; i++) {
        side[i] = (gf__fetch_target){.url = c->list.t[i].sidecar_url,
                                     .provider = c->list.t[i].provider};
        tp[i] = &side[i];
    }
    gf__fetch_opts o = opts_of(c, SIDECAR_REQUESTS, GF__SIDECAR_MAX_BYTES);
    if (rc == 0)
        rc = gf__fetch_each(tp, NULL, NULL, n, &o, got_sidecar, s, why, why_len);
    free(side);
    free(tp);
    if (rc < 0)
        return rc;

    gf__builder b = {.ranged = 1, .n_var = ds->n_var};
    int32_t max_label = -1;
    if (!(ds->shard_crc32c = malloc((ds->n_shards + 1) * sizeof *ds->shard_crc32c)))
        rc = GF_ENOMEM;
    for (uint32_t k = 0; k < ds->n_shards && rc == 0; k++) {
        gf__sidecar sc = {0};
        const char *lack = NULL;
        const gf__remote_target *t = &c->list.t[k];
        rc = gf__sidecar_parse(s->text[k], s->len[k], GF__SIDECAR_SIZE_UNKNOWN,
                               t->sidecar_display, &sc, why, why_len);
        if (rc == 2) {
            rc = GF_EDATASET; /* why names the sidecar and the line */
        } else if (rc == 0 && !sc.labelled) {
            gf__why(why, why_len,
                    "%s: has no labels (a DALI-written index): each .cls would be one request a "
                    "sample; write a labelled one with `gpufeed index %s --out DIR` and upload "
                    "it beside the shard",
                    t->sidecar_display, t->display);
            rc = GF_EDATASET;
        } else if (rc == 0 && (lack = untied(&sc))) {
            gf__why(why, why_len,
                    "%s: records %s (an older gpufeed's, or hand-written): nothing ties it to "
                    "its shard, so beside another shard it could label every sample wrong; "
                    "write one with `gpufeed index %s --out DIR` and upload it beside the shard",
                    t->sidecar_display, lack, t->display);
            rc = GF_EDATASET;
        } else if (rc == 0) {
            if (sc.shard_bytes > 0)
                ds->remote[k].size = (uint64_t)sc.shard_bytes;
            ds->shard_crc32c[k] = sc.shard_crc32c;
            rc = gf__shard_sidecar_samples(ds, &b, k, ds->shard_paths[k], &sc, bad_label_fails,
                                           &max_label, why, why_len);
        }
        gf__sidecar_free(&sc);
        free(s->text[k]);
        s->text[k] = NULL;
    }
    if (rc == 0 && b.n == 0) {
        gf__why(why, why_len, "%s: no samples in %u shard(s)' index sidecars (%llu keys "
                              "skipped%s%s)",
                src, ds->n_shards, (unsigned long long)ds->skipped_keys,
                ds->warning[0] ? "; first: " : "", ds->warning);
        rc = GF_EDATASET;
    }
    if (rc == 0)
        rc = gf__shard_labels_bounded(&b, ds->shard_paths, why, why_len);
    if (rc < 0) {
        gf__builder_free(&b);
        return rc;
    }
    ds->n_classes = max_label + 1;
    gf__builder_finish(&b, ds);
    return 0;
}

int gf__dataset_open_remote(gf__dataset *ds, const char *src, const gf__dataset_opts *o,
                            char *why, size_t why_len)
{
    const char *ca_file = o->ca_file;
    const gf_settings *settings = o->remote_settings;
    if (o->schema && o->schema->image < 0 && settings && settings->order != GF_ORDER_SHARDS) {
        /* A ranged read is tied to its shard by the image's
         * member_crc32c=; the shard order checks each shard whole. */
        gf__why(why, why_len, "fields: without an image field, remote shards are read in the "
                              "shard order (order shards: each shard checked whole against its "
                              "sidecar's shard_crc32c=); the global order checks a sample by "
                              "its image's CRC32C");
        return GF_EINVAL;
    }
    gf__dataset_take_schema(ds, o->schema);
    gf__remote_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return GF_ENOMEM;
    ds->remote_ctx = c;
    obey(c, settings); /* the sidecars' fetches below, and every later one */
    int rc = 0;
    if (ca_file && !(c->ca_file = strdup(ca_file)))
        return GF_ENOMEM;
    const gf__remote_provider *ap = gf__remote_auth_provider(src);
    if (ap) {
        if ((rc = ap->auth_load(&c->auth, why, why_len)) < 0)
            return rc;
        c->has_auth = 1;
    }
    if ((rc = gf__remote_targets(src, c->has_auth ? &c->auth : NULL, &c->list, why, why_len)) < 0)
        return rc;
    size_t n = c->list.n;
    /* Not a directory anything is read from: an open data set has one. */
    int dfd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    ds->root_fd = dfd < 0 ? -1 : gf__keep_fd(dfd);
    if (ds->root_fd < 0) {
        gf__why(why, why_len, "cannot open the current directory: %s", strerror(errno));
        return GF_EDATASET;
    }
    ds->n_shards = (uint32_t)n;
    ds->shard_paths = calloc(n, sizeof *ds->shard_paths);
    ds->remote = calloc(n, sizeof *ds->remote);
    if (!ds->shard_paths || !ds->remote)
        return GF_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        /* Names point into the list's block: freed with the context. */
        ds->shard_paths[i] = (char *)c->list.t[i].display;
        ds->remote[i] = (gf__fetch_target){.url = c->list.t[i].url,
                                           .provider = c->list.t[i].provider};
    }
    ds->bytes += n * (sizeof *ds->shard_paths + sizeof *ds->remote);
    sidecars s = {.ctx = c,
                  .text = calloc(n, sizeof(char *)),
                  .len = calloc(n, sizeof(size_t)),
                  .why = why,
                  .why_len = why_len};
    rc = s.text && s.len ? index_shards(ds, src, &s, o->bad_label_fails, why, why_len)
                         : GF_ENOMEM;
    for (size_t i = 0; s.text && i < n; i++)
        free(s.text[i]);
    free(s.text);
    free(s.len);
    return rc;
}

typedef struct one_read {
    gf__buf *b;
    int err;
    char reason[160];
} one_read;

static int got_one(void *arg, size_t i, gf__buf *b, int err, const char *reason)
{
    (void)i;
    one_read *r = arg;
    r->err = err;
    if (err) {
        snprintf(r->reason, sizeof r->reason, "%s", reason);
        return 0;
    }
    /* The fetch's buffer is its own: hand over the bytes. */
    gf__buf tmp = *r->b;
    *r->b = *b;
    *b = tmp;
    return 0;
}

int gf__remote_read(const gf__dataset *ds, uint32_t k, uint64_t off, uint64_t len,
                    size_t max_bytes, gf__buf *b, char *why, size_t why_len)
{
    /* A copy: the loader's fetcher writes the shared target's ETag. */
    gf__fetch_target t = {.url = ds->remote[k].url, .provider = ds->remote[k].provider};
    gf__fetch_target *tp = &t;
    gf__fetch_opts o = opts_of(ds->remote_ctx, 1, max_bytes);
    one_read r = {.b = b, .err = GF_EIO};
    int rc = gf__fetch_each(&tp, &off, &len, 1, &o, got_one, &r, why, why_len);
    if (rc < 0)
        return rc;
    if (r.err)
        gf__why(why, why_len, "%s: %s", ds->shard_paths[k], r.reason);
    return r.err;
}

/* gf__remote_shard_index: the shard is fetched in chunks of this size,
 * this many at once (their buffers are the memory beyond the shard's). */
#define SHARD_CHUNK ((uint64_t)32 << 20)
#define SHARD_REQUESTS 4

typedef struct to_file {
    int fd;
    const char *display;
    const uint64_t *off; /* chunk i's offset */
    char *why;
    size_t why_len;
} to_file;

/* A chunk's bytes into the memory file at its offset. */
static int got_chunk(void *arg, size_t i, gf__buf *b, int err, const char *reason)
{
    to_file *w = arg;
    if (err == GF_ENOMEM)
        return GF_ENOMEM;
    if (err) {
        gf__why(w->why, w->why_len, "%s: %s", w->display, reason);
        return GF_EIO;
    }
    for (size_t done = 0; done < b->len;) {
        ssize_t n = pwrite(w->fd, b->data + done, b->len - done, (off_t)(w->off[i] + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int e = n < 0 ? errno : EIO;
            gf__why(w->why, w->why_len, "%s: its copy in memory: %s", w->display, strerror(e));
            return e == ENOMEM || e == ENOSPC ? GF_ENOMEM : GF_EIO;
        }
        done += (size_t)n;
    }
    return 0;
}

/* The whole object of t into fd; *size its bytes. The first request, a
 * tar header's 512 bytes, learns the size (Content-Range) and the ETag,
 * which every chunk after is checked against: an object replaced
 * meanwhile fails, never mixes. */
static int fetch_whole(gf__fetch_target *t, const char *display, gf__remote_ctx *c, int fd,
                       uint64_t *size, char *why, size_t why_len)
{
    gf__fetch_opts o = opts_of(c, SHARD_REQUESTS, (size_t)SHARD_CHUNK);
    uint64_t head_off = 0, head_len = 512;
    to_file w = {.fd = fd, .display = display, .off = &head_off, .why = why, .why_len = why_len};
    gf__fetch_target *tp = t;
    int rc = gf__fetch_each(&tp, &head_off, &head_len, 1, &o, got_chunk, &w, why, why_len);
    if (rc < 0)
        return rc;
    if (t->size == 0) {
        gf__why(why, why_len, "%s: the server did not say the object's size (no Content-Range)",
                display);
        return GF_EIO;
    }
    /* The size is the server's word: the copy is in memory, so a claim
     * beyond half of it is refused before a byte more is fetched. */
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t cap = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page / 2 : (uint64_t)1 << 32;
    if (t->size > cap) {
        gf__why(why, why_len,
                "%s: the server says the object is %" PRIu64 " bytes, over the %" PRIu64
                " bytes (half the memory) an index copies into memory",
                display, t->size, cap);
        return GF_ETOOBIG;
    }
    uint64_t n = (t->size + SHARD_CHUNK - 1) / SHARD_CHUNK;
    uint64_t *off = calloc(n, sizeof *off), *len = calloc(n, sizeof *len);
    gf__fetch_target **tps = calloc(n, sizeof *tps);
    rc = off && len && tps ? 0 : GF_ENOMEM;
    for (uint64_t i = 0; rc == 0 && i < n; i++) {
        off[i] = i * SHARD_CHUNK;
        len[i] = GF__MIN(SHARD_CHUNK, t->size - off[i]);
        tps[i] = t;
    }
    w.off = off;
    if (rc == 0)
        rc = gf__fetch_each(tps, off, len, (size_t)n, &o, got_chunk, &w, why, why_len);
    free(off);
    free(len);
    free(tps);
    *size = t->size;
    return rc;
}

int gf__remote_shard_index(const char *url, const char *ca_file, const gf_settings *settings,
                           const gf__schema *schema, char **text, size_t *len,
                           struct gf_shard_index_info *info, char *why, size_t why_len)
{
    gf__remote_ctx c = {.ca_file = (char *)ca_file}; /* borrowed: not freed below */
    obey(&c, settings);
    int rc = 0;
    const gf__remote_provider *ap = gf__remote_auth_provider(url);
    if (ap) {
        if ((rc = ap->auth_load(&c.auth, why, why_len)) < 0)
            return rc;
        c.has_auth = 1;
    }
    rc = gf__remote_targets(url, c.has_auth ? &c.auth : NULL, &c.list, why, why_len);
    if (rc == GF_EDATASET)
        rc = GF_EINVAL; /* a bad pattern: the argument's fault, not a shard's */
    if (rc == 0 && c.list.n != 1) {
        gf__why(why, why_len,
                "%s: %zu shards: one at a time (gf_shard_paths expands a pattern)",
                c.list.t[0].display, c.list.n);
        rc = GF_EINVAL;
    }
    int fd = -1;
    if (rc == 0 && (fd = memfd_create("gpufeed-index", MFD_CLOEXEC)) < 0) {
        gf__why(why, why_len, "%s: memfd_create: %s", c.list.t[0].display, strerror(errno));
        rc = errno == ENOMEM ? GF_ENOMEM : GF_EIO;
    }
    if (rc == 0) {
        const gf__remote_target *rt = &c.list.t[0];
        gf__fetch_target t = {.url = rt->url, .provider = rt->provider};
        uint64_t size = 0;
        rc = fetch_whole(&t, rt->display, &c, fd, &size, why, why_len);
        if (rc == 0)
            rc = gf__shard_index_fd(fd, size, rt->display, schema, text, len, info, why,
                                        why_len);
    }
    if (fd >= 0)
        close(fd);
    gf__remote_list_free(&c.list);
    if (c.has_auth)
        gf__remote_auth_free(&c.auth);
    return rc;
}
