/* The demo model's state, shared by model.c (its API, its memory and the
 * CUDA dispatch) and model_ref.c (the plain-C reference: forward,
 * backward, SGD). Internal: users see model.h. */
#ifndef GF_MODEL_IMPL_H
#define GF_MODEL_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

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

/* model_ref.c: on n samples, with the batch buffers reserved for n. */
void gfm__ref_forward(gfm_model *m, const float *x, const int32_t *labels, int n, float *loss,
                      int *correct);
void gfm__ref_backward(gfm_model *m, const float *x, const int32_t *labels, int n);
void gfm__ref_sgd(gfm_model *m);

#endif
