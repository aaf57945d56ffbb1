/*
 * gpufeed train: the demo a new user runs first. Trains the small CNN of
 * model.h on an ImageFolder with train/ and val/ sub-folders (with no
 * --data, a synthetic one made once and cached) and runs the same training
 * twice from the same initial weights:
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
 * training loss and the held-out accuracy on val/ (gf_open, eval
 * transform, no shuffle).
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
 * is: the step count need not match. Rank 0 prints and evaluates on val/;
 * the others are quiet.
 *
 * --checkpoint FILE writes, after every epoch of the gpufeed run, the
 * model's parameters and momentum and the loader's gf_state (rank 0, for
 * all ranks: their positions are equal); --resume FILE restores them and
 * continues to --epochs, exactly: the same weights as a run that never
 * stopped.
 */
#include <errno.h>
#include <ftw.h>
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

#ifndef GF_CLI_HAVE_MPI
#define GF_CLI_HAVE_MPI 0
#endif
#ifndef GF_CLI_HAVE_NCCL
#define GF_CLI_HAVE_NCCL 0
#endif
#if GF_CLI_HAVE_MPI
#include <mpi.h>
#endif
#if GF_CLI_HAVE_NCCL
#include "nccl_dl.h"
#endif
#if GF_CLI_HAVE_CUDA
#include "nvml.h"
#endif

#define CMD "train"

#ifndef GF_CLI_HAVE_CUDA
#define GF_CLI_HAVE_CUDA 0
#endif

/* The default data set: 10 classes, 500x375 photo-like JPEGs (decode cost
 * as a photo of that size), train and val made with different seeds. */
#define DEMO_CLASSES 10
#define DEMO_TRAIN_PER_CLASS 200
#define DEMO_VAL_PER_CLASS 50
#define DEMO_W 500
#define DEMO_H 375

/* The default model: width 7 at 60x60, a step a little shorter than one
 * decode thread's batch on the build machine (input / compute ~1.06), so
 * the synchronous loop is input-bound and one decode thread still keeps
 * the model ~94% busy (bench/README.md, "gpufeed train"). */
#define DEFAULT_WIDTH 7
#define DEFAULT_SIZE 60

/* Compute alone: steps on one cached batch, at least this many and for at
 * least this long (after two untimed ones). */
#define ALONE_MIN_STEPS 10
#define ALONE_MIN_SECONDS 1.0

/* CUDA: step events kept before the host waits once to read them. */
#define EVENT_PAIRS 256

/* The progress line is redrawn at most this often (seconds). */
#define PROGRESS_EVERY 0.25

enum { L_SYNC = 0, L_GPUFEED = 1, L_BOTH = 2, L_ALONE = 3 };
static const char *const loader_names[] = {"sync", "gpufeed", "both", NULL};
static const char *const device_names[] = {"auto", "cuda", "cpu", NULL};
enum { AR_AUTO = 0, AR_MPI = 1, AR_NCCL = 2 };
static const char *const allreduce_names[] = {"auto", "mpi", "nccl", NULL};

/* ImageNet's statistics on 0..255 values. */
static const float MEAN[3] = {123.7f, 116.3f, 103.5f};
static const float STD[3] = {58.4f, 57.1f, 57.4f};

typedef struct train_opts {
    const char *data; /* NULL: the cached demo set */
    const char *checkpoint, *resume, *dump; /* --checkpoint, --resume, --dump-indices */
    int epochs, batch, size, threads, depth, width, amp, json, loader, mpi, autotune, allreduce;
    double lr;
    uint64_t seed;
    gf_device device;
} train_opts;

/* One training run (or compute alone): sums over its timed loops. */
typedef struct run_result {
    int loader;
    uint64_t samples, steps;
    double wall_s;  /* the training loops, evaluation excluded */
    double input_s; /* waiting for a batch (sync: reading, decoding,
                       converting, copying) */
    double busy_s;  /* device busy with the steps */
    double cpu_s;   /* process CPU time during the loops */
    uint64_t errors;
    uint64_t checksum;
    double accuracy; /* held-out, after the last epoch */
    double comm_s;   /* data-parallel: in the all-reduce (MPI: the call; NCCL:
                        its time on the stream, from events) */
    uint64_t global_samples; /* data-parallel: all ranks' samples */
    double nvml_util;        /* NVML's mean over the timed loops; -1: none */
    int nvml_readings;
} run_result;

typedef struct epoch_row {
    int loader, epoch;
    double loss, train_accuracy, val_loss, accuracy, seconds, images_per_s;
} epoch_row;

/* Loss/correct accumulated over an epoch. On CUDA a step returns the
 * previous step's figures: pending_n is the size of the step whose
 * figures are still to come. */
typedef struct tally {
    double loss_sum;
    uint64_t correct, n;
    int pending_n;
} tally;

typedef struct trainer {
    const train_opts *o;
    char root[4096], train_dir[4112], val_dir[4112];
    gf_loader *train_index; /* train/'s index: the synchronous loop reads through it */
    uint64_t train_n;
    int classes;
    uint64_t val_samples;
    int cuda;      /* the device is CUDA (the loader's choice) */
    int amp;       /* --amp on CUDA: float16 batches into the model */
    int tuned_threads, tuned_depth; /* --autotune: its choice so far, carried
                                       from epoch to epoch */
    uint64_t tune_changes;
    int device_id;
    char device_note[160];
    gfm_config mc;
    void *stream;  /* CUDA: the trainer's stream */
    void *ev[2 * EVENT_PAIRS];
    int ev_used;
    double ev_busy_ms;
    int tty;
    double last_progress;
    epoch_row *rows;
    int n_rows;
    run_result alone;
    double step_flops; /* multiply-adds per sample of one step */

    /* data-parallel */
    int mpi;           /* MPI_Init was called */
    int dp;            /* steps all-reduce their gradients (MPI, or NCCL) */
    int dp_on;         /* inside a training run (compute alone is local) */
    int rank, world;
    int explicit_rank; /* the launcher's environment names no rank: set
                          the loader's rank/world from MPI */
    size_t n_params;
    float *gbuf;       /* n_params + 3: gradient x n, n, correct, loss x n */
    void *nccl;        /* cli_nccl: the gradients are summed on the devices */
    void *nvml;        /* cli_nvml: sampling the device's utilization (CUDA) */
    char nvml_note[320];
    void *nccl_ev[2];  /* around the all-reduce on the stream */
    char allreduce_desc[600];
    FILE *dump;        /* --dump-indices: this rank's first-epoch indices */
    uint64_t first_epoch_hash, first_epoch_samples;
    uint64_t *rank_checksums, *rank_samples, *rank_hashes; /* gathered */
    /* checkpoints */
    int start_epoch;   /* --resume: the epochs done */
    gf_state lstate;   /* the loader's state after the last epoch */
    int have_resume;
    gf_state rstate;
    float *rparams, *rvel;
} trainer;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpufeed train [options]\n"
            "\n"
            "Trains a small CNN twice from the same initial weights: fed by the naive\n"
            "synchronous loop (read, decode, copy, compute, one after the other), then\n"
            "by gpufeed's prefetching loader, and compares images/s, step time, input\n"
            "stall and device utilization, with held-out accuracy per epoch. With no\n"
            "--data it makes a synthetic data set once (train/ and val/, 10 classes,\n"
            "500x375 JPEGs) under ${XDG_CACHE_HOME:-~/.cache}/gpufeed/train-data.\n"
            "\n"
            "options:\n"
            "  --data DIR            ImageFolder root with train/ and val/ sub-folders\n"
            "  --loader L            sync|gpufeed|both (default both)\n"
            "  --epochs E            epochs (default 3)\n"
            "  --batch-size B        samples per batch (default 32)\n"
            "  --image-size S        model input S x S, a multiple of 4 (default %d)\n"
            "  --model-width W       channels of the first conv: compute per step\n"
            "                        (default %d)\n"
            "  --threads N           decode threads (default: cores - 1, at least 1)\n"
            "  --prefetch-depth D    batch slots in the ring (default 4)\n"
            "  --lr X                SGD learning rate (default 0.05)\n"
            "  --seed S              weights, order and augmentation (default 0)\n"
            "  --device D            auto|cuda|cpu (default auto: CUDA if there is a GPU)\n"
            "  --amp                 CUDA: float16 batches (half the bytes copied and\n"
            "                        stored); the model reads them and computes in float32\n"
            "  --autotune            the gpufeed loader adds threads and depth while it\n"
            "                        runs (up to cores - 1 and --prefetch-depth)\n"
            "  --json                print one JSON object\n"
            "  --checkpoint FILE     after each epoch, save model (parameters, momentum)\n"
            "                        and loader state (gpufeed loader only)\n"
            "  --resume FILE         restore a --checkpoint and continue to --epochs\n"
            "                        (the total), exactly as if never stopped\n"
            "  --mpi                 data-parallel over MPI ranks even without mpirun's\n"
            "                        environment (under mpirun it is on by itself)%s\n"
            "  --allreduce A         auto|mpi|nccl: how data-parallel ranks sum their\n"
            "                        gradients (default auto: NCCL on CUDA devices where\n"
            "                        libnccl.so.2 loads on every rank, else MPI through host\n"
            "                        memory); nccl without mpirun trains one rank%s\n"
            "  --dump-indices PREFIX write each rank's first-epoch sample indices (gpufeed\n"
            "                        loader) to PREFIX.rankN, one per line\n"
            "  -h, --help            this text\n"
            "\n"
            "Data-parallel: mpirun -np N gpufeed train ... trains one replica per rank on\n"
            "its share of each epoch, gradients averaged over the ranks every step.\n",
            DEFAULT_SIZE, DEFAULT_WIDTH, GF_CLI_HAVE_MPI ? "" : " [not built: -Dmpi=enabled]",
            GF_CLI_HAVE_NCCL ? "" : " [nccl not built: needs CUDA and nccl.h]");
}

/* ---- the data set ------------------------------------------------------- */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int mkdir_parents(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        int rc = mkdir(path, 0777);
        *p = '/';
        if (rc != 0 && errno != EEXIST)
            return -1;
    }
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

/* The cached demo set: made once in a side folder, then renamed into
 * place, so an interrupted run never leaves a half-made set behind. */
static int demo_data(trainer *t)
{
    const char *cache = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    char parent[4000], part[4100], sub[4200];
    if (cache && *cache)
        snprintf(parent, sizeof parent, "%s/gpufeed", cache);
    else if (home && *home)
        snprintf(parent, sizeof parent, "%s/.cache/gpufeed", home);
    else {
        cli_error(CMD, "neither XDG_CACHE_HOME nor HOME is set: give --data DIR");
        return CLI_USAGE;
    }
    snprintf(t->root, sizeof t->root, "%s/train-data", parent);
    snprintf(sub, sizeof sub, "%s/train", t->root);
    if (is_dir(sub))
        return CLI_OK;
    if (mkdir_parents(parent) < 0) {
        cli_error(CMD, "%s: %s", parent, strerror(errno));
        return CLI_FAIL;
    }
    snprintf(part, sizeof part, "%s/train-data.partial", parent);
    if (is_dir(part))
        nftw(part, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (!t->o->json) {
        printf("making the demo data set (once): %d classes, %d train + %d val images, "
               "%dx%d JPEG, in %s\n",
               DEMO_CLASSES, DEMO_CLASSES * DEMO_TRAIN_PER_CLASS,
               DEMO_CLASSES * DEMO_VAL_PER_CLASS, DEMO_W, DEMO_H, t->root);
        fflush(stdout);
    }
    snprintf(sub, sizeof sub, "%s/train", part);
    if (cli_make_dataset(CMD, sub, DEMO_CLASSES, DEMO_TRAIN_PER_CLASS, DEMO_W, DEMO_H, 0, 0, 1) <
        0)
        return CLI_FAIL;
    snprintf(sub, sizeof sub, "%s/val", part);
    if (cli_make_dataset(CMD, sub, DEMO_CLASSES, DEMO_VAL_PER_CLASS, DEMO_W, DEMO_H, 1, 0, 1) < 0)
        return CLI_FAIL;
    if (rename(part, t->root) != 0) {
        cli_error(CMD, "%s -> %s: %s (remove %s and run again)", part, t->root, strerror(errno),
                  t->root);
        return CLI_FAIL;
    }
    return CLI_OK;
}

/* ---- loaders ------------------------------------------------------------- */

static void loader_settings(const trainer *t, gf_settings *s, int eval)
{
    const train_opts *o = t->o;
    gf_default_settings(s);
    s->data = eval ? t->val_dir : t->train_dir;
    s->seed = o->seed;
    s->epochs = 1;
    s->batch_size = o->batch;
    s->height = s->width = o->size;
    s->threads = o->autotune && t->tuned_threads ? t->tuned_threads : o->threads;
    s->prefetch_depth = o->depth;
    s->autotune = o->autotune && !eval;
    s->device = o->device;
    s->dtype = t->amp ? GF_DTYPE_FLOAT16 : GF_DTYPE_FLOAT32;
    s->layout = GF_LAYOUT_NCHW;
    for (int c = 0; c < 3; c++) {
        s->mean[c] = MEAN[c];
        s->std[c] = STD[c];
    }
    /* Evaluation (rank 0 only) and single-process training read the whole
     * set; data-parallel training reads the rank's share, from the
     * launcher's environment (world 0) unless it names none. */
    s->rank = 0;
    s->world = 1;
    if (!eval && t->dp) {
        s->drop_last = 1; /* disjoint, equal shares; full batches */
        if (t->explicit_rank) {
            s->rank = t->rank;
            s->world = t->world;
        } else {
            s->world = 0;
        }
    }
    if (eval) {
        s->transform = GF_TRANSFORM_EVAL;
        s->shuffle = 0;
    } else {
        /* Gentler than the default 0.08: the model is small and the
         * images are small. */
        s->scale_min = 0.35f;
        s->scale_max = 1.0f;
    }
}

static int open_loader(const gf_settings *s, gf_loader **l)
{
    int rc = gf_open(l, s);
    if (rc < 0) {
        const char *msg = *l ? gf_last_error(*l) : "";
        if (*msg)
            cli_error(CMD, "%s", msg);
        else
            cli_error(CMD, "%s: %s", s->data, gf_strerror(rc));
        gf_close(l);
        return CLI_USAGE;
    }
    return CLI_OK;
}

static int loader_failed(gf_loader *l, int rc)
{
    const char *msg = gf_last_error(l);
    cli_error(CMD, "%s", *msg ? msg : gf_strerror(rc));
    return CLI_FAIL;
}

/* ---- timing the steps ---------------------------------------------------- */

/* NVML sampling on during the timed loops only (CUDA, where it loaded). */
static void nvml_on(trainer *t)
{
#if GF_CLI_HAVE_CUDA
    if (t->nvml)
        cli_nvml_resume(t->nvml);
#else
    (void)t;
#endif
}

static void nvml_off(trainer *t)
{
#if GF_CLI_HAVE_CUDA
    if (t->nvml)
        cli_nvml_pause(t->nvml);
#else
    (void)t;
#endif
}

static void nvml_take(trainer *t, run_result *r)
{
    r->nvml_util = -1;
    r->nvml_readings = 0;
#if GF_CLI_HAVE_CUDA
    if (t->nvml)
        cli_nvml_take(t->nvml, &r->nvml_util, &r->nvml_readings);
#else
    (void)t;
#endif
}

#if GF_CLI_HAVE_CUDA
static int cuda_failed(void)
{
    cli_error(CMD, "CUDA: %s", cli_cuda_error());
    return CLI_FAIL;
}
#endif

/* CUDA: reads the step events recorded so far (one host wait). */
static int events_flush(trainer *t)
{
#if GF_CLI_HAVE_CUDA
    if (!t->cuda || t->ev_used == 0)
        return CLI_OK;
    if (cli_cuda_stream_sync(t->stream) < 0)
        return cuda_failed();
    for (int i = 0; i < t->ev_used; i++) {
        double ms;
        if (cli_cuda_event_ms(t->ev[2 * i], t->ev[2 * i + 1], &ms) < 0)
            return cuda_failed();
        t->ev_busy_ms += ms;
    }
#endif
    t->ev_used = 0;
    return CLI_OK;
}

static void tally_add(tally *a, float loss, int correct, int n)
{
    if (n <= 0)
        return;
    a->loss_sum += (double)loss * n;
    a->correct += (uint64_t)(correct > 0 ? correct : 0);
    a->n += (uint64_t)n;
}

/* CUDA: makes the last step's figures current (waits for the stream). */
static int tally_sync(trainer *t, gfm_model *m, tally *a)
{
    float loss = 0;
    int correct = 0;
    if (!t->cuda)
        return CLI_OK;
    if (gfm_sync(m, &loss, &correct) < 0) {
        cli_error(CMD, "model: the queued steps failed");
        return CLI_FAIL;
    }
    tally_add(a, loss, correct, a->pending_n);
    a->pending_n = 0;
    return CLI_OK;
}

/* One training step on x (host memory on the CPU, device memory ready on
 * the trainer's stream on CUDA), its device time added to r->busy_s (CPU)
 * or to the event pairs (CUDA). wait: the naive loop's per-step wait
 * for the result (loss.item() in a PyTorch loop). */
#define HAVE_DP (GF_CLI_HAVE_MPI || GF_CLI_HAVE_NCCL)
#if HAVE_DP
/* The sums of a data-parallel step: [gradient x n, n, correct, loss x n]
 * over the ranks, on the host (MPI) or on the devices (NCCL, in the
 * model's packed array); *totals gets the last three. */
static int dp_sum_host(trainer *t, gfm_model *m, const float *x, const int32_t *labels, int n,
                       run_result *r, float totals[3])
{
#if GF_CLI_HAVE_MPI
    const size_t P = t->n_params;
    float *g = t->gbuf, loss = 0;
    int correct = 0;
    double t0 = cli_now();
    if (n > 0) {
        if (gfm_grad_step(m, x, labels, n, t->stream, g, &loss, &correct) < 0) {
            cli_error(CMD, "model: %s", gfm_error(m));
            return CLI_FAIL;
        }
        for (size_t i = 0; i < P; i++)
            g[i] *= (float)n;
    } else {
        memset(g, 0, P * sizeof *g);
    }
    g[P] = (float)n;
    g[P + 1] = (float)(correct > 0 ? correct : 0);
    g[P + 2] = loss * (float)n;
    double t1 = cli_now();
    int rc = MPI_Allreduce(MPI_IN_PLACE, g, (int)(P + 3), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double t2 = cli_now();
    r->comm_s += t2 - t1;
    if (rc != MPI_SUCCESS) {
        cli_error(CMD, "MPI_Allreduce failed (%d)", rc);
        return CLI_FAIL;
    }
    if (g[P] > 0) {
        const float inv = 1.0f / g[P];
        for (size_t i = 0; i < P; i++)
            g[i] *= inv;
        if (gfm_apply(m, g, t->stream) < 0) {
            cli_error(CMD, "model: %s", gfm_error(m));
            return CLI_FAIL;
        }
    }
    memcpy(totals, g + P, 3 * sizeof *totals);
    r->busy_s += (t1 - t0) + (cli_now() - t2);
    return CLI_OK;
#else
    (void)t, (void)m, (void)x, (void)labels, (void)n, (void)r, (void)totals;
    cli_error(CMD, "built without MPI");
    return CLI_FAIL;
#endif
}

static int dp_sum_device(trainer *t, gfm_model *m, const float *x, const int32_t *labels,
                         int n, run_result *r, float totals[3])
{
#if GF_CLI_HAVE_NCCL
    char why[512];
    float *packed;
    double comm_ms = 0, t0 = cli_now();
    if (gfm_grad_pack(m, x, labels, n, t->stream, &packed) < 0) {
        cli_error(CMD, "model: %s", gfm_error(m));
        return CLI_FAIL;
    }
    if (cli_cuda_event_record(t->nccl_ev[0], t->stream) < 0)
        return cuda_failed();
    if (cli_nccl_sum(t->nccl, packed, t->n_params + 3, t->stream, why, sizeof why) < 0) {
        cli_error(CMD, "%s", why);
        return CLI_FAIL;
    }
    if (cli_cuda_event_record(t->nccl_ev[1], t->stream) < 0)
        return cuda_failed();
    if (gfm_apply_packed(m, t->stream, totals) < 0) { /* waits for the sum */
        cli_error(CMD, "model: %s", gfm_error(m));
        return CLI_FAIL;
    }
    if (cli_cuda_event_ms(t->nccl_ev[0], t->nccl_ev[1], &comm_ms) < 0)
        return cuda_failed();
    r->comm_s += comm_ms * 1e-3;
    double busy = cli_now() - t0 - comm_ms * 1e-3;
    r->busy_s += busy > 0 ? busy : 0;
    return CLI_OK;
#else
    (void)t, (void)m, (void)x, (void)labels, (void)n, (void)r, (void)totals;
    cli_error(CMD, "built without NCCL");
    return CLI_FAIL;
#endif
}

/* A data-parallel step: this rank's gradient on its n samples (n = 0: it
 * has no batch left and joins with nothing), summed over the ranks
 * weighted by their sample counts, the mean applied on every rank. The
 * tally gets the global figures. *global_n: the samples of the step
 * over all ranks (0: every rank is done). */
static int dp_step(trainer *t, gfm_model *m, const float *x, const int32_t *labels, int n,
                   run_result *r, tally *a, uint64_t *global_n)
{
    float tot[3];
    int rc = t->nccl ? dp_sum_device(t, m, x, labels, n, r, tot)
                     : dp_sum_host(t, m, x, labels, n, r, tot);
    if (rc != CLI_OK)
        return rc;
    *global_n = (uint64_t)tot[0];
    if (tot[0] > 0) {
        tally_add(a, tot[2] * (1.0f / tot[0]), (int)tot[1], (int)tot[0]);
        r->steps++;
    }
    return CLI_OK;
}
#endif

/* Data-parallel: after this rank's last batch of an epoch, all-reduces
 * with nothing until every rank is done. */
static int dp_drain(trainer *t, gfm_model *m, run_result *r, tally *a)
{
#if HAVE_DP
    uint64_t global_n = 1;
    while (t->dp_on && global_n > 0)
        if (dp_step(t, m, NULL, NULL, 0, r, a, &global_n) != CLI_OK)
            return CLI_FAIL;
#else
    (void)t, (void)m, (void)r, (void)a;
#endif
    return CLI_OK;
}

static int step(trainer *t, gfm_model *m, const float *x, const int32_t *labels, int n,
                int wait, run_result *r, tally *a)
{
    float loss = 0;
    int correct = 0, rc;
#if HAVE_DP
    if (t->dp_on) {
        uint64_t global_n;
        return dp_step(t, m, x, labels, n, r, a, &global_n);
    }
#endif
    if (!t->cuda) {
        double t0 = cli_now();
        rc = gfm_train_step(m, x, labels, n, NULL, &loss, &correct);
        r->busy_s += cli_now() - t0;
        if (rc < 0) {
            cli_error(CMD, "model: training step failed");
            return CLI_FAIL;
        }
        tally_add(a, loss, correct, n);
        r->steps++;
        return CLI_OK;
    }
#if GF_CLI_HAVE_CUDA
    if (t->ev_used == EVENT_PAIRS && events_flush(t) != CLI_OK)
        return CLI_FAIL;
    if (cli_cuda_event_record(t->ev[2 * t->ev_used], t->stream) < 0)
        return cuda_failed();
    rc = gfm_train_step(m, x, labels, n, t->stream, &loss, &correct);
    if (cli_cuda_event_record(t->ev[2 * t->ev_used + 1], t->stream) < 0)
        return cuda_failed();
    t->ev_used++;
    if (rc < 0) {
        cli_error(CMD, "model: training step failed");
        return CLI_FAIL;
    }
    tally_add(a, loss, correct, a->pending_n); /* the previous step's */
    a->pending_n = n;
    r->steps++;
    if (wait)
        return tally_sync(t, m, a);
    return CLI_OK;
#else
    (void)wait;
    return CLI_FAIL;
#endif
}

/* The device time of a run's steps: CUDA events read at the end of each
 * loop (CPU: measured around each step as it ran). */
static int busy_collect(trainer *t, run_result *r)
{
    if (!t->cuda)
        return CLI_OK;
    if (events_flush(t) != CLI_OK)
        return CLI_FAIL;
    r->busy_s += t->ev_busy_ms * 1e-3;
    t->ev_busy_ms = 0;
    return CLI_OK;
}

static void progress(trainer *t, int loader, int epoch, uint64_t step_no, uint64_t steps,
                     uint64_t samples, double t0, double input_s, int force)
{
    double now = cli_now();
    if (!t->tty || t->o->json || (!force && now - t->last_progress < PROGRESS_EVERY))
        return;
    t->last_progress = now;
    double el = now - t0;
    printf("\r  %-8s epoch %d/%d  step %" PRIu64 "/%" PRIu64 "  %6.0f images/s  stall %3.0f%%\033[K",
           loader_names[loader], epoch + 1, t->o->epochs, step_no, steps,
           el > 0 ? (double)samples / el : 0.0, el > 0 ? 100 * input_s / el : 0.0);
    fflush(stdout);
}

static void progress_clear(trainer *t)
{
    if (t->tty && !t->o->json) {
        printf("\r\033[K");
        fflush(stdout);
    }
}

/* ---- the synchronous loop ------------------------------------------------ */

/* uint8 HWC (the decoder's output) -> normalised float32 NCHW. */
static void to_nchw(const uint8_t *in, int n, int h, int w, float *out)
{
    size_t plane = (size_t)h * (size_t)w;
    for (int i = 0; i < n; i++) {
        const uint8_t *px = in + (size_t)i * plane * 3;
        float *o = out + (size_t)i * plane * 3;
        for (int c = 0; c < 3; c++) {
            float sc = 1.0f / STD[c], mu = MEAN[c];
            float *oc = o + (size_t)c * plane;
            for (size_t k = 0; k < plane; k++)
                oc[k] = ((float)px[k * 3 + (size_t)c] - mu) * sc;
        }
    }
}

static uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The epoch's order for the synchronous loop: a Fisher-Yates shuffle
 * seeded by (seed, epoch). (The loader's sampler is its own; both are
 * uniform permutations.) */
static void shuffle_order(uint64_t *order, uint64_t n, uint64_t seed, uint64_t epoch)
{
    uint64_t st = mix64(seed ^ mix64(epoch + 0x5EED));
    for (uint64_t i = 0; i < n; i++)
        order[i] = i;
    for (uint64_t i = n; i > 1; i--) {
        st = mix64(st);
        uint64_t j = st % i;
        uint64_t tmp = order[i - 1];
        order[i - 1] = order[j];
        order[j] = tmp;
    }
}

/* Buffers of the synchronous loop (and of compute alone). */
typedef struct sync_bufs {
    gf_decoder *dec;
    uint8_t *u8;      /* batch x H x W x 3 */
    float *host;      /* batch x 3 x H x W */
    uint16_t *half;   /* --amp: host as float16 */
    float *dev;       /* CUDA: the device copy (float16 with --amp); else == host */
    int32_t *labels;
    uint64_t *order;
    size_t cell;      /* bytes of one decoded sample */
    size_t fbytes;    /* bytes of one batch as the model reads it */
} sync_bufs;

static void sync_bufs_free(trainer *t, sync_bufs *b)
{
    gf_decoder_close(&b->dec);
#if GF_CLI_HAVE_CUDA
    if (t->cuda)
        cli_cuda_free(b->dev);
#else
    (void)t;
#endif
    free(b->u8);
    free(b->host);
    free(b->half);
    free(b->labels);
    free(b->order);
    memset(b, 0, sizeof *b);
}

static int sync_bufs_init(trainer *t, sync_bufs *b)
{
    gf_settings s;
    size_t n = (size_t)t->train_n;
    int B = t->o->batch;
    loader_settings(t, &s, 0);
    memset(b, 0, sizeof *b);
    b->cell = (size_t)t->o->size * (size_t)t->o->size * 3;
    b->fbytes = b->cell * (size_t)B * (t->amp ? sizeof(uint16_t) : sizeof(float));
    b->u8 = malloc(b->cell * (size_t)B);
    b->host = malloc(b->cell * (size_t)B * sizeof(float));
    b->half = t->amp ? malloc(b->fbytes) : NULL;
    b->labels = malloc((size_t)B * sizeof *b->labels);
    b->order = malloc((n ? n : 1) * sizeof *b->order);
    if (!b->u8 || !b->host || (t->amp && !b->half) || !b->labels || !b->order ||
        gf_decoder_open(&b->dec, &s) < 0) {
        sync_bufs_free(t, b);
        cli_error(CMD, "out of memory");
        return CLI_FAIL;
    }
    b->dev = b->host;
#if GF_CLI_HAVE_CUDA
    if (t->cuda && cli_cuda_malloc((void **)&b->dev, b->fbytes) < 0) {
        b->dev = NULL;
        sync_bufs_free(t, b);
        return cuda_failed();
    }
#endif
    return CLI_OK;
}

/* The input of one synchronous batch: read + decode + convert + copy. */
static int sync_input(trainer *t, sync_bufs *b, uint64_t epoch, uint64_t pos, int nb,
                      uint64_t *errors)
{
    cli_read_decode(t->train_index, b->dec, b->order + pos, nb, epoch, b->u8, b->cell, errors);
    for (int i = 0; i < nb; i++)
        b->labels[i] = gf_sample_label(t->train_index, b->order[pos + (uint64_t)i]);
    to_nchw(b->u8, nb, t->o->size, t->o->size, b->host);
    const void *src = b->host;
    if (t->amp) { /* as the loader's float16: one rounding of the float */
        size_t count = b->cell * (size_t)nb;
        for (size_t i = 0; i < count; i++)
            b->half[i] = cli_f16_bits(b->host[i]);
        src = b->half;
    }
#if GF_CLI_HAVE_CUDA
    if (t->cuda &&
        cli_cuda_memcpy_h2d(b->dev, src, b->fbytes / (size_t)t->o->batch * (size_t)nb) < 0)
        return cuda_failed();
#else
    (void)src;
#endif
    return CLI_OK;
}

static int epoch_sync(trainer *t, gfm_model *m, sync_bufs *b, int epoch, run_result *r,
                      tally *a)
{
    uint64_t n = t->train_n, B = (uint64_t)t->o->batch;
    uint64_t steps, k = 0;
    double t0 = cli_now(), input_s = 0;
    shuffle_order(b->order, n, t->o->seed, (uint64_t)epoch);
    if (t->dp_on) { /* the rank's share: every world-th, full batches */
        uint64_t share = n / (uint64_t)t->world;
        for (uint64_t i = 0; i < share; i++)
            b->order[i] = b->order[i * (uint64_t)t->world + (uint64_t)t->rank];
        n = share - share % B;
    }
    steps = (n + B - 1) / B;
    for (uint64_t pos = 0; pos < n; pos += B, k++) {
        int nb = (int)(n - pos < B ? n - pos : B);
        double ti = cli_now();
        if (sync_input(t, b, (uint64_t)epoch, pos, nb, &r->errors) != CLI_OK)
            return CLI_FAIL;
        input_s += cli_now() - ti;
        if (step(t, m, b->dev, b->labels, nb, 1, r, a) != CLI_OK)
            return CLI_FAIL;
        r->samples += (uint64_t)nb;
        progress(t, L_SYNC, epoch, k + 1, steps, pos + (uint64_t)nb, t0, input_s, 0);
    }
    r->input_s += input_s;
    return dp_drain(t, m, r, a);
}

/* ---- the gpufeed loop ---------------------------------------------------- */

static int epoch_gpufeed(trainer *t, gfm_model *m, int epoch, run_result *r, tally *a,
                         double *t0_out, double *cpu0_out)
{
    gf_settings s;
    gf_loader *l = NULL;
    gf_stats st;
    gf_batch *b;
    uint64_t steps, k = 0, samples = 0;
    double input_s = 0, t0;
    int rc, status = CLI_OK;

    loader_settings(t, &s, 0);
    s.epochs = (uint64_t)epoch + 1;
    if ((status = open_loader(&s, &l)) != CLI_OK)
        return status;
    gf_get_stats(l, &st);
    if (t->dp && (st.rank != t->rank || st.world != t->world)) {
        /* The loader took its share from the launcher's environment. */
        if (st.world != 1 || t->explicit_rank) {
            cli_error(CMD, "the loader reads share %d of %d (launcher's environment), MPI says "
                           "rank %d of %d", st.rank, st.world, t->rank, t->world);
            status = CLI_FAIL;
            goto out;
        }
        t->explicit_rank = 1; /* no rank in the environment: MPI's */
        gf_close(&l);
        loader_settings(t, &s, 0);
        s.epochs = (uint64_t)epoch + 1;
        if ((status = open_loader(&s, &l)) != CLI_OK)
            return status;
    }
    if (t->have_resume && epoch == t->start_epoch) {
        gf_state rs = t->rstate;
        rs.rank = (uint32_t)t->rank; /* equal positions on every rank */
        rc = gf_set_state(l, &rs);
    } else {
        rc = gf_seek(l, (uint64_t)epoch, 0);
    }
    if (rc < 0) {
        status = loader_failed(l, rc);
        goto out;
    }
    gf_get_stats(l, &st);
    steps = (st.epoch_samples + (uint64_t)st.batch_size - 1) / (uint64_t)st.batch_size;
    /* The window opens at the first gf_next: opening (indexing, starting
     * threads) is a once-per-run cost a trainer pays before its loop. */
    *cpu0_out = cli_cpu_seconds();
    t0 = *t0_out = cli_now();
    for (;;) {
        double ti = cli_now();
        rc = gf_next(l, &b);
        input_s += cli_now() - ti;
        if (rc == GF_EOF)
            break;
        if (rc < 0) {
            status = loader_failed(l, rc);
            goto out;
        }
        if ((b->device == GF_DEVICE_CUDA) != (t->cuda != 0)) {
            gf_release(l, b);
            cli_error(CMD, "a batch arrived on %s, expected %s",
                      b->device == GF_DEVICE_CUDA ? "cuda" : "cpu", t->cuda ? "cuda" : "cpu");
            status = CLI_FAIL;
            goto out;
        }
        if (t->cuda && (rc = gf_batch_wait(b, t->stream)) < 0) {
            gf_release(l, b);
            status = loader_failed(l, rc);
            goto out;
        }
        int n = b->count;
        if (epoch == t->start_epoch) { /* the run's first epoch: what this rank read */
            for (int i = 0; i < n; i++) {
                t->first_epoch_hash += mix64((uint64_t)b->indices[i] + 1);
                if (t->dump)
                    fprintf(t->dump, "%" PRId64 "\n", b->indices[i]);
            }
            t->first_epoch_samples += (uint64_t)n;
        }
        status = step(t, m, b->data, b->labels, n, 0, r, a);
        rc = t->cuda ? gf_release_stream(l, b, t->stream) : gf_release(l, b);
        if (status != CLI_OK)
            goto out;
        if (rc < 0) {
            status = loader_failed(l, rc);
            goto out;
        }
        samples += (uint64_t)n;
        k++;
        progress(t, L_GPUFEED, epoch, k, steps, samples, t0, input_s, 0);
    }
    gf_get_stats(l, &st);
    if (st.autotune) {
        t->tuned_threads = st.threads;
        t->tuned_depth = st.prefetch_depth;
        t->tune_changes += st.autotune_changes;
    }
    r->errors += st.errors;
    r->samples += samples;
    r->input_s += input_s;
    if ((rc = gf_get_state(l, &t->lstate)) < 0) {
        status = loader_failed(l, rc);
        goto out;
    }
    if (t->dump && epoch == t->start_epoch && fflush(t->dump) != 0) {
        cli_error(CMD, "--dump-indices: %s", strerror(errno));
        status = CLI_FAIL;
        goto out;
    }
    status = dp_drain(t, m, r, a);
out:
    gf_close(&l);
    return status;
}

/* ---- evaluation ---------------------------------------------------------- */

static int evaluate(trainer *t, gfm_model *m, double *loss, double *acc)
{
    gf_settings s;
    gf_loader *l = NULL;
    gf_batch *b;
    double loss_sum = 0;
    uint64_t correct = 0, n = 0;
    int rc, status;

    if (t->rank != 0) { /* rank 0 evaluates, the others go on */
        *loss = NAN;
        *acc = NAN;
        return CLI_OK;
    }
    loader_settings(t, &s, 1);
    if ((status = open_loader(&s, &l)) != CLI_OK)
        return status;
    while ((rc = gf_next(l, &b)) == 0) {
        float lo = 0;
        int c = 0;
        if (t->cuda && (rc = gf_batch_wait(b, t->stream)) < 0) {
            gf_release(l, b);
            break;
        }
        int erc = gfm_evaluate(m, b->data, b->labels, b->count, t->stream, &lo, &c);
        int cnt = b->count;
        rc = t->cuda ? gf_release_stream(l, b, t->stream) : gf_release(l, b);
        if (erc < 0) {
            cli_error(CMD, "model: evaluation failed");
            gf_close(&l);
            return CLI_FAIL;
        }
        if (rc < 0)
            break;
        loss_sum += (double)lo * cnt;
        correct += (uint64_t)(c > 0 ? c : 0);
        n += (uint64_t)cnt;
    }
    if (rc != GF_EOF) {
        status = loader_failed(l, rc);
        gf_close(&l);
        return status;
    }
    gf_close(&l);
    *loss = n ? loss_sum / (double)n : NAN;
    *acc = n ? (double)correct / (double)n : 0;
    return CLI_OK;
}

/* ---- checkpoints ---------------------------------------------------------- */

/* The file, in this machine's byte order:
 *   "GFTRAIN\0", then u32 version, world, width, image size, classes,
 *   batch size, 0 (pad); u64 seed, epochs done, parameter count; the
 *   loader's gf_state as u32 version, rank, world, 0, u64 seed, epoch,
 *   position; float parameters[count], momentum[count] (the gfm_checksum
 *   layout); u64 FNV-1a of all the bytes before it. */
#define CKPT_MAGIC "GFTRAIN"
#define CKPT_VERSION 1u

typedef struct ckpt_head {
    char magic[8];
    uint32_t version, world, width, size, classes, batch, pad;
    uint64_t seed, epochs_done, n_params;
    uint32_t st_version, st_rank, st_world, st_pad;
    uint64_t st_seed, st_epoch, st_position;
} ckpt_head;

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Written to FILE.tmp, then renamed over FILE: a crash never leaves a
 * torn checkpoint. */
static int checkpoint_save(trainer *t, gfm_model *m, int epochs_done)
{
    const char *path = t->o->checkpoint;
    size_t n = t->n_params, bytes = n * sizeof(float);
    float *params = malloc(bytes ? bytes : 1), *vel = malloc(bytes ? bytes : 1);
    char tmp[4200];
    ckpt_head h;
    FILE *f = NULL;
    int ok = 0;
    if (!params || !vel) {
        cli_error(CMD, "out of memory");
        goto out;
    }
    if (gfm_state_get(m, params, vel) < 0) {
        cli_error(CMD, "model: %s", gfm_error(m));
        goto out;
    }
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CKPT_MAGIC, sizeof CKPT_MAGIC);
    h.version = CKPT_VERSION;
    h.world = (uint32_t)t->world;
    h.width = (uint32_t)t->o->width;
    h.size = (uint32_t)t->o->size;
    h.classes = (uint32_t)t->classes;
    h.batch = (uint32_t)t->o->batch;
    h.seed = t->o->seed;
    h.epochs_done = (uint64_t)epochs_done;
    h.n_params = n;
    h.st_version = t->lstate.version;
    h.st_rank = t->lstate.rank;
    h.st_world = t->lstate.world;
    h.st_seed = t->lstate.seed;
    h.st_epoch = t->lstate.epoch;
    h.st_position = t->lstate.position;
    uint64_t sum = fnv1a(0xcbf29ce484222325ull, &h, sizeof h);
    sum = fnv1a(sum, params, bytes);
    sum = fnv1a(sum, vel, bytes);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (!(f = fopen(tmp, "wb")) || fwrite(&h, sizeof h, 1, f) != 1 ||
        (n && (fwrite(params, bytes, 1, f) != 1 || fwrite(vel, bytes, 1, f) != 1)) ||
        fwrite(&sum, sizeof sum, 1, f) != 1 || fflush(f) != 0 || fsync(fileno(f)) != 0) {
        cli_error(CMD, "--checkpoint %s: %s", tmp, strerror(errno));
        goto out;
    }
    if (fclose(f) != 0) {
        f = NULL;
        cli_error(CMD, "--checkpoint %s: %s", tmp, strerror(errno));
        goto out;
    }
    f = NULL;
    if (rename(tmp, path) != 0) {
        cli_error(CMD, "--checkpoint %s -> %s: %s", tmp, path, strerror(errno));
        goto out;
    }
    ok = 1;
out:
    if (f) {
        fclose(f);
        remove(tmp);
    }
    free(params);
    free(vel);
    return ok ? CLI_OK : CLI_FAIL;
}

/* Reads --resume into t (checked against this run's model and world);
 * the model and the loader get it when the run starts. */
static int checkpoint_load(trainer *t)
{
    const char *path = t->o->resume;
    ckpt_head h;
    uint64_t sum, want;
    size_t n = t->n_params, bytes = n * sizeof(float);
    FILE *f = fopen(path, "rb");
    int status = CLI_USAGE;
    if (!f) {
        cli_error(CMD, "--resume %s: %s", path, strerror(errno));
        return CLI_USAGE;
    }
    t->rparams = malloc(bytes ? bytes : 1);
    t->rvel = malloc(bytes ? bytes : 1);
    if (!t->rparams || !t->rvel) {
        cli_error(CMD, "out of memory");
        status = CLI_FAIL;
        goto out;
    }
    if (fread(&h, sizeof h, 1, f) != 1 || memcmp(h.magic, CKPT_MAGIC, sizeof CKPT_MAGIC) != 0) {
        cli_error(CMD, "--resume %s: not a gpufeed train checkpoint", path);
        goto out;
    }
    if (h.version != CKPT_VERSION) {
        cli_error(CMD, "--resume %s: checkpoint version %u, this gpufeed reads %u", path,
                  h.version, CKPT_VERSION);
        goto out;
    }
    if (h.n_params != n || h.width != (uint32_t)t->o->width || h.size != (uint32_t)t->o->size ||
        h.classes != (uint32_t)t->classes) {
        cli_error(CMD, "--resume %s: saved for model width %u, image size %u, %u classes "
                       "(%" PRIu64 " parameters); this run has width %d, size %d, %d classes",
                  path, h.width, h.size, h.classes, h.n_params, t->o->width, t->o->size,
                  t->classes);
        goto out;
    }
    if (h.world != (uint32_t)t->world || h.seed != t->o->seed) {
        cli_error(CMD, "--resume %s: saved by %u rank%s with seed %" PRIu64 "; this run has %d "
                       "with seed %" PRIu64 " (resume with the same --seed and ranks)",
                  path, h.world, h.world == 1 ? "" : "s", h.seed, t->world, t->o->seed);
        goto out;
    }
    if ((n && (fread(t->rparams, bytes, 1, f) != 1 || fread(t->rvel, bytes, 1, f) != 1)) ||
        fread(&sum, sizeof sum, 1, f) != 1) {
        cli_error(CMD, "--resume %s: truncated", path);
        goto out;
    }
    want = fnv1a(0xcbf29ce484222325ull, &h, sizeof h);
    want = fnv1a(want, t->rparams, bytes);
    want = fnv1a(want, t->rvel, bytes);
    if (sum != want) {
        cli_error(CMD, "--resume %s: checksum mismatch (damaged file)", path);
        goto out;
    }
    if (h.epochs_done > 100000) {
        cli_error(CMD, "--resume %s: %" PRIu64 " epochs done?", path, h.epochs_done);
        goto out;
    }
    if (h.batch != (uint32_t)t->o->batch && !t->o->json)
        fprintf(stderr, "gpufeed train: note: the checkpoint was trained with batch size %u, "
                        "this run uses %d\n", h.batch, t->o->batch);
    t->rstate.version = h.st_version;
    t->rstate.rank = h.st_rank;
    t->rstate.world = h.st_world;
    t->rstate.seed = h.st_seed;
    t->rstate.epoch = h.st_epoch;
    t->rstate.position = h.st_position;
    t->start_epoch = (int)h.epochs_done;
    t->have_resume = 1;
    status = CLI_OK;
out:
    fclose(f);
    return status;
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
    nvml_take(t, r); /* readings from before: dropped */
    if ((status = make_model(t, &m)) != CLI_OK)
        return status;
    if (loader == L_SYNC && (status = sync_bufs_init(t, &sb)) != CLI_OK)
        goto out;
    if (t->have_resume && gfm_state_set(m, t->rparams, t->rvel) < 0) {
        cli_error(CMD, "model: %s", gfm_error(m));
        status = CLI_FAIL;
        goto out;
    }
    t->dp_on = t->dp;
    t->first_epoch_hash = t->first_epoch_samples = 0;
    for (int e = t->start_epoch; e < t->o->epochs; e++) {
        tally a = {0};
        epoch_row row = {.loader = loader, .epoch = e + 1};
        uint64_t samples0 = r->samples;
        double cpu0 = cli_cpu_seconds(), t0 = cli_now(), t1;
        nvml_on(t);
        if (loader == L_SYNC)
            status = epoch_sync(t, m, &sb, e, r, &a);
        else
            status = epoch_gpufeed(t, m, e, r, &a, &t0, &cpu0);
        if (status == CLI_OK)
            status = tally_sync(t, m, &a); /* CUDA: the epoch's queued work done */
        t1 = cli_now();
        nvml_off(t);
        r->cpu_s += cli_cpu_seconds() - cpu0;
        if (status != CLI_OK || (status = busy_collect(t, r)) != CLI_OK)
            goto out;
        progress_clear(t);
        r->wall_s += t1 - t0;
        row.seconds = t1 - t0;
        row.images_per_s = row.seconds > 0 ? (double)(r->samples - samples0) / row.seconds : 0;
        row.loss = a.n ? a.loss_sum / (double)a.n : NAN;
        row.train_accuracy = a.n ? (double)a.correct / (double)a.n : 0;
        if ((status = evaluate(t, m, &row.val_loss, &row.accuracy)) != CLI_OK)
            goto out;
        r->accuracy = row.accuracy;
        if ((status = add_row(t, &row)) != CLI_OK)
            goto out;
        if (!t->o->json) {
            printf("  %-8s epoch %d/%d  loss %.3f  train acc %5.1f%%  val acc %5.1f%%  "
                   "%6.0f images/s%s  %.1f s\n",
                   loader_names[loader], e + 1, t->o->epochs, row.loss,
                   100 * row.train_accuracy, 100 * row.accuracy, row.images_per_s,
                   t->dp ? " (rank 0)" : "", row.seconds);
            fflush(stdout);
        }
        if (t->o->checkpoint && loader == L_GPUFEED && t->rank == 0 &&
            (status = checkpoint_save(t, m, e + 1)) != CLI_OK)
            goto out;
    }
    nvml_take(t, r);
    r->checksum = gfm_checksum(m);
    r->global_samples = r->samples;
    t->rank_checksums[0] = r->checksum; /* one rank: its own */
    t->rank_samples[0] = r->samples;
    t->rank_hashes[0] = t->first_epoch_hash;
#if GF_CLI_HAVE_MPI
    if (t->dp && t->mpi) { /* every rank's weights, samples and first-epoch hash, on rank 0 */
        uint64_t mine[3] = {r->checksum, r->samples, t->first_epoch_hash}, *all;
        all = malloc((size_t)t->world * 3 * sizeof *all);
        if (!all) {
            cli_error(CMD, "out of memory");
            status = CLI_FAIL;
            goto out;
        }
        MPI_Allgather(mine, 3, MPI_UINT64_T, all, 3, MPI_UINT64_T, MPI_COMM_WORLD);
        r->global_samples = 0;
        for (int i = 0; i < t->world; i++) {
            t->rank_checksums[i] = all[3 * i];
            t->rank_samples[i] = all[3 * i + 1];
            t->rank_hashes[i] = all[3 * i + 2];
            r->global_samples += all[3 * i + 1];
        }
        free(all);
    }
#endif
out:
    t->dp_on = 0;
    progress_clear(t);
    if (loader == L_SYNC)
        sync_bufs_free(t, &sb);
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
    if ((status = sync_bufs_init(t, &sb)) != CLI_OK)
        return status;
    if ((status = make_model(t, &m)) != CLI_OK)
        goto out;
    if ((uint64_t)nb > t->train_n)
        nb = (int)t->train_n;
    shuffle_order(sb.order, t->train_n, t->o->seed, 0);
    if ((status = sync_input(t, &sb, 0, 0, nb, &r->errors)) != CLI_OK)
        goto out;
    for (int i = 0; i < 2; i++) /* untimed: first-touch, caches, lazy init */
        if ((status = step(t, m, sb.dev, sb.labels, nb, 0, r, &a)) != CLI_OK)
            goto out;
    if ((status = tally_sync(t, m, &a)) != CLI_OK || (status = events_flush(t)) != CLI_OK)
        goto out;
    t->ev_busy_ms = 0;
    memset(r, 0, sizeof *r);
    r->loader = L_ALONE;
    nvml_take(t, r); /* readings from before: dropped */
    cpu0 = cli_cpu_seconds();
    t0 = cli_now();
    nvml_on(t);
    do {
        if ((status = step(t, m, sb.dev, sb.labels, nb, 0, r, &a)) != CLI_OK)
            goto out;
        steps++;
        if (t->cuda && steps % 8 == 0 && (status = tally_sync(t, m, &a)) != CLI_OK)
            goto out; /* the host must not run far ahead of the clock */
    } while (steps < ALONE_MIN_STEPS || cli_now() - t0 < ALONE_MIN_SECONDS);
    if ((status = tally_sync(t, m, &a)) != CLI_OK)
        goto out;
    r->wall_s = cli_now() - t0;
    nvml_off(t);
    nvml_take(t, r);
    r->cpu_s = cli_cpu_seconds() - cpu0;
    r->samples = steps * (uint64_t)nb;
    status = busy_collect(t, r);
out:
    nvml_off(t);
    gfm_destroy(m);
    sync_bufs_free(t, &sb);
    return status;
}

/* ---- setup --------------------------------------------------------------- */

/* Where the batches are (the loader resolves AUTO), the classes and the
 * validation set's size: one look at val/ through a loader. */
static int probe(trainer *t)
{
    gf_settings s;
    gf_loader *l = NULL;
    gf_stats st;
    int status, train_classes = 0;

    int rc = cli_open_index(t->train_dir, &t->train_index);
    if (rc < 0) {
        const char *msg = t->train_index ? gf_last_error(t->train_index) : "";
        cli_error(CMD, "%s", *msg ? msg : gf_strerror(rc));
        return CLI_USAGE;
    }
    gf_get_stats(t->train_index, &st);
    t->train_n = st.dataset_samples;
    train_classes = st.classes;
    loader_settings(t, &s, 1);
    if ((status = open_loader(&s, &l)) != CLI_OK)
        return status;
    gf_get_stats(l, &st);
    gf_close(&l);
    t->cuda = st.device == GF_DEVICE_CUDA;
    t->device_id = st.device_id < 0 ? 0 : st.device_id;
    snprintf(t->device_note, sizeof t->device_note, "%s", st.device_note);
    t->val_samples = st.epoch_samples;
    t->classes = st.classes;
    if (train_classes != st.classes) {
        cli_error(CMD, "%s has %d classes, %s has %d: they must be the same classes",
                  t->train_dir, train_classes, t->val_dir, st.classes);
        return CLI_USAGE;
    }
    if (t->cuda) {
#if GF_CLI_HAVE_CUDA
        if (cli_cuda_set_device(t->device_id) < 0 || cli_cuda_stream_create(&t->stream) < 0)
            return cuda_failed();
        for (int i = 0; i < 2 * EVENT_PAIRS; i++)
            if (cli_cuda_event_create(&t->ev[i]) < 0)
                return cuda_failed();
        cli_cuda_device info;
        char why[256] = "";
        if (cli_cuda_device_info(t->device_id, &info) < 0)
            snprintf(t->nvml_note, sizeof t->nvml_note, "NVML: no PCI bus id for device %d",
                     t->device_id);
        else if (cli_nvml_open((cli_nvml **)&t->nvml, info.pci_bus_id, why, sizeof why) < 0)
            snprintf(t->nvml_note, sizeof t->nvml_note, "NVML: %s", why);
#else
        cli_error(CMD, "the loader delivers on CUDA, but this gpufeed was built without CUDA; "
                       "use --device cpu");
        return CLI_FAIL;
#endif
    }
    memset(&t->mc, 0, sizeof t->mc);
    t->mc.in_c = 3;
    t->mc.in_h = t->mc.in_w = t->o->size;
    t->mc.classes = t->classes;
    t->mc.width = t->o->width;
    t->mc.seed = t->o->seed;
    t->mc.lr = (float)t->o->lr;
    t->mc.momentum = 0.9f;
    t->mc.weight_decay = 5e-4f;
    t->mc.device = t->cuda ? GFM_CUDA : GFM_CPU;
    t->mc.device_id = t->device_id;
    t->amp = t->o->amp && t->cuda;
    t->mc.amp = t->amp;
    return CLI_OK;
}

static void trainer_free(trainer *t)
{
#if GF_CLI_HAVE_CUDA
    cli_nvml_close(t->nvml);
#endif
#if GF_CLI_HAVE_NCCL
    cli_nccl_destroy(t->nccl);
    cli_cuda_event_destroy(t->nccl_ev[0]);
    cli_cuda_event_destroy(t->nccl_ev[1]);
#endif
#if GF_CLI_HAVE_CUDA
    for (int i = 0; i < 2 * EVENT_PAIRS; i++)
        cli_cuda_event_destroy(t->ev[i]);
    cli_cuda_stream_destroy(t->stream);
#endif
    gf_close(&t->train_index);
    free(t->rows);
    free(t->gbuf);
    free(t->rank_checksums);
    free(t->rank_samples);
    free(t->rank_hashes);
    free(t->rparams);
    free(t->rvel);
    if (t->dump)
        fclose(t->dump);
}

/* Data-parallel: how the ranks sum their gradients. NCCL (--allreduce
 * nccl, or auto on CUDA) where libnccl loads on every rank, bootstrapped
 * over MPI (rank 0's id, broadcast); else MPI through host memory. */
static int allreduce_setup(trainer *t)
{
    const int want = t->o->allreduce;
    snprintf(t->allreduce_desc, sizeof t->allreduce_desc, "MPI_Allreduce (host memory)");
#if GF_CLI_HAVE_NCCL
    char why[512] = "", desc[560];
    int ok = want == AR_NCCL || (want == AR_AUTO && t->cuda);
    if (ok && cli_nccl_load(why, sizeof why) < 0) {
        if (want == AR_NCCL) {
            cli_error(CMD, "--allreduce nccl: %s", why);
            return CLI_FAIL;
        }
        ok = 0;
    }
    if (want == AR_NCCL && !t->cuda) {
        cli_error(CMD, "--allreduce nccl sums gradients on CUDA devices; the loader delivers "
                       "on the CPU%s%s",
                  t->device_note[0] ? ": " : "", t->device_note);
        return CLI_USAGE;
    }
#if GF_CLI_HAVE_MPI
    if (t->mpi && want == AR_AUTO) { /* every rank the same way, or none */
        int all = ok;
        MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        ok = all;
    }
    if (ok && t->mpi && t->world > 1) {
        /* NCCL refuses two ranks on one GPU (its init fails on every
         * rank); find that first, by host and PCI bus id. */
        enum { KEY = 320 };
        char key[KEY] = "", host[256] = "", *all = malloc((size_t)t->world * KEY);
        cli_cuda_device info;
        if (!all) {
            cli_error(CMD, "out of memory");
            return CLI_FAIL;
        }
        gethostname(host, sizeof host - 1);
        if (cli_cuda_device_info(t->device_id, &info) == 0)
            snprintf(key, sizeof key, "%s/%s", host, info.pci_bus_id);
        else
            snprintf(key, sizeof key, "%s/device %d", host, t->device_id);
        MPI_Allgather(key, KEY, MPI_CHAR, all, KEY, MPI_CHAR, MPI_COMM_WORLD);
        int a = -1, b = -1;
        for (int i = 0; i < t->world && a < 0; i++)
            for (int j = i + 1; j < t->world; j++)
                if (strncmp(all + (size_t)i * KEY, all + (size_t)j * KEY, KEY) == 0) {
                    a = i, b = j;
                    break;
                }
        if (a >= 0) {
            snprintf(why, sizeof why, "ranks %d and %d share GPU %.200s: NCCL needs one GPU per "
                     "rank", a, b, all + (size_t)a * KEY);
            ok = 0;
        }
        free(all);
        if (!ok && want == AR_NCCL) {
            cli_error(CMD, "--allreduce nccl: %s (use --allreduce mpi, or fewer ranks)", why);
            return CLI_USAGE;
        }
    }
#endif
    if (!ok) {
        if (want == AR_AUTO && t->cuda && why[0])
            snprintf(t->allreduce_desc, sizeof t->allreduce_desc,
                     "MPI_Allreduce (host memory; NCCL: %s)", why);
        if (!t->mpi) { /* one rank without MPI: only for --allreduce nccl */
            cli_error(CMD, "--allreduce nccl: NCCL is not usable here%s%s", why[0] ? ": " : "",
                      why);
            return CLI_FAIL;
        }
        return CLI_OK;
    }
    unsigned char id[CLI_NCCL_ID_BYTES];
    int rc = t->rank == 0 ? cli_nccl_unique_id(id, why, sizeof why) : 0;
#if GF_CLI_HAVE_MPI
    if (t->mpi) {
        int st = rc;
        MPI_Bcast(&st, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (st == 0)
            MPI_Bcast(id, CLI_NCCL_ID_BYTES, MPI_BYTE, 0, MPI_COMM_WORLD);
        else if (rc == 0)
            snprintf(why, sizeof why, "rank 0 could not make an NCCL id");
        rc = st;
    }
#endif
    cli_nccl *c = NULL;
    if (rc == 0)
        rc = cli_nccl_init(&c, t->world, t->rank, id, why, sizeof why);
    if (rc < 0) {
        cli_error(CMD, "NCCL: %s", why);
        return CLI_FAIL;
    }
    t->nccl = c;
    if (cli_cuda_event_create(&t->nccl_ev[0]) < 0 || cli_cuda_event_create(&t->nccl_ev[1]) < 0)
        return cuda_failed();
    snprintf(t->allreduce_desc, sizeof t->allreduce_desc, "ncclAllReduce on the GPUs, %s",
             cli_nccl_describe(desc, sizeof desc));
#else
    (void)want;
#endif
    return CLI_OK;
}

/* ---- report -------------------------------------------------------------- */

typedef struct figures {
    double images_per_s, step_ms, stall, device_util, cpu_util, of_alone;
} figures;

static figures figures_of(const trainer *t, const run_result *r)
{
    figures f = {0};
    int cores = cli_cores();
    double alone = t->alone.wall_s > 0 ? t->alone.busy_s / t->alone.wall_s : 0;
    if (r->wall_s <= 0)
        return f;
    f.images_per_s = (double)r->samples / r->wall_s;
    f.step_ms = r->steps ? r->wall_s * 1e3 / (double)r->steps : 0;
    f.stall = r->input_s / r->wall_s;
    f.device_util = r->busy_s / r->wall_s;
    if (f.device_util > 1)
        f.device_util = 1;
    f.cpu_util = r->cpu_s / r->wall_s / cores;
    f.of_alone = alone > 0 ? f.device_util / alone : 0;
    return f;
}

static const char *row_name(int loader)
{
    return loader == L_ALONE ? "compute alone" : loader_names[loader];
}

static void print_table(const trainer *t, const run_result *runs, int n)
{
    const run_result *s = NULL, *g = NULL;
    printf("\n  %-14s %9s %8s %6s %12s %17s %6s%s\n", "loader", "images/s", "step ms", "stall",
           "device util", "of compute-alone", "CPU", t->nvml ? "  NVML util" : "");
    for (int i = -1; i < n; i++) {
        const run_result *r = i < 0 ? &t->alone : &runs[i];
        figures f = figures_of(t, r);
        printf("  %-14s %9.0f %8.1f %5.0f%% %11.0f%% %16.0f%% %5.0f%%", row_name(r->loader),
               f.images_per_s, f.step_ms, 100 * f.stall, 100 * f.device_util,
               100 * f.of_alone, 100 * f.cpu_util);
        if (t->nvml && r->nvml_readings > 0)
            printf(" %10.0f%%", 100 * r->nvml_util);
        else if (t->nvml)
            printf(" %11s", "-");
        printf("\n");
        if (i >= 0 && r->loader == L_SYNC)
            s = r;
        if (i >= 0 && r->loader == L_GPUFEED)
            g = r;
    }
    if (s && g) {
        figures fs = figures_of(t, s), fg = figures_of(t, g);
        printf("\n  gpufeed: %.2fx the images/s of the synchronous loop; the %s is busy %.0f%% "
               "of the time instead of %.0f%%\n",
               fs.images_per_s > 0 ? fg.images_per_s / fs.images_per_s : 0,
               t->cuda ? "GPU" : "model's core", 100 * fg.device_util, 100 * fs.device_util);
        printf("  (compute alone: %.0f%%), and waits for input %.0f%% of the time instead of "
               "%.0f%%.\n",
               100 * figures_of(t, &t->alone).device_util, 100 * fg.stall, 100 * fs.stall);
    }
    if (!t->cuda)
        printf("  CPU path: the model steps on the consumer thread; device util = time inside "
               "the step / wall.\n");
    else
        printf("  device util: the steps' kernel time (CUDA events) / wall%s%s\n",
               t->nvml ? "; NVML util: nvidia-smi's figure, sampled every 100 ms during the "
                         "loops"
                       : "; ",
               t->nvml ? "" : t->nvml_note);
    if (t->o->autotune && t->tuned_threads)
        printf("  autotune chose %d decode thread%s and prefetch depth %d (%llu changes)\n",
               t->tuned_threads, t->tuned_threads == 1 ? "" : "s", t->tuned_depth,
               (unsigned long long)t->tune_changes);
    if (t->dp && n > 0) {
        const run_result *r = &runs[n - 1];
        int same = 1;
        for (int i = 1; i < t->world; i++)
            same &= t->rank_checksums[i] == t->rank_checksums[0];
        printf("\n  data-parallel (%s): %d rank%s, %" PRIu64 " samples over all ranks "
               "(%.0f images/s together); %s all-reduce of %zu gradients: %.2f ms/step, "
               "%.0f%% of rank 0's wall\n",
               row_name(r->loader), t->world, t->world == 1 ? "" : "s", r->global_samples,
               r->wall_s > 0 ? (double)r->global_samples / r->wall_s : 0.0,
               t->nccl ? "NCCL" : "MPI", t->n_params,
               r->steps ? 1e3 * r->comm_s / (double)r->steps : 0.0,
               r->wall_s > 0 ? 100 * r->comm_s / r->wall_s : 0.0);
        printf("  final weights: %s (checksum %016" PRIx64 " on rank 0)\n",
               same ? "identical on every rank" : "DIFFER between ranks", t->rank_checksums[0]);
    }
    for (int i = 0; i < n; i++)
        if (runs[i].errors)
            printf("  %s: %" PRIu64 " samples could not be decoded (skipped)\n",
                   row_name(runs[i].loader), runs[i].errors);
}

static void json_figures(const trainer *t, const run_result *r)
{
    figures f = figures_of(t, r);
    printf("{\"loader\": \"%s\", \"images_per_s\": ", r->loader == L_ALONE ? "compute-alone"
                                                                         : loader_names[r->loader]);
    cli_json_double(stdout, f.images_per_s);
    printf(", \"step_ms\": ");
    cli_json_double(stdout, f.step_ms);
    printf(", \"stall_fraction\": ");
    cli_json_double(stdout, f.stall);
    printf(", \"device_utilization\": ");
    cli_json_double(stdout, f.device_util);
    printf(", \"of_compute_alone\": ");
    cli_json_double(stdout, f.of_alone);
    printf(", \"cpu_utilization\": ");
    cli_json_double(stdout, f.cpu_util);
    printf(", \"steps\": %" PRIu64 ", \"samples\": %" PRIu64 ", \"seconds\": ", r->steps,
           r->samples);
    cli_json_double(stdout, r->wall_s);
    printf(", \"nvml_utilization\": ");
    if (r->nvml_readings > 0)
        cli_json_double(stdout, r->nvml_util);
    else
        printf("null");
    printf(", \"nvml_readings\": %d", r->nvml_readings);
    if (r->loader != L_ALONE) {
        printf(", \"accuracy\": ");
        cli_json_double(stdout, r->accuracy);
        printf(", \"errors\": %" PRIu64 ", \"weights_checksum\": \"%016" PRIx64 "\"", r->errors,
               r->checksum);
    }
    printf("}");
}

static void print_json(const trainer *t, const run_result *runs, int n)
{
    const train_opts *o = t->o;
    printf("{\"device\": \"%s\", \"data\": ", t->cuda ? "cuda" : "cpu");
    cli_json_string(stdout, t->root);
    printf(", \"train_samples\": %zu, \"val_samples\": %" PRIu64 ", \"classes\": %d",
           t->train_n, t->val_samples, t->classes);
    printf(", \"batch_size\": %d, \"image_size\": %d, \"model_width\": %d",
           o->batch, o->size, o->width);
    printf(", \"threads\": %d, \"prefetch_depth\": %d, \"amp\": %s, \"seed\": %" PRIu64,
           o->threads ? o->threads : (cli_cores() > 1 ? cli_cores() - 1 : 1),
           o->depth ? o->depth : 4, t->amp ? "true" : "false", o->seed);
    printf(", \"lr\": ");
    cli_json_double(stdout, o->lr);
    printf(", \"step_flops_per_sample\": ");
    cli_json_double(stdout, t->step_flops);
    printf(", \"compute_alone\": ");
    json_figures(t, &t->alone);
    printf(", \"modes\": [");
    for (int i = 0; i < n; i++) {
        printf(i ? ", " : "");
        json_figures(t, &runs[i]);
    }
    printf("], \"epochs\": [");
    for (int i = 0; i < t->n_rows; i++) {
        const epoch_row *e = &t->rows[i];
        printf("%s{\"loader\": \"%s\", \"epoch\": %d, \"loss\": ", i ? ", " : "",
               loader_names[e->loader], e->epoch);
        cli_json_double(stdout, e->loss);
        printf(", \"train_accuracy\": ");
        cli_json_double(stdout, e->train_accuracy);
        printf(", \"val_loss\": ");
        cli_json_double(stdout, e->val_loss);
        printf(", \"accuracy\": ");
        cli_json_double(stdout, e->accuracy);
        printf(", \"images_per_s\": ");
        cli_json_double(stdout, e->images_per_s);
        printf(", \"seconds\": ");
        cli_json_double(stdout, e->seconds);
        printf("}");
    }
    /* The final weights: of the gpufeed run when there is one. */
    printf("], \"weights_checksum\": \"%016" PRIx64 "\"", runs[n - 1].checksum);
    printf(", \"world\": %d, \"start_epoch\": %d", t->world, t->start_epoch);
    printf(", \"nvml\": ");
    if (t->nvml)
        printf("\"sampled\"");
    else
        cli_json_string(stdout, t->cuda ? t->nvml_note : "not on the CPU path");
    if (t->dp) {
        const run_result *r = &runs[n - 1];
        printf(", \"allreduce\": \"%s\"", t->nccl ? "nccl" : "mpi");
        printf(", \"global_samples\": %" PRIu64 ", \"allreduce_s\": ", r->global_samples);
        cli_json_double(stdout, r->comm_s);
        printf(", \"rank_checksums\": [");
        for (int i = 0; i < t->world; i++)
            printf("%s\"%016" PRIx64 "\"", i ? ", " : "", t->rank_checksums[i]);
        printf("], \"rank_samples\": [");
        for (int i = 0; i < t->world; i++)
            printf("%s%" PRIu64, i ? ", " : "", t->rank_samples[i]);
        printf("], \"rank_samples_hash\": [");
        for (int i = 0; i < t->world; i++)
            printf("%s\"%016" PRIx64 "\"", i ? ", " : "", t->rank_hashes[i]);
        printf("]");
    }
    printf("}\n");
}

/* ---- the command ---------------------------------------------------------- */

int cmd_train(int argc, char **argv)
{
    enum { O_DATA = 256, O_LOADER, O_EPOCHS, O_BATCH, O_SIZE, O_WIDTH, O_THREADS, O_DEPTH,
           O_LR, O_SEED, O_DEVICE, O_AMP, O_JSON, O_CKPT, O_RESUME, O_MPI, O_DUMP,
           O_AUTOTUNE, O_ALLREDUCE };
    static const struct option longopts[] = {
        {"data", required_argument, NULL, O_DATA},
        {"loader", required_argument, NULL, O_LOADER},
        {"epochs", required_argument, NULL, O_EPOCHS},
        {"batch-size", required_argument, NULL, O_BATCH},
        {"image-size", required_argument, NULL, O_SIZE},
        {"model-width", required_argument, NULL, O_WIDTH},
        {"threads", required_argument, NULL, O_THREADS},
        {"prefetch-depth", required_argument, NULL, O_DEPTH},
        {"lr", required_argument, NULL, O_LR},
        {"seed", required_argument, NULL, O_SEED},
        {"device", required_argument, NULL, O_DEVICE},
        {"amp", no_argument, NULL, O_AMP},
        {"autotune", no_argument, NULL, O_AUTOTUNE},
        {"json", no_argument, NULL, O_JSON},
        {"checkpoint", required_argument, NULL, O_CKPT},
        {"resume", required_argument, NULL, O_RESUME},
        {"mpi", no_argument, NULL, O_MPI},
        {"allreduce", required_argument, NULL, O_ALLREDUCE},
        {"dump-indices", required_argument, NULL, O_DUMP},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    train_opts o = {.epochs = 3, .batch = 32, .size = DEFAULT_SIZE, .width = DEFAULT_WIDTH, .lr = 0.05,
                    .loader = L_BOTH, .device = GF_DEVICE_AUTO};
    trainer t;
    run_result runs[2];
    int ch, v, n_runs = 0, status = CLI_OK, loader_given = 0;

    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (ch) {
        case O_DATA: o.data = optarg; break;
        case O_LOADER: loader_given = 1; if ((o.loader = cli_parse_choice(CMD, "loader", optarg, loader_names)) < 0) return CLI_USAGE; break;
        case O_EPOCHS: if (cli_parse_int(CMD, "epochs", optarg, 1, 100000, &o.epochs)) return CLI_USAGE; break;
        case O_BATCH: if (cli_parse_int(CMD, "batch-size", optarg, 1, 65536, &o.batch)) return CLI_USAGE; break;
        case O_SIZE: if (cli_parse_int(CMD, "image-size", optarg, 4, 4096, &o.size)) return CLI_USAGE; break;
        case O_WIDTH: if (cli_parse_int(CMD, "model-width", optarg, 1, 4096, &o.width)) return CLI_USAGE; break;
        case O_THREADS: if (cli_parse_int(CMD, "threads", optarg, 1, 1024, &o.threads)) return CLI_USAGE; break;
        case O_DEPTH: if (cli_parse_int(CMD, "prefetch-depth", optarg, 1, 1024, &o.depth)) return CLI_USAGE; break;
        case O_LR: if (cli_parse_double(CMD, "lr", optarg, 1e-9, 100, &o.lr)) return CLI_USAGE; break;
        case O_SEED: if (cli_parse_u64(CMD, "seed", optarg, &o.seed)) return CLI_USAGE; break;
        case O_DEVICE: if ((v = cli_parse_choice(CMD, "device", optarg, device_names)) < 0) return CLI_USAGE; o.device = (gf_device)v; break;
        case O_AMP: o.amp = 1; break;
        case O_AUTOTUNE: o.autotune = 1; break;
        case O_JSON: o.json = 1; break;
        case O_CKPT: o.checkpoint = optarg; break;
        case O_RESUME: o.resume = optarg; break;
        case O_MPI: o.mpi = 1; break;
        case O_ALLREDUCE: if ((o.allreduce = cli_parse_choice(CMD, "allreduce", optarg, allreduce_names)) < 0) return CLI_USAGE; break;
        case O_DUMP: o.dump = optarg; break;
        case 'h': usage(stdout); return CLI_OK;
        case ':': cli_error(CMD, "%s needs a value", argv[optind - 1]); return CLI_USAGE;
        default: cli_error(CMD, "unknown option '%s' (try --help)", argv[optind - 1]); return CLI_USAGE;
        }
    }
    if (optind < argc) {
        cli_error(CMD, "unexpected argument '%s' (the data set goes after --data)", argv[optind]);
        return CLI_USAGE;
    }
    if (o.size % 4) {
        cli_error(CMD, "--image-size: %d is not a multiple of 4 (the model pools twice)", o.size);
        return CLI_USAGE;
    }

    if (o.checkpoint || o.resume) {
        /* The loader's state is the gpufeed loop's. */
        if (loader_given && o.loader != L_GPUFEED) {
            cli_error(CMD, "--checkpoint/--resume save and restore the gpufeed loader: use "
                           "--loader gpufeed");
            return CLI_USAGE;
        }
        o.loader = L_GPUFEED;
    }

    if (o.allreduce == AR_NCCL) {
        if (!GF_CLI_HAVE_NCCL) {
            cli_error(CMD, "--allreduce nccl: this gpufeed was built without NCCL (it needs "
                           "the cuda feature and nccl.h; meson setup -Dnccl=enabled)");
            return CLI_USAGE;
        }
        if (o.device == GF_DEVICE_CPU) {
            cli_error(CMD, "--allreduce nccl sums gradients on CUDA devices: not with "
                           "--device cpu");
            return CLI_USAGE;
        }
    }

    memset(&t, 0, sizeof t);
    t.o = &o;
    t.rank = 0;
    t.world = 1;
    {
        const char *ompi = getenv("OMPI_COMM_WORLD_SIZE");
        int launched = ompi && atoi(ompi) > 1;
#if GF_CLI_HAVE_MPI
        if (launched || o.mpi) {
            int provided;
            if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
                cli_error(CMD, "MPI_Init failed");
                return CLI_FAIL;
            }
            t.mpi = t.dp = 1;
            MPI_Comm_rank(MPI_COMM_WORLD, &t.rank);
            MPI_Comm_size(MPI_COMM_WORLD, &t.world);
            /* Rank 0 speaks for all; errors still reach stderr. */
            if (t.rank != 0 && !freopen("/dev/null", "w", stdout)) {
                cli_error(CMD, "/dev/null: %s", strerror(errno));
                status = CLI_FAIL;
                goto out;
            }
        }
#else
        if (launched || o.mpi || o.allreduce == AR_MPI) {
            cli_error(CMD, "%s, but this gpufeed was built without MPI (install "
                           "libopenmpi-dev; meson setup -Dmpi=enabled)",
                      o.mpi                    ? "--mpi given"
                      : o.allreduce == AR_MPI ? "--allreduce mpi given"
                                               : "launched by mpirun with several ranks");
            return CLI_USAGE;
        }
#endif
        /* NCCL needs no MPI for one rank: a one-rank data-parallel run,
         * the same steps through the all-reduce path. */
        if (!t.dp && o.allreduce == AR_NCCL)
            t.dp = 1;
    }
    t.tty = isatty(STDOUT_FILENO) && t.rank == 0;
    t.rank_checksums = calloc((size_t)t.world, sizeof *t.rank_checksums);
    t.rank_samples = calloc((size_t)t.world, sizeof *t.rank_samples);
    t.rank_hashes = calloc((size_t)t.world, sizeof *t.rank_hashes);
    if (!t.rank_checksums || !t.rank_samples || !t.rank_hashes) {
        cli_error(CMD, "out of memory");
        status = CLI_FAIL;
        goto out;
    }
    if (o.dump) {
        char path[4200];
        snprintf(path, sizeof path, "%s.rank%d", o.dump, t.rank);
        if (!(t.dump = fopen(path, "w"))) {
            cli_error(CMD, "--dump-indices %s: %s", path, strerror(errno));
            status = CLI_USAGE;
            goto out;
        }
    }
    if (o.data) {
        snprintf(t.root, sizeof t.root, "%s", o.data);
    } else {
        /* Rank 0 makes the demo set; the others find it made. */
        if (t.rank == 0)
            status = demo_data(&t);
#if GF_CLI_HAVE_MPI
        if (t.mpi) {
            int st = status;
            MPI_Bcast(&st, 1, MPI_INT, 0, MPI_COMM_WORLD);
            status = st;
        }
#endif
        if (status == CLI_OK && t.rank != 0)
            status = demo_data(&t);
        if (status != CLI_OK)
            goto out;
    }
    snprintf(t.train_dir, sizeof t.train_dir, "%s/train", t.root);
    snprintf(t.val_dir, sizeof t.val_dir, "%s/val", t.root);
    if (!is_dir(t.train_dir) || !is_dir(t.val_dir)) {
        cli_error(CMD, "%s: expected an ImageFolder with train/ and val/ sub-folders "
                       "(gpufeed make-dataset DIR/train --seed 0; ... DIR/val --seed 1)",
                  t.root);
        status = CLI_USAGE;
        goto out;
    }
    if ((status = probe(&t)) != CLI_OK)
        goto out;
    if (t.dp && (status = allreduce_setup(&t)) != CLI_OK)
        goto out;
    {
        gfm_model *m = NULL;
        if ((status = make_model(&t, &m)) != CLI_OK)
            goto out;
        t.step_flops = gfm_step_flops(m);
        t.n_params = gfm_param_count(m);
        gfm_destroy(m);
        if (!(t.gbuf = malloc((t.n_params + 3) * sizeof *t.gbuf))) {
            cli_error(CMD, "out of memory");
            status = CLI_FAIL;
            goto out;
        }
    }
    if (o.resume && (status = checkpoint_load(&t)) != CLI_OK)
        goto out;
    if (!o.json) {
        int th = o.threads ? o.threads : (cli_cores() > 1 ? cli_cores() - 1 : 1);
        printf("gpufeed train  %s  (%zu train / %" PRIu64 " val images, %d classes)\n", t.root,
               t.train_n, t.val_samples, t.classes);
        printf("  %s%s, %dx%d, batch %d, model width %d (%.0f MFLOP/step), %d epoch%s, lr %g, "
               "%d decode thread%s, prefetch depth %d\n",
               t.cuda ? "cuda" : "cpu", t.amp ? " (amp: float16 batches)" : "", o.size, o.size,
               o.batch, o.width, 2 * t.step_flops * o.batch / 1e6, o.epochs,
               o.epochs == 1 ? "" : "s", o.lr, th, th == 1 ? "" : "s", o.depth ? o.depth : 4);
        if (o.amp && !t.cuda)
            printf("  note: --amp is for CUDA (float16 batches); the CPU path reads float32\n");
        if (t.device_note[0])
            printf("  note: %s\n", t.device_note);
        if (t.dp)
            printf("  data-parallel: %d rank%s, each on its share of every epoch, "
                   "gradients averaged each step with %s\n",
                   t.world, t.world == 1 ? "" : "s", t.allreduce_desc);
        if (t.have_resume)
            printf("  resumed from %s: %d epoch%s done, loader at epoch %" PRIu64
                   " sample %" PRIu64 "\n",
                   o.resume, t.start_epoch, t.start_epoch == 1 ? "" : "s", t.rstate.epoch,
                   t.rstate.position);
        fflush(stdout);
    }
    if ((status = compute_alone(&t, &t.alone)) != CLI_OK)
        goto out;
    if (!o.json) {
        figures f = figures_of(&t, &t.alone);
        printf("  compute alone: %.1f ms/step, %.0f images/s (the model on one cached batch)\n\n",
               f.step_ms, f.images_per_s);
        fflush(stdout);
    }
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
        print_json(&t, runs, n_runs);
    else
        print_table(&t, runs, n_runs);
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
#if GF_CLI_HAVE_MPI
    /* Before anything that may wait for the other ranks (an NCCL
     * communicator's teardown): they may be waiting in a collective. */
    if (t.mpi && status != CLI_OK && t.world > 1)
        MPI_Abort(MPI_COMM_WORLD, status);
#endif
    trainer_free(&t);
#if GF_CLI_HAVE_MPI
    if (t.mpi)
        MPI_Finalize();
#endif
    return status;
}
