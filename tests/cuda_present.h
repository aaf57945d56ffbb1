/* Whether the CUDA suites can run here (test_gpu.c, test_model_gpu.c),
 * and how they run.
 * No GPU or no driver is a skip (exit 77); a machine whose driver is there
 * but fails in any other way is a failure, so a broken GPU machine never
 * reads as "skipped". */
#ifndef GF_TEST_CUDA_PRESENT_H
#define GF_TEST_CUDA_PRESENT_H

#include <check.h>
#include <cuda_runtime_api.h>
#include <stdio.h>

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

/* Runs s in this process (CUDA does not survive fork()); the exit code. */
static inline int tu_run_cuda_suite(Suite *s)
{
    return tu_run_suite_forking(s, CK_NOFORK);
}

#endif
