/* A NumPy .npy member's header (npy.c): the array's dtype and shape and
 * where its data starts, read from the member's bytes in memory (a
 * WebDataset KEY.latent.npy or KEY.boxes.npy). Hostile input is the
 * norm here: the header is scanned once, in bounds, allocating nothing,
 * and a member is taken only when its data is exactly the bytes its
 * shape claims. A leaf: the caller's thread, no state. */
#ifndef GF_NPY_H
#define GF_NPY_H

#include "gpufeed.h" /* gf_dtype, GF_FIELD_DIMS_MAX, the error codes */

#include <stddef.h>
#include <stdint.h>

typedef struct gf__npy {
    gf_dtype dtype;
    int ndim;                             /* 0 .. GF_FIELD_DIMS_MAX - 1 */
    int64_t shape[GF_FIELD_DIMS_MAX - 1]; /* the batch takes the first dim */
    size_t header_bytes;                  /* where the data starts */
    uint64_t data_bytes;                  /* elements * element size */
} gf__npy;

/* Reads the header of the .npy member p[0, n): format version 1.0, 2.0
 * or 3.0, a C-order array of one of the dtypes below, little-endian, at
 * most GF_FIELD_DIMS_MAX - 1 dimensions, data exactly n - header_bytes.
 * Returns 0 with *out filled (written only then), or with why saying
 * what is wrong, without a path (the caller prefixes the member's name):
 *   GF_ECORRUPT  not a .npy, a header that is no such dict as NumPy
 *                writes, or data not the bytes the shape claims;
 *   GF_EFORMAT   a valid .npy this does not read: another version, dtype
 *                or byte order, Fortran order, too many dimensions.
 * dtypes read: '|u1' uint8, '<i4' int32, '<i8' int64, '<f2' float16,
 * '<f4' float32, '<f8' float64. O(n) at most, no allocation. */
int gf__npy_parse(const uint8_t *p, size_t n, gf__npy *out, char *why, size_t why_len);

/* t's name for messages ("uint8", "int32", "float16", ...); "?" for an
 * unknown one. */
const char *gf__npy_dtype_name(gf_dtype t);

/* a's shape as Python writes a tuple, "()", "(3,)", "(4, 32, 32)", into
 * out[out_len] (cut short if it does not fit; nothing if out_len is 0):
 * for messages that name two shapes. */
void gf__npy_shape_text(const gf__npy *a, char *out, size_t out_len);

#endif
