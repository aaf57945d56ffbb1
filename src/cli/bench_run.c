/*
 * gpufeed bench's machinery shared by its three modes: the sampled files
 * (picked through a gf_index, read with gf_index_read), the consumer (the
 * compute per batch: a spin kernel on its CUDA stream, a busy loop on the
 * CPU, or the demo model's step) and the loader runner with its
 * steady-state window. Main thread (the loader's threads are the
 * library's).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_parts.h"
#include "compute.h"
#include "json.h"
#include "plot.h"
#include "quote.h"
#include "samples.h"
#include "sysinfo.h"

const char *reader_name(gf_io io)
{
    return io == GF_IO_URING ? "io_uring" : io == GF_IO_POSIX ? "posix" : "auto";
}

const char *decoder_used(const gf_stats *st)
{
    const char *used = "none";
#define USED_(name)                                                                                \
    if (st->decoded_##name)                                                                        \
        used = strcmp(used, "none") ? "mixed" : #name;
    GF_DECODED_MAP(USED_)
#undef USED_
    return used;
}

/* The table's kinds; a row's kind is checked against its field's type. */
enum stat_kind { K_U64, K_INT, K_FLAG, K_DBL, K_STR };
#define KIND_OK_U64(e) _Generic((e), uint64_t: 1, default: 0)
#define KIND_OK_INT(e) (sizeof(e) == sizeof(int) && _Generic((e), float: 0, default: 1))
#define KIND_OK_FLAG(e) _Generic((e), int: 1, default: 0)
#define KIND_OK_DBL(e) _Generic((e), double: 1, default: 0)
#define KIND_OK_STR(e) _Generic(&(e)[0], char *: 1, default: 0)
#define STAT_CHECK_(kind, field)                                                                   \
    _Static_assert(KIND_OK_##kind(((gf_stats *)0)->field), #field " is not " #kind);
GF_STATS_MAP(STAT_CHECK_)
#undef STAT_CHECK_

static const struct stat_row {
    const char *name;
    enum stat_kind kind;
    size_t at;
} stat_rows[STAT_COUNT] = {
#define STAT_ROW_(kind, field) {#field, K_##kind, offsetof(gf_stats, field)},
    GF_STATS_MAP(STAT_ROW_)
#undef STAT_ROW_
};

void json_stats(cli_json *j, const gf_stats *st, stat_id first, stat_id last)
{
    for (int i = first; i <= (int)last; i++) {
        const struct stat_row *r = &stat_rows[i];
        const char *v = (const char *)st + r->at;
        int n;
        switch (r->kind) {
        case K_U64: {
            uint64_t u;
            memcpy(&u, v, sizeof u);
            cli_json_kuint(j, r->name, u);
            break;
        }
        case K_INT:
        case K_FLAG:
            memcpy(&n, v, sizeof n);
            if (r->kind == K_FLAG)
                cli_json_kbool(j, r->name, n);
            else
                cli_json_kint(j, r->name, n);
            break;
        case K_DBL: {
            double d;
            memcpy(&d, v, sizeof d);
            cli_json_knum(j, r->name, d);
            break;
        }
        case K_STR:
            cli_json_kstr(j, r->name, v);
            break;
        }
    }
}

void json_decoded(cli_json *j, const gf_stats *st)
{
#define DECODED_(name) json_stat(j, st, STAT_decoded_##name);
    GF_DECODED_MAP(DECODED_)
#undef DECODED_
}


void sample_set_free(sample_set *ss)
{
    for (size_t i = 0; i < ss->n; i++)
        gf_free(ss->data[i]);
    free(ss->data);
    free(ss->len);
    free(ss->ids);
    gf_index_close(&ss->index);
    memset(ss, 0, sizeof *ss);
}

/* Opens the index of s->data and picks the samples. Returns CLI_OK
 * or an exit status, message printed. */
int sample_set_open(const gf_settings *s, sample_set *ss)
{
    int rc = gf_index_open(&ss->index, s);
    if (rc < 0) {
        const char *msg = gf_index_last_error(ss->index);
        if (*msg)
            cli_error(CMD, "%s", msg); /* the index's message names the file */
        else
            cli_error(CMD, "%s: %s", s->data, gf_strerror(rc));
        return CLI_USAGE;
    }
    uint64_t total = gf_index_count(ss->index);
    size_t n = total < ST_MAX_FILES ? (size_t)total : ST_MAX_FILES;
    ss->shards = gf_index_shards(ss->index) > 0;
    ss->ids = calloc(n ? n : 1, sizeof *ss->ids);
    ss->data = calloc(n ? n : 1, sizeof *ss->data);
    ss->len = calloc(n ? n : 1, sizeof *ss->len);
    if (!ss->ids || !ss->data || !ss->len) {
        cli_error(CMD, "out of memory");
        return CLI_FAIL;
    }
    for (size_t i = 0; i < n; i++)
        ss->ids[i] = (uint64_t)i * total / n;
    ss->n = n;
    return CLI_OK;
}

/* Fraction of the sampled files in the page cache, -1 if unknown (tar
 * shards: see the top of the file). Reads no sample. */
double sample_set_page_cache(const sample_set *ss, const char *data)
{
    if (ss->shards || ss->n == 0)
        return -1;
    /* Sample paths are relative to the folder, or to the list's folder. */
    struct stat sb;
    size_t rl; /* the prefix: data[0, rl), then a '/' unless it ends in one */
    if (stat(data, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        rl = strlen(data);
    } else {
        const char *slash = strrchr(data, '/');
        rl = slash ? (size_t)(slash - data) + 1 : 0;
    }
    const char *sep = rl && data[rl - 1] != '/' ? "/" : "";
    char **paths = calloc(ss->n, sizeof *paths);
    size_t k = 0;
    double f = -1;
    if (!paths)
        return -1;
    for (; k < ss->n; k++) {
        const char *rel = gf_index_path(ss->index, ss->ids[k]);
        size_t n = rl + (rel ? strlen(rel) : 0) + 2;
        if (!rel || (paths[k] = malloc(n)) == NULL)
            goto out;
        if (rel[0] == '/')
            snprintf(paths[k], n, "%s", rel);
        else
            snprintf(paths[k], n, "%.*s%s%s", (int)rl, data, sep, rel);
    }
    f = cli_page_cache_fraction(paths, ss->n);
out:
    for (size_t i = 0; i < k; i++)
        free(paths[i]);
    free(paths);
    return f;
}

/* Reads the sampled samples' bytes (gf_index_read); a sample that cannot
 * be read stays NULL. */
static void sample_set_read(sample_set *ss)
{
    for (size_t i = 0; i < ss->n; i++) {
        void *p;
        if (ss->data[i] || gf_index_read(ss->index, ss->ids[i], &p, &ss->len[i], NULL, 0) < 0)
            continue;
        ss->data[i] = p;
    }
}

/* Times one gf_decoder (what a loader thread runs) over the sampled
 * samples in memory (read first with gf_read_sample, untimed), repeated
 * until at least ST_MIN_SECONDS have passed. Samples that cannot be read
 * or decoded are left out of the rate. */
int single_thread_rate(const gf_settings *s, sample_set *ss, input_result *r)
{
    size_t out_bytes = (size_t)s->height * (size_t)s->width * (size_t)(s->channels ? s->channels : 3);
    uint8_t *out = malloc(out_bytes);
    uint8_t *ok = calloc(ss->n ? ss->n : 1, 1);
    char why[256];
    size_t good = 0;
    uint64_t decodes = 0, epoch = 0;
    double t0, t;
    gf_decoder *dec = NULL;
    if (!out || !ok || gf_decoder_open(&dec, s) < 0) {
        free(out);
        free(ok);
        return -1;
    }
    sample_set_read(ss);
    for (size_t i = 0; i < ss->n; i++) {
        if (!ss->data[i])
            continue;
        /* One untimed pass: drops files that fail, warms code and caches. */
        if (gf_decoder_decode(dec, ss->data[i], ss->len[i], 0, i, out, why, sizeof why) == 0) {
            ok[i] = 1;
            good++;
        }
    }
    r->st_files = good;
    if (good == 0) {
        gf_decoder_close(&dec);
        free(out);
        free(ok);
        r->st_images_per_s = 0;
        return 0;
    }
    t0 = cli_now();
    do {
        epoch++; /* a new epoch draws new random crops, as training would */
        for (size_t i = 0; i < ss->n; i++) {
            if (!ok[i])
                continue;
            gf_decoder_decode(dec, ss->data[i], ss->len[i], epoch, i, out, why, sizeof why);
            decodes++;
        }
        t = cli_now() - t0;
    } while (t < ST_MIN_SECONDS);
    r->st_decodes = decodes;
    r->st_images_per_s = (double)decodes / t;
    gf_decoder_close(&dec);
    free(out);
    free(ok);
    return 0;
}

/* ---- the consumer ---------------------------------------------------------- */


const char *where(gf_device d)
{
    return d == GF_DEVICE_CUDA ? "cuda" : "cpu";
}

/* The CPU stand-in for a training step: reads one byte per 4 KiB of the
 * batch (through volatile, so it happens), then spins on the monotonic
 * clock until ms have passed since the start. */
void cpu_compute(double ms, const void *data, size_t len)
{
    const volatile uint8_t *p = data;
    double end = cli_now() + ms * 1e-3;
    uint8_t x = 0;
    for (size_t off = 0; off < len; off += 4096)
        x ^= p[off];
    (void)x;
    while (cli_now() < end) {
    }
}

/* The batch's consumer-visible bytes. */
static const void *batch_bytes(const gf_batch *b, size_t *len)
{
    size_t cell = (size_t)b->height * (size_t)b->width * (size_t)b->channels;
    if (!b->data) { /* a library that fills only the uint8 host pixels */
        *len = (size_t)b->count * cell;
        return b->pixels;
    }
    *len = (size_t)b->count * cell * gf_dtype_size(b->dtype);
    return b->data;
}

/* Forgets the cached batch (the next full batch delivered is cached). */
void consumer_drop_cache(consumer *c)
{
#if GF_CLI_HAVE_CUDA
    cli_cuda_free(c->dev_x);
#endif
    c->dev_x = NULL;
    free(c->cache);
    free(c->labels);
    c->cache = NULL;
    c->labels = NULL;
    c->cache_len = 0;
    c->cache_count = 0;
}

void consumer_free(consumer *c)
{
    consumer_drop_cache(c);
    gfm_destroy(c->model);
#if GF_CLI_HAVE_CUDA
    cli_cuda_event_destroy(c->ev_start);
    cli_cuda_event_destroy(c->ev_end);
    cli_cuda_stream_destroy(c->stream);
#endif
    memset(c, 0, sizeof *c);
}

/* Learns where the loader delivers (the first loader decides; AUTO has
 * been resolved by then) and, on CUDA, makes the stream and events on
 * the loader's device. Returns CLI_OK or an exit status, message printed. */
static int consumer_bind(consumer *c, const gf_stats *st)
{
    gf_device d = st->device == GF_DEVICE_CUDA ? GF_DEVICE_CUDA : GF_DEVICE_CPU;
    if (c->bound) {
        if (d != c->device) {
            cli_error(CMD, "the loader delivered on %s, earlier on %s", where(d), where(c->device));
            return CLI_FAIL;
        }
        return CLI_OK;
    }
    c->device = d;
    c->bound = 1;
    if (d != GF_DEVICE_CUDA)
        return CLI_OK;
#if GF_CLI_HAVE_CUDA
    if (cli_cuda_set_device(st->device_id < 0 ? 0 : st->device_id) < 0 ||
        cli_cuda_stream_create(&c->stream) < 0 || cli_cuda_event_create(&c->ev_start) < 0 ||
        cli_cuda_event_create(&c->ev_end) < 0) {
        cli_error(CMD, "CUDA: %s", cli_cuda_error());
        return CLI_FAIL;
    }
    return CLI_OK;
#else
    cli_error(CMD, "the loader delivers on CUDA, but this gpufeed was built without CUDA; "
                   "use --device cpu");
    return CLI_FAIL;
#endif
}

/* One step of the compute on n samples at x (device memory on CUDA,
 * ready on c->stream; host on the CPU) of len bytes: the demo model's
 * training step, or ms of spin (nothing when ms == 0). On CUDA it is
 * queued on c->stream, not waited for. Returns CLI_OK or CLI_FAIL,
 * message printed. */
int compute_step(consumer *c, const void *x, const int32_t *labels, int n, size_t len)
{
    if (c->use_model) {
        float loss;
        int correct;
        if (gfm_train_step(c->model, x, labels, n,
                           c->device == GF_DEVICE_CUDA ? c->stream : NULL, &loss, &correct) < 0) {
            cli_error(CMD, "model: %s", gfm_error(c->model));
            return CLI_FAIL;
        }
        return CLI_OK;
    }
    if (c->ms <= 0)
        return CLI_OK;
#if GF_CLI_HAVE_CUDA
    if (c->device == GF_DEVICE_CUDA) {
        if (cli_cuda_spin(c->ms, c->stream) < 0) {
            cli_error(CMD, "CUDA: %s", cli_cuda_error());
            return CLI_FAIL;
        }
        return CLI_OK;
    }
#endif
    cpu_compute(c->ms, x, len);
    return CLI_OK;
}

/* Runs the compute on b and gives it back. Returns CLI_OK or an exit
 * status, message printed. */
static int consume(consumer *c, gf_loader *l, gf_batch *b)
{
    int rc, status;
    size_t len;
    const void *p;
    if (b->data && b->device != c->device) {
        cli_error(CMD, "a batch arrived on %s, expected %s", where(b->device), where(c->device));
        gf_release(l, b);
        return CLI_FAIL;
    }
    p = batch_bytes(b, &len);
#if GF_CLI_HAVE_CUDA
    if (c->device == GF_DEVICE_CUDA) {
        /* Queued, never waited for: the host runs ahead to the next batch
         * while the GPU computes, as a trainer does. */
        status = CLI_OK;
        rc = gf_batch_wait(b, c->stream);
        if (rc == 0)
            status = compute_step(c, p, b->labels, b->count, len);
        int rr = gf_release_stream(l, b, c->stream);
        if (rc < 0 || rr < 0) {
            cli_error_msg(CMD, gf_last_error(l), rc < 0 ? rc : rr);
            return CLI_FAIL;
        }
        return status;
    }
#endif
    status = compute_step(c, p, b->labels, b->count, len);
    if (status != CLI_OK) {
        gf_release(l, b);
        return status;
    }
    rc = gf_release(l, b);
    if (rc < 0) {
        cli_error(CMD, "gf_release: %s", gf_strerror(rc));
        return CLI_FAIL;
    }
    return CLI_OK;
}

/* A timing mark for the steady-state window: host time on the CPU, an
 * event on the consumer's stream on CUDA (it completes when the work
 * queued before it has run). */
int mark(consumer *c, int end, double *t)
{
    *t = cli_now();
#if GF_CLI_HAVE_CUDA
    if (c->device == GF_DEVICE_CUDA &&
        cli_cuda_event_record(end ? c->ev_end : c->ev_start, c->stream) < 0) {
        cli_error(CMD, "CUDA: %s", cli_cuda_error());
        return CLI_FAIL;
    }
#else
    (void)c;
    (void)end;
#endif
    return CLI_OK;
}

/* Waits for the work queued on the consumer's stream (the one host wait
 * of a CUDA run) and, with timed, measures the window in ms. */
int window_ms(consumer *c, int timed, double t_start, double t_end, double *ms)
{
    *ms = (t_end - t_start) * 1e3;
#if GF_CLI_HAVE_CUDA
    if (c->device == GF_DEVICE_CUDA &&
        (cli_cuda_stream_sync(c->stream) < 0 ||
         (timed && cli_cuda_event_ms(c->ev_start, c->ev_end, ms) < 0))) {
        cli_error(CMD, "CUDA: %s", cli_cuda_error());
        return CLI_FAIL;
    }
#else
    (void)c;
    (void)timed;
#endif
    return CLI_OK;
}

/* ---- the loader runner --------------------------------------------------- */


/* The verdict's figures on the CPU path are medians over chunks of
 * CHUNK_BATCHES batches (or replays) of the steady-state window, not the
 * window's mean: on a machine shared with other work, a burst of
 * contention slows a chunk or two and would otherwise move the whole
 * figure (and the verdict) by as much as its own 10% margin. With fewer
 * than MIN_CHUNKS chunks the mean is used. */
#define CHUNK_BATCHES 8
#define MIN_CHUNKS 3


int marks_push(marks *m, double t, uint64_t b)
{
    if (m->n == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 256;
        double *nt = realloc(m->t, cap * sizeof *nt);
        if (nt)
            m->t = nt;
        uint64_t *nb = realloc(m->b, cap * sizeof *nb);
        if (nb)
            m->b = nb;
        if (!nt || !nb)
            return -1;
        m->cap = cap;
    }
    m->t[m->n] = t;
    m->b[m->n++] = b;
    return 0;
}

void marks_free(marks *m)
{
    free(m->t);
    free(m->b);
    memset(m, 0, sizeof *m);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of the chunks' ms per batch, or mean_ms with too few. A
 * short tail joins the last chunk. */
double marks_median_ms(const marks *m, double mean_ms)
{
    double v[4096];
    size_t k = 0, i = 0;
    if (m->n < 2)
        return mean_ms;
    while (i + 1 < m->n && k < sizeof v / sizeof *v) {
        size_t j = i + 1;
        while (j + 1 < m->n && m->b[j] - m->b[i] < CHUNK_BATCHES)
            j++;
        if (m->b[m->n - 1] - m->b[j] < CHUNK_BATCHES)
            j = m->n - 1;
        v[k++] = (m->t[j] - m->t[i]) * 1e3 / (double)(m->b[j] - m->b[i]);
        i = j;
    }
    if (k < MIN_CHUNKS)
        return mean_ms;
    qsort(v, k, sizeof *v, cmp_double);
    return k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
}

void bench_sources_free(bench_sources *s)
{
    for (int k = 0; k < s->n; k++)
        free((char *)s->v[k].data);
    free(s->v);
    memset(s, 0, sizeof *s);
}

void loop_result_free(loop_result *r)
{
    bench_sources_free(&r->src);
}

/* l's sources into *s, their names copied. Returns CLI_OK or CLI_FAIL,
 * message printed. */
static int sources_take(gf_loader *l, bench_sources *s)
{
    int n = gf_sources(l);
    if (n < 1)
        return CLI_OK;
    if (!(s->v = calloc((size_t)n, sizeof *s->v))) {
        cli_error(CMD, "out of memory");
        return CLI_FAIL;
    }
    for (; s->n < n; s->n++) {
        gf_source_stats *st = &s->v[s->n];
        if (gf_source_stats_get(l, s->n, st) < 0)
            break;
        if (!(st->data = strdup(st->data ? st->data : ""))) {
            cli_error(CMD, "out of memory");
            return CLI_FAIL;
        }
    }
    return CLI_OK;
}

void print_sources_human(const bench_sources *s)
{
    if (s->n < 2)
        return;
    for (int k = 0; k < s->n; k++) {
        const gf_source_stats *st = &s->v[k];
        printf("  source %d ", k);
        cli_put_quoted(stdout, st->data);
        printf(": %" PRIu64 " samples, %.1f%% (weight %.1f%%), waited %.2f s\n", st->samples,
               100 * st->share, 100 * st->weight, st->wait_s);
    }
}

void json_sources(cli_json *j, const bench_sources *s)
{
    cli_json_key(j, "sources");
    cli_json_array(j);
    for (int k = 0; k < s->n; k++) {
        const gf_source_stats *st = &s->v[k];
        cli_json_object(j);
        cli_json_kstr(j, "data", st->data);
        cli_json_knum(j, "weight", st->weight);
        cli_json_kuint(j, "size", st->size);
        cli_json_kuint(j, "first_index", st->first_index);
        cli_json_kint(j, "label_offset", st->label_offset);
        cli_json_kint(j, "n_classes", st->n_classes);
        cli_json_kuint(j, "samples", st->samples);
        cli_json_knum(j, "share", st->share);
        cli_json_knum(j, "wait_s", st->wait_s);
        cli_json_kuint(j, "epoch", st->epoch);
        cli_json_object_end(j);
    }
    cli_json_array_end(j);
}

/* Batches the loader will deliver: the requested epochs, capped by the
 * limit. */
static uint64_t planned_batches(const bench_opts *o, const gf_stats *st)
{
    uint64_t per_epoch = o->s.drop_last ? st->epoch_samples / (uint64_t)st->batch_size
                                        : (st->epoch_samples + (uint64_t)st->batch_size - 1) /
                                              (uint64_t)st->batch_size;
    uint64_t n = o->s.epochs ? per_epoch * o->s.epochs : UINT64_MAX;
    return o->max_batches && o->max_batches < n ? o->max_batches : n;
}

/* Opens a loader with o's settings and drains it: every batch of the
 * requested epochs, or o->max_batches. c == NULL: each batch is released
 * at once (gf_release), nothing else is timed. With a consumer, each batch
 * goes through consume() and the steady state is timed: the window opens
 * before batch `skip` (= prefetch depth, at most half the run: the ring
 * fills during the first batches) and closes after the last full batch
 * (a short last batch would make a batch look cheaper).
 * Returns CLI_OK or an exit status, message printed. */
int run_loader(const bench_opts *o, consumer *c, loop_result *r)
{
    marks mk = {0};
    gf_loader *l = NULL;
    uint64_t planned, skip = 0;
    double t0, t_start = 0, t_end = 0;
    int rc, status = CLI_OK;

    memset(r, 0, sizeof *r);
    rc = gf_open(&l, &o->s);
    if (rc < 0) {
        const char *msg = l ? gf_last_error(l) : "";
        if (*msg)
            cli_error(CMD, "%s", msg); /* the loader's message names the file */
        else
            cli_error(CMD, "%s: %s", o->s.data, gf_strerror(rc));
        gf_close(&l);
        return CLI_USAGE;
    }
    cli_warn_damaged_shards(CMD, l, o->s.data);
    gf_get_stats(l, &r->st);
    planned = planned_batches(o, &r->st);
    if (c) {
        if ((status = consumer_bind(c, &r->st)) != CLI_OK)
            goto out;
        skip = (uint64_t)r->st.prefetch_depth;
        if (skip > planned / 2)
            skip = planned / 2;
    }
    t0 = cli_now();
    while (r->batches < planned) {
        gf_batch *b;
        if (c && r->batches == skip && (status = mark(c, 0, &t_start)) != CLI_OK)
            goto out;
        rc = gf_next(l, &b);
        if (rc == GF_EOF)
            break;
        if (rc < 0) {
            cli_error_msg(CMD, gf_last_error(l), rc);
            status = CLI_FAIL;
            goto out;
        }
        r->batches++;
        if (!c) {
            gf_release(l, b);
            continue;
        }
        if (!c->labels && b->count == r->st.batch_size) {
            /* The batch the compute-alone pass replays: its labels, and
             * on the CPU its bytes (on CUDA the spin needs none, and the
             * model replays a device buffer of the same shape). */
            size_t len;
            const void *p = batch_bytes(b, &len);
            int cpu = c->device == GF_DEVICE_CPU;
            c->labels = malloc((size_t)b->count * sizeof *c->labels);
            if (cpu)
                c->cache = malloc(len ? len : 1);
            if (!c->labels || (cpu && !c->cache)) {
                gf_release(l, b);
                cli_error(CMD, "out of memory");
                status = CLI_FAIL;
                goto out;
            }
            memcpy(c->labels, b->labels, (size_t)b->count * sizeof *c->labels);
            if (cpu)
                memcpy(c->cache, p, len);
            c->cache_len = len;
            c->cache_count = b->count;
        }
        int full = b->count == r->st.batch_size;
        if ((status = consume(c, l, b)) != CLI_OK)
            goto out;
        if (r->batches > skip && full) {
            if ((status = mark(c, 1, &t_end)) != CLI_OK)
                goto out;
            r->timed = r->batches - skip;
            if ((mk.n == 0 && marks_push(&mk, t_start, 0) < 0) ||
                marks_push(&mk, t_end, r->timed) < 0) {
                cli_error(CMD, "out of memory");
                status = CLI_FAIL;
                goto out;
            }
        }
    }
    if (c) {
        if ((status = window_ms(c, r->timed > 0, t_start, t_end, &r->batch_ms)) != CLI_OK)
            goto out;
        r->batch_ms = r->timed > 0 ? r->batch_ms / (double)r->timed : 0;
        r->robust_ms = c->device == GF_DEVICE_CPU ? marks_median_ms(&mk, r->batch_ms)
                                                   : r->batch_ms;
        r->skipped = skip;
    }
    r->elapsed_s = cli_now() - t0;
    gf_get_stats(l, &r->st);
    status = sources_take(l, &r->src);
out:
    marks_free(&mk);
    gf_close(&l);
    return status;
}

