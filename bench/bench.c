/*
 * gpufeed bench: measures the pipeline. Three modes:
 *
 *   (default)     the verdict: per setting (lists of threads, depths and
 *                 batch sizes sweep every combination) the --overlap
 *                 figures without the synchronous loop, input_ms /
 *                 compute_ms read as input-bound, compute-bound or
 *                 balanced, and a recommendation in words; the compute
 *                 is --compute-ms or the demo model's step (model.h).
 *                 --csv and --plot (plot.c) write the rows.
 *
 *   --input-only  the loader alone, no consumer work: images/s from the
 *                 first gf_next() to GF_EOF, and, in the same run on the
 *                 same files, the single-thread decode+transform rate
 *                 (one gf_decoder over files already in memory), so
 *                 efficiency = images/s / (threads x single-thread rate)
 *                 says how well the loader turns cores into throughput.
 *
 *   --overlap     whether prefetching hides the input behind the compute:
 *                 a consumer runs --compute-ms of "compute" per batch (a
 *                 spin kernel on its own CUDA stream, or a busy loop on
 *                 the CPU). One run, same files: the loader alone
 *                 (input_ms), the compute alone on one cached batch
 *                 (compute_ms), both together (step_ms), and the naive
 *                 synchronous loop on one thread (sync_step_ms).
 *                 Perfect overlap: step_ms = max(input_ms, compute_ms).
 *
 * Both drive the loader through one runner (run_loader) with an optional
 * consumer. The OS page cache is not warmed here: run twice and read
 * page_cache_resident (measured with mincore() before the run on the
 * sampled files) to see whether a run read from disk or from memory.
 *
 * The sampled files are the library's own: a second, minimal loader on
 * the same data (one thread, one 16x16 slot, CPU) is opened only for its
 * index, and the samples are picked by index and read with
 * gf_read_sample(), so folders, list files and tar shards are handled
 * alike and the CLI never re-implements the index. Its one prefetched
 * sample is the only read before the probe. For tar shards the probe is
 * not taken (page_cache_resident is null): members are ranges of shared
 * files, and the library does not hand out their offsets.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <unistd.h>

#include "cliutil.h"
#include "gpufeed.h"
#include "model.h"

#define CMD "bench"

/* Files decoded for the single-thread reference rate, and how long to
 * repeat them: enough samples to average over image content, enough time
 * to average over the clock and the scheduler. */
#define ST_MAX_FILES 200
#define ST_MIN_SECONDS 1.0

/* --overlap: replays of the cached batch for compute_ms (at least), and
 * the synchronous loop's bounds (it is slow by design): at most
 * SYNC_MAX_BATCHES timed batches, and no more once SYNC_SECONDS have
 * passed and SYNC_MIN_BATCHES are done. */
#define COMPUTE_MIN_REPLAYS 20
#define SYNC_MAX_BATCHES 20
#define SYNC_MIN_BATCHES 3
#define SYNC_SECONDS 3.0

#ifndef GF_CLI_HAVE_CUDA
#define GF_CLI_HAVE_CUDA 0
#endif

/* The verdict: input_factor = input_ms / compute_ms above INPUT_BOUND is
 * input-bound, below COMPUTE_BOUND compute-bound, balanced between (10%
 * either way: about the run-to-run noise of a shared machine). A sweep
 * recommends the cheapest setting within NEAR_BEST of the best images/s. */
#define INPUT_BOUND 1.1
#define COMPUTE_BOUND 0.9
#define NEAR_BEST 0.95
/* Values per swept option (--threads 1,2,4). */
#define SWEEP_MAX 16

typedef struct bench_opts {
    gf_settings s;
    int input_only;
    int overlap;
    double compute_ms;    /* --overlap and the verdict: per batch */
    uint64_t max_batches; /* 0: every batch of the requested epochs */
    int json;
    /* The verdict (the default mode): the values swept, one each unless
     * lists were given; threads 0 = the loader's default. */
    int threads[SWEEP_MAX], depths[SWEEP_MAX], batches[SWEEP_MAX];
    int n_threads, n_depths, n_batches;
    int model_width;      /* > 0: the compute is the demo model's step */
    const char *csv, *plot;
} bench_opts;

/* What an input-only run measured. */
typedef struct input_result {
    gf_stats st;
    double elapsed_s;     /* first gf_next() .. GF_EOF */
    double images_per_s;
    double stall_fraction;
    double st_images_per_s; /* single thread decode+transform */
    size_t st_files;        /* files in the single-thread sample */
    uint64_t st_decodes;
    double efficiency;
    double page_cache;      /* fraction resident before the run, -1 unknown */
    int shards;             /* tar shards in the source (no page-cache probe) */
    uint64_t peak_rss;
} input_result;

static const char *const io_names[] = {"auto", "uring", "posix", NULL};
static const char *const decoder_names[] = {"auto", "stb", "turbo", NULL};
static const char *const transform_names[] = {"train", "eval", NULL};
static const char *const on_error_names[] = {"skip", "fail", NULL};
/* In enum order (gf_device, gf_dtype, gf_layout). */
static const char *const device_names[] = {"auto", "cuda", "cpu", NULL};
static const char *const dtype_names[] = {"u8", "f32", "f16", "bf16", NULL};
static const char *const layout_names[] = {"nhwc", "nchw", NULL};
static const char *const copy_stream_names[] = {"one", "slot", NULL};

static const char *reader_name(gf_io io)
{
    return io == GF_IO_URING ? "io_uring" : io == GF_IO_POSIX ? "posix" : "auto";
}

static const char *decoder_used(const gf_stats *st)
{
    if (st->decoded_turbo && st->decoded_stb)
        return "mixed";
    if (st->decoded_turbo)
        return "turbo";
    if (st->decoded_stb)
        return "stb";
    return "none";
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpufeed bench --data DIR (--compute-ms X | --model-width W) [options]\n"
            "       gpufeed bench --input-only --data DIR [options]\n"
            "       gpufeed bench --overlap --compute-ms X --data DIR [options]\n"
            "\n"
            "With neither mode, bench gives a verdict: it measures the loader alone\n"
            "(input), the compute alone on a cached batch (compute) and both together,\n"
            "and says whether the job is input-bound (input / compute > 1.1),\n"
            "compute-bound (< 0.9) or balanced, the share of device time lost to input\n"
            "and what to change. The compute is X ms per batch (a spin kernel on CUDA,\n"
            "a busy loop on the CPU) or the demo model's training step at width W\n"
            "(float32 NCHW input). --threads, --prefetch-depth and --batch-size take\n"
            "lists (1,2,4): every combination is measured, the best and the smallest\n"
            "setting within 5%% of it are marked, and the recommendation is that one.\n"
            "\n"
            "--input-only runs the loader with no consumer work and reports images/s,\n"
            "the single-thread decode+transform rate on the same files, the loader's\n"
            "efficiency (images/s / (threads x single-thread rate)), the input stall\n"
            "and resource use. Run it twice: the first run may read from disk; the\n"
            "report shows how much of the data set was in the page cache.\n"
            "\n"
            "--overlap runs X ms of compute per batch (a spin kernel on CUDA, a busy\n"
            "loop on the CPU) and measures, on the same files: the loader alone\n"
            "(input), the compute alone (compute), both with prefetching (step) and\n"
            "the synchronous one-thread loop (read, decode, copy, compute). Perfect\n"
            "overlap: step = max(input, compute).\n"
            "\n"
            "options:\n"
            "  --input-only          measure the input pipeline alone\n"
            "  --overlap             measure how well input and compute overlap\n"
            "  --compute-ms X        compute per batch, in ms (--overlap: required)\n"
            "  --model-width W       the compute is the demo model's step (default mode)\n"
            "  --csv FILE            default mode: the rows as CSV\n"
            "  --plot FILE.svg       default mode: images/s and device utilization\n"
            "                        against prefetch depth, a line per thread count\n"
            "  --batches N           stop after N batches (default: every epoch)\n"
            "  --data DIR            ImageFolder directory, list file or tar shards\n"
            "                        ('dir/train-{000000..000127}.tar', 'a.tar,b.tar')\n"
            "                        (required)\n"
            "  --threads N[,N...]    decode threads (default: cores - 1, at least 1)\n"
            "  --prefetch-depth D[,D...]  batch slots in the ring (default 4)\n"
            "  --batch-size B[,B...] samples per batch (default 64)\n"
            "  --image-size S        output size, S or WxH (default 224)\n"
            "  --epochs E            epochs (default 1)\n"
            "  --device D            auto|cuda|cpu (default auto: CUDA if there is a GPU)\n"
            "  --dtype T             u8|f32|f16|bf16 (default u8)\n"
            "  --layout L            nhwc|nchw (default nhwc; u8 is always nhwc)\n"
            "  --copy-streams S      CUDA: one|slot, one copy stream for the ring or one\n"
            "                        per slot (default one)\n"
            "  --io MODE             auto|uring|posix (default auto)\n"
            "  --decoder D           auto|stb|turbo (default auto)\n"
            "  --transform T         train|eval (default train)\n"
            "  --on-error E          skip|fail (default skip)\n"
            "  --seed S              seed (default 0)\n"
            "  --autotune            let the loader add threads and depth while it runs\n"
            "                        (from --threads, up to cores - 1; depth up to\n"
            "                        --prefetch-depth) and report what it chose\n"
            "  --json                print one JSON object\n"
            "  -h, --help            this text\n"
            "A sweep shows a progress line on stderr when it is a terminal.\n");
}

/* Up to ST_MAX_FILES samples spread evenly over the data set: their
 * indices, and once read (sample_set_read), their encoded bytes. */
typedef struct sample_set {
    gf_loader *index;  /* the minimal loader whose index they come from */
    uint64_t *ids;     /* data set indices */
    uint8_t **data;    /* NULL until read, or if the read failed */
    size_t *len;
    size_t n;
    int shards;        /* tar shards in the source */
} sample_set;

static void sample_set_free(sample_set *ss)
{
    for (size_t i = 0; i < ss->n; i++)
        gf_free(ss->data[i]);
    free(ss->data);
    free(ss->len);
    free(ss->ids);
    gf_close(&ss->index);
    memset(ss, 0, sizeof *ss);
}

/* Opens the index loader on s->data and picks the samples. Returns CLI_OK
 * or an exit status, message printed. */
static int sample_set_open(const gf_settings *s, sample_set *ss)
{
    gf_stats st;
    int rc = cli_open_index(s->data, &ss->index);
    if (rc < 0) {
        const char *msg = ss->index ? gf_last_error(ss->index) : "";
        if (*msg)
            cli_error(CMD, "%s", msg); /* the loader's message names the file */
        else
            cli_error(CMD, "%s: %s", s->data, gf_strerror(rc));
        return CLI_USAGE;
    }
    gf_get_stats(ss->index, &st);
    uint64_t total = st.dataset_samples;
    size_t n = total < ST_MAX_FILES ? (size_t)total : ST_MAX_FILES;
    ss->shards = st.shards > 0;
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
static double sample_set_page_cache(const sample_set *ss, const char *data)
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
        const char *rel = gf_sample_path(ss->index, ss->ids[k]);
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

/* Reads the sampled samples' bytes (gf_read_sample); a sample that cannot
 * be read stays NULL. */
static void sample_set_read(sample_set *ss)
{
    for (size_t i = 0; i < ss->n; i++) {
        void *p;
        if (ss->data[i] || gf_read_sample(ss->index, ss->ids[i], &p, &ss->len[i], NULL, 0) < 0)
            continue;
        ss->data[i] = p;
    }
}

/* Times one gf_decoder (what a loader thread runs) over the sampled
 * samples in memory (read first with gf_read_sample, untimed), repeated
 * until at least ST_MIN_SECONDS have passed. Samples that cannot be read
 * or decoded are left out of the rate. */
static int single_thread_rate(const gf_settings *s, sample_set *ss, input_result *r)
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

/* What --overlap runs per batch, where the batches are. ms == 0: nothing,
 * the batch is released at once (on CUDA, ordered after its copy on the
 * consumer's stream, so timing the stream times the input). */
typedef struct consumer {
    double ms;
    gfm_model *model;   /* --model-width: the demo model, made once */
    int use_model;      /* the compute is a model step (not ms of spin) */
    int bound;          /* device known, CUDA objects made */
    gf_device device;   /* GF_DEVICE_CPU or GF_DEVICE_CUDA: the loader's pick */
    void *stream;       /* CUDA: the trainer's stream */
    void *ev_start, *ev_end; /* CUDA: the steady-state window */
    uint8_t *cache;     /* CPU: a copy of one delivered batch */
    size_t cache_len;
    int32_t *labels;    /* that batch's labels (host), for the model */
    int cache_count;    /* its samples */
    void *dev_x;        /* CUDA + model: the replayed batch (device) */
} consumer;

static const char *where(gf_device d)
{
    return d == GF_DEVICE_CUDA ? "cuda" : "cpu";
}

/* The CPU stand-in for a training step: reads one byte per 4 KiB of the
 * batch (through volatile, so it happens), then spins on the monotonic
 * clock until ms have passed since the start. */
static void cpu_compute(double ms, const void *data, size_t len)
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
static void consumer_drop_cache(consumer *c)
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

static void consumer_free(consumer *c)
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
static int compute_step(consumer *c, const void *x, const int32_t *labels, int n, size_t len)
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
            const char *msg = gf_last_error(l);
            cli_error(CMD, "%s", *msg ? msg : gf_strerror(rc < 0 ? rc : rr));
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
static int mark(consumer *c, int end, double *t)
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
static int window_ms(consumer *c, int timed, double t_start, double t_end, double *ms)
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

typedef struct loop_result {
    gf_stats st;
    uint64_t batches;       /* delivered */
    double elapsed_s;       /* first gf_next() .. GF_EOF or the limit (and,
                               on CUDA, the queued work done) */
    uint64_t skipped;       /* batches before the steady-state window */
    uint64_t timed;         /* batches in the window */
    double batch_ms;        /* window / timed */
    double robust_ms;       /* CPU: the median over chunks of the window
                               (marks_ms); CUDA: batch_ms */
} loop_result;

/* The verdict's figures on the CPU path are medians over chunks of
 * CHUNK_BATCHES batches (or replays) of the steady-state window, not the
 * window's mean: on a machine shared with other work, a burst of
 * contention slows a chunk or two and would otherwise move the whole
 * figure (and the verdict) by as much as its own 10% margin. With fewer
 * than MIN_CHUNKS chunks the mean is used. */
#define CHUNK_BATCHES 8
#define MIN_CHUNKS 3

/* Host-time marks of a window: t[i] after b[i] batches (or replays). */
typedef struct marks {
    double *t;
    uint64_t *b;
    size_t n, cap;
} marks;

static int marks_push(marks *m, double t, uint64_t b)
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

static void marks_free(marks *m)
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
static double marks_median_ms(const marks *m, double mean_ms)
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
static int run_loader(const bench_opts *o, consumer *c, loop_result *r)
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
            const char *msg = gf_last_error(l);
            cli_error(CMD, "%s", *msg ? msg : gf_strerror(rc));
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
out:
    marks_free(&mk);
    gf_close(&l);
    return status;
}

/* ---- input-only ------------------------------------------------------------ */

/* Up to ST_MAX_FILES samples spread evenly over the data set (the
 * library's index), with the page-cache probe on those. Returns CLI_OK or
 * an exit status, message printed. */
static int sample_files(const bench_opts *o, sample_set *ss, double *page_cache)
{
    int status = sample_set_open(&o->s, ss);
    if (status != CLI_OK)
        return status;
    *page_cache = sample_set_page_cache(ss, o->s.data);
    return CLI_OK;
}

static int run_input_only(const bench_opts *o, input_result *r)
{
    sample_set ss = {0};
    loop_result lr;
    int status;

    memset(r, 0, sizeof *r);
    if ((status = sample_files(o, &ss, &r->page_cache)) != CLI_OK)
        goto out;
    r->shards = ss.shards;
    if ((status = run_loader(o, NULL, &lr)) != CLI_OK)
        goto out;
    r->st = lr.st;
    r->elapsed_s = lr.elapsed_s;
    r->images_per_s = r->elapsed_s > 0 ? (double)r->st.samples / r->elapsed_s : 0;
    r->stall_fraction = r->elapsed_s > 0 ? r->st.wait_s / r->elapsed_s : 0;
    if (r->stall_fraction > 1)
        r->stall_fraction = 1;

    /* After the loader is closed, so its threads do not compete. */
    if (single_thread_rate(&o->s, &ss, r) < 0) {
        cli_error(CMD, "out of memory");
        status = CLI_FAIL;
        goto out;
    }
    r->efficiency = r->st_images_per_s > 0 && r->st.threads > 0
                        ? r->images_per_s / ((double)r->st.threads * r->st_images_per_s)
                        : 0;
    r->peak_rss = cli_peak_rss_bytes();
out:
    sample_set_free(&ss);
    return status;
}

/* ---- overlap --------------------------------------------------------------- */

typedef struct overlap_result {
    loop_result input;   /* the loader alone */
    loop_result step;    /* loader + compute */
    gf_device device;
    double input_ms, compute_ms, step_ms, sync_step_ms;
    double overlap_ratio;    /* step / max(input, compute) */
    double saved;            /* 1 - step / sync */
    double step_stall;       /* wait_s / elapsed of the step run */
    int compute_replays;
    int sync_batches;        /* timed, after one untimed warm-up batch */
    uint64_t sync_errors;    /* samples the synchronous loop could not decode */
    double page_cache;
    int shards;              /* tar shards in the source (no page-cache probe) */
    uint64_t peak_rss;
} overlap_result;

/* The compute alone, replayed n times on one cached batch: ms per step.
 * The model gets one untimed step first (its buffers are made on the
 * first). On CUDA the model's batch is a device buffer of the cached
 * batch's shape, zero-filled: the model's time does not depend on the
 * pixel values, and the API has no device-to-device copy to keep one. */
static int run_compute_alone(consumer *c, int n, double *ms, double *robust_ms)
{
    double t0, t1;
    int status;
    marks mk = {0};
    const void *x = c->cache;
#if GF_CLI_HAVE_CUDA
    if (c->device == GF_DEVICE_CUDA && c->use_model) {
        if (!c->dev_x) {
            void *zero = calloc(c->cache_len ? c->cache_len : 1, 1);
            if (!zero) {
                cli_error(CMD, "out of memory");
                return CLI_FAIL;
            }
            if (cli_cuda_malloc(&c->dev_x, c->cache_len) < 0 ||
                cli_cuda_memcpy_h2d(c->dev_x, zero, c->cache_len) < 0) {
                free(zero);
                cli_error(CMD, "CUDA: %s", cli_cuda_error());
                return CLI_FAIL;
            }
            free(zero);
        }
        x = c->dev_x;
    }
#endif
    if (c->use_model &&
        (status = compute_step(c, x, c->labels, c->cache_count, c->cache_len)) != CLI_OK)
        return status;
    if ((status = mark(c, 0, &t0)) != CLI_OK)
        return status;
    for (int i = 0; i < n; i++) {
        if ((status = compute_step(c, x, c->labels, c->cache_count, c->cache_len)) != CLI_OK)
            goto out;
        /* The CPU's steps run here and now: each one's end is a mark. */
        if (robust_ms && c->device == GF_DEVICE_CPU &&
            ((i == 0 && marks_push(&mk, t0, 0) < 0) ||
             marks_push(&mk, cli_now(), (uint64_t)i + 1) < 0)) {
            cli_error(CMD, "out of memory");
            status = CLI_FAIL;
            goto out;
        }
    }
    if ((status = mark(c, 1, &t1)) != CLI_OK || (status = window_ms(c, 1, t0, t1, ms)) != CLI_OK)
        goto out;
    *ms /= n;
    if (robust_ms)
        *robust_ms = marks_median_ms(&mk, *ms);
out:
    marks_free(&mk);
    return status;
}

/* The loop the articles warn against, on this thread alone: per batch,
 * read each sample (gf_read_sample: one pread of its file or member),
 * decode + transform it (gf_decoder, the
 * loader's transform), copy the batch (CUDA: cudaMemcpy from pageable
 * memory; CPU: memcpy into a second buffer), compute, wait for it. The
 * files are the sample set's, in turn. The batch is the decoder's uint8
 * pixels; any dtype conversion is left out (in the loader it is part of
 * input_ms), so this baseline errs on the fast side. Batch 0 is an
 * untimed warm-up. */
static int run_sync(const bench_opts *o, consumer *c, const sample_set *ss, uint64_t max_batches,
                    overlap_result *r)
{
    size_t cell = (size_t)o->s.height * (size_t)o->s.width *
                  (size_t)(o->s.channels ? o->s.channels : 3);
    size_t bytes = cell * (size_t)o->s.batch_size;
    uint8_t *host = malloc(bytes), *dst = NULL;
    uint64_t *batch_ids = malloc((size_t)o->s.batch_size * sizeof *batch_ids);
    gf_decoder *dec = NULL;
    double t0 = 0;
    uint64_t k, next = 0;
    int status = CLI_OK;

    if (!host || !batch_ids || gf_decoder_open(&dec, &o->s) < 0) {
        cli_error(CMD, "out of memory");
        status = CLI_FAIL;
        goto out;
    }
#if GF_CLI_HAVE_CUDA
    if (c->device == GF_DEVICE_CUDA && cli_cuda_malloc((void **)&dst, bytes) < 0) {
        cli_error(CMD, "CUDA: %s", cli_cuda_error());
        status = CLI_FAIL;
        goto out;
    }
#endif
    if (c->device != GF_DEVICE_CUDA && (dst = malloc(bytes)) == NULL) {
        cli_error(CMD, "out of memory");
        status = CLI_FAIL;
        goto out;
    }
    if (max_batches > SYNC_MAX_BATCHES)
        max_batches = SYNC_MAX_BATCHES;
    for (k = 0; k <= max_batches; k++) {
        if (k == 1)
            t0 = cli_now();
        else if (k > SYNC_MIN_BATCHES && cli_now() - t0 >= SYNC_SECONDS)
            break;
        for (int i = 0; i < o->s.batch_size; i++, next++)
            batch_ids[i] = ss->ids[next % ss->n];
        cli_read_decode(ss->index, dec, batch_ids, o->s.batch_size, 0, host, cell,
                        &r->sync_errors);
#if GF_CLI_HAVE_CUDA
        if (c->device == GF_DEVICE_CUDA) {
            if (cli_cuda_memcpy_h2d(dst, host, bytes) < 0 ||
                (c->ms > 0 && cli_cuda_spin(c->ms, c->stream) < 0) ||
                cli_cuda_stream_sync(c->stream) < 0) {
                cli_error(CMD, "CUDA: %s", cli_cuda_error());
                status = CLI_FAIL;
                goto out;
            }
            continue;
        }
#endif
        memcpy(dst, host, bytes);
        cpu_compute(c->ms, dst, bytes);
    }
    r->sync_batches = (int)(k - 1);
    r->sync_step_ms = r->sync_batches > 0 ? (cli_now() - t0) * 1e3 / r->sync_batches : 0;
out:
#if GF_CLI_HAVE_CUDA
    if (c->device == GF_DEVICE_CUDA) {
        cli_cuda_free(dst);
        dst = NULL;
    }
#endif
    free(dst);
    free(host);
    free(batch_ids);
    gf_decoder_close(&dec);
    return status;
}

static int run_overlap(const bench_opts *o, overlap_result *r)
{
    sample_set ss = {0};
    consumer c = {0};
    int status;

    memset(r, 0, sizeof *r);
    if ((status = sample_files(o, &ss, &r->page_cache)) != CLI_OK)
        goto out;
    r->shards = ss.shards;
    if (ss.n == 0) {
        cli_error(CMD, "%s: no files", o->s.data);
        status = CLI_USAGE;
        goto out;
    }
    /* 1. The loader alone (this also settles where batches are and keeps
     * one batch for 2). */
    if ((status = run_loader(o, &c, &r->input)) != CLI_OK)
        goto out;
    if (r->input.timed == 0) {
        cli_error(CMD, "too few full batches to time (%" PRIu64 " delivered): "
                       "a larger data set, --epochs or a smaller --batch-size",
                  r->input.batches);
        status = CLI_USAGE;
        goto out;
    }
    r->device = c.device;
    r->input_ms = r->input.batch_ms;
    /* 2. The compute alone. */
    c.ms = o->compute_ms;
    r->compute_replays = r->input.timed > COMPUTE_MIN_REPLAYS ? (int)r->input.timed
                                                                : COMPUTE_MIN_REPLAYS;
    if ((status = run_compute_alone(&c, r->compute_replays, &r->compute_ms, NULL)) != CLI_OK)
        goto out;
    /* 3. Both. */
    if ((status = run_loader(o, &c, &r->step)) != CLI_OK)
        goto out;
    r->step_ms = r->step.batch_ms;
    r->step_stall = r->step.elapsed_s > 0 ? r->step.st.wait_s / r->step.elapsed_s : 0;
    /* 4. The synchronous loop, as many batches as the step run timed. */
    if ((status = run_sync(o, &c, &ss, r->step.timed, r)) != CLI_OK)
        goto out;

    double m = r->input_ms > r->compute_ms ? r->input_ms : r->compute_ms;
    r->overlap_ratio = m > 0 ? r->step_ms / m : 0;
    r->saved = r->sync_step_ms > 0 ? 1 - r->step_ms / r->sync_step_ms : 0;
    r->peak_rss = cli_peak_rss_bytes();
out:
    consumer_free(&c);
    sample_set_free(&ss);
    return status;
}

/* ---- the verdict (default mode) -------------------------------------------- */

enum { V_INPUT, V_COMPUTE, V_BALANCED };
static const char *const verdict_names[] = {"input-bound", "compute-bound", "balanced"};

/* One setting of a sweep (or the only one), measured as --overlap does
 * without the synchronous loop. */
typedef struct verdict_row {
    int threads, depth, batch;       /* as the loader ran them */
    loop_result input, step;
    int compute_replays;
    double input_ms, compute_ms, step_ms;
    double images_per_s;             /* batch / step_ms, steady state */
    double stall;                    /* wait_s / elapsed of the step run */
    double utilization;              /* compute_ms / step_ms, at most 1 */
    double lost;                     /* 1 - compute_ms / step_ms, at least 0 */
    double factor;                   /* input_ms / compute_ms */
    double decode_busy, read_busy;   /* per thread, of the step run's wall */
    int verdict;
    uint64_t pinned_bytes, ring_bytes;
} verdict_row;

typedef struct verdict_result {
    verdict_row *rows;
    int n;
    gf_device device;
    int device_id;
    int best, rec;                   /* rows: most images/s; recommended */
    int cores;
    char cpu[128];
    double page_cache;
    int shards;
    uint64_t peak_rss;
    char advice[1024];               /* the recommendation, in words */
} verdict_result;

/* A TTY on stderr gets one updating progress line; otherwise nothing. */
static void progress(int on, int k, int n, const bench_opts *o)
{
    if (!on)
        return;
    if (k < n)
        fprintf(stderr, "\r  bench %d/%d: --threads %d --prefetch-depth %d --batch-size %d\033[K",
                k + 1, n, o->s.threads, o->s.prefetch_depth, o->s.batch_size);
    else
        fputs("\r\033[K", stderr);
    fflush(stderr);
}

/* Makes the demo model for the loader's delivery (f32 NCHW, o's size,
 * the data set's classes) on the consumer's device. */
static int make_model(const bench_opts *o, consumer *c, const gf_stats *st)
{
    gfm_config mc;
    char why[256] = "";
    memset(&mc, 0, sizeof mc);
    mc.in_c = o->s.channels ? o->s.channels : 3;
    mc.in_h = o->s.height;
    mc.in_w = o->s.width;
    mc.classes = st->classes > 0 ? st->classes : 1;
    mc.width = o->model_width;
    mc.seed = o->s.seed;
    mc.lr = 0.05f;
    mc.momentum = 0.9f;
    mc.weight_decay = 5e-4f;
    mc.device = c->device == GF_DEVICE_CUDA ? GFM_CUDA : GFM_CPU;
    mc.device_id = st->device_id < 0 ? 0 : st->device_id;
    if (gfm_create(&c->model, &mc, why, sizeof why) < 0) {
        cli_error(CMD, "model: %s", *why ? why : "could not be created");
        c->model = NULL;
        return CLI_USAGE;
    }
    return CLI_OK;
}

static void classify(verdict_row *r)
{
    r->factor = r->compute_ms > 0 ? r->input_ms / r->compute_ms : INFINITY;
    r->verdict = r->factor > INPUT_BOUND ? V_INPUT
                 : r->factor < COMPUTE_BOUND ? V_COMPUTE
                                             : V_BALANCED;
    r->utilization = r->step_ms > 0 ? r->compute_ms / r->step_ms : 0;
    if (r->utilization > 1)
        r->utilization = 1;
    r->lost = 1 - r->utilization;
}

/* One setting: (a) the loader alone, (b) the compute alone on the cached
 * batch, (c) both. */
static int run_row(const bench_opts *o, consumer *c, verdict_row *r)
{
    int status;
    memset(r, 0, sizeof *r);
    consumer_drop_cache(c);
    c->use_model = 0;
    c->ms = 0;
    if ((status = run_loader(o, c, &r->input)) != CLI_OK)
        return status;
    if (r->input.timed == 0 || !c->labels) {
        cli_error(CMD, "too few full batches to time (%" PRIu64 " delivered at --batch-size "
                       "%d): a larger data set, --epochs or a smaller --batch-size",
                  r->input.batches, r->input.st.batch_size);
        return CLI_USAGE;
    }
    if (o->model_width > 0 && !c->model && (status = make_model(o, c, &r->input.st)) != CLI_OK)
        return status;
    c->use_model = o->model_width > 0;
    c->ms = o->compute_ms;
    r->compute_replays = r->input.timed > COMPUTE_MIN_REPLAYS ? (int)r->input.timed
                                                                : COMPUTE_MIN_REPLAYS;
    double mean_ms;
    if ((status = run_compute_alone(c, r->compute_replays, &mean_ms, &r->compute_ms)) != CLI_OK)
        return status;
    if ((status = run_loader(o, c, &r->step)) != CLI_OK)
        return status;

    const gf_stats *st = &r->step.st;
    r->threads = st->threads;
    r->depth = st->prefetch_depth;
    r->batch = st->batch_size;
    r->input_ms = r->input.robust_ms;
    r->step_ms = r->step.robust_ms;
    r->images_per_s = r->step_ms > 0 ? r->batch * 1e3 / r->step_ms : 0;
    r->stall = r->step.elapsed_s > 0 ? st->wait_s / r->step.elapsed_s : 0;
    if (r->stall > 1)
        r->stall = 1;
    double tw = r->step.elapsed_s * (st->threads > 0 ? st->threads : 1);
    r->decode_busy = tw > 0 ? st->decode_busy_s / tw : 0;
    r->read_busy = tw > 0 ? st->read_busy_s / tw : 0;
    if (r->decode_busy > 1)
        r->decode_busy = 1;
    if (r->read_busy > 1)
        r->read_busy = 1;
    r->pinned_bytes = st->pinned_bytes;
    r->ring_bytes = st->ring_bytes;
    classify(r);
    return CLI_OK;
}

/* The recommendation for one row, from its figures (and, with a sweep,
 * the rows around it), appended to buf. */
static void advise_row(const verdict_result *v, const verdict_row *r, char *buf, size_t len)
{
    size_t n = strlen(buf);
    const char *mem = v->device == GF_DEVICE_CUDA ? "pinned memory" : "ring memory";
    /* Cores the decoders can have: on the CPU path the busy loop or the
     * model takes one. */
    int avail = v->cores - (v->device == GF_DEVICE_CUDA ? 0 : 1);
    if (avail < 1)
        avail = 1;
#define ADD(...) (n += (size_t)snprintf(buf + n, n < len ? len - n : 0, __VA_ARGS__), n = n < len ? n : len)
    switch (r->verdict) {
    case V_INPUT:
        ADD("input-bound by %.2fx: decode busy %.0f%%", r->factor, r->decode_busy * 100);
        if (r->depth == 1) {
            ADD("; prefetch depth 1 makes input and compute take turns "
                "(step %.1f ms ~ input + compute): --prefetch-depth 2 first",
                r->step_ms);
        } else if (r->decode_busy >= 0.7) {
            int need = (int)ceil(r->threads * r->factor - 1e-9);
            ADD("; --threads %d -> %d would cover it; this machine has %d core%s", r->threads,
                need, v->cores, v->cores == 1 ? "" : "s");
            if (need > avail)
                ADD(" (%d for decoding beside the %s): more threads than that will "
                    "not help; a smaller --image-size, pre-resized data or a faster "
                    "machine will",
                    avail, v->device == GF_DEVICE_CUDA ? "trainer" : "consumer's busy loop");
        } else {
            ADD(" per thread, so more threads will not help: the decoders wait for reads "
                "(read busy %.0f%%)",
                r->read_busy * 100);
            if (v->page_cache >= 0 && v->page_cache < 0.9)
                ADD("; %.0f%% of the files were in the page cache: run again warm, or "
                    "faster storage",
                    v->page_cache * 100);
        }
        break;
    case V_COMPUTE:
        if (r->depth == 1) {
            ADD("compute-bound (input %.2fx compute), but prefetch depth 1 makes input and "
                "compute take turns: the device is idle %.0f%%; --prefetch-depth 2",
                r->factor, r->lost * 100);
            break;
        }
        ADD("compute-bound (input %.2fx compute): prefetch depth 2 is enough", r->factor);
        if (r->depth > 2)
            ADD("; more only costs %s (%.1f MiB at depth %d)", mem,
                (double)(v->device == GF_DEVICE_CUDA ? r->pinned_bytes : r->ring_bytes) /
                    1048576.0,
                r->depth);
        if (r->lost > 0.05)
            ADD("; the device still waits %.0f%% (jitter): --prefetch-depth %d", r->lost * 100,
                r->depth * 2);
        {
            int need = (int)ceil(r->threads * r->factor * INPUT_BOUND - 1e-9);
            if (need < 1)
                need = 1;
            if (need < r->threads)
                ADD("; --threads %d -> %d would still keep up", r->threads, need);
        }
        break;
    default:
        ADD("balanced (input %.2fx compute): any jitter stalls the device (idle %.0f%%)",
            r->factor, r->lost * 100);
        if (r->threads < avail)
            ADD("; --threads %d -> %d gives the input headroom", r->threads, r->threads + 1);
        if (r->depth < 4)
            ADD("; --prefetch-depth 4 absorbs jitter");
        break;
    }
#undef ADD
}

static void advise(verdict_result *v)
{
    v->advice[0] = 0;
    if (v->n > 1) {
        const verdict_row *b = &v->rows[v->best], *r = &v->rows[v->rec];
        size_t n;
        if (v->best == v->rec)
            snprintf(v->advice, sizeof v->advice,
                     "best and smallest within 5%%: --threads %d --prefetch-depth %d "
                     "--batch-size %d (%.0f images/s); there: ",
                     b->threads, b->depth, b->batch, b->images_per_s);
        else
            snprintf(v->advice, sizeof v->advice,
                     "use --threads %d --prefetch-depth %d --batch-size %d: %.0f images/s, "
                     "%.1f%% below the best (--threads %d --prefetch-depth %d --batch-size %d, "
                     "%.0f) with %s; there: ",
                     r->threads, r->depth, r->batch, r->images_per_s,
                     100 * (1 - r->images_per_s / b->images_per_s), b->threads, b->depth,
                     b->batch, b->images_per_s,
                     r->threads < b->threads ? "fewer threads" : "less ring memory");
        n = strlen(v->advice);
        (void)n;
    }
    advise_row(v, &v->rows[v->rec], v->advice, sizeof v->advice);
}

/* The best row (most images/s) and the recommended one: the cheapest
 * within NEAR_BEST of the best, cheapest meaning fewest threads (cores),
 * then least ring memory (depth x batch), then the smaller batch. */
static void pick(verdict_result *v)
{
    v->best = v->rec = 0;
    for (int i = 1; i < v->n; i++)
        if (v->rows[i].images_per_s > v->rows[v->best].images_per_s)
            v->best = i;
    double floor = v->rows[v->best].images_per_s * NEAR_BEST;
    v->rec = v->best;
    for (int i = 0; i < v->n; i++) {
        const verdict_row *r = &v->rows[i], *q = &v->rows[v->rec];
        if (r->images_per_s < floor)
            continue;
        if (r->threads < q->threads ||
            (r->threads == q->threads &&
             (r->ring_bytes < q->ring_bytes ||
              (r->ring_bytes == q->ring_bytes && r->batch < q->batch))))
            v->rec = i;
    }
}

static int run_verdict(bench_opts *o, verdict_result *v)
{
    sample_set ss = {0};
    consumer c = {0};
    int status, k = 0, n = o->n_threads * o->n_depths * o->n_batches;
    int tty = isatty(STDERR_FILENO);

    memset(v, 0, sizeof *v);
    v->cores = cli_cores();
    cli_cpu_model(v->cpu, sizeof v->cpu);
    if ((v->rows = calloc((size_t)n, sizeof *v->rows)) == NULL) {
        cli_error(CMD, "out of memory");
        return CLI_FAIL;
    }
    if ((status = sample_files(o, &ss, &v->page_cache)) != CLI_OK)
        goto out;
    v->shards = ss.shards;
    sample_set_free(&ss); /* only the page-cache probe was wanted */
    for (int bi = 0; bi < o->n_batches; bi++)
        for (int ti = 0; ti < o->n_threads; ti++)
            for (int di = 0; di < o->n_depths; di++, k++) {
                bench_opts one = *o;
                one.s.threads = o->threads[ti];
                one.s.prefetch_depth = o->depths[di];
                one.s.batch_size = o->batches[bi];
                progress(tty, k, n, &one);
                if ((status = run_row(&one, &c, &v->rows[k])) != CLI_OK) {
                    progress(tty, n, n, &one);
                    goto out;
                }
                v->n = k + 1;
                /* Defaults (0) as the loader resolved them, for the report. */
                if (o->threads[ti] == 0)
                    o->threads[ti] = v->rows[k].threads;
                if (o->depths[di] == 0)
                    o->depths[di] = v->rows[k].depth;
            }
    progress(tty, n, n, o);
    v->device = c.device;
    v->device_id = v->rows[0].input.st.device_id;
    pick(v);
    advise(v);
    v->peak_rss = cli_peak_rss_bytes();
out:
    consumer_free(&c);
    sample_set_free(&ss);
    return status;
}

static const char *compute_what(const bench_opts *o, gf_device d, char *buf, size_t len)
{
    if (o->model_width > 0)
        snprintf(buf, len, "the demo model's step (--model-width %d)", o->model_width);
    else
        snprintf(buf, len, "--compute-ms %g (%s)", o->compute_ms,
                 d == GF_DEVICE_CUDA ? "a spin kernel" : "a busy loop on the consumer thread");
    return buf;
}

static void print_verdict_human(const bench_opts *o, const verdict_result *v)
{
    const verdict_row *r = &v->rows[v->rec];
    char what[128];
    const double mib = 1048576.0;
    printf("gpufeed bench  %s\n", o->s.data);
    printf("  %s, %s %s, %dx%d, %s transform; compute: %s\n", where(v->device),
           dtype_names[o->s.dtype], o->s.dtype == GF_DTYPE_UINT8 ? "nhwc" : layout_names[o->s.layout],
           o->s.width, o->s.height, transform_names[o->s.transform],
           compute_what(o, v->device, what, sizeof what));
    printf("  machine: %d core%s, %s\n", v->cores, v->cores == 1 ? "" : "s", v->cpu);
    if (v->n > 1) {
        int cuda = v->device == GF_DEVICE_CUDA;
        printf("\n  %7s %5s %5s %9s %10s %8s %9s %6s %7s %10s  %s\n", "threads", "depth", "batch",
               "input ms", "compute ms", "step ms", "images/s", "stall", "device",
               cuda ? "pinned MiB" : "ring MiB", "verdict");
        for (int i = 0; i < v->n; i++) {
            const verdict_row *q = &v->rows[i];
            printf("%c%c%7d %5d %5d %9.2f %10.2f %8.2f %9.0f %5.0f%% %6.0f%% %10.1f  %s %.2fx\n",
                   i == v->best ? '*' : ' ', i == v->rec ? '+' : ' ', q->threads, q->depth,
                   q->batch, q->input_ms, q->compute_ms, q->step_ms, q->images_per_s,
                   q->stall * 100, q->utilization * 100,
                   (double)(cuda ? q->pinned_bytes : q->ring_bytes) / mib,
                   verdict_names[q->verdict], q->factor);
        }
        printf("  * best images/s   + the smallest setting within 5%% of it (fewest threads, "
               "then least ring memory)\n\n");
        printf("  at --threads %d --prefetch-depth %d --batch-size %d:\n", r->threads, r->depth,
               r->batch);
    } else {
        printf("  %d thread%s, prefetch depth %d, batch %d\n", r->threads,
               r->threads == 1 ? "" : "s", r->depth, r->batch);
    }
    printf("  %-9s %9.2f ms/batch  the loader alone, steady state (%" PRIu64 " batches)\n",
           "input", r->input_ms, r->input.timed);
    printf("  %-9s %9.2f ms/batch  the compute alone on a cached batch (%d replays)\n",
           "compute", r->compute_ms, r->compute_replays);
    printf("  %-9s %9.2f ms/batch  both, prefetching (%" PRIu64 " batches); %.0f images/s\n",
           "both", r->step_ms, r->step.timed, r->images_per_s);
    printf("  verdict: %s (input / compute = %.2f; > %.1f input-bound, < %.1f compute-bound, "
           "else balanced)\n",
           verdict_names[r->verdict], r->factor, INPUT_BOUND, COMPUTE_BOUND);
    printf("  device time lost to input: %.0f%% (1 - compute / both)\n", r->lost * 100);
    printf("  recommendation: %s\n", v->advice);
    if (r->step.timed < 2 * (uint64_t)r->depth)
        printf("  note: only %" PRIu64 " batches timed with %d slots: the ring may have held "
               "much of the run (more --epochs for a steady state)\n",
               r->step.timed, r->depth);
}

static void json_ints(const int *v, int n)
{
    putchar('[');
    for (int i = 0; i < n; i++)
        printf("%s%d", i ? ", " : "", v[i]);
    putchar(']');
}

static void print_verdict_json(const bench_opts *o, const verdict_result *v)
{
    const verdict_row *rec = &v->rows[v->rec];
    printf("{\"mode\": \"verdict\", \"machine\": {\"cores\": %d, \"cpu\": ", v->cores);
    cli_json_string(stdout, v->cpu);
    printf(", \"device\": \"%s\", \"device_id\": %d}", where(v->device), v->device_id);
    printf(", \"settings\": {\"data\": ");
    cli_json_string(stdout, o->s.data);
    printf(", \"compute\": \"%s\", \"compute_ms_setting\": ",
           o->model_width > 0 ? "model" : v->device == GF_DEVICE_CUDA ? "spin-kernel" : "busy-loop");
    cli_json_double(stdout, o->model_width > 0 ? NAN : o->compute_ms);
    printf(", \"model_width\": ");
    if (o->model_width > 0)
        printf("%d", o->model_width);
    else
        printf("null");
    printf(", \"threads\": ");
    json_ints(o->threads, o->n_threads);
    printf(", \"prefetch_depth\": ");
    json_ints(o->depths, o->n_depths);
    printf(", \"batch_size\": ");
    json_ints(o->batches, o->n_batches);
    printf(", \"image_size\": [%d, %d], \"dtype\": \"%s\", \"layout\": \"%s\", \"transform\": "
           "\"%s\", \"epochs\": %" PRIu64 ", \"batches\": ",
           o->s.width, o->s.height, dtype_names[o->s.dtype],
           o->s.dtype == GF_DTYPE_UINT8 ? "nhwc" : layout_names[o->s.layout],
           transform_names[o->s.transform], o->s.epochs);
    if (o->max_batches)
        printf("%" PRIu64, o->max_batches);
    else
        printf("null");
    printf(", \"input_bound_above\": %.1f, \"compute_bound_below\": %.1f}", INPUT_BOUND,
           COMPUTE_BOUND);
    printf(", \"rows\": [");
    for (int i = 0; i < v->n; i++) {
        const verdict_row *r = &v->rows[i];
        printf("%s{\"threads\": %d, \"prefetch_depth\": %d, \"batch_size\": %d, \"input_ms\": ",
               i ? ", " : "", r->threads, r->depth, r->batch);
        cli_json_double(stdout, r->input_ms);
        printf(", \"compute_ms\": ");
        cli_json_double(stdout, r->compute_ms);
        printf(", \"step_ms\": ");
        cli_json_double(stdout, r->step_ms);
        printf(", \"images_per_s\": ");
        cli_json_double(stdout, r->images_per_s);
        printf(", \"stall_fraction\": ");
        cli_json_double(stdout, r->stall);
        printf(", \"device_utilization\": ");
        cli_json_double(stdout, r->utilization);
        printf(", \"device_time_lost_to_input\": ");
        cli_json_double(stdout, r->lost);
        printf(", \"input_factor\": ");
        cli_json_double(stdout, r->factor);
        printf(", \"verdict\": \"%s\", \"decode_busy\": ", verdict_names[r->verdict]);
        cli_json_double(stdout, r->decode_busy);
        printf(", \"read_busy\": ");
        cli_json_double(stdout, r->read_busy);
        printf(", \"pinned_bytes\": %" PRIu64 ", \"ring_bytes\": %" PRIu64
               ", \"input_timed_batches\": %" PRIu64 ", \"timed_batches\": %" PRIu64
               ", \"compute_replays\": %d, \"errors\": %" PRIu64
               ", \"best\": %s, \"recommended\": %s}",
               r->pinned_bytes, r->ring_bytes, r->input.timed, r->step.timed, r->compute_replays,
               r->step.st.errors, i == v->best ? "true" : "false",
               i == v->rec ? "true" : "false");
    }
    printf("], \"best\": %d, \"recommended\": %d, \"verdict\": \"%s\", \"input_factor\": ",
           v->best, v->rec, verdict_names[rec->verdict]);
    cli_json_double(stdout, rec->factor);
    printf(", \"device_time_lost_to_input\": ");
    cli_json_double(stdout, rec->lost);
    printf(", \"input_ms\": ");
    cli_json_double(stdout, rec->input_ms);
    printf(", \"compute_ms\": ");
    cli_json_double(stdout, rec->compute_ms);
    printf(", \"step_ms\": ");
    cli_json_double(stdout, rec->step_ms);
    printf(", \"recommendation\": ");
    cli_json_string(stdout, v->advice);
    printf(", \"reader\": \"%s\", \"decoder\": \"%s\", \"peak_rss_bytes\": %" PRIu64,
           reader_name(rec->step.st.reader), decoder_used(&rec->step.st), v->peak_rss);
    printf(", \"page_cache_resident\": ");
    cli_json_double(stdout, v->page_cache >= 0 ? v->page_cache : NAN);
    printf("}\n");
}

static int write_verdict_csv(const char *path, const verdict_result *v)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        cli_error(CMD, "--csv %s: %s", path, strerror(errno));
        return CLI_FAIL;
    }
    fprintf(f, "threads,prefetch_depth,batch_size,input_ms,compute_ms,step_ms,images_per_s,"
               "stall_fraction,device_utilization,pinned_bytes,ring_bytes,input_factor,verdict,"
               "best,recommended\n");
    for (int i = 0; i < v->n; i++) {
        const verdict_row *r = &v->rows[i];
        fprintf(f, "%d,%d,%d,%.4f,%.4f,%.4f,%.1f,%.4f,%.4f,%" PRIu64 ",%" PRIu64 ",%.4f,%s,%d,%d\n",
                r->threads, r->depth, r->batch, r->input_ms, r->compute_ms, r->step_ms,
                r->images_per_s, r->stall, r->utilization, r->pinned_bytes, r->ring_bytes,
                r->factor, verdict_names[r->verdict], i == v->best, i == v->rec);
    }
    if (ferror(f) | (fclose(f) != 0)) {
        cli_error(CMD, "--csv %s: write failed", path);
        return CLI_FAIL;
    }
    return CLI_OK;
}

/* images/s and device utilization against prefetch depth, one line per
 * thread count (and batch size, as dashes, when several were swept). */
static int write_verdict_plot(const char *path, const bench_opts *o, const verdict_result *v)
{
    cli_plot_line lines[SWEEP_MAX * SWEEP_MAX];
    char sub[256], what[128], why[256];
    int nl = 0;
    for (int bi = 0; bi < o->n_batches; bi++)
        for (int ti = 0; ti < o->n_threads; ti++) {
            cli_plot_line *l = &lines[nl];
            memset(l, 0, sizeof *l);
            l->colour = ti;
            l->dash = bi;
            if (o->n_batches > 1)
                snprintf(l->label, sizeof l->label, "%d thread%s, batch %d", o->threads[ti],
                         o->threads[ti] == 1 ? "" : "s", o->batches[bi]);
            else
                snprintf(l->label, sizeof l->label, "%d thread%s", o->threads[ti],
                         o->threads[ti] == 1 ? "" : "s");
            for (int di = 0; di < o->n_depths && l->n < CLI_PLOT_MAX_POINTS; di++) {
                const verdict_row *r = &v->rows[(bi * o->n_threads + ti) * o->n_depths + di];
                l->x[l->n] = r->depth;
                l->y[0][l->n] = r->images_per_s;
                l->y[1][l->n] = r->utilization * 100;
                l->n++;
            }
            nl++;
        }
    char batch[32];
    if (o->n_batches == 1)
        snprintf(batch, sizeof batch, "batch %d", o->batches[0]);
    else
        snprintf(batch, sizeof batch, "batch sizes dashed");
    snprintf(sub, sizeof sub, "%s, %dx%d %s, %s; compute: %s; %d cores", where(v->device),
             o->s.width, o->s.height, dtype_names[o->s.dtype], batch,
             compute_what(o, v->device, what, sizeof what), v->cores);
    char title[512];
    snprintf(title, sizeof title, "gpufeed bench: %s", o->s.data);
    cli_plot p = {
        .title = title,
        .subtitle = sub,
        .x_label = "prefetch depth (batch slots)",
        .y_label = {"images/s (input + compute)", "device utilization (%)"},
        .legend_title = "decode threads",
        .y_max = {0, 100},
        .lines = lines,
        .n_lines = nl,
    };
    if (cli_plot_svg(path, &p, why, sizeof why) < 0) {
        cli_error(CMD, "--plot %s", why);
        return CLI_FAIL;
    }
    return CLI_OK;
}

static void print_overlap_human(const bench_opts *o, const overlap_result *r)
{
    const gf_stats *st = &r->step.st;
    printf("gpufeed bench --overlap  %s\n", o->s.data);
    printf("  %s, %s %s, batch %d x %dx%d, %s transform, %d thread%s, prefetch depth %d%s\n",
           where(r->device), dtype_names[o->s.dtype],
           o->s.dtype == GF_DTYPE_UINT8 ? "nhwc" : layout_names[o->s.layout], st->batch_size,
           o->s.width, o->s.height, transform_names[o->s.transform], st->threads,
           st->threads == 1 ? "" : "s", st->prefetch_depth,
           r->device == GF_DEVICE_CUDA && o->s.copy_stream_per_slot ? ", a copy stream per slot"
                                                                     : "");
    printf("  %-17s %9s %8s\n", "", "ms/batch", "batches");
    printf("  %-17s %9.2f %8" PRIu64 "   the loader alone, steady state\n", "input",
           r->input_ms, r->input.timed);
    printf("  %-17s %9.2f %8d   --compute-ms %g on one cached batch\n", "compute",
           r->compute_ms, r->compute_replays, o->compute_ms);
    printf("  %-17s %9.2f %8" PRIu64 "   both, steady state (first %" PRIu64
           " not timed); stall %.2f\n",
           "step", r->step_ms, r->step.timed, r->step.skipped, r->step_stall);
    printf("  %-17s %9.2f %8d   one thread: read, decode, copy, compute\n", "synchronous",
           r->sync_step_ms, r->sync_batches);
    printf("  step %.1f ms = %.2f x max(input %.1f, compute %.1f); synchronous %.1f ms: "
           "prefetching saves %.0f%%\n",
           r->step_ms, r->overlap_ratio, r->input_ms, r->compute_ms, r->sync_step_ms,
           r->saved * 100);
    if (r->step.timed < 2 * (uint64_t)st->prefetch_depth)
        printf("  note: only %" PRIu64 " batches timed with %d slots: the ring may have held "
               "much of the run (more --epochs for a steady state)\n",
               r->step.timed, st->prefetch_depth);
    if (r->sync_errors || st->errors)
        printf("  errors: %" PRIu64 " bad samples in the loader, %" PRIu64
               " in the synchronous loop\n",
               st->errors, r->sync_errors);
    if (r->device == GF_DEVICE_CUDA && st->pageable_slots)
        printf("  note: %d of %d host slots are pageable, not pinned (%s): their copies are "
               "staged by the driver and slower\n",
               st->pageable_slots, st->prefetch_depth, st->device_note);
}

static void print_overlap_json(const bench_opts *o, const overlap_result *r)
{
    const gf_stats *st = &r->step.st;
    printf("{\"mode\": \"overlap\", \"data\": ");
    cli_json_string(stdout, o->s.data);
    printf(", \"device\": \"%s\", \"dtype\": \"%s\", \"layout\": \"%s\"", where(r->device),
           dtype_names[o->s.dtype],
           o->s.dtype == GF_DTYPE_UINT8 ? "nhwc" : layout_names[o->s.layout]);
    printf(", \"step_ms\": ");
    cli_json_double(stdout, r->step_ms);
    printf(", \"input_ms\": ");
    cli_json_double(stdout, r->input_ms);
    printf(", \"compute_ms\": ");
    cli_json_double(stdout, r->compute_ms);
    printf(", \"sync_step_ms\": ");
    cli_json_double(stdout, r->sync_step_ms);
    printf(", \"overlap_ratio\": ");
    cli_json_double(stdout, r->overlap_ratio);
    printf(", \"prefetch_saving\": ");
    cli_json_double(stdout, r->saved);
    printf(", \"compute_ms_setting\": ");
    cli_json_double(stdout, o->compute_ms);
    printf(", \"threads\": %d, \"prefetch_depth\": %d, \"batch_size\": %d", st->threads,
           st->prefetch_depth, st->batch_size);
    printf(", \"image_size\": [%d, %d], \"transform\": \"%s\"", o->s.width, o->s.height,
           transform_names[o->s.transform]);
    printf(", \"batches\": %" PRIu64 ", \"timed_batches\": %" PRIu64 ", \"skipped_batches\": %" PRIu64,
           r->step.batches, r->step.timed, r->step.skipped);
    printf(", \"input_timed_batches\": %" PRIu64 ", \"compute_replays\": %d, \"sync_batches\": %d",
           r->input.timed, r->compute_replays, r->sync_batches);
    printf(", \"step_stall_fraction\": ");
    cli_json_double(stdout, r->step_stall);
    printf(", \"errors\": %" PRIu64 ", \"sync_errors\": %" PRIu64, st->errors, r->sync_errors);
    printf(", \"pinned_bytes\": %" PRIu64 ", \"pageable_slots\": %d", st->pinned_bytes,
           st->pageable_slots);
    printf(", \"copy_streams\": \"%s\"", copy_stream_names[o->s.copy_stream_per_slot]);
    printf(", \"reader\": \"%s\", \"decoder\": \"%s\", \"peak_rss_bytes\": %" PRIu64,
           reader_name(st->reader), decoder_used(st), r->peak_rss);
    printf(", \"page_cache_resident\": ");
    cli_json_double(stdout, r->page_cache >= 0 ? r->page_cache : NAN);
    printf("}\n");
}

static void print_input_human(const bench_opts *o, const input_result *r)
{
    const gf_stats *st = &r->st;
    const double mib = 1024.0 * 1024.0;
    char cache[64];
    if (r->page_cache < 0)
        snprintf(cache, sizeof cache, "%s", r->shards ? "not probed for tar shards" : "unknown");
    else
        snprintf(cache, sizeof cache, "%.0f%% resident before the run%s", r->page_cache * 100,
                 r->page_cache < 0.9 ? " (cold: run again)" : "");

    printf("gpufeed bench --input-only  %s\n", o->s.data);
    printf("  %-18s %d x %dx%d, %s transform, %" PRIu64 " epoch(s)\n", "batches", st->batch_size,
           o->s.width, o->s.height, transform_names[o->s.transform], o->s.epochs);
    printf("  %-18s %" PRIu64 " in %.3f s\n", "samples", st->samples, r->elapsed_s);
    printf("  %-18s %.1f\n", "images/s", r->images_per_s);
    printf("  %-18s %.1f images/s (decode+transform, %zu samples in memory)\n", "single thread",
           r->st_images_per_s, r->st_files);
    printf("  %-18s %.2f (%d thread%s)\n", "efficiency", r->efficiency, st->threads,
           st->threads == 1 ? "" : "s");
    printf("  %-18s %.2f (waiting in gf_next; ~1 when nothing consumes)\n", "stall fraction",
           r->stall_fraction);
    printf("  %-18s %s, queue depth %d\n", "reader", reader_name(st->reader), st->queue_depth);
    printf("  %-18s %s (turbo %" PRIu64 ", stb %" PRIu64 ")\n", "decoder", decoder_used(st),
           st->decoded_turbo, st->decoded_stb);
    printf("  %-18s %" PRIu64 "\n", "errors", st->errors);
    printf("  %-18s %.1f MiB (%d slots)\n", "ring", (double)st->ring_bytes / mib,
           st->prefetch_depth);
    if (st->autotune)
        printf("  %-18s chose %d decode thread%s and depth %d (%" PRIu64 " changes)\n",
               "autotune", st->threads, st->threads == 1 ? "" : "s", st->prefetch_depth,
               st->autotune_changes);
    printf("  %-18s %.1f MiB\n", "peak RSS", (double)r->peak_rss / mib);
    printf("  %-18s %.1f MB read, %s\n", "page cache", (double)st->bytes_read / 1e6, cache);
}

static void print_input_json(const bench_opts *o, const input_result *r)
{
    const gf_stats *st = &r->st;
    printf("{\"mode\": \"input-only\", \"data\": ");
    cli_json_string(stdout, o->s.data);
    printf(", \"samples\": %" PRIu64 ", \"elapsed_s\": ", st->samples);
    cli_json_double(stdout, r->elapsed_s);
    printf(", \"images_per_s\": ");
    cli_json_double(stdout, r->images_per_s);
    printf(", \"single_thread_images_per_s\": ");
    cli_json_double(stdout, r->st_images_per_s);
    printf(", \"single_thread_files\": %zu, \"efficiency\": ", r->st_files);
    cli_json_double(stdout, r->efficiency);
    printf(", \"threads\": %d, \"prefetch_depth\": %d, \"batch_size\": %d, \"queue_depth\": %d",
           st->threads, st->prefetch_depth, st->batch_size, st->queue_depth);
    printf(", \"autotune\": %s, \"autotune_changes\": %" PRIu64, st->autotune ? "true" : "false",
           st->autotune_changes);
    printf(", \"image_size\": [%d, %d], \"transform\": \"%s\", \"epochs\": %" PRIu64,
           o->s.width, o->s.height, transform_names[o->s.transform], o->s.epochs);
    printf(", \"stall_fraction\": ");
    cli_json_double(stdout, r->stall_fraction);
    printf(", \"wait_s\": ");
    cli_json_double(stdout, st->wait_s);
    printf(", \"read_busy_s\": ");
    cli_json_double(stdout, st->read_busy_s);
    printf(", \"decode_busy_s\": ");
    cli_json_double(stdout, st->decode_busy_s);
    printf(", \"reader\": \"%s\", \"decoder\": \"%s\", \"decoded_turbo\": %" PRIu64
           ", \"decoded_stb\": %" PRIu64,
           reader_name(st->reader), decoder_used(st), st->decoded_turbo, st->decoded_stb);
    printf(", \"errors\": %" PRIu64 ", \"bytes_read\": %" PRIu64 ", \"ring_bytes\": %" PRIu64
           ", \"peak_rss_bytes\": %" PRIu64 ", \"page_cache_resident\": ",
           st->errors, st->bytes_read, st->ring_bytes, r->peak_rss);
    cli_json_double(stdout, r->page_cache >= 0 ? r->page_cache : NAN);
    printf("}\n");
}

int cmd_bench(int argc, char **argv)
{
    enum { O_INPUT = 256, O_OVERLAP, O_COMPUTE, O_BATCHES, O_DATA, O_THREADS, O_DEPTH, O_BATCH,
           O_SIZE, O_EPOCHS, O_DEVICE, O_DTYPE, O_LAYOUT, O_IO, O_DECODER, O_TRANSFORM, O_ONERR,
           O_SEED, O_JSON, O_MODEL, O_CSV, O_PLOT, O_AUTOTUNE, O_COPY_STREAMS };
    static const struct option longopts[] = {
        {"input-only", no_argument, NULL, O_INPUT},
        {"overlap", no_argument, NULL, O_OVERLAP},
        {"compute-ms", required_argument, NULL, O_COMPUTE},
        {"batches", required_argument, NULL, O_BATCHES},
        {"data", required_argument, NULL, O_DATA},
        {"threads", required_argument, NULL, O_THREADS},
        {"prefetch-depth", required_argument, NULL, O_DEPTH},
        {"batch-size", required_argument, NULL, O_BATCH},
        {"image-size", required_argument, NULL, O_SIZE},
        {"epochs", required_argument, NULL, O_EPOCHS},
        {"device", required_argument, NULL, O_DEVICE},
        {"dtype", required_argument, NULL, O_DTYPE},
        {"layout", required_argument, NULL, O_LAYOUT},
        {"copy-streams", required_argument, NULL, O_COPY_STREAMS},
        {"io", required_argument, NULL, O_IO},
        {"decoder", required_argument, NULL, O_DECODER},
        {"transform", required_argument, NULL, O_TRANSFORM},
        {"on-error", required_argument, NULL, O_ONERR},
        {"seed", required_argument, NULL, O_SEED},
        {"json", no_argument, NULL, O_JSON},
        {"autotune", no_argument, NULL, O_AUTOTUNE},
        {"model-width", required_argument, NULL, O_MODEL},
        {"csv", required_argument, NULL, O_CSV},
        {"plot", required_argument, NULL, O_PLOT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bench_opts o;
    int ch, v, have_compute = 0, have_dtype = 0, have_layout = 0;
    uint64_t u;

    memset(&o, 0, sizeof o);
    gf_default_settings(&o.s);
    o.s.batch_size = 64;
    o.s.height = o.s.width = 224;
    o.s.epochs = 1;

    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (ch) {
        case O_INPUT: o.input_only = 1; break;
        case O_OVERLAP: o.overlap = 1; break;
        case O_COMPUTE: if (cli_parse_double(CMD, "compute-ms", optarg, 0, 1e6, &o.compute_ms)) return CLI_USAGE; have_compute = 1; break;
        case O_BATCHES:
            if (cli_parse_u64(CMD, "batches", optarg, &o.max_batches)) return CLI_USAGE;
            if (o.max_batches == 0) { cli_error(CMD, "--batches: at least 1"); return CLI_USAGE; }
            break;
        case O_DATA: o.s.data = optarg; break;
        case O_AUTOTUNE: o.s.autotune = 1; break;
        case O_THREADS: if (cli_parse_int_list(CMD, "threads", optarg, 1, 1024, o.threads, SWEEP_MAX, &o.n_threads)) return CLI_USAGE; o.s.threads = o.threads[0]; break;
        case O_DEPTH: if (cli_parse_int_list(CMD, "prefetch-depth", optarg, 1, 1024, o.depths, SWEEP_MAX, &o.n_depths)) return CLI_USAGE; o.s.prefetch_depth = o.depths[0]; break;
        case O_BATCH: if (cli_parse_int_list(CMD, "batch-size", optarg, 1, 65536, o.batches, SWEEP_MAX, &o.n_batches)) return CLI_USAGE; o.s.batch_size = o.batches[0]; break;
        case O_MODEL: if (cli_parse_int(CMD, "model-width", optarg, 1, 4096, &o.model_width)) return CLI_USAGE; break;
        case O_CSV: o.csv = optarg; break;
        case O_PLOT: o.plot = optarg; break;
        case O_SIZE: if (cli_parse_size(CMD, "image-size", optarg, 16384, &o.s.width, &o.s.height)) return CLI_USAGE; break;
        case O_EPOCHS:
            if (cli_parse_u64(CMD, "epochs", optarg, &u)) return CLI_USAGE;
            if (u == 0) { cli_error(CMD, "--epochs: at least 1"); return CLI_USAGE; }
            o.s.epochs = u;
            break;
        case O_DEVICE: if ((v = cli_parse_choice(CMD, "device", optarg, device_names)) < 0) return CLI_USAGE; o.s.device = (gf_device)v; break;
        case O_DTYPE: if ((v = cli_parse_choice(CMD, "dtype", optarg, dtype_names)) < 0) return CLI_USAGE; o.s.dtype = (gf_dtype)v; have_dtype = 1; break;
        case O_LAYOUT: if ((v = cli_parse_choice(CMD, "layout", optarg, layout_names)) < 0) return CLI_USAGE; o.s.layout = (gf_layout)v; have_layout = 1; break;
        case O_COPY_STREAMS: if ((v = cli_parse_choice(CMD, "copy-streams", optarg, copy_stream_names)) < 0) return CLI_USAGE; o.s.copy_stream_per_slot = v; break;
        case O_IO: if ((v = cli_parse_choice(CMD, "io", optarg, io_names)) < 0) return CLI_USAGE; o.s.io = (gf_io)v; break;
        case O_DECODER: if ((v = cli_parse_choice(CMD, "decoder", optarg, decoder_names)) < 0) return CLI_USAGE; o.s.decoder = (gf_decoder_kind)v; break;
        case O_TRANSFORM: if ((v = cli_parse_choice(CMD, "transform", optarg, transform_names)) < 0) return CLI_USAGE; o.s.transform = (gf_transform)v; break;
        case O_ONERR: if ((v = cli_parse_choice(CMD, "on-error", optarg, on_error_names)) < 0) return CLI_USAGE; o.s.on_error = (gf_on_error)v; break;
        case O_SEED: if (cli_parse_u64(CMD, "seed", optarg, &o.s.seed)) return CLI_USAGE; break;
        case O_JSON: o.json = 1; break;
        case 'h': usage(stdout); return CLI_OK;
        case ':': cli_error(CMD, "%s needs a value", argv[optind - 1]); return CLI_USAGE;
        default: cli_error(CMD, "unknown option '%s' (try --help)", argv[optind - 1]); return CLI_USAGE;
        }
    }
    if (optind < argc) {
        cli_error(CMD, "unexpected argument '%s' (the data set goes after --data)", argv[optind]);
        return CLI_USAGE;
    }
    if (o.input_only + o.overlap > 1) {
        cli_error(CMD, "choose one mode: --input-only, --overlap or neither (try --help)");
        return CLI_USAGE;
    }
    int verdict = !o.input_only && !o.overlap;
    if (o.overlap && !have_compute) {
        cli_error(CMD, "--overlap needs --compute-ms X");
        return CLI_USAGE;
    }
    if (o.input_only && have_compute) {
        cli_error(CMD, "--compute-ms does not go with --input-only");
        return CLI_USAGE;
    }
    if (verdict && have_compute + (o.model_width > 0) != 1) {
        cli_error(CMD, "the compute: --compute-ms X or --model-width W (one of them; try --help)");
        return CLI_USAGE;
    }
    if (verdict && have_compute && o.compute_ms <= 0) {
        cli_error(CMD, "--compute-ms: more than 0 (the verdict divides by it)");
        return CLI_USAGE;
    }
    if (!verdict && (o.model_width || o.csv || o.plot)) {
        cli_error(CMD, "%s goes with the default mode (no --input-only or --overlap)",
                  o.model_width ? "--model-width" : o.csv ? "--csv" : "--plot");
        return CLI_USAGE;
    }
    if (!verdict && (o.n_threads > 1 || o.n_depths > 1 || o.n_batches > 1)) {
        cli_error(CMD, "lists (--threads 1,2,4) sweep in the default mode only");
        return CLI_USAGE;
    }
    if (o.model_width > 0) {
        /* The model takes normalised float32 NCHW. */
        if ((have_dtype && o.s.dtype != GF_DTYPE_FLOAT32) ||
            (have_layout && o.s.layout != GF_LAYOUT_NCHW)) {
            cli_error(CMD, "--model-width needs --dtype f32 --layout nchw (the default with it)");
            return CLI_USAGE;
        }
        o.s.dtype = GF_DTYPE_FLOAT32;
        o.s.layout = GF_LAYOUT_NCHW;
    }
    if (o.n_threads == 0)
        o.threads[o.n_threads++] = o.s.threads; /* 0: the loader's default */
    if (o.n_depths == 0)
        o.depths[o.n_depths++] = o.s.prefetch_depth;
    if (o.n_batches == 0)
        o.batches[o.n_batches++] = o.s.batch_size;
    if (!o.s.data) {
        cli_error(CMD, "--data DIR is required (try --help)");
        return CLI_USAGE;
    }

    /* The mode table: one runner and its printers per mode. */
    if (verdict) {
        verdict_result r;
        int status = run_verdict(&o, &r);
        if (status == CLI_OK) {
            if (o.json)
                print_verdict_json(&o, &r);
            else
                print_verdict_human(&o, &r);
            if (o.csv && write_verdict_csv(o.csv, &r) != CLI_OK)
                status = CLI_FAIL;
            if (o.plot && write_verdict_plot(o.plot, &o, &r) != CLI_OK)
                status = CLI_FAIL;
        }
        free(r.rows);
        return status;
    }
    if (o.overlap) {
        overlap_result r;
        int status = run_overlap(&o, &r);
        if (status != CLI_OK)
            return status;
        if (o.json)
            print_overlap_json(&o, &r);
        else
            print_overlap_human(&o, &r);
        return CLI_OK;
    }
    input_result r;
    int status = run_input_only(&o, &r);
    if (status != CLI_OK)
        return status;
    if (o.json)
        print_input_json(&o, &r);
    else
        print_input_human(&o, &r);
    return CLI_OK;
}
