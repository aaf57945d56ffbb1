/* Resampler kernels: the plain C, SSE2 and AVX2 paths must give the same
 * bytes on every input (a seed gives the same batch on any CPU), and all
 * must match a naive reference of the documented fixed-point arithmetic,
 * for every interpolation (bilinear, bicubic: its negative weights and
 * clamped overshoot; nearest: its one-tap tables and gather). */
#include "resample.h"
#include "run_suite.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define HAVE_CPU_CHECK 1
#endif

static uint64_t rng_state;

static uint32_t rnd(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng_state >> 33);
}

static int rnd_in(int lo, int hi) /* [lo, hi] */
{
    return lo + (int)(rnd() % (uint32_t)(hi - lo + 1));
}

static double rnd_unit(void)
{
    return rnd() / 2147483648.0; /* rnd() has 31 bits */
}

static const int isas[] = {GF__RS_ISA_C, GF__RS_ISA_SSE2, GF__RS_ISA_AVX2};
static const char *const isa_names[] = {"C", "SSE2", "AVX2"};
#define NISA 3

/* Which ISAs this build and CPU can run; notes those it skips, once. */
static int isa_available(int k)
{
    static int noted[NISA];
    int ok = gf__rs_force_isa(isas[k]) == 0;
    gf__rs_force_isa(GF__RS_ISA_AUTO);
    if (!ok && !noted[k]) {
        noted[k] = 1;
        printf("note: no %s on this build/CPU: its comparison is skipped\n", isa_names[k]);
    }
    return ok;
}

static uint8_t clamp8(int32_t a)
{
    a >>= 21;
    return (uint8_t)(a < 0 ? 0 : a > 255 ? 255 : a);
}

static int16_t first_pass(int32_t a) /* 7 fractional bits kept, clamped */
{
    a >>= 7;
    return (int16_t)(a < 0 ? 0 : a > 255 << 7 ? 255 << 7 : a);
}

/* The documented arithmetic, one output value at a time: vertical pass
 * first, or (bicubic: PIL's order) horizontal first. */
static void reference(const gf__rs_axis *h, const gf__rs_axis *v, const uint8_t *src,
                      size_t stride, int ch, uint8_t *dst, size_t ds, int flip)
{
    int span_w = h->hi - h->lo, span_h = v->hi - v->lo;
    if (h->mode == GF_INTERP_BICUBIC) {
        int16_t *tmp = malloc(sizeof *tmp * (size_t)span_h * h->out_n * ch);
        ck_assert_ptr_nonnull(tmp);
        for (int y = 0; y < span_h; y++)
            for (int i = 0; i < h->out_n; i++)
                for (int c = 0; c < ch; c++) {
                    int32_t a = 1 << 6;
                    for (int t = 0; t < h->taps; t++)
                        a += h->w[(size_t)i * h->taps + t] *
                             src[(size_t)y * stride + (size_t)(h->start[i] + t) * ch + c];
                    tmp[((size_t)y * h->out_n + i) * ch + c] = first_pass(a);
                }
        for (int y = 0; y < v->out_n; y++)
            for (int i = 0; i < h->out_n; i++)
                for (int c = 0; c < ch; c++) {
                    int32_t a = 1 << 20;
                    for (int t = 0; t < v->taps; t++)
                        a += v->w[(size_t)y * v->taps + t] *
                             tmp[((size_t)(v->start[y] + t) * h->out_n + i) * ch + c];
                    int o = flip ? h->out_n - 1 - i : i;
                    dst[(size_t)y * ds + (size_t)o * ch + c] = clamp8(a);
                }
        free(tmp);
        return;
    }
    int16_t *tmp = malloc(sizeof *tmp * (size_t)span_w * ch);
    ck_assert_ptr_nonnull(tmp);
    for (int y = 0; y < v->out_n; y++) {
        for (int x = 0; x < span_w * ch; x++) {
            int32_t a = 1 << 6;
            for (int t = 0; t < v->taps; t++)
                a += v->w[(size_t)y * v->taps + t] * src[(size_t)(v->start[y] + t) * stride + x];
            tmp[x] = first_pass(a);
        }
        for (int i = 0; i < h->out_n; i++)
            for (int c = 0; c < ch; c++) {
                int32_t a = 1 << 20;
                for (int t = 0; t < h->taps; t++)
                    a += h->w[(size_t)i * h->taps + t] * tmp[(size_t)(h->start[i] + t) * ch + c];
                int o = flip ? h->out_n - 1 - i : i;
                dst[(size_t)y * ds + (size_t)o * ch + c] = clamp8(a);
            }
    }
    free(tmp);
}

typedef struct geo {
    int in_w, in_h, out_w, out_h, ch, flip;
    gf_interpolation mode;
    double x0, w, y0, h;
} geo;

/* One axis: a source interval of in_n samples mapped onto out_n, at a
 * scale from 1/10 (enlarge) to 10 (shrink, up to ~20 taps), sometimes
 * touching or just past the edges. */
static void rnd_axis(int *in_n, double *x0, double *len, int *out_n)
{
    double scale = exp(log(0.1) + (log(10.0) - log(0.1)) * rnd_unit());
    if (rnd() % 8 == 0)
        scale = rnd() & 1 ? 1.0 : floor(1 + 9 * rnd_unit()); /* integer factors */
    int o = rnd() % 8 == 0 ? rnd_in(1, 8) : rnd_in(1, 200);
    if (o * scale > 400)
        o = (int)(400 / scale) + 1;
    double l = o * scale;
    int n = (int)ceil(l) + (rnd() % 3 ? rnd_in(0, 60) : 0);
    double x = (n - l) * rnd_unit();
    switch (rnd() % 6) {
    case 0: x = 0; break;                          /* left edge */
    case 1: x = n - l; break;                      /* right edge */
    case 2: x = -0.75 * rnd_unit(); break;         /* a little before the start */
    case 3: x = floor(x); l = l < 1 ? 1 : floor(l); break; /* integer-aligned */
    default: break;
    }
    *in_n = n;
    *x0 = x;
    *len = l;
    *out_n = o;
}

static geo rnd_geo(void)
{
    geo g;
    rnd_axis(&g.in_w, &g.x0, &g.w, &g.out_w);
    rnd_axis(&g.in_h, &g.y0, &g.h, &g.out_h);
    static const int chs[] = {1, 2, 3, 3, 3, 4, 4};
    g.ch = chs[rnd() % 7];
    g.flip = (int)(rnd() & 1);
    g.mode = (gf_interpolation)(rnd() % 3);
    return g;
}

static int max_taps_seen, min_taps_seen = 1000;

/* Runs g through the reference and every available ISA, comparing bytes,
 * and checks the destination's row padding is left alone. */
static void check_geo(const geo *g, gf__resampler *rs)
{
    gf__rs_axis h0 = {0}, v0 = {0};
    if (gf__rs_axis_set(&h0, g->in_w, g->x0, g->w, g->out_w, g->mode) ||
        gf__rs_axis_set(&v0, g->in_h, g->y0, g->h, g->out_h, g->mode)) {
        gf__rs_axis *ax[2] = {&h0, &v0};
        for (int k = 0; k < 2; k++) {
            free(ax[k]->start);
            free(ax[k]->w);
        }
        return; /* geometry out of range: nothing to compare */
    }
    int taps[2] = {h0.taps, v0.taps};
    for (int k = 0; k < 2; k++) {
        max_taps_seen = taps[k] > max_taps_seen ? taps[k] : max_taps_seen;
        min_taps_seen = taps[k] < min_taps_seen ? taps[k] : min_taps_seen;
    }
    /* The source: exactly the span the axes read (so a sanitizer catches
     * any read past it), rows padded apart by a random amount. */
    int sw = h0.hi - h0.lo, sh = v0.hi - v0.lo, ch = g->ch;
    size_t stride = (size_t)sw * ch + (size_t)rnd_in(0, 40);
    size_t slen = stride * (size_t)(sh - 1) + (size_t)sw * ch;
    uint8_t *src = malloc(slen);
    ck_assert_ptr_nonnull(src);
    int style = rnd() % 4;
    for (size_t i = 0; i < slen; i++)
        src[i] = style == 0 ? (uint8_t)(rnd() & 1 ? 255 : 0) /* saturating extremes */
                 : style == 1 ? 255
                              : (uint8_t)rnd();
    size_t row = (size_t)g->out_w * ch, ds = row + (size_t)(rnd() % 3 ? 0 : rnd_in(1, 37));
    size_t off = rnd() % 16, dlen = off + ds * (size_t)g->out_h + 64;
    uint8_t *want = malloc(dlen), *got = malloc(dlen);
    ck_assert_ptr_nonnull(want);
    ck_assert_ptr_nonnull(got);
    memset(want, 0xA5, dlen);
    reference(&h0, &v0, src, stride, ch, want + off, ds, g->flip);
    for (int k = 0; k < NISA; k++) {
        if (!isa_available(k))
            continue;
        ck_assert_int_eq(gf__rs_force_isa(isas[k]), 0);
        ck_assert_int_eq(gf__rs_isa(), isas[k]);
        gf__resampler *r = &rs[k];
        ck_assert_int_eq(gf__rs_axis_set(&r->h, g->in_w, g->x0, g->w, g->out_w, g->mode), 0);
        ck_assert_int_eq(gf__rs_axis_set(&r->v, g->in_h, g->y0, g->h, g->out_h, g->mode), 0);
        memset(got, 0xA5, dlen);
        ck_assert_int_eq(gf__resample(r, src, stride, ch, got + off, ds, g->flip), 0);
        if (memcmp(got, want, dlen) != 0) {
            size_t i = 0;
            while (got[i] == want[i])
                i++;
            ck_abort_msg("%s, mode %d, differs at byte %zu (got %d, want %d): in %dx%d crop x0=%.17g "
                         "w=%.17g y0=%.17g h=%.17g -> %dx%d ch=%d flip=%d taps h=%d v=%d "
                         "ds=%zu off=%zu",
                         isa_names[k], g->mode, i, got[i], want[i], g->in_w, g->in_h, g->x0, g->w,
                         g->y0, g->h, g->out_w, g->out_h, ch, g->flip, h0.taps, v0.taps, ds, off);
        }
    }
    gf__rs_force_isa(GF__RS_ISA_AUTO);
    free(src);
    free(want);
    free(got);
    free(h0.start);
    free(h0.w);
    free(v0.start);
    free(v0.w);
}

START_TEST(isa_choice_follows_the_cpu_and_gf_no_avx2)
{
    ck_assert_int_eq(gf__rs_force_isa(GF__RS_ISA_AUTO), 0);
    int isa = gf__rs_isa();
    ck_assert_int_eq(gf__rs_force_isa(GF__RS_ISA_C), 0);
    ck_assert_int_eq(gf__rs_isa(), GF__RS_ISA_C);
    ck_assert_int_eq(gf__rs_force_isa(7), -1);
    ck_assert_int_eq(gf__rs_isa(), GF__RS_ISA_C);
    ck_assert_int_eq(gf__rs_force_isa(GF__RS_ISA_AUTO), 0);
    ck_assert_int_eq(gf__rs_isa(), isa);
#if defined(HAVE_CPU_CHECK) && defined(__SSE2__)
    const char *e = getenv("GF_NO_AVX2");
    int no_avx2 = e && *e && strcmp(e, "0") != 0;
    int avx2 = __builtin_cpu_supports("avx2") != 0;
    ck_assert_int_eq(isa, avx2 && !no_avx2 ? GF__RS_ISA_AVX2 : GF__RS_ISA_SSE2);
    ck_assert_int_eq(gf__rs_force_isa(GF__RS_ISA_AVX2), avx2 ? 0 : -1);
    gf__rs_force_isa(GF__RS_ISA_AUTO);
    printf("note: resampler uses %s (cpu avx2: %d, GF_NO_AVX2: %s)\n",
           isa_names[isa], avx2, e ? e : "unset");
#endif
}
END_TEST

START_TEST(random_geometries_give_the_same_bytes_on_every_isa)
{
    rng_state = 0x5eed0001u;
    gf__resampler rs[NISA];
    memset(rs, 0, sizeof rs);
    for (int it = 0; it < 1500; it++) {
        geo g = rnd_geo();
        check_geo(&g, rs);
    }
    ck_assert_int_eq(min_taps_seen, 1);
    ck_assert_int_ge(max_taps_seen, 20);
    for (int k = 0; k < NISA; k++)
        gf__resampler_free(&rs[k]);
}
END_TEST

/* What the train transform does: a random-resized crop of a 500x375 image
 * (or of its DCT-scaled decode) onto 224x224, RGB, flipped half the time. */
START_TEST(train_crops_give_the_same_bytes_on_every_isa)
{
    rng_state = 0x5eed0002u;
    gf__resampler rs[NISA];
    memset(rs, 0, sizeof rs);
    for (int it = 0; it < 100; it++) {
        geo g;
        int W = 500, H = 375;
        double area = (0.08 + 0.92 * rnd_unit()) * W * H;
        double ratio = exp(log(0.75) + (log(4.0 / 3) - log(0.75)) * rnd_unit());
        double cw = fmin(W, sqrt(area * ratio)), chh = fmin(H, sqrt(area / ratio));
        g.in_w = W;
        g.in_h = H;
        g.x0 = floor((W - cw) * rnd_unit());
        g.y0 = floor((H - chh) * rnd_unit());
        g.w = floor(cw);
        g.h = floor(chh);
        g.out_w = g.out_h = 224;
        g.ch = it % 8 == 7 ? 4 : 3;
        g.flip = (int)(rnd() & 1);
        g.mode = (gf_interpolation)(it % 3);
        check_geo(&g, rs);
    }
    for (int k = 0; k < NISA; k++)
        gf__resampler_free(&rs[k]);
}
END_TEST

/* Scale 1 on an integer-aligned crop is a copy, on every ISA. */
START_TEST(an_aligned_unscaled_crop_is_copied_exactly)
{
    enum { W = 97, H = 61, C = 3 };
    static uint8_t src[W * H * C];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (uint8_t)(i * 37 + (i >> 7));
    for (int k = 0; k < NISA * 3; k++) { /* every ISA, every interpolation */
        if (!isa_available(k % NISA))
            continue;
        ck_assert_int_eq(gf__rs_force_isa(isas[k % NISA]), 0);
        gf__resampler r;
        memset(&r, 0, sizeof r);
        gf_interpolation mode = (gf_interpolation)(k / NISA);
        ck_assert_int_eq(gf__rs_axis_set(&r.h, W, 5, 80, 80, mode), 0);
        ck_assert_int_eq(gf__rs_axis_set(&r.v, H, 3, 50, 50, mode), 0);
        uint8_t out[80 * 50 * C];
        const uint8_t *s0 = src + (size_t)r.v.lo * W * C + (size_t)r.h.lo * C;
        ck_assert_int_eq(gf__resample(&r, s0, W * C, C, out, 80 * C, 0), 0);
        for (int y = 0; y < 50; y++)
            ck_assert_mem_eq(out + y * 80 * C, src + ((size_t)(y + 3) * W + 5) * C, 80 * C);
        gf__resampler_free(&r);
    }
    gf__rs_force_isa(GF__RS_ISA_AUTO);
}
END_TEST

static Suite *resample_suite(void)
{
    Suite *su = suite_create("resample");
    TCase *tc = tcase_create("isa");
    tcase_add_test(tc, isa_choice_follows_the_cpu_and_gf_no_avx2);
    tcase_add_test(tc, random_geometries_give_the_same_bytes_on_every_isa);
    tcase_add_test(tc, train_crops_give_the_same_bytes_on_every_isa);
    tcase_add_test(tc, an_aligned_unscaled_crop_is_copied_exactly);
    tcase_set_timeout(tc, 300);
    suite_add_tcase(su, tc);
    return su;
}

int main(void)
{
    return tu_run_suite(resample_suite());
}
