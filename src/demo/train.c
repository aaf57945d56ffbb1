/*
 * gpufeed train: the demo a new user runs first. Trains the small CNN of
 * model.h on a training set and evaluates it on a validation set: an
 * ImageFolder root's train/ and val/ (--data; with no data option, a
 * synthetic one made once and cached), or any two sources the loader
 * reads (--train-data, --val-data: folders, list files, tar shards, sets
 * gpufeed prepare wrote), and runs the same training twice from the same
 * initial weights:
 *
 *   sync     the naive loop on one thread: read each file, decode and
 *            transform it (gf_decoder, the loader's transform), convert to
 *            normalised float32 NCHW, copy it to the device, step, wait;
 *   gpufeed  the prefetching loader (gf_open, float32 NCHW, normalised on
 *            the device side of the loader) feeding the same step.
 *
 * Before them, "compute alone": the model stepping on one cached batch,
 * the most the device can be kept busy. Per run it reports images/s, step
 * time, input stall (time the trainer waited for a batch), device
 * utilization (CPU: time inside gfm_train_step / wall; CUDA: the steps'
 * kernel time from events on the trainer's stream / wall) and CPU
 * utilization (process CPU time / wall / cores), and per epoch the mean
 * training loss and the held-out accuracy on the validation set (gf_open,
 * eval transform, no shuffle).
 *
 * Each epoch of the gpufeed run opens its loader and seeks to the epoch
 * (gf_seek), so every epoch starts from an empty ring, as the synchronous
 * loop does; the evaluation between epochs is outside the timed loops.
 *
 * Data-parallel (built with MPI, launched by mpirun or given --mpi): every
 * rank trains a replica on its share of each epoch (the loader's rank
 * shard, drop_last, so shares are disjoint and equal; the synchronous loop
 * takes every world-th sample of its order). Per step each rank computes
 * its gradient (gfm_grad_step), one MPI_Allreduce sums
 * [gradient x n, n, correct, loss x n] over the ranks, and every rank
 * applies the same mean gradient (gfm_apply), so the replicas stay equal.
 * A rank out of batches joins the all-reduce with n = 0 until every rank
 * is: the step count need not match. Rank 0 prints and evaluates on the
 * validation set; the others are quiet.
 *
 * --checkpoint FILE writes, after every epoch of the gpufeed run, the
 * model's parameters and momentum and the loader's gf_state (rank 0, for
 * all ranks: their positions are equal); --resume FILE restores them and
 * continues to --epochs, exactly: the same weights as a run that never
 * stopped. --stop-after STEPS stops the run after that many optimizer
 * steps, as a preempted job would: inside an epoch the checkpoint holds
 * the loader where every rank stopped (gf_get_state after the last batch
 * taken) and counts only the whole epochs done, so --resume goes on in
 * that epoch from there; on another number of ranks the new ranks take
 * the rest of it (the library's elastic resume, said in a note).
 *
 * This file is the command: its options, the order of the set-up, and
 * the runs' driver (compute alone, then each loader's epochs). It all
 * runs on one thread, the loader's consumer; train.h lists the other
 * files and what each owns.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "data_option.h"
#include "loader_options.h"
#include "sysinfo.h"
#include "train.h"

/* The default model: 60x60 input, its width calibrated (calibrate.c) so
 * the step is a little longer than the decode threads' batch: the
 * synchronous loop is input-bound and the loader can keep the model
 * busy, on any machine (bench/README.md, "gpufeed train"). Width 7 on a
 * set too small to time; --resume goes on at the checkpoint's width. */
#define DEFAULT_WIDTH 7
#define DEFAULT_SIZE 60

/* Compute alone: steps on one cached batch, at least this many and for at
 * least this long (after two untimed ones). */
#define ALONE_MIN_STEPS 10
#define ALONE_MIN_SECONDS 1.0

const char *const train_loader_names[] = {"sync", "gpufeed", "both", NULL};
static const char *const allreduce_names[] = {"auto", "mpi", "nccl", NULL};

/* The loader options train takes from the shared table
 * (src/cli/loader_options.h); its other options are its own. */
#define TRAIN_LOPTS                                                                        \
    (CLI_LOPT(THREADS) | CLI_LOPT(PREFETCH_DEPTH) | CLI_LOPT(BATCH_SIZE) | CLI_LOPT(DEVICE) | \
     CLI_LOPT(SEED) | CLI_LOPT(AUTOTUNE) | CLI_LOPT(STRICTNESS) | CLI_LOPT(ON_SHARD_ERROR))
/* Settings the model's input or the run decides (setup.c): not options. */
static const char *const train_fixed[] = {"height", "width", "channels", "mean", "std",
                                          "drop_last", NULL};
/* Where train's default or meaning is not the table's. */
static const char *const lopt_help[CLI_LOPT_COUNT] = {
    [CLI_LOPT_BATCH_SIZE] = "samples per batch (default 32)",
    [CLI_LOPT_SEED] = "weights, order and augmentation (default 0)",
    [CLI_LOPT_AUTOTUNE] = "the gpufeed loader adds threads and depth while it\n"
                          "runs (up to cores - 1 and --prefetch-depth)",
};

/* One shared option's help line(s), in train's order. */
static void lopt_usage(FILE *f, cli_lopt k)
{
    cli_loader_help(f, 1u << k, 0, 24, lopt_help, NULL);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpufeed train [options]\n"
            "\n"
            "Trains a small CNN twice from the same initial weights: fed by the naive\n"
            "synchronous loop (read, decode, copy, compute, one after the other), then\n"
            "by gpufeed's prefetching loader, and compares images/s, step time, input\n"
            "stall and device utilization, with held-out accuracy per epoch. With no\n"
            "data option it makes a synthetic data set once (train/ and val/, 10 classes,\n"
            "500x375 JPEGs) under ${XDG_CACHE_HOME:-~/.cache}/gpufeed/train-data.\n"
            "\n"
            "options:\n"
            "  --data DIR            ImageFolder root with train/ and val/ sub-folders\n"
            "  --train-data SPEC     the training set, any source gpufeed reads: an\n"
            "                        ImageFolder, a list file ('path label' lines) or tar\n"
            "                        shards ('DIR/train-{000000..000127}.tar', as gpufeed\n"
            "                        prepare writes them); needs --val-data, not --data;\n"
            "                        more than once: a mix of them (--weights)\n"
            "  --val-data SPEC       the validation set, evaluated after each epoch (eval\n"
            "                        transform), any source as above; the training set's\n"
            "                        classes (the same count)\n"
            "  --weights W[,W...]    with --train-data given more than once: the mix's\n"
            "                        weights, one each in their order (positive numbers;\n"
            "                        default 1 each); --mix-epoch, --mix-labels: below\n"
            "  --loader L            sync|gpufeed|both (default both)\n"
            "  --epochs E            epochs (default 3)\n");
    lopt_usage(f, CLI_LOPT_BATCH_SIZE);
    fprintf(f,
            "  --image-size S        model input S x S, a multiple of 4 (default %d)\n"
            "  --model-width W       channels of the first conv: compute per step\n"
            "                        (default: by calibration, the narrowest whose step\n"
            "                        takes >= 1.2x the loader's input per batch; %d on a\n"
            "                        set too small to time; --resume: the checkpoint's)\n",
            DEFAULT_SIZE, DEFAULT_WIDTH);
    lopt_usage(f, CLI_LOPT_THREADS);
    lopt_usage(f, CLI_LOPT_PREFETCH_DEPTH);
    fprintf(f, "  --lr X                SGD learning rate (default 0.05)\n");
    lopt_usage(f, CLI_LOPT_SEED);
    lopt_usage(f, CLI_LOPT_DEVICE);
    fprintf(f, "  --amp                 CUDA: float16 batches (half the bytes copied and\n"
               "                        stored); the model reads them and computes in float32\n");
    lopt_usage(f, CLI_LOPT_AUTOTUNE);
    lopt_usage(f, CLI_LOPT_STRICTNESS);
    lopt_usage(f, CLI_LOPT_ON_SHARD_ERROR);
    fprintf(f, "  the loader's other settings (`gpufeed settings` lists them all):\n");
    cli_loader_help(f, CLI_LOPT_GENERIC, 0, 24, NULL, train_fixed);
    fprintf(f,
            "  --json                print one JSON object\n"
            "  --checkpoint FILE     after each epoch, save model (parameters, momentum)\n"
            "                        and loader state (gpufeed loader only)\n"
            "  --resume FILE         restore a --checkpoint and continue to --epochs\n"
            "                        (the total), exactly as if never stopped; a checkpoint\n"
            "                        --stop-after wrote continues its epoch where it stopped,\n"
            "                        on this number of ranks or another\n"
            "  --stop-after STEPS    stop after STEPS optimizer steps of this run (counted\n"
            "                        across epochs), as a preempted job would, mid-epoch if\n"
            "                        it falls there; writes --checkpoint there, reports and\n"
            "                        exits 0 (gpufeed loader only)\n"
            "  --mpi                 data-parallel over MPI ranks even without mpirun's\n"
            "                        environment (under mpirun it is on by itself)%s\n"
            "  --allreduce A         auto|mpi|nccl: how data-parallel ranks sum their\n"
            "                        gradients (default auto: NCCL on CUDA devices where\n"
            "                        libnccl.so.2 loads on every rank, else MPI through host\n"
            "                        memory); nccl without mpirun trains one rank%s\n"
            "  --dump-indices PREFIX write the sample indices each rank took in this run's\n"
            "                        first epoch (gpufeed loader) to PREFIX.rankN, one per\n"
            "                        line: after --resume the rest of the resumed epoch,\n"
            "                        after --stop-after what came before the stop\n"
            "  -h, --help            this text\n"
            "\n"
            "Data-parallel: mpirun -np N gpufeed train ... trains one replica per rank on\n"
            "its share of each epoch, gradients averaged over the ranks every step.\n",
            GF_CLI_HAVE_MPI ? "" : " [not built: -Dmpi=enabled]",
            GF_CLI_HAVE_NCCL ? "" : " [nccl not built: needs CUDA and nccl.h]");
}

/* ---- a run --------------------------------------------------------------- */

static int make_model(trainer *t, gfm_model **m)
{
    char why[256] = "";
    if (gfm_create(m, &t->mc, why, sizeof why) < 0) {
        cli_error(CMD, "model: %s", *why ? why : "could not be created");
        *m = NULL;
        return CLI_FAIL;
    }
    return CLI_OK;
}

static int add_row(trainer *t, const epoch_row *row)
{
    epoch_row *p = realloc(t->rows, (size_t)(t->n_rows + 1) * sizeof *p);
    if (!p) {
        cli_error(CMD, "out of memory");
        return CLI_FAIL;
    }
    t->rows = p;
    t->rows[t->n_rows++] = *row;
    return CLI_OK;
}

static int run(trainer *t, int loader, run_result *r)
{
    gfm_model *m = NULL;
    sync_bufs sb;
    int status;

    memset(r, 0, sizeof *r);
    memset(&sb, 0, sizeof sb);
    r->loader = loader;
    train_nvml_take(t, r); /* readings from before: dropped */
    if ((status = make_model(t, &m)) != CLI_OK)
        return status;
    if (loader == L_SYNC && (status = train_sync_bufs_init(t, &sb)) != CLI_OK)
        goto out;
    if (t->have_resume && gfm_state_set(m, t->rparams, t->rvel) < 0) {
        cli_error(CMD, "model: %s", gfm_error(m));
        status = CLI_FAIL;
        goto out;
    }
    t->dp_on = t->dp;
    t->first_epoch_hash = t->first_epoch_samples = 0;
    t->stopped = t->stopped_mid = 0;
    for (int e = t->start_epoch; e < t->o->epochs; e++) {
        tally a = {0};
        if (t->o->stop_after && r->steps >= t->o->stop_after) {
            /* The limit fell on an epoch's end: that epoch's checkpoint
             * is written, the next is not begun. */
            t->stopped = 1;
            t->stop_epoch = e;
            break;
        }
        epoch_row row = {.loader = loader, .epoch = e + 1};
        uint64_t samples0 = r->samples;
        window w = {0}; /* the steps only: loops.c */
        if (loader == L_SYNC)
            status = train_epoch_sync(t, m, &sb, e, r, &a, &w);
        else
            status = train_epoch_gpufeed(t, m, e, r, &a, &w);
        r->cpu_s += w.cpu1 - w.cpu0;
        if (status != CLI_OK || (status = train_busy_collect(t, r)) != CLI_OK)
            goto out;
        report_progress_clear(t);
        r->wall_s += w.t1 - w.t0;
        if (t->stopped_mid) {
            /* --stop-after inside epoch e: no evaluation, no epoch row (the
             * epoch is not done); the checkpoint holds the loader where it
             * stopped and counts e epochs done, so --resume goes on in e. */
            if (t->o->checkpoint && t->rank == 0 && (status = checkpoint_save(t, m, e)) != CLI_OK)
                goto out;
            break;
        }
        row.seconds = w.t1 - w.t0;
        row.images_per_s = row.seconds > 0 ? (double)(r->samples - samples0) / row.seconds : 0;
        row.loss = a.n ? a.loss_sum / (double)a.n : NAN;
        row.train_accuracy = a.n ? (double)a.correct / (double)a.n : 0;
        if ((status = train_evaluate(t, m, &row.val_loss, &row.accuracy)) != CLI_OK)
            goto out;
        r->accuracy = row.accuracy;
        if ((status = add_row(t, &row)) != CLI_OK)
            goto out;
        report_epoch(t, loader, e, &row);
        if (t->o->checkpoint && loader == L_GPUFEED && t->rank == 0 &&
            (status = checkpoint_save(t, m, e + 1)) != CLI_OK)
            goto out;
    }
    train_nvml_take(t, r);
    r->checksum = gfm_checksum(m);
    r->global_samples = r->samples;
    t->rank_checksums[0] = r->checksum; /* one rank: its own */
    t->rank_samples[0] = r->samples;
    t->rank_hashes[0] = t->first_epoch_hash;
    status = dp_gather(t, r);
out:
    train_nvml_off(t); /* an epoch that failed inside its window */
    t->dp_on = 0;
    report_progress_clear(t);
    if (loader == L_SYNC)
        train_sync_bufs_free(t, &sb);
    gfm_destroy(m);
    return status;
}

/* The model stepping on one cached batch (the first of the synchronous
 * order, decoded once), on a model of its own so the training runs start
 * from the same weights: the most the device can be kept busy. */
static int compute_alone(trainer *t, run_result *r)
{
    gfm_model *m = NULL;
    sync_bufs sb;
    tally a = {0};
    int status, nb = t->o->batch;
    uint64_t steps = 0;
    double t0, cpu0;

    memset(r, 0, sizeof *r);
    r->loader = L_ALONE;
    if ((status = train_sync_bufs_init(t, &sb)) != CLI_OK)
        return status;
    if ((status = make_model(t, &m)) != CLI_OK)
        goto out;
    if ((uint64_t)nb > t->train_n)
        nb = (int)t->train_n;
    train_shuffle_order(sb.order, t->train_n, t->o->seed, 0);
    if ((status = train_sync_input(t, &sb, 0, 0, nb, &r->errors)) != CLI_OK)
        goto out;
    for (int i = 0; i < 2; i++) /* untimed: first-touch, caches, lazy init */
        if ((status = train_step(t, m, sb.dev, sb.labels, nb, 0, r, &a)) != CLI_OK)
            goto out;
    if ((status = train_tally_sync(t, m, &a)) != CLI_OK || (status = train_events_flush(t)) != CLI_OK)
        goto out;
    t->ev_busy_ms = 0;
    memset(r, 0, sizeof *r);
    r->loader = L_ALONE;
    train_nvml_take(t, r); /* readings from before: dropped */
    cpu0 = cli_cpu_seconds();
    t0 = cli_now();
    train_nvml_on(t);
    do {
        if ((status = train_step(t, m, sb.dev, sb.labels, nb, 0, r, &a)) != CLI_OK)
            goto out;
        steps++;
        if (t->cuda && steps % 8 == 0 && (status = train_tally_sync(t, m, &a)) != CLI_OK)
            goto out; /* the host must not run far ahead of the clock */
    } while (steps < ALONE_MIN_STEPS || cli_now() - t0 < ALONE_MIN_SECONDS);
    if ((status = train_tally_sync(t, m, &a)) != CLI_OK)
        goto out;
    r->wall_s = cli_now() - t0;
    train_nvml_off(t);
    train_nvml_take(t, r);
    r->cpu_s = cli_cpu_seconds() - cpu0;
    r->samples = steps * (uint64_t)nb;
    status = train_busy_collect(t, r);
out:
    train_nvml_off(t);
    gfm_destroy(m);
    train_sync_bufs_free(t, &sb);
    return status;
}

/* ---- the command ---------------------------------------------------------- */

#define GO_ON (-1) /* parse_args, check_args: no exit yet */

/* The options into o (the shared loader options through its
 * loader_settings), *loader_given if --loader was. Returns GO_ON, or the
 * status to exit with now (--help: CLI_OK). */
static int parse_args(int argc, char **argv, train_opts *o, int *loader_given)
{
    enum { O_DATA = 256, O_TRAIN_DATA, O_VAL_DATA, O_LOADER, O_EPOCHS, O_SIZE, O_WIDTH, O_LR,
           O_AMP, O_JSON, O_CKPT, O_RESUME, O_MPI, O_DUMP, O_ALLREDUCE, O_STOP_AFTER,
           O_WEIGHTS };
    static const struct option own[] = {
        {"data", required_argument, NULL, O_DATA},
        {"train-data", required_argument, NULL, O_TRAIN_DATA},
        {"weights", required_argument, NULL, O_WEIGHTS},
        {"val-data", required_argument, NULL, O_VAL_DATA},
        {"loader", required_argument, NULL, O_LOADER},
        {"epochs", required_argument, NULL, O_EPOCHS},
        {"image-size", required_argument, NULL, O_SIZE},
        {"model-width", required_argument, NULL, O_WIDTH},
        {"lr", required_argument, NULL, O_LR},
        {"amp", no_argument, NULL, O_AMP},
        {"json", no_argument, NULL, O_JSON},
        {"checkpoint", required_argument, NULL, O_CKPT},
        {"resume", required_argument, NULL, O_RESUME},
        {"stop-after", required_argument, NULL, O_STOP_AFTER},
        {"mpi", no_argument, NULL, O_MPI},
        {"allreduce", required_argument, NULL, O_ALLREDUCE},
        {"dump-indices", required_argument, NULL, O_DUMP},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    /* The shared options land here, then in o: the library's defaults
     * (threads and depth 0: chosen at open; device auto; seed 0), which are
     * train's, but for the batch size. */
    gf_settings s;
    gf_default_settings(&s);
    s.batch_size = 32;
    cli_loader_args la = {.s = &s};
    int ch;
    /* --train-data's, several a mix; static: o->train_data points into it
     * until the process ends. */
    static cli_data train;

    const struct option *longopts = cli_options(own, TRAIN_LOPTS, train_fixed);
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (ch) {
        case O_DATA:
            if (o->data) { /* a root's train/ and val/ are not a mix */
                cli_error(CMD, "--data names one root (its train/ and val/); to mix training "
                               "sets give --train-data more than once, with --val-data");
                return CLI_USAGE;
            }
            o->data = optarg;
            break;
        case O_TRAIN_DATA: if (cli_data_add(CMD, "train-data", &train, optarg)) return CLI_USAGE; break;
        case O_WEIGHTS: train.weights = optarg; break;
        case O_VAL_DATA: o->val_data = optarg; break;
        case O_LOADER: *loader_given = 1; if ((o->loader = cli_parse_choice(CMD, "loader", optarg, train_loader_names)) < 0) return CLI_USAGE; break;
        case O_EPOCHS: if (cli_parse_int(CMD, "epochs", optarg, 1, 100000, &o->epochs)) return CLI_USAGE; break;
        case O_SIZE: if (cli_parse_int(CMD, "image-size", optarg, 4, 4096, &o->size)) return CLI_USAGE; break;
        case O_WIDTH: if (cli_parse_int(CMD, "model-width", optarg, 1, 4096, &o->width)) return CLI_USAGE; break;
        case O_LR: if (cli_parse_double(CMD, "lr", optarg, 1e-9, 100, &o->lr)) return CLI_USAGE; break;
        case O_AMP: o->amp = 1; break;
        case O_JSON: o->json = 1; break;
        case O_CKPT: o->checkpoint = optarg; break;
        case O_RESUME: o->resume = optarg; break;
        case O_STOP_AFTER:
            if (cli_parse_u64(CMD, "stop-after", optarg, &o->stop_after))
                return CLI_USAGE;
            if (o->stop_after == 0) {
                cli_error(CMD, "--stop-after: 0 steps trains nothing (give 1 or more)");
                return CLI_USAGE;
            }
            break;
        case O_MPI: o->mpi = 1; break;
        case O_ALLREDUCE: if ((o->allreduce = cli_parse_choice(CMD, "allreduce", optarg, allreduce_names)) < 0) return CLI_USAGE; break;
        case O_DUMP: o->dump = optarg; break;
        case 'h': usage(stdout); return CLI_OK;
        case ':': cli_error(CMD, "%s needs a value", argv[optind - 1]); return CLI_USAGE;
        default:
            if (cli_loader_parse_or_reject(CMD, ch, optarg, &la, argv[optind - 1]) < 0)
                return CLI_USAGE;
            break;
        }
    }
    if (cli_data_text(CMD, "train-data", &train, &o->train_data) < 0)
        return CLI_USAGE;
    o->threads = s.threads;
    o->depth = s.prefetch_depth;
    o->batch = s.batch_size;
    o->device = s.device;
    o->seed = s.seed;
    o->autotune = s.autotune;
    o->loader_settings = s;
    return GO_ON;
}

/* What the options say together: the data named one way, the image size
 * the model takes, a checkpoint's loader, NCCL's build and device.
 * Returns GO_ON or CLI_USAGE with the message printed. */
static int check_args(int argc, char **argv, train_opts *o, int loader_given)
{
    if (optind < argc) {
        cli_error(CMD, "unexpected argument '%s' (the data goes after --data, or "
                       "--train-data and --val-data)", argv[optind]);
        return CLI_USAGE;
    }
    /* One way to name the data: a root, or both sets (no validation set
     * would leave the accuracy, the run's other half, unmeasured). */
    if (o->data && (o->train_data || o->val_data)) {
        cli_error(CMD, "--data %s names the training and validation sets itself (its train/ "
                       "and val/): not with --%s-data; give --train-data and --val-data alone",
                  o->data, o->train_data ? "train" : "val");
        return CLI_USAGE;
    }
    if (!o->train_data != !o->val_data) {
        cli_error(CMD, "--%s-data needs --%s-data too: training is evaluated on a validation "
                       "set after each epoch",
                  o->train_data ? "train" : "val", o->train_data ? "val" : "train");
        return CLI_USAGE;
    }
    if (o->size % 4) {
        cli_error(CMD, "--image-size: %d is not a multiple of 4 (the model pools twice)", o->size);
        return CLI_USAGE;
    }

    if (o->checkpoint || o->resume || o->stop_after) {
        /* The loader's state is the gpufeed loop's; --stop-after stops
         * where a checkpoint can resume, so it is that loop's too. */
        if (loader_given && o->loader != L_GPUFEED) {
            cli_error(CMD, "--%s: use --loader gpufeed",
                      o->stop_after ? "stop-after stops the gpufeed loader's run"
                                    : "checkpoint/--resume save and restore the gpufeed loader");
            return CLI_USAGE;
        }
        o->loader = L_GPUFEED;
    }

    if (o->allreduce == AR_NCCL) {
        if (!GF_CLI_HAVE_NCCL) {
            cli_error(CMD, "--allreduce nccl: this gpufeed was built without NCCL (it needs "
                           "the cuda feature and nccl.h; meson setup -Dnccl=enabled)");
            return CLI_USAGE;
        }
        if (o->device == GF_DEVICE_CPU) {
            cli_error(CMD, "--allreduce nccl sums gradients on CUDA devices: not with "
                           "--device cpu");
            return CLI_USAGE;
        }
    }
    return GO_ON;
}

/* Everything a run needs after the launch: the rank tallies, the
 * --dump-indices file, the data sets (the demo set made by rank 0), the
 * probe, the model's width and sizes, the allreduce. Returns CLI_OK or the
 * status to exit with, the message printed. */
static int prepare_run(trainer *t)
{
    const train_opts *o = t->o;
    int status = CLI_OK;
    t->tty = isatty(STDOUT_FILENO) && t->rank == 0;
    t->rank_checksums = calloc((size_t)t->world, sizeof *t->rank_checksums);
    t->rank_samples = calloc((size_t)t->world, sizeof *t->rank_samples);
    t->rank_hashes = calloc((size_t)t->world, sizeof *t->rank_hashes);
    if (!t->rank_checksums || !t->rank_samples || !t->rank_hashes) {
        cli_error(CMD, "out of memory");
        return CLI_FAIL;
    }
    if (o->dump) {
        char path[4200];
        snprintf(path, sizeof path, "%s.rank%d", o->dump, t->rank);
        if (!(t->dump = fopen(path, "w"))) {
            cli_error(CMD, "--dump-indices %s: %s", path, strerror(errno));
            return CLI_USAGE;
        }
    }
    if (o->train_data) {
        if (strlen(o->train_data) >= sizeof t->train_data ||
            strlen(o->val_data) >= sizeof t->val_data) {
            cli_error(CMD, "--%s-data: longer than %zu bytes",
                      strlen(o->train_data) >= sizeof t->train_data ? "train" : "val",
                      sizeof t->train_data - 1);
            return CLI_USAGE;
        }
        snprintf(t->train_data, sizeof t->train_data, "%s", o->train_data);
        snprintf(t->val_data, sizeof t->val_data, "%s", o->val_data);
    } else if (o->data) {
        if ((status = train_data_from_root(t, o->data)) != CLI_OK)
            return status;
    } else {
        /* Rank 0 makes the demo set; the others find it made. */
        if (t->rank == 0)
            status = train_demo_data(t);
        status = dp_share_status(t, status);
        if (status == CLI_OK && t->rank != 0)
            status = train_demo_data(t);
        if (status != CLI_OK)
            return status;
    }
    if ((status = train_probe(t)) != CLI_OK)
        return status;
    /* no --model-width: calibrated */
    if (!o->width && (status = train_choose_width(t, DEFAULT_WIDTH)) != CLI_OK)
        return status;
    if (t->dp && (status = dp_allreduce_setup(t)) != CLI_OK)
        return status;
    {
        gfm_model *m = NULL;
        if ((status = make_model(t, &m)) != CLI_OK)
            return status;
        t->step_flops = gfm_step_flops(m);
        t->n_params = gfm_param_count(m);
        gfm_destroy(m);
        if (!(t->gbuf = malloc((t->n_params + 3) * sizeof *t->gbuf))) {
            cli_error(CMD, "out of memory");
            return CLI_FAIL;
        }
    }
    return CLI_OK;
}

int cmd_train(int argc, char **argv)
{
    train_opts o = {.epochs = 3, .size = DEFAULT_SIZE, .width = 0, .lr = 0.05,
                    .loader = L_BOTH};
    trainer t;
    run_result runs[2];
    int n_runs = 0, status = CLI_OK, loader_given = 0;

    if ((status = parse_args(argc, argv, &o, &loader_given)) != GO_ON ||
        (status = check_args(argc, argv, &o, loader_given)) != GO_ON)
        return status;

    memset(&t, 0, sizeof t);
    t.o = &o;
    t.rank = 0;
    t.world = 1;
    if ((status = dp_init(&t, &argc, &argv)) != CLI_OK) {
        if (!t.mpi)
            return status;
        goto out;
    }
    if ((status = prepare_run(&t)) != CLI_OK)
        goto out;
    if (o.resume && (status = checkpoint_load(&t)) != CLI_OK)
        goto out;
    report_intro(&t);
    if ((status = compute_alone(&t, &t.alone)) != CLI_OK)
        goto out;
    report_alone(&t);
    if (o.loader == L_SYNC || o.loader == L_BOTH) {
        if ((status = run(&t, L_SYNC, &runs[n_runs])) != CLI_OK)
            goto out;
        n_runs++;
    }
    if (o.loader == L_GPUFEED || o.loader == L_BOTH) {
        if ((status = run(&t, L_GPUFEED, &runs[n_runs])) != CLI_OK)
            goto out;
        n_runs++;
    }
    if (o.json)
        report_json(&t, runs, n_runs);
    else
        report_table(&t, runs, n_runs);
    if (t.dp) {
        for (int i = 1; i < t.world; i++)
            if (t.rank_checksums[i] != t.rank_checksums[0]) {
                if (t.rank == 0)
                    cli_error(CMD, "rank %d ended with other weights than rank 0", i);
                status = CLI_FAIL;
            }
    }
out:
    fflush(stdout);
    dp_abort(&t, status);
    train_free(&t);
    dp_finalize(&t);
    return status;
}
