/* Separable antialiased triangle resampler, fixed point: the weights
 * (gf__rs_axis_set) and the choice of kernels (isa_init, gf__resample);
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
 * 1 << 14 and never negative (triangle filter), so
 *   vertical:   sum(w * px) <= 255 << 14, kept with 7 fractional bits
 *               (<= 32640: fits int16),
 *   horizontal: sum(w * tmp) <= 32640 << 14 < 2^31, rounded to 8 bits.
 * At scale 1 on integer-aligned crops every output has one tap of weight
 * 1 << 14, so both passes are exact. */
#include "resample.h"

#include "grow.h"

#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#define ONE (1 << GF__RS_BITS)

_Static_assert((255 << VFRAC) <= INT16_MAX, "the vertical pass's output fits int16");
_Static_assert(((int64_t)255 << VFRAC << GF__RS_BITS) < ((int64_t)1 << 31),
               "the horizontal pass's sums fit int32");

double gf__rs_filter(double t)
{
    t = fabs(t);
    return t < 1.0 ? 1.0 - t : 0.0;
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

int gf__rs_axis_set(gf__rs_axis *a, int in_n, double x0, double len, int out_n)
{
    if (a->valid && a->in_n == in_n && a->out_n == out_n && a->x0 == x0 && a->len == len)
        return 0;
    a->valid = 0;
    if (in_n <= 0 || out_n <= 0 || !(len > 0) || !isfinite(x0) || !isfinite(len) ||
        len > 2.0 * in_n + 2 || fabs(x0) > 2.0 * in_n + 2)
        return -1;
    double scale = len / out_n;
    double fs = scale > 1.0 ? scale : 1.0;
    double support = fs; /* triangle: radius 1, stretched when shrinking */
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
            sum += gf__rs_filter((x - center + 0.5) * ss);
        int16_t *w = a->w + (size_t)i * maxtaps;
        if (!(sum > 0)) { /* no sample under the kernel: nearest */
            int c = (int)fmin(fmax(floor(center), lo), hi - 1);
            lo = c;
            hi = c + 1;
            w[0] = ONE;
            for (int k = 1; k < maxtaps; k++)
                w[k] = 0;
        } else {
            int isum = 0, big = 0;
            for (int k = 0; k < hi - lo; k++) {
                double f = gf__rs_filter((lo + k - center + 0.5) * ss);
                w[k] = (int16_t)floor(f / sum * ONE + 0.5);
                isum += w[k];
                if (w[k] > w[big])
                    big = k;
            }
            w[big] = (int16_t)(w[big] + (ONE - isum));
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

    /* Pass 2: restride to `taps`, with each output's window shifted left
     * (weights moved right) where it would run past the span's end. The
     * weights so dropped are the zero padding: count <= span - rel. */
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
    a->in_n = in_n;
    a->out_n = out_n;
    a->x0 = x0;
    a->len = len;
    a->lo = lo_all;
    a->hi = hi_all;
    a->taps = taps;
    a->valid = 1;
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

int gf__resample(gf__resampler *r, const uint8_t *src, size_t stride, int ch, uint8_t *dst,
                 size_t dst_stride, int flip)
{
    const gf__rs_axis *h = &r->h, *v = &r->v;
    if (!h->valid || !v->valid || ch < 1)
        return -1;
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
           r->tmp_cap * sizeof *r->tmp + r->stage_cap + r->hwt_cap * sizeof *r->hwt;
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
    memset(r, 0, sizeof *r);
}
