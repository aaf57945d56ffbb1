/*
 * What the demo model's CUDA files share (model.cu: the forward pass, the
 * step and the host side; model_backward.cu: the gradients and SGD): the
 * model's device state, the block sizes and the device helpers both
 * kernels files inline. C++ for nvcc (and for cudaemu's cu2cpp: no launch
 * and no __shared__ declaration here).
 */
#ifndef GFM_MODEL_CUDA_CUH
#define GFM_MODEL_CUDA_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "model.h"

enum { R = GFM_CUDA_AHEAD, T = 16, NT = 256 };

struct result {
    float loss;
    int correct;
};

struct gfm__cuda {
    gfm_config cfg;
    int C, H, W, F1, F2, K, H2, W2, P2, H3, W3, P3;
    size_t seg[7];
    float *params, *grads, *vel;

    int cap;
    float *p1, *p2, *gap, *dlog, *dg, *loss_n, *da2, *dp1;
    unsigned char *i1, *i2;
    int *correct_n;
    int32_t *labels;
    result *res;          /* device: R train slots + 1 for evaluate */

    int32_t *h_labels;    /* pinned: R slots of cap, then one for evaluate */
    result *h_res;        /* pinned: R + 1 */
    cudaEvent_t ev[R];    /* recorded after each slot's result copy */
    cudaEvent_t ev_switch;
    long long queued;     /* train steps queued so far; slot = index % R */
    long long seen;       /* steps whose result has been read (in order) */
    float last_loss;
    int last_correct;
    cudaStream_t stream;  /* the last one used (at first: own) */
    int have_stream;
    cudaStream_t own;     /* non-blocking: the upload of the initial weights */

    float *packed;        /* data-parallel on the device: seg[6] + 3 floats */
    float *h_totals;      /* pinned: the packed array's last 3 */
    int pack_pending;     /* packed, not yet applied (slot R's labels in use) */
};

/* The backward pass and, if train == 1, the SGD step (2: gradients only),
 * queued on g->stream after the forward pass of the same n samples of x
 * (float16 when g->cfg.amp); the caller checks cudaGetLastError. */
void gfm__cuda_backward(gfm__cuda *g, const float *x, int n, int train);
/* The SGD step alone, from g->grads, on g->stream. */
void gfm__cuda_sgd(gfm__cuda *g);

/* Blocks of NT threads for n elements. */
static inline unsigned blocks(size_t n)
{
    return (unsigned)((n + NT - 1) / NT);
}

static __device__ __forceinline__ float to_f(float v)
{
    return v;
}

static __device__ __forceinline__ float to_f(__half v)
{
    return __half2float(v);
}

/* Block tree sum of NV values per thread; thread 0 gets the totals. */
template <int NV>
static __device__ void block_sum(float (*red)[NT], float *v)
{
    const int t = threadIdx.x + threadIdx.y * blockDim.x;
    for (int j = 0; j < NV; j++)
        red[j][t] = v[j];
    __syncthreads();
    for (int s = NT / 2; s > 0; s >>= 1) {
        if (t < s)
            for (int j = 0; j < NV; j++)
                red[j][t] += red[j][t + s];
        __syncthreads();
    }
    for (int j = 0; j < NV; j++)
        v[j] = red[j][0];
}

#endif
