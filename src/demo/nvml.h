/* NVML's GPU utilization, sampled during gpufeed train's runs, as
 * nvidia-smi reports it: the percent of time over the driver's last
 * sample period (1/6 s to 1 s) in which a kernel ran. libnvidia-ml comes
 * with the driver, not the toolkit: it is loaded at run time
 * ($GPUFEED_NVML_LIBRARY, else libnvidia-ml.so.1), and without it the
 * trainer reports CUDA-event utilization alone.
 *
 * A thread reads the device every CLI_NVML_PERIOD_MS while sampling is on
 * (cli_nvml_resume .. cli_nvml_pause); cli_nvml_take returns the mean of
 * the readings since the last take. Each int function returns 0, or -1
 * with the reason in why. */
#ifndef GF_CLI_NVML_H
#define GF_CLI_NVML_H

#include <stddef.h>

enum { CLI_NVML_PERIOD_MS = 100 };

typedef struct cli_nvml cli_nvml;

/* The device with this PCI bus id ("0000:65:00.0", as
 * cudaDeviceGetPCIBusId writes it). */
int cli_nvml_open(cli_nvml **out, const char *pci_bus_id, char *why, size_t why_len);
void cli_nvml_resume(cli_nvml *n);
void cli_nvml_pause(cli_nvml *n);
/* Mean utilization (0..1) of the readings since the last take, and how
 * many; *mean = -1 when there were none (a run shorter than a period). */
void cli_nvml_take(cli_nvml *n, double *mean, int *readings);
void cli_nvml_close(cli_nvml *n); /* NULL: no-op */

#endif
