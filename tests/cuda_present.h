/* Whether the CUDA suites can run here (test_gpu.c, test_model_gpu.c),
 * and how they run.
 * No GPU or no driver is a skip (exit 77); a machine whose driver is there
 * but fails in any other way is a failure, so a broken GPU machine never
 * reads as "skipped". Without fork, a watchdog bounds each test
 * (run_suite.h: GF_TEST_WATCHDOG_S). */
#ifndef GF_TEST_CUDA_PRESENT_H
#define GF_TEST_CUDA_PRESENT_H

#include <check.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run_suite.h"

/* 0: run; 77: skip; 1: fail. Says which on stdout. */
static int tu_cuda_present(void)
{
    int n = 0, driver = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    cudaDriverGetVersion(&driver);
    if (e == cudaSuccess && n > 0)
        return 0;
    if (e == cudaSuccess || e == cudaErrorNoDevice ||
        (e == cudaErrorInsufficientDriver && driver == 0)) {
        printf("SKIP: no CUDA device (%s)\n", e == cudaSuccess ? "0 devices" : cudaGetErrorName(e));
        return 77;
    }
    printf("FAIL: CUDA driver %d.%d is present but unusable: %s (%s)\n", driver / 1000,
           driver % 1000 / 10, cudaGetErrorName(e), cudaGetErrorString(e));
    return 1;
}

/* GF_TEST_INJECT_HANG=1 (the device check's rehearsal,
 * bench/gpu-check.sh): a last test that never ends, for the watchdog. */
START_TEST(an_injected_hang)
{
    for (;;)
        sleep(1);
}
END_TEST

/* Runs s in this process (CUDA does not survive fork()), under the
 * watchdog of run_suite.h; the exit code. */
static inline int tu_run_cuda_suite(Suite *s)
{
    const char *hang = getenv("GF_TEST_INJECT_HANG");
    if (hang && strcmp(hang, "1") == 0) {
        TCase *t = tcase_create("injected_hang");
        tcase_add_test(t, an_injected_hang);
        suite_add_tcase(s, t);
    }
    return tu_run_suite_forking(s, CK_NOFORK);
}

#endif
