/* The resampler's portable C kernels (any CPU), run on the decode threads
 * for gf__resample (resample.c chooses among these, resample_sse2.c's and
 * resample_avx2.c's); the SSE2 kernels also finish their rows' tails with
 * gf__rs_vpass_row. Same integer arithmetic as the others, byte-identical
 * output. */
#include "resample_c.h"

/* Loops below work on fixed-size blocks (BLOCK values, per-pixel lanes of
 * 4) so that gcc vectorizes them even at -O2, whose "very cheap" cost
 * model only takes loops whose trip count is a multiple of the vector
 * width and needs no aliasing checks; `restrict` rules those out. */
#define BLOCK 16

/* In bit operations, no comparison: a row's columns past what a decoder
 * wrote (its padding, which the horizontal pass never reads) are passed
 * too, and their undefined bytes must decide no jump (valgrind). */
static inline int16_t clamp_tmp(int32_t v)
{
    v &= ~(v >> 31);                            /* below 0: 0 */
    int32_t over = (GF__RS_TMP_MAX - v) >> 31;  /* above the top: all ones */
    return (int16_t)((v & ~over) | (GF__RS_TMP_MAX & over));
}

/* One output row of the vertical pass: n = span_w * ch values. */
void gf__rs_vpass_row(const uint8_t *restrict src, size_t stride, const int16_t *restrict w,
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
            out[x + k] = clamp_tmp(a[k] >> VSHIFT);
    }
    for (; x < n; x++) {
        int32_t a = 1 << (VSHIFT - 1);
        for (int t = 0; t < taps; t++)
            a += src[(size_t)t * stride + x] * w[t];
        out[x] = clamp_tmp(a >> VSHIFT);
    }
}

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

/* The horizontal pass of every row (tmp: out_h rows of n values). */
void gf__rs_hpass_c(const gf__resampler *r, size_t n, int ch, uint8_t *dst, size_t dst_stride,
                    int flip)
{
    const gf__rs_axis *h = &r->h, *v = &r->v;
    for (int y = 0; y < v->out_n; y++) {
        const int16_t *in = r->tmp + n * y;
        uint8_t *out = dst + dst_stride * y;
        if (ch == 3 || ch == 4)
            hpass_row34_c(in, h, ch, out, flip);
        else
            hpass_n(in, h, ch, out, flip);
    }
}
