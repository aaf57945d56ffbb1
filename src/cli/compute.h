/*
 * compute.cu: the CUDA runtime as the CLI uses it, built only where meson
 * found CUDA (GF_CLI_HAVE_CUDA=1): the spin kernel of bench --overlap and
 * the verdict, streams, events and copies (bench, the demo trainer), and
 * the probes of gpufeed doctor and gpufeed-bandwidth (bench/micro). Call
 * it from one thread.
 */
#ifndef GF_CLI_COMPUTE_H
#define GF_CLI_COMPUTE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" { /* compute.cu implements this in C++ */
#endif

/* Streams and events are cudaStream_t / cudaEvent_t as void *. Each
 * returns 0, or -1 with the reason in cli_cuda_error(). */
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
/* The same on stream, the one whose kernels read dst: use this one. */
int cli_cuda_copy_h2d(void *dst, const void *src, size_t bytes, void *stream);
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

#ifdef __cplusplus
}
#endif
#endif /* GF_CLI_COMPUTE_H */
