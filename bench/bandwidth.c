/* gpufeed-bandwidth: host<->device copy bandwidth, pinned vs pageable, at
 * the size of a batch and at a large size (the peak), timed with CUDA
 * events. The device check script runs it; gpufeed doctor will too.
 *
 *   gpufeed-bandwidth [--batch-bytes N] [--large-bytes N] [--device D] [--json]
 */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x)                                                                                \
    do {                                                                                     \
        cudaError_t e_ = (x);                                                                \
        if (e_ != cudaSuccess) {                                                             \
            fprintf(stderr, "gpufeed-bandwidth: %s: %s\n", #x, cudaGetErrorString(e_));      \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

/* GB/s of `reps` copies of n bytes, after one untimed copy. */
static double measure(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, int reps,
                      cudaStream_t st)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    CK(cudaMemcpyAsync(dst, src, n, kind, st));
    CK(cudaEventRecord(a, st));
    for (int i = 0; i < reps; i++)
        CK(cudaMemcpyAsync(dst, src, n, kind, st));
    CK(cudaEventRecord(b, st));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    return (double)n * reps / (ms * 1e-3) / 1e9;
}

int main(int argc, char **argv)
{
    size_t batch = (size_t)64 * 224 * 224 * 3, large = (size_t)256 << 20;
    int dev = 0, json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--batch-bytes") && i + 1 < argc)
            batch = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--large-bytes") && i + 1 < argc)
            large = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            dev = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: gpufeed-bandwidth [--batch-bytes N] [--large-bytes N] "
                            "[--device D] [--json]\n");
            return 2;
        }
    }
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        fprintf(stderr, "gpufeed-bandwidth: no CUDA device\n");
        return 1;
    }
    CK(cudaSetDevice(dev));
    struct cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, dev));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    void *d, *pinned, *pageable;
    CK(cudaMalloc(&d, large));
    CK(cudaHostAlloc(&pinned, large, cudaHostAllocDefault));
    pageable = malloc(large);
    if (!pageable)
        return 1;
    memset(pinned, 1, large);
    memset(pageable, 1, large);

    size_t sizes[2] = {batch, large};
    const char *names[2] = {"batch", "large"};
    double r[2][4]; /* pinned h2d, pageable h2d, pinned d2h, pageable d2h */
    for (int k = 0; k < 2; k++) {
        int reps = sizes[k] < ((size_t)64 << 20) ? 40 : 8;
        r[k][0] = measure(d, pinned, sizes[k], cudaMemcpyHostToDevice, reps, st);
        r[k][1] = measure(d, pageable, sizes[k], cudaMemcpyHostToDevice, reps, st);
        r[k][2] = measure(pinned, d, sizes[k], cudaMemcpyDeviceToHost, reps, st);
        r[k][3] = measure(pageable, d, sizes[k], cudaMemcpyDeviceToHost, reps, st);
    }
    double ratio = r[0][0] / r[1][0];
    if (json) {
        printf("{\"device\": \"%s\", \"batch_bytes\": %zu, \"large_bytes\": %zu", p.name, batch,
               large);
        for (int k = 0; k < 2; k++)
            printf(", \"%s\": {\"pinned_h2d_gbs\": %.2f, \"pageable_h2d_gbs\": %.2f, "
                   "\"pinned_d2h_gbs\": %.2f, \"pageable_d2h_gbs\": %.2f}",
                   names[k], r[k][0], r[k][1], r[k][2], r[k][3]);
        printf(", \"batch_pinned_h2d_of_peak\": %.3f}\n", ratio);
    } else {
        printf("%s: copy bandwidth, GB/s\n", p.name);
        printf("  %-26s %10s %10s %10s %10s\n", "", "H2D pin", "H2D page", "D2H pin",
               "D2H page");
        for (int k = 0; k < 2; k++)
            printf("  %-6s %10.1f MiB        %10.1f %10.1f %10.1f %10.1f\n", names[k],
                   sizes[k] / 1048576.0, r[k][0], r[k][1], r[k][2], r[k][3]);
        printf("  batch-sized pinned H2D = %.0f%% of the large-copy peak\n", 100 * ratio);
    }
    cudaFree(d);
    cudaFreeHost(pinned);
    free(pageable);
    cudaStreamDestroy(st);
    return 0;
}
