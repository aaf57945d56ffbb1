/* The resampler's AVX2 kernels, run on the decode threads for
 * gf__resample where the CPU has AVX2 (resample.c checks at run time).
 * The library is built for baseline x86-64, so each function here carries
 * target("avx2") (AVX2_FN) rather than this file a -mavx2: nothing of it
 * runs before the CPU check. Same integer arithmetic as the portable
 * kernels, byte-identical output. Compiled empty off x86. */
#include "resample_c.h"

#include "grow.h"

#if defined(GF__RS_HAVE_AVX2)

/* AVX2 vertical pass: vpass_row_sse2 at 32 values per step. The in-lane
 * unpacks leave values 0-7 | 16-23 and 8-15 | 24-31 in the two packed
 * registers; one cross-lane permute each puts them back in order. */
AVX2_FN void gf__rs_vpass_row_avx2(const uint8_t *restrict src, size_t stride,
                                   const int16_t *restrict w, int taps, int n,
                                   int16_t *restrict out)
{
    const __m256i zero = _mm256_setzero_si256(), round = _mm256_set1_epi32(1 << (VSHIFT - 1));
    const __m256i top = _mm256_set1_epi16(GF__RS_TMP_MAX);
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
        p0 = _mm256_min_epi16(_mm256_max_epi16(p0, zero), top); /* as clamp_tmp */
        p1 = _mm256_min_epi16(_mm256_max_epi16(p1, zero), top);
        _mm256_storeu_si256((__m256i *)(out + x), _mm256_permute2x128_si256(p0, p1, 0x20));
        _mm256_storeu_si256((__m256i *)(out + x + 16), _mm256_permute2x128_si256(p0, p1, 0x31));
    }
    if (x < n)
        gf__rs_vpass_row_sse2(src + x, stride, w, taps, n - x, out + x);
}

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
int gf__rs_resample34_avx2(gf__resampler *r, const uint8_t *src, size_t stride, int ch,
                           uint8_t *dst, size_t dst_stride, int flip)
{
    const gf__rs_axis *h = &r->h, *v = &r->v;
    size_t n = (size_t)(h->hi - h->lo) * ch, row = (size_t)h->out_n * ch;
    size_t tab_n = (size_t)(h->out_n / 8) * ((h->taps + 1) / 2) * 32;
    if (GF__GROW(&r->tmp, &r->tmp_cap, n + TMP_PAD, 64) ||
        GF__GROW(&r->stage, &r->stage_cap, row + 64, 64) ||
        GF__GROW(&r->hwt, &r->hwt_cap, tab_n ? tab_n : 1, 64))
        return -1;
    memset(r->tmp + n, 0, TMP_PAD * sizeof *r->tmp);
    build_wtab(h, r->hwt);
    uint8_t *srow = r->stage + 32;
    for (int y = 0; y < v->out_n; y++) {
        gf__rs_vpass_row_avx2(src + (size_t)v->start[y] * stride, stride, v->w + (size_t)y * v->taps,
                       v->taps, (int)n, r->tmp);
        hpass_row34_avx2(r->tmp, h, r->hwt, ch, srow, flip);
        stream_copy(dst + dst_stride * y, srow, row);
    }
    _mm_sfence();
    return 0;
}

#endif
