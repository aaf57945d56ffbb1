/* gpufeed-raw-cost: what a prepared set's raw member costs per sample,
 * against stb_image on the same bytes and against the resample alone.
 *
 *   gpufeed-raw-cost [iterations]
 *
 * The member is a 256x192 binary PPM as `gpufeed prepare --format raw`
 * writes it (photo-like pixels), the transform train (random resized crop
 * + flip) to 224x224 RGB. Prints microseconds per sample for
 *   raw:      gf__decode on the raw path (decode_pnm_raw.c), end to end;
 *   stb:      gf__decode with decoder = STB on the same bytes;
 *   resample: the crop plan and the resample of the same crop from the
 *             same bytes, nothing else (the floor under any raw path);
 * each with the part of it outside gf__resample's kernels (the decoders'
 * own clock for the first two: sniff, header, stb_image's copy, crop
 * plan, filter weights; for the third the plan and weights alone).
 * Each is the best of 21 short rounds, the three taken in turn in every
 * round: on a shared machine some rounds run undisturbed, and load hits
 * the three alike; /proc/loadavg is printed before and after.
 *
 * INTERNAL: includes the library's private headers (src/decode.h,
 * src/decoder.h, src/resample.h) and links gpufeed_core; it moves with
 * them. */
#include "decode.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SW = 256, SH = 192, OUT = 224, C = 3, ROUNDS = 21 };

static void print_load(const char *when)
{
    char line[128] = "?";
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (!fgets(line, sizeof line, f))
            snprintf(line, sizeof line, "?\n");
        fclose(f);
    }
    printf("load average %s: %s", when, line);
}

/* Smooth shapes, edges and a little noise, like decode_cost.c's photo. */
static void photo(uint8_t *px)
{
    uint32_t s = 12345;
    for (int y = 0; y < SH; y++)
        for (int x = 0; x < SW; x++)
            for (int c = 0; c < C; c++) {
                s = s * 1664525u + 1013904223u;
                double v = 120 + 60 * sin(x / (17.0 + 5 * c) + y / 23.0) +
                           ((x / 40 + y / 40) % 2 ? 20 : -20) + (double)(s >> 28) - 8;
                px[((size_t)y * SW + x) * C + c] = (uint8_t)fmin(255, fmax(0, v));
            }
}

typedef struct member {
    uint8_t *p;
    size_t n, raster;
} member;

/* us per sample of n decodes (keys first..first+n) on decoder kind `by`;
 * *rest: the part of it outside the resampler, as the decoder times it. */
static double decode_us(gf__decoder *d, const member *m, gf__transform t, gf_decoder_kind by,
                        uint64_t first, int n, uint8_t *out, double *rest)
{
    t.decoder = by;
    char why[256];
    int used;
    double tot0, rs0, tot1, rs1;
    gf__decoder_times(d, &tot0, &rs0);
    double t0 = gf__now();
    for (int i = 0; i < n; i++)
        if (gf__decode(d, m->p, m->n, &t, gf__sample_key(1, 0, first + (uint64_t)i), out, &used,
                       why, sizeof why) < 0) {
            fprintf(stderr, "decode failed: %s\n", why);
            exit(1);
        }
    double us = (gf__now() - t0) * 1e6 / n;
    gf__decoder_times(d, &tot1, &rs1);
    *rest = ((tot1 - tot0) - (rs1 - rs0)) * 1e6 / n;
    return us;
}

/* The same crops resampled from the same bytes: what gf__plan,
 * gf__decode_set_axes and gf__decode_finish do for the raw path, minus
 * the sniff, the header and the dispatch. *setup: the part of it before
 * gf__resample (the crop plan and the filter weights). */
static double resample_us(gf__resampler *rs, const member *m, const gf__transform *t,
                          uint64_t first, int n, uint8_t *out, double *setup)
{
    const size_t stride = (size_t)SW * C;
    double t0 = gf__now(), in_setup = 0;
    for (int i = 0; i < n; i++) {
        double s0 = gf__now();
        gf__crop c;
        gf__crop_plan(t, SW, SH, gf__sample_key(1, 0, first + (uint64_t)i), &c);
        if (gf__rs_axis_set(&rs->h, SW, c.x, c.w, OUT, t->interp) ||
            gf__rs_axis_set(&rs->v, SH, c.y, c.h, OUT, t->interp))
            exit(1);
        in_setup += gf__now() - s0;
        const uint8_t *src = m->p + m->raster + stride * rs->v.lo + (size_t)rs->h.lo * C;
        if (gf__resample(rs, src, stride, C, out, (size_t)OUT * C, c.flip) < 0)
            exit(1);
    }
    *setup = in_setup * 1e6 / n;
    return (gf__now() - t0) * 1e6 / n;
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 2100;
    int per = (iters > 0 ? iters : 2100) / ROUNDS + 1;
    print_load("before");

    member m;
    char head[32];
    int hn = snprintf(head, sizeof head, "P6\n%d %d\n255\n", SW, SH);
    m.raster = (size_t)hn;
    m.n = m.raster + (size_t)SW * SH * C;
    m.p = malloc(m.n);
    uint8_t *out = malloc((size_t)OUT * OUT * C), *check = malloc((size_t)OUT * OUT * C);
    if (!m.p || !out || !check)
        return 1;
    memcpy(m.p, head, m.raster);
    photo(m.p + m.raster);

    gf_settings s;
    gf_default_settings(&s);
    s.width = s.height = OUT;
    s.channels = C;
    s.transform = GF_TRANSFORM_TRAIN;
    gf__transform t;
    gf__transform_from_settings(&t, &s);

    gf__decoder *d;
    if (gf__decoder_create(&d) < 0)
        return 1;
    gf__resampler rs = {0};

    /* The three give the same bytes (else the comparison means nothing). */
    double rest;
    for (uint64_t k = 0; k < 16; k++) {
        decode_us(d, &m, t, GF_DECODER_AUTO, k, 1, out, &rest);
        decode_us(d, &m, t, GF_DECODER_STB, k, 1, check, &rest);
        if (memcmp(out, check, (size_t)OUT * OUT * C) != 0)
            return fprintf(stderr, "raw and stb differ at key %llu\n", (unsigned long long)k), 1;
        resample_us(&rs, &m, &t, k, 1, check, &rest);
        if (memcmp(out, check, (size_t)OUT * OUT * C) != 0)
            return fprintf(stderr, "resample alone differs at key %llu\n", (unsigned long long)k), 1;
    }

    double best[3] = {1e30, 1e30, 1e30}, best_rest[3] = {1e30, 1e30, 1e30}, r_rest[3];
    for (int r = 0; r <= ROUNDS; r++) { /* round 0 warms up */
        uint64_t first = (uint64_t)r * (uint64_t)per;
        double us[3] = {decode_us(d, &m, t, GF_DECODER_AUTO, first, per, out, &r_rest[0]),
                        decode_us(d, &m, t, GF_DECODER_STB, first, per, out, &r_rest[1]),
                        resample_us(&rs, &m, &t, first, per, out, &r_rest[2])};
        for (int k = 0; r > 0 && k < 3; k++) {
            best[k] = us[k] < best[k] ? us[k] : best[k];
            best_rest[k] = r_rest[k] < best_rest[k] ? r_rest[k] : best_rest[k];
        }
    }
    printf("%dx%d P6 (%zu bytes), train to %dx%d RGB, %d samples a round, best of %d rounds:\n",
           SW, SH, m.n, OUT, OUT, per, ROUNDS);
    printf("%-26s %8s %22s\n", "us per sample", "total", "outside gf__resample");
    printf("%-26s %8.1f %22.1f\n", "raw path, end to end", best[0], best_rest[0]);
    printf("%-26s %8.1f %22.1f\n", "stb_image, same bytes", best[1], best_rest[1]);
    printf("%-26s %8.1f %22.1f\n", "plan + resample alone", best[2], best_rest[2]);
    printf("  raw / resample %.3f (raw - resample %+.1f us); stb / raw %.2fx\n",
           best[0] / best[2], best[0] - best[2], best[1] / best[0]);
    print_load("after");
    gf__resampler_free(&rs);
    gf__decoder_destroy(d);
    free(check);
    free(out);
    free(m.p);
    return 0;
}
