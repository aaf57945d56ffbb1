/* The model suites' random inputs (test_model.c, test_model_gpu.c):
 * splitmix64 uniforms and Box-Muller normals from one seedable state; and
 * the tolerances model_gpu holds the CUDA model to, which test_model also
 * holds the FMA-contracted reference to (nvcc contracts to FMA). */
#ifndef GF_TEST_MODEL_RNG_H
#define GF_TEST_MODEL_RNG_H

#include <math.h>
#include <stdint.h>

#include "../src/mix.h"

static uint64_t rng_state;

static double urand(void)
{
    uint64_t z = gf__splitmix64(&rng_state);
    return ((z >> 11) + 0.5) * 0x1p-53;
}

static double nrand(void)
{
    return sqrt(-2 * log(urand())) * cos(6.283185307179586 * urand());
}

/* Relative tolerances (against the largest magnitude of the array, plus
 * 1e-7 absolute; the loss: its own magnitude, plus 1e-6). */
#define TOL_GRAD_LOSS 1e-5 /* one batch's loss */
#define TOL_GRAD 1e-4      /* one batch's gradients */
#define TOL_TRAIN_LOSS 1e-4 /* each loss over 10 training steps */
#define TOL_PARAM 1e-4     /* parameters after them */
#define TOL_MOMENTUM 1e-3  /* momentum after them */

/* The largest |a - b| over its allowance rel * max|a| + 1e-7: <= 1 passes. */
static double tol_ratio(const float *a, const float *b, size_t n, double rel)
{
    double amax = 0, worst = 0;
    for (size_t i = 0; i < n; i++)
        amax = fmax(amax, fabs(a[i]));
    for (size_t i = 0; i < n; i++)
        worst = fmax(worst, fabs((double)a[i] - b[i]) / (rel * amax + 1e-7));
    return worst;
}

static double tol_loss_ratio(double a, double b, double rel)
{
    return fabs(a - b) / (rel * fabs(a) + 1e-6);
}

#endif
