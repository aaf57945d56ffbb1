/* torchvision 0.14's auto-augment ops (autoaugment._apply_op) and
 * ColorJitter's adjust_* as they run on a PIL image, Pillow 9.4: the same
 * bytes, so a model trained on these sees what torchvision would have
 * given it. Runs on any thread (the decode threads); pure, no allocation.
 *
 * Exactness comes from doing PIL's arithmetic, not an equivalent of it:
 *  - the affine matrix in doubles as Python computes it (torchvision's
 *    _get_inverse_affine_matrix, PIL's Image.rotate with its round(x, 15)),
 *    with libm's cos/sin/tan/atan, which CPython's math module also calls;
 *  - Geometry.c's three nearest engines, chosen as ImagingTransformAffine
 *    chooses: a pure scale (ImagingScaleAffine: running sums in double),
 *    16.16 fixed point (affine_fixed) when the corners fit, else running
 *    sums in double; bilinear through ImagingGenericTransform, per pixel;
 *  - Blend.c's float blend, Filter.c's float 3x3 SMOOTH, Convert.c's
 *    fixed-point RGB->L and its float RGB<->HSV, ImageOps' LUTs.
 * The compiler must not fuse a*b+c into an FMA (Pillow's build has none):
 * meson.build compiles this file alone with -ffp-contract=off. */
#include "augment_ops.h"

#include <math.h>
#include <string.h>

static const char *const op_names[GF__OP_COUNT] = {
    "Identity",   "ShearX", "ShearY",    "TranslateX", "TranslateY",
    "Rotate",     "Brightness", "Color", "Contrast",   "Sharpness",
    "Posterize",  "Solarize", "AutoContrast", "Equalize", "Invert",
};

const char *gf__aug_op_name(gf__aug_op op)
{
    return (unsigned)op < GF__OP_COUNT ? op_names[op] : NULL;
}

gf__aug_op gf__aug_op_from_name(const char *name)
{
    for (int i = 0; i < GF__OP_COUNT; i++)
        if (strcmp(name, op_names[i]) == 0)
            return (gf__aug_op)i;
    return GF__OP_COUNT;
}

/* ---- Python's float arithmetic ----------------------------------------- */

/* CPython's math.radians/degrees multiply by a constant folded once. */
static double py_radians(double x) { return x * (3.14159265358979323846 / 180.0); }
static double py_degrees(double x) { return x * (180.0 / 3.14159265358979323846); }

/* Python's float %: the sign of the divisor (float_rem). */
static double py_mod(double x, double m)
{
    double r = fmod(x, m);
    if (r != 0.0) {
        if ((m < 0) != (r < 0))
            r += m;
    } else {
        r = copysign(0.0, m);
    }
    return r;
}

/* Python's round(x, 15): the decimal k * 10^-15 nearest x (ties to even,
 * dtoa's mode 3), read back correctly rounded. k is found exactly in
 * integers: x = M * 2^E with M < 2^53, so x * 10^15 = M * 5^15 * 2^(E+15)
 * and M * 5^15 < 2^88 fits an unsigned __int128. Read back, k / 1e15 is
 * one IEEE division of two exact doubles (k < 2^53 since |x| <= 1 here),
 * so it is the correctly rounded value of k/10^15, as strtod gives. */
static double py_round15(double x)
{
    if (x == 0.0 || !isfinite(x) || fabs(x) > 1.0)
        return x; /* callers pass cos/sin: |x| <= 1 */
    int e;
    double f = frexp(fabs(x), &e); /* |x| = f * 2^e, f in [0.5, 1) */
    unsigned __int128 m = (unsigned __int128)(uint64_t)ldexp(f, 53);
    int shift = 53 - e - 15; /* x * 10^15 = m * 5^15 / 2^shift */
    m *= 30517578125u;       /* 5^15 */
    uint64_t k;
    if (shift <= 0) {
        k = (uint64_t)(m << -shift);
    } else if (shift >= 127) {
        k = 0; /* below half of 10^-15 */
    } else {
        unsigned __int128 q = m >> shift, rem = m - (q << shift);
        unsigned __int128 half = (unsigned __int128)1 << (shift - 1);
        if (rem > half || (rem == half && (q & 1)))
            q++;
        k = (uint64_t)q;
    }
    double r = (double)k / 1e15;
    return x < 0 ? -r : r;
}

/* ---- PIL's affine transform (Geometry.c) -------------------------------- */

#define COORD(v) ((v) < 0.0 ? -1 : ((int)(v)))
#define FLOOR(v) ((v) < 0.0 ? ((int)floor(v)) : ((int)(v)))

static inline void put_fill(uint8_t *out, int c, const uint8_t *fill)
{
    for (int b = 0; b < c; b++)
        out[b] = fill ? fill[b] : 0;
}

/* A pixel's bytes, c known small: no memcpy call per pixel. */
static inline void copy_px(uint8_t *out, const uint8_t *in, int c)
{
    if (c == 3) {
        out[0] = in[0];
        out[1] = in[1];
        out[2] = in[2];
    } else {
        out[0] = in[0];
    }
}

/* ImagingScaleAffine: a[1] == a[3] == 0. The column positions are
 * ScaleAffine's running sum, redone per row rather than tabulated (no
 * allocation): the same additions in the same order give the same values.
 * The sum is monotone, so its in-range columns are one run, as PIL's
 * xmin..xmax assumes. */
static void scale_affine(const uint8_t *in, uint8_t *out, int w, int h, int c, const double a[6],
                         const uint8_t *fill)
{
    double yo = a[5] + a[4] * 0.5;
    for (int y = 0; y < h; y++, yo += a[4]) {
        uint8_t *row = out + (size_t)y * w * c;
        int yi = COORD(yo);
        if (yi < 0 || yi >= h) {
            for (int x = 0; x < w; x++)
                put_fill(row + (size_t)x * c, c, fill);
            continue;
        }
        double xo = a[2] + a[0] * 0.5;
        for (int x = 0; x < w; x++, xo += a[0]) {
            int xi = COORD(xo);
            if (xi >= 0 && xi < w)
                copy_px(row + (size_t)x * c, in + ((size_t)yi * w + xi) * c, c);
            else
                put_fill(row + (size_t)x * c, c, fill);
        }
    }
}

static int check_fixed(const double a[6], int x, int y)
{
    return fabs(x * a[0] + y * a[1] + a[2]) < 32768.0 && fabs(x * a[3] + y * a[4] + a[5]) < 32768.0;
}

/* affine_fixed: 16.16 fixed point, rows stepped by a[1], a[4]. */
static void affine_fixed(const uint8_t *in, uint8_t *out, int w, int h, int c, const double a[6],
                         const uint8_t *fill)
{
#define FIX(v) FLOOR((v)*65536.0 + 0.5)
    int a0 = FIX(a[0]), a1 = FIX(a[1]), a3 = FIX(a[3]), a4 = FIX(a[4]);
    int a2 = FIX(a[2] + a[0] * 0.5 + a[1] * 0.5);
    int a5 = FIX(a[5] + a[3] * 0.5 + a[4] * 0.5);
#undef FIX
    for (int y = 0; y < h; y++, a2 += a1, a5 += a4) {
        uint8_t *row = out + (size_t)y * w * c;
        int xx = a2, yy = a5;
        for (int x = 0; x < w; x++, xx += a0, yy += a3) {
            int xin = xx >> 16, yin = yy >> 16; /* arithmetic shift, as PIL's gcc build */
            if (xin >= 0 && xin < w && yin >= 0 && yin < h)
                copy_px(row + (size_t)x * c, in + ((size_t)yin * w + xin) * c, c);
            else
                put_fill(row + (size_t)x * c, c, fill);
        }
    }
}

/* The double fallback of ImagingTransformAffine, for corners past 32768. */
static void affine_float(const uint8_t *in, uint8_t *out, int w, int h, int c, const double a[6],
                         const uint8_t *fill)
{
    double xo = a[2] + a[1] * 0.5 + a[0] * 0.5;
    double yo = a[5] + a[4] * 0.5 + a[3] * 0.5;
    for (int y = 0; y < h; y++, xo += a[1], yo += a[4]) {
        uint8_t *row = out + (size_t)y * w * c;
        double xx = xo, yy = yo;
        for (int x = 0; x < w; x++, xx += a[0], yy += a[3]) {
            int xin = COORD(xx), yin = COORD(yy);
            if (xin >= 0 && xin < w && yin >= 0 && yin < h)
                copy_px(row + (size_t)x * c, in + ((size_t)yin * w + xin) * c, c);
            else
                put_fill(row + (size_t)x * c, c, fill);
        }
    }
}

#define XCLIP(x) (((x) < 0) ? 0 : ((x) < w) ? (x) : w - 1)
#define YCLIP(y) (((y) < 0) ? 0 : ((y) < h) ? (y) : h - 1)

/* bilinear_filter8 / bilinear_filter32RGB at a point inside the image: its
 * four neighbours clipped to the image, truncated to a byte. */
static void bilinear_px(const uint8_t *in, int w, int h, int c, double xin, double yin,
                        uint8_t *out)
{
    xin -= 0.5;
    yin -= 0.5;
    int x0 = FLOOR(xin), y0 = FLOOR(yin);
    double dx = xin - x0, dy = yin - y0;
    const uint8_t *r0 = in + (size_t)YCLIP(y0) * w * c;
    const uint8_t *r1 = y0 + 1 >= 0 && y0 + 1 < h ? in + (size_t)(y0 + 1) * w * c : NULL;
    int c0 = XCLIP(x0) * c, c1 = XCLIP(x0 + 1) * c;
    for (int b = 0; b < c; b++) {
        double v1 = r0[c0 + b] + (r0[c1 + b] - r0[c0 + b]) * dx, v2 = v1;
        if (r1)
            v2 = r1[c0 + b] + (r1[c1 + b] - r1[c0 + b]) * dx;
        v1 = v1 + (v2 - v1) * dy;
        out[b] = (uint8_t)v1;
    }
}

/* PIL's cubic (a = -1 in its polynomial form). */
static double pil_cubic(double v1, double v2, double v3, double v4, double d)
{
    double p1 = v2, p2 = -v1 + v3, p3 = 2 * (v1 - v2) + v3 - v4, p4 = -v1 + v2 - v3 + v4;
    return p1 + d * (p2 + d * (p3 + d * p4));
}

/* bicubic_filter8 / bicubic_filter32RGB at a point inside the image: the
 * 4x4 neighbours, columns clipped to the image, rows past it taking the
 * row before's value; clipped to [0, 255] and truncated. */
static void bicubic_px(const uint8_t *in, int w, int h, int c, double xin, double yin,
                       uint8_t *out)
{
    xin -= 0.5;
    yin -= 0.5;
    int x0 = FLOOR(xin), y0 = FLOOR(yin);
    double dx = xin - x0, dy = yin - y0;
    x0--;
    y0--;
    int cols[4];
    for (int k = 0; k < 4; k++)
        cols[k] = XCLIP(x0 + k) * c;
    for (int b = 0; b < c; b++) {
        double v[4];
        const uint8_t *r = in + (size_t)YCLIP(y0) * w * c + b;
        v[0] = pil_cubic(r[cols[0]], r[cols[1]], r[cols[2]], r[cols[3]], dx);
        for (int k = 1; k < 4; k++) {
            if (y0 + k >= 0 && y0 + k < h) {
                r = in + (size_t)(y0 + k) * w * c + b;
                v[k] = pil_cubic(r[cols[0]], r[cols[1]], r[cols[2]], r[cols[3]], dx);
            } else {
                v[k] = v[k - 1];
            }
        }
        double o = pil_cubic(v[0], v[1], v[2], v[3], dy);
        out[b] = o <= 0.0 ? 0 : o >= 255.0 ? 255 : (uint8_t)o;
    }
}
#undef XCLIP
#undef YCLIP

/* ImagingGenericTransform with affine_transform and a filter: each output
 * pixel's source point computed afresh; outside the image, the fill. */
static void affine_filtered(const uint8_t *in, uint8_t *out, int w, int h, int c,
                            const double a[6], const uint8_t *fill, gf_interpolation interp)
{
    for (int y = 0; y < h; y++) {
        uint8_t *row = out + (size_t)y * w * c;
        for (int x = 0; x < w; x++) {
            double xi = x + 0.5, yi = y + 0.5;
            double xin = a[0] * xi + a[1] * yi + a[2];
            double yin = a[3] * xi + a[4] * yi + a[5];
            uint8_t *px = row + (size_t)x * c;
            if (xin < 0.0 || xin >= w || yin < 0.0 || yin >= h)
                put_fill(px, c, fill);
            else if (interp == GF_INTERP_BICUBIC)
                bicubic_px(in, w, h, c, xin, yin, px);
            else
                bilinear_px(in, w, h, c, xin, yin, px);
        }
    }
}

/* Image.transform(size, AFFINE, a, resample, fillcolor) onto the same size:
 * ImagingTransformAffine's choice of engine. */
static void pil_affine(const uint8_t *in, uint8_t *out, int w, int h, int c, const double a[6],
                       gf_interpolation interp, const uint8_t *fill)
{
    if (interp == GF_INTERP_BILINEAR || interp == GF_INTERP_BICUBIC)
        affine_filtered(in, out, w, h, c, a, fill, interp);
    else if (a[1] == 0 && a[3] == 0)
        scale_affine(in, out, w, h, c, a, fill);
    else if (check_fixed(a, 0, 0) && check_fixed(a, w, h) && check_fixed(a, 0, h) &&
             check_fixed(a, w, 0))
        affine_fixed(in, out, w, h, c, a, fill);
    else
        affine_float(in, out, w, h, c, a, fill);
}

/* torchvision's _get_inverse_affine_matrix at scale 1, as Python evaluates
 * it; centre and translation already as Python's (-cx - tx) would see
 * them (ints or floats alike: the products come out the same). */
static void inverse_affine(double cx, double cy, double angle, double tx, double ty, double shear_x,
                           double shear_y, double m[6])
{
    double rot = py_radians(angle), sx = py_radians(shear_x), sy = py_radians(shear_y);
    double a = cos(rot - sy) / cos(sy);
    double b = -cos(rot - sy) * tan(sx) / cos(sy) - sin(rot);
    double c = sin(rot - sy) / cos(sy);
    double d = -sin(rot - sy) * tan(sx) / cos(sy) + cos(rot);
    m[0] = d / 1.0;
    m[1] = -b / 1.0;
    m[2] = 0.0;
    m[3] = -c / 1.0;
    m[4] = a / 1.0;
    m[5] = 0.0;
    m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
    m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
    m[2] += cx;
    m[5] += cy;
}

/* Transpose.ROTATE_90/180/270 (Geometry.c): PIL's rotate takes these for
 * 180 always and for 90 and 270 when the image is square. */
static void transpose(const uint8_t *in, uint8_t *out, int w, int h, int c, int quarter_turns)
{
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            size_t to;
            if (quarter_turns == 1) /* ROTATE_90: out[w-1-x][y], out is h wide */
                to = (size_t)(w - 1 - x) * h + y;
            else if (quarter_turns == 2)
                to = (size_t)(h - 1 - y) * w + (w - 1 - x);
            else /* ROTATE_270: out[x][h-1-y] */
                to = (size_t)x * h + (h - 1 - y);
            copy_px(out + to * c, in + ((size_t)y * w + x) * c, c);
        }
}

/* PIL's Image.rotate(angle, resample, expand=False, center=None, fillcolor). */
static void pil_rotate(const uint8_t *in, uint8_t *out, int w, int h, int c, double angle,
                       gf_interpolation interp, const uint8_t *fill)
{
    angle = py_mod(angle, 360.0);
    if (angle == 0) {
        memcpy(out, in, (size_t)w * h * c);
        return;
    }
    if (angle == 180) {
        transpose(in, out, w, h, c, 2);
        return;
    }
    if ((angle == 90 || angle == 270) && w == h) {
        transpose(in, out, w, h, c, angle == 90 ? 1 : 3);
        return;
    }
    double cx = w / 2.0, cy = h / 2.0;
    angle = -py_radians(angle);
    double m[6] = {py_round15(cos(angle)), py_round15(sin(angle)), 0.0,
                   py_round15(-sin(angle)), py_round15(cos(angle)), 0.0};
    double x = -cx - 0, y = -cy - 0;
    m[2] = m[0] * x + m[1] * y + m[2];
    m[5] = m[3] * x + m[4] * y + m[5];
    m[2] += cx;
    m[5] += cy;
    pil_affine(in, out, w, h, c, m, interp, fill);
}

/* ---- Blend.c, Filter.c, Convert.c --------------------------------------- */

/* ImagingBlend's pixel: im1 + alpha * (im2 - im1) in float, truncated; past
 * [0, 1] clipped. alpha is the float PIL narrows the factor to. */
static uint8_t blend_px(int in1, int in2, float alpha)
{
    if (alpha == 0.0)
        return (uint8_t)in1;
    if (alpha == 1.0)
        return (uint8_t)in2;
    if (alpha >= 0 && alpha <= 1.0)
        return (uint8_t)(in1 + alpha * (in2 - in1));
    float temp = (float)(in1 + alpha * (in2 - in1));
    if (temp <= 0.0)
        return 0;
    if (temp >= 255.0)
        return 255;
    return (uint8_t)temp;
}

/* Image.blend(constant grey, img, factor): one LUT. */
static void blend_from_constant(uint8_t *img, size_t n, int degenerate, double factor)
{
    uint8_t lut[256];
    for (int v = 0; v < 256; v++)
        lut[v] = blend_px(degenerate, v, (float)factor);
    for (size_t i = 0; i < n; i++)
        img[i] = lut[img[i]];
}

/* Image.blend(degenerate, img, factor), degenerate a same-sized image.
 * alpha * d is tabulated: the same float product, once per difference. */
static void blend_from_image(uint8_t *img, const uint8_t *degenerate, size_t n, double factor)
{
    float alpha = (float)factor;
    if (alpha == 0.0) {
        memcpy(img, degenerate, n);
        return;
    }
    if (alpha == 1.0)
        return;
    float prod[511];
    for (int d = -255; d <= 255; d++)
        prod[d + 255] = alpha * d;
    int clip = !(alpha >= 0 && alpha <= 1.0);
    for (size_t i = 0; i < n; i++) {
        int a = degenerate[i];
        float v = a + prod[img[i] - a + 255];
        img[i] = !clip ? (uint8_t)v : v <= 0.0 ? 0 : v >= 255.0 ? 255 : (uint8_t)v;
    }
}

/* rgb2l: ITU-R 601-2 in 16.16 fixed point. */
static uint8_t luma(const uint8_t *p)
{
    return (uint8_t)((p[0] * 19595 + p[1] * 38470 + p[2] * 7471 + 0x8000) >> 16);
}

/* ImagingFilter3x3 with ImageFilter.SMOOTH (1 1 1 / 1 5 1 / 1 1 1, / 13)
 * into out: float sums from 0.5, rows y+1, y, y-1 in that order (the
 * kernel is symmetric; the order is kept for the float sums), truncated;
 * the border rows and columns copied. */
static void smooth(const uint8_t *in, uint8_t *out, int w, int h, int c)
{
    if (w < 3 || h < 3) {
        memcpy(out, in, (size_t)w * h * c);
        return;
    }
    const float k1 = 1.0f / 13.0f, k5 = 5.0f / 13.0f;
    const float offset = (float)(0.0f + 0.5); /* PIL: offset += 0.5 */
    size_t stride = (size_t)w * c;
    memcpy(out, in, stride);
    for (int y = 1; y < h - 1; y++) {
        const uint8_t *up = in + (y - 1) * stride, *mid = in + y * stride, *dn = in + (y + 1) * stride;
        uint8_t *o = out + y * stride;
        memcpy(o, mid, c);
        for (int x = c; x < (w - 1) * c; x++) {
            float ss = offset;
            ss += (float)dn[x - c] * k1 + (float)dn[x] * k1 + (float)dn[x + c] * k1;
            ss += (float)mid[x - c] * k1 + (float)mid[x] * k5 + (float)mid[x + c] * k1;
            ss += (float)up[x - c] * k1 + (float)up[x] * k1 + (float)up[x + c] * k1;
            o[x] = ss <= 0.0 ? 0 : ss >= 255.0 ? 255 : (uint8_t)ss;
        }
        memcpy(o + (w - 1) * c, mid + (w - 1) * c, c);
    }
    memcpy(out + (h - 1) * stride, in + (h - 1) * stride, stride);
}

/* rgb2hsv_row (colorsys in floats; the mixed float/double of the C kept). */
static void rgb_to_hsv(const uint8_t *in, uint8_t *out)
{
    int r = in[0], g = in[1], b = in[2];
    int maxc = r > (g > b ? g : b) ? r : (g > b ? g : b);
    int minc = r < (g < b ? g : b) ? r : (g < b ? g : b);
    out[2] = (uint8_t)maxc;
    if (minc == maxc) {
        out[0] = out[1] = 0;
        return;
    }
    float h, s, rc, gc, bc, cr;
    cr = (float)(maxc - minc);
    s = cr / (float)maxc;
    rc = ((float)(maxc - r)) / cr;
    gc = ((float)(maxc - g)) / cr;
    bc = ((float)(maxc - b)) / cr;
    if (r == maxc)
        h = bc - gc;
    else if (g == maxc)
        h = 2.0 + rc - bc;
    else
        h = 4.0 + gc - rc;
    h = fmod((h / 6.0 + 1.0), 1.0);
    int ih = (int)(h * 255.0), is = (int)(s * 255.0);
    out[0] = (uint8_t)(ih <= 0 ? 0 : ih < 256 ? ih : 255);
    out[1] = (uint8_t)(is <= 0 ? 0 : is < 256 ? is : 255);
}

/* hsv2rgb, the same way. */
static void hsv_to_rgb(const uint8_t *in, uint8_t *out)
{
    int hh = in[0], s = in[1], v = in[2];
    if (s == 0) {
        out[0] = out[1] = out[2] = (uint8_t)v;
        return;
    }
    int i = floor((float)hh * 6.0 / 255.0);
    float f = (float)hh * 6.0 / 255.0 - (float)i;
    float fs = ((float)s) / 255.0;
    int p = round((float)v * (1.0 - fs));
    int q = round((float)v * (1.0 - fs * f));
    int t = round((float)v * (1.0 - fs * (1.0 - f)));
    uint8_t up = (uint8_t)(p <= 0 ? 0 : p < 256 ? p : 255);
    uint8_t uq = (uint8_t)(q <= 0 ? 0 : q < 256 ? q : 255);
    uint8_t ut = (uint8_t)(t <= 0 ? 0 : t < 256 ? t : 255);
    uint8_t uv = (uint8_t)v;
    switch (i % 6) {
    case 0: out[0] = uv, out[1] = ut, out[2] = up; break;
    case 1: out[0] = uq, out[1] = uv, out[2] = up; break;
    case 2: out[0] = up, out[1] = uv, out[2] = ut; break;
    case 3: out[0] = up, out[1] = uq, out[2] = uv; break;
    case 4: out[0] = ut, out[1] = up, out[2] = uv; break;
    case 5: out[0] = uv, out[1] = up, out[2] = uq; break;
    }
}

/* ---- ColorJitter's steps ------------------------------------------------ */

void gf__adjust_brightness(uint8_t *img, int w, int h, int c, double factor)
{
    blend_from_constant(img, (size_t)w * h * c, 0, factor);
}

/* ImageEnhance.Contrast: blended with the grey of the image's mean luma,
 * int(sum / count + 0.5) as ImageStat gives it (the sum exact in double). */
void gf__adjust_contrast(uint8_t *img, int w, int h, int c, double factor)
{
    size_t n = (size_t)w * h;
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += c == 3 ? luma(img + i * 3) : img[i];
    int mean = (int)((double)sum / (double)n + 0.5);
    blend_from_constant(img, n * c, mean, factor);
}

/* ImageEnhance.Color: blended with the image's own luma (grey: itself,
 * so nothing changes). */
void gf__adjust_saturation(uint8_t *img, int w, int h, int c, double factor)
{
    if (c != 3)
        return;
    float alpha = (float)factor;
    if (alpha == 1.0)
        return;
    float prod[511];
    for (int d = -255; d <= 255; d++)
        prod[d + 255] = alpha * d;
    int clip = !(alpha >= 0 && alpha <= 1.0);
    size_t n = (size_t)w * h;
    for (size_t i = 0; i < n; i++) {
        uint8_t *p = img + i * 3;
        int grey = luma(p);
        for (int b = 0; b < 3; b++) {
            if (alpha == 0.0) {
                p[b] = (uint8_t)grey;
                continue;
            }
            float v = grey + prod[p[b] - grey + 255];
            p[b] = !clip ? (uint8_t)v : v <= 0.0 ? 0 : v >= 255.0 ? 255 : (uint8_t)v;
        }
    }
}

/* functional_pil.adjust_hue: to HSV, hue += np.uint8(hue_factor * 255)
 * (numpy's cast: truncated to an int, then modulo 256), back to RGB. */
void gf__adjust_hue(uint8_t *img, int w, int h, int c, double hue_factor)
{
    if (c != 3)
        return;
    uint8_t shift = (uint8_t)(int)(hue_factor * 255);
    size_t n = (size_t)w * h;
    for (size_t i = 0; i < n; i++) {
        uint8_t hsv[3];
        rgb_to_hsv(img + i * 3, hsv);
        hsv[0] = (uint8_t)(hsv[0] + shift);
        hsv_to_rgb(hsv, img + i * 3);
    }
}

/* ---- The ops ------------------------------------------------------------ */

static void apply_lut(uint8_t *img, size_t n, int c, const uint8_t lut[][256])
{
    for (size_t i = 0; i < n; i++)
        for (int b = 0; b < c; b++)
            img[i * c + b] = lut[b][img[i * c + b]];
}

static void histogram(const uint8_t *img, size_t n, int c, uint32_t hist[][256])
{
    memset(hist, 0, sizeof(uint32_t) * 256 * (size_t)c);
    for (size_t i = 0; i < n; i++)
        for (int b = 0; b < c; b++)
            hist[b][img[i * c + b]]++;
}

/* ImageOps.autocontrast(cutoff=0): each band stretched from its lowest to
 * its highest value present, the LUT in Python's doubles. */
static void autocontrast(uint8_t *img, size_t n, int c)
{
    uint32_t hist[3][256];
    uint8_t lut[3][256];
    histogram(img, n, c, hist);
    for (int b = 0; b < c; b++) {
        int lo = 0, hi = 255;
        while (lo < 255 && !hist[b][lo])
            lo++;
        while (hi > 0 && !hist[b][hi])
            hi--;
        if (hi <= lo) {
            for (int i = 0; i < 256; i++)
                lut[b][i] = (uint8_t)i;
            continue;
        }
        double scale = 255.0 / (hi - lo), offset = -lo * scale;
        for (int i = 0; i < 256; i++) {
            int v = (int)(i * scale + offset);
            lut[b][i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
    }
    apply_lut(img, n, c, lut);
}

/* ImageOps.equalize: integer steps of the cumulative histogram, the last
 * value present left out of the step. */
static void equalize(uint8_t *img, size_t n, int c)
{
    uint32_t hist[3][256];
    uint8_t lut[3][256];
    histogram(img, n, c, hist);
    for (int b = 0; b < c; b++) {
        uint64_t total = 0, last = 0;
        int present = 0;
        for (int i = 0; i < 256; i++)
            if (hist[b][i]) {
                total += hist[b][i];
                last = hist[b][i];
                present++;
            }
        uint64_t step = present <= 1 ? 0 : (total - last) / 255;
        uint64_t acc = step / 2;
        for (int i = 0; i < 256; i++) {
            /* acc / step reaches 256 where the last value present is
             * rare: Image.point's getlist clips its LUT with CLIP8 */
            uint64_t v = step ? acc / step : (uint64_t)i;
            lut[b][i] = (uint8_t)(v > 255 ? 255 : v);
            acc += hist[b][i];
        }
    }
    apply_lut(img, n, c, lut);
}

static void point_lut(uint8_t *img, size_t n, const uint8_t lut[256])
{
    for (size_t i = 0; i < n; i++)
        img[i] = lut[img[i]];
}

void gf__aug_apply(gf__aug_op op, double magnitude, uint8_t *img, int w, int h, int c,
                   gf_interpolation interp, const uint8_t *fill, uint8_t *scratch)
{
    size_t n = (size_t)w * h, bytes = n * c;
    uint8_t lut[256];
    double m[6];
    switch (op) {
    case GF__OP_SHEAR_X:
    case GF__OP_SHEAR_Y: {
        /* shear in degrees, then back to radians, as torchvision does */
        double shear = py_degrees(atan(magnitude));
        memcpy(scratch, img, bytes);
        inverse_affine(0, 0, 0.0, 0, 0, op == GF__OP_SHEAR_X ? shear : 0.0,
                       op == GF__OP_SHEAR_Y ? shear : 0.0, m);
        pil_affine(scratch, img, w, h, c, m, interp, fill);
        break;
    }
    case GF__OP_TRANSLATE_X:
    case GF__OP_TRANSLATE_Y: {
        double t = trunc(magnitude); /* int(magnitude) */
        memcpy(scratch, img, bytes);
        inverse_affine(w * 0.5, h * 0.5, 0.0, op == GF__OP_TRANSLATE_X ? t : 0,
                       op == GF__OP_TRANSLATE_Y ? t : 0, 0.0, 0.0, m);
        pil_affine(scratch, img, w, h, c, m, interp, fill);
        break;
    }
    case GF__OP_ROTATE:
        memcpy(scratch, img, bytes);
        pil_rotate(scratch, img, w, h, c, magnitude, interp, fill);
        break;
    case GF__OP_BRIGHTNESS:
        gf__adjust_brightness(img, w, h, c, 1.0 + magnitude);
        break;
    case GF__OP_COLOR:
        gf__adjust_saturation(img, w, h, c, 1.0 + magnitude);
        break;
    case GF__OP_CONTRAST:
        gf__adjust_contrast(img, w, h, c, 1.0 + magnitude);
        break;
    case GF__OP_SHARPNESS:
        smooth(img, scratch, w, h, c);
        blend_from_image(img, scratch, bytes, 1.0 + magnitude);
        break;
    case GF__OP_POSTERIZE: {
        int bits = (int)magnitude; /* 0..8: ImageOps.posterize's range */
        bits = bits < 0 ? 0 : bits > 8 ? 8 : bits;
        int mask = ~((1 << (8 - bits)) - 1);
        for (int i = 0; i < 256; i++)
            lut[i] = (uint8_t)(i & mask);
        point_lut(img, bytes, lut);
        break;
    }
    case GF__OP_SOLARIZE:
        for (int i = 0; i < 256; i++)
            lut[i] = (uint8_t)(i < magnitude ? i : 255 - i);
        point_lut(img, bytes, lut);
        break;
    case GF__OP_AUTOCONTRAST:
        autocontrast(img, n, c);
        break;
    case GF__OP_EQUALIZE:
        equalize(img, n, c);
        break;
    case GF__OP_INVERT:
        for (size_t i = 0; i < bytes; i++)
            img[i] = (uint8_t)(255 - img[i]);
        break;
    case GF__OP_IDENTITY:
    case GF__OP_COUNT:
        break;
    }
}
