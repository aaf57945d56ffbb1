/*
 * gpufeed bench's internals, shared by its files (a leaf: bench.c is
 * their top, not this header's owner): bench.c (options and the mode table), bench_run.c (sampled files, consumer, loader runner),
 * bench_input.c, bench_overlap.c and bench_verdict.c (one mode each, with
 * its printers). Main thread.
 */
#ifndef GF_CLI_BENCH_PARTS_H
#define GF_CLI_BENCH_PARTS_H

#include <stddef.h>
#include <stdint.h>

#include "cli.h"
#include "gpufeed.h"
#include "json.h"
#include "loader_options.h"
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
/* Why an input-bound row is: the network when the decoders sat idle with
 * remote reads in flight (gf_stats.remote_wait_s) for at least REMOTE_BOUND
 * of the trainer's wait (wait_s) and REMOTE_MIN of the run; else decode
 * when the decoders were busy DECODE_BUSY of the run, else reads. */
#define REMOTE_BOUND 0.5
#define REMOTE_MIN 0.1
#define DECODE_BUSY 0.7
/* Values per swept option (--threads 1,2,4). */
#define SWEEP_MAX CLI_LOPT_LIST_MAX

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

/* The data's sources as a run left them (gf_source_stats each, its data
 * copied: the loader's goes with it): one unless the data is a mix. */
typedef struct bench_sources {
    gf_source_stats *v;
    int n;
} bench_sources;

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
    bench_sources src;
} input_result;

/* Up to ST_MAX_FILES samples spread evenly over the data set: their
 * indices, and once read (sample_set_read), their encoded bytes. */
typedef struct sample_set {
    gf_index *index;   /* the data set's index they come from */
    uint64_t *ids;     /* data set indices */
    uint8_t **data;    /* NULL until read, or if the read failed */
    size_t *len;
    size_t n;
    int shards;        /* tar shards in the source */
} sample_set;

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
    bench_sources src;      /* freed with loop_result_free */
} loop_result;

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
    double remote_wait;              /* remote_wait_s / elapsed of the step run */
    double remote_share;             /* remote_wait_s / wait_s (the trainer's), at most 1 */
    int verdict;
    int cause;                       /* input-bound rows: why (bench_verdict.c) */
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
    gf_settings settings;            /* as given (0: the loader's pick), for advice */
    char advice[1024];               /* the recommendation, in words */
} verdict_result;


/* Host-time marks of a window: t[i] after b[i] batches (or replays). */
typedef struct marks {
    double *t;
    uint64_t *b;
    size_t n, cap;
} marks;

/* gf_stats' values by their row of the library's table (GF_STATS_MAP):
 * STAT_samples, STAT_batches, ... in the struct's order. */
typedef enum stat_id {
#define STAT_ID_(kind, field) STAT_##field,
    GF_STATS_MAP(STAT_ID_)
#undef STAT_ID_
    STAT_COUNT
} stat_id;

/* bench_run.c */
const char *reader_name(gf_io io);
const char *decoder_used(const gf_stats *st);
/* Stats first..last (the table's order) as keys of j, each named as its
 * field and valued as its kind (a FLAG a boolean); json_stat: one. */
void json_stats(cli_json *j, const gf_stats *st, stat_id first, stat_id last);
#define json_stat(j, st, id) json_stats((j), (st), (id), (id))
/* "decoded_<name>" of every decoder, in GF_DECODED_MAP's order. */
void json_decoded(cli_json *j, const gf_stats *st);
void sample_set_free(sample_set *ss);
int sample_set_open(const gf_settings *s, sample_set *ss);
double sample_set_page_cache(const sample_set *ss, const char *data);
int single_thread_rate(const gf_settings *s, sample_set *ss, input_result *r);
const char *where(gf_device d);
void cpu_compute(double ms, const void *data, size_t len);
void consumer_drop_cache(consumer *c);
void consumer_free(consumer *c);
int compute_step(consumer *c, const void *x, const int32_t *labels, int n, size_t len);
int mark(consumer *c, int end, double *t);
int window_ms(consumer *c, int timed, double t_start, double t_end, double *ms);
int marks_push(marks *m, double t, uint64_t b);
void marks_free(marks *m);
double marks_median_ms(const marks *m, double mean_ms);
int run_loader(const bench_opts *o, consumer *c, loop_result *r);
void loop_result_free(loop_result *r);
void bench_sources_free(bench_sources *s);
/* A mix's sources (more than one): a line each, what each delivered
 * against its weight and what the trainer waited for it. */
void print_sources_human(const bench_sources *s);
/* "sources": every source's figures (one for data that is not a mix). */
void json_sources(cli_json *j, const bench_sources *s);
/* bench_input.c */
int sample_files(const bench_opts *o, sample_set *ss, double *page_cache);
int run_input_only(const bench_opts *o, input_result *r);
void print_input_human(const bench_opts *o, const input_result *r);
void print_input_json(const bench_opts *o, const input_result *r);
/* bench_overlap.c */
int run_compute_alone(consumer *c, int n, double *ms, double *robust_ms);
int run_overlap(const bench_opts *o, overlap_result *r);
void print_overlap_human(const bench_opts *o, const overlap_result *r);
void print_overlap_json(const bench_opts *o, const overlap_result *r);
/* bench_verdict.c */
int run_verdict(bench_opts *o, verdict_result *v);
void print_verdict_human(const bench_opts *o, const verdict_result *v);
void print_verdict_json(const bench_opts *o, const verdict_result *v);
int write_verdict_csv(const char *path, const verdict_result *v);
int write_verdict_plot(const char *path, const bench_opts *o, const verdict_result *v);

#endif /* GF_CLI_BENCH_PARTS_H */
