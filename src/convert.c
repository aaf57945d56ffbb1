/* The CPU twin of the device transform (kernels/convert.cu) and the
 * float16/bfloat16 conversions both of them are checked against.
 *
 * Every float value is fmaf((float)x, scale[k], shift[k]): one correctly
 * rounded fused multiply-add, the same operation as the GPU's __fmaf_rn, so
 * the two agree bit for bit. C's fmaf is exact by definition whether gcc
 * emits an FMA instruction or calls libm; nothing else in a value's path
 * rounds (uint8 -> float is exact), so FP contraction settings cannot
 * change a result. NaNs are made canonical (float 0x7fffffff, half and
 * bfloat16 0x7fff, CUDA's canonical NaNs) explicitly on both sides, since
 * x86 and the GPU make different NaNs.
 *
 * Speed: the twin is the host path when there is no GPU, run in chunks on
 * the decode pool. The inner loops are straight-line over fixed-size
 * blocks (CHUNK elements, or PB pixels) so gcc -O2's "very cheap"
 * vectorizer takes them (it will not vectorize a loop that needs an
 * epilogue or a run-time alias check: hence the constant trip counts and
 * the restrict pointers). On x86 the same code is compiled a second time
 * for AVX2+FMA+F16C, where fmaf is one vfmadd instead of a libm call and
 * float16 rounding is vcvtps2ph, and chosen at run time (the portable build
 * is ~10x slower). Flips reverse the pixels of a row block into a small
 * buffer first, so the converting loops only ever read forwards.
 * Like the GPU, this assumes the default floating-point environment (round
 * to nearest; no flush-to-zero, which would only matter for subnormal
 * results, i.e. absurd mean/std). */
#include "config.h"
#include "convert.h"
#include "f16.h"

#include <math.h>
#include <string.h>

/* Sanitizer builds leave inlining to the compiler: forced, every copy of
 * the loops carries its own checks, and ASan + UBSan took 70 s to compile
 * this file (18 s without). Their checks are the same either way. */
#if defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define CV_INLINE static inline __attribute__((always_inline))
#else
#define CV_INLINE static inline
#endif

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define CV_X86 1
#define CV_AVX2_FN __attribute__((target("avx2,fma,f16c")))
#include <cpuid.h>
#include <immintrin.h>
#else
#define CV_X86 0
#endif

/* Elements per NHWC block: a multiple of every channel count (1..4) and of
 * the widest vector's uint8 lanes (64), so a row block of CHUNK / c pixels
 * is exactly one full block. */
#define CHUNK 384
/* Pixels per NCHW block (PB * 4 <= CHUNK: a flipped block fits tmp). */
#define PB 64

size_t gf_dtype_size(gf_dtype dtype)
{
    switch (dtype) {
    case GF_DTYPE_UINT8:
        return 1;
    case GF_DTYPE_FLOAT32:
    case GF_DTYPE_INT32:
        return 4;
    case GF_DTYPE_FLOAT16:
    case GF_DTYPE_BFLOAT16:
        return 2;
    case GF_DTYPE_INT64:
    case GF_DTYPE_FLOAT64:
        return 8;
    }
    return 0;
}

/* scale = 1/std and shift = -mean * scale, each rounded to float, in this
 * order: the GPU receives these very floats, so nothing else is computed
 * differently on the two sides. Note the cost of one fmaf with a rounded
 * scale and shift: where x is close to mean the result's relative error
 * can exceed an ulp of (x - mean) / std (cancellation); its absolute error
 * is at most 2^-24 * (|x - mean| + |mean|) / |std| + half an ulp. */
void gf__convert_init(gf__convert *cv, const gf_settings *s)
{
    memset(cv, 0, sizeof *cv);
    cv->h = s->height;
    cv->w = s->width;
    cv->c = s->channels;
    cv->dtype = s->dtype;
    cv->layout = s->dtype == GF_DTYPE_UINT8 ? GF_LAYOUT_NHWC : s->layout;
    for (int k = 0; k < 4; k++) {
        if (k >= s->channels) { /* unused: identity, never read */
            cv->scale[k] = 1.0f;
            cv->shift[k] = 0.0f;
            continue;
        }
        float sd = s->std[k] == 0.0f ? 1.0f : s->std[k];
        float scale = 1.0f / sd;
        float shift = -s->mean[k] * scale;
        cv->scale[k] = scale;
        cv->shift[k] = shift;
    }
}

size_t gf__convert_sample_bytes(const gf__convert *cv)
{
    if (cv->h <= 0 || cv->w <= 0 || cv->c <= 0)
        return 0;
    return (size_t)cv->h * (size_t)cv->w * (size_t)cv->c * gf_dtype_size(cv->dtype);
}

/* ---- float -> binary16 (f16.h) / bfloat16 -----------------------------
 * Branch-free (every path computed, then selected), so the loops that call
 * them vectorize. */

CV_INLINE uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

CV_INLINE uint16_t bf16_from_bits(uint32_t u)
{
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? 0x7fffu : r);
}

uint16_t gf__f32_to_f16(float f)
{
    return gf__f16_from_bits(f32_bits(f));
}

uint16_t gf__f32_to_bf16(float f)
{
    return bf16_from_bits(f32_bits(f));
}

float gf__f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    uint32_t u;
    if (e == 0x1f) {
        u = sign | 0x7f800000u | (m << 13);
    } else if (e != 0) {
        u = sign | ((e + 112u) << 23) | (m << 13);
    } else { /* zero or subnormal: m * 2^-24, exact in float */
        float f = (float)m * 0x1p-24f;
        return sign ? -f : f;
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float gf__bf16_to_f32(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ---- the conversion loops ---------------------------------------------- */

CV_INLINE float put_f32(float v)
{
    const uint32_t qnan = 0x7fffffffu;
    float canon;
    memcpy(&canon, &qnan, sizeof canon);
    return v == v ? v : canon;
}

CV_INLINE uint16_t put_f16(float v)
{
    return gf__f16_from_bits(f32_bits(v));
}

CV_INLINE uint16_t put_bf16(float v)
{
    return bf16_from_bits(f32_bits(v));
}

#if CV_X86
/* float16 in the AVX2 build: F16C's vcvtps2ph with an immediate
 * round-to-nearest-even is IEEE binary16 conversion (subnormals, overflow
 * to infinity), i.e. exactly gf__f16_from_bits, at a fraction of its cost; NaNs
 * are made canonical first (0x7fffffff converts to 0x7fff). Every CPU with
 * AVX2 has F16C; the dispatch checks both anyway. */
CV_AVX2_FN static void narrow_f16_f16c(const float *restrict v, uint16_t *restrict out, size_t n)
{
    const __m256 canon = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 x = _mm256_loadu_ps(v + j);
        x = _mm256_blendv_ps(canon, x, _mm256_cmp_ps(x, x, _CMP_ORD_Q));
        _mm_storeu_si128((__m128i *)(void *)(out + j),
                         _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    }
    /* The tail from 0, not from j: GCC 12 -O3 otherwise warns that
     * iteration 2^62 - 1 of this loop would be undefined (it cannot be). */
    for (size_t k = 0; k < n - j; k++)
        out[j + k] = put_f16(v[j + k]);
}
#endif

/* Rounds n float values into the output type. `vec` is a constant: 1 in the
 * AVX2 build, 0 in the portable one. */
CV_INLINE void narrow_f32(const float *restrict v, float *restrict out, size_t n, const int vec)
{
    (void)vec;
    for (size_t j = 0; j < n; j++)
        out[j] = put_f32(v[j]);
}

CV_INLINE void narrow_bf16(const float *restrict v, uint16_t *restrict out, size_t n,
                           const int vec)
{
    (void)vec;
    for (size_t j = 0; j < n; j++)
        out[j] = put_bf16(v[j]);
}

CV_INLINE void narrow_f16(const float *restrict v, uint16_t *restrict out, size_t n, const int vec)
{
#if CV_X86
    if (vec) {
        narrow_f16_f16c(v, out, n);
        return;
    }
#endif
    (void)vec;
    for (size_t j = 0; j < n; j++)
        out[j] = put_f16(v[j]);
}

/* dst[i*c + k] = pixel m - 1 - i of src, channel k: a block of m pixels
 * mirrored. The block is first copied forwards into stage (in cache):
 * reading memory backwards defeats the prefetcher (measured 3x slower). */
CV_INLINE void reverse_pixels(uint8_t *restrict dst, const uint8_t *restrict src,
                              uint8_t *restrict stage, int m, int c)
{
    memcpy(stage, src, (size_t)m * c);
    const uint8_t *s = stage + (size_t)(m - 1) * c;
    switch (c) {
    case 1:
        for (int i = 0; i < m; i++)
            dst[i] = s[-i];
        break;
    case 2:
        for (int i = 0; i < m; i++)
            memcpy(dst + 2 * i, s - 2 * i, 2);
        break;
    case 3:
        for (int i = 0; i < m; i++) {
            dst[3 * i] = s[-3 * i];
            dst[3 * i + 1] = s[-3 * i + 1];
            dst[3 * i + 2] = s[-3 * i + 2];
        }
        break;
    default:
        for (int i = 0; i < m; i++)
            memcpy(dst + 4 * i, s - 4 * i, 4);
        break;
    }
}

/* Mirrored rows are read block by block from their right end: a pattern
 * the hardware prefetcher does not follow. Asking for the next row while
 * this one is converted hides that (measured here: 1.5-2x on flipped
 * samples). */
CV_INLINE void prefetch_row(const uint8_t *p, size_t bytes)
{
#if defined(__GNUC__)
    for (size_t off = 0; off < bytes; off += 64)
        __builtin_prefetch(p + off);
#else
    (void)p;
    (void)bytes;
#endif
}

/* The float values, fmaf((float)x, scale, shift):
 *   vals_nhwc: n consecutive elements; scl/shf hold the channel pattern
 *              starting at channel 0.
 *   vals_nchw: n pixels of C channels (C a constant after inlining) into
 *              C separate arrays. */
CV_INLINE void vals_nhwc(const uint8_t *restrict in, float *restrict v, const float *restrict scl,
                         const float *restrict shf, size_t n)
{
    for (size_t j = 0; j < n; j++)
        v[j] = fmaf((float)in[j], scl[j], shf[j]);
}

CV_INLINE void vals_nchw(const uint8_t *restrict in, float *restrict v0, float *restrict v1,
                         float *restrict v2, float *restrict v3, const float *sc, const float *sh,
                         const int C, size_t n)
{
    const float s0 = sc[0], s1 = sc[1], s2 = sc[2], s3 = sc[3];
    const float b0 = sh[0], b1 = sh[1], b2 = sh[2], b3 = sh[3];
    for (size_t p = 0; p < n; p++) {
        v0[p] = fmaf((float)in[p * C], s0, b0);
        if (C > 1)
            v1[p] = fmaf((float)in[p * C + 1], s1, b1);
        if (C > 2)
            v2[p] = fmaf((float)in[p * C + 2], s2, b2);
        if (C > 3)
            v3[p] = fmaf((float)in[p * C + 3], s3, b3);
    }
}

/* Blocks for one output type T:
 *   nhwc_T: n (<= CHUNK) consecutive elements.
 *   nchw_T: n (<= PB) pixels into the C planes at o[k] + at.
 * float32 is written as it is computed; the 16-bit types are computed as
 * floats into a small buffer first, then rounded: two simple loops
 * vectorize far better than one that widens uint8 and narrows to 16 bits
 * at once. */
CV_INLINE void nhwc_f32(const uint8_t *restrict in, float *restrict out, const float *restrict scl,
                        const float *restrict shf, size_t n, const int vec)
{
    (void)vec;
    for (size_t j = 0; j < n; j++)
        out[j] = put_f32(fmaf((float)in[j], scl[j], shf[j]));
}

CV_INLINE void nchw_f32_planes(const uint8_t *restrict in, float *restrict o0,
                               float *restrict o1, float *restrict o2, float *restrict o3,
                               const float *sc, const float *sh, const int C, size_t n)
{
    const float s0 = sc[0], s1 = sc[1], s2 = sc[2], s3 = sc[3];
    const float b0 = sh[0], b1 = sh[1], b2 = sh[2], b3 = sh[3];
    for (size_t p = 0; p < n; p++) {
        o0[p] = put_f32(fmaf((float)in[p * C], s0, b0));
        if (C > 1)
            o1[p] = put_f32(fmaf((float)in[p * C + 1], s1, b1));
        if (C > 2)
            o2[p] = put_f32(fmaf((float)in[p * C + 2], s2, b2));
        if (C > 3)
            o3[p] = put_f32(fmaf((float)in[p * C + 3], s3, b3));
    }
}

/* Each plane its own restrict pointer: the stores provably do not overlap. */
CV_INLINE void nchw_f32(const uint8_t *restrict in, float *const o[4], size_t at,
                        const float *sc, const float *sh, const int C, size_t n, const int vec)
{
    (void)vec;
    nchw_f32_planes(in, o[0] + at, o[1] + at, o[2] + at, o[3] + at, sc, sh, C, n);
}

#define CV_DEFINE_BLOCKS16(SUF)                                                             \
    CV_INLINE void nhwc_##SUF(const uint8_t *restrict in, uint16_t *restrict out,           \
                              const float *scl, const float *shf, size_t n, const int vec)  \
    {                                                                                       \
        float v[CHUNK];                                                                     \
        vals_nhwc(in, v, scl, shf, n);                                                      \
        narrow_##SUF(v, out, n, vec);                                                       \
    }                                                                                       \
    CV_INLINE void nchw_##SUF(const uint8_t *restrict in, uint16_t *const o[4], size_t at,  \
                              const float *sc, const float *sh, const int C, size_t n,      \
                              const int vec)                                                \
    {                                                                                       \
        float v[4][PB];                                                                     \
        vals_nchw(in, v[0], v[1], v[2], v[3], sc, sh, C, n);                                \
        for (int k = 0; k < C; k++)                                                         \
            narrow_##SUF(v[k], o[k] + at, n, vec);                                          \
    }

CV_DEFINE_BLOCKS16(f16)
CV_DEFINE_BLOCKS16(bf16)

/* The rest per output type: sample_T converts one sample, flipped or not,
 * in full blocks (constant trip counts: vectorized). A last partial block
 * is done as the full block ending at the end instead, overlapping the one
 * before and rewriting the same values; only a row or sample smaller than
 * one block takes the scalar loop. */
#define CV_DEFINE_LOOPS(SUF, T)                                                             \
    /* The switch makes C a constant in each copy of the loops. */                          \
    CV_INLINE void nchw_any_##SUF(const uint8_t *restrict in, T *const o[4], size_t at,     \
                                  const float *sc, const float *sh, int c, size_t n,        \
                                  const int vec)                                            \
    {                                                                                       \
        switch (c) {                                                                        \
        case 1:                                                                             \
            nchw_##SUF(in, o, at, sc, sh, 1, n, vec);                                       \
            break;                                                                          \
        case 2:                                                                             \
            nchw_##SUF(in, o, at, sc, sh, 2, n, vec);                                       \
            break;                                                                          \
        case 3:                                                                             \
            nchw_##SUF(in, o, at, sc, sh, 3, n, vec);                                       \
            break;                                                                          \
        default:                                                                            \
            nchw_##SUF(in, o, at, sc, sh, 4, n, vec);                                       \
            break;                                                                          \
        }                                                                                   \
    }                                                                                       \
    CV_INLINE void sample_##SUF(const gf__convert *cv, const float *scl, const float *shf,  \
                                const uint8_t *src, T *dst, int flip, const int vec)        \
    {                                                                                       \
        const int w = cv->w, c = cv->c;                                                     \
        const size_t hw = (size_t)cv->h * (size_t)w, n = hw * (size_t)c;                    \
        const size_t row = (size_t)w * (size_t)c;                                           \
        uint8_t tmp[CHUNK], stage[CHUNK];                                                   \
        if (cv->layout == GF_LAYOUT_NHWC) {                                                 \
            if (!flip) {                                                                    \
                size_t j = 0;                                                               \
                for (; j + CHUNK <= n; j += CHUNK)                                          \
                    nhwc_##SUF(src + j, dst + j, scl, shf, CHUNK, vec);                     \
                if (j < n && n >= CHUNK) /* phase: n - CHUNK is a multiple of c */          \
                    nhwc_##SUF(src + n - CHUNK, dst + n - CHUNK, scl, shf, CHUNK, vec);     \
                else if (j < n)                                                             \
                    nhwc_##SUF(src + j, dst + j, scl, shf, n - j, vec);                     \
                return;                                                                     \
            }                                                                               \
            const int bp = CHUNK / c; /* pixels per block: bp * c == CHUNK */               \
            for (int y = 0; y < cv->h; y++) {                                               \
                const uint8_t *irow = src + (size_t)y * row;                                \
                T *orow = dst + (size_t)y * row;                                            \
                if (y + 1 < cv->h)                                                          \
                    prefetch_row(irow + row, row);                                          \
                for (int x = 0; x < w; x += bp) {                                           \
                    int m = GF__MIN(bp, w - x);                                             \
                    if (m < bp && w >= bp) {                                                \
                        x = w - bp;                                                         \
                        m = bp;                                                             \
                    }                                                                       \
                    reverse_pixels(tmp, irow + (size_t)(w - x - m) * c, stage, m, c);       \
                    if (m == bp)                                                            \
                        nhwc_##SUF(tmp, orow + (size_t)x * c, scl, shf, CHUNK, vec);        \
                    else                                                                    \
                        nhwc_##SUF(tmp, orow + (size_t)x * c, scl, shf, (size_t)m * c, vec); \
                }                                                                           \
            }                                                                               \
            return;                                                                         \
        }                                                                                   \
        T *const o[4] = {dst, dst + (c > 1 ? hw : 0), dst + (c > 2 ? 2 * hw : 0),           \
                         dst + (c > 3 ? 3 * hw : 0)};                                       \
        if (!flip) {                                                                        \
            size_t p = 0;                                                                   \
            for (; p + PB <= hw; p += PB)                                                   \
                nchw_any_##SUF(src + p * c, o, p, cv->scale, cv->shift, c, PB, vec);        \
            if (p < hw && hw >= PB)                                                         \
                nchw_any_##SUF(src + (hw - PB) * c, o, hw - PB, cv->scale, cv->shift, c,    \
                               PB, vec);                                                    \
            else if (p < hw)                                                                \
                nchw_any_##SUF(src + p * c, o, p, cv->scale, cv->shift, c, hw - p, vec);    \
            return;                                                                         \
        }                                                                                   \
        for (int y = 0; y < cv->h; y++) {                                                   \
            const uint8_t *irow = src + (size_t)y * row;                                    \
            if (y + 1 < cv->h)                                                              \
                prefetch_row(irow + row, row);                                              \
            for (int x = 0; x < w; x += PB) {                                               \
                int m = GF__MIN(PB, w - x);                                                 \
                if (m < PB && w >= PB) {                                                    \
                    x = w - PB;                                                             \
                    m = PB;                                                                 \
                }                                                                           \
                size_t at = (size_t)y * w + x;                                              \
                reverse_pixels(tmp, irow + (size_t)(w - x - m) * c, stage, m, c);           \
                if (m == PB)                                                                \
                    nchw_any_##SUF(tmp, o, at, cv->scale, cv->shift, c, PB, vec);           \
                else                                                                        \
                    nchw_any_##SUF(tmp, o, at, cv->scale, cv->shift, c, (size_t)m, vec);    \
            }                                                                               \
        }                                                                                   \
    }

CV_DEFINE_LOOPS(f32, float)
CV_DEFINE_LOOPS(f16, uint16_t)
CV_DEFINE_LOOPS(bf16, uint16_t)

CV_INLINE void sample_u8(const gf__convert *cv, const uint8_t *src, uint8_t *dst, int flip)
{
    const int w = cv->w, c = cv->c;
    const size_t row = (size_t)w * (size_t)c;
    if (!flip) {
        memcpy(dst, src, row * (size_t)cv->h);
        return;
    }
    uint8_t stage[CHUNK];
    const int bp = CHUNK / c;
    for (int y = 0; y < cv->h; y++) {
        if (y + 1 < cv->h)
            prefetch_row(src + (size_t)(y + 1) * row, row);
        for (int x = 0; x < w; x += bp) {
            int m = GF__MIN(bp, w - x);
            reverse_pixels(dst + (size_t)y * row + (size_t)x * c,
                           src + (size_t)y * row + (size_t)(w - x - m) * c, stage, m, c);
        }
    }
}

CV_INLINE void convert_range(const gf__convert *cv, const uint8_t *in, void *out,
                             const uint8_t *flips, int first, int count, const int vec)
{
    const size_t n = (size_t)cv->h * (size_t)cv->w * (size_t)cv->c;
    const size_t sb = gf__convert_sample_bytes(cv);
    float scl[CHUNK], shf[CHUNK];
    if (cv->dtype != GF_DTYPE_UINT8 && cv->layout == GF_LAYOUT_NHWC)
        for (int j = 0; j < CHUNK; j++) {
            scl[j] = cv->scale[j % cv->c];
            shf[j] = cv->shift[j % cv->c];
        }
    for (int i = first; i < first + count; i++) {
        const uint8_t *src = in + (size_t)i * n;
        void *dst = (uint8_t *)out + (size_t)i * sb;
        int flip = flips && flips[i];
        switch (cv->dtype) {
        case GF_DTYPE_UINT8:
            sample_u8(cv, src, dst, flip);
            break;
        case GF_DTYPE_FLOAT32:
            sample_f32(cv, scl, shf, src, dst, flip, vec);
            break;
        case GF_DTYPE_FLOAT16:
            sample_f16(cv, scl, shf, src, dst, flip, vec);
            break;
        case GF_DTYPE_BFLOAT16:
            sample_bf16(cv, scl, shf, src, dst, flip, vec);
            break;
        default: /* a field's element types, never the batch's */
            break;
        }
    }
}

static void convert_generic(const gf__convert *cv, const uint8_t *in, void *out,
                            const uint8_t *flips, int first, int count)
{
    convert_range(cv, in, out, flips, first, count, 0);
}

#if CV_X86
/* F16C from cpuid: clang's __builtin_cpu_supports does not know "f16c".
 * Cached (0 unknown, 1 no, 2 yes): cpuid traps to the hypervisor in VMs. */
static int have_avx2_fma_f16c(void)
{
    static int cached;
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v == 0) {
        unsigned a, b, c = 0, d;
        int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
        v = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c ? 2 : 1;
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return v == 2;
}

CV_AVX2_FN static void convert_avx2(const gf__convert *cv, const uint8_t *in, void *out,
                                    const uint8_t *flips, int first, int count)
{
    convert_range(cv, in, out, flips, first, count, 1);
}
#endif

/* Tests only (declared in tests/test_convert.c): 1 forces the portable
 * build of the loops even where AVX2+FMA+F16C is available, so both builds
 * can be compared; 0 restores the choice. Not for use while conversions
 * run. */
void gf__convert_force_generic(int on);
static int force_generic;

void gf__convert_force_generic(int on)
{
    force_generic = on;
}

void gf__convert_cpu(const gf__convert *cv, const uint8_t *in, void *out, const uint8_t *flips,
                     int first, int count)
{
    if (count <= 0 || cv->h <= 0 || cv->w <= 0 || cv->c < 1 || cv->c > 4)
        return;
#if CV_X86
    if (!force_generic && have_avx2_fma_f16c()) {
        convert_avx2(cv, in, out, flips, first, count);
        return;
    }
#endif
    convert_generic(cv, in, out, flips, first, count);
}
