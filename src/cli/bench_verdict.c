/*
 * gpufeed bench's default mode: the verdict (input-bound, compute-bound or
 * balanced) per setting of a sweep, the recommendation in words, and its
 * outputs (human, --json, --csv, --plot). Main thread.
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

/* ---- the verdict (default mode) -------------------------------------------- */

enum { V_INPUT, V_COMPUTE, V_BALANCED };
static const char *const verdict_names[] = {"input-bound", "compute-bound", "balanced"};
/* Why a row is input-bound (classify decides, every printer says it):
 * prefetch depth 1 (input and compute take turns), the network (remote
 * shards late), decode (the decoders busy), reads (the decoders idle,
 * waiting for local reads). C_NONE for the other verdicts. */
enum { C_NONE, C_DEPTH, C_NETWORK, C_DECODE, C_READS };
static const char *const cause_names[] = {"", "prefetch-depth", "network", "decode", "reads"};

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
    /* The network first: with shards late, depth or threads cannot help. */
    r->cause = r->verdict != V_INPUT ? C_NONE
               : r->step.st.remote_requests > 0 && r->remote_share >= REMOTE_BOUND &&
                       r->remote_wait >= REMOTE_MIN
                   ? C_NETWORK
               : r->depth == 1              ? C_DEPTH
               : r->decode_busy >= DECODE_BUSY ? C_DECODE
                                               : C_READS;
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
    r->remote_wait = r->step.elapsed_s > 0 ? st->remote_wait_s / r->step.elapsed_s : 0;
    if (r->remote_wait > 1)
        r->remote_wait = 1;
    r->remote_share = st->wait_s > 0 ? st->remote_wait_s / st->wait_s : 0;
    if (r->remote_share > 1)
        r->remote_share = 1;
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
        if (r->cause == C_NETWORK) {
            const gf_settings *s = &v->settings;
            ADD("input-bound by %.2fx: waiting for remote shards %.0f%% of the time "
                "(decode busy %.0f%%); raise --prefetch-shards",
                r->factor, r->remote_wait * 100, r->decode_busy * 100);
            if (s->prefetch_shards)
                ADD(" (%d now)", s->prefetch_shards);
            ADD(" or --remote-connections");
            if (s->remote_connections)
                ADD(" (%d now)", s->remote_connections);
            if (s->order == GF_ORDER_GLOBAL)
                ADD(", or --order shards (the global order makes a request a sample)");
            else if (!s->cache_dir)
                ADD(", or enable --cache-dir (later epochs read locally); more decode threads "
                    "will not help");
            else
                ADD("; more decode threads will not help");
            break;
        }
        ADD("input-bound by %.2fx: decode busy %.0f%%", r->factor, r->decode_busy * 100);
        if (r->cause == C_DEPTH) {
            ADD("; prefetch depth 1 makes input and compute take turns "
                "(step %.1f ms ~ input + compute): --prefetch-depth 2 first",
                r->step_ms);
        } else if (r->cause == C_DECODE) {
            int need = (int)ceil(r->threads * r->factor - 1e-9);
            ADD("; --threads %d -> %d would cover it; this machine has %d core%s", r->threads,
                need, v->cores, v->cores == 1 ? "" : "s");
            if (need > avail)
                ADD(" (%d for decoding beside the %s): more threads than that will "
                    "not help; a smaller --image-size, data resized once beforehand "
                    "(gpufeed prepare SRC OUT --max-side 320; gpufeed prepare --plan SRC "
                    "--need-rate %.0f measures which size and format reach the compute's "
                    "rate) or a faster machine will",
                    avail, v->device == GF_DEVICE_CUDA ? "trainer" : "consumer's busy loop",
                    r->compute_ms > 0 ? r->batch * 1000.0 / r->compute_ms : 0.0);
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

int run_verdict(bench_opts *o, verdict_result *v)
{
    sample_set ss = {0};
    consumer c = {0};
    int status, k = 0, n = o->n_threads * o->n_depths * o->n_batches;
    int tty = isatty(STDERR_FILENO);

    memset(v, 0, sizeof *v);
    v->settings = o->s;
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

void print_verdict_human(const bench_opts *o, const verdict_result *v)
{
    const verdict_row *r = &v->rows[v->rec];
    char what[128];
    const double mib = 1048576.0;
    cli_put_heading(stdout, "gpufeed bench  ", o->s.data);
    printf("  %s, %s %s, %dx%d, %s transform; compute: %s\n", where(v->device),
           cli_dtype_names[o->s.dtype], o->s.dtype == GF_DTYPE_UINT8 ? "nhwc" : cli_layout_names[o->s.layout],
           o->s.width, o->s.height, cli_transform_names[o->s.transform],
           compute_what(o, v->device, what, sizeof what));
    printf("  machine: %d core%s, ", v->cores, v->cores == 1 ? "" : "s");
    cli_put_quoted(stdout, v->cpu); /* /proc/cpuinfo's, printed as it came */
    putchar('\n');
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
    /* The compute's own rate is what the input must reach: prepare --plan's --need-rate. */
    printf("  %-9s %9.2f ms/batch  the compute alone on a cached batch (%d replays); "
           "%.0f images/s\n",
           "compute", r->compute_ms, r->compute_replays,
           r->compute_ms > 0 ? r->batch * 1000.0 / r->compute_ms : 0.0);
    printf("  %-9s %9.2f ms/batch  both, prefetching (%" PRIu64 " batches); %.0f images/s\n",
           "both", r->step_ms, r->step.timed, r->images_per_s);
    const gf_stats *st = &r->step.st;
    if (st->remote_requests > 0)
        printf("  %-9s %9" PRIu64 " requests  %" PRIu64 " retries, %.1f MB fetched; the decoders "
               "waited for remote shards %.2f s: %.0f%% of the run, %.0f%% of the trainer's wait\n",
               "remote", st->remote_requests, st->remote_retries, (double)st->remote_bytes / 1e6,
               st->remote_wait_s, r->remote_wait * 100, r->remote_share * 100);
    print_sources_human(&r->step.src);
    printf("  verdict: %s (input / compute = %.2f; > %.1f input-bound, < %.1f compute-bound, "
           "else balanced)\n",
           verdict_names[r->verdict], r->factor, INPUT_BOUND, COMPUTE_BOUND);
    if (r->cause == C_NETWORK)
        printf("  the network: remote waits >= %.0f%% of the trainer's wait and >= %.0f%% of the "
               "run\n",
               REMOTE_BOUND * 100, REMOTE_MIN * 100);
    printf("  device time lost to input: %.0f%% (1 - compute / both)\n", r->lost * 100);
    printf("  recommendation: %s\n", v->advice);
    if (r->step.timed < 2 * (uint64_t)r->depth)
        printf("  note: only %" PRIu64 " batches timed with %d slots: the ring may have held "
               "much of the run (more --epochs for a steady state)\n",
               r->step.timed, r->depth);
}


/* "input_cause": why an input-bound row is (null for the others). */
static void json_cause(cli_json *j, const verdict_row *r)
{
    if (r->cause == C_NONE)
        cli_json_knull(j, "input_cause");
    else
        cli_json_kstr(j, "input_cause", cause_names[r->cause]);
}

/* The step run's remote figures (0 for local data). */
static void json_remote(cli_json *j, const verdict_row *r)
{
    const gf_stats *st = &r->step.st;
    json_stats(j, st, STAT_remote_requests, STAT_remote_wait_s);
    cli_json_knum(j, "remote_wait_fraction", r->remote_wait);
    cli_json_knum(j, "remote_wait_share", r->remote_share);
    json_stats(j, st, STAT_cache_hits, STAT_cache_warning);
}

void print_verdict_json(const bench_opts *o, const verdict_result *v)
{
    const verdict_row *rec = &v->rows[v->rec];
    cli_json j;
    cli_json_init(&j, stdout);
    cli_json_object(&j);
    cli_json_kstr(&j, "mode", "verdict");
    cli_json_key(&j, "machine");
    cli_json_object(&j);
    cli_json_kint(&j, "cores", v->cores);
    cli_json_kstr(&j, "cpu", v->cpu);
    cli_json_kstr(&j, "device", where(v->device));
    cli_json_kint(&j, "device_id", v->device_id);
    cli_json_object_end(&j);

    cli_json_key(&j, "settings");
    cli_json_object(&j);
    cli_json_kstr(&j, "data", o->s.data);
    cli_json_kstr(&j, "compute",
                  o->model_width > 0 ? "model" : v->device == GF_DEVICE_CUDA ? "spin-kernel" : "busy-loop");
    cli_json_knum(&j, "compute_ms_setting", o->model_width > 0 ? NAN : o->compute_ms);
    if (o->model_width > 0)
        cli_json_kint(&j, "model_width", o->model_width);
    else
        cli_json_knull(&j, "model_width");
    cli_json_kints(&j, "threads", o->threads, o->n_threads);
    cli_json_kints(&j, "prefetch_depth", o->depths, o->n_depths);
    cli_json_kints(&j, "batch_size", o->batches, o->n_batches);
    cli_json_kints(&j, "image_size", (const int[]){o->s.width, o->s.height}, 2);
    cli_json_kstr(&j, "dtype", cli_dtype_names[o->s.dtype]);
    cli_json_kstr(&j, "layout", o->s.dtype == GF_DTYPE_UINT8 ? "nhwc" : cli_layout_names[o->s.layout]);
    cli_json_kstr(&j, "transform", cli_transform_names[o->s.transform]);
    cli_json_kuint(&j, "epochs", o->s.epochs);
    if (o->max_batches)
        cli_json_kuint(&j, "batches", o->max_batches);
    else
        cli_json_knull(&j, "batches");
    cli_json_key(&j, "input_bound_above");
    cli_json_fixed(&j, INPUT_BOUND, 1);
    cli_json_key(&j, "compute_bound_below");
    cli_json_fixed(&j, COMPUTE_BOUND, 1);
    cli_json_object_end(&j);

    cli_json_key(&j, "rows");
    cli_json_array(&j);
    for (int i = 0; i < v->n; i++) {
        const verdict_row *r = &v->rows[i];
        cli_json_object(&j);
        cli_json_kint(&j, "threads", r->threads);
        cli_json_kint(&j, "prefetch_depth", r->depth);
        cli_json_kint(&j, "batch_size", r->batch);
        cli_json_knum(&j, "input_ms", r->input_ms);
        cli_json_knum(&j, "compute_ms", r->compute_ms);
        cli_json_knum(&j, "step_ms", r->step_ms);
        cli_json_knum(&j, "images_per_s", r->images_per_s);
        cli_json_knum(&j, "stall_fraction", r->stall);
        cli_json_knum(&j, "device_utilization", r->utilization);
        cli_json_knum(&j, "device_time_lost_to_input", r->lost);
        cli_json_knum(&j, "input_factor", r->factor);
        cli_json_kstr(&j, "verdict", verdict_names[r->verdict]);
        cli_json_knum(&j, "decode_busy", r->decode_busy);
        cli_json_knum(&j, "read_busy", r->read_busy);
        cli_json_kuint(&j, "pinned_bytes", r->pinned_bytes);
        cli_json_kuint(&j, "ring_bytes", r->ring_bytes);
        cli_json_kuint(&j, "input_timed_batches", r->input.timed);
        cli_json_kuint(&j, "timed_batches", r->step.timed);
        cli_json_kint(&j, "compute_replays", r->compute_replays);
        cli_json_kuint(&j, "errors", r->step.st.errors);
        json_cause(&j, r);
        json_remote(&j, r);
        cli_json_kbool(&j, "best", i == v->best);
        cli_json_kbool(&j, "recommended", i == v->rec);
        cli_json_object_end(&j);
    }
    cli_json_array_end(&j);
    cli_json_kint(&j, "best", v->best);
    cli_json_kint(&j, "recommended", v->rec);
    cli_json_kstr(&j, "verdict", verdict_names[rec->verdict]);
    json_cause(&j, rec);
    cli_json_knum(&j, "input_factor", rec->factor);
    cli_json_knum(&j, "device_time_lost_to_input", rec->lost);
    cli_json_knum(&j, "input_ms", rec->input_ms);
    cli_json_knum(&j, "compute_ms", rec->compute_ms);
    cli_json_knum(&j, "compute_images_per_s",
                  rec->compute_ms > 0 ? rec->batch * 1000.0 / rec->compute_ms : NAN);
    cli_json_knum(&j, "step_ms", rec->step_ms);
    cli_json_kstr(&j, "recommendation", v->advice);
    cli_json_kstr(&j, "reader", reader_name(rec->step.st.reader));
    cli_json_kstr(&j, "decoder", decoder_used(&rec->step.st));
    cli_json_kuint(&j, "peak_rss_bytes", v->peak_rss);
    cli_json_knum(&j, "page_cache_resident", v->page_cache >= 0 ? v->page_cache : NAN);
    json_remote(&j, rec);
    json_sources(&j, &rec->step.src);
    cli_json_object_end(&j);
    cli_json_end(&j);
}

int write_verdict_csv(const char *path, const verdict_result *v)
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
int write_verdict_plot(const char *path, const bench_opts *o, const verdict_result *v)
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
             o->s.width, o->s.height, cli_dtype_names[o->s.dtype], batch,
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

