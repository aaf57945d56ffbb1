/* The resampler's kernels (resample_c.c portable, resample_sse2.c,
 * resample_avx2.c) and what they share, below resample.c (plan, dispatch)
 * which chooses among them: the state they work on, the fixed-point
 * layout between the passes, the kernels each file lends the dispatch,
 * and the small SSE2 helpers the SSE2 and AVX2 paths both inline. Run on
 * the decode threads, each with its own gf__resampler. */
#ifndef GF_RESAMPLE_C_H
#define GF_RESAMPLE_C_H

#include <stddef.h>
#include <stdint.h>

#define GF__RS_BITS 14

typedef struct gf__rs_axis {
    /* The geometry the weights below were computed for (cache key): the
     * filter (a gf_interpolation), and for NEAREST its frame. */
    int in_n, out_n;
    double x0, len;
    int mode, frame_n, skip;
    int valid;
    /* Source span read by any output: [lo, hi), clamped to [0, in_n). */
    int lo, hi;
    /* Every output reads exactly `taps` source samples starting at
     * start[i] (relative to lo); missing taps carry weight 0, and
     * start[i] + taps <= hi - lo always. */
    int taps;
    int nearest; /* NEAREST: one tap of weight 1 << GF__RS_BITS each */
    int32_t *start;
    int16_t *w; /* out_n * taps */
    size_t cap_out, cap_w;
} gf__rs_axis;

typedef struct gf__resampler {
    gf__rs_axis h, v;
    int16_t *tmp;  /* vertical-pass output: out_h rows of span_w * ch */
    size_t tmp_cap;
    uint8_t *stage; /* four output rows, before they are streamed out */
    size_t stage_cap;
    int32_t *hwt; /* AVX2: h.w laid out for the horizontal pass's lanes */
    size_t hwt_cap;
    uint8_t *tsrc, *tout; /* BICUBIC: the span and the output, transposed */
    size_t tsrc_cap, tout_cap;
} gf__resampler;

#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define VFRAC 7 /* fractional bits kept between the passes */
#define VSHIFT (GF__RS_BITS - VFRAC)
#define HSHIFT (GF__RS_BITS + VFRAC)
/* The vertical pass's outputs are clamped to [0, GF__RS_TMP_MAX]: 255 with VFRAC
 * fractional bits (the bicubic's lobes overshoot; the triangle never). */
#define GF__RS_TMP_MAX (255 << VFRAC)

/* The 3-/4-channel horizontal passes read past a row's last value: 1
 * (4 lanes per pixel, 3 channels), up to 5 (AVX2: 8 values per pair of
 * taps, and an odd last tap read with weight 0). tmp is padded with 0s. */
#define TMP_PAD 16

/* The AVX2 kernels are built with target("avx2") in a library built for
 * baseline x86-64, and chosen at run time. */
#if defined(__SSE2__) && defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define GF__RS_HAVE_AVX2 1
#include <immintrin.h>
#define AVX2_FN __attribute__((target("avx2")))
#endif

typedef void vpass_fn(const uint8_t *restrict src, size_t stride, const int16_t *restrict w,
                      int taps, int n, int16_t *restrict out);

/* resample_c.c: one output row of the vertical pass (n = span_w * ch
 * values), and the horizontal pass of every row (tmp: out_h rows of n
 * values). */
vpass_fn gf__rs_vpass_row;
void gf__rs_hpass_c(const gf__resampler *r, size_t n, int ch, uint8_t *dst, size_t dst_stride,
                    int flip);

#if defined(__SSE2__)
/* resample_sse2.c: the vertical pass, and the horizontal pass of every row
 * for 3 and 4 channels (tmp: out_h rows of n values); 0 or -1 (no memory). */
vpass_fn gf__rs_vpass_row_sse2;
int gf__rs_hpass34_sse2(gf__resampler *r, size_t n, int ch, uint8_t *dst, size_t dst_stride,
                        int flip);
#endif

#if defined(GF__RS_HAVE_AVX2)
/* resample_avx2.c: the vertical pass, and all of gf__resample for 3 and 4
 * channels; 0 or -1 (no memory). */
vpass_fn gf__rs_vpass_row_avx2;
int gf__rs_resample34_avx2(gf__resampler *r, const uint8_t *src, size_t stride, int ch,
                           uint8_t *dst, size_t dst_stride, int flip);
#endif

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

/* Copies n bytes to dst with non-temporal stores where 16-byte aligned:
 * the destination is a batch slot, written once and read next by another
 * thread or a DMA engine, so reading its lines for ownership and keeping
 * them in this core's cache only costs. Caller fences. */
static inline void stream_copy(uint8_t *restrict dst, const uint8_t *restrict src, size_t n)
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

#endif
