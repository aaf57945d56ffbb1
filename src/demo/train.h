/*
 * gpufeed train's insides, shared by its files (train.c says what the
 * command does): the options, the trainer's state, a run's sums, and the
 * functions each file gives the others. Everything here runs on the
 * command's one thread (the trainer's, the consumer of the loader); the
 * loader's threads and the NVML sampler's are behind their APIs.
 *
 *   train.c       the command: options, set-up order, the runs' driver
 *   setup.c       the data set, the device, the loaders' settings, teardown
 *   calibrate.c   the model width: the step >= 1.2 x the loader's input
 *   loops.c       the step, the synchronous loop, the gpufeed loop, evaluation
 *   parallel.c    data-parallel: MPI, the gradient all-reduce (MPI or NCCL)
 *   tally.c       an epoch's loss and accuracy, below loops.c and parallel.c
 *   checkpoint.c  --checkpoint / --resume: the file format
 *   report.c      what it prints: progress, epoch lines, the table, JSON
 */
#ifndef GF_DEMO_TRAIN_H
#define GF_DEMO_TRAIN_H

#include <stdint.h>
#include <stdio.h>

#include "gpufeed.h"
#include "model.h"

#ifndef GF_CLI_HAVE_MPI
#define GF_CLI_HAVE_MPI 0
#endif
#ifndef GF_CLI_HAVE_NCCL
#define GF_CLI_HAVE_NCCL 0
#endif
#ifndef GF_CLI_HAVE_CUDA
#define GF_CLI_HAVE_CUDA 0
#endif
#define HAVE_DP (GF_CLI_HAVE_MPI || GF_CLI_HAVE_NCCL)

#define CMD "train"

/* The default data set: 10 classes, 500x375 photo-like JPEGs (decode cost
 * as a photo of that size), train and val made with different seeds. */
#define DEMO_CLASSES 10
#define DEMO_TRAIN_PER_CLASS 200
#define DEMO_VAL_PER_CLASS 50
#define DEMO_W 500
#define DEMO_H 375

/* CUDA: step events kept before the host waits once to read them. */
#define EVENT_PAIRS 256

enum { L_SYNC = 0, L_GPUFEED = 1, L_BOTH = 2, L_ALONE = 3 };
extern const char *const train_loader_names[]; /* by L_*: sync, gpufeed, both */
enum { AR_AUTO = 0, AR_MPI = 1, AR_NCCL = 2 };

/* ImageNet's statistics on 0..255 values. */
extern const float train_mean[3];
extern const float train_std[3];

typedef struct train_opts {
    const char *data; /* --data ROOT: ROOT/train and ROOT/val */
    const char *train_data, *val_data; /* --train-data, --val-data: any source the
                                          loader reads; all three NULL: the demo set */
    const char *checkpoint, *resume, *dump; /* --checkpoint, --resume, --dump-indices */
    uint64_t stop_after; /* --stop-after STEPS: this run's optimizer steps, then stop
                            (mid-epoch as a preempted job); 0: no limit */
    int epochs, batch, size, threads, depth, width, amp, json, loader, mpi, autotune, allreduce;
    double lr;
    uint64_t seed;
    gf_device device;
    gf_settings loader_settings; /* the shared options': the loaders start from them */
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
    /* gpufeed's loader on remote shards: gf_stats' remote_*, summed over
     * the epochs' loaders (0 for local data and the other rows). */
    uint64_t remote_requests, remote_retries, remote_bytes;
    double remote_wait_s;
    uint64_t cache_hits, cache_misses; /* settings.cache_dir: likewise */
    char cache_warning[192];           /* the first loader's that had one */
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

/* No --model-width: how the width was chosen (calibrate.c): the
 * narrowest whose step is >= CALIB_FACTOR x the loader's input time. */
#define CALIB_FACTOR 1.2
#define CALIB_MAX_WIDTHS 20
typedef struct calibration {
    int done;             /* the width was chosen by calibration */
    int met;              /* its step is >= CALIB_FACTOR x the input time */
    const char *skipped;  /* why it did not run, or NULL */
    double input_ms;      /* the loader's time per batch, no model */
    int input_threads;    /* its decode threads */
    double step_ms;       /* the step at the chosen width (CUDA: kernel time) */
    double seconds;       /* the calibration's own time */
    uint64_t errors;
    int n;                /* widths tried, in order, and their steps */
    int widths[CALIB_MAX_WIDTHS];
    double step_ms_at[CALIB_MAX_WIDTHS];
} calibration;

typedef struct trainer {
    const train_opts *o;
    /* The sources the loaders read (settings.data): ROOT/train and ROOT/val
     * of --data or the demo set, else --train-data and --val-data as given. */
    char train_data[4112], val_data[4112];
    gf_index *train_index;  /* the training set's index, as the training loader
                               makes it: the synchronous loop reads through it */
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
    int pageable_slots;  /* of the probe loader: host slots that could not be pinned */
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
    calibration calib;

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
    FILE *dump;        /* --dump-indices: the indices this rank took in the run's
                          first epoch (resumed: the rest of the resumed epoch) */
    uint64_t first_epoch_hash, first_epoch_samples;
    uint64_t *rank_checksums, *rank_samples, *rank_hashes; /* gathered */
    /* checkpoints */
    int start_epoch;   /* --resume: the epochs done */
    gf_state lstate;   /* the loader's state after the last epoch */
    int have_resume;
    gf_state rstate;
    /* --stop-after: the run stopped at its limit (mid-epoch: inside
     * stop_epoch, lstate there; else at an epoch's end) */
    int stopped, stopped_mid;
    int stop_epoch;
    float *rparams, *rvel;
    /* the training set's identity, checkpointed: samples and a hash of
     * train_index (each path and label); computed once */
    uint64_t data_n, data_hash;
    int data_known;
} trainer;

/* setup.c */
int train_cuda_failed(void); /* reports cli_cuda_error(), returns CLI_FAIL */
int train_is_dir(const char *p);
int train_demo_data(trainer *t);
int train_data_from_root(trainer *t, const char *root);
void train_loader_settings(const trainer *t, gf_settings *s, int eval);
int train_open_loader(const gf_settings *s, gf_loader **l);
int train_loader_failed(gf_loader *l, int rc);
int train_probe(trainer *t);
void train_free(trainer *t);

/* calibrate.c: sets t->mc.width by calibration (--resume: the
 * checkpoint's; fallback on a set too small to time). */
int train_choose_width(trainer *t, int fallback);

/* tally.c */
void train_tally_add(tally *a, float loss, int correct, int n);
int train_tally_sync(trainer *t, gfm_model *m, tally *a);

/* loops.c */
void train_nvml_on(trainer *t);
void train_nvml_off(trainer *t);
void train_nvml_take(trainer *t, run_result *r);
int train_events_flush(trainer *t);
int train_step(trainer *t, gfm_model *m, const float *x, const int32_t *labels, int n,
               int wait, run_result *r, tally *a);
int train_busy_collect(trainer *t, run_result *r);
void train_shuffle_order(uint64_t *order, uint64_t n, uint64_t seed, uint64_t epoch);

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

int train_sync_bufs_init(trainer *t, sync_bufs *b);
void train_sync_bufs_free(trainer *t, sync_bufs *b);
int train_sync_input(trainer *t, sync_bufs *b, uint64_t epoch, uint64_t pos, int nb,
                     uint64_t *errors);
/* An epoch's timed window: the steps only. Opening (gf_open, the first
 * load of the kernels: train_probe warms them) comes before it, closing
 * (gf_close: joins, frees that synchronise the device) after it, and
 * NVML samples only inside it. Closing waits for the queued steps. */
typedef struct window {
    double t0, t1, cpu0, cpu1;
} window;
void train_window_open(trainer *t, window *w);
int train_window_close(trainer *t, gfm_model *m, tally *a, window *w);
int train_epoch_sync(trainer *t, gfm_model *m, sync_bufs *b, int epoch, run_result *r,
                     tally *a, window *w);
int train_epoch_gpufeed(trainer *t, gfm_model *m, int epoch, run_result *r, tally *a,
                        window *w);
int train_evaluate(trainer *t, gfm_model *m, double *loss, double *acc);

/* parallel.c */
int dp_init(trainer *t, int *argc, char ***argv);
int dp_share_status(const trainer *t, int status);
int dp_allreduce_setup(trainer *t);
#if HAVE_DP
int dp_step(trainer *t, gfm_model *m, const float *x, const int32_t *labels, int n,
            run_result *r, tally *a, uint64_t *global_n);
#endif
int dp_drain(trainer *t, gfm_model *m, run_result *r, tally *a);
int dp_gather(trainer *t, run_result *r);
void dp_abort(const trainer *t, int status);
void dp_finalize(const trainer *t);

/* checkpoint.c */
int checkpoint_save(trainer *t, gfm_model *m, int epochs_done);
int checkpoint_load(trainer *t);
int checkpoint_width(const char *path);

/* report.c */
void report_progress(trainer *t, int loader, int epoch, uint64_t step_no, uint64_t steps,
                     uint64_t samples, double t0, double input_s, int force);
void report_progress_clear(trainer *t);
void report_intro(const trainer *t);
void report_alone(const trainer *t);
void report_epoch(const trainer *t, int loader, int e, const epoch_row *row);
void report_table(const trainer *t, const run_result *runs, int n);
void report_json(const trainer *t, const run_result *runs, int n);

#endif
