/* Separable antialiased resampler (internal).
 *
 * The filters are PIL's, as torchvision's resize on PIL images uses them:
 * BILINEAR the triangle (support 1), BICUBIC the cubic convolution with
 * a = -0.5 (support 2, negative lobes), each widened by the shrink factor
 * (antialiased). Weights are int16 with 14 fractional bits, normalised so
 * each output's weights sum to exactly 1 << 14; that makes a scale-1,
 * integer-aligned crop bit-exact. NEAREST is no filter but PIL's own
 * sampling (ImagingScaleAffine), expressed as one tap of weight 1 << 14
 * per output, so it runs through the same passes (or a plain gather).
 *
 * Geometry is set per axis (gf__rs_axis_set) in source coordinates; the
 * axis then says which source span [lo, hi) it reads, so a decoder can
 * decode only that span and hand its pixels to gf__resample. */
#ifndef GF_RESAMPLE_H
#define GF_RESAMPLE_H

#include "gpufeed.h"    /* gf_interpolation */
#include "resample_c.h" /* the state: gf__rs_axis, gf__resampler */

/* Maps the source interval [x0, x0 + len) of an axis of in_n samples onto
 * out_n samples with filter mode (GF_INTERP_*). NEAREST here is
 * torchvision's crop then resize: the crop at floor(x0) (torchvision's
 * boxes are whole pixels), len resized to out_n (gf__rs_axis_set_nearest
 * with skip 0). Reuses the weights when the geometry is unchanged.
 * Returns 0 or -1 (no memory; bad geometry; unknown mode). */
int gf__rs_axis_set(gf__rs_axis *a, int in_n, double x0, double len, int out_n,
                    gf_interpolation mode);

/* NEAREST as PIL samples it: the span samples from origin (a whole pixel,
 * the crop's edge) resized to frame_n by Image.resize(NEAREST), of which
 * outputs skip .. skip + out_n - 1 are taken (a CenterCrop after a Resize:
 * skip is its offset). PIL's column i is origin + trunc(o_i), o_i a running
 * sum in double from step / 2 by step = span / frame_n: tabulated here the
 * same way, from the frame's first column, so ties round as PIL's do.
 * Returns 0 or -1 (no memory; bad geometry). */
int gf__rs_axis_set_nearest(gf__rs_axis *a, int in_n, int origin, double span, int frame_n,
                            int skip, int out_n);

/* src points at source pixel (h.lo, v.lo); rows are stride bytes apart;
 * ch interleaved uint8 channels. Writes v.out_n rows of h.out_n * ch bytes
 * to dst (rows dst_stride apart), mirrored left-right if flip. Returns 0
 * or -1 (no memory). */
int gf__resample(gf__resampler *r, const uint8_t *src, size_t stride, int ch, uint8_t *dst,
                 size_t dst_stride, int flip);

/* Bytes held by r. */
size_t gf__resampler_bytes(const gf__resampler *r);
void gf__resampler_free(gf__resampler *r);

/* Instruction sets of the resampler's kernels. All give byte-identical
 * output; the fastest the CPU has is chosen once (GF_NO_AVX2=1 in the
 * environment, read then, rules out AVX2). */
enum { GF__RS_ISA_AUTO = -1, GF__RS_ISA_C = 0, GF__RS_ISA_SSE2 = 1, GF__RS_ISA_AVX2 = 2 };

/* Test hook: forces the kernels of isa (GF__RS_ISA_AUTO: back to the
 * automatic choice) for every resampler in the process. Returns 0, or -1
 * (and changes nothing) where this build or CPU lacks isa. */
int gf__rs_force_isa(int isa);
/* The instruction set gf__resample uses now. */
int gf__rs_isa(void);

/* The float value of filter mode (BILINEAR, BICUBIC) at t, in source
 * samples at scale 1, as the fixed-point weights approximate it (for
 * tests: a float reference); its support in *support if not NULL. */
double gf__rs_filter(gf_interpolation mode, double t, double *support);

#endif
