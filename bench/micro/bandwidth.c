/* gpufeed-bandwidth: host<->device copy bandwidth, pinned vs pageable, at
 * the size of a batch and at a large size (the peak), timed with CUDA
 * events. The device check script runs it; `gpufeed doctor` runs the same
 * measurement (cli_cuda_bandwidth in src/cli/compute.cu), shorter. No
 * internal header: it links compute.cu alone.
 *
 *   gpufeed-bandwidth [--batch-bytes N] [--large-bytes N] [--device D] [--json]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute.h"

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
    if (!batch || !large) {
        fprintf(stderr, "gpufeed-bandwidth: sizes must be positive\n");
        return 2;
    }
    cli_cuda_probe pr;
    cli_cuda_probe_run(&pr);
    if (pr.count == 0) {
        fprintf(stderr, "gpufeed-bandwidth: no CUDA device%s%s\n", pr.count_error ? ": " : "",
                pr.count_error_name);
        return 1;
    }
    cli_cuda_device di;
    if (cli_cuda_device_info(dev, &di) < 0) {
        fprintf(stderr, "gpufeed-bandwidth: device %d: %s\n", dev, cli_cuda_error());
        return 1;
    }
    /* Fewer repetitions of the large copy: the same bytes, less time. */
    cli_bandwidth bw;
    if (cli_cuda_bandwidth(dev, batch, large, batch < ((size_t)64 << 20) ? 40 : 8,
                           large < ((size_t)64 << 20) ? 40 : 8, &bw) < 0) {
        fprintf(stderr, "gpufeed-bandwidth: %s\n", cli_cuda_error());
        return 1;
    }
    const char *names[2] = {"batch", "large"};
    double ratio = bw.gbs[1][0] > 0 ? bw.gbs[0][0] / bw.gbs[1][0] : 0;
    if (json) {
        printf("{\"device\": \"%s\", \"batch_bytes\": %zu, \"large_bytes\": %zu", di.name, batch,
               large);
        for (int k = 0; k < 2; k++)
            printf(", \"%s\": {\"pinned_h2d_gbs\": %.2f, \"pageable_h2d_gbs\": %.2f, "
                   "\"pinned_d2h_gbs\": %.2f, \"pageable_d2h_gbs\": %.2f}",
                   names[k], bw.gbs[k][0], bw.gbs[k][1], bw.gbs[k][2], bw.gbs[k][3]);
        printf(", \"batch_pinned_h2d_of_peak\": %.3f}\n", ratio);
    } else {
        printf("%s: copy bandwidth, GB/s\n", di.name);
        printf("  %-26s %10s %10s %10s %10s\n", "", "H2D pin", "H2D page", "D2H pin",
               "D2H page");
        for (int k = 0; k < 2; k++)
            printf("  %-6s %10.1f MiB        %10.1f %10.1f %10.1f %10.1f\n", names[k],
                   bw.bytes[k] / 1048576.0, bw.gbs[k][0], bw.gbs[k][1], bw.gbs[k][2],
                   bw.gbs[k][3]);
        printf("  batch-sized pinned H2D = %.0f%% of the large-copy peak\n", 100 * ratio);
    }
    return 0;
}
