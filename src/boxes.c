/* Detection boxes moved with their image's crop, scale and flip: what
 * torchvision's v2 kernels do to XYXY boxes under RandomResizedCrop (or
 * Resize + CenterCrop) and RandomHorizontalFlip, in their order:
 *   crop_bounding_boxes     x - left, y - top, clamped to the crop canvas
 *   resize_bounding_boxes   x * (out_w / w), y * (out_h / h)
 *   horizontal_flip_...     x1' = out_w - x2, x2' = out_w - x1
 * then rows with no area dropped with their class. The arithmetic is in
 * double (torchvision's in the boxes' dtype, its resize ratios rounded to
 * float32): within 1e-3 px of it, tests/boxes_torchvision.py.
 * Pure functions, any thread: nothing printed, nothing allocated. */
#include "boxes.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <string.h>

static const char *const col_names[5] = {"x1", "y1", "x2", "y2", "class"};

static double clamp(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* gf__boxes_apply into float32 rows (out32) or float64 ones (out64): the
 * same arithmetic, in double, rounded at the end to what is stored. */
static long apply(const gf__crop *c, int out_w, int out_h, const double *in, size_t n, int cols,
                  float *out32, double *out64, char *why, size_t why_len)
{
    if (cols != 4 && cols != 5) {
        gf__why(why, why_len, "boxes have %d columns, not 4 (x1 y1 x2 y2) or 5 (and a class)",
                cols);
        return -1;
    }
    if (out_w < 1 || out_h < 1) {
        gf__why(why, why_len, "boxes: output size %dx%d", out_w, out_h);
        return -1;
    }
    if (!isfinite(c->x) || !isfinite(c->y) || !(c->w > 0) || !(c->h > 0) || !isfinite(c->w) ||
        !isfinite(c->h)) {
        gf__why(why, why_len, "boxes: crop %g,%g %gx%g", c->x, c->y, c->w, c->h);
        return -1;
    }
    if (n > (size_t)LONG_MAX) {
        gf__why(why, why_len, "boxes: %zu rows", n);
        return -1;
    }
    const double W = out_w, H = out_h, sx = W / c->w, sy = H / c->h;
    long kept = 0;
    for (size_t i = 0; i < n; i++) {
        const double *r = in + i * (size_t)cols;
        for (int j = 0; j < cols; j++)
            if (!isfinite(r[j])) {
                gf__why(why, why_len, "boxes row %zu: %s is %g", i, col_names[j], r[j]);
                return -1;
            }
        if (out32 && cols == 5 && fabs(r[4]) > FLT_MAX) {
            gf__why(why, why_len, "boxes row %zu: class %g is beyond float32", i, r[4]);
            return -1;
        }
        /* crop: translate, clamp to the crop canvas; resize: scale (and
         * clamp again, a product may round past the edge) */
        double x1 = fmin(clamp(r[0] - c->x, 0, c->w) * sx, W);
        double y1 = fmin(clamp(r[1] - c->y, 0, c->h) * sy, H);
        double x2 = fmin(clamp(r[2] - c->x, 0, c->w) * sx, W);
        double y2 = fmin(clamp(r[3] - c->y, 0, c->h) * sy, H);
        if (c->flip) {
            double f1 = W - x2;
            x2 = W - x1;
            x1 = f1;
        }
        /* no area as written: what the caller gets has x2 > x1, y2 > y1 */
        if (out64) {
            double o[5] = {x1, y1, x2, y2, cols == 5 ? r[4] : 0};
            if (!(o[2] > o[0]) || !(o[3] > o[1]))
                continue;
            memcpy(out64 + (size_t)kept * (size_t)cols, o, sizeof(double) * (size_t)cols);
        } else {
            float o[5] = {(float)x1, (float)y1, (float)x2, (float)y2,
                          cols == 5 ? (float)r[4] : 0};
            if (!(o[2] > o[0]) || !(o[3] > o[1]))
                continue;
            memcpy(out32 + (size_t)kept * (size_t)cols, o, sizeof(float) * (size_t)cols);
        }
        kept++;
    }
    return kept;
}

long gf__boxes_apply(const gf__crop *c, int out_w, int out_h, const double *in, size_t n, int cols,
                     float *out, char *why, size_t why_len)
{
    return apply(c, out_w, out_h, in, n, cols, out, NULL, why, why_len);
}

long gf__boxes_apply64(const gf__crop *c, int out_w, int out_h, const double *in, size_t n,
                       int cols, double *out, char *why, size_t why_len)
{
    return apply(c, out_w, out_h, in, n, cols, NULL, out, why, why_len);
}

int gf__boxes_load(const uint8_t *data, gf_dtype dtype, size_t n_values, double *out)
{
    if (dtype != GF_DTYPE_FLOAT32 && dtype != GF_DTYPE_FLOAT64 && dtype != GF_DTYPE_INT32 &&
        dtype != GF_DTYPE_INT64)
        return -1;
    for (size_t i = 0; i < n_values; i++) {
        union {
            float f;
            double d;
            int32_t i32;
            int64_t i64;
        } v;
        if (dtype == GF_DTYPE_FLOAT32 || dtype == GF_DTYPE_INT32)
            memcpy(&v, data + 4 * i, 4);
        else
            memcpy(&v, data + 8 * i, 8);
        out[i] = dtype == GF_DTYPE_FLOAT32 ? (double)v.f
                 : dtype == GF_DTYPE_FLOAT64 ? v.d
                 : dtype == GF_DTYPE_INT32   ? (double)v.i32
                                             : (double)v.i64;
    }
    return 0;
}
