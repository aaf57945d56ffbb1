/* The demo trainer's model (src/model/model.c), CPU reference: the loss and
 * its gradients against hand values and finite differences, determinism,
 * and that it learns a separable task but not shuffled labels. With
 * GF_TEST_FMA_REF, also the reference built a second time with FMA
 * contraction (-ffp-contract=fast, -mfma on x86: gfm__fma_*), as nvcc
 * builds the CUDA model: the two agree within model_gpu's tolerances, so
 * a model_gpu failure on a GPU is not FMA rounding. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "model_rng.h"
#if GF_TEST_FMA_REF
#include "model_impl.h"
void gfm__fma_forward(gfm_model *m, const float *x, const int32_t *labels, int n, float *loss,
                      int *correct);
void gfm__fma_backward(gfm_model *m, const float *x, const int32_t *labels, int n);
void gfm__fma_sgd(gfm_model *m);
#endif

static gfm_config config(int c, int h, int w, int classes, int width, uint64_t seed)
{
    gfm_config cfg = {0};
    cfg.in_c = c, cfg.in_h = h, cfg.in_w = w;
    cfg.classes = classes, cfg.width = width, cfg.seed = seed;
    cfg.lr = 0.05f, cfg.momentum = 0.9f, cfg.weight_decay = 5e-4f;
    cfg.device = GFM_CPU;
    return cfg;
}

static gfm_model *make(const gfm_config *cfg)
{
    gfm_model *m = NULL;
    char why[256];
    int rc = gfm_create(&m, cfg, why, sizeof why);
    ck_assert_msg(rc == 0, "gfm_create: %s", why);
    return m;
}

START_TEST(softmax_cross_entropy_matches_hand_value)
{
    gfm_config cfg = config(1, 8, 8, 3, 2, 1);
    gfm_model *m = make(&cfg);
    gfm_params p;
    ck_assert_int_eq(gfm_params_get(m, &p), 0);
    /* zero linear weights: the logits are the biases 1, 2, 3 */
    memset(p.w3, 0, p.n_w3 * sizeof(float));
    p.b3[0] = 1, p.b3[1] = 2, p.b3[2] = 3;
    float x[2 * 64];
    for (int i = 0; i < 2 * 64; i++)
        x[i] = (float)nrand();
    int32_t labels[2] = {0, 2};
    float loss;
    int correct;
    ck_assert_int_eq(gfm_evaluate(m, x, labels, 2, NULL, &loss, &correct), 0);
    /* lse(1,2,3) = 3.40760596; losses 2.40760596 and 0.40760596 */
    ck_assert_double_eq_tol(loss, 1.40760596, 1e-6);
    ck_assert_int_eq(correct, 1);
    gfm_destroy(m);
}
END_TEST

/* Every parameter's gradient against a central difference of the loss. */
START_TEST(gradients_match_finite_differences)
{
    rng_state = 42;
    gfm_config cfg = config(3, 8, 8, 3, 2, 7);
    gfm_model *m = make(&cfg);
    gfm_params p, g;
    ck_assert_int_eq(gfm_params_get(m, &p), 0);
    /* biases away from 0, so the bias paths and ReLU masks matter */
    for (size_t i = 0; i < p.n_b1; i++)
        p.b1[i] = (float)(0.1 * nrand());
    for (size_t i = 0; i < p.n_b2; i++)
        p.b2[i] = (float)(0.1 * nrand());
    for (size_t i = 0; i < p.n_b3; i++)
        p.b3[i] = (float)(0.1 * nrand());
    enum { N = 3, PIX = 3 * 8 * 8 };
    float x[N * PIX];
    for (int i = 0; i < N * PIX; i++)
        x[i] = (float)nrand();
    int32_t labels[N] = {0, 2, 1};
    float loss0;
    ck_assert_int_eq(gfm_gradients(m, x, labels, N, &g, &loss0), 0);
    ck_assert(loss0 > 0);

    float *pw[6] = {p.w1, p.b1, p.w2, p.b2, p.w3, p.b3};
    float *gw[6] = {g.w1, g.b1, g.w2, g.b2, g.w3, g.b3};
    size_t len[6] = {p.n_w1, p.n_b1, p.n_w2, p.n_b2, p.n_w3, p.n_b3};
    const char *name[6] = {"w1", "b1", "w2", "b2", "w3", "b3"};
    ck_assert_uint_eq(len[0], 2 * 3 * 9);
    ck_assert_uint_eq(len[2], 4 * 2 * 9);
    ck_assert_uint_eq(len[4], 3 * 4);
    int checked = 0, nonzero = 0;
    for (int t = 0; t < 6; t++) {
        float *an = malloc(len[t] * sizeof(float));
        memcpy(an, gw[t], len[t] * sizeof(float)); /* evaluate keeps them, but be sure */
        for (size_t i = 0; i < len[t]; i++) {
            const float eps = 2e-3f, w0 = pw[t][i];
            float lp, lm;
            pw[t][i] = w0 + eps;
            ck_assert_int_eq(gfm_evaluate(m, x, labels, N, NULL, &lp, NULL), 0);
            pw[t][i] = w0 - eps;
            ck_assert_int_eq(gfm_evaluate(m, x, labels, N, NULL, &lm, NULL), 0);
            pw[t][i] = w0;
            double fd = ((double)lp - lm) / (2.0 * eps);
            double a = an[i], scale = fmax(fabs(fd), fabs(a));
            ck_assert_msg(fabs(fd - a) <= 1e-2 * scale + 2e-4,
                          "%s[%zu]: analytic %.6g, finite difference %.6g", name[t], i, a, fd);
            checked++;
            nonzero += scale > 1e-3;
        }
        free(an);
    }
    ck_assert_int_eq(checked, 54 + 2 + 72 + 4 + 12 + 3);
    ck_assert_msg(nonzero > checked / 2, "only %d of %d gradients are not ~0", nonzero, checked);
    gfm_destroy(m);
}
END_TEST

static uint64_t run_steps(uint64_t seed, int steps)
{
    rng_state = 5;
    gfm_config cfg = config(3, 8, 8, 4, 3, seed);
    gfm_model *m = make(&cfg);
    enum { N = 6, PIX = 3 * 64 };
    float x[N * PIX];
    int32_t labels[N];
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i < N * PIX; i++)
            x[i] = (float)nrand();
        for (int i = 0; i < N; i++)
            labels[i] = (int32_t)(urand() * 4);
        float loss;
        int correct;
        ck_assert_int_eq(gfm_train_step(m, x, labels, N, NULL, &loss, &correct), 0);
        ck_assert(isfinite(loss));
        ck_assert(correct >= 0 && correct <= N);
    }
    uint64_t h = gfm_checksum(m);
    gfm_destroy(m);
    return h;
}

START_TEST(same_seed_same_weights)
{
    uint64_t a = run_steps(11, 5), b = run_steps(11, 5), c = run_steps(12, 5);
    ck_assert_uint_eq(a, b);
    ck_assert_uint_ne(a, c);
    ck_assert_uint_ne(run_steps(11, 0), a); /* steps change the weights */
    ck_assert_uint_eq(run_steps(11, 0), run_steps(11, 0));
}
END_TEST

/* Class k: channel k's mean is raised by 0.5 over unit noise. */
enum { TC = 3, TH = 16, TPIX = TC * TH * TH };

static void synth(float *x, int32_t *labels, int n)
{
    for (int s = 0; s < n; s++) {
        int k = (int)(urand() * TC);
        labels[s] = k;
        for (int i = 0; i < TPIX; i++)
            x[(size_t)s * TPIX + i] = (float)nrand() + (i / (TH * TH) == k ? 0.5f : 0.0f);
    }
}

/* 200 steps of 32 from a pool of 512; accuracy on 300 held-out samples. */
static double train_and_test(int shuffle)
{
    rng_state = 99;
    enum { POOL = 512, B = 32, STEPS = 200, TEST = 300 };
    float *x = malloc((size_t)POOL * TPIX * sizeof(float));
    float *xt = malloc((size_t)TEST * TPIX * sizeof(float));
    int32_t y[POOL], yt[TEST];
    synth(x, y, POOL);
    synth(xt, yt, TEST);
    if (shuffle)
        for (int i = POOL - 1; i > 0; i--) {
            int j = (int)(urand() * (i + 1));
            int32_t t = y[i];
            y[i] = y[j], y[j] = t;
        }
    gfm_config cfg = config(TC, TH, TH, TC, 4, 3);
    gfm_model *m = make(&cfg);
    float loss = 0;
    int correct;
    for (int s = 0; s < STEPS; s++) {
        int off = (s * B) % POOL;
        ck_assert_int_eq(gfm_train_step(m, x + (size_t)off * TPIX, y + off, B, NULL, &loss, &correct),
                         0);
        ck_assert(isfinite(loss));
    }
    ck_assert_int_eq(gfm_evaluate(m, xt, yt, TEST, NULL, &loss, &correct), 0);
    gfm_destroy(m);
    free(x);
    free(xt);
    return (double)correct / TEST;
}

START_TEST(learns_a_separable_task)
{
    double acc = train_and_test(0);
    ck_assert_msg(acc >= 0.9, "held-out accuracy %.3f", acc);
}
END_TEST

START_TEST(shuffled_labels_stay_at_chance)
{
    double acc = train_and_test(1);
    ck_assert_msg(acc > 0.2 && acc < 0.47, "held-out accuracy %.3f, chance 0.333", acc);
}
END_TEST

START_TEST(batches_of_any_size_reuse_buffers)
{
    rng_state = 8;
    gfm_config cfg = config(2, 12, 8, 5, 3, 1);
    gfm_model *m = make(&cfg);
    int sizes[] = {2, 7, 1, 7, 3, 16};
    float *x = malloc(16 * 2 * 12 * 8 * sizeof(float));
    int32_t labels[16];
    for (int i = 0; i < 16 * 2 * 12 * 8; i++)
        x[i] = (float)nrand();
    for (int i = 0; i < 16; i++)
        labels[i] = i % 5;
    for (size_t t = 0; t < sizeof sizes / sizeof *sizes; t++) {
        float loss;
        int correct;
        ck_assert_int_eq(gfm_train_step(m, x, labels, sizes[t], NULL, &loss, &correct), 0);
        ck_assert(isfinite(loss) && loss > 0);
        ck_assert_int_eq(gfm_evaluate(m, x, labels, 16, NULL, &loss, &correct), 0);
        ck_assert_int_eq(gfm_sync(m, &loss, &correct), 0);
    }
    free(x);
    gfm_destroy(m);
}
END_TEST

/* The mean loss of a batch is the mean of its samples' losses, and the
 * gradient of a batch the mean of its samples' gradients. */
START_TEST(batch_gradient_is_the_mean_of_sample_gradients)
{
    rng_state = 3;
    gfm_config cfg = config(2, 8, 8, 3, 2, 5);
    gfm_model *m = make(&cfg);
    float x[4 * 128];
    int32_t labels[4] = {0, 1, 2, 1};
    for (int i = 0; i < 4 * 128; i++)
        x[i] = (float)nrand();
    gfm_params g;
    float lb, ls, lsum = 0;
    ck_assert_int_eq(gfm_gradients(m, x, labels, 4, &g, &lb), 0);
    size_t n = g.n_w1 + g.n_b1 + g.n_w2 + g.n_b2 + g.n_w3 + g.n_b3;
    /* the gradient buffers are one array in the order w1 b1 w2 b2 w3 b3 */
    ck_assert_ptr_eq(g.b3 + g.n_b3, g.w1 + n);
    double *sum = calloc(n, sizeof(double));
    float *batch = malloc(n * sizeof(float));
    memcpy(batch, g.w1, n * sizeof(float));
    for (int s = 0; s < 4; s++) {
        ck_assert_int_eq(gfm_gradients(m, x + s * 128, labels + s, 1, &g, &ls), 0);
        lsum += ls;
        for (size_t i = 0; i < n; i++)
            sum[i] += g.w1[i];
    }
    ck_assert_double_eq_tol(lb, lsum / 4, 1e-5);
    for (size_t i = 0; i < n; i++)
        ck_assert_double_eq_tol(batch[i], sum[i] / 4, 1e-5 + 1e-4 * fabs(batch[i]));
    free(sum);
    free(batch);
    gfm_destroy(m);
}
END_TEST

/* v = momentum*v + g + wd*w (no wd on biases); w -= lr*v: two steps. */
START_TEST(sgd_applies_momentum_and_weight_decay_to_weights_only)
{
    rng_state = 17;
    gfm_config cfg = config(2, 8, 8, 3, 2, 9);
    cfg.weight_decay = 0.25f; /* large, so a misplaced decay shows */
    gfm_model *m = make(&cfg);
    float x[2 * 128];
    int32_t labels[2] = {2, 0};
    for (int i = 0; i < 2 * 128; i++)
        x[i] = (float)nrand();
    gfm_params p, g;
    ck_assert_int_eq(gfm_params_get(m, &p), 0);
    for (size_t i = 0; i < p.n_b3; i++)
        p.b3[i] = 0.5f; /* decay would move nonzero biases */
    size_t n = p.n_w1 + p.n_b1 + p.n_w2 + p.n_b2 + p.n_w3 + p.n_b3;
    size_t bias_at[3][2] = {{p.b1 - p.w1, p.n_b1}, {p.b2 - p.w1, p.n_b2}, {p.b3 - p.w1, p.n_b3}};
    float *w = malloc(n * sizeof(float)), *v = calloc(n, sizeof(float));
    char *is_bias = calloc(n, 1);
    for (int b = 0; b < 3; b++)
        memset(is_bias + bias_at[b][0], 1, bias_at[b][1]);
    for (int step = 0; step < 2; step++) {
        memcpy(w, p.w1, n * sizeof(float));
        float loss;
        int correct;
        ck_assert_int_eq(gfm_gradients(m, x, labels, 2, &g, &loss), 0);
        for (size_t i = 0; i < n; i++) {
            v[i] = cfg.momentum * v[i] + g.w1[i] + (is_bias[i] ? 0 : cfg.weight_decay * w[i]);
            w[i] -= cfg.lr * v[i];
        }
        ck_assert_int_eq(gfm_train_step(m, x, labels, 2, NULL, &loss, &correct), 0);
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(fabsf(p.w1[i] - w[i]) <= 1e-6f + 1e-5f * fabsf(w[i]),
                          "step %d, parameter %zu: %g, expected %g", step, i, p.w1[i], w[i]);
    }
    free(w);
    free(v);
    free(is_bias);
    gfm_destroy(m);
}
END_TEST

START_TEST(bad_arguments_are_refused)
{
    char why[256];
    gfm_model *m = (gfm_model *)1;
    gfm_config cfg = config(3, 10, 8, 3, 2, 1); /* 10: not a multiple of 4 */
    ck_assert_int_eq(gfm_create(&m, &cfg, why, sizeof why), -1);
    ck_assert_ptr_null(m);
    ck_assert_ptr_nonnull(strstr(why, "shape"));
    cfg = config(3, 8, 8, 1, 2, 1);
    ck_assert_int_eq(gfm_create(&m, &cfg, why, sizeof why), -1);
    cfg = config(3, 8, 8, 3, 2, 1);
    cfg.lr = 0;
    ck_assert_int_eq(gfm_create(&m, &cfg, why, sizeof why), -1);
    cfg = config(3, 8, 8, 3, 2, 1);
    cfg.device = GFM_CUDA; /* this test builds the model without CUDA */
    ck_assert_int_eq(gfm_create(&m, &cfg, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "CUDA"));
    cfg = config(3, 8, 8, 3, 2, 1);
    cfg.amp = 1; /* float16 input: CUDA models only */
    ck_assert_int_eq(gfm_create(&m, &cfg, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "amp"));

    cfg = config(3, 8, 8, 3, 2, 1);
    m = make(&cfg);
    float x[3 * 64] = {0};
    int32_t bad = 3;
    float loss;
    int correct;
    ck_assert_int_eq(gfm_train_step(m, x, &bad, 1, NULL, &loss, &correct), -1);
    ck_assert_ptr_nonnull(strstr(gfm_error(m), "label"));
    bad = -1;
    ck_assert_int_eq(gfm_evaluate(m, x, &bad, 1, NULL, &loss, &correct), -1);
    int32_t ok = 0;
    ck_assert_int_eq(gfm_train_step(m, x, &ok, 0, NULL, &loss, &correct), -1);
    ck_assert_int_eq(gfm_train_step(m, x, &ok, 1, NULL, &loss, &correct), 0);
    /* 2*conv1 + 3*conv2 + 3*linear multiply-adds */
    double c1 = 2.0 * 27 * 64, c2 = 4.0 * 18 * 16, l3 = 3.0 * 4;
    ck_assert_double_eq_tol(gfm_step_flops(m), 2 * c1 + 3 * c2 + 3 * l3, 1e-9);
    gfm_destroy(m);
    gfm_destroy(NULL);
}
END_TEST

#if GF_TEST_FMA_REF
/* model_gpu's shapes and inputs (test_model_gpu.c). */
enum { FC = 3, FS = 16, FK = 5, FWIDTH = 4, FN = 8, FPIX = FC * FS * FS };

static int fma_runs_here(void)
{
#if GF_TEST_NEEDS_FMA
    return __builtin_cpu_supports("fma");
#else
    return 1;
#endif
}

static void fma_fill(float *x, int32_t *labels)
{
    for (int i = 0; i < FN * FPIX; i++)
        x[i] = (float)nrand();
    for (int i = 0; i < FN; i++)
        labels[i] = (int32_t)(urand() * FK);
}

/* The FMA reference's step on m, whose buffers a plain call reserved. */
static void fma_grads(gfm_model *m, const float *x, const int32_t *labels, float *loss, int *c)
{
    gfm__fma_forward(m, x, labels, FN, loss, c);
    gfm__fma_backward(m, x, labels, FN);
}

/* model_gpu's loss_and_gradients_match_the_reference, FMA for CUDA. */
START_TEST(fma_reference_gradients_within_model_gpu_tolerances)
{
    if (!fma_runs_here())
        return;
    rng_state = 11;
    gfm_config cfg = config(FC, FS, FS, FK, FWIDTH, 5);
    gfm_model *a = make(&cfg), *b = make(&cfg);
    const size_t P = gfm_param_count(a);
    float *ga = malloc(P * sizeof *ga), *x = malloc(FN * FPIX * sizeof *x), la, lb;
    int32_t labels[FN];
    int ca, cb;
    double worst_loss = 0, worst_grad = 0;
    ck_assert(ga && x);
    for (int round = 0; round < 3; round++) {
        fma_fill(x, labels);
        ck_assert_int_eq(gfm_grad_step(a, x, labels, FN, NULL, ga, &la, &ca), 0);
        ck_assert_int_eq(gfm_grad_step(b, x, labels, FN, NULL, b->grads, &lb, &cb), 0);
        fma_grads(b, x, labels, &lb, &cb);
        worst_loss = fmax(worst_loss, tol_loss_ratio(la, lb, TOL_GRAD_LOSS));
        worst_grad = fmax(worst_grad, tol_ratio(ga, b->grads, P, TOL_GRAD));
        ck_assert_int_eq(ca, cb);
        ck_assert_int_eq(gfm_apply(a, ga, NULL), 0);
        memcpy(b->grads, ga, P * sizeof *ga);
        gfm__fma_sgd(b);
    }
    printf("fma reference: loss at %.3f, gradients at %.3f of model_gpu's tolerances\n",
           worst_loss, worst_grad);
    ck_assert_msg(worst_loss <= 1 && worst_grad <= 1, "loss %.3f, gradients %.3f", worst_loss,
                  worst_grad);
    free(ga), free(x);
    gfm_destroy(a);
    gfm_destroy(b);
}
END_TEST

/* model_gpu's training_tracks_the_reference, FMA for CUDA. */
START_TEST(fma_reference_training_within_model_gpu_tolerances)
{
    if (!fma_runs_here())
        return;
    rng_state = 17;
    gfm_config cfg = config(FC, FS, FS, FK, FWIDTH, 9);
    gfm_model *a = make(&cfg), *b = make(&cfg);
    const size_t P = gfm_param_count(a);
    float *x = malloc(FN * FPIX * sizeof *x), *pa = malloc(P * sizeof *pa);
    float *pb = malloc(P * sizeof *pb), *va = malloc(P * sizeof *va), *vb = malloc(P * sizeof *vb);
    float la, lb;
    int32_t labels[FN];
    int ca, cb;
    double worst_loss = 0;
    ck_assert(x && pa && pb && va && vb);
    for (int step = 0; step < 10; step++) {
        fma_fill(x, labels);
        ck_assert_int_eq(gfm_train_step(a, x, labels, FN, NULL, &la, &ca), 0);
        if (step == 0) /* reserves b's buffers; no update */
            ck_assert_int_eq(gfm_grad_step(b, x, labels, FN, NULL, b->grads, &lb, &cb), 0);
        fma_grads(b, x, labels, &lb, &cb);
        gfm__fma_sgd(b);
        worst_loss = fmax(worst_loss, tol_loss_ratio(la, lb, TOL_TRAIN_LOSS));
    }
    ck_assert_int_eq(gfm_state_get(a, pa, va), 0);
    ck_assert_int_eq(gfm_state_get(b, pb, vb), 0);
    double wp = tol_ratio(pa, pb, P, TOL_PARAM), wv = tol_ratio(va, vb, P, TOL_MOMENTUM);
    printf("fma reference, 10 steps: losses at %.3f, parameters at %.3f, momentum at %.3f of "
           "model_gpu's tolerances\n", worst_loss, wp, wv);
    ck_assert_msg(worst_loss <= 1 && wp <= 1 && wv <= 1, "loss %.3f, parameters %.3f, "
                  "momentum %.3f", worst_loss, wp, wv);
    free(x), free(pa), free(pb), free(va), free(vb);
    gfm_destroy(a);
    gfm_destroy(b);
}
END_TEST
#endif

static Suite *model_suite(void)
{
    Suite *s = suite_create("model");
    TCase *loss = tcase_create("loss and gradients");
    tcase_add_test(loss, softmax_cross_entropy_matches_hand_value);
    tcase_add_test(loss, gradients_match_finite_differences);
    tcase_add_test(loss, batch_gradient_is_the_mean_of_sample_gradients);
    suite_add_tcase(s, loss);
    TCase *train = tcase_create("training");
    tcase_set_timeout(train, 120);
    tcase_add_test(train, sgd_applies_momentum_and_weight_decay_to_weights_only);
    tcase_add_test(train, same_seed_same_weights);
    tcase_add_test(train, learns_a_separable_task);
    tcase_add_test(train, shuffled_labels_stay_at_chance);
    tcase_add_test(train, batches_of_any_size_reuse_buffers);
    suite_add_tcase(s, train);
    TCase *api = tcase_create("api");
    tcase_add_test(api, bad_arguments_are_refused);
    suite_add_tcase(s, api);
#if GF_TEST_FMA_REF
    TCase *fma = tcase_create("fma");
    tcase_set_timeout(fma, 120);
    tcase_add_test(fma, fma_reference_gradients_within_model_gpu_tolerances);
    tcase_add_test(fma, fma_reference_training_within_model_gpu_tolerances);
    suite_add_tcase(s, fma);
#endif
    return s;
}

#include "run_suite.h"

int main(void)
{
    return tu_run_suite(model_suite());
}
