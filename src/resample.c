/* Separable antialiased resampler, fixed point: the weights
 * (gf__rs_axis_set: PIL's triangle and bicubic filters, and NEAREST's
 * one-tap tables) and the choice of kernels (isa_init, gf__resample);
 * the kernels are resample_c.c (portable, below the others: the SSE2
 * path's tails use it), resample_sse2.c and resample_avx2.c. Run on the decode threads, each with its own
 * gf__resampler; the kernel choice is process-wide, made once.
 *
 * Vertical pass first, then horizontal: the vertical pass is a plain
 * multiply-add over whole rows (gcc vectorizes it), and doing it first
 * means the horizontal pass, the one with a per-output gather, runs on
 * out_h rows instead of the (larger) source span's rows. The mirror flip
 * is folded into the horizontal pass by writing its outputs right to left.
 *
 * Precision: weights are int16 with 14 fractional bits summing to exactly
 * 1 << 14. The triangle's are never negative; the bicubic's lobes are, so
 * a pass can overshoot [0, 255]: the vertical pass's output is clamped to
 * [0, 255 << 7], as PIL clips between its passes (a no-op for the
 * triangle), and an output whose weights' magnitudes sum past 3 << 14
 * (only a centre far outside the image) takes its nearest sample. So
 *   vertical:   |sum(w * px)| <= 3 * 255 << 14, kept with 7 fractional
 *               bits, clamped to [0, 32640] (fits int16),
 *   horizontal: |sum(w * tmp)| <= 3 * 32640 << 14 < 2^31, rounded to 8 bits.
 * At scale 1 on integer-aligned crops every output has one tap of weight
 * 1 << 14 (the bicubic's are 0 at the other whole-pixel offsets), and so
 * has every NEAREST output: both passes are exact. */
#include "resample.h"

#include "grow.h"

#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#define ONE (1 << GF__RS_BITS)
#define MAX_ABS_SUM (3 * ONE) /* of an output's weights: the bound above */

_Static_assert((int64_t)MAX_ABS_SUM * 255 + (1 << (VSHIFT - 1)) < ((int64_t)1 << 31),
               "the vertical pass's sums fit int32");
_Static_assert(GF__RS_TMP_MAX <= INT16_MAX, "the vertical pass's output fits int16");
_Static_assert((int64_t)MAX_ABS_SUM * GF__RS_TMP_MAX + (1 << (HSHIFT - 1)) < ((int64_t)1 << 31),
               "the horizontal pass's sums fit int32");

static double triangle(double t)
{
    t = fabs(t);
    return t < 1.0 ? 1.0 - t : 0.0;
}

/* PIL's bicubic_filter (Resample.c): Keys' cubic convolution, a = -0.5. */
static double bicubic(double t)
{
    const double a = -0.5;
    t = fabs(t);
    if (t < 1.0)
        return ((a + 2.0) * t - (a + 3.0)) * t * t + 1;
    if (t < 2.0)
        return (((t - 5) * t + 8) * t - 4) * a;
    return 0.0;
}

typedef struct filter {
    double (*at)(double t);
    double support; /* at scale 1, in source samples */
} filter;

static const filter filters[] = {
    [GF_INTERP_BILINEAR] = {triangle, 1.0},
    [GF_INTERP_BICUBIC] = {bicubic, 2.0},
};

double gf__rs_filter(gf_interpolation mode, double t, double *support)
{
    const filter *f = &filters[mode == GF_INTERP_BICUBIC ? GF_INTERP_BICUBIC : GF_INTERP_BILINEAR];
    if (support)
        *support = f->support;
    return f->at(t);
}

/* Source range [lo, hi) of output i, as PIL computes it. */
static void tap_range(int in_n, double x0, double scale, double support, int i, int *lo,
                      int *hi)
{
    double center = x0 + (i + 0.5) * scale;
    double a = floor(center - support + 0.5), b = floor(center + support + 0.5);
    a = a < 0 ? 0 : a;
    b = b > in_n ? in_n : b;
    if (b <= a) { /* centre outside the image: nearest sample */
        double c = floor(center);
        a = c < 0 ? 0 : c > in_n - 1 ? in_n - 1 : c;
        b = a + 1;
    }
    *lo = (int)a;
    *hi = (int)b;
}

static int same_geometry(const gf__rs_axis *a, int in_n, double x0, double len, int out_n,
                         int mode, int frame_n, int skip)
{
    return a->valid && a->in_n == in_n && a->out_n == out_n && a->x0 == x0 && a->len == len &&
           a->mode == mode && a->frame_n == frame_n && a->skip == skip;
}

static void set_geometry(gf__rs_axis *a, int in_n, double x0, double len, int out_n, int mode,
                         int frame_n, int skip)
{
    a->in_n = in_n;
    a->out_n = out_n;
    a->x0 = x0;
    a->len = len;
    a->mode = mode;
    a->frame_n = frame_n;
    a->skip = skip;
    a->nearest = mode == GF_INTERP_NEAREST;
    a->valid = 1;
}

/* Pass 2 of the filters and NEAREST's only one: each output's `maxtaps`
 * row (start[] absolute) restrided to `taps`, with each output's window
 * shifted left (weights moved right) where it would run past the span's
 * end. The weights so dropped are the zero padding: count <= span - rel. */
static void restride(gf__rs_axis *a, int out_n, int maxtaps, int lo_all, int hi_all, int taps)
{
    int span = hi_all - lo_all;
    int16_t *row = a->w + (size_t)out_n * maxtaps; /* scratch past the rows */
    for (int i = 0; i < out_n; i++) {
        const int16_t *w = a->w + (size_t)i * maxtaps;
        int rel = a->start[i] - lo_all;
        int shift = rel + taps > span ? rel + taps - span : 0;
        for (int k = 0; k < taps; k++)
            row[k] = k >= shift ? w[k - shift] : 0;
        a->start[i] = rel - shift;
        assert(a->start[i] >= 0 && a->start[i] + taps <= span);
        memcpy(a->w + (size_t)i * taps, row, (size_t)taps * sizeof *row);
    }
    a->lo = lo_all;
    a->hi = hi_all;
    a->taps = taps;
}

int gf__rs_axis_set_nearest(gf__rs_axis *a, int in_n, int origin, double span, int frame_n,
                            int skip, int out_n)
{
    if (same_geometry(a, in_n, origin, span, out_n, GF_INTERP_NEAREST, frame_n, skip))
        return 0;
    a->valid = 0;
    if (in_n <= 0 || out_n <= 0 || frame_n <= 0 || skip < 0 || !(span > 0) ||
        !isfinite(span) || span > 2.0 * in_n + 2 || origin < 0 || origin >= in_n ||
        (int64_t)skip + out_n > 2 * (int64_t)frame_n)
        return -1;
    if (GF__GROW(&a->start, &a->cap_out, (size_t)out_n, 64) ||
        GF__GROW(&a->w, &a->cap_w, (size_t)out_n + 1, 64))
        return -1;
    /* _resize(): a[0] = (double)(box[2] - box[0]) / xsize, the box in C
     * floats; ImagingScaleAffine: xo = a[2] + a[0] * 0.5, then xo += a[0]
     * a column, COORD(xo) = xo < 0 ? -1 : (int)xo. The crop before it is
     * torchvision's (whole pixels): origin is added after. */
    double step = (double)(float)span / frame_n, o = step * 0.5;
    for (int k = 0; k < skip; k++)
        o += step;
    int lo_all = in_n, hi_all = 0;
    for (int i = 0; i < out_n; i++, o += step) {
        /* PIL leaves a column past the image black (only the running sum's
         * rounding reaches one from a box inside it): its edge instead */
        int64_t x = origin + (int64_t)(o < (double)in_n ? o : in_n);
        x = x < in_n ? x : in_n - 1;
        a->start[i] = (int32_t)x;
        a->w[i] = ONE;
        lo_all = x < lo_all ? (int)x : lo_all;
        hi_all = x + 1 > hi_all ? (int)x + 1 : hi_all;
    }
    restride(a, out_n, 1, lo_all, hi_all, 1);
    set_geometry(a, in_n, origin, span, out_n, GF_INTERP_NEAREST, frame_n, skip);
    return 0;
}

/* One output's taps lo .. hi - 1 as int16 weights summing to exactly ONE
 * (the rounding's remainder on the largest). -1 where they would break
 * the passes' bounds (an int16 weight, MAX_ABS_SUM): the bicubic's lobes
 * nearly cancelling, a centre far outside the image; never the triangle. */
static int quantize(const filter *f, int lo, int hi, double center, double ss, double sum,
                    int16_t *w)
{
    int64_t isum = 0, abs_sum = 0;
    int big = 0;
    for (int k = 0; k < hi - lo; k++) {
        double q = floor(f->at((lo + k - center + 0.5) * ss) / sum * ONE + 0.5);
        if (!(fabs(q) <= INT16_MAX))
            return -1;
        w[k] = (int16_t)q;
        isum += w[k];
        abs_sum += w[k] < 0 ? -w[k] : w[k];
        if (w[k] > w[big])
            big = k;
    }
    int64_t nb = w[big] + (ONE - isum);
    abs_sum += (nb < 0 ? -nb : nb) - (w[big] < 0 ? -w[big] : w[big]);
    if (nb < INT16_MIN || nb > INT16_MAX || abs_sum > MAX_ABS_SUM)
        return -1;
    w[big] = (int16_t)nb;
    return 0;
}

int gf__rs_axis_set(gf__rs_axis *a, int in_n, double x0, double len, int out_n,
                    gf_interpolation mode)
{
    if (mode == GF_INTERP_NEAREST)
        return !isfinite(x0) ? -1
                             : gf__rs_axis_set_nearest(a, in_n, (int)fmax(floor(x0), -1), len,
                                                       out_n, 0, out_n);
    if (same_geometry(a, in_n, x0, len, out_n, mode, 0, 0))
        return 0;
    a->valid = 0;
    if (in_n <= 0 || out_n <= 0 || !(len > 0) || !isfinite(x0) || !isfinite(len) ||
        len > 2.0 * in_n + 2 || fabs(x0) > 2.0 * in_n + 2 ||
        (mode != GF_INTERP_BILINEAR && mode != GF_INTERP_BICUBIC))
        return -1;
    const filter *f = &filters[mode];
    double scale = len / out_n;
    double fs = scale > 1.0 ? scale : 1.0;
    double support = f->support * fs; /* stretched when shrinking */
    double ss = 1.0 / fs;
    int maxtaps = (int)ceil(support) * 2 + 2;
    if (GF__GROW(&a->start, &a->cap_out, (size_t)out_n, 64) ||
        GF__GROW(&a->w, &a->cap_w, ((size_t)out_n + 1) * maxtaps, 64))
        return -1;

    /* Pass 1: fixed-point weights per output at stride maxtaps, trimmed of
     * zero weights at both ends; start[] absolute for now. */
    int lo_all = in_n, hi_all = 0, taps = 1;
    for (int i = 0; i < out_n; i++) {
        int lo, hi;
        tap_range(in_n, x0, scale, support, i, &lo, &hi);
        if (hi - lo > maxtaps)
            hi = lo + maxtaps;
        double center = x0 + (i + 0.5) * scale, sum = 0;
        for (int x = lo; x < hi; x++)
            sum += f->at((x - center + 0.5) * ss);
        int16_t *w = a->w + (size_t)i * maxtaps;
        /* PIL divides by any sum but 0 */
        if (!(fabs(sum) > 0) || quantize(f, lo, hi, center, ss, sum, w) != 0) {
            int c = (int)fmin(fmax(floor(center), lo), hi - 1);
            lo = c;
            hi = c + 1;
            w[0] = ONE;
            for (int k = 1; k < maxtaps; k++)
                w[k] = 0;
        } else {
            int s = 0, e = hi - lo;
            while (e - s > 1 && w[s] == 0)
                s++;
            while (e - s > 1 && w[e - 1] == 0)
                e--;
            if (s)
                memmove(w, w + s, (size_t)(e - s) * sizeof *w);
            for (int k = e - s; k < maxtaps; k++)
                w[k] = 0;
            hi = lo + e;
            lo += s;
        }
        a->start[i] = lo;
        lo_all = lo < lo_all ? lo : lo_all;
        hi_all = hi > hi_all ? hi : hi_all;
        taps = hi - lo > taps ? hi - lo : taps;
    }
    restride(a, out_n, maxtaps, lo_all, hi_all, taps);
    set_geometry(a, in_n, x0, len, out_n, mode, 0, 0);
    return 0;
}

/* Kernels. Three sets, chosen once per process (see isa_init): plain C
 * (any CPU), SSE2 (baseline on x86-64) and AVX2 (runtime-detected; the
 * library itself is built for baseline x86-64, so those functions carry
 * target("avx2")). All three do the same integer arithmetic: the sums are
 * exact in int32 (bounds above), so the order of the multiply-adds does
 * not matter, and every path shifts right, then saturates to int16, then
 * to uint8, which on the in-range values here is clamp8. Their outputs
 * are byte-identical; tests/test_resample.c compares them. */

/* Instruction set: detected once (thread-safe), overridable by tests. */
static pthread_once_t isa_once = PTHREAD_ONCE_INIT;
static int isa_auto = GF__RS_ISA_C, cpu_avx2;
static int isa_forced = GF__RS_ISA_AUTO; /* __atomic access */

static void isa_init(void)
{
#if defined(__SSE2__)
    isa_auto = GF__RS_ISA_SSE2;
#endif
#if defined(GF__RS_HAVE_AVX2)
    __builtin_cpu_init();
    cpu_avx2 = __builtin_cpu_supports("avx2") != 0;
    const char *e = getenv("GF_NO_AVX2");
    if (cpu_avx2 && !(e && *e && strcmp(e, "0") != 0))
        isa_auto = GF__RS_ISA_AVX2;
#endif
}

int gf__rs_isa(void)
{
    pthread_once(&isa_once, isa_init);
    int f = __atomic_load_n(&isa_forced, __ATOMIC_RELAXED);
    return f != GF__RS_ISA_AUTO ? f : isa_auto;
}

int gf__rs_force_isa(int isa)
{
    pthread_once(&isa_once, isa_init);
    int ok = isa == GF__RS_ISA_AUTO || isa == GF__RS_ISA_C;
#if defined(__SSE2__)
    ok |= isa == GF__RS_ISA_SSE2;
#endif
    ok |= isa == GF__RS_ISA_AVX2 && cpu_avx2;
    if (!ok)
        return -1;
    __atomic_store_n(&isa_forced, isa, __ATOMIC_RELAXED);
    return 0;
}

/* NEAREST on both axes: each output is one source pixel at weight ONE,
 * which the passes would give back exactly; copied instead. Plain C for
 * every ISA: a gather, and the same bytes whatever the kernels. */
static void gather(const gf__resampler *r, const uint8_t *src, size_t stride, int ch,
                   uint8_t *dst, size_t dst_stride, int flip)
{
    const gf__rs_axis *h = &r->h, *v = &r->v;
    int n = h->out_n;
    for (int y = 0; y < v->out_n; y++) {
        const uint8_t *in = src + (size_t)v->start[y] * stride;
        uint8_t *o = dst + dst_stride * y;
        for (int i = 0; i < n; i++) {
            const uint8_t *p = in + (size_t)h->start[i] * ch;
            uint8_t *q = o + (size_t)(flip ? n - 1 - i : i) * ch;
            switch (ch) { /* constant sizes: inline moves, not memcpy calls */
            case 1: q[0] = p[0]; break;
            case 3: memcpy(q, p, 3); break;
            case 4: memcpy(q, p, 4); break;
            default: memcpy(q, p, (size_t)ch);
            }
        }
    }
}

static int passes(gf__resampler *r, const uint8_t *src, size_t stride, int ch, uint8_t *dst,
                  size_t dst_stride, int flip);

/* w x h pixels of ch bytes (rows stride bytes apart) to h x w at dst
 * (rows dst_stride apart), each output row mirrored if flip. */
static void transpose(const uint8_t *src, size_t stride, int w, int h, int ch, uint8_t *dst,
                      size_t dst_stride, int flip)
{
    for (int y = 0; y < h; y++) {
        const uint8_t *p = src + stride * y;
        int col = flip ? h - 1 - y : y;
        for (int x = 0; x < w; x++, p += ch) {
            uint8_t *q = dst + dst_stride * x + (size_t)col * ch;
            for (int c = 0; c < ch; c++)
                q[c] = p[c];
        }
    }
}

/* BICUBIC, horizontal pass first: PIL's order, so its clip of the first
 * pass's overshoot falls where PIL's does (vertical first, the clipped
 * overshoot of a corner differs from PIL's by up to ~25 levels). The same
 * kernels run on the span transposed, their axes swapped, and the output
 * is transposed back (mirrored there when flip): plain C copies around
 * byte-identical kernels. */
static int transposed(gf__resampler *r, const uint8_t *src, size_t stride, int ch, uint8_t *dst,
                      size_t dst_stride, int flip)
{
    int sw = r->h.hi - r->h.lo, sh = r->v.hi - r->v.lo, ow = r->h.out_n, oh = r->v.out_n;
    if (GF__GROW(&r->tsrc, &r->tsrc_cap, (size_t)sw * sh * ch, 4096) ||
        GF__GROW(&r->tout, &r->tout_cap, (size_t)ow * oh * ch, 4096))
        return -1;
    transpose(src, stride, sw, sh, ch, r->tsrc, (size_t)sh * ch, 0);
    gf__rs_axis t = r->h;
    r->h = r->v;
    r->v = t;
    int rc = passes(r, r->tsrc, (size_t)sh * ch, ch, r->tout, (size_t)oh * ch, 0);
    t = r->h;
    r->h = r->v;
    r->v = t;
    if (rc == 0) /* tout: ow rows of oh pixels; its row x is output column x */
        transpose(r->tout, (size_t)oh * ch, oh, ow, ch, dst, dst_stride, flip);
    return rc;
}

int gf__resample(gf__resampler *r, const uint8_t *src, size_t stride, int ch, uint8_t *dst,
                 size_t dst_stride, int flip)
{
    const gf__rs_axis *h = &r->h, *v = &r->v;
    if (!h->valid || !v->valid || ch < 1)
        return -1;
    if (h->nearest && v->nearest) {
        gather(r, src, stride, ch, dst, dst_stride, flip);
        return 0;
    }
    if (h->mode == GF_INTERP_BICUBIC)
        return transposed(r, src, stride, ch, dst, dst_stride, flip);
    return passes(r, src, stride, ch, dst, dst_stride, flip);
}

/* The two passes, vertical first, on the kernels of the ISA chosen. */
static int passes(gf__resampler *r, const uint8_t *src, size_t stride, int ch, uint8_t *dst,
                  size_t dst_stride, int flip)
{
    const gf__rs_axis *h = &r->h, *v = &r->v;
    int isa = gf__rs_isa();
    (void)isa; /* unused where there is only the C path */
#if defined(GF__RS_HAVE_AVX2)
    if (isa == GF__RS_ISA_AVX2 && (ch == 3 || ch == 4))
        return gf__rs_resample34_avx2(r, src, stride, ch, dst, dst_stride, flip);
#endif
    size_t n = (size_t)(h->hi - h->lo) * ch;
    if (GF__GROW(&r->tmp, &r->tmp_cap, n * v->out_n + TMP_PAD, 64))
        return -1;
    memset(r->tmp + n * v->out_n, 0, TMP_PAD * sizeof *r->tmp);
    vpass_fn *vpass = gf__rs_vpass_row;
#if defined(__SSE2__)
    if (isa >= GF__RS_ISA_SSE2)
        vpass = gf__rs_vpass_row_sse2;
#endif
#if defined(GF__RS_HAVE_AVX2)
    if (isa == GF__RS_ISA_AVX2)
        vpass = gf__rs_vpass_row_avx2;
#endif
    for (int y = 0; y < v->out_n; y++)
        vpass(src + (size_t)v->start[y] * stride, stride, v->w + (size_t)y * v->taps, v->taps,
              (int)n, r->tmp + n * y);
#if defined(__SSE2__)
    if (isa >= GF__RS_ISA_SSE2 && (ch == 3 || ch == 4))
        return gf__rs_hpass34_sse2(r, n, ch, dst, dst_stride, flip);
#endif
    gf__rs_hpass_c(r, n, ch, dst, dst_stride, flip);
    return 0;
}

size_t gf__resampler_bytes(const gf__resampler *r)
{
    return r->h.cap_out * sizeof *r->h.start + r->h.cap_w * sizeof *r->h.w +
           r->v.cap_out * sizeof *r->v.start + r->v.cap_w * sizeof *r->v.w +
           r->tmp_cap * sizeof *r->tmp + r->stage_cap + r->hwt_cap * sizeof *r->hwt +
           r->tsrc_cap + r->tout_cap;
}

void gf__resampler_free(gf__resampler *r)
{
    free(r->h.start);
    free(r->h.w);
    free(r->v.start);
    free(r->v.w);
    free(r->tmp);
    free(r->stage);
    free(r->hwt);
    free(r->tsrc);
    free(r->tout);
    memset(r, 0, sizeof *r);
}
