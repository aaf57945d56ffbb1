/*
 * The demo model's backward pass on CUDA (model.cu runs the forward pass
 * and calls this): linear_grad -> unpool2 (the conv2 output gradient,
 * dense) -> conv_input_grad (conv2's input gradient) -> conv_weight_grad
 * x2 -> sgd, on g->stream. Block tree reductions in a fixed order, no
 * atomics, as in model.cu.
 */
#include <string.h>

#include "model_cuda.cuh"

/* dW3[k][f] = sum_s dlog[s][k] gap[s][f]; f == F2: db3[k]. */
static __global__ void linear_grad(const float *__restrict__ dlog, const float *__restrict__ gap,
                                   float *__restrict__ dw3, float *__restrict__ db3, int n, int F2,
                                   int K)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)K * (F2 + 1))
        return;
    const int k = (int)(i / (F2 + 1)), f = (int)(i % (F2 + 1));
    float s = 0;
    for (int j = 0; j < n; j++)
        s += dlog[(size_t)j * K + k] * (f < F2 ? gap[(size_t)j * F2 + f] : 1.0f);
    if (f < F2)
        dw3[(size_t)k * F2 + f] = s;
    else
        db3[k] = s;
}

/* The conv2 output gradient, dense: dg at each window's argmax where the
 * pooled value is > 0, else 0. One thread per pooled position. */
static __global__ void unpool2(const float *__restrict__ p2, const unsigned char *__restrict__ i2,
                               const float *__restrict__ dg, float *__restrict__ da2, int n,
                               int F2, int H2, int W2)
{
    const int Ho = H2 / 2, Wo = W2 / 2;
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)n * F2 * Ho * Wo)
        return;
    const size_t nf = i / ((size_t)Ho * Wo);
    const int q = (int)(i % ((size_t)Ho * Wo)), py = q / Wo, px = q % Wo;
    const float g = p2[i] > 0 ? dg[nf] : 0.0f;
    const int k = i2[i];
    float *d = da2 + (nf * H2 + 2 * py) * W2 + 2 * px;
    d[0] = k == 0 ? g : 0.0f;
    d[1] = k == 1 ? g : 0.0f;
    d[W2] = k == 2 ? g : 0.0f;
    d[W2 + 1] = k == 3 ? g : 0.0f;
}

/* conv's input gradient: din[s][c][y][x] = sum_f,ky,kx
 * dout[s][f][y+1-ky][x+1-kx] w[f][c][ky][kx], for CB input channels and
 * a T x T tile per block. grid (ceil(W/T), ceil(H/T), n * ceil(C/CB)). */
template <int CB>
static __global__ void conv_input_grad(const float *__restrict__ dout, const float *__restrict__ w,
                                       float *__restrict__ din, int C, int F, int H, int W)
{
    __shared__ float tile[T + 2][T + 3];
    __shared__ float ws[CB][9];
    const int groups = (C + CB - 1) / CB;
    const int n = blockIdx.z / groups, c0 = (blockIdx.z % groups) * CB;
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * T + tx;
    const int y0 = blockIdx.y * T - 1, x0 = blockIdx.x * T - 1;
    float acc[CB];
    for (int i = 0; i < CB; i++)
        acc[i] = 0;
    for (int f = 0; f < F; f++) {
        __syncthreads();
        const float *plane = dout + ((size_t)n * F + f) * H * W;
        for (int i = tid; i < (T + 2) * (T + 2); i += T * T) {
            int r = i / (T + 2), q = i % (T + 2), y = y0 + r, x = x0 + q;
            tile[r][q] = (y >= 0 && y < H && x >= 0 && x < W) ? plane[(size_t)y * W + x] : 0.0f;
        }
        if (tid < CB * 9) {
            int cb = tid / 9, k = tid % 9;
            ws[cb][k] = c0 + cb < C ? w[((size_t)f * C + c0 + cb) * 9 + k] : 0.0f;
        }
        __syncthreads();
        for (int ky = 0; ky < 3; ky++)
            for (int kx = 0; kx < 3; kx++) {
                const float d = tile[ty + 2 - ky][tx + 2 - kx];
                for (int cb = 0; cb < CB; cb++)
                    acc[cb] += ws[cb][ky * 3 + kx] * d;
            }
    }
    const int y = blockIdx.y * T + ty, x = blockIdx.x * T + tx;
    if (y >= H || x >= W)
        return;
    for (int cb = 0; cb < CB && c0 + cb < C; cb++)
        din[(((size_t)n * C + c0 + cb) * H + y) * W + x] = acc[cb];
}

/* A conv's weight and bias gradients from its pooled output: block
 * (c, f) sums, over the batch's pooled positions whose value is > 0, the
 * gradient d at the argmax times the 3x3 input patch there. d(s, q) =
 * dsrc[(s*F + f)*dsn + q*dsq]: per position (conv1: the pooled-1
 * gradient) or per plane (conv2: dg, the average pool's). db[f] is
 * written by the c == 0 blocks. */
template <typename TIn>
static __global__ void conv_weight_grad(const TIn *__restrict__ in,
                                        const float *__restrict__ pooled,
                                        const unsigned char *__restrict__ idx,
                                        const float *__restrict__ dsrc, size_t dsn, size_t dsq,
                                        float *__restrict__ dw, float *__restrict__ db, int n,
                                        int C, int F, int H, int W)
{
    __shared__ float red[10][NT];
    const int c = blockIdx.x, f = blockIdx.y, Wo = W / 2, Po = (H / 2) * Wo;
    float v[10];
    for (int j = 0; j < 10; j++)
        v[j] = 0;
    for (int i = threadIdx.x; i < n * Po; i += NT) {
        const int s = i / Po, q = i % Po;
        const size_t o = ((size_t)s * F + f) * Po + q;
        if (!(pooled[o] > 0))
            continue;
        const float d = dsrc[((size_t)s * F + f) * dsn + q * dsq];
        const int k = idx[o], y = 2 * (q / Wo) + (k >> 1), x = 2 * (q % Wo) + (k & 1);
        const TIn *plane = in + ((size_t)s * C + c) * H * W;
        for (int ky = 0; ky < 3; ky++)
            for (int kx = 0; kx < 3; kx++) {
                const int yy = y + ky - 1, xx = x + kx - 1;
                if (yy >= 0 && yy < H && xx >= 0 && xx < W)
                    v[ky * 3 + kx] += d * to_f(plane[(size_t)yy * W + xx]);
            }
        v[9] += d;
    }
    block_sum<10>(red, v);
    if (threadIdx.x == 0) {
        for (int j = 0; j < 9; j++)
            dw[((size_t)f * C + c) * 9 + j] = v[j];
        if (c == 0)
            db[f] = v[9];
    }
}

struct segs {
    size_t s[7];
};

/* v = mu v + g + wd w (no decay on the biases: segments 1, 3, 5);
 * w -= lr v. */
static __global__ void sgd(float *__restrict__ w, float *__restrict__ v,
                           const float *__restrict__ g, segs seg, float lr, float mu, float wd)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= seg.s[6])
        return;
    const bool bias = (i >= seg.s[1] && i < seg.s[2]) || (i >= seg.s[3] && i < seg.s[4]) ||
                      i >= seg.s[5];
    const float vi = mu * v[i] + g[i] + (bias ? 0.0f : wd * w[i]);
    v[i] = vi;
    w[i] -= lr * vi;
}

void gfm__cuda_backward(gfm__cuda *g, const float *x, int n, int train)
{
    cudaStream_t st = g->stream;
    const float *w2 = g->params + g->seg[2];
    const __half *xh = (const __half *)(const void *)x; /* amp: x holds float16 */
    enum { CB = 4 };
    dim3 tb(T, T);
    float *gw1 = g->grads + g->seg[0], *gb1 = g->grads + g->seg[1];
    float *gw2 = g->grads + g->seg[2], *gb2 = g->grads + g->seg[3];
    float *gw3 = g->grads + g->seg[4], *gb3 = g->grads + g->seg[5];
    linear_grad<<<blocks((size_t)g->K * (g->F2 + 1)), NT, 0, st>>>(g->dlog, g->gap, gw3, gb3,
                                                                    n, g->F2, g->K);
    unpool2<<<blocks((size_t)n * g->F2 * g->P3), NT, 0, st>>>(g->p2, g->i2, g->dg, g->da2, n,
                                                               g->F2, g->H2, g->W2);
    dim3 gi((g->W2 + T - 1) / T, (g->H2 + T - 1) / T, n * ((g->F1 + CB - 1) / CB));
    conv_input_grad<CB><<<gi, tb, 0, st>>>(g->da2, w2, g->dp1, g->F1, g->F2, g->H2, g->W2);
    conv_weight_grad<float><<<dim3(g->F1, g->F2), NT, 0, st>>>(
        g->p1, g->p2, g->i2, g->dg, 1, 0, gw2, gb2, n, g->F1, g->F2, g->H2, g->W2);
    if (g->cfg.amp)
        conv_weight_grad<__half><<<dim3(g->C, g->F1), NT, 0, st>>>(
            xh, g->p1, g->i1, g->dp1, (size_t)g->P2, 1, gw1, gb1, n, g->C, g->F1, g->H, g->W);
    else
        conv_weight_grad<float><<<dim3(g->C, g->F1), NT, 0, st>>>(
            x, g->p1, g->i1, g->dp1, (size_t)g->P2, 1, gw1, gb1, n, g->C, g->F1, g->H, g->W);
    if (train == 1) /* 2: gradients only (gfm__cuda_grads) */
        gfm__cuda_sgd(g);
}

void gfm__cuda_sgd(gfm__cuda *g)
{
    segs sg;
    memcpy(sg.s, g->seg, sizeof sg.s);
    sgd<<<blocks(g->seg[6]), NT, 0, g->stream>>>(g->params, g->vel, g->grads, sg, g->cfg.lr,
                                                 g->cfg.momentum, g->cfg.weight_decay);
}
