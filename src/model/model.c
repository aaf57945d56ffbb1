/*
 * The demo trainer's model (src/model/model.h): argument checking,
 * parameter initialisation, its memory, and the dispatch to the plain-C
 * reference (model_ref.c) or to the CUDA backend (src/model/model.cu)
 * when the CLI was built with CUDA.
 *
 * Every buffer is allocated once, sized for the largest batch seen.
 */
#include "model_impl.h"
#include "../mix.h" /* header-only: gf__splitmix64, gf__fnv1a64 */

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(GF_CLI_HAVE_CUDA) && GF_CLI_HAVE_CUDA && !(defined(GFM_NO_CUDA) && GFM_NO_CUDA)
#define GFM_WITH_CUDA 1
#else
#define GFM_WITH_CUDA 0
#endif

static int fail(gfm_model *m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->err, sizeof m->err, fmt, ap);
    va_end(ap);
    return -1;
}

const char *gfm_error(const gfm_model *m)
{
    return m ? m->err : "no model";
}

/* ---- initialisation: splitmix64 + Box-Muller, He-normal ---- */

static void he_normal(float *w, size_t n, int fan_in, uint64_t *rng)
{
    const double sd = sqrt(2.0 / fan_in);
    for (size_t i = 0; i < n; i += 2) {
        double u1 = ((gf__splitmix64(rng) >> 11) + 1) * 0x1p-53; /* (0, 1] */
        double u2 = (gf__splitmix64(rng) >> 11) * 0x1p-53;
        double r = sqrt(-2.0 * log(u1)), t = 6.283185307179586 * u2;
        w[i] = (float)(sd * r * cos(t));
        if (i + 1 < n)
            w[i + 1] = (float)(sd * r * sin(t));
    }
}

static void set_views(gfm_params *v, float *base, const size_t *seg)
{
    float **ptr[6] = {&v->w1, &v->b1, &v->w2, &v->b2, &v->w3, &v->b3};
    size_t *len[6] = {&v->n_w1, &v->n_b1, &v->n_w2, &v->n_b2, &v->n_w3, &v->n_b3};
    for (int i = 0; i < 6; i++) {
        *ptr[i] = base + seg[i];
        *len[i] = seg[i + 1] - seg[i];
    }
}

int gfm_create(gfm_model **out, const gfm_config *c, char *why, size_t why_len)
{
    char dummy[1];
    if (!why || !why_len) {
        why = dummy;
        why_len = sizeof dummy;
    }
    why[0] = 0;
    if (!out || !c) {
        snprintf(why, why_len, "gfm_create: NULL argument");
        return -1;
    }
    *out = NULL;
    /* Bounds keep every size product below 2^31 elements per sample. */
    if (c->in_c < 1 || c->in_c > 64 || c->in_h < 4 || c->in_w < 4 || c->in_h > 4096 ||
        c->in_w > 4096 || c->in_h % 4 || c->in_w % 4 || c->classes < 2 || c->classes > 100000 ||
        c->width < 1 || c->width > 1024 ||
        (double)c->in_h * c->in_w * c->width * 2 > 1e9 || (double)c->in_h * c->in_w * c->in_c * 9 > 1e9) {
        snprintf(why, why_len,
                 "model: bad shape (%d x %d x %d input, %d classes, width %d): need C 1..64, "
                 "H and W multiples of 4, classes >= 2, width 1..1024",
                 c->in_c, c->in_h, c->in_w, c->classes, c->width);
        return -1;
    }
    if (!(c->lr > 0) || !isfinite(c->lr) || !(c->momentum >= 0 && c->momentum < 1) ||
        !(c->weight_decay >= 0) || !isfinite(c->weight_decay)) {
        snprintf(why, why_len, "model: bad optimiser settings (lr %g, momentum %g, weight decay %g)",
                 (double)c->lr, (double)c->momentum, (double)c->weight_decay);
        return -1;
    }
    if (c->device != GFM_CPU && c->device != GFM_CUDA) {
        snprintf(why, why_len, "model: unknown device %d", c->device);
        return -1;
    }
    if (c->amp && c->device != GFM_CUDA) {
        snprintf(why, why_len, "model: amp (float16 input) is for CUDA models only");
        return -1;
    }
#if !GFM_WITH_CUDA
    if (c->device == GFM_CUDA) {
        snprintf(why, why_len, "model: built without CUDA");
        return -1;
    }
#endif
    gfm_model *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(why, why_len, "model: out of memory");
        return -1;
    }
    m->cfg = *c;
    m->C = c->in_c, m->H = c->in_h, m->W = c->in_w;
    m->F1 = c->width, m->F2 = 2 * c->width, m->K = c->classes;
    m->P1 = m->H * m->W;
    m->H2 = m->H / 2, m->W2 = m->W / 2, m->P2 = m->H2 * m->W2;
    m->H3 = m->H / 4, m->W3 = m->W / 4, m->P3 = m->H3 * m->W3;
    size_t n[6] = {(size_t)m->F1 * m->C * 9, (size_t)m->F1, (size_t)m->F2 * m->F1 * 9,
                   (size_t)m->F2, (size_t)m->K * m->F2, (size_t)m->K};
    m->seg[0] = 0;
    for (int i = 0; i < 6; i++)
        m->seg[i + 1] = m->seg[i] + n[i];
    size_t total = m->seg[6];
    m->params = calloc(total, sizeof(float));
    m->grads = calloc(total, sizeof(float));
    m->vel = calloc(total, sizeof(float));
    size_t colsz = (size_t)m->C * 9 * m->P1, col2 = (size_t)m->F1 * 9 * m->P2;
    size_t actsz = (size_t)m->F1 * m->P1, act2 = (size_t)m->F2 * m->P2;
    m->col = malloc((colsz > col2 ? colsz : col2) * sizeof(float));
    m->act = malloc((actsz > act2 ? actsz : act2) * sizeof(float));
    m->dp1 = malloc((size_t)m->F1 * m->P2 * sizeof(float));
    m->dg = malloc((size_t)m->F2 * sizeof(float));
    if (!m->params || !m->grads || !m->vel || !m->col || !m->act || !m->dp1 || !m->dg) {
        gfm_destroy(m);
        snprintf(why, why_len, "model: out of memory");
        return -1;
    }
    set_views(&m->p, m->params, m->seg);
    set_views(&m->g, m->grads, m->seg);
    uint64_t rng = c->seed;
    he_normal(m->p.w1, m->p.n_w1, m->C * 9, &rng);
    he_normal(m->p.w2, m->p.n_w2, m->F1 * 9, &rng);
    he_normal(m->p.w3, m->p.n_w3, m->F2, &rng);
    /* biases stay 0 */
#if GFM_WITH_CUDA
    if (c->device == GFM_CUDA && gfm__cuda_create(&m->cuda, c, m->params, m->seg, why, why_len)) {
        gfm_destroy(m);
        return -1;
    }
#endif
    *out = m;
    return 0;
}

void gfm_destroy(gfm_model *m)
{
    if (!m)
        return;
#if GFM_WITH_CUDA
    if (m->cuda)
        gfm__cuda_destroy(m->cuda);
#endif
    free(m->params), free(m->grads), free(m->vel);
    free(m->p1), free(m->p2), free(m->i1), free(m->i2), free(m->gap), free(m->prob), free(m->dlog);
    free(m->col), free(m->act), free(m->dp1), free(m->dg);
    free(m);
}

static int reserve(gfm_model *m, int n)
{
    if (n <= m->cap)
        return 0;
    size_t a = (size_t)n * m->F1 * m->P2, b = (size_t)n * m->F2 * m->P3;
    float *p1 = realloc(m->p1, a * sizeof(float));
    if (p1)
        m->p1 = p1;
    uint8_t *i1 = realloc(m->i1, a);
    if (i1)
        m->i1 = i1;
    float *p2 = realloc(m->p2, b * sizeof(float));
    if (p2)
        m->p2 = p2;
    uint8_t *i2 = realloc(m->i2, b);
    if (i2)
        m->i2 = i2;
    float *gap = realloc(m->gap, (size_t)n * m->F2 * sizeof(float));
    if (gap)
        m->gap = gap;
    float *prob = realloc(m->prob, (size_t)n * m->K * sizeof(float));
    if (prob)
        m->prob = prob;
    double *dlog = realloc(m->dlog, (size_t)n * m->K * sizeof(double));
    if (dlog)
        m->dlog = dlog;
    if (!p1 || !i1 || !p2 || !i2 || !gap || !prob || !dlog)
        return fail(m, "model: out of memory for a batch of %d", n);
    m->cap = n;
    return 0;
}


static int check_batch(gfm_model *m, const float *x, const int32_t *labels, int n)
{
    if (!x || !labels || n < 1)
        return fail(m, "model: bad batch (x %p, labels %p, n %d)", (const void *)x,
                    (const void *)labels, n);
    for (int i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= m->K)
            return fail(m, "model: label %d of sample %d outside [0, %d)", (int)labels[i], i,
                        m->K);
    return 0;
}

/* One batch forward; with train, backward and the SGD update too. */
static int step(gfm_model *m, const float *x, const int32_t *labels, int n, void *stream,
                int train, float *loss, int *correct)
{
    if (!m)
        return -1;
    if (check_batch(m, x, labels, n))
        return -1;
#if GFM_WITH_CUDA
    if (m->cuda)
        return gfm__cuda_step(m->cuda, x, labels, n, stream, train, loss, correct, m->err,
                              sizeof m->err);
#endif
    (void)stream;
    if (reserve(m, n))
        return -1;
    gfm__ref_forward(m, x, labels, n, loss, correct);
    if (train) {
        gfm__ref_backward(m, x, labels, n);
        gfm__ref_sgd(m);
    }
    return 0;
}

int gfm_train_step(gfm_model *m, const float *x, const int32_t *labels, int n, void *stream,
                   float *loss, int *correct)
{
    return step(m, x, labels, n, stream, 1, loss, correct);
}

int gfm_evaluate(gfm_model *m, const float *x, const int32_t *labels, int n, void *stream,
                 float *loss, int *correct)
{
    return step(m, x, labels, n, stream, 0, loss, correct);
}

int gfm_sync(gfm_model *m, float *loss, int *correct)
{
    if (!m)
        return -1;
#if GFM_WITH_CUDA
    if (m->cuda)
        return gfm__cuda_sync(m->cuda, loss, correct, m->err, sizeof m->err);
#endif
    (void)loss, (void)correct; /* the CPU's step already returned them */
    return 0;
}

uint64_t gfm_checksum(gfm_model *m)
{
    if (!m)
        return 0;
#if GFM_WITH_CUDA
    if (m->cuda && gfm__cuda_params(m->cuda, m->params, m->err, sizeof m->err))
        return 0;
#endif
    return gf__fnv1a64(GF__FNV1A64_BASIS, m->params, m->seg[6] * sizeof(float));
}

double gfm_step_flops(const gfm_model *m)
{
    if (!m)
        return 0;
    double c1 = (double)m->F1 * m->C * 9 * m->P1;  /* conv1 forward */
    double c2 = (double)m->F2 * m->F1 * 9 * m->P2; /* conv2 forward */
    double l3 = (double)m->K * m->F2;
    /* backward: conv1 weights only (no input gradient); conv2 weights and
     * input; linear weights and input */
    return 2 * c1 + 3 * c2 + 3 * l3;
}

int gfm_params_get(gfm_model *m, gfm_params *p)
{
    if (!m || !p)
        return -1;
    if (m->cuda)
        return fail(m, "gfm_params_get: CPU models only");
    *p = m->p;
    return 0;
}

int gfm_gradients(gfm_model *m, const float *x, const int32_t *labels, int n, gfm_params *grad,
                  float *loss)
{
    if (!m || !grad)
        return -1;
    if (m->cuda)
        return fail(m, "gfm_gradients: CPU models only");
    if (check_batch(m, x, labels, n) || reserve(m, n))
        return -1;
    gfm__ref_forward(m, x, labels, n, loss, NULL);
    gfm__ref_backward(m, x, labels, n);
    *grad = m->g;
    return 0;
}

/* ---- data-parallel training and checkpoints ---- */

size_t gfm_param_count(const gfm_model *m)
{
    return m ? m->seg[6] : 0;
}

int gfm_grad_step(gfm_model *m, const float *x, const int32_t *labels, int n, void *stream,
                  float *grad, float *loss, int *correct)
{
    if (!m)
        return -1;
    if (!grad)
        return fail(m, "gfm_grad_step: NULL gradient array");
    if (check_batch(m, x, labels, n))
        return -1;
#if GFM_WITH_CUDA
    if (m->cuda)
        return gfm__cuda_grads(m->cuda, x, labels, n, stream, grad, loss, correct, m->err,
                               sizeof m->err);
#endif
    (void)stream;
    if (reserve(m, n))
        return -1;
    gfm__ref_forward(m, x, labels, n, loss, correct);
    gfm__ref_backward(m, x, labels, n);
    memcpy(grad, m->grads, m->seg[6] * sizeof(float));
    return 0;
}

int gfm_apply(gfm_model *m, const float *grad, void *stream)
{
    if (!m)
        return -1;
    if (!grad)
        return fail(m, "gfm_apply: NULL gradient array");
#if GFM_WITH_CUDA
    if (m->cuda)
        return gfm__cuda_apply(m->cuda, grad, stream, m->err, sizeof m->err);
#endif
    (void)stream;
    if (grad != m->grads)
        memcpy(m->grads, grad, m->seg[6] * sizeof(float));
    gfm__ref_sgd(m);
    return 0;
}

int gfm_grad_pack(gfm_model *m, const float *x, const int32_t *labels, int n, void *stream,
                  float **packed)
{
    if (!m)
        return -1;
    if (!packed || n < 0 || (n > 0 && check_batch(m, x, labels, n)))
        return fail(m, "gfm_grad_pack: bad arguments");
#if GFM_WITH_CUDA
    if (m->cuda)
        return gfm__cuda_grad_pack(m->cuda, x, labels, n, stream, packed, m->err, sizeof m->err);
#endif
    (void)stream;
    return fail(m, "gfm_grad_pack: CUDA models only (the CPU all-reduces gfm_grad_step's array)");
}

int gfm_apply_packed(gfm_model *m, void *stream, float totals[3])
{
    if (!m)
        return -1;
    if (!totals)
        return fail(m, "gfm_apply_packed: NULL totals");
#if GFM_WITH_CUDA
    if (m->cuda)
        return gfm__cuda_apply_packed(m->cuda, stream, totals, m->err, sizeof m->err);
#endif
    (void)stream;
    return fail(m, "gfm_apply_packed: CUDA models only");
}

int gfm_state_get(gfm_model *m, float *params, float *momentum)
{
    if (!m)
        return -1;
    if (!params || !momentum)
        return fail(m, "gfm_state_get: NULL array");
#if GFM_WITH_CUDA
    if (m->cuda)
        return gfm__cuda_state(m->cuda, params, momentum, 0, m->err, sizeof m->err);
#endif
    memcpy(params, m->params, m->seg[6] * sizeof(float));
    memcpy(momentum, m->vel, m->seg[6] * sizeof(float));
    return 0;
}

int gfm_state_set(gfm_model *m, const float *params, const float *momentum)
{
    if (!m)
        return -1;
    if (!params || !momentum)
        return fail(m, "gfm_state_set: NULL array");
    for (size_t i = 0; i < m->seg[6]; i++)
        if (!isfinite(params[i]) || !isfinite(momentum[i]))
            return fail(m, "gfm_state_set: value %zu is not finite", i);
#if GFM_WITH_CUDA
    if (m->cuda && gfm__cuda_state(m->cuda, (float *)params, (float *)momentum, 1, m->err,
                                   sizeof m->err))
        return -1;
#endif
    memcpy(m->params, params, m->seg[6] * sizeof(float));
    memcpy(m->vel, momentum, m->seg[6] * sizeof(float));
    return 0;
}
