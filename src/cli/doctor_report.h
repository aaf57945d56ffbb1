/*
 * gpufeed doctor's report and its helpers (doctor_report.c), below the
 * command (doctor.c) and its checks and output (doctor_cuda.c,
 * doctor_host.c, doctor_output.c), which all fill or read it. One thread,
 * the command's.
 */
#ifndef GF_CLI_DOCTOR_REPORT_H
#define GF_CLI_DOCTOR_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "cli.h"
#include "compute.h"
#include "gpufeed.h"

#define MAX_ISSUES 16

/* The rule applied: a CUDA driver runs every runtime of its own CUDA major
 * version or older (CUDA 11+ minor-version compatibility: a 12.2 driver runs
 * a 12.8 runtime), but not a newer major. Within the major, a driver older
 * than the runtime's minor cannot JIT the newer toolkit's PTX; the build
 * ships SASS for sm_80 and sm_90, so that matters only on other GPUs, and
 * the per-device kernel check (doctor_cuda.c) catches it. */
#define COMPAT_RULE                                                                          \
    "driver major >= runtime major (CUDA 11+ minor-version compatibility; "                \
    "below the runtime's minor, no JIT of newer PTX)"

typedef struct doctor_report {
    gf_probe_info lib;

    /* CUDA */
    int cuda_built;
    int driver, runtime;      /* 12040 = 12.4; driver 0 = none */
    int compatible;           /* 1, 0, -1 unknown (no driver or no CUDA) */
    char compat_note[200];
    int count;
    char count_error[64], count_error_text[160];
    char cuda_note[200];      /* why CUDA is unusable, "" if usable */
    int ndev;
#if GF_CLI_HAVE_CUDA
    cli_cuda_device *devs;
    cli_bandwidth bw;
#endif
    int bw_device, bw_done;
    char bw_error[256];

    /* CPU and memory */
    double cpu_quota;         /* cgroup v2 cpu.max in CPUs, 0 = none */
    uint64_t mem_total, mem_available, mem_limit; /* limit 0 = none */

    char issues[MAX_ISSUES][240];
    int nissues;
    char ok[512];
    char summary[2048];
} doctor_report;

/* Adds one thing missing or misconfigured (at most MAX_ISSUES are kept). */
void doctor_issue(doctor_report *r, const char *fmt, ...) CLI_PRINTF(2, 3);
/* Adds one thing that works to the summary's "ok: ..." list. */
void doctor_ok(doctor_report *r, const char *fmt, ...) CLI_PRINTF(2, 3);
/* "12.4" from 12040, in buf. */
const char *doctor_cuda_ver(int v, char *buf, size_t n);
/* libjpeg-turbo's "3.0.1" from 3000001, "unknown" if 0. */
void doctor_turbo_version(int v, char *buf, size_t n);

#endif /* GF_CLI_DOCTOR_REPORT_H */
