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
 * The modes live in bench_input.c, bench_overlap.c and bench_verdict.c;
 * this file parses the options (the shared loader options through
 * loader_options.h) and dispatches.
 *
 * All drive the loader through one runner (run_loader) with an optional
 * consumer. The OS page cache is not warmed here: run twice and read
 * page_cache_resident (measured with mincore() before the run on the
 * sampled files) to see whether a run read from disk or from memory.
 *
 * The sampled files are the library's own: the data set's index alone
 * (gf_index, no loader) gives them, and the samples are picked by index
 * and read with gf_index_read(), so folders, list files and tar shards are
 * handled alike and the CLI never re-implements the index. Nothing is read
 * before the probe. For tar shards the probe is
 * not taken (page_cache_resident is null): members are ranges of shared
 * files, and the library does not hand out their offsets.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_parts.h"
#include "data_option.h"

/* The shared loader options bench takes (loader_options.h). */
#define BENCH_LOPTS                                                                        \
    (CLI_LOPT_SWEEPABLE | CLI_LOPT(IMAGE_SIZE) | CLI_LOPT(EPOCHS) | CLI_LOPT(DEVICE) |     \
     CLI_LOPT(DTYPE) | CLI_LOPT(LAYOUT) | CLI_LOPT(COPY_STREAMS) | CLI_LOPT(IO) |          \
     CLI_LOPT(DECODER) | CLI_LOPT(TRANSFORM) | CLI_LOPT(ON_ERROR) | CLI_LOPT(SEED) |      \
     CLI_LOPT(AUTOTUNE) | CLI_LOPT(STRICTNESS) | CLI_LOPT(EXTENSIONS) |                    \
     CLI_LOPT(ON_SHARD_ERROR))

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
            "                        (required); more than once: a mix of them\n"
            CLI_DATA_WEIGHTS_HELP);
    cli_loader_help(f, BENCH_LOPTS | CLI_LOPT_GENERIC, CLI_LOPT_SWEEPABLE, 24, NULL, NULL);
    fprintf(f,
            "  --json                print one JSON object\n"
            "  -h, --help            this text\n"
            "A sweep shows a progress line on stderr when it is a terminal.\n");
}

/* The mode table: one runner and its printers per mode (verdict: the
 * default mode). Returns the exit status. */
static int run_mode(bench_opts *o, int verdict)
{
    if (verdict) {
        verdict_result r;
        int status = run_verdict(o, &r);
        if (status == CLI_OK) {
            if (o->json)
                print_verdict_json(o, &r);
            else
                print_verdict_human(o, &r);
            if (o->csv && write_verdict_csv(o->csv, &r) != CLI_OK)
                status = CLI_FAIL;
            if (o->plot && write_verdict_plot(o->plot, o, &r) != CLI_OK)
                status = CLI_FAIL;
        }
        /* Every row calloc'd: one that failed may hold a run's figures. */
        for (int i = 0; r.rows && i < o->n_threads * o->n_depths * o->n_batches; i++) {
            loop_result_free(&r.rows[i].input);
            loop_result_free(&r.rows[i].step);
        }
        free(r.rows);
        return status;
    }
    if (o->overlap) {
        overlap_result r;
        int status = run_overlap(o, &r);
        if (status == CLI_OK && o->json)
            print_overlap_json(o, &r);
        else if (status == CLI_OK)
            print_overlap_human(o, &r);
        loop_result_free(&r.input);
        loop_result_free(&r.step);
        return status;
    }
    input_result r;
    int status = run_input_only(o, &r);
    if (status == CLI_OK && o->json)
        print_input_json(o, &r);
    else if (status == CLI_OK)
        print_input_human(o, &r);
    bench_sources_free(&r.src);
    return status;
}

int cmd_bench(int argc, char **argv)
{
    enum { O_INPUT = 256, O_OVERLAP, O_COMPUTE, O_BATCHES, O_DATA, O_JSON, O_MODEL, O_CSV,
           O_PLOT, O_WEIGHTS };
    static const struct option own[] = {
        {"input-only", no_argument, NULL, O_INPUT},
        {"overlap", no_argument, NULL, O_OVERLAP},
        {"compute-ms", required_argument, NULL, O_COMPUTE},
        {"batches", required_argument, NULL, O_BATCHES},
        {"data", required_argument, NULL, O_DATA},
        {"weights", required_argument, NULL, O_WEIGHTS},
        {"json", no_argument, NULL, O_JSON},
        {"model-width", required_argument, NULL, O_MODEL},
        {"csv", required_argument, NULL, O_CSV},
        {"plot", required_argument, NULL, O_PLOT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bench_opts o;
    int ch, have_compute = 0, have_dtype, have_layout;
    /* Static: what an early return leaves is still reachable, not lost. */
    static cli_data data;

    const struct option *longopts = cli_options(own, BENCH_LOPTS, NULL);
    memset(&o, 0, sizeof o);
    gf_default_settings(&o.s);
    o.s.batch_size = 64;
    o.s.height = o.s.width = 224;
    o.s.epochs = 1;
    cli_loader_args la = {.s = &o.s, .sweep = CLI_LOPT_SWEEPABLE};

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
        case O_DATA: if (cli_data_add(CMD, "data", &data, optarg)) return CLI_USAGE; break;
        case O_WEIGHTS: data.weights = optarg; break;
        case O_MODEL: if (cli_parse_int(CMD, "model-width", optarg, 1, 4096, &o.model_width)) return CLI_USAGE; break;
        case O_CSV: o.csv = optarg; break;
        case O_PLOT: o.plot = optarg; break;
        case O_JSON: o.json = 1; break;
        case 'h': usage(stdout); return CLI_OK;
        case ':': cli_error(CMD, "%s needs a value", argv[optind - 1]); return CLI_USAGE;
        default:
            if (cli_loader_parse_or_reject(CMD, ch, optarg, &la, argv[optind - 1]) < 0)
                return CLI_USAGE;
            break;
        }
    }
    /* The swept lists (one value each unless lists were given). */
    memcpy(o.threads, la.list[CLI_LOPT_THREADS], sizeof o.threads);
    memcpy(o.depths, la.list[CLI_LOPT_PREFETCH_DEPTH], sizeof o.depths);
    memcpy(o.batches, la.list[CLI_LOPT_BATCH_SIZE], sizeof o.batches);
    o.n_threads = la.n_list[CLI_LOPT_THREADS];
    o.n_depths = la.n_list[CLI_LOPT_PREFETCH_DEPTH];
    o.n_batches = la.n_list[CLI_LOPT_BATCH_SIZE];
    have_dtype = (la.given & CLI_LOPT(DTYPE)) != 0;
    have_layout = (la.given & CLI_LOPT(LAYOUT)) != 0;
    if (optind < argc) {
        cli_error(CMD, "unexpected argument '%s' (the data set goes after --data)", argv[optind]);
        return CLI_USAGE;
    }
    if (o.s.epochs == 0 && o.max_batches == 0) {
        cli_error(CMD, "--epochs 0 (unbounded) needs --batches N to end");
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
    if (cli_data_text(CMD, "data", &data, &o.s.data) < 0)
        return CLI_USAGE;
    if (!o.s.data) {
        cli_error(CMD, "--data DIR is required (try --help)");
        return CLI_USAGE;
    }

    int status = run_mode(&o, verdict);
    cli_data_free(&data);
    return status;
}

