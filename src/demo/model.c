/*
 * The demo trainer's model (src/demo/model.h): argument checking, parameter
 * initialisation, the plain-C reference (forward, backward, SGD) and the
 * dispatch to the CUDA backend (src/demo/model.cu) when the CLI was built
 * with CUDA. The reference is single-threaded on purpose: in the demo it
 * runs on the consumer thread, the CPU stand-in for a GPU.
 *
 * Convolutions are im2col + a blocked GEMM whose inner loops have fixed
 * trip counts, so gcc vectorizes them at -O2 (its "very cheap" cost model
 * only takes loops that need no scalar epilogue). The network keeps no
 * full-resolution activations: ReLU then 2x2 max-pool is stored as the
 * pooled value and the argmax in its window (0..3); the backward pass
 * routes the gradient to that argmax when the pooled value is > 0 (the
 * ReLU's derivative at 0 taken as 0). im2col is recomputed in backward
 * rather than kept per sample: it costs one pass over memory, against a
 * GEMM's K passes.
 *
 * Every buffer is allocated once, sized for the largest batch seen.
 */
#include "model.h"

#include <float.h>
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

struct gfm_model {
    gfm_config cfg;
    int C, H, W;          /* input */
    int F1, F2, K;        /* conv1, conv2 channels; classes */
    int P1, H2, W2, P2;   /* conv1 output plane; pooled 1 = conv2 plane */
    int H3, W3, P3;       /* pooled 2 */
    size_t seg[7];        /* offsets of w1 b1 w2 b2 w3 b3, total */
    float *params, *grads, *vel;
    gfm_params p, g;      /* views of params and grads */

    /* batch buffers, for cap samples */
    int cap;
    float *p1, *p2;       /* pooled activations */
    uint8_t *i1, *i2;     /* argmax in each 2x2 window */
    float *gap, *prob;    /* n x F2, n x K (softmax) */
    double *dlog;         /* n x K */
    /* per-sample scratch */
    float *col;           /* max(C*9*P1, F1*9*P2) */
    float *act;           /* max(F1*P1, F2*P2): conv output, then its grad */
    float *dp1;           /* F1 x P2 */
    float *dg;            /* F2 */

    gfm__cuda *cuda;
    char err[256];
};

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

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void he_normal(float *w, size_t n, int fan_in, uint64_t *rng)
{
    const double sd = sqrt(2.0 / fan_in);
    for (size_t i = 0; i < n; i += 2) {
        double u1 = ((splitmix64(rng) >> 11) + 1) * 0x1p-53; /* (0, 1] */
        double u2 = (splitmix64(rng) >> 11) * 0x1p-53;
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

/* ---- kernels of the reference ---- */

/* col[(c*3+ky)*3+kx][y*w+x] = in[c][y+ky-1][x+kx-1], zero outside. */
static void im2col(const float *restrict in, int c, int h, int w, float *restrict col)
{
    for (int ci = 0; ci < c; ci++)
        for (int ky = 0; ky < 3; ky++)
            for (int kx = 0; kx < 3; kx++) {
                float *restrict row = col + (size_t)((ci * 3 + ky) * 3 + kx) * h * w;
                const float *plane = in + (size_t)ci * h * w;
                for (int y = 0; y < h; y++) {
                    int sy = y + ky - 1;
                    float *restrict r = row + (size_t)y * w;
                    if (sy < 0 || sy >= h) {
                        memset(r, 0, (size_t)w * sizeof(float));
                        continue;
                    }
                    const float *s = plane + (size_t)sy * w + (kx - 1);
                    int x0 = kx == 0 ? 1 : 0, x1 = kx == 2 ? w - 1 : w;
                    if (kx == 0)
                        r[0] = 0;
                    if (kx == 2)
                        r[w - 1] = 0;
                    memcpy(r + x0, s + x0, (size_t)(x1 - x0) * sizeof(float));
                }
            }
}

/* The adjoint of im2col: out[c][y][x] += the col entries that read it. */
static void col2im(const float *restrict col, int c, int h, int w, float *restrict out)
{
    memset(out, 0, (size_t)c * h * w * sizeof(float));
    for (int ci = 0; ci < c; ci++)
        for (int ky = 0; ky < 3; ky++)
            for (int kx = 0; kx < 3; kx++) {
                const float *restrict row = col + (size_t)((ci * 3 + ky) * 3 + kx) * h * w;
                float *plane = out + (size_t)ci * h * w;
                for (int y = 0; y < h; y++) {
                    int sy = y + ky - 1;
                    if (sy < 0 || sy >= h)
                        continue;
                    const float *restrict r = row + (size_t)y * w;
                    float *restrict d = plane + (size_t)sy * w + (kx - 1);
                    int x0 = kx == 0 ? 1 : 0, x1 = kx == 2 ? w - 1 : w;
                    for (int x = x0; x < x1; x++)
                        d[x] += r[x];
                }
            }
}

enum { PB = 32 }; /* columns per GEMM block: 8 SSE / 4 AVX accumulators */

/* C[i][p] = (bias ? bias[i] : 0) + sum_l A(i, l) * B[l][p] for i < M,
 * p < P, where A(i, l) = A[i*ras + l*las] (so A or its transpose).
 * The sums run in l order for every p: results do not depend on the
 * blocking. */
static void gemm_nn(int M, int L, int P, const float *restrict A, size_t ras, size_t las,
                    const float *restrict B, float *restrict C, const float *restrict bias)
{
    int p0 = 0;
    for (; p0 + PB <= P; p0 += PB)
        for (int i = 0; i < M; i++) {
            float acc[PB];
            float b0 = bias ? bias[i] : 0.0f;
            for (int j = 0; j < PB; j++)
                acc[j] = b0;
            const float *a = A + i * ras;
            for (int l = 0; l < L; l++) {
                const float av = a[l * las];
                const float *restrict b = B + (size_t)l * P + p0;
                for (int j = 0; j < PB; j++)
                    acc[j] += av * b[j];
            }
            float *restrict c = C + (size_t)i * P + p0;
            for (int j = 0; j < PB; j++)
                c[j] = acc[j];
        }
    if (p0 < P) /* the tail: P % PB columns */
        for (int i = 0; i < M; i++) {
            float *restrict c = C + (size_t)i * P;
            float b0 = bias ? bias[i] : 0.0f;
            for (int p = p0; p < P; p++)
                c[p] = b0;
            const float *a = A + i * ras;
            for (int l = 0; l < L; l++) {
                const float av = a[l * las];
                const float *restrict b = B + (size_t)l * P;
                for (int p = p0; p < P; p++)
                    c[p] += av * b[p];
            }
        }
}

enum { DL = 8 }; /* lanes of the dot products */

/* D[i][k] += sum_p A[i][p] * B[k][p] (A: M x P, B: N x P): the weight
 * gradient, dot products of rows. DL partial sums per dot (fixed order,
 * so deterministic) let gcc vectorize without reassociating. */
static void gemm_nt_acc(int M, int N, int P, const float *restrict A, const float *restrict B,
                        float *restrict D)
{
    const int Pv = P - P % DL;
    for (int i = 0; i < M; i++) {
        const float *restrict a = A + (size_t)i * P;
        int k = 0;
        for (; k + 2 <= N; k += 2) {
            const float *restrict b0 = B + (size_t)k * P, *restrict b1 = b0 + P;
            float s0[DL] = {0}, s1[DL] = {0};
            for (int p = 0; p < Pv; p += DL)
                for (int j = 0; j < DL; j++) {
                    s0[j] += a[p + j] * b0[p + j];
                    s1[j] += a[p + j] * b1[p + j];
                }
            float t0 = 0, t1 = 0;
            for (int j = 0; j < DL; j++)
                t0 += s0[j], t1 += s1[j];
            for (int p = Pv; p < P; p++)
                t0 += a[p] * b0[p], t1 += a[p] * b1[p];
            D[(size_t)i * N + k] += t0;
            D[(size_t)i * N + k + 1] += t1;
        }
        for (; k < N; k++) {
            const float *restrict b0 = B + (size_t)k * P;
            float s0[DL] = {0};
            for (int p = 0; p < Pv; p += DL)
                for (int j = 0; j < DL; j++)
                    s0[j] += a[p + j] * b0[p + j];
            float t0 = 0;
            for (int j = 0; j < DL; j++)
                t0 += s0[j];
            for (int p = Pv; p < P; p++)
                t0 += a[p] * b0[p];
            D[(size_t)i * N + k] += t0;
        }
    }
}

/* ReLU then 2x2 max-pool of f planes h x w: the pooled value and the
 * argmax (dy*2+dx) of the raw maximum. */
static void relu_pool(const float *restrict a, int f, int h, int w, float *restrict out,
                      uint8_t *restrict idx)
{
    int ho = h / 2, wo = w / 2;
    for (int c = 0; c < f; c++)
        for (int y = 0; y < ho; y++) {
            const float *r0 = a + ((size_t)c * h + 2 * y) * w, *r1 = r0 + w;
            float *o = out + ((size_t)c * ho + y) * wo;
            uint8_t *ix = idx + ((size_t)c * ho + y) * wo;
            for (int x = 0; x < wo; x++) {
                float v = r0[2 * x];
                int k = 0;
                if (r0[2 * x + 1] > v)
                    v = r0[2 * x + 1], k = 1;
                if (r1[2 * x] > v)
                    v = r1[2 * x], k = 2;
                if (r1[2 * x + 1] > v)
                    v = r1[2 * x + 1], k = 3;
                o[x] = v > 0 ? v : 0;
                ix[x] = (uint8_t)k;
            }
        }
}

/* The adjoint of relu_pool: da (f x h x w) from the pooled gradient
 * dp(c, q) = dp[c*dpc + q*dpq]; the bias gradient adds the same sums. */
static void relu_pool_back(const float *restrict pooled, const uint8_t *restrict idx,
                           const float *restrict dp, size_t dpc, size_t dpq, int f, int h, int w,
                           float *restrict da, float *restrict dbias)
{
    int ho = h / 2, wo = w / 2;
    memset(da, 0, (size_t)f * h * w * sizeof(float));
    for (int c = 0; c < f; c++) {
        double sum = 0;
        for (int y = 0; y < ho; y++)
            for (int x = 0; x < wo; x++) {
                size_t q = ((size_t)c * ho + y) * wo + x;
                if (!(pooled[q] > 0))
                    continue;
                float g = dp[c * dpc + (q - (size_t)c * ho * wo) * dpq];
                int k = idx[q];
                da[((size_t)c * h + 2 * y + (k >> 1)) * w + 2 * x + (k & 1)] = g;
                sum += g;
            }
        dbias[c] += (float)sum;
    }
}

/* ---- the network ---- */

/* Forward on n samples: pooled activations, the average pool, softmax;
 * the mean loss and the correct count when labels are given. */
static void forward(gfm_model *m, const float *x, const int32_t *labels, int n, float *loss,
                    int *correct)
{
    const gfm_params *p = &m->p;
    double total = 0;
    int right = 0;
    for (int s = 0; s < n; s++) {
        const float *xs = x + (size_t)s * m->C * m->P1;
        float *p1 = m->p1 + (size_t)s * m->F1 * m->P2;
        float *p2 = m->p2 + (size_t)s * m->F2 * m->P3;
        im2col(xs, m->C, m->H, m->W, m->col);
        gemm_nn(m->F1, m->C * 9, m->P1, p->w1, (size_t)m->C * 9, 1, m->col, m->act, p->b1);
        relu_pool(m->act, m->F1, m->H, m->W, p1, m->i1 + (size_t)s * m->F1 * m->P2);
        im2col(p1, m->F1, m->H2, m->W2, m->col);
        gemm_nn(m->F2, m->F1 * 9, m->P2, p->w2, (size_t)m->F1 * 9, 1, m->col, m->act, p->b2);
        relu_pool(m->act, m->F2, m->H2, m->W2, p2, m->i2 + (size_t)s * m->F2 * m->P3);
        float *g = m->gap + (size_t)s * m->F2;
        for (int f = 0; f < m->F2; f++) {
            double sum = 0;
            for (int q = 0; q < m->P3; q++)
                sum += p2[(size_t)f * m->P3 + q];
            g[f] = (float)(sum / m->P3);
        }
        /* logits, then a softmax in double for an accurate loss */
        float *pr = m->prob + (size_t)s * m->K;
        double zmax = -DBL_MAX;
        int arg = 0;
        for (int k = 0; k < m->K; k++) {
            double z = p->b3[k];
            const float *wk = p->w3 + (size_t)k * m->F2;
            for (int f = 0; f < m->F2; f++)
                z += (double)wk[f] * g[f];
            pr[k] = (float)z; /* the loss is that of the float logits */
            if (pr[k] > zmax)
                zmax = pr[k], arg = k;
        }
        double se = 0;
        for (int k = 0; k < m->K; k++)
            se += exp(pr[k] - zmax);
        double lse = zmax + log(se);
        if (labels) {
            total += lse - pr[labels[s]];
            right += arg == labels[s];
        }
        for (int k = 0; k < m->K; k++)
            pr[k] = (float)exp(pr[k] - lse);
    }
    if (loss)
        *loss = labels ? (float)(total / n) : 0;
    if (correct)
        *correct = right;
}

/* Gradients of the mean loss into m->grads; forward() ran on x just now. */
static void backward(gfm_model *m, const float *x, const int32_t *labels, int n)
{
    const gfm_params *p = &m->p;
    gfm_params *g = &m->g;
    memset(m->grads, 0, m->seg[6] * sizeof(float));
    /* softmax cross-entropy and the linear layer */
    for (int s = 0; s < n; s++)
        for (int k = 0; k < m->K; k++)
            m->dlog[(size_t)s * m->K + k] =
                ((double)m->prob[(size_t)s * m->K + k] - (k == labels[s])) / n;
    for (int k = 0; k < m->K; k++) {
        double db = 0;
        for (int s = 0; s < n; s++)
            db += m->dlog[(size_t)s * m->K + k];
        g->b3[k] = (float)db;
        for (int f = 0; f < m->F2; f++) {
            double dw = 0;
            for (int s = 0; s < n; s++)
                dw += m->dlog[(size_t)s * m->K + k] * m->gap[(size_t)s * m->F2 + f];
            g->w3[(size_t)k * m->F2 + f] = (float)dw;
        }
    }
    const int K2 = m->F1 * 9, K1 = m->C * 9;
    for (int s = 0; s < n; s++) {
        const float *xs = x + (size_t)s * m->C * m->P1;
        const float *p1 = m->p1 + (size_t)s * m->F1 * m->P2;
        const float *p2 = m->p2 + (size_t)s * m->F2 * m->P3;
        /* the gradient at the average pool, spread over its P3 inputs */
        for (int f = 0; f < m->F2; f++) {
            double d = 0;
            for (int k = 0; k < m->K; k++)
                d += m->dlog[(size_t)s * m->K + k] * p->w3[(size_t)k * m->F2 + f];
            m->dg[f] = (float)(d / m->P3);
        }
        /* conv2: act = its output gradient */
        relu_pool_back(p2, m->i2 + (size_t)s * m->F2 * m->P3, m->dg, 1, 0, m->F2, m->H2, m->W2,
                       m->act, g->b2);
        im2col(p1, m->F1, m->H2, m->W2, m->col);
        gemm_nt_acc(m->F2, K2, m->P2, m->act, m->col, g->w2);
        /* the column gradient replaces the columns: W2^T x act */
        gemm_nn(K2, m->F2, m->P2, p->w2, 1, (size_t)K2, m->act, m->col, NULL);
        col2im(m->col, m->F1, m->H2, m->W2, m->dp1);
        /* conv1 */
        relu_pool_back(p1, m->i1 + (size_t)s * m->F1 * m->P2, m->dp1, (size_t)m->P2, 1, m->F1,
                       m->H, m->W, m->act, g->b1);
        im2col(xs, m->C, m->H, m->W, m->col);
        gemm_nt_acc(m->F1, K1, m->P1, m->act, m->col, g->w1);
    }
}

/* The update with the gradient in m->grads. */
static void sgd(gfm_model *m)
{
    const float lr = m->cfg.lr, mu = m->cfg.momentum;
    for (int t = 0; t < 6; t++) {
        const float wd = t % 2 == 0 ? m->cfg.weight_decay : 0.0f; /* not on biases */
        float *restrict w = m->params + m->seg[t], *restrict v = m->vel + m->seg[t];
        const float *restrict gr = m->grads + m->seg[t];
        size_t len = m->seg[t + 1] - m->seg[t];
        for (size_t i = 0; i < len; i++) {
            v[i] = mu * v[i] + gr[i] + wd * w[i];
            w[i] -= lr * v[i];
        }
    }
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
    forward(m, x, labels, n, loss, correct);
    if (train) {
        backward(m, x, labels, n);
        sgd(m);
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
    uint64_t h = 0xcbf29ce484222325ull;
    const unsigned char *b = (const unsigned char *)m->params;
    for (size_t i = 0; i < m->seg[6] * sizeof(float); i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
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
    forward(m, x, labels, n, loss, NULL);
    backward(m, x, labels, n);
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
    forward(m, x, labels, n, loss, correct);
    backward(m, x, labels, n);
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
    sgd(m);
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
