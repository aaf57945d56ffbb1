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
#include <pthread.h>
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

/* Kernels. Three sets, chosen once per process (see isa_init): plain C
 * (any CPU), SSE2 (baseline on x86-64) and AVX2 (runtime-detected; the
 * library itself is built for baseline x86-64, so those functions carry
 * target("avx2")). All three do the same integer arithmetic: the sums are
 * exact in int32 (bounds above), so the order of the multiply-adds does
 * not matter, and every path shifts right, then saturates to int16, then
 * to uint8, which on the in-range values here is clamp8. Their outputs
 * are byte-identical; tests/test_resample.c compares them. */

/* Loops below work on fixed-size blocks (BLOCK values, per-pixel lanes of
 * 4) so that gcc vectorizes them even at -O2, whose "very cheap" cost
 * model only takes loops whose trip count is a multiple of the vector
 * width and needs no aliasing checks; `restrict` rules those out. */
#define BLOCK 16

/* The 3-/4-channel horizontal passes read past a row's last value: 1
 * (4 lanes per pixel, 3 channels), up to 5 (AVX2: 8 values per pair of
 * taps, and an odd last tap read with weight 0). tmp is padded with 0s. */
#define TMP_PAD 16

#if defined(__SSE2__) && defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define GF__RS_HAVE_AVX2 1
#include <immintrin.h>
#define AVX2_FN __attribute__((target("avx2")))
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

typedef void vpass_fn(const uint8_t *restrict src, size_t stride, const int16_t *restrict w,
                      int taps, int n, int16_t *restrict out);

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
#endif

#if defined(GF__RS_HAVE_AVX2)
/* AVX2 vertical pass: vpass_row_sse2 at 32 values per step. The in-lane
 * unpacks leave values 0-7 | 16-23 and 8-15 | 24-31 in the two packed
 * registers; one cross-lane permute each puts them back in order. */
AVX2_FN static void vpass_row_avx2(const uint8_t *restrict src, size_t stride,
                                   const int16_t *restrict w, int taps, int n,
                                   int16_t *restrict out)
{
    const __m256i zero = _mm256_setzero_si256(), round = _mm256_set1_epi32(1 << (VSHIFT - 1));
    int x = 0;
    for (; x + 32 <= n; x += 32) {
        __m256i a0 = round, a1 = round, a2 = round, a3 = round;
        const uint8_t *r = src + x;
#define STEP(ra, rb, ww)                                                                     \
    do {                                                                                     \
        __m256i lo = _mm256_unpacklo_epi8(ra, rb), hi = _mm256_unpackhi_epi8(ra, rb);        \
        a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_unpacklo_epi8(lo, zero), ww));    \
        a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_unpackhi_epi8(lo, zero), ww));    \
        a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_unpacklo_epi8(hi, zero), ww));    \
        a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_unpackhi_epi8(hi, zero), ww));    \
    } while (0)
        int t = 0;
        for (; t + 2 <= taps; t += 2, r += 2 * stride) {
            int32_t wp;
            memcpy(&wp, w + t, 4); /* w[t] | w[t + 1] << 16 */
            STEP(_mm256_loadu_si256((const __m256i *)r),
                 _mm256_loadu_si256((const __m256i *)(r + stride)), _mm256_set1_epi32(wp));
        }
        if (t < taps)
            STEP(_mm256_loadu_si256((const __m256i *)r), zero,
                 _mm256_set1_epi32((int)(uint32_t)(uint16_t)w[t]));
#undef STEP
        __m256i p0 = _mm256_packs_epi32(_mm256_srai_epi32(a0, VSHIFT),
                                        _mm256_srai_epi32(a1, VSHIFT));
        __m256i p1 = _mm256_packs_epi32(_mm256_srai_epi32(a2, VSHIFT),
                                        _mm256_srai_epi32(a3, VSHIFT));
        _mm256_storeu_si256((__m256i *)(out + x), _mm256_permute2x128_si256(p0, p1, 0x20));
        _mm256_storeu_si256((__m256i *)(out + x + 16), _mm256_permute2x128_si256(p0, p1, 0x31));
    }
    if (x < n)
        vpass_row_sse2(src + x, stride, w, taps, n - x, out + x);
}
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
static void hpass_row34_c(const int16_t *restrict in, const gf__rs_axis *h, int ch,
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

#if defined(__SSE2__)
/* The same with SSE2 (baseline on x86-64): gcc does not vectorize the
 * per-output gather above, and this pass was most of the resampler's time.
 * Two taps per pmaddwd: the two pixels' values interleaved against the
 * pair of weights. */
/* One output pixel (4 lanes) of the taps at p. */
static inline uint32_t hpass_px_sse2(const int16_t *p, const int16_t *w, int taps, int ch)
{
    const __m128i zero = _mm_setzero_si128();
    __m128i a = _mm_set1_epi32(1 << (HSHIFT - 1));
    int t = 0;
    for (; t + 2 <= taps; t += 2, p += 2 * ch) {
        __m128i p0 = _mm_loadl_epi64((const __m128i *)p);
        __m128i p1 = _mm_loadl_epi64((const __m128i *)(p + ch));
        __m128i ww = _mm_set1_epi32(
            (int)((uint32_t)(uint16_t)w[t] | (uint32_t)(uint16_t)w[t + 1] << 16));
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
    return (uint32_t)_mm_cvtsi128_si32(a);
}

static void hpass_row34_sse2(const int16_t *restrict in, const gf__rs_axis *h, int ch,
                             uint8_t *restrict out, int flip)
{
    const int taps = h->taps;
    ptrdiff_t dir = flip ? -ch : ch;
    uint8_t *o = flip ? out + (size_t)(h->out_n - 1) * ch : out;
    for (int i = 0; i < h->out_n; i++, o += dir)
        put_px(o, hpass_px_sse2(in + (size_t)h->start[i] * ch, h->w + (size_t)i * taps, taps, ch),
               ch);
}

/* Four rows at once: each output's weights are loaded once for all four,
 * which halves the per-pixel overhead of the single-row loop. in rows
 * are n values apart, out rows ds bytes. */
static void hpass_rows4_sse2(const int16_t *restrict in, size_t n, const gf__rs_axis *h,
                             int ch, uint8_t *restrict out, size_t ds, int flip)
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

#if defined(GF__RS_HAVE_AVX2)
/* The AVX2 horizontal pass works on groups of 8 outputs of one row, two
 * per register: lane 0 and lane 1 of registers a, b, c, d hold outputs
 * 0|2, 1|3, 4|6, 5|7 of the group, each lane two taps of 4 values (the two
 * pixels' values interleaved by a pshufb) against the pair of weights, so
 * that the packs at the end leave the 8 pixels in order. Taps are taken
 * in pairs, an odd last one with a weight of 0: its pixel is read (inside
 * the row or the tmp padding) but adds nothing.
 *
 * The weight table: per group, per pair of taps, the 4 registers' weights
 * (each lane the pair 4 times), in the order the loop reads them. */
#define WT_LANE(k) ((((k) & 1) + 2 * ((k) >> 2)) * 2 + (((k) >> 1) & 1)) /* 16-byte units */

static void build_wtab(const gf__rs_axis *h, int32_t *restrict tab)
{
    const int taps = h->taps, np = (taps + 1) / 2, groups = h->out_n / 8;
    for (int g = 0; g < groups; g++)
        for (int k = 0; k < 8; k++) {
            const int16_t *w = h->w + (size_t)(8 * g + k) * taps;
            int32_t *d = tab + ((size_t)g * np * 8 + WT_LANE(k)) * 4;
            for (int j = 0; j < np; j++, d += 32) {
                uint32_t pr = (uint16_t)w[2 * j];
                if (2 * j + 1 < taps)
                    pr |= (uint32_t)(uint16_t)w[2 * j + 1] << 16;
                d[0] = d[1] = d[2] = d[3] = (int32_t)pr;
            }
        }
}

/* Two pixels' taps t, t+1 (8 values each from p and q): in lanes 0, 1. */
AVX2_FN static inline __m256i load2(const int16_t *p, const int16_t *q)
{
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)p)),
                                   _mm_loadu_si128((const __m128i *)q), 1);
}

/* One row, 3 or 4 channels, out_n outputs to out (mirrored if flip).
 * For 3 channels each group is stored as two 16-byte halves of 12 pixel
 * bytes and 4 junk, the junk after the pixels (before them when flipping)
 * and overwritten by the next store; out must have 4 bytes of slack on
 * either side. */
AVX2_FN static inline void hpass_row34_avx2_ch(const int16_t *restrict in,
                                               const gf__rs_axis *h,
                                               const int32_t *restrict tab, int ch,
                                               uint8_t *restrict out, int flip)
{
    const int taps = h->taps, np = (taps + 1) / 2, out_n = h->out_n;
    const int32_t *restrict start = h->start;
    const __m256i round = _mm256_set1_epi32(1 << (HSHIFT - 1));
    /* [v0 v3 v1 v4 v2 v5 v3 v6] (3 channels) or [v0 v4 v1 v5 ...] (4) */
    const __m256i shuf =
        ch == 4 ? _mm256_setr_epi8(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15, 0, 1,
                                   8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15)
                : _mm256_setr_epi8(0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11, 6, 7, 12, 13, 0, 1, 6,
                                   7, 2, 3, 8, 9, 4, 5, 10, 11, 6, 7, 12, 13);
    /* 4 pixels of 4 bytes to 12 bytes, junk last (or first, flipping) */
    const __m256i pick =
        flip ? _mm256_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1,
                                -1, -1, 0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14)
             : _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1, 0, 1, 2,
                                4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
    const __m256i rev = _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0);
    const __m256i *wv = (const __m256i *)tab;
    const size_t step = 2 * (size_t)ch;
    int i = 0;
    for (; i + 8 <= out_n; i += 8) {
        const int16_t *p0 = in + (size_t)start[i] * ch, *p1 = in + (size_t)start[i + 1] * ch;
        const int16_t *p2 = in + (size_t)start[i + 2] * ch, *p3 = in + (size_t)start[i + 3] * ch;
        const int16_t *p4 = in + (size_t)start[i + 4] * ch, *p5 = in + (size_t)start[i + 5] * ch;
        const int16_t *p6 = in + (size_t)start[i + 6] * ch, *p7 = in + (size_t)start[i + 7] * ch;
        __m256i a = round, b = round, c = round, d = round;
        for (int j = 0; j < np; j++, wv += 4) {
            size_t off = (size_t)j * step;
            a = _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_shuffle_epi8(
                                                          load2(p0 + off, p2 + off), shuf),
                                                      _mm256_loadu_si256(wv)));
            b = _mm256_add_epi32(b, _mm256_madd_epi16(_mm256_shuffle_epi8(
                                                          load2(p1 + off, p3 + off), shuf),
                                                      _mm256_loadu_si256(wv + 1)));
            c = _mm256_add_epi32(c, _mm256_madd_epi16(_mm256_shuffle_epi8(
                                                          load2(p4 + off, p6 + off), shuf),
                                                      _mm256_loadu_si256(wv + 2)));
            d = _mm256_add_epi32(d, _mm256_madd_epi16(_mm256_shuffle_epi8(
                                                          load2(p5 + off, p7 + off), shuf),
                                                      _mm256_loadu_si256(wv + 3)));
        }
        /* int16 pixels 0 1 | 2 3 and 4 5 | 6 7; bytes 0 1 4 5 | 2 3 6 7 */
        __m256i lo = _mm256_packs_epi32(_mm256_srai_epi32(a, HSHIFT), _mm256_srai_epi32(b, HSHIFT));
        __m256i hi = _mm256_packs_epi32(_mm256_srai_epi32(c, HSHIFT), _mm256_srai_epi32(d, HSHIFT));
        __m256i px = _mm256_permute4x64_epi64(_mm256_packus_epi16(lo, hi), _MM_SHUFFLE(3, 1, 2, 0));
        if (flip)
            px = _mm256_permutevar8x32_epi32(px, rev);
        if (ch == 4) {
            _mm256_storeu_si256((__m256i *)(out + (size_t)(flip ? out_n - 8 - i : i) * 4), px);
        } else {
            px = _mm256_shuffle_epi8(px, pick);
            __m128i l = _mm256_castsi256_si128(px), u = _mm256_extracti128_si256(px, 1);
            if (flip) {
                uint8_t *o = out + (size_t)(out_n - 8 - i) * 3;
                _mm_storeu_si128((__m128i *)(o + 8), u);
                _mm_storeu_si128((__m128i *)(o - 4), l);
            } else {
                uint8_t *o = out + (size_t)i * 3;
                _mm_storeu_si128((__m128i *)o, l);
                _mm_storeu_si128((__m128i *)(o + 12), u);
            }
        }
    }
    for (; i < out_n; i++)
        put_px(out + (size_t)(flip ? out_n - 1 - i : i) * ch,
               hpass_px_sse2(in + (size_t)start[i] * ch, h->w + (size_t)i * taps, taps, ch), ch);
}

AVX2_FN static void hpass_row34_avx2(const int16_t *restrict in, const gf__rs_axis *h,
                                     const int32_t *restrict tab, int ch,
                                     uint8_t *restrict out, int flip)
{
    if (ch == 4)
        hpass_row34_avx2_ch(in, h, tab, 4, out, flip);
    else
        hpass_row34_avx2_ch(in, h, tab, 3, out, flip);
}

/* 3 and 4 channels with AVX2: each output row's vertical pass into a
 * one-row tmp (it stays in L1), then its horizontal pass into a one-row
 * stage, streamed to dst. */
static int resample34_avx2(gf__resampler *r, const uint8_t *src, size_t stride, int ch,
                           uint8_t *dst, size_t dst_stride, int flip)
{
    const gf__rs_axis *h = &r->h, *v = &r->v;
    size_t n = (size_t)(h->hi - h->lo) * ch, row = (size_t)h->out_n * ch;
    size_t tab_n = (size_t)(h->out_n / 8) * ((h->taps + 1) / 2) * 32;
    if (grow((void **)&r->tmp, &r->tmp_cap, n + TMP_PAD, sizeof *r->tmp) ||
        grow((void **)&r->stage, &r->stage_cap, row + 64, 1) ||
        grow((void **)&r->hwt, &r->hwt_cap, tab_n ? tab_n : 1, sizeof *r->hwt))
        return -1;
    memset(r->tmp + n, 0, TMP_PAD * sizeof *r->tmp);
    build_wtab(h, r->hwt);
    uint8_t *srow = r->stage + 32;
    for (int y = 0; y < v->out_n; y++) {
        vpass_row_avx2(src + (size_t)v->start[y] * stride, stride, v->w + (size_t)y * v->taps,
                       v->taps, (int)n, r->tmp);
        hpass_row34_avx2(r->tmp, h, r->hwt, ch, srow, flip);
        stream_copy(dst + dst_stride * y, srow, row);
    }
    _mm_sfence();
    return 0;
}
#endif

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
        return resample34_avx2(r, src, stride, ch, dst, dst_stride, flip);
#endif
    size_t n = (size_t)(h->hi - h->lo) * ch;
    if (grow((void **)&r->tmp, &r->tmp_cap, n * v->out_n + TMP_PAD, sizeof *r->tmp))
        return -1;
    memset(r->tmp + n * v->out_n, 0, TMP_PAD * sizeof *r->tmp);
    vpass_fn *vpass = vpass_row;
#if defined(__SSE2__)
    if (isa >= GF__RS_ISA_SSE2)
        vpass = vpass_row_sse2;
#endif
#if defined(GF__RS_HAVE_AVX2)
    if (isa == GF__RS_ISA_AVX2)
        vpass = vpass_row_avx2;
#endif
    for (int y = 0; y < v->out_n; y++)
        vpass(src + (size_t)v->start[y] * stride, stride, v->w + (size_t)y * v->taps, v->taps,
              (int)n, r->tmp + n * y);
    int y = 0;
#if defined(__SSE2__)
    if (isa >= GF__RS_ISA_SSE2 && (ch == 3 || ch == 4)) {
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
        for (; y < v->out_n; y++)
            hpass_row34_sse2(r->tmp + n * y, h, ch, dst + dst_stride * y, flip);
    }
#endif
    for (; y < v->out_n; y++) {
        const int16_t *in = r->tmp + n * y;
        uint8_t *out = dst + dst_stride * y;
        if (ch == 3 || ch == 4)
            hpass_row34_c(in, h, ch, out, flip);
        else
            hpass_n(in, h, ch, out, flip);
    }
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
