/*
 * Helpers shared by the gpufeed subcommands: error reporting in one format
 * ("gpufeed <cmd>: <reason>" on stderr), strict number parsing, JSON string
 * escaping, clocks, resource usage, and a small walker that lists a data
 * set's files the way the loader's index does (ImageFolder or list file).
 *
 * Only the public API (gpufeed.h) is used here: the CLI is a client of the
 * library like any trainer.
 */
#ifndef GF_CLI_UTIL_H
#define GF_CLI_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gpufeed.h"

#ifdef __cplusplus
extern "C" { /* bench/compute.cu implements part of this in C++ */
#endif

/* Exit statuses shared by every subcommand. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

#if defined(__GNUC__)
#define CLI_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CLI_PRINTF(a, b)
#endif

/* "gpufeed <cmd>: <message>\n" on stderr. */
void cli_error(const char *cmd, const char *fmt, ...) CLI_PRINTF(2, 3);

/* Strict parsers: the whole string must be a number within [min, max].
 * On failure they print "gpufeed <cmd>: --<opt>: ..." and return -1. */
int cli_parse_int(const char *cmd, const char *opt, const char *s, long min,
                  long max, int *out);
int cli_parse_u64(const char *cmd, const char *opt, const char *s,
                  uint64_t *out);
/* A finite number in [min, max]. */
int cli_parse_double(const char *cmd, const char *opt, const char *s,
                     double min, double max, double *out);
/* "WxH" (or a single "S" meaning SxS) into w, h, each in [1, max]. */
int cli_parse_size(const char *cmd, const char *opt, const char *s, int max,
                   int *w, int *h);
/* Index of s in the NULL-terminated names, or -1 with an error printed. */
int cli_parse_choice(const char *cmd, const char *opt, const char *s,
                     const char *const *names);

/* A comma-separated list ("1,2,4") of 1..max_n integers, each in
 * [min, max], into out[0, *n). On failure prints "gpufeed <cmd>: --<opt>:
 * ..." and returns -1. A single number is a list of one. */
int cli_parse_int_list(const char *cmd, const char *opt, const char *s, long min, long max,
                       int *out, int max_n, int *n);

/* Writes s as a JSON string literal (quotes included). Bytes that are not
 * valid UTF-8 are written as \u00XX of the byte so the output always parses. */
void cli_json_string(FILE *f, const char *s);
/* A finite double as JSON (non-finite values become null). */
void cli_json_double(FILE *f, double v);

double cli_now(void);            /* monotonic seconds */
uint64_t cli_peak_rss_bytes(void); /* getrusage(RUSAGE_SELF) */
double cli_cpu_seconds(void);    /* user + system time of the process */
int cli_cores(void);             /* online CPUs, at least 1 */
/* IEEE binary16 bits of f, rounded to nearest even (as __float2half_rn). */
uint16_t cli_f16_bits(float f);
/* The CPU's model name (/proc/cpuinfo "model name"), or "unknown". */
void cli_cpu_model(char *buf, size_t len);

/* Opens a loader for its index only (gf_read_sample, gf_sample_path,
 * gf_sample_label, gf_get_stats): the whole data set, one thread, one
 * 16x16 slot, so it does next to no decoding. Returns gf_open's code;
 * *out is set as gf_open sets it. */
int cli_open_index(const char *data, gf_loader **out);

/* The naive input step of a synchronous loop, on the calling thread: for
 * each of n samples, reads sample ids[i] through the index loader and
 * decodes it with dec as sample ids[i] of epoch (the loader's transform for
 * it) into out + i * cell. A sample that cannot be read or decoded is
 * counted in *errors and its cell zeroed. Returns the samples decoded. */
int cli_read_decode(gf_loader *index, gf_decoder *dec, const uint64_t *ids, int n, uint64_t epoch,
                    uint8_t *out, size_t cell, uint64_t *errors);

/* Fraction of the pages of the given files resident in the page cache
 * (mincore), or -1 if it cannot be measured. Does not read the files. */
double cli_page_cache_fraction(char *const *paths, size_t n);

/* bench/compute.cu, built only where meson found CUDA
 * (GF_CLI_HAVE_CUDA=1). Streams and events are cudaStream_t / cudaEvent_t
 * as void *. Each returns 0, or -1 with the reason in cli_cuda_error();
 * call them from one thread. */
int cli_cuda_spin(double ms, void *stream); /* a kernel busy for ms, queued */
int cli_cuda_set_device(int device);
int cli_cuda_stream_create(void **out);      /* non-blocking stream */
void cli_cuda_stream_destroy(void *stream);  /* NULL: no-op */
int cli_cuda_stream_sync(void *stream);
int cli_cuda_event_create(void **out);
void cli_cuda_event_destroy(void *event);    /* NULL: no-op */
int cli_cuda_event_record(void *event, void *stream);
int cli_cuda_event_ms(void *start, void *end, double *ms); /* both done */
int cli_cuda_malloc(void **out, size_t bytes);
void cli_cuda_free(void *p);                 /* NULL: no-op */
int cli_cuda_memcpy_h2d(void *dst, const void *src, size_t bytes); /* blocks */
const char *cli_cuda_error(void);

/* For `gpufeed doctor` (and gpufeed-bandwidth, which links compute.cu
 * alone). Versions are CUDA's integers: 12040 = 12.4. */
typedef struct cli_cuda_probe {
    int driver_version;     /* cudaDriverGetVersion; 0 = no driver loaded */
    int runtime_version;    /* cudaRuntimeGetVersion: the toolkit built in */
    int count;              /* devices; 0 when count_error != 0 */
    int count_error;        /* cudaError_t of cudaGetDeviceCount, 0 = ok */
    char count_error_name[64];  /* "cudaErrorInsufficientDriver" or "" */
    char count_error_text[160];
} cli_cuda_probe;
void cli_cuda_probe_run(cli_cuda_probe *out); /* never fails */

typedef struct cli_cuda_device {
    char name[256];
    int major, minor;       /* compute capability */
    uint64_t total_bytes;
    uint64_t free_bytes;    /* needs a context; 0 if kernel_error says why */
    char pci_bus_id[32];    /* "0000:3B:00.0" */
    int async_engines;      /* copy engines: 2 = H2D and D2H overlap */
    int multiprocessors;
    /* Whether the CLI's kernels (built with the library's -gencode list)
     * have an image this device can run: "" if so, else the error. */
    char kernel_error[160];
    int binary_version, ptx_version; /* of that image: 90 = sm_90 */
} cli_cuda_device;
/* Makes device current (creates its context). Returns 0, or -1 with the
 * reason in cli_cuda_error(). */
int cli_cuda_device_info(int device, cli_cuda_device *out);

/* Host<->device copy bandwidth on device, timed with CUDA events on a
 * non-blocking stream, each figure after one untimed copy. */
typedef struct cli_bandwidth {
    size_t bytes[2];        /* the two sizes measured: [0] batch, [1] large */
    int reps[2];
    double gbs[2][4];       /* GB/s (1e9): pinned H2D, pageable H2D,
                               pinned D2H, pageable D2H */
    double seconds;         /* wall time of the whole measurement */
} cli_bandwidth;
/* Returns 0, or -1 with the reason in cli_cuda_error(); frees what it
 * allocated either way. */
int cli_cuda_bandwidth(int device, size_t batch_bytes, size_t large_bytes, int batch_reps,
                       int large_reps, cli_bandwidth *out);

/* make-dataset as a call (bench/make_dataset.c): writes classes x
 * per_class width x height quality-90 JPEGs into dir (made if missing,
 * refused if not empty) with `threads` workers (0: all cores). Prints its
 * one-line summary unless quiet. Returns 0, or -1 with the reason printed
 * as "gpufeed <cmd>: ...". */
int cli_make_dataset(const char *cmd, const char *dir, int classes, int per_class, int width,
                     int height, uint64_t seed, int threads, int quiet);

/* bench/plot.c: an SVG line chart of two panels sharing the x axis
 * (bench --plot). Each series is drawn in both panels (y[0] above, y[1]
 * below) in its colour and dash pattern (indices into fixed palettes).
 * The x axis is log2 when every x > 0 and they span a factor of 4 or
 * more; ticks sit at the x values given. y_max[k] == 0: from the data. */
enum { CLI_PLOT_MAX_POINTS = 32 };
typedef struct cli_plot_line {
    char label[64];
    int n;
    double x[CLI_PLOT_MAX_POINTS];
    double y[2][CLI_PLOT_MAX_POINTS]; /* non-finite: left out */
    int colour, dash;
} cli_plot_line;
typedef struct cli_plot {
    const char *title, *subtitle; /* subtitle may be NULL */
    const char *x_label, *y_label[2], *legend_title;
    double y_max[2];
    const cli_plot_line *lines;
    int n_lines;
} cli_plot;
/* Writes the chart to path. Returns 0, or -1 with the reason in why. */
int cli_plot_svg(const char *path, const cli_plot *p, char *why, size_t why_len);

/* Subcommands: argv[0] is the subcommand's name; returns the exit status. */
int cmd_make_dataset(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_doctor(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif /* GF_CLI_UTIL_H */
