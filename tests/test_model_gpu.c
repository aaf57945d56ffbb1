/* The demo trainer's model on a CUDA device against its plain-C reference
 * (src/model/model.c): the same initial weights, the loss and every gradient
 * within float rounding, training that tracks the reference, and the
 * data-parallel packed step (gfm_grad_pack + gfm_apply_packed, the NCCL
 * path) equal to gfm_train_step bit for bit. Exits 77 (skipped) without
 * a device. */
#include <check.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "cuda_present.h"
#include "model_rng.h"

#define CK_CUDA(x)                                                                         \
    do {                                                                                   \
        cudaError_t e_ = (x);                                                              \
        ck_assert_msg(e_ == cudaSuccess, "%s: %s", #x, cudaGetErrorString(e_));           \
    } while (0)

enum { C = 3, S = 16, K = 5, WIDTH = 4, N = 8, PIX = C * S * S };

static cudaStream_t stream;

/* Host to device on the stream the model runs on: a cudaMemcpy on the
 * legacy default stream is not ordered with that non-blocking stream
 * (GF_CUDAEMU_LAZY_DEFAULT shows it). Waits, so the host may rewrite src. */
static void upload(void *dst, const void *src, size_t bytes)
{
    CK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
    CK_CUDA(cudaStreamSynchronize(stream));
}

static gfm_model *make_amp(int device, uint64_t seed, int amp)
{
    gfm_config cfg = {0};
    cfg.in_c = C, cfg.in_h = S, cfg.in_w = S;
    cfg.classes = K, cfg.width = WIDTH, cfg.seed = seed;
    cfg.lr = 0.05f, cfg.momentum = 0.9f, cfg.weight_decay = 5e-4f;
    cfg.device = device;
    cfg.amp = amp;
    gfm_model *m = NULL;
    char why[256];
    int rc = gfm_create(&m, &cfg, why, sizeof why);
    ck_assert_msg(rc == 0, "gfm_create: %s", why);
    return m;
}

static gfm_model *make(int device, uint64_t seed)
{
    return make_amp(device, seed, 0);
}

/* A batch: host x and labels, and x on the device. */
typedef struct batch {
    float x[N * PIX];
    int32_t labels[N];
    float *dx;
} batch;

static void fill(batch *b)
{
    for (int i = 0; i < N * PIX; i++)
        b->x[i] = (float)nrand();
    for (int i = 0; i < N; i++)
        b->labels[i] = (int32_t)(urand() * K);
    upload(b->dx, b->x, sizeof b->x);
}

static void setup(void)
{
    CK_CUDA(cudaSetDevice(0));
    CK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
}

static void teardown(void)
{
    cudaStreamDestroy(stream);
}

/* |a - b| within rel of the largest magnitude in a (model_rng.h). */
static void assert_close(const float *a, const float *b, size_t n, double rel, const char *what)
{
    double amax = 0;
    for (size_t i = 0; i < n; i++)
        amax = fmax(amax, fabs(a[i]));
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs((double)a[i] - b[i]) <= rel * amax + 1e-7,
                      "%s[%zu]: reference %.8g, CUDA %.8g (largest %.3g)", what, i, a[i], b[i],
                      amax);
    printf("model_gpu: %s at %.3g of its tolerance\n", what, tol_ratio(a, b, n, rel));
}

START_TEST(same_initial_weights_as_the_reference)
{
    gfm_model *cpu = make(GFM_CPU, 3), *gpu = make(GFM_CUDA, 3);
    ck_assert_uint_eq(gfm_param_count(cpu), gfm_param_count(gpu));
    ck_assert_uint_eq(gfm_checksum(cpu), gfm_checksum(gpu));
    gfm_destroy(cpu);
    gfm_destroy(gpu);
}
END_TEST

START_TEST(loss_and_gradients_match_the_reference)
{
    rng_state = 11;
    gfm_model *cpu = make(GFM_CPU, 5), *gpu = make(GFM_CUDA, 5);
    const size_t P = gfm_param_count(cpu);
    float *gc = malloc(P * sizeof *gc), *gg = malloc(P * sizeof *gg);
    batch *b = calloc(1, sizeof *b);
    ck_assert(gc && gg && b);
    CK_CUDA(cudaMalloc((void **)&b->dx, sizeof b->x));
    for (int round = 0; round < 3; round++) {
        fill(b);
        float lc, lg;
        int cc, cg;
        memset(gg, 0xff, P * sizeof *gg); /* NaN: every element must be written */
        ck_assert_int_eq(gfm_grad_step(cpu, b->x, b->labels, N, NULL, gc, &lc, &cc), 0);
        ck_assert_msg(gfm_grad_step(gpu, b->dx, b->labels, N, stream, gg, &lg, &cg) == 0, "%s",
                      gfm_error(gpu));
        ck_assert_msg(tol_loss_ratio(lc, lg, TOL_GRAD_LOSS) <= 1,
                      "loss: reference %.8g, CUDA %.8g", lc, lg);
        ck_assert_int_eq(cc, cg);
        assert_close(gc, gg, P, TOL_GRAD, "gradient");
        /* the same update on both, so later rounds start from new weights */
        ck_assert_int_eq(gfm_apply(cpu, gc, NULL), 0);
        ck_assert_int_eq(gfm_apply(gpu, gc, stream), 0);
    }
    cudaFree(b->dx);
    free(b), free(gc), free(gg);
    gfm_destroy(cpu);
    gfm_destroy(gpu);
}
END_TEST

START_TEST(training_tracks_the_reference)
{
    rng_state = 17;
    gfm_model *cpu = make(GFM_CPU, 9), *gpu = make(GFM_CUDA, 9);
    const size_t P = gfm_param_count(cpu);
    batch *b = calloc(1, sizeof *b);
    float *pc = malloc(P * sizeof *pc), *pg = malloc(P * sizeof *pg);
    float *vc = malloc(P * sizeof *vc), *vg = malloc(P * sizeof *vg);
    ck_assert(b && pc && pg && vc && vg);
    CK_CUDA(cudaMalloc((void **)&b->dx, sizeof b->x));
    for (int step = 0; step < 10; step++) {
        fill(b);
        float lc, lg;
        int cc, cg;
        ck_assert_int_eq(gfm_train_step(cpu, b->x, b->labels, N, NULL, &lc, &cc), 0);
        ck_assert_msg(gfm_train_step(gpu, b->dx, b->labels, N, stream, &lg, &cg) == 0, "%s",
                      gfm_error(gpu));
        /* b->dx is rewritten next: the queued step must have read it */
        ck_assert_int_eq(gfm_sync(gpu, &lg, &cg), 0);
        ck_assert_msg(tol_loss_ratio(lc, lg, TOL_TRAIN_LOSS) <= 1,
                      "step %d loss: reference %.8g, CUDA %.8g", step, lc, lg);
    }
    ck_assert_int_eq(gfm_state_get(cpu, pc, vc), 0);
    ck_assert_int_eq(gfm_state_get(gpu, pg, vg), 0);
    assert_close(pc, pg, P, TOL_PARAM, "parameter");
    assert_close(vc, vg, P, TOL_MOMENTUM, "momentum");
    cudaFree(b->dx);
    free(b), free(pc), free(pg), free(vc), free(vg);
    gfm_destroy(cpu);
    gfm_destroy(gpu);
}
END_TEST

/* One rank's packed step, summed over one rank (nothing to add), is the
 * plain step: n = 8 makes x n and / n exact. */
START_TEST(packed_step_is_the_train_step_bit_for_bit)
{
    rng_state = 23;
    gfm_model *a = make(GFM_CUDA, 4), *b = make(GFM_CUDA, 4);
    batch *x = calloc(1, sizeof *x);
    ck_assert_ptr_nonnull(x);
    CK_CUDA(cudaMalloc((void **)&x->dx, sizeof x->x));
    for (int step = 0; step < 5; step++) {
        fill(x);
        float la, tot[3], *packed = NULL;
        int ca;
        ck_assert_int_eq(gfm_train_step(a, x->dx, x->labels, N, stream, &la, &ca), 0);
        ck_assert_int_eq(gfm_sync(a, &la, &ca), 0);
        ck_assert_msg(gfm_grad_pack(b, x->dx, x->labels, N, stream, &packed) == 0, "%s",
                      gfm_error(b));
        ck_assert_ptr_nonnull(packed);
        ck_assert_int_eq(gfm_grad_pack(b, x->dx, x->labels, N, stream, &packed), -1);
        ck_assert_msg(gfm_apply_packed(b, stream, tot) == 0, "%s", gfm_error(b));
        ck_assert_float_eq(tot[0], (float)N);
        ck_assert_float_eq(tot[1], (float)ca);
        ck_assert_float_eq(tot[2], la * (float)N);
        ck_assert_uint_eq(gfm_checksum(a), gfm_checksum(b));
    }
    /* a rank with nothing: zeros, and no update */
    uint64_t before = gfm_checksum(b);
    float tot[3] = {1, 1, 1}, *packed = NULL;
    ck_assert_int_eq(gfm_grad_pack(b, NULL, NULL, 0, stream, &packed), 0);
    ck_assert_int_eq(gfm_apply_packed(b, stream, tot), 0);
    ck_assert(tot[0] == 0 && tot[1] == 0 && tot[2] == 0);
    ck_assert_uint_eq(gfm_checksum(b), before);
    ck_assert_int_eq(gfm_apply_packed(b, stream, tot), -1); /* nothing packed */
    cudaFree(x->dx);
    free(x);
    gfm_destroy(a);
    gfm_destroy(b);
}
END_TEST

/* amp reads float16 input and computes in float32: its steps are the
 * float32 model's on the same values, bit for bit (a half converts to
 * float exactly). */
START_TEST(amp_steps_are_float32_steps_on_rounded_input)
{
    rng_state = 29;
    gfm_model *f = make(GFM_CUDA, 6), *h = make_amp(GFM_CUDA, 6, 1);
    batch *b = calloc(1, sizeof *b);
    _Float16 *xh = malloc(N * PIX * sizeof *xh);
    void *dxh = NULL;
    ck_assert(b && xh);
    CK_CUDA(cudaMalloc((void **)&b->dx, sizeof b->x));
    CK_CUDA(cudaMalloc(&dxh, N * PIX * sizeof *xh));
    for (int step = 0; step < 5; step++) {
        for (int i = 0; i < N * PIX; i++) {
            xh[i] = (_Float16)(float)nrand();
            b->x[i] = (float)xh[i];
        }
        for (int i = 0; i < N; i++)
            b->labels[i] = (int32_t)(urand() * K);
        upload(b->dx, b->x, sizeof b->x);
        upload(dxh, xh, N * PIX * sizeof *xh);
        float lf, lh;
        int cf, ch;
        ck_assert_int_eq(gfm_train_step(f, b->dx, b->labels, N, stream, &lf, &cf), 0);
        ck_assert_msg(gfm_train_step(h, (const float *)dxh, b->labels, N, stream, &lh, &ch) == 0,
                      "%s", gfm_error(h));
        ck_assert_int_eq(gfm_sync(f, &lf, &cf), 0);
        ck_assert_int_eq(gfm_sync(h, &lh, &ch), 0);
        ck_assert_msg(lf == lh, "step %d: loss %.9g (float32) vs %.9g (amp)", step, lf, lh);
        ck_assert_int_eq(cf, ch);
        ck_assert_uint_eq(gfm_checksum(f), gfm_checksum(h));
    }
    cudaFree(dxh);
    cudaFree(b->dx);
    free(b), free(xh);
    gfm_destroy(f);
    gfm_destroy(h);
}
END_TEST

int main(void)
{
#if GF_TEST_NEEDS_FMA /* the model's device code was built with -mfma */
    if (!__builtin_cpu_supports("fma"))
        return 77;
#endif
    int present = tu_cuda_present();
    if (present != 0)
        return present;
    Suite *s = suite_create("model_gpu");
    TCase *t = tcase_create("model_gpu");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 120);
    tcase_add_test(t, same_initial_weights_as_the_reference);
    tcase_add_test(t, loss_and_gradients_match_the_reference);
    tcase_add_test(t, training_tracks_the_reference);
    tcase_add_test(t, packed_step_is_the_train_step_bit_for_bit);
    tcase_add_test(t, amp_steps_are_float32_steps_on_rounded_input);
    suite_add_tcase(s, t);
    return tu_run_cuda_suite(s);
}
