/*
 * gpufeed bench: measures the pipeline. One mode exists today:
 *
 *   --input-only  the loader alone, no consumer work: images/s from the
 *                 first gf_next() to GF_EOF, and, in the same run on the
 *                 same files, the single-thread decode+transform rate
 *                 (one gf_decoder over files already in memory), so
 *                 efficiency = images/s / (threads x single-thread rate)
 *                 says how well the loader turns cores into throughput.
 *
 * Modes are rows of a table (name, runner); the compute-alone and
 * input+compute modes arrive with the CUDA stage and slot in beside it.
 * The OS page cache is not warmed here: run twice and read
 * page_cache_resident (measured with mincore() before the run on the
 * sampled files) to see whether a run read from disk or from memory.
 */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cliutil.h"
#include "gpufeed.h"

#define CMD "bench"

/* Files decoded for the single-thread reference rate, and how long to
 * repeat them: enough samples to average over image content, enough time
 * to average over the clock and the scheduler. */
#define ST_MAX_FILES 200
#define ST_MIN_SECONDS 1.0

typedef struct bench_opts {
    gf_settings s;
    int input_only;
    int json;
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
    uint64_t peak_rss;
} input_result;

static const char *const io_names[] = {"auto", "uring", "posix", NULL};
static const char *const decoder_names[] = {"auto", "stb", "turbo", NULL};
static const char *const transform_names[] = {"train", "eval", NULL};
static const char *const on_error_names[] = {"skip", "fail", NULL};

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
            "usage: gpufeed bench --input-only --data DIR [options]\n"
            "\n"
            "--input-only runs the loader with no consumer work and reports images/s,\n"
            "the single-thread decode+transform rate on the same files, the loader's\n"
            "efficiency (images/s / (threads x single-thread rate)), the input stall\n"
            "and resource use. Run it twice: the first run may read from disk; the\n"
            "report shows how much of the data set was in the page cache.\n"
            "\n"
            "options:\n"
            "  --input-only          measure the input pipeline alone (required for now)\n"
            "  --data DIR            ImageFolder directory or list file (required)\n"
            "  --threads N           decode threads (default: cores - 1, at least 1)\n"
            "  --prefetch-depth D    batch slots in the ring (default 4)\n"
            "  --batch-size B        samples per batch (default 64)\n"
            "  --image-size S        output size, S or WxH (default 224)\n"
            "  --epochs E            epochs (default 1)\n"
            "  --io MODE             auto|uring|posix (default auto)\n"
            "  --decoder D           auto|stb|turbo (default auto)\n"
            "  --transform T         train|eval (default train)\n"
            "  --on-error E          skip|fail (default skip)\n"
            "  --seed S              seed (default 0)\n"
            "  --json                print one JSON object\n"
            "  -h, --help            this text\n");
}

/* Up to ST_MAX_FILES files spread evenly over the data set, in memory. */
typedef struct sample_set {
    uint8_t **data;
    size_t *len;
    char **paths; /* borrowed from the file list */
    size_t n;
} sample_set;

static void sample_set_free(sample_set *ss)
{
    for (size_t i = 0; i < ss->n; i++)
        free(ss->data[i]);
    free(ss->data);
    free(ss->len);
    free(ss->paths);
    memset(ss, 0, sizeof *ss);
}

static int pick_files(const cli_filelist *fl, sample_set *ss)
{
    size_t n = fl->n < ST_MAX_FILES ? fl->n : ST_MAX_FILES;
    ss->paths = calloc(n ? n : 1, sizeof *ss->paths);
    ss->data = calloc(n ? n : 1, sizeof *ss->data);
    ss->len = calloc(n ? n : 1, sizeof *ss->len);
    if (!ss->paths || !ss->data || !ss->len)
        return -1;
    for (size_t i = 0; i < n; i++)
        ss->paths[i] = fl->paths[i * fl->n / n];
    ss->n = n;
    return 0;
}

/* Times one gf_decoder (what a loader thread runs) over the files in
 * memory, repeated until at least ST_MIN_SECONDS have passed. File reading
 * is not timed. Files that do not decode are left out of the rate. */
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
    for (size_t i = 0; i < ss->n; i++) {
        if (cli_read_file(ss->paths[i], &ss->data[i], &ss->len[i]) < 0) {
            ss->data[i] = NULL;
            continue;
        }
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

static int run_input_only(const bench_opts *o, input_result *r)
{
    gf_loader *l = NULL;
    cli_filelist fl = {0};
    sample_set ss = {0};
    char why[512];
    int rc, status = CLI_OK;
    double t0;

    memset(r, 0, sizeof *r);
    /* Which files: our own walk of the data set, for the single-thread
     * reference and the page-cache probe. */
    if (cli_list_dataset(o->s.data, &fl, why, sizeof why) < 0) {
        cli_error(CMD, "%s", why);
        return CLI_USAGE;
    }
    if (pick_files(&fl, &ss) < 0) {
        cli_error(CMD, "out of memory");
        status = CLI_FAIL;
        goto out;
    }
    r->page_cache = cli_page_cache_fraction(ss.paths, ss.n);

    rc = gf_open(&l, &o->s);
    if (rc < 0) {
        const char *msg = l ? gf_last_error(l) : "";
        if (*msg)
            cli_error(CMD, "%s", msg); /* the loader's message names the file */
        else
            cli_error(CMD, "%s: %s", o->s.data, gf_strerror(rc));
        status = CLI_USAGE;
        goto out;
    }
    t0 = cli_now();
    for (;;) {
        gf_batch *b;
        rc = gf_next(l, &b);
        if (rc == GF_EOF)
            break;
        if (rc < 0) {
            const char *msg = gf_last_error(l);
            cli_error(CMD, "%s", *msg ? msg : gf_strerror(rc));
            status = CLI_FAIL;
            goto out;
        }
        gf_release(l, b);
    }
    r->elapsed_s = cli_now() - t0;
    gf_get_stats(l, &r->st);
    gf_close(&l);

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
    gf_close(&l);
    sample_set_free(&ss);
    cli_filelist_free(&fl);
    return status;
}

static void print_input_human(const bench_opts *o, const input_result *r)
{
    const gf_stats *st = &r->st;
    const double mib = 1024.0 * 1024.0;
    char cache[64];
    if (r->page_cache < 0)
        snprintf(cache, sizeof cache, "unknown");
    else
        snprintf(cache, sizeof cache, "%.0f%% resident before the run%s", r->page_cache * 100,
                 r->page_cache < 0.9 ? " (cold: run again)" : "");

    printf("gpufeed bench --input-only  %s\n", o->s.data);
    printf("  %-18s %d x %dx%d, %s transform, %" PRIu64 " epoch(s)\n", "batches", st->batch_size,
           o->s.width, o->s.height, transform_names[o->s.transform], o->s.epochs);
    printf("  %-18s %" PRIu64 " in %.3f s\n", "samples", st->samples, r->elapsed_s);
    printf("  %-18s %.1f\n", "images/s", r->images_per_s);
    printf("  %-18s %.1f images/s (decode+transform, %zu files in memory)\n", "single thread",
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
    enum { O_INPUT = 256, O_DATA, O_THREADS, O_DEPTH, O_BATCH, O_SIZE, O_EPOCHS, O_IO,
           O_DECODER, O_TRANSFORM, O_ONERR, O_SEED, O_JSON };
    static const struct option longopts[] = {
        {"input-only", no_argument, NULL, O_INPUT},
        {"data", required_argument, NULL, O_DATA},
        {"threads", required_argument, NULL, O_THREADS},
        {"prefetch-depth", required_argument, NULL, O_DEPTH},
        {"batch-size", required_argument, NULL, O_BATCH},
        {"image-size", required_argument, NULL, O_SIZE},
        {"epochs", required_argument, NULL, O_EPOCHS},
        {"io", required_argument, NULL, O_IO},
        {"decoder", required_argument, NULL, O_DECODER},
        {"transform", required_argument, NULL, O_TRANSFORM},
        {"on-error", required_argument, NULL, O_ONERR},
        {"seed", required_argument, NULL, O_SEED},
        {"json", no_argument, NULL, O_JSON},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bench_opts o;
    int ch, v;
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
        case O_DATA: o.s.data = optarg; break;
        case O_THREADS: if (cli_parse_int(CMD, "threads", optarg, 1, 1024, &o.s.threads)) return CLI_USAGE; break;
        case O_DEPTH: if (cli_parse_int(CMD, "prefetch-depth", optarg, 1, 1024, &o.s.prefetch_depth)) return CLI_USAGE; break;
        case O_BATCH: if (cli_parse_int(CMD, "batch-size", optarg, 1, 65536, &o.s.batch_size)) return CLI_USAGE; break;
        case O_SIZE: if (cli_parse_size(CMD, "image-size", optarg, 16384, &o.s.width, &o.s.height)) return CLI_USAGE; break;
        case O_EPOCHS:
            if (cli_parse_u64(CMD, "epochs", optarg, &u)) return CLI_USAGE;
            if (u == 0) { cli_error(CMD, "--epochs: at least 1"); return CLI_USAGE; }
            o.s.epochs = u;
            break;
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
    if (!o.input_only) {
        cli_error(CMD, "only --input-only is available for now; the compute and end-to-end "
                       "benchmarks arrive with the CUDA stage");
        return CLI_USAGE;
    }
    if (!o.s.data) {
        cli_error(CMD, "--data DIR is required (try --help)");
        return CLI_USAGE;
    }

    /* The mode table: one runner per mode; more modes slot in here. */
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
