/* The fused device transform: uint8 NHWC pixels -> dtype in layout,
 * out = fmaf(x, scale[c], shift[c]) with scale = 1/std, shift = -mean/std,
 * rounded to nearest even for float16/bfloat16, each sample optionally
 * mirrored left-right. One function, two implementations:
 * kernels/convert.cu on the GPU and gf__convert_cpu, its CPU twin and the
 * tests' oracle. Both use one fmaf per value, so they agree bit for bit. */
#ifndef GF_CONVERT_H
#define GF_CONVERT_H

#include "common.h"
#include "config.h"

typedef struct gf__convert {
    int h, w, c;            /* per sample */
    gf_dtype dtype;
    gf_layout layout;       /* UINT8 is always NHWC */
    float scale[4], shift[4];
} gf__convert;

/* From the settings (std 0 means 1). */
void gf__convert_init(gf__convert *cv, const gf_settings *s);
/* Bytes of one converted sample. */
size_t gf__convert_sample_bytes(const gf__convert *cv);

/* CPU twin: converts samples [first, first + count) of a batch whose uint8
 * pixels start at in (sample i at in + i * h*w*c) into out (sample i at
 * out + i * gf__convert_sample_bytes). flips[i] != 0 mirrors sample i;
 * flips may be NULL. Thread-safe; disjoint ranges may run in parallel. */
void gf__convert_cpu(const gf__convert *cv, const uint8_t *in, void *out, const uint8_t *flips,
                     int first, int count);

/* IEEE binary16 and bfloat16 from float, round to nearest even, NaN kept
 * a NaN; and back (exact). */
uint16_t gf__f32_to_f16(float f);
uint16_t gf__f32_to_bf16(float f);
float gf__f16_to_f32(uint16_t h);
float gf__bf16_to_f32(uint16_t b);

#if GF_HAVE_CUDA
/* GPU: enqueues the conversion of count samples on stream (cudaStream_t).
 * d_in, d_out and d_flips (may be NULL) are device pointers. Returns 0 or
 * GF_ENODEV with the CUDA error's name in why. */
int gf__convert_cuda(const gf__convert *cv, const uint8_t *d_in, void *d_out,
                     const uint8_t *d_flips, int count, void *stream, char *why, size_t why_len);
/* Test and bench helper: a kernel that spins on the GPU for about `ns`
 * nanoseconds (globaltimer), one block, on stream. Returns 0 or GF_ENODEV. */
int gf__cuda_spin(uint64_t ns, void *stream);
#endif

#endif
