/*
 * The machine and the process as the commands report them: clocks,
 * resource use, cores, the CPU's name, and how much of a data set sits in
 * the page cache. Any thread.
 */
#ifndef GF_CLI_SYSINFO_H
#define GF_CLI_SYSINFO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

double cli_now(void);            /* monotonic seconds */
uint64_t cli_peak_rss_bytes(void); /* getrusage(RUSAGE_SELF) */
double cli_cpu_seconds(void);    /* user + system time of the process */
int cli_cores(void);             /* online CPUs, at least 1 */
/* The CPU's model name (/proc/cpuinfo "model name"), or "unknown". */
void cli_cpu_model(char *buf, size_t len);

/* Fraction of the pages of the given files resident in the page cache
 * (mincore), or -1 if it cannot be measured. Does not read the files. */
double cli_page_cache_fraction(char *const *paths, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* GF_CLI_SYSINFO_H */
