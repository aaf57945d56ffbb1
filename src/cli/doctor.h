/*
 * gpufeed doctor's checks and output, which the command (doctor.c, which
 * says what it does) calls in order. One thread, the command's.
 *
 *   doctor.c         the command: options and the order of the checks
 *   doctor_report.c  the report and its helpers (issues, ok items,
 *                    versions), below the others (doctor_report.h)
 *   doctor_cuda.c    CUDA: driver/runtime fit, devices, kernels, bandwidth
 *   doctor_host.c    the library (io_uring, decoders), cores and memory
 *   doctor_output.c  the summary line, the text report and the JSON one
 */
#ifndef GF_CLI_DOCTOR_H
#define GF_CLI_DOCTOR_H

#include "doctor_report.h"

/* The checks, each adding to r (doctor_cuda.c, doctor_host.c). */
void doctor_probe_cuda(doctor_report *r, int device, int bandwidth);
void doctor_check_library(doctor_report *r);
void doctor_probe_host(doctor_report *r);

/* The output (doctor_output.c). */
void doctor_summarize(doctor_report *r);
void doctor_print_text(const doctor_report *r);
void doctor_print_json(const doctor_report *r);

#endif /* GF_CLI_DOCTOR_H */
