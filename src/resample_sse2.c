/* The resampler's SSE2 kernels (baseline on x86-64; compiled empty
 * elsewhere), run on the decode threads for gf__resample (resample.c
 * chooses them at run time). Same integer arithmetic as the portable
 * kernels, byte-identical output. */
#include "resample_c.h"

#include "grow.h"

#if defined(__SSE2__)

/* SSE2 vertical pass: two source rows per pmaddwd (their bytes
 * interleaved, against the pair of weights), 16 values per step, the
 * accumulators in registers. About twice what gcc makes of vpass_row. */
void gf__rs_vpass_row_sse2(const uint8_t *restrict src, size_t stride,
                           const int16_t *restrict w, int taps, int n, int16_t *restrict out)
{
    const __m128i zero = _mm_setzero_si128(), round = _mm_set1_epi32(1 << (VSHIFT - 1));
    const __m128i top = _mm_set1_epi16(GF__RS_TMP_MAX);
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
        /* packs saturates to int16; then [0, GF__RS_TMP_MAX], as clamp_tmp */
        _mm_storeu_si128((__m128i *)(out + x),
                         _mm_min_epi16(_mm_max_epi16(_mm_packs_epi32(a0, a1), zero), top));
        _mm_storeu_si128((__m128i *)(out + x + 8),
                         _mm_min_epi16(_mm_max_epi16(_mm_packs_epi32(a2, a3), zero), top));
    }
    if (x < n)
        gf__rs_vpass_row(src + x, stride, w, taps, n - x, out + x);
}

/* The horizontal pass for 3 and 4 channels (hpass_row34_c in resample.c)
 * with SSE2: gcc does not vectorize that per-output gather, and this pass
 * was most of the resampler's time. Two taps per pmaddwd: the two pixels'
 * values interleaved against the pair of weights (hpass_px_sse2). */
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

/* Every row's horizontal pass, 3 or 4 channels: four rows at a time into
 * a small hot buffer, then streamed to dst; the last out_h % 4 directly. */
int gf__rs_hpass34_sse2(gf__resampler *r, size_t n, int ch, uint8_t *dst, size_t dst_stride,
                        int flip)
{
    const gf__rs_axis *h = &r->h, *v = &r->v;
    size_t row = (size_t)h->out_n * ch;
    if (GF__GROW(&r->stage, &r->stage_cap, 4 * row, 64))
        return -1;
    int y = 0;
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
    return 0;
}

#endif
