/* Detection boxes moved with their image (boxes.c): a leaf, pure
 * functions on the caller's buffers, any thread, nothing printed, no
 * allocation. The image's crop is gf__crop (decoder.h): a source
 * rectangle resampled to out_w x out_h, mirrored when flip; the boxes get
 * torchvision's v2 box kernels for the same transform (crop_bounding_boxes,
 * resize_bounding_boxes, horizontal_flip_bounding_boxes), held to them by
 * tests/boxes_torchvision.py. */
#ifndef GF_BOXES_H
#define GF_BOXES_H

#include "decoder.h"

#include <stddef.h>
#include <stdint.h>

/* Boxes in the stored image's pixels, n rows of cols (4 or 5: x1 y1 x2 y2
 * [class]) as float64, moved as the image is by crop c (its source
 * rectangle, scaled to out_w x out_h, mirrored when c->flip), in
 * torchvision's order: translated by (c->x, c->y), clipped to the crop
 * [0, c->w] x [0, c->h], scaled by out_w / c->w and out_h / c->h (clipped
 * to [0, out_w] x [0, out_h] again against rounding), mirrored
 * (x1' = out_w - x2, x2' = out_w - x1). Rows left with no area in the
 * float32 values written (x2 <= x1 or y2 <= y1) are dropped with their
 * class; the others are written in order as float32 to out (room for n
 * rows of cols), the class converted as it is. Returns how many rows were
 * kept, or -1 with why: a value not finite (naming the row and column), a
 * class beyond float32, cols not 4 or 5, out_w or out_h < 1, a crop not
 * finite or of no size. */
long gf__boxes_apply(const gf__crop *c, int out_w, int out_h, const double *in, size_t n, int cols,
                     float *out, char *why, size_t why_len);

/* As gf__boxes_apply, into float64 rows: a float64 member kept float64
 * (gpufeed prepare's), no class bound. */
long gf__boxes_apply64(const gf__crop *c, int out_w, int out_h, const double *in, size_t n,
                       int cols, double *out, char *why, size_t why_len);

/* n_values elements of dtype at data (host byte order, any alignment: a
 * .npy's payload) as double into out. FLOAT32, FLOAT64, INT32, INT64;
 * 0, or -1 for another dtype. */
int gf__boxes_load(const uint8_t *data, gf_dtype dtype, size_t n_values, double *out);

#endif
