/* The CPU twin of the device transform, and the float16/bfloat16
 * conversions both sides use: checked against references written another
 * way (double arithmetic, frexp/ldexp, per-element index maths), on every
 * dtype x layout x channel count x flip mode, at sizes that leave tails. */
#include "config.h"
#include "convert.h"
#include "run_suite.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* In src/convert.c, for tests: 1 = use the portable loops even where the
 * AVX2+FMA build could run. */
void gf__convert_force_generic(int on);

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint32_t rnd(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng_state >> 32);
}

static float rnd_float(float lo, float hi)
{
    return lo + (hi - lo) * (float)(rnd() >> 8) * 0x1p-24f;
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ---- independent references ---------------------------------------------
 * Written with double arithmetic: frexp splits off the exponent, the
 * significand is scaled to an integer range and rounded with nearbyint
 * (the default mode: to nearest, ties to even). Every step is exact in
 * double except that one rounding. NaN -> 0x7fff (CUDA's canonical NaN). */

static uint16_t ref_f16(float f)
{
    if (isnan(f))
        return 0x7fff;
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    double a = fabs((double)f);
    if (isinf(f) || a >= 65520.0) /* 65504 + half its ulp: ties to even = up */
        return sign | 0x7c00;
    if (a < 0x1p-14) /* subnormal half: a multiple of 2^-24 */
        return sign | (uint16_t)nearbyint(a * 0x1p24);
    int e;
    double m = frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    double q = nearbyint(ldexp(m, 11)); /* 11 significant bits: [1024, 2048] */
    if (q == 2048.0) {
        q = 1024.0;
        e++;
    }
    int biased = e - 1 + 15;
    if (biased >= 31)
        return sign | 0x7c00;
    return sign | (uint16_t)(biased << 10) | (uint16_t)(q - 1024.0);
}

static uint16_t ref_bf16(float f)
{
    if (isnan(f))
        return 0x7fff;
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    double a = fabs((double)f);
    if (isinf(f))
        return sign | 0x7f80;
    if (a < 0x1p-126) /* subnormal: a multiple of 2^-133 */
        return sign | (uint16_t)nearbyint(a * 0x1p133);
    int e;
    double m = frexp(a, &e);
    double q = nearbyint(ldexp(m, 8)); /* [128, 256] */
    if (q == 256.0) {
        q = 128.0;
        e++;
    }
    int biased = e - 1 + 127;
    if (biased >= 255)
        return sign | 0x7f80;
    return sign | (uint16_t)(biased << 7) | (uint16_t)(q - 128.0);
}

static double ref_f16_value(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double s = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 31)
        return m ? NAN : s * INFINITY;
    if (e == 0)
        return s * ldexp(m, -24);
    return s * ldexp(1024 + m, e - 25);
}

/* Float patterns where rounding is decided: ties, just off ties, the
 * edges of each format's subnormal and overflow ranges. */
static const uint32_t edge_bits[] = {
    0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007fffff, 0x00800000,
    0x7f800000, 0xff800000, 0x7f800001, 0x7fc00000, 0xffc00000, 0x7fffffff, 0xffffffff,
    0x7f7fffff, 0xff7fffff, 0x7f7f8000, 0x7f7f7fff, 0x7f7e8000, /* bf16: tie at max -> inf */
    0x477fe000, 0x477fefff, 0x477ff000, 0x477ff001, 0x47800000, /* f16 overflow */
    0x38800000, 0x387fffff, 0x387ff000, 0x387fe000,             /* f16 min normal */
    0x33800000, 0x33000000, 0x33000001, 0x32ffffff, 0x33c00000, /* f16 min subnormal */
    0x34200000, 0x34400000, 0x34600000,                         /* subnormal ties */
    0x3f801000, 0x3f803000, 0x3f801001, 0x3f802fff,             /* f16 normal ties */
    0x3f808000, 0x3f818000, 0x3f808001, 0x3f817fff,             /* bf16 ties */
    0x00008000, 0x00018000, 0x00007fff,                         /* bf16 subnormal ties */
    0x3f800000, 0xbf800000, 0x3effffff,
};
#define N_EDGE (sizeof edge_bits / sizeof edge_bits[0])

/* Low 16 bits put under every 2^16th pattern: ties and their neighbours
 * for both formats (f16 drops 13 bits, bf16 16). */
static const uint32_t low_bits[] = {0x0000, 0x0fff, 0x1000, 0x1001, 0x2000, 0x3000,
                                    0x7fff, 0x8000, 0x8001, 0xffff, 0x5a5a};
#define N_LOW (sizeof low_bits / sizeof low_bits[0])

static void check_f16_pattern(uint32_t u)
{
    float f = float_of(u);
    uint16_t got = gf__f32_to_f16(f), want = ref_f16(f);
    if (got != want)
        ck_abort_msg("f16(0x%08x = %a) = 0x%04x, reference 0x%04x", u, (double)f, got, want);
}

static void check_bf16_pattern(uint32_t u)
{
    float f = float_of(u);
    uint16_t got = gf__f32_to_bf16(f), want = ref_bf16(f);
    if (got != want)
        ck_abort_msg("bf16(0x%08x = %a) = 0x%04x, reference 0x%04x", u, (double)f, got, want);
}

START_TEST(f16_rounding_matches_a_double_reference_on_sampled_patterns)
{
    for (size_t i = 0; i < N_EDGE; i++)
        check_f16_pattern(edge_bits[i]);
    for (uint32_t hi = 0; hi < 0x10000; hi++)
        for (size_t j = 0; j < N_LOW; j++)
            check_f16_pattern(hi << 16 | low_bits[j]);
    /* Every pattern whose result is a half subnormal or near the
     * normal boundary, exhaustively in 2^-8 steps of their low bits. */
    for (uint32_t u = 0x33000000; u < 0x38900000; u += 0x100)
        check_f16_pattern(u);
    for (int i = 0; i < 1 << 20; i++)
        check_f16_pattern(rnd());
}
END_TEST

START_TEST(bf16_rounding_matches_a_double_reference_on_sampled_patterns)
{
    for (size_t i = 0; i < N_EDGE; i++)
        check_bf16_pattern(edge_bits[i]);
    for (uint32_t hi = 0; hi < 0x10000; hi++)
        for (size_t j = 0; j < N_LOW; j++)
            check_bf16_pattern(hi << 16 | low_bits[j]);
    for (int i = 0; i < 1 << 20; i++)
        check_bf16_pattern(rnd());
}
END_TEST

START_TEST(f16_rounding_gives_the_documented_results_at_edges)
{
    static const struct {
        uint32_t in;
        uint16_t out;
    } t[] = {
        {0x00000000, 0x0000}, {0x80000000, 0x8000}, {0x3f800000, 0x3c00},
        {0x3f801000, 0x3c00}, /* 1 + 2^-11: tie, to even (down) */
        {0x3f803000, 0x3c02}, /* 1 + 3 * 2^-11: tie, to even (up) */
        {0x3f801001, 0x3c01}, {0x477fe000, 0x7bff}, /* 65504 */
        {0x477fefff, 0x7bff}, {0x477ff000, 0x7c00}, /* 65520: tie -> inf */
        {0x7f800000, 0x7c00}, {0xff800000, 0xfc00}, {0x7f7fffff, 0x7c00},
        {0x33800000, 0x0001}, /* 2^-24 */
        {0x33000000, 0x0000}, /* 2^-25: tie, to even (0) */
        {0x33000001, 0x0001}, {0x33c00000, 0x0002}, /* 1.5 * 2^-24: tie, to 2 */
        {0x387fc000, 0x03ff}, {0x387ff000, 0x0400}, /* rounds up into the normals */
        {0x00000001, 0x0000}, {0x7fc00000, 0x7fff}, {0xffc00001, 0x7fff},
        {0x7f800001, 0x7fff},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        ck_assert_msg(gf__f32_to_f16(float_of(t[i].in)) == t[i].out,
                      "f16(0x%08x) = 0x%04x, want 0x%04x", t[i].in,
                      gf__f32_to_f16(float_of(t[i].in)), t[i].out);
}
END_TEST

START_TEST(bf16_rounding_gives_the_documented_results_at_edges)
{
    static const struct {
        uint32_t in;
        uint16_t out;
    } t[] = {
        {0x3f800000, 0x3f80}, {0x3f808000, 0x3f80}, /* tie, to even (down) */
        {0x3f818000, 0x3f82},                       /* tie, to even (up) */
        {0x3f808001, 0x3f81}, {0x7f7f8000, 0x7f80}, /* tie at max -> inf */
        {0x7f7f7fff, 0x7f7f}, {0x7f800000, 0x7f80}, {0xff800000, 0xff80},
        {0x00008000, 0x0000}, {0x00018000, 0x0002}, {0x80000000, 0x8000},
        {0x7fc00000, 0x7fff}, {0xffffffff, 0x7fff}, {0x7f800001, 0x7fff},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        ck_assert_msg(gf__f32_to_bf16(float_of(t[i].in)) == t[i].out,
                      "bf16(0x%08x) = 0x%04x, want 0x%04x", t[i].in,
                      gf__f32_to_bf16(float_of(t[i].in)), t[i].out);
}
END_TEST

START_TEST(every_half_widens_exactly_and_rounds_back_to_itself)
{
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = gf__f16_to_f32((uint16_t)h);
        double want = ref_f16_value((uint16_t)h);
        if (isnan(want)) {
            ck_assert_msg(isnan(f), "f16 0x%04x is a NaN", h);
            continue;
        }
        ck_assert_msg((double)f == want && !signbit(f) == !signbit(want),
                      "f16 0x%04x -> %a, want %a", h, (double)f, want);
        ck_assert_uint_eq(gf__f32_to_f16(f), h);
    }
}
END_TEST

START_TEST(every_bfloat16_widens_exactly_and_rounds_back_to_itself)
{
    for (uint32_t b = 0; b < 0x10000; b++) {
        float f = gf__bf16_to_f32((uint16_t)b);
        ck_assert_uint_eq(bits_of(f), b << 16);
        if (!isnan(f))
            ck_assert_uint_eq(gf__f32_to_bf16(f), b);
    }
}
END_TEST

/* ---- the CPU twin -------------------------------------------------------- */

typedef struct shape {
    int h, w, c;
    gf_dtype dtype;
    gf_layout layout;
    float mean[4], std[4];
} shape;

static void settings_for(gf_settings *s, const shape *sh)
{
    memset(s, 0, sizeof *s); /* only the fields convert reads */
    s->height = sh->h;
    s->width = sh->w;
    s->channels = sh->c;
    s->dtype = sh->dtype;
    s->layout = sh->layout;
    memcpy(s->mean, sh->mean, sizeof s->mean);
    memcpy(s->std, sh->std, sizeof s->std);
}

/* Input byte for output (sample i, row y, column x, channel k). */
static uint8_t input_at(const shape *sh, const uint8_t *in, const uint8_t *flips, int i, int y,
                        int x, int k)
{
    int sx = flips && flips[i] ? sh->w - 1 - x : x;
    size_t n = (size_t)sh->h * sh->w * sh->c;
    return in[(size_t)i * n + ((size_t)y * sh->w + sx) * sh->c + k];
}

/* Element offset of (y, x, k) in one converted sample. */
static size_t output_at(const shape *sh, gf_layout layout, int y, int x, int k)
{
    if (layout == GF_LAYOUT_NCHW)
        return ((size_t)k * sh->h + y) * sh->w + x;
    return ((size_t)y * sh->w + x) * sh->c + k;
}

/* |v - (x - mean)/std| may reach 2^-24 * (|T| + |mean/std|) (scale and
 * shift are rounded floats; see gf__convert_init) plus half an ulp of v
 * (the fmaf's own rounding), plus 2^-149 should the shift be subnormal. */
static double f32_bound(double t, double mean_over_std, float v)
{
    float av = fabsf(v);
    double ulp = (double)nextafterf(av, INFINITY) - (double)av;
    return 0x1p-24 * (fabs(t) + fabs(mean_over_std)) * (1 + 0x1p-23) + 0.5 * ulp + 0x1p-149;
}

static double half_ulp16(float v, int bf16)
{
    int e;
    frexp(fabs((double)v), &e); /* |v| in [2^(e-1), 2^e) */
    double ulp = ldexp(1.0, e - 1 - (bf16 ? 7 : 10));
    double min = bf16 ? 0x1p-133 : 0x1p-24;
    return 0.5 * (ulp > min ? ulp : min);
}

/* Converts count random samples of shape sh (flips may be NULL) and checks
 * every output value against the reference, and that every output byte
 * was written (two runs over different poison agree) and none past it. */
static void check_convert(const shape *sh, int count, const uint8_t *flips)
{
    gf_settings s;
    settings_for(&s, sh);
    gf__convert cv;
    gf__convert_init(&cv, &s);
    const size_t n = (size_t)sh->h * sh->w * sh->c, sb = gf__convert_sample_bytes(&cv);
    const gf_layout layout = sh->dtype == GF_DTYPE_UINT8 ? GF_LAYOUT_NHWC : sh->layout;
    ck_assert_uint_eq(sb, n * gf_dtype_size(sh->dtype));
    uint8_t *in = malloc(n * count);
    uint8_t *out = malloc(sb * count + 64), *out2 = malloc(sb * count + 64);
    ck_assert(in && out && out2);
    for (size_t j = 0; j < n * count; j++)
        in[j] = (uint8_t)rnd();
    in[0] = 0;
    in[n * count - 1] = 255;
    memset(out, 0xA5, sb * count + 64);
    memset(out2, 0x5A, sb * count + 64);
    gf__convert_cpu(&cv, in, out, flips, 0, count);
    gf__convert_cpu(&cv, in, out2, flips, 0, count);
    ck_assert_msg(memcmp(out, out2, sb * count) == 0, "an output byte was not written");
    for (int j = 0; j < 64; j++)
        ck_assert_msg(out[sb * count + j] == 0xA5, "wrote past the batch");

    for (int i = 0; i < count; i++) {
        const uint8_t *o = out + (size_t)i * sb;
        for (int y = 0; y < sh->h; y++)
            for (int x = 0; x < sh->w; x++)
                for (int k = 0; k < sh->c; k++) {
                    uint8_t px = input_at(sh, in, flips, i, y, x, k);
                    size_t at = output_at(sh, layout, y, x, k);
                    if (sh->dtype == GF_DTYPE_UINT8) {
                        ck_assert_uint_eq(o[at], px);
                        continue;
                    }
                    double sd = sh->std[k] == 0.0f ? 1.0 : (double)sh->std[k];
                    double t = ((double)px - sh->mean[k]) / sd;
                    float v = fmaf((float)px, cv.scale[k], cv.shift[k]);
                    ck_assert_msg(fabs((double)v - t) <= f32_bound(t, sh->mean[k] / sd, v),
                                  "fmaf value %a is off (x - mean) / std = %a", (double)v, t);
                    if (sh->dtype == GF_DTYPE_FLOAT32) {
                        float got;
                        memcpy(&got, o + at * 4, 4);
                        if (bits_of(got) != bits_of(v))
                            ck_abort_msg("sample %d (%d,%d,%d): %a, want fmaf = %a", i, y, x,
                                         k, (double)got, (double)v);
                        continue;
                    }
                    /* 16-bit: the float32 value rounded once more, to nearest
                     * even. Double rounding (float64 -> float32 -> 16 bits)
                     * can differ from rounding (x - mean)/std directly, so
                     * the distance to it is bounded by half a 16-bit ulp
                     * plus the float32 bound, not by half an ulp alone. */
                    int bf = sh->dtype == GF_DTYPE_BFLOAT16;
                    uint16_t got;
                    memcpy(&got, o + at * 2, 2);
                    uint16_t want = bf ? gf__f32_to_bf16(v) : gf__f32_to_f16(v);
                    uint16_t indep = bf ? ref_bf16(v) : ref_f16(v);
                    if (got != want || got != indep)
                        ck_abort_msg("sample %d (%d,%d,%d): 0x%04x, want 0x%04x (reference "
                                     "0x%04x) from %a",
                                     i, y, x, k, got, want, indep, (double)v);
                    double gv = bf ? gf__bf16_to_f32(got) : gf__f16_to_f32(got);
                    if (!bf && fabsf(v) >= 65520.0f) {
                        ck_assert(isinf(gv) && !signbit(gv) == !signbit(v));
                        continue;
                    }
                    ck_assert_msg(fabs(gv - t) <= half_ulp16(v, bf) + f32_bound(t, sh->mean[k] / sd, v),
                                  "16-bit %a is off %a", gv, t);
                }
    }
    free(in);
    free(out);
    free(out2);
}

static const int sizes[][2] = {{1, 1}, {3, 5}, {7, 13}, {5, 67}, {4, 131}, {2, 200}, {3, 64}};
#define N_SIZES (sizeof sizes / sizeof sizes[0])
static const int channel_counts[] = {1, 3, 4};

static void random_norm(shape *sh)
{
    for (int k = 0; k < 4; k++) {
        sh->mean[k] = rnd_float(0.0f, 255.0f);
        sh->std[k] = rnd_float(0.5f, 80.0f);
    }
}

/* Every layout x channel count x size x flip mode (none, all off, mixed)
 * for one dtype. */
static void check_dtype(gf_dtype dtype)
{
    for (int layout = 0; layout < 2; layout++)
        for (size_t ci = 0; ci < 3; ci++)
            for (size_t si = 0; si < N_SIZES; si++)
                for (int fm = 0; fm < 3; fm++) {
                    shape sh = {sizes[si][0], sizes[si][1], channel_counts[ci], dtype,
                                (gf_layout)layout, {0}, {0}};
                    random_norm(&sh);
                    if (si == 2)
                        sh.std[1] = 0.0f; /* means 1 */
                    uint8_t flips[4] = {0, 0, 0, 0};
                    if (fm == 2) {
                        flips[0] = 1;
                        flips[2] = 7; /* any non-zero */
                        flips[3] = 1;
                    }
                    check_convert(&sh, 4, fm == 0 ? NULL : flips);
                }
}

START_TEST(float32_is_one_fmaf_within_its_error_bound_of_float64)
{
    check_dtype(GF_DTYPE_FLOAT32);
}
END_TEST

START_TEST(float16_is_the_float32_value_rounded_to_nearest_even)
{
    check_dtype(GF_DTYPE_FLOAT16);
}
END_TEST

START_TEST(bfloat16_is_the_float32_value_rounded_to_nearest_even)
{
    check_dtype(GF_DTYPE_BFLOAT16);
}
END_TEST

START_TEST(uint8_is_an_exact_copy_or_mirror)
{
    check_dtype(GF_DTYPE_UINT8);
}
END_TEST

/* With std a power of two, scale and shift are exact, so fmaf returns
 * (x - mean)/std correctly rounded: within half an ulp of float64. (In
 * general it is not within 1 ulp: where x is close to mean, rounding
 * 1/std and -mean/std costs more than the tiny result's ulp.) */
START_TEST(float32_is_correctly_rounded_when_std_is_a_power_of_two)
{
    static const float stds[] = {1.0f, 2.0f, 64.0f, 0.5f, 0.125f};
    for (size_t si = 0; si < sizeof stds / sizeof stds[0]; si++)
        for (int layout = 0; layout < 2; layout++) {
            shape sh = {3, 37, 3, GF_DTYPE_FLOAT32, (gf_layout)layout, {0}, {0}};
            for (int k = 0; k < 4; k++) {
                sh.mean[k] = rnd_float(0.0f, 255.0f);
                sh.std[k] = stds[si];
            }
            gf_settings s;
            settings_for(&s, &sh);
            gf__convert cv;
            gf__convert_init(&cv, &s);
            uint8_t in[3 * 37 * 3];
            float out[3 * 37 * 3];
            for (size_t j = 0; j < sizeof in; j++)
                in[j] = (uint8_t)rnd();
            gf__convert_cpu(&cv, in, out, NULL, 0, 1);
            for (int y = 0; y < 3; y++)
                for (int x = 0; x < 37; x++)
                    for (int k = 0; k < 3; k++) {
                        double t = ((double)in[(y * 37 + x) * 3 + k] - sh.mean[k]) / stds[si];
                        float v = out[output_at(&sh, sh.layout, y, x, k)];
                        ck_assert_msg(v == (float)t, "%a is not %a rounded", (double)v, t);
                    }
        }
}
END_TEST

START_TEST(a_range_touches_only_its_samples)
{
    shape sh = {5, 9, 3, GF_DTYPE_FLOAT16, GF_LAYOUT_NCHW, {0}, {0}};
    random_norm(&sh);
    for (int dt = 0; dt < 4; dt++) {
        sh.dtype = (gf_dtype)dt;
        gf_settings s;
        settings_for(&s, &sh);
        gf__convert cv;
        gf__convert_init(&cv, &s);
        const int count = 10;
        const size_t n = 5 * 9 * 3, sb = gf__convert_sample_bytes(&cv);
        uint8_t in[10 * 5 * 9 * 3], flips[10];
        for (size_t j = 0; j < sizeof in; j++)
            in[j] = (uint8_t)rnd();
        for (int i = 0; i < count; i++)
            flips[i] = (uint8_t)(rnd() & 1);
        uint8_t *all = malloc(sb * count), *part = malloc(sb * count);
        ck_assert(all && part);
        gf__convert_cpu(&cv, in, all, flips, 0, count);
        memset(part, 0xA5, sb * count);
        gf__convert_cpu(&cv, in, part, flips, 3, 4);
        for (int i = 0; i < count; i++) {
            const uint8_t *p = part + (size_t)i * sb;
            if (i >= 3 && i < 7) {
                ck_assert_msg(memcmp(p, all + (size_t)i * sb, sb) == 0, "sample %d differs", i);
                continue;
            }
            for (size_t j = 0; j < sb; j++)
                ck_assert_msg(p[j] == 0xA5, "sample %d outside the range was written", i);
        }
        (void)n;
        free(all);
        free(part);
    }
}
END_TEST

typedef struct job {
    const gf__convert *cv;
    const uint8_t *in, *flips;
    void *out;
    int first, count;
} job;

static void *run_job(void *arg)
{
    job *j = arg;
    gf__convert_cpu(j->cv, j->in, j->out, j->flips, j->first, j->count);
    return NULL;
}

START_TEST(disjoint_ranges_on_threads_give_the_batch_of_one_call)
{
    shape sh = {17, 29, 3, GF_DTYPE_FLOAT32, GF_LAYOUT_NCHW, {0}, {0}};
    random_norm(&sh);
    gf_settings s;
    settings_for(&s, &sh);
    gf__convert cv;
    gf__convert_init(&cv, &s);
    enum { COUNT = 32, THREADS = 4 };
    const size_t n = 17 * 29 * 3, sb = gf__convert_sample_bytes(&cv);
    uint8_t *in = malloc(n * COUNT), flips[COUNT];
    uint8_t *one = malloc(sb * COUNT), *many = malloc(sb * COUNT);
    ck_assert(in && one && many);
    for (size_t j = 0; j < n * COUNT; j++)
        in[j] = (uint8_t)rnd();
    for (int i = 0; i < COUNT; i++)
        flips[i] = (uint8_t)(i % 3 == 0);
    gf__convert_cpu(&cv, in, one, flips, 0, COUNT);
    memset(many, 0xA5, sb * COUNT);
    pthread_t th[THREADS];
    job jobs[THREADS];
    for (int t = 0; t < THREADS; t++) {
        jobs[t] = (job){&cv, in, flips, many, t * COUNT / THREADS, COUNT / THREADS};
        ck_assert_int_eq(pthread_create(&th[t], NULL, run_job, &jobs[t]), 0);
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    ck_assert(memcmp(one, many, sb * COUNT) == 0);
    free(in);
    free(one);
    free(many);
}
END_TEST

/* The AVX2+FMA build (where the CPU has it) and the portable build must
 * give the same bytes: a seed gives the same batch on any machine. */
START_TEST(portable_and_vector_builds_agree_bit_for_bit)
{
    for (int dt = 0; dt < 4; dt++)
        for (int layout = 0; layout < 2; layout++)
            for (int c = 1; c <= 4; c++)
                for (size_t si = 0; si < N_SIZES; si++) {
                    shape sh = {sizes[si][0], sizes[si][1], c, (gf_dtype)dt, (gf_layout)layout,
                                {0}, {0}};
                    random_norm(&sh);
                    gf_settings s;
                    settings_for(&s, &sh);
                    gf__convert cv;
                    gf__convert_init(&cv, &s);
                    const int count = 3;
                    const size_t n = (size_t)sh.h * sh.w * c, sb = gf__convert_sample_bytes(&cv);
                    uint8_t *in = malloc(n * count), flips[3] = {1, 0, 1};
                    uint8_t *a = malloc(sb * count), *b = malloc(sb * count);
                    ck_assert(in && a && b);
                    for (size_t j = 0; j < n * count; j++)
                        in[j] = (uint8_t)rnd();
                    gf__convert_cpu(&cv, in, a, flips, 0, count);
                    gf__convert_force_generic(1);
                    gf__convert_cpu(&cv, in, b, flips, 0, count);
                    gf__convert_force_generic(0);
                    ck_assert_msg(memcmp(a, b, sb * count) == 0,
                                  "dtype %d layout %d c %d size %dx%d", dt, layout, c, sh.h, sh.w);
                    free(in);
                    free(a);
                    free(b);
                }
}
END_TEST

/* NaN from a NaN mean, or inf * 0 from a std so small that 1/std is
 * infinite: stored as the GPU's canonical NaN, whatever x86 made. */
START_TEST(nan_results_are_stored_as_the_canonical_nan)
{
    for (int dt = 1; dt < 4; dt++)
        for (int layout = 0; layout < 2; layout++) {
            shape sh = {2, 8, 2, (gf_dtype)dt, (gf_layout)layout, {NAN, 0.0f}, {1.0f, 1e-45f}};
            gf_settings s;
            settings_for(&s, &sh);
            gf__convert cv;
            gf__convert_init(&cv, &s);
            uint8_t in[2 * 8 * 2];
            uint8_t out[2 * 8 * 2 * 4];
            memset(in, 0, sizeof in); /* channel 1: 0 * inf + -0 * inf = NaN */
            gf__convert_cpu(&cv, in, out, NULL, 0, 1);
            for (int p = 0; p < 16; p++)
                for (int k = 0; k < 2; k++) {
                    size_t at = output_at(&sh, sh.layout, p / 8, p % 8, k);
                    if (dt == GF_DTYPE_FLOAT32) {
                        uint32_t u;
                        memcpy(&u, out + at * 4, 4);
                        ck_assert_uint_eq(u, 0x7fffffff);
                    } else {
                        uint16_t u;
                        memcpy(&u, out + at * 2, 2);
                        ck_assert_uint_eq(u, 0x7fff);
                    }
                }
        }
}
END_TEST

START_TEST(float16_overflows_to_infinity_with_a_tiny_std)
{
    shape sh = {3, 11, 1, GF_DTYPE_FLOAT16, GF_LAYOUT_NCHW, {100.0f}, {0.001f}};
    check_convert(&sh, 2, NULL);
    gf_settings s;
    settings_for(&s, &sh);
    gf__convert cv;
    gf__convert_init(&cv, &s);
    uint8_t in[2] = {255, 0};
    uint16_t out[2];
    sh.h = 1;
    sh.w = 2;
    cv.h = 1;
    cv.w = 2;
    gf__convert_cpu(&cv, in, out, NULL, 0, 1);
    ck_assert_uint_eq(out[0], 0x7c00);
    ck_assert_uint_eq(out[1], 0xfc00);
}
END_TEST

/* Scales that put the values where 16-bit rounding is delicate: half
 * subnormals with ties (x * 2^-25, x * 2^-30), beyond 65504, bfloat16
 * subnormals. Set on cv directly; the outputs must be the independent
 * reference's rounding of fmaf, in both builds (vector blocks included:
 * w >= 64). */
START_TEST(sixteen_bit_rounding_of_subnormals_ties_and_overflow_in_the_converter)
{
    static const float scales[] = {0x1p-25f, 0x1p-30f, 0x3p-27f, 1.0f / 3.0f, 300.0f, 0x1p-140f,
                                   0x1p-133f, -0x1p-24f};
    static const float shifts[] = {0.0f, 0x1p-26f, -0x1p-20f, 0.0f, -30000.0f, 0.0f, 0x1p-134f,
                                   0.0f};
    enum { H = 3, W = 70, C = 3, COUNT = 2 };
    uint8_t in[COUNT * H * W * C], flips[COUNT] = {0, 1};
    uint16_t out[COUNT * H * W * C];
    for (size_t j = 0; j < sizeof in; j++)
        in[j] = (uint8_t)j;
    for (int generic = 0; generic < 2; generic++)
        for (int dt = GF_DTYPE_FLOAT16; dt <= GF_DTYPE_BFLOAT16; dt++)
            for (int layout = 0; layout < 2; layout++)
                for (size_t si = 0; si < sizeof scales / sizeof scales[0]; si++) {
                    shape sh = {H, W, C, (gf_dtype)dt, (gf_layout)layout, {0}, {1, 1, 1, 1}};
                    gf_settings s;
                    settings_for(&s, &sh);
                    gf__convert cv;
                    gf__convert_init(&cv, &s);
                    for (int k = 0; k < 4; k++) {
                        cv.scale[k] = scales[si] * (float)(k + 1);
                        cv.shift[k] = shifts[si];
                    }
                    gf__convert_force_generic(generic);
                    gf__convert_cpu(&cv, in, out, flips, 0, COUNT);
                    gf__convert_force_generic(0);
                    for (int i = 0; i < COUNT; i++)
                        for (int y = 0; y < H; y++)
                            for (int x = 0; x < W; x++)
                                for (int k = 0; k < C; k++) {
                                    uint8_t px = input_at(&sh, in, flips, i, y, x, k);
                                    float v = fmaf((float)px, cv.scale[k], cv.shift[k]);
                                    uint16_t want = dt == GF_DTYPE_FLOAT16 ? ref_f16(v) : ref_bf16(v);
                                    uint16_t got = out[(size_t)i * H * W * C +
                                                       output_at(&sh, sh.layout, y, x, k)];
                                    if (got != want)
                                        ck_abort_msg("%s dtype %d layout %d: %a -> 0x%04x, want "
                                                     "0x%04x",
                                                     generic ? "portable" : "vector", dt, layout,
                                                     (double)v, got, want);
                                }
                }
}
END_TEST

/* ---- init ------------------------------------------------------------------ */

START_TEST(init_takes_scale_as_one_over_std_and_shift_as_minus_mean_times_scale)
{
    gf_settings s;
    memset(&s, 0, sizeof s);
    s.height = 4;
    s.width = 6;
    s.channels = 3;
    s.dtype = GF_DTYPE_FLOAT32;
    s.layout = GF_LAYOUT_NCHW;
    const float mean[4] = {123.675f, 116.28f, 103.53f, 9.0f};
    const float std[4] = {58.395f, 0.0f, 57.375f, 3.0f};
    memcpy(s.mean, mean, sizeof mean);
    memcpy(s.std, std, sizeof std);
    gf__convert cv;
    gf__convert_init(&cv, &s);
    ck_assert_int_eq(cv.h, 4);
    ck_assert_int_eq(cv.w, 6);
    ck_assert_int_eq(cv.c, 3);
    ck_assert_int_eq(cv.dtype, GF_DTYPE_FLOAT32);
    ck_assert_int_eq(cv.layout, GF_LAYOUT_NCHW);
    volatile float one = 1.0f; /* keep the reference at run time, in float */
    for (int k = 0; k < 3; k++) {
        float sd = std[k] == 0.0f ? 1.0f : std[k];
        float scale = one / sd;
        float shift = -mean[k] * scale;
        ck_assert_uint_eq(bits_of(cv.scale[k]), bits_of(scale));
        ck_assert_uint_eq(bits_of(cv.shift[k]), bits_of(shift));
    }
    ck_assert(cv.scale[1] == 1.0f); /* std 0 means 1 */
    ck_assert(cv.shift[1] == -116.28f);
    ck_assert_uint_eq(gf__convert_sample_bytes(&cv), 4 * 6 * 3 * 4);
}
END_TEST

START_TEST(uint8_is_always_nhwc)
{
    gf_settings s;
    memset(&s, 0, sizeof s);
    s.height = 2;
    s.width = 3;
    s.channels = 4;
    s.dtype = GF_DTYPE_UINT8;
    s.layout = GF_LAYOUT_NCHW;
    gf__convert cv;
    gf__convert_init(&cv, &s);
    ck_assert_int_eq(cv.layout, GF_LAYOUT_NHWC);
    ck_assert_uint_eq(gf__convert_sample_bytes(&cv), 2 * 3 * 4);
    s.dtype = GF_DTYPE_BFLOAT16;
    gf__convert_init(&cv, &s);
    ck_assert_int_eq(cv.layout, GF_LAYOUT_NCHW);
    ck_assert_uint_eq(gf__convert_sample_bytes(&cv), 2 * 3 * 4 * 2);
}
END_TEST

START_TEST(channels_beyond_c_are_ignored)
{
    shape sh = {3, 7, 1, GF_DTYPE_FLOAT32, GF_LAYOUT_NHWC, {10.0f, 20.0f, 30.0f, 40.0f},
                {2.0f, 3.0f, 4.0f, 5.0f}};
    uint8_t in[21];
    for (int j = 0; j < 21; j++)
        in[j] = (uint8_t)(j * 11);
    float a[21], b[21];
    for (int pass = 0; pass < 2; pass++) {
        gf_settings s;
        settings_for(&s, &sh);
        gf__convert cv;
        gf__convert_init(&cv, &s);
        gf__convert_cpu(&cv, in, pass ? b : a, NULL, 0, 1);
        sh.mean[1] = sh.mean[2] = sh.mean[3] = NAN;
        sh.std[1] = sh.std[2] = sh.std[3] = -7.0f;
    }
    ck_assert(memcmp(a, b, sizeof a) == 0);
    for (int j = 0; j < 21; j++)
        ck_assert(a[j] == fmaf((float)in[j], 0.5f, -5.0f));
}
END_TEST

START_TEST(dtype_size_is_the_element_size)
{
    ck_assert_uint_eq(gf_dtype_size(GF_DTYPE_UINT8), 1);
    ck_assert_uint_eq(gf_dtype_size(GF_DTYPE_FLOAT32), 4);
    ck_assert_uint_eq(gf_dtype_size(GF_DTYPE_FLOAT16), 2);
    ck_assert_uint_eq(gf_dtype_size(GF_DTYPE_BFLOAT16), 2);
    ck_assert_uint_eq(gf_dtype_size((gf_dtype)99), 0);
}
END_TEST

START_TEST(an_empty_range_writes_nothing)
{
    shape sh = {2, 2, 3, GF_DTYPE_FLOAT32, GF_LAYOUT_NHWC, {0}, {1, 1, 1, 1}};
    gf_settings s;
    settings_for(&s, &sh);
    gf__convert cv;
    gf__convert_init(&cv, &s);
    uint8_t in[12] = {0};
    uint8_t out[48];
    memset(out, 0xA5, sizeof out);
    gf__convert_cpu(&cv, in, out, NULL, 0, 0);
    for (size_t j = 0; j < sizeof out; j++)
        ck_assert_uint_eq(out[j], 0xA5);
}
END_TEST

static Suite *convert_suite(void)
{
    Suite *su = suite_create("convert");
    TCase *tc = tcase_create("halves");
    tcase_add_test(tc, f16_rounding_matches_a_double_reference_on_sampled_patterns);
    tcase_add_test(tc, bf16_rounding_matches_a_double_reference_on_sampled_patterns);
    tcase_add_test(tc, f16_rounding_gives_the_documented_results_at_edges);
    tcase_add_test(tc, bf16_rounding_gives_the_documented_results_at_edges);
    tcase_add_test(tc, every_half_widens_exactly_and_rounds_back_to_itself);
    tcase_add_test(tc, every_bfloat16_widens_exactly_and_rounds_back_to_itself);
    suite_add_tcase(su, tc);

    tc = tcase_create("twin");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, float32_is_one_fmaf_within_its_error_bound_of_float64);
    tcase_add_test(tc, float16_is_the_float32_value_rounded_to_nearest_even);
    tcase_add_test(tc, bfloat16_is_the_float32_value_rounded_to_nearest_even);
    tcase_add_test(tc, uint8_is_an_exact_copy_or_mirror);
    tcase_add_test(tc, float32_is_correctly_rounded_when_std_is_a_power_of_two);
    tcase_add_test(tc, a_range_touches_only_its_samples);
    tcase_add_test(tc, disjoint_ranges_on_threads_give_the_batch_of_one_call);
    tcase_add_test(tc, portable_and_vector_builds_agree_bit_for_bit);
    tcase_add_test(tc, nan_results_are_stored_as_the_canonical_nan);
    tcase_add_test(tc, float16_overflows_to_infinity_with_a_tiny_std);
    tcase_add_test(tc, sixteen_bit_rounding_of_subnormals_ties_and_overflow_in_the_converter);
    tcase_add_test(tc, an_empty_range_writes_nothing);
    suite_add_tcase(su, tc);

    tc = tcase_create("init");
    tcase_add_test(tc, init_takes_scale_as_one_over_std_and_shift_as_minus_mean_times_scale);
    tcase_add_test(tc, uint8_is_always_nhwc);
    tcase_add_test(tc, channels_beyond_c_are_ignored);
    tcase_add_test(tc, dtype_size_is_the_element_size);
    suite_add_tcase(su, tc);
    return su;
}

int main(void)
{
    return tu_run_suite(convert_suite());
}
