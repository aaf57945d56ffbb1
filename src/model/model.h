/* The demo trainer's model: a small convolutional classifier with a
 * plain-C reference implementation (the CPU path, and the tests' oracle)
 * and CUDA kernels (kernels in src/model/model.cu, built with CUDA).
 *
 *   conv3x3(C -> W) ReLU maxpool2 -> conv3x3(W -> 2W) ReLU maxpool2
 *   -> global average pool -> linear(2W -> classes) -> softmax
 *
 * trained with softmax cross-entropy and SGD with momentum. W is
 * --model-width: the compute per step, to move a run between input-bound
 * and compute-bound. Input: float32 NCHW, already normalised (the loader's
 * output with dtype GF_DTYPE_FLOAT32, layout GF_LAYOUT_NCHW). */
#ifndef GF_MODEL_H
#define GF_MODEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { GFM_CPU = 0, GFM_CUDA = 1 };

typedef struct gfm_config {
    int in_c, in_h, in_w; /* input sample shape; h and w divisible by 4 */
    int classes;
    int width;            /* W: channels of the first conv */
    uint64_t seed;        /* weight initialisation */
    float lr;             /* SGD learning rate */
    float momentum;       /* 0.9 */
    float weight_decay;   /* 5e-4 */
    int device;           /* GFM_CPU or GFM_CUDA */
    int device_id;        /* CUDA device */
    int amp;              /* CUDA only: x is float16 (the loader's
                             GF_DTYPE_FLOAT16 NCHW), read as such by the
                             first conv and its weight gradient; the
                             arithmetic stays float32, so a step equals
                             the float32 step on x rounded to float16 */
} gfm_config;

typedef struct gfm_model gfm_model;

/* Returns 0, or -1 with the reason in why (bad shape, no memory, CUDA). */
int gfm_create(gfm_model **out, const gfm_config *c, char *why, size_t why_len);
void gfm_destroy(gfm_model *m);

/* One SGD step on n samples. x: n x C x H x W float32 (float16 with
 * amp, through the same pointer type), host memory on the
 * CPU, device memory on CUDA (ready on `stream`, a cudaStream_t, when this
 * is called); labels: host, in [0, classes), copied before the return.
 * On the CPU loss and correct are this step's (before its update). On
 * CUDA the step is queued on stream and they are the previous call's
 * (NaN and -1 on the first call; if gfm_sync came in between, the
 * figures it returned, again):
 * the host waits for the previous step, never for this one, so the GPU
 * has this step queued meanwhile; gfm_sync makes them current. x is read
 * by the queued step: keep it until the stream has run it. Labels and
 * results travel through GFM_CUDA_AHEAD pinned slots. Use one stream; a
 * new stream is ordered after the old one's queued work.
 * Buffers grow on demand to the largest n seen and are then reused.
 * Returns 0 or -1 (reason: gfm_error). */
int gfm_train_step(gfm_model *m, const float *x, const int32_t *labels, int n, void *stream,
                   float *loss, int *correct);
enum { GFM_CUDA_AHEAD = 4 };

/* Forward only: the loss and correct count on n samples (waits on CUDA). */
int gfm_evaluate(gfm_model *m, const float *x, const int32_t *labels, int n, void *stream,
                 float *loss, int *correct);

/* CUDA: waits for the queued steps; then the last loss/correct are final. */
int gfm_sync(gfm_model *m, float *loss, int *correct);

/* FNV-1a (64-bit) of the parameters' bytes in the order w1 b1 w2 b2 w3
 * b3, the same layout on CPU and CUDA. On CUDA it waits for the queued
 * steps and copies the parameters back; 0 if that fails. */
uint64_t gfm_checksum(gfm_model *m);

/* The reason for the last -1 (a static string for a NULL model); valid
 * until the next call on m. */
const char *gfm_error(const gfm_model *m);

/* Multiply-adds of one training step per sample (forward + backward). */
double gfm_step_flops(const gfm_model *m);

/* --- data-parallel training and checkpoints (CPU and CUDA) ---
 * All parameter arrays here are host float arrays of gfm_param_count()
 * elements in the layout of gfm_checksum: w1 b1 w2 b2 w3 b3.
 *
 * gfm_grad_step: the gradients of the mean loss on n samples into grad,
 * not applied; loss and correct are this batch's. On CUDA the step runs
 * on stream and the call waits for it (the gradients are copied back).
 * gfm_apply: one SGD-with-momentum update with the gradient grad (e.g.
 * the average over ranks), exactly the update gfm_train_step makes with
 * its own gradient. gfm_train_step == gfm_grad_step + gfm_apply, bit for
 * bit on the CPU.
 * gfm_state_get/set: the parameters and the momentum buffers, everything
 * that makes the next steps exact (waits for the queued steps on CUDA).
 * Each returns 0 or -1 (reason: gfm_error). */
size_t gfm_param_count(const gfm_model *m);
int gfm_grad_step(gfm_model *m, const float *x, const int32_t *labels, int n, void *stream,
                  float *grad, float *loss, int *correct);
int gfm_apply(gfm_model *m, const float *grad, void *stream);
int gfm_state_get(gfm_model *m, float *params, float *momentum);
int gfm_state_set(gfm_model *m, const float *params, const float *momentum);

/* --- data-parallel on the device (CUDA models, for NCCL) ---
 * The gradient travels in one device array of gfm_param_count() + 3
 * floats, the layout train.c all-reduces on the host over MPI:
 * [gradient x n, n, correct, loss x n], so its sum over the ranks divided
 * by the summed n is the sample-weighted mean.
 * gfm_grad_pack: queues this rank's gradient on n samples (n = 0: zeros)
 * into the array and sets *packed to it: device memory owned by the
 * model, valid until gfm_destroy; does not wait. The caller sums it over
 * the ranks in place, on stream, then calls gfm_apply_packed before the
 * next gfm_grad_pack.
 * gfm_apply_packed: waits for stream, returns the summed n, correct and
 * loss x n in totals and, if n > 0, queues the update with the mean
 * gradient: the update gfm_apply makes with it, the same float products.
 * CPU models: -1. Each returns 0 or -1 (reason: gfm_error). */
int gfm_grad_pack(gfm_model *m, const float *x, const int32_t *labels, int n, void *stream,
                  float **packed);
int gfm_apply_packed(gfm_model *m, void *stream, float totals[3]);

/* --- the reference, for tests: parameters and gradients in place --- */
typedef struct gfm_params {
    float *w1, *b1, *w2, *b2, *w3, *b3;  /* conv1, conv2, linear */
    size_t n_w1, n_b1, n_w2, n_b2, n_w3, n_b3;
} gfm_params;

/* CPU models only: the parameters, and the gradients of the mean loss on
 * n samples (computed, not applied). Return 0 or -1.
 * The pointers point into the model: parameters stay valid (and change in
 * place with each step) until gfm_destroy; gradient values are those of
 * the last gfm_gradients or gfm_train_step call, valid until gfm_destroy.
 * Writing through p's pointers changes the model (tests set weights). */
int gfm_params_get(gfm_model *m, gfm_params *p);
int gfm_gradients(gfm_model *m, const float *x, const int32_t *labels, int n, gfm_params *grad,
                  float *loss);

/* --- internal: the CUDA backend (src/model/model.cu), called by model.c ---
 * model.c validates arguments and initialises the parameters (the same
 * values as the CPU model: one RNG); the backend uploads and owns them.
 * seg: offsets of w1 b1 w2 b2 w3 b3 and the total in one float array.
 * Each returns 0 or -1 with the reason in why. With amp, x points to
 * float16 values (passed as const float *). */
typedef struct gfm__cuda gfm__cuda;
int gfm__cuda_create(gfm__cuda **out, const gfm_config *c, const float *params,
                     const size_t seg[7], char *why, size_t why_len);
void gfm__cuda_destroy(gfm__cuda *g);
int gfm__cuda_step(gfm__cuda *g, const float *x, const int32_t *labels, int n, void *stream,
                   int train, float *loss, int *correct, char *why, size_t why_len);
int gfm__cuda_sync(gfm__cuda *g, float *loss, int *correct, char *why, size_t why_len);
/* Waits for the queued work, then copies the parameters to params. */
int gfm__cuda_params(gfm__cuda *g, float *params, char *why, size_t why_len);
/* Gradients only (no update) of n samples into the host array grad;
 * waits. */
int gfm__cuda_grads(gfm__cuda *g, const float *x, const int32_t *labels, int n, void *stream,
                    float *grad, float *loss, int *correct, char *why, size_t why_len);
/* Copies the host gradient grad in and queues the SGD update. */
int gfm__cuda_apply(gfm__cuda *g, const float *grad, void *stream, char *why, size_t why_len);
int gfm__cuda_grad_pack(gfm__cuda *g, const float *x, const int32_t *labels, int n,
                        void *stream, float **packed, char *why, size_t why_len);
int gfm__cuda_apply_packed(gfm__cuda *g, void *stream, float totals[3], char *why,
                           size_t why_len);
/* Waits, then copies parameters and momentum out (set = 0) or in (1). */
int gfm__cuda_state(gfm__cuda *g, float *params, float *vel, int set, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif
