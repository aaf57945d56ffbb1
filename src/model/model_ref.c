/*
 * The demo model's plain-C reference (model.h): forward, backward and the
 * SGD update, the CPU path and the tests' oracle. Single-threaded on
 * purpose: in the demo it runs on the consumer thread, the CPU stand-in
 * for a GPU; model.c calls it with the batch buffers reserved.
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
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "model_impl.h"

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
void gfm__ref_forward(gfm_model *m, const float *x, const int32_t *labels, int n, float *loss,
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
void gfm__ref_backward(gfm_model *m, const float *x, const int32_t *labels, int n)
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
void gfm__ref_sgd(gfm_model *m)
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
