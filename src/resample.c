/* Separable antialiased triangle resampler, fixed point.
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

#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define ONE (1 << GF__RS_BITS)
#define VFRAC 7 /* fractional bits kept between the passes */
#define VSHIFT (GF__RS_BITS - VFRAC)
#define HSHIFT (GF__RS_BITS + VFRAC)

double gf__rs_filter(double t)
{
    t = fabs(t);
    return t < 1.0 ? 1.0 - t : 0.0;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 64;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = n;
    return 0;
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
    if (grow((void **)&a->start, &a->cap_out, (size_t)out_n, sizeof *a->start) ||
        grow((void **)&a->w, &a->cap_w, ((size_t)out_n + 1) * maxtaps, sizeof *a->w))
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

/* Loops below work on fixed-size blocks (BLOCK values, per-pixel lanes of
 * 4) so that gcc vectorizes them even at -O2, whose "very cheap" cost
 * model only takes loops whose trip count is a multiple of the vector
 * width and needs no aliasing checks; `restrict` rules those out. */
#define BLOCK 16

/* The portable horizontal pass is the fallback where SSE2 is missing. */
#if defined(__SSE2__)
#define GF__RS_MAYBE_UNUSED __attribute__((unused))
#else
#define GF__RS_MAYBE_UNUSED
#endif

/* One output row of the vertical pass: n = span_w * ch values. */
static void vpass_row(const uint8_t *restrict src, size_t stride, const int16_t *restrict w,
                      int taps, int n, int16_t *restrict out)
{
    int x = 0;
    for (; x + BLOCK <= n; x += BLOCK) {
        int32_t a[BLOCK];
        for (int k = 0; k < BLOCK; k++)
            a[k] = 1 << (VSHIFT - 1);
        const uint8_t *r = src + x;
        for (int t = 0; t < taps; t++, r += stride) {
            int16_t wt = w[t];
            for (int k = 0; k < BLOCK; k++)
                a[k] += (int16_t)r[k] * wt;
        }
        for (int k = 0; k < BLOCK; k++)
            out[x + k] = (int16_t)(a[k] >> VSHIFT);
    }
    for (; x < n; x++) {
        int32_t a = 1 << (VSHIFT - 1);
        for (int t = 0; t < taps; t++)
            a += src[(size_t)t * stride + x] * w[t];
        out[x] = (int16_t)(a >> VSHIFT);
    }
}

#if defined(__SSE2__)
/* SSE2 vertical pass: two source rows per pmaddwd (their bytes
 * interleaved, against the pair of weights), 16 values per step, the
 * accumulators in registers. About twice what gcc makes of vpass_row. */
static void vpass_row_sse2(const uint8_t *restrict src, size_t stride,
                           const int16_t *restrict w, int taps, int n, int16_t *restrict out)
{
    const __m128i zero = _mm_setzero_si128(), round = _mm_set1_epi32(1 << (VSHIFT - 1));
    int x = 0;
    for (; x + 16 <= n; x += 16) {
        __m128i a0 = round, a1 = round, a2 = round, a3 = round;
        const uint8_t *r = src + x;
        for (int t = 0; t < taps; t += 2, r += 2 * stride) {
            __m128i ra = _mm_loadu_si128((const __m128i *)r), rb = zero;
            uint32_t wp = (uint16_t)w[t];
            if (t + 1 < taps) {
                rb = _mm_loadu_si128((const __m128i *)(r + stride));
                wp |= (uint32_t)(uint16_t)w[t + 1] << 16;
            }
            __m128i ww = _mm_set1_epi32((int)wp);
            __m128i lo = _mm_unpacklo_epi8(ra, rb), hi = _mm_unpackhi_epi8(ra, rb);
            a0 = _mm_add_epi32(a0, _mm_madd_epi16(_mm_unpacklo_epi8(lo, zero), ww));
            a1 = _mm_add_epi32(a1, _mm_madd_epi16(_mm_unpackhi_epi8(lo, zero), ww));
            a2 = _mm_add_epi32(a2, _mm_madd_epi16(_mm_unpacklo_epi8(hi, zero), ww));
            a3 = _mm_add_epi32(a3, _mm_madd_epi16(_mm_unpackhi_epi8(hi, zero), ww));
        }
        a0 = _mm_srai_epi32(a0, VSHIFT);
        a1 = _mm_srai_epi32(a1, VSHIFT);
        a2 = _mm_srai_epi32(a2, VSHIFT);
        a3 = _mm_srai_epi32(a3, VSHIFT);
        _mm_storeu_si128((__m128i *)(out + x), _mm_packs_epi32(a0, a1));
        _mm_storeu_si128((__m128i *)(out + x + 8), _mm_packs_epi32(a2, a3));
    }
    if (x < n)
        vpass_row(src + x, stride, w, taps, n - x, out + x);
}
#define vpass vpass_row_sse2
#else
#define vpass vpass_row
#endif

static inline uint8_t clamp8(int32_t v)
{
    v >>= HSHIFT;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Horizontal pass for 3 and 4 channels: 4 lanes per pixel (for 3
 * channels the 4th lane reads the next pixel's first value, which the
 * tmp buffer is padded for, and is dropped). Outputs go right to left
 * when flipping. */
GF__RS_MAYBE_UNUSED static void hpass_row34_c(const int16_t *restrict in, const gf__rs_axis *h, int ch,
                        uint8_t *restrict out, int flip)
{
    const int taps = h->taps;
    const int16_t *restrict w = h->w;
    const int32_t *restrict start = h->start;
    ptrdiff_t dir = flip ? -ch : ch;
    uint8_t *o = flip ? out + (size_t)(h->out_n - 1) * ch : out;
    for (int i = 0; i < h->out_n; i++, w += taps, o += dir) {
        const int16_t *p = in + (size_t)start[i] * ch;
        /* written out lane by lane: gcc's basic-block SLP makes one 4 x int32
         * multiply-add of it; a loop over c stays scalar at -O2 */
        int32_t a0 = 1 << (HSHIFT - 1), a1 = a0, a2 = a0, a3 = a0;
        for (int t = 0; t < taps; t++, p += ch) {
            int32_t wt = w[t];
            a0 += p[0] * wt;
            a1 += p[1] * wt;
            a2 += p[2] * wt;
            a3 += p[3] * wt;
        }
        o[0] = clamp8(a0);
        o[1] = clamp8(a1);
        o[2] = clamp8(a2);
        if (ch == 4)
            o[3] = clamp8(a3);
    }
}

#if defined(__SSE2__)
/* The same with SSE2 (baseline on x86-64): gcc does not vectorize the
 * per-output gather above, and this pass was most of the resampler's time.
 * Two taps per pmaddwd: the two pixels' values interleaved against the
 * pair of weights. */
static void hpass_row34_sse2(const int16_t *restrict in, const gf__rs_axis *h, int ch,
                             uint8_t *restrict out, int flip)
{
    const int taps = h->taps;
    const int16_t *restrict w = h->w;
    const int32_t *restrict start = h->start;
    ptrdiff_t dir = flip ? -ch : ch;
    uint8_t *o = flip ? out + (size_t)(h->out_n - 1) * ch : out;
    const __m128i round = _mm_set1_epi32(1 << (HSHIFT - 1)), zero = _mm_setzero_si128();
    for (int i = 0; i < h->out_n; i++, w += taps, o += dir) {
        const int16_t *p = in + (size_t)start[i] * ch;
        __m128i a = round;
        int t = 0;
        for (; t + 2 <= taps; t += 2, p += 2 * ch) {
            __m128i p0 = _mm_loadl_epi64((const __m128i *)p);
            __m128i p1 = _mm_loadl_epi64((const __m128i *)(p + ch));
            __m128i ww = _mm_set1_epi32((int)((uint32_t)(uint16_t)w[t] |
                                              (uint32_t)(uint16_t)w[t + 1] << 16));
            a = _mm_add_epi32(a, _mm_madd_epi16(_mm_unpacklo_epi16(p0, p1), ww));
        }
        if (t < taps) {
            __m128i p0 = _mm_loadl_epi64((const __m128i *)p);
            __m128i ww = _mm_set1_epi32((int)(uint32_t)(uint16_t)w[t]);
            a = _mm_add_epi32(a, _mm_madd_epi16(_mm_unpacklo_epi16(p0, zero), ww));
        }
        a = _mm_srai_epi32(a, HSHIFT);
        a = _mm_packs_epi32(a, a);
        a = _mm_packus_epi16(a, a);
        uint32_t v = (uint32_t)_mm_cvtsi128_si32(a);
        if (ch == 4) { /* constant sizes: inline stores, not a memcpy call */
            memcpy(o, &v, 4);
        } else {
            o[0] = (uint8_t)v;
            o[1] = (uint8_t)(v >> 8);
            o[2] = (uint8_t)(v >> 16);
        }
    }
}
#define hpass_row34 hpass_row34_sse2

static inline void put_px(uint8_t *o, uint32_t v, int ch)
{
    if (ch == 4) { /* constant sizes: inline stores, not a memcpy call */
        memcpy(o, &v, 4);
    } else {
        o[0] = (uint8_t)v;
        o[1] = (uint8_t)(v >> 8);
        o[2] = (uint8_t)(v >> 16);
    }
}

/* Four rows at once: each output's weights are loaded once for all four,
 * which halves the per-pixel overhead of the single-row loop. in rows
 * are n values apart, out rows ds bytes. */
static void hpass_rows4_sse2(const int16_t *restrict in, size_t n,
                                                       const gf__rs_axis *h, int ch,
                                                       uint8_t *restrict out, size_t ds,
                                                       int flip)
{
    const int taps = h->taps;
    const int16_t *restrict w = h->w;
    const int32_t *restrict start = h->start;
    ptrdiff_t dir = flip ? -ch : ch;
    uint8_t *o = flip ? out + (size_t)(h->out_n - 1) * ch : out;
    const __m128i round = _mm_set1_epi32(1 << (HSHIFT - 1)), zero = _mm_setzero_si128();
#define ROW(a, k, q0, q1)                                                                    \
    a = _mm_add_epi32(a, _mm_madd_epi16(_mm_unpacklo_epi16(                                  \
                                            _mm_loadl_epi64((const __m128i *)(q0 + (k) * n)), \
                                            q1),                                             \
                                        ww))
    for (int i = 0; i < h->out_n; i++, w += taps, o += dir) {
        const int16_t *p = in + (size_t)start[i] * ch;
        __m128i a0 = round, a1 = round, a2 = round, a3 = round;
        int t = 0;
        for (; t + 2 <= taps; t += 2, p += 2 * ch) {
            int32_t wp;
            memcpy(&wp, w + t, 4); /* w[t] | w[t + 1] << 16 */
            __m128i ww = _mm_set1_epi32(wp);
            ROW(a0, 0, p, _mm_loadl_epi64((const __m128i *)(p + ch)));
            ROW(a1, 1, p, _mm_loadl_epi64((const __m128i *)(p + n + ch)));
            ROW(a2, 2, p, _mm_loadl_epi64((const __m128i *)(p + 2 * n + ch)));
            ROW(a3, 3, p, _mm_loadl_epi64((const __m128i *)(p + 3 * n + ch)));
        }
        if (t < taps) {
            __m128i ww = _mm_set1_epi32((int)(uint32_t)(uint16_t)w[t]);
            ROW(a0, 0, p, zero);
            ROW(a1, 1, p, zero);
            ROW(a2, 2, p, zero);
            ROW(a3, 3, p, zero);
        }
        __m128i lo = _mm_packs_epi32(_mm_srai_epi32(a0, HSHIFT), _mm_srai_epi32(a1, HSHIFT));
        __m128i hi = _mm_packs_epi32(_mm_srai_epi32(a2, HSHIFT), _mm_srai_epi32(a3, HSHIFT));
        __m128i b = _mm_packus_epi16(lo, hi); /* row k's pixel in bytes 4k..4k+3 */
        put_px(o, (uint32_t)_mm_cvtsi128_si32(b), ch);
        put_px(o + ds, (uint32_t)_mm_cvtsi128_si32(_mm_srli_si128(b, 4)), ch);
        put_px(o + 2 * ds, (uint32_t)_mm_cvtsi128_si32(_mm_srli_si128(b, 8)), ch);
        put_px(o + 3 * ds, (uint32_t)_mm_cvtsi128_si32(_mm_srli_si128(b, 12)), ch);
    }
#undef ROW
}
#else
#define hpass_row34 hpass_row34_c
#endif

static void hpass_n(const int16_t *restrict in, const gf__rs_axis *h, int ch,
                    uint8_t *restrict out, int flip)
{
    const int taps = h->taps;
    ptrdiff_t dir = flip ? -ch : ch;
    uint8_t *o = flip ? out + (size_t)(h->out_n - 1) * ch : out;
    for (int i = 0; i < h->out_n; i++, o += dir)
        for (int c = 0; c < ch; c++) {
            const int16_t *p = in + (size_t)h->start[i] * ch + c;
            const int16_t *w = h->w + (size_t)i * taps;
            int32_t a = 1 << (HSHIFT - 1);
            for (int t = 0; t < taps; t++)
                a += w[t] * p[t * ch];
            o[c] = clamp8(a);
        }
}

#if defined(__SSE2__)
/* Copies n bytes to dst with non-temporal stores where 16-byte aligned:
 * the destination is a batch slot, written once and read next by another
 * thread or a DMA engine, so reading its lines for ownership and keeping
 * them in this core's cache only costs. Caller fences. */
static void stream_copy(uint8_t *restrict dst, const uint8_t *restrict src, size_t n)
{
    size_t head = (size_t)(-(uintptr_t)dst & 15);
    if (head > n)
        head = n;
    memcpy(dst, src, head);
    dst += head;
    src += head;
    n -= head;
    for (; n >= 64; n -= 64, dst += 64, src += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)src);
        __m128i b = _mm_loadu_si128((const __m128i *)(src + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(src + 32));
        __m128i d = _mm_loadu_si128((const __m128i *)(src + 48));
        _mm_stream_si128((__m128i *)dst, a);
        _mm_stream_si128((__m128i *)(dst + 16), b);
        _mm_stream_si128((__m128i *)(dst + 32), c);
        _mm_stream_si128((__m128i *)(dst + 48), d);
    }
    for (; n >= 16; n -= 16, dst += 16, src += 16)
        _mm_stream_si128((__m128i *)dst, _mm_loadu_si128((const __m128i *)src));
    memcpy(dst, src, n);
}
#endif

int gf__resample(gf__resampler *r, const uint8_t *src, size_t stride, int ch, uint8_t *dst,
                 size_t dst_stride, int flip)
{
    const gf__rs_axis *h = &r->h, *v = &r->v;
    if (!h->valid || !v->valid || ch < 1)
        return -1;
    size_t n = (size_t)(h->hi - h->lo) * ch;
    /* + 1: the 3-channel horizontal pass reads one value past a row */
    if (grow((void **)&r->tmp, &r->tmp_cap, n * v->out_n + 1, sizeof *r->tmp))
        return -1;
    r->tmp[n * v->out_n] = 0;
    for (int y = 0; y < v->out_n; y++)
        vpass(src + (size_t)v->start[y] * stride, stride, v->w + (size_t)y * v->taps,
                  v->taps, (int)n, r->tmp + n * y);
    int y = 0;
#if defined(__SSE2__)
    if (ch == 3 || ch == 4) {
        /* Four rows into a small hot buffer, then streamed to dst. */
        size_t row = (size_t)h->out_n * ch;
        if (grow((void **)&r->stage, &r->stage_cap, 4 * row, 1))
            return -1;
        for (; y + 4 <= v->out_n; y += 4) {
            hpass_rows4_sse2(r->tmp + n * y, n, h, ch, r->stage, row, flip);
            if (dst_stride == row) {
                stream_copy(dst + dst_stride * y, r->stage, 4 * row);
            } else {
                for (int k = 0; k < 4; k++)
                    stream_copy(dst + dst_stride * (y + k), r->stage + row * k, row);
            }
        }
        _mm_sfence();
    }
#endif
    for (; y < v->out_n; y++) {
        const int16_t *in = r->tmp + n * y;
        uint8_t *out = dst + dst_stride * y;
        if (ch == 3 || ch == 4)
            hpass_row34(in, h, ch, out, flip);
        else
            hpass_n(in, h, ch, out, flip);
    }
    return 0;
}

size_t gf__resampler_bytes(const gf__resampler *r)
{
    return r->h.cap_out * sizeof *r->h.start + r->h.cap_w * sizeof *r->h.w +
           r->v.cap_out * sizeof *r->v.start + r->v.cap_w * sizeof *r->v.w +
           r->tmp_cap * sizeof *r->tmp + r->stage_cap;
}

void gf__resampler_free(gf__resampler *r)
{
    free(r->h.start);
    free(r->h.w);
    free(r->v.start);
    free(r->v.w);
    free(r->tmp);
    free(r->stage);
    memset(r, 0, sizeof *r);
}
