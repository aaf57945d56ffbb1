/*
 * make-dataset's image (make_dataset.h): a pure function of (seed, class,
 * index), rendered into a per-worker scratch on any worker thread.
 *
 * Each class owns a hue, a shape and a stripe frequency; these depend only
 * on the class number and the class count, never on the seed, so a train
 * set (--seed 0) and a validation set (--seed 1) agree on what each class
 * looks like. Samples vary the object's position, size, rotation, aspect
 * and lighting, the background (gradient + clouds), a few neutral
 * distractor blobs, and sensor-like noise. Every image is a pure function
 * of (seed, class, index): the output does not depend on the thread count.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../mix.h" /* header-only: gf__mix64, gf__splitmix64 */
#include "make_dataset.h"

/* Sensor-noise standard deviation (8-bit levels) and the depth of the fine
 * surface texture (+-55% luminance). Together they set the entropy: tuned
 * so that a 500x375 quality-90 JPEG averages about 100 KB, like a photo of
 * that size (measured: 99 KB; see bench/README.md). */
static const float NOISE_SIGMA = 4.0f;
static const float DETAIL = 0.55f;

/* ---- randomness: pure functions of their inputs -------------------------- */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *r)
{
    return gf__splitmix64(&r->s);
}

static float rng_unit(rng *r) /* [0, 1) */
{
    return (float)(rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

static float rng_range(rng *r, float lo, float hi)
{
    return lo + (hi - lo) * rng_unit(r);
}

/* ---- colour and noise helpers --------------------------------------------- */

static void hsv_to_rgb(float h, float s, float v, float rgb[3])
{
    float hh = fmodf(h, 360.0f);
    if (hh < 0)
        hh += 360.0f;
    hh /= 60.0f;
    int i = (int)hh;
    float f = hh - (float)i;
    float p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
    switch (i) {
    case 0: rgb[0] = v; rgb[1] = t; rgb[2] = p; break;
    case 1: rgb[0] = q; rgb[1] = v; rgb[2] = p; break;
    case 2: rgb[0] = p; rgb[1] = v; rgb[2] = t; break;
    case 3: rgb[0] = p; rgb[1] = q; rgb[2] = v; break;
    case 4: rgb[0] = t; rgb[1] = p; rgb[2] = v; break;
    default: rgb[0] = v; rgb[1] = p; rgb[2] = q; break;
    }
}

static float lattice(uint64_t key, int x, int y)
{
    uint64_t h = gf__mix64(key ^ ((uint64_t)(uint32_t)x << 32) ^ (uint32_t)y);
    return (float)(h >> 40) * (1.0f / 16777216.0f);
}

static float smooth(float t)
{
    return t * t * (3 - 2 * t);
}

/* Fractal value noise in [0, 1) on a coarse grid (gw x gh), base period
 * `period` cells, `octaves` octaves. Upsampled per pixel later: this keeps
 * the per-pixel cost to one bilinear fetch. */
static void fractal_field(float *f, int gw, int gh, uint64_t key, float period,
                          int octaves)
{
    memset(f, 0, (size_t)gw * (size_t)gh * sizeof *f);
    float amp = 0.5f, total = 0;
    for (int o = 0; o < octaves; o++) {
        float inv = 1.0f / period;
        uint64_t k = gf__mix64(key + (uint64_t)o);
        if (period <= 1.0f) { /* lattice values themselves: no interpolation */
            for (int y = 0; y < gh; y++)
                for (int x = 0; x < gw; x++)
                    f[(size_t)y * (size_t)gw + (size_t)x] += amp * lattice(k, x, y);
            total += amp;
            break;
        }
        for (int y = 0; y < gh; y++) {
            float fy = (float)y * inv;
            int iy = (int)fy;
            float ty = smooth(fy - (float)iy);
            for (int x = 0; x < gw; x++) {
                float fx = (float)x * inv;
                int ix = (int)fx;
                float tx = smooth(fx - (float)ix);
                float a = lattice(k, ix, iy), b = lattice(k, ix + 1, iy);
                float c = lattice(k, ix, iy + 1), d = lattice(k, ix + 1, iy + 1);
                float top = a + (b - a) * tx, bot = c + (d - c) * tx;
                f[(size_t)y * (size_t)gw + (size_t)x] += amp * (top + (bot - top) * ty);
            }
        }
        total += amp;
        amp *= 0.5f;
        period *= 0.5f;
        if (period < 1.0f)
            period = 1.0f;
    }
    for (size_t i = 0; i < (size_t)gw * (size_t)gh; i++)
        f[i] /= total;
}

#define CELL 4 /* pixels per coarse-grid cell */

#ifndef FINE_CELL
#define FINE_CELL 1
#endif
/* pixels per cell of the fine-detail grid */

static inline float field_at_cell(const float *f, int gw, int x, int y, float inv_cell)
{
    float fx = (float)x * inv_cell, fy = (float)y * inv_cell;
    int ix = (int)fx, iy = (int)fy;
    float tx = fx - (float)ix, ty = fy - (float)iy;
    const float *r0 = f + (size_t)iy * (size_t)gw + (size_t)ix, *r1 = r0 + gw;
    float top = r0[0] + (r0[1] - r0[0]) * tx, bot = r1[0] + (r1[1] - r1[0]) * tx;
    return top + (bot - top) * ty;
}

static inline float field_at(const float *f, int gw, int x, int y)
{
    return field_at_cell(f, gw, x, y, 1.0f / CELL);
}

/* A standard-normal-ish value from 32 random bits (sum of four bytes). */
static inline float gauss32(uint32_t v)
{
    int s = (int)(v & 255) + (int)((v >> 8) & 255) + (int)((v >> 16) & 255) + (int)(v >> 24);
    return ((float)s - 510.0f) * (1.0f / 147.8f);
}

/* ---- the image ------------------------------------------------------------ */

typedef struct shape {
    float cx, cy, rx, ry, cs, sn; /* centre, half-axes, rotation */
    int kind;                     /* 0 ellipse, 1 rectangle, 2 triangle */
} shape;

/* Signed distance in pixels (negative inside). */
static float shape_sdf(const shape *s, float x, float y)
{
    float dx = x - s->cx, dy = y - s->cy;
    float u = dx * s->cs + dy * s->sn, v = -dx * s->sn + dy * s->cs;
    float m = s->rx < s->ry ? s->rx : s->ry;
    switch (s->kind) {
    case 0: {
        float q = sqrtf(u * u / (s->rx * s->rx) + v * v / (s->ry * s->ry));
        return (q - 1.0f) * m;
    }
    case 1: {
        float a = fabsf(u) - s->rx, b = fabsf(v) - s->ry;
        return a > b ? a : b;
    }
    default: {
        /* Triangle: three edge lines at 120 degrees, apothem m * 0.6,
         * stretched by the aspect so it varies like the others. */
        float uu = u * m / s->rx, vv = v * m / s->ry;
        float ap = m * 0.6f;
        float d0 = vv - ap;                                  /* bottom edge */
        float d1 = -0.5f * vv + 0.8660254f * uu - ap;
        float d2 = -0.5f * vv - 0.8660254f * uu - ap;
        float d = d0 > d1 ? d0 : d1;
        return d > d2 ? d : d2;
    }
    }
}

static void shape_bbox(const shape *s, int w, int h, int *x0, int *y0, int *x1, int *y1)
{
    float r = (s->rx > s->ry ? s->rx : s->ry) * 1.5f + 2.0f;
    *x0 = (int)fmaxf(0.0f, s->cx - r);
    *y0 = (int)fmaxf(0.0f, s->cy - r);
    *x1 = (int)fminf((float)w, s->cx + r + 1);
    *y1 = (int)fminf((float)h, s->cy + r + 1);
}

int md_scratch_init(md_scratch *sc, int width, int height)
{
    sc->gw = width / CELL + 3;
    sc->gh = height / CELL + 3;
    sc->img = malloc((size_t)width * (size_t)height * 3 * sizeof(float));
    sc->rgb = malloc((size_t)width * (size_t)height * 3);
    sc->cloud = malloc((size_t)sc->gw * (size_t)sc->gh * sizeof(float));
    sc->tex = malloc((size_t)sc->gw * (size_t)sc->gh * sizeof(float));
    sc->fw = width / FINE_CELL + 3;
    sc->fh = height / FINE_CELL + 3;
    sc->fine = malloc((size_t)sc->fw * (size_t)sc->fh * sizeof(float));
    return sc->img && sc->rgb && sc->cloud && sc->tex && sc->fine ? 0 : -1;
}

void md_scratch_free(md_scratch *sc)
{
    free(sc->img);
    free(sc->rgb);
    free(sc->cloud);
    free(sc->tex);
    free(sc->fine);
}

/* Class appearance: a function of (class, classes) only. */
static void class_look(int c, int classes, float *hue, int *kind, float *freq)
{
    *hue = 360.0f * (float)c / (float)classes;
    *kind = c % 3;
    *freq = 3.0f + (float)((c * 7) % 5) * 1.5f; /* stripes across the object */
}

void md_render(const md_opts *o, int c, int idx, md_scratch *sc)
{
    const int w = o->width, h = o->height;
    const float mind = (float)(w < h ? w : h);
    rng r = {gf__mix64(o->seed ^ gf__mix64(((uint64_t)(uint32_t)c << 32) | (uint32_t)idx))};
    float hue, freq;
    int kind;
    class_look(c, o->classes, &hue, &kind, &freq);

    /* Background: a gradient between two muted colours, modulated by clouds. */
    float bg_hue = rng_range(&r, 0, 360);
    float ca[3], cb[3];
    hsv_to_rgb(bg_hue, rng_range(&r, 0.05f, 0.35f), rng_range(&r, 0.35f, 0.9f), ca);
    hsv_to_rgb(bg_hue + rng_range(&r, -40, 40), rng_range(&r, 0.05f, 0.35f),
               rng_range(&r, 0.2f, 0.8f), cb);
    float ga = rng_range(&r, 0, 6.2831853f);
    float gdx = cosf(ga), gdy = sinf(ga);
    float gspan = fabsf(gdx) * (float)w + fabsf(gdy) * (float)h;
    float goff = (gdx < 0 ? -gdx * (float)w : 0) + (gdy < 0 ? -gdy * (float)h : 0);
    float cloud_amp = rng_range(&r, 0.25f, 0.6f);
    fractal_field(sc->cloud, sc->gw, sc->gh, rng_next(&r), (float)sc->gw * 0.5f, 5);
    fractal_field(sc->tex, sc->gw, sc->gh, rng_next(&r), 6.0f, 3);
    fractal_field(sc->fine, sc->fw, sc->fh, rng_next(&r), 2.0f, 2);

    for (int y = 0; y < h; y++) {
        float *px = sc->img + (size_t)y * (size_t)w * 3;
        for (int x = 0; x < w; x++, px += 3) {
            float t = ((float)x * gdx + (float)y * gdy + goff) / gspan;
            float cl = field_at(sc->cloud, sc->gw, x, y);
            float tx = field_at(sc->tex, sc->gw, x, y);
            float m = 255.0f * (1.0f + cloud_amp * (cl - 0.5f) * 2.0f + 0.25f * (tx - 0.5f));
            px[0] = (ca[0] + (cb[0] - ca[0]) * t) * m;
            px[1] = (ca[1] + (cb[1] - ca[1]) * t) * m;
            px[2] = (ca[2] + (cb[2] - ca[2]) * t) * m;
        }
    }

    /* Distractors: a few small, muted blobs of any hue and any shape. */
    int nd = (int)(rng_unit(&r) * 4.0f);
    for (int d = 0; d < nd; d++) {
        shape s;
        float col[3];
        float rot = rng_range(&r, 0, 6.2831853f);
        s.kind = (int)(rng_unit(&r) * 3.0f);
        s.rx = mind * rng_range(&r, 0.04f, 0.14f);
        s.ry = s.rx * rng_range(&r, 0.6f, 1.6f);
        s.cx = rng_range(&r, 0, (float)w);
        s.cy = rng_range(&r, 0, (float)h);
        s.cs = cosf(rot);
        s.sn = sinf(rot);
        hsv_to_rgb(rng_range(&r, 0, 360), rng_range(&r, 0.0f, 0.3f),
                   rng_range(&r, 0.2f, 0.95f), col);
        float op = rng_range(&r, 0.4f, 0.85f);
        int x0, y0, x1, y1;
        shape_bbox(&s, w, h, &x0, &y0, &x1, &y1);
        for (int y = y0; y < y1; y++)
            for (int x = x0; x < x1; x++) {
                float a = 0.5f - shape_sdf(&s, (float)x, (float)y);
                if (a <= 0)
                    continue;
                a = (a > 1 ? 1 : a) * op;
                float *px = sc->img + ((size_t)y * (size_t)w + (size_t)x) * 3;
                float sh = 255.0f * (0.8f + 0.4f * field_at(sc->tex, sc->gw, x, y));
                for (int k = 0; k < 3; k++)
                    px[k] += (col[k] * sh - px[k]) * a;
            }
    }

    /* The object: the class's hue, shape and stripes; the sample's pose. */
    {
        shape s;
        float col[3];
        float rot = rng_range(&r, 0, 6.2831853f);
        float size = mind * rng_range(&r, 0.18f, 0.36f);
        float asp = rng_range(&r, 0.75f, 1.33f);
        s.kind = kind;
        s.rx = size * sqrtf(asp);
        s.ry = size / sqrtf(asp);
        /* Keep the centre inside, the object mostly in frame. */
        s.cx = rng_range(&r, 0.2f, 0.8f) * (float)w;
        s.cy = rng_range(&r, 0.2f, 0.8f) * (float)h;
        s.cs = cosf(rot);
        s.sn = sinf(rot);
        hsv_to_rgb(hue + rng_range(&r, -8, 8), rng_range(&r, 0.6f, 0.95f),
                   rng_range(&r, 0.7f, 1.0f), col);
        float la = rng_range(&r, 0, 6.2831853f), lcs = cosf(la), lsn = sinf(la);
        float sa = rng_range(&r, 0, 6.2831853f), scs = cosf(sa), ssn = sinf(sa);
        float k_stripe = 6.2831853f * freq / (2.0f * size);
        float phase = rng_range(&r, 0, 6.2831853f);
        int x0, y0, x1, y1;
        shape_bbox(&s, w, h, &x0, &y0, &x1, &y1);
        for (int y = y0; y < y1; y++)
            for (int x = x0; x < x1; x++) {
                float a = 0.5f - shape_sdf(&s, (float)x, (float)y);
                if (a <= 0)
                    continue;
                if (a > 1)
                    a = 1;
                float dx = (float)x - s.cx, dy = (float)y - s.cy;
                float light = 0.5f + 0.5f * (dx * lcs + dy * lsn) / size;
                light = light < 0 ? 0 : (light > 1 ? 1 : light);
                float stripe = sinf((dx * scs + dy * ssn) * k_stripe + phase);
                float tx = field_at(sc->tex, sc->gw, x, y);
                float sh = 255.0f * (0.55f + 0.45f * light) * (0.8f + 0.2f * stripe) *
                           (0.85f + 0.3f * tx);
                float *px = sc->img + ((size_t)y * (size_t)w + (size_t)x) * 3;
                for (int k = 0; k < 3; k++)
                    px[k] += (col[k] * sh - px[k]) * a;
            }
    }

    /* Sensor noise: luma plus weaker per-channel chroma, then quantise. */
    {
        const float *px = sc->img;
        uint8_t *out = sc->rgb;
        const size_t n = (size_t)w * (size_t)h;
        for (size_t i = 0; i < n; i++, px += 3, out += 3) {
            int x = (int)(i % (size_t)w), y = (int)(i / (size_t)w);
            /* Fine surface texture (grain, foliage, fabric in a photo). */
            float det = 1.0f + DETAIL * 2.0f * (field_at_cell(sc->fine, sc->fw, x, y, 1.0f / FINE_CELL) - 0.5f);
            uint64_t b = rng_next(&r);
            float ln = gauss32((uint32_t)b) * NOISE_SIGMA;
            uint32_t hi = (uint32_t)(b >> 32);
            for (int k = 0; k < 3; k++) {
                float cn = ((float)((hi >> (8 * k)) & 255) - 127.5f) * (NOISE_SIGMA * 0.35f / 73.9f);
                float v = px[k] * det + ln + cn;
                out[k] = (uint8_t)(v <= 0 ? 0 : (v >= 255 ? 255 : v + 0.5f));
            }
        }
    }
}
