/*
 * The demo trainer's model on CUDA: the network of src/model/model.c (the
 * reference; see model.h) with plain kernels of our own, no cuBLAS/cuDNN:
 * nothing was measured against them. Everything runs on the caller's
 * stream, copies and memsets included (before the first call: on the
 * model's own stream), never on the legacy default stream: a GPU does
 * not order that with the caller's non-blocking stream. A training step
 * waits only for the previous step (whose loss it returns), never for
 * itself, so the GPU always has work queued.
 *
 * Per step:  conv_relu_pool x2 (tiled direct conv fused with bias, ReLU,
 * 2x2 max-pool and its argmax) -> head (average pool, linear, softmax,
 * loss, logit and pooled gradients, one block per sample) -> results
 * (one block: mean loss and correct count into a device slot, copied
 * into pinned memory) -> the backward pass (model_backward.cu):
 * linear_grad -> unpool2 (the conv2 output gradient, dense) ->
 * conv_input_grad (conv2's input gradient) -> conv_weight_grad x2 ->
 * sgd. All reductions are block tree reductions
 * in a fixed order, no atomics: a run is deterministic on one GPU.
 * It is not bit-identical to the CPU reference (other summation order).
 *
 * amp: the input batch is float16 (the loader's GF_DTYPE_FLOAT16), read
 * as such by the first conv and its weight gradient: half the bytes
 * copied and stored per batch. The arithmetic stays float32 (a half
 * converts to float exactly), so an amp step on x equals the float32
 * step on x rounded to float16.
 */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "failf.h"

#include "model_cuda.cuh"


#define CK(call)                                                                           \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess)                                                             \
            return demo_failf(why, why_len, "model (CUDA): %s: %s", #call, cudaGetErrorString(e_)); \
    } while (0)

/* ---- kernels ---- */

/* conv3x3 pad 1 + bias, ReLU, 2x2 max-pool: a T x T tile of pooled
 * outputs of FB filters for one sample per block, one pooled position
 * (2x2 conv outputs) per thread; input planes staged in shared memory a
 * channel at a time. grid (ceil(Wo/T), ceil(Ho/T), n * ceil(F/FB)). */
template <int FB, typename TIn>
static __global__ void conv_relu_pool(const TIn *__restrict__ in, const float *__restrict__ w,
                                      const float *__restrict__ b, float *__restrict__ out,
                                      unsigned char *__restrict__ idx, int C, int H, int W, int F)
{
    __shared__ float tile[2 * T + 2][2 * T + 3];
    __shared__ float ws[FB][9];
    const int Ho = H / 2, Wo = W / 2, groups = (F + FB - 1) / FB;
    const int n = blockIdx.z / groups, f0 = (blockIdx.z % groups) * FB;
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * T + tx;
    const int iy0 = 2 * blockIdx.y * T - 1, ix0 = 2 * blockIdx.x * T - 1;
    float acc[FB][4];
    for (int i = 0; i < FB; i++)
        for (int j = 0; j < 4; j++)
            acc[i][j] = 0;
    for (int c = 0; c < C; c++) {
        __syncthreads();
        const TIn *plane = in + ((size_t)n * C + c) * H * W;
        for (int i = tid; i < (2 * T + 2) * (2 * T + 2); i += T * T) {
            int r = i / (2 * T + 2), q = i % (2 * T + 2), y = iy0 + r, x = ix0 + q;
            tile[r][q] =
                (y >= 0 && y < H && x >= 0 && x < W) ? to_f(plane[(size_t)y * W + x]) : 0.0f;
        }
        if (tid < FB * 9) {
            int fb = tid / 9, k = tid % 9;
            ws[fb][k] = f0 + fb < F ? w[((size_t)(f0 + fb) * C + c) * 9 + k] : 0.0f;
        }
        __syncthreads();
        float v[4][4];
        for (int r = 0; r < 4; r++)
            for (int q = 0; q < 4; q++)
                v[r][q] = tile[2 * ty + r][2 * tx + q];
        for (int fb = 0; fb < FB; fb++)
            for (int oy = 0; oy < 2; oy++)
                for (int ox = 0; ox < 2; ox++) {
                    float s = acc[fb][oy * 2 + ox];
                    for (int ky = 0; ky < 3; ky++)
                        for (int kx = 0; kx < 3; kx++)
                            s += ws[fb][ky * 3 + kx] * v[oy + ky][ox + kx];
                    acc[fb][oy * 2 + ox] = s;
                }
    }
    const int py = blockIdx.y * T + ty, px = blockIdx.x * T + tx;
    if (py >= Ho || px >= Wo)
        return;
    for (int fb = 0; fb < FB && f0 + fb < F; fb++) {
        const float bias = b[f0 + fb];
        float m = acc[fb][0] + bias;
        int k = 0;
        for (int j = 1; j < 4; j++)
            if (acc[fb][j] + bias > m)
                m = acc[fb][j] + bias, k = j;
        size_t o = (((size_t)n * F + f0 + fb) * Ho + py) * Wo + px;
        out[o] = m > 0 ? m : 0.0f;
        idx[o] = (unsigned char)k;
    }
}

/* Per sample (one block each): average pool, logits, softmax, the loss
 * and whether it is right; when training also the logit gradient
 * (softmax - onehot) / n and the pooled gradient dg = dlog W3 / P3.
 * Dynamic shared memory: F2 floats. */
static __global__ void head(const float *__restrict__ p2, const float *__restrict__ w3,
                            const float *__restrict__ b3, const int32_t *__restrict__ labels,
                            float *__restrict__ gap, float *__restrict__ dlog,
                            float *__restrict__ dg, float *__restrict__ loss_n,
                            int *__restrict__ correct_n, int n, int F2, int P3, int K, int train)
{
    extern __shared__ float g[];
    __shared__ float rv[NT];
    __shared__ int ri[NT];
    const int s = blockIdx.x, t = threadIdx.x;
    for (int f = t; f < F2; f += NT) {
        const float *p = p2 + ((size_t)s * F2 + f) * P3;
        float sum = 0;
        for (int q = 0; q < P3; q++)
            sum += p[q];
        g[f] = sum / P3;
        gap[(size_t)s * F2 + f] = g[f];
    }
    __syncthreads();
    float *z = dlog + (size_t)s * K;
    float zmax = -INFINITY;
    int arg = 0x7fffffff;
    for (int k = t; k < K; k += NT) {
        float v = b3[k];
        const float *wk = w3 + (size_t)k * F2;
        for (int f = 0; f < F2; f++)
            v += wk[f] * g[f];
        z[k] = v;
        if (v > zmax)
            zmax = v, arg = k;
    }
    rv[t] = zmax, ri[t] = arg;
    __syncthreads();
    for (int h = NT / 2; h > 0; h >>= 1) { /* max, the lowest index on ties */
        if (t < h && (rv[t + h] > rv[t] || (rv[t + h] == rv[t] && ri[t + h] < ri[t])))
            rv[t] = rv[t + h], ri[t] = ri[t + h];
        __syncthreads();
    }
    zmax = rv[0], arg = ri[0];
    __syncthreads();
    float se = 0;
    for (int k = t; k < K; k += NT)
        se += expf(z[k] - zmax);
    rv[t] = se;
    __syncthreads();
    for (int h = NT / 2; h > 0; h >>= 1) {
        if (t < h)
            rv[t] += rv[t + h];
        __syncthreads();
    }
    const float lse = zmax + logf(rv[0]);
    const int y = labels[s];
    if (t == 0) {
        loss_n[s] = lse - z[y];
        correct_n[s] = arg == y;
    }
    if (!train)
        return;
    __syncthreads(); /* z[y] read before it is overwritten */
    for (int k = t; k < K; k += NT)
        z[k] = (expf(z[k] - lse) - (k == y ? 1.0f : 0.0f)) / n;
    __syncthreads();
    for (int f = t; f < F2; f += NT) {
        float d = 0;
        for (int k = 0; k < K; k++)
            d += z[k] * w3[(size_t)k * F2 + f];
        dg[(size_t)s * F2 + f] = d / P3;
    }
}

/* One block: the batch's mean loss and correct count into *res. */
static __global__ void results(const float *__restrict__ loss_n, const int *__restrict__ correct_n,
                               int n, result *res)
{
    __shared__ float red[2][NT];
    float v[2] = {0, 0};
    for (int s = threadIdx.x; s < n; s += NT)
        v[0] += loss_n[s], v[1] += (float)correct_n[s];
    block_sum<2>(red, v);
    if (threadIdx.x == 0) {
        res->loss = v[0] / n;
        res->correct = (int)(v[1] + 0.5f);
    }
}

/* The data-parallel array (model.h, gfm_grad_pack): what train.c packs
 * on the host for MPI, [gradient x n, n, correct, loss x n], the same
 * float products. */
static __global__ void pack_grads(const float *__restrict__ grads, const result *__restrict__ res,
                                  float *__restrict__ packed, size_t P, int n)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const float fn = (float)n;
    if (i < P) {
        packed[i] = grads[i] * fn;
    } else if (i == P) {
        packed[P] = fn;
        packed[P + 1] = (float)(res->correct > 0 ? res->correct : 0);
        packed[P + 2] = res->loss * fn;
    }
}

/* The mean gradient from the summed array: as the host does, one
 * reciprocal of the summed n, then a product. */
static __global__ void unpack_grads(const float *__restrict__ packed, float *__restrict__ grads,
                                    size_t P)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < P) {
        const float inv = 1.0f / packed[P];
        grads[i] = packed[i] * inv;
    }
}

/* ---- host side ---- */

static void free_batch(gfm__cuda *g)
{
    cudaFree(g->p1), cudaFree(g->p2), cudaFree(g->gap), cudaFree(g->dlog), cudaFree(g->dg);
    cudaFree(g->loss_n), cudaFree(g->da2), cudaFree(g->dp1), cudaFree(g->i1), cudaFree(g->i2);
    cudaFree(g->correct_n), cudaFree(g->labels);
    cudaFreeHost(g->h_labels);
    g->p1 = g->p2 = g->gap = g->dlog = g->dg = g->loss_n = g->da2 = g->dp1 = NULL;
    g->i1 = g->i2 = NULL;
    g->correct_n = NULL;
    g->labels = g->h_labels = NULL;
    g->cap = 0;
}

/* Buffers for n samples. Growing waits for the queued work (the old
 * buffers may still be in use): once per new maximum batch size. */
static int reserve(gfm__cuda *g, int n, char *why, size_t why_len)
{
    if (n <= g->cap)
        return 0;
    if (g->have_stream)
        CK(cudaStreamSynchronize(g->stream));
    free_batch(g);
    const size_t a = (size_t)n * g->F1 * g->P2, b = (size_t)n * g->F2 * g->P3;
    const size_t c2 = (size_t)n * g->F2 * g->P2;
    CK(cudaMalloc((void **)&g->p1, a * sizeof(float)));
    CK(cudaMalloc((void **)&g->i1, a));
    CK(cudaMalloc((void **)&g->dp1, a * sizeof(float)));
    CK(cudaMalloc((void **)&g->p2, b * sizeof(float)));
    CK(cudaMalloc((void **)&g->i2, b));
    CK(cudaMalloc((void **)&g->da2, c2 * sizeof(float)));
    CK(cudaMalloc((void **)&g->gap, (size_t)n * g->F2 * sizeof(float)));
    CK(cudaMalloc((void **)&g->dg, (size_t)n * g->F2 * sizeof(float)));
    CK(cudaMalloc((void **)&g->dlog, (size_t)n * g->K * sizeof(float)));
    CK(cudaMalloc((void **)&g->loss_n, (size_t)n * sizeof(float)));
    CK(cudaMalloc((void **)&g->correct_n, (size_t)n * sizeof(int)));
    CK(cudaMalloc((void **)&g->labels, (size_t)n * sizeof(int32_t)));
    CK(cudaHostAlloc((void **)&g->h_labels, (size_t)(R + 1) * n * sizeof(int32_t),
                     cudaHostAllocDefault));
    g->cap = n;
    return 0;
}

extern "C" void gfm__cuda_destroy(gfm__cuda *g)
{
    if (!g)
        return;
    cudaSetDevice(g->cfg.device_id);
    if (g->have_stream)
        cudaStreamSynchronize(g->stream);
    free_batch(g);
    cudaFree(g->params), cudaFree(g->grads), cudaFree(g->vel), cudaFree(g->res);
    cudaFree(g->packed);
    cudaFreeHost(g->h_res);
    cudaFreeHost(g->h_totals);
    for (int i = 0; i < R; i++)
        if (g->ev[i])
            cudaEventDestroy(g->ev[i]);
    if (g->ev_switch)
        cudaEventDestroy(g->ev_switch);
    if (g->own)
        cudaStreamDestroy(g->own);
    free(g);
}

extern "C" int gfm__cuda_create(gfm__cuda **out, const gfm_config *c, const float *params,
                                const size_t seg[7], char *why, size_t why_len)
{
    gfm__cuda *g = (gfm__cuda *)calloc(1, sizeof *g);
    if (!g)
        return demo_failf(why, why_len, "model: out of memory");
    *out = NULL;
    g->cfg = *c;
    g->C = c->in_c, g->H = c->in_h, g->W = c->in_w;
    g->F1 = c->width, g->F2 = 2 * c->width, g->K = c->classes;
    g->H2 = g->H / 2, g->W2 = g->W / 2, g->P2 = g->H2 * g->W2;
    g->H3 = g->H / 4, g->W3 = g->W / 4, g->P3 = g->H3 * g->W3;
    memcpy(g->seg, seg, sizeof g->seg);
    g->last_loss = NAN;
    g->last_correct = -1;
    int rc = -1;
    do {
        cudaError_t e = cudaSetDevice(c->device_id);
        if (e != cudaSuccess) {
            demo_failf(why, why_len, "model (CUDA): device %d: %s", c->device_id, cudaGetErrorString(e));
            break;
        }
        /* a plane of head's dynamic shared memory: F2 floats */
        if ((size_t)g->F2 * sizeof(float) > 40 * 1024) {
            demo_failf(why, why_len, "model (CUDA): width %d too large", c->width);
            break;
        }
        const size_t bytes = seg[6] * sizeof(float);
        if (cudaStreamCreateWithFlags(&g->own, cudaStreamNonBlocking) ||
            cudaMalloc((void **)&g->params, bytes) || cudaMalloc((void **)&g->grads, bytes) ||
            cudaMalloc((void **)&g->vel, bytes) ||
            cudaMalloc((void **)&g->res, (R + 1) * sizeof(result)) ||
            cudaHostAlloc((void **)&g->h_res, (R + 1) * sizeof(result), cudaHostAllocDefault) ||
            cudaMemcpyAsync(g->params, params, bytes, cudaMemcpyHostToDevice, g->own) ||
            cudaMemsetAsync(g->vel, 0, bytes, g->own) ||
            cudaMemsetAsync(g->grads, 0, bytes, g->own) || cudaStreamSynchronize(g->own)) {
            demo_failf(why, why_len, "model (CUDA): allocating %zu parameters: %s", seg[6],
                  cudaGetErrorString(cudaGetLastError()));
            break;
        }
        int ok = 1;
        for (int i = 0; i < R && ok; i++)
            ok = cudaEventCreateWithFlags(&g->ev[i], cudaEventDisableTiming) == cudaSuccess;
        if (!ok || cudaEventCreateWithFlags(&g->ev_switch, cudaEventDisableTiming)) {
            demo_failf(why, why_len, "model (CUDA): events: %s", cudaGetErrorString(cudaGetLastError()));
            break;
        }
        g->stream = g->own; /* the first caller's stream waits for the upload */
        g->have_stream = 1;
        rc = 0;
    } while (0);
    if (rc) {
        gfm__cuda_destroy(g);
        return -1;
    }
    *out = g;
    return 0;
}

/* Work on a new stream starts after the old stream's queued work. */
static int use_stream(gfm__cuda *g, cudaStream_t s, char *why, size_t why_len)
{
    if (g->have_stream && s != g->stream) {
        CK(cudaEventRecord(g->ev_switch, g->stream));
        CK(cudaStreamWaitEvent(s, g->ev_switch, 0));
    }
    g->stream = s;
    g->have_stream = 1;
    return 0;
}

/* The forward pass (and, if train, backward and SGD) on the queued
 * labels in g->labels; the result into res. */
static int enqueue(gfm__cuda *g, const float *x, int n, int train, result *res, char *why,
                   size_t why_len)
{
    cudaStream_t st = g->stream;
    const float *w1 = g->params + g->seg[0], *b1 = g->params + g->seg[1];
    const float *w2 = g->params + g->seg[2], *b2 = g->params + g->seg[3];
    const float *w3 = g->params + g->seg[4], *b3 = g->params + g->seg[5];
    enum { FB = 4 };
    dim3 tb(T, T);
    dim3 g1((g->W2 + T - 1) / T, (g->H2 + T - 1) / T, n * ((g->F1 + FB - 1) / FB));
    const __half *xh = (const __half *)(const void *)x; /* amp: x holds float16 */
    if (g->cfg.amp)
        conv_relu_pool<FB, __half><<<g1, tb, 0, st>>>(xh, w1, b1, g->p1, g->i1, g->C, g->H,
                                                      g->W, g->F1);
    else
        conv_relu_pool<FB, float><<<g1, tb, 0, st>>>(x, w1, b1, g->p1, g->i1, g->C, g->H, g->W,
                                                     g->F1);
    dim3 g2((g->W3 + T - 1) / T, (g->H3 + T - 1) / T, n * ((g->F2 + FB - 1) / FB));
    conv_relu_pool<FB, float><<<g2, tb, 0, st>>>(g->p1, w2, b2, g->p2, g->i2, g->F1, g->H2,
                                                 g->W2, g->F2);
    head<<<n, NT, g->F2 * sizeof(float), st>>>(g->p2, w3, b3, g->labels, g->gap, g->dlog, g->dg,
                                               g->loss_n, g->correct_n, n, g->F2, g->P3, g->K,
                                               train != 0);
    results<<<1, NT, 0, st>>>(g->loss_n, g->correct_n, n, res);
    if (train)
        gfm__cuda_backward(g, x, n, train);
    CK(cudaGetLastError());
    return 0;
}

/* Every entry that queues a batch of n (0: none) on stream: the device,
 * the grid limit, buffers for n, and the stream switch. */
static int begin_batch(gfm__cuda *g, int n, void *stream, char *why, size_t why_len)
{
    CK(cudaSetDevice(g->cfg.device_id));
    if (n > 0 && (long long)n * ((g->F2 + 3) / 4) > 65535) /* grid.z of conv_relu_pool */
        return demo_failf(why, why_len, "model (CUDA): batch %d too large for width %d", n,
                     g->cfg.width);
    if ((n > 0 && reserve(g, n, why, why_len)) ||
        use_stream(g, (cudaStream_t)stream, why, why_len))
        return -1;
    return 0;
}

/* labels into pinned slot `slot` (free: the caller made sure), then to
 * the device on the current stream. */
static int upload_labels(gfm__cuda *g, int slot, const int32_t *labels, int n, char *why,
                         size_t why_len)
{
    int32_t *h = g->h_labels + (size_t)slot * g->cap;
    memcpy(h, labels, (size_t)n * sizeof(int32_t));
    CK(cudaMemcpyAsync(g->labels, h, (size_t)n * sizeof(int32_t), cudaMemcpyHostToDevice,
                       g->stream));
    return 0;
}

extern "C" int gfm__cuda_step(gfm__cuda *g, const float *x, const int32_t *labels, int n,
                              void *stream, int train, float *loss, int *correct, char *why,
                              size_t why_len)
{
    if (begin_batch(g, n, stream, why, why_len))
        return -1;
    cudaStream_t st = g->stream;
    if (!train && g->pack_pending)
        return demo_failf(why, why_len, "model (CUDA): evaluate between gfm_grad_pack and "
                                   "gfm_apply_packed");
    if (!train) { /* evaluate: its own label and result slot, and wait */
        if (upload_labels(g, R, labels, n, why, why_len) ||
            enqueue(g, x, n, 0, g->res + R, why, why_len))
            return -1;
        CK(cudaMemcpyAsync(g->h_res + R, g->res + R, sizeof(result), cudaMemcpyDeviceToHost, st));
        CK(cudaStreamSynchronize(st));
        if (loss)
            *loss = g->h_res[R].loss;
        if (correct)
            *correct = g->h_res[R].correct;
        return 0;
    }
    const int slot = (int)(g->queued % R);
    if (g->queued >= R) /* the step R ago: long finished (see below) */
        CK(cudaEventSynchronize(g->ev[slot]));
    if (upload_labels(g, slot, labels, n, why, why_len) ||
        enqueue(g, x, n, 1, g->res + slot, why, why_len))
        return -1;
    CK(cudaMemcpyAsync(g->h_res + slot, g->res + slot, sizeof(result), cudaMemcpyDeviceToHost,
                       st));
    CK(cudaEventRecord(g->ev[slot], st));
    g->queued++;
    /* The previous step's figures, exactly (train.c tallies them as
     * such): wait for that step, never this one. This step is queued
     * behind it, so the GPU does not idle while the host waits; the host
     * runs at most one step ahead, as a PyTorch loop that reads the
     * previous step's loss.item(). */
    if (g->queued >= 2 && g->seen < g->queued - 1) {
        const int prev = (int)((g->queued - 2) % R);
        CK(cudaEventSynchronize(g->ev[prev]));
        g->last_loss = g->h_res[prev].loss;
        g->last_correct = g->h_res[prev].correct;
        g->seen = g->queued - 1;
    } else if (g->seen < g->queued - 1) {
        g->last_loss = NAN;
        g->last_correct = -1;
    }
    if (loss)
        *loss = g->last_loss;
    if (correct)
        *correct = g->last_correct;
    return 0;
}

extern "C" int gfm__cuda_sync(gfm__cuda *g, float *loss, int *correct, char *why, size_t why_len)
{
    CK(cudaSetDevice(g->cfg.device_id));
    if (g->queued > 0) {
        const int slot = (int)((g->queued - 1) % R);
        CK(cudaEventSynchronize(g->ev[slot]));
        g->last_loss = g->h_res[slot].loss;
        g->last_correct = g->h_res[slot].correct;
        g->seen = g->queued;
    }
    if (g->have_stream)
        CK(cudaStreamSynchronize(g->stream));
    if (loss)
        *loss = g->last_loss;
    if (correct)
        *correct = g->last_correct;
    return 0;
}

extern "C" int gfm__cuda_params(gfm__cuda *g, float *params, char *why, size_t why_len)
{
    CK(cudaSetDevice(g->cfg.device_id));
    CK(cudaMemcpyAsync(params, g->params, g->seg[6] * sizeof(float), cudaMemcpyDeviceToHost,
                       g->stream));
    CK(cudaStreamSynchronize(g->stream));
    return 0;
}

extern "C" int gfm__cuda_grads(gfm__cuda *g, const float *x, const int32_t *labels, int n,
                               void *stream, float *grad, float *loss, int *correct, char *why,
                               size_t why_len)
{
    if (begin_batch(g, n, stream, why, why_len))
        return -1;
    cudaStream_t st = g->stream;
    if (g->pack_pending)
        return demo_failf(why, why_len, "model (CUDA): gfm_grad_step between gfm_grad_pack and "
                                   "gfm_apply_packed");
    /* the evaluation's label and result slot (R): this call waits */
    if (upload_labels(g, R, labels, n, why, why_len) ||
        enqueue(g, x, n, 2, g->res + R, why, why_len))
        return -1;
    CK(cudaMemcpyAsync(g->h_res + R, g->res + R, sizeof(result), cudaMemcpyDeviceToHost, st));
    CK(cudaMemcpyAsync(grad, g->grads, g->seg[6] * sizeof(float), cudaMemcpyDeviceToHost, st));
    CK(cudaStreamSynchronize(st));
    if (loss)
        *loss = g->h_res[R].loss;
    if (correct)
        *correct = g->h_res[R].correct;
    return 0;
}

extern "C" int gfm__cuda_apply(gfm__cuda *g, const float *grad, void *stream, char *why,
                               size_t why_len)
{
    CK(cudaSetDevice(g->cfg.device_id));
    if (use_stream(g, (cudaStream_t)stream, why, why_len))
        return -1;
    cudaStream_t st = g->stream;
    /* grad is pageable host memory: the copy is done when this returns */
    CK(cudaMemcpyAsync(g->grads, grad, g->seg[6] * sizeof(float), cudaMemcpyHostToDevice, st));
    CK(cudaStreamSynchronize(st));
    gfm__cuda_sgd(g);
    CK(cudaGetLastError());
    return 0;
}

extern "C" int gfm__cuda_grad_pack(gfm__cuda *g, const float *x, const int32_t *labels, int n,
                                   void *stream, float **packed, char *why, size_t why_len)
{
    const size_t P = g->seg[6];
    if (begin_batch(g, n, stream, why, why_len))
        return -1;
    cudaStream_t st = g->stream;
    if (g->pack_pending)
        return demo_failf(why, why_len, "model (CUDA): gfm_grad_pack twice without gfm_apply_packed");
    if (!g->packed)
        CK(cudaMalloc((void **)&g->packed, (P + 3) * sizeof(float)));
    if (!g->h_totals)
        CK(cudaHostAlloc((void **)&g->h_totals, 3 * sizeof(float), cudaHostAllocDefault));
    if (n > 0) {
        /* the evaluation's label and result slot (R): free, since
         * gfm__cuda_apply_packed waited for the previous pack */
        if (upload_labels(g, R, labels, n, why, why_len) ||
            enqueue(g, x, n, 2, g->res + R, why, why_len))
            return -1;
        pack_grads<<<blocks(P + 1), NT, 0, st>>>(g->grads, g->res + R, g->packed, P, n);
    } else {
        CK(cudaMemsetAsync(g->packed, 0, (P + 3) * sizeof(float), st));
    }
    CK(cudaGetLastError());
    *packed = g->packed;
    g->pack_pending = 1;
    return 0;
}

extern "C" int gfm__cuda_apply_packed(gfm__cuda *g, void *stream, float totals[3], char *why,
                                      size_t why_len)
{
    const size_t P = g->seg[6];
    CK(cudaSetDevice(g->cfg.device_id));
    if (!g->pack_pending)
        return demo_failf(why, why_len, "model (CUDA): gfm_apply_packed without gfm_grad_pack");
    g->pack_pending = 0;
    if (use_stream(g, (cudaStream_t)stream, why, why_len))
        return -1;
    cudaStream_t st = g->stream;
    CK(cudaMemcpyAsync(g->h_totals, g->packed + P, 3 * sizeof(float), cudaMemcpyDeviceToHost,
                       st));
    CK(cudaStreamSynchronize(st));
    memcpy(totals, g->h_totals, 3 * sizeof(float));
    if (totals[0] > 0) {
        unpack_grads<<<blocks(P), NT, 0, st>>>(g->packed, g->grads, P);
        gfm__cuda_sgd(g); /* P = seg[6] */
        CK(cudaGetLastError());
    }
    return 0;
}

extern "C" int gfm__cuda_state(gfm__cuda *g, float *params, float *vel, int set, char *why,
                               size_t why_len)
{
    const size_t bytes = g->seg[6] * sizeof(float);
    cudaStream_t st = g->stream; /* after its queued steps */
    CK(cudaSetDevice(g->cfg.device_id));
    if (set) {
        CK(cudaMemcpyAsync(g->params, params, bytes, cudaMemcpyHostToDevice, st));
        CK(cudaMemcpyAsync(g->vel, vel, bytes, cudaMemcpyHostToDevice, st));
    } else {
        CK(cudaMemcpyAsync(params, g->params, bytes, cudaMemcpyDeviceToHost, st));
        CK(cudaMemcpyAsync(vel, g->vel, bytes, cudaMemcpyDeviceToHost, st));
    }
    CK(cudaStreamSynchronize(st)); /* the caller's host arrays are free again */
    return 0;
}
