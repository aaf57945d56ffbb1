/*
 * gpufeed make-dataset: writes a synthetic ImageFolder (DIR/class_XX/
 * img_YYYYY.jpg) whose class is visible in the pixels, so a small model can
 * learn it, and whose content is photo-like, so encoded sizes and decode
 * cost are realistic (about 100 KB per 500x375 JPEG at quality 90).
 *
 * Each class owns a hue, a shape and a stripe frequency; these depend only
 * on the class number and the class count, never on the seed, so a train
 * set (--seed 0) and a validation set (--seed 1) agree on what each class
 * looks like. Samples vary the object's position, size, rotation, aspect
 * and lighting, the background (gradient + clouds), a few neutral
 * distractor blobs, and sensor-like noise. Every image is a pure function
 * of (seed, class, index): the output does not depend on the thread count.
 *
 * With --shards N the same images (same seed, same pixels) go into N
 * WebDataset-style ustar archives DIR/train-000000.tar ... instead: each
 * sample is two members, KEY.jpg and KEY.cls (the class index as decimal
 * text), KEY = class_XX_img_YYYYY. The samples are put in an order
 * shuffled by the seed (a seeded permutation of positions) and cut into N
 * consecutive runs, one per shard, so every shard holds a mix of classes
 * and the sizes differ by at most one. Archives are byte-for-byte
 * deterministic too: a worker renders and encodes position p in parallel
 * with the others, then waits for its turn (position p - 1 written) to
 * append; positions are handed out in increasing order, so the lowest
 * unwritten one never waits and the wait is bounded by the thread count.
 * A shard is opened when its first sample is appended and finished when
 * its last is, so only the few shards being written are open at a time
 * (N may be far above the descriptor limit).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../mix.h" /* header-only: gf__mix64, gf__splitmix64 */
#include "cli.h"
#include "sysinfo.h"
#include "tar_write.h"

#if GF_CLI_HAVE_TJ
#include <turbojpeg.h>
#endif

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wunused-function"
#endif
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#define CMD "make-dataset"

/* Sensor-noise standard deviation (8-bit levels) and the depth of the fine
 * surface texture (+-55% luminance). Together they set the entropy: tuned
 * so that a 500x375 quality-90 JPEG averages about 100 KB, like a photo of
 * that size (measured: 99 KB; see bench/README.md). */
static const float NOISE_SIGMA = 4.0f;
static const float DETAIL = 0.55f;

enum { FMT_JPG = 0, FMT_PNG = 1 };

typedef struct md_opts {
    const char *dir;
    int classes, per_class, width, height, format, quality, threads, force;
    int shards; /* 0: an ImageFolder; else tar shards */
    uint64_t seed;
} md_opts;

/* Shard files: DIR/train-NNNNNN.tar, six digits, as WebDataset names them. */
#define SHARDS_MAX 1000000
/* Member mtime: fixed (2023-11-14), so the archives are a function of the
 * options alone. */
#define TAR_MTIME 1700000000ull

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

/* A seeded permutation of [0, n) without a table (n may be 1e9): a
 * 4-round Feistel network on the smallest even number of bits that covers
 * n, cycle-walked back into range (fewer than 4 steps on average). */
typedef struct perm {
    uint64_t n, mask, key[4];
    int half;
} perm;

static void perm_init(perm *pm, uint64_t n, uint64_t seed)
{
    int bits = 2;
    while (bits < 64 && (1ull << bits) < n)
        bits += 2;
    pm->n = n;
    pm->half = bits / 2;
    pm->mask = (1ull << pm->half) - 1;
    for (int r = 0; r < 4; r++)
        pm->key[r] = gf__mix64(seed ^ gf__mix64(0x5348415244ull + (uint64_t)r)); /* "SHARD" */
}

static uint64_t perm_at(const perm *pm, uint64_t x)
{
    do {
        uint64_t l = x >> pm->half, r = x & pm->mask;
        for (int k = 0; k < 4; k++) {
            uint64_t t = l ^ (gf__mix64(r ^ pm->key[k]) & pm->mask);
            l = r;
            r = t;
        }
        x = (l << pm->half) | r;
    } while (x >= pm->n);
    return x;
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

typedef struct scratch {
    float *img;   /* w*h*3 linear-ish RGB in [0, 255] */
    float *cloud; /* coarse fields */
    float *tex;
    float *fine;  /* fine surface detail (FINE_CELL grid, fw x fh) */
    int fw, fh;
    uint8_t *rgb; /* w*h*3 output */
    int gw, gh;
} scratch;

/* Class appearance: a function of (class, classes) only. */
static void class_look(int c, int classes, float *hue, int *kind, float *freq)
{
    *hue = 360.0f * (float)c / (float)classes;
    *kind = c % 3;
    *freq = 3.0f + (float)((c * 7) % 5) * 1.5f; /* stripes across the object */
}

static void render(const md_opts *o, int c, int idx, scratch *sc)
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

/* ---- encoding and the worker pool --------------------------------------- */

typedef struct membuf {
    uint8_t *p;
    size_t n, cap;
    int oom;
} membuf;

static void membuf_write(void *ctx, void *data, int size)
{
    membuf *m = ctx;
    if (m->oom || size <= 0)
        return;
    if (m->n + (size_t)size > m->cap) {
        size_t cap = m->cap ? m->cap : 65536;
        while (cap < m->n + (size_t)size)
            cap *= 2;
        uint8_t *p = realloc(m->p, cap);
        if (!p) {
            m->oom = 1;
            return;
        }
        m->p = p;
        m->cap = cap;
    }
    memcpy(m->p + m->n, data, (size_t)size);
    m->n += (size_t)size;
}

/* One archive: open from its first sample's append to its last's. Only the
 * worker whose position is the pool's `written` touches it, so the file
 * needs no lock of its own. */
typedef struct shard_out {
    FILE *f;
} shard_out;

typedef struct pool {
    const md_opts *o;
    int class_width;
    atomic_long next;
    atomic_int stop;
    pthread_mutex_t mu;
    pthread_cond_t turn; /* shards: `written` moved on */
    char err[4608];
    uint64_t bytes, images;
    shard_out *shards;   /* o->shards of them, or NULL */
    long total;          /* images */
    long written;        /* shards: positions appended (under mu) */
    perm order;          /* shards: position -> sample */
} pool;

static void pool_fail(pool *p, const char *fmt, const char *a, const char *b)
{
    pthread_mutex_lock(&p->mu);
    if (!p->err[0])
        snprintf(p->err, sizeof p->err, fmt, a, b);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->turn); /* waiters for a shard's turn give up */
    pthread_mutex_unlock(&p->mu);
}

/* Shard k holds positions [shard_first(k), shard_first(k + 1)). */
static long shard_first(const pool *p, long k)
{
    return (long)((uint64_t)k * (uint64_t)p->total / (uint64_t)p->o->shards);
}

static long shard_of(const pool *p, long pos)
{
    long k = (long)((uint64_t)pos * (uint64_t)p->o->shards / (uint64_t)p->total);
    while (k + 1 < p->o->shards && shard_first(p, k + 1) <= pos)
        k++;
    while (k > 0 && shard_first(p, k) > pos)
        k--;
    return k;
}

static void shard_path(const pool *p, long k, char *buf, size_t n)
{
    snprintf(buf, n, "%s/train-%06ld.tar", p->o->dir, k);
}

/* Appends sample (c, i) at position pos, once position pos - 1 is written:
 * opens its shard at the shard's first position, ends the archive (two
 * zero blocks) and closes it at its last. Returns 0, or -1 with the pool
 * failed. */
static int shard_append(pool *p, long pos, int c, int i, const void *data, size_t len)
{
    static const uint8_t end[1024];
    const md_opts *o = p->o;
    long k = shard_of(p, pos);
    shard_out *so = &p->shards[k];
    char key[64], name[80], cls[16], path[4096];
    snprintf(key, sizeof key, "class_%0*d_img_%05d", p->class_width, c, i);
    shard_path(p, k, path, sizeof path);

    pthread_mutex_lock(&p->mu);
    while (p->written != pos && !atomic_load(&p->stop))
        pthread_cond_wait(&p->turn, &p->mu);
    pthread_mutex_unlock(&p->mu);
    if (atomic_load(&p->stop))
        return -1;

    /* Our turn: nobody else touches the shards until `written` moves on. */
    errno = 0;
    if (pos == shard_first(p, k)) {
        /* "x": never replace a file, even one that appeared after the
         * empty-directory check, unless --force. */
        if ((so->f = fopen(path, o->force ? "wb" : "wbx")) == NULL) {
            pool_fail(p, "%s: %s", path, strerror(errno));
            return -1;
        }
        setvbuf(so->f, NULL, _IOFBF, 1 << 20);
    }
    snprintf(name, sizeof name, "%s.%s", key, o->format == FMT_JPG ? "jpg" : "png");
    int rc = tar_write_member(so->f, name, data, len, TAR_MTIME);
    if (rc == 0) {
        int n = snprintf(cls, sizeof cls, "%d", c);
        snprintf(name, sizeof name, "%s.cls", key);
        rc = tar_write_member(so->f, name, cls, (size_t)n, TAR_MTIME);
    }
    if (rc == 0 && pos + 1 == shard_first(p, k + 1)) {
        if (fwrite(end, 1, sizeof end, so->f) != sizeof end)
            rc = -(errno ? errno : EIO);
        if (fclose(so->f) != 0 && rc == 0)
            rc = -(errno ? errno : EIO);
        so->f = NULL;
    }
    if (rc < 0) {
        pool_fail(p, "%s: %s", path, strerror(-rc));
        return -1;
    }
    pthread_mutex_lock(&p->mu);
    p->written = pos + 1;
    pthread_cond_broadcast(&p->turn);
    pthread_mutex_unlock(&p->mu);
    return 0;
}

static int write_all(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -errno;
    if (fwrite(data, 1, len, f) != len) {
        int e = errno ? errno : EIO;
        fclose(f);
        return -e;
    }
    if (fclose(f) != 0)
        return -errno;
    return 0;
}

static void *worker(void *arg)
{
    pool *p = arg;
    const md_opts *o = p->o;
    scratch sc;
    membuf mb = {0};
    uint64_t bytes = 0, images = 0;
    const long total = (long)o->classes * (long)o->per_class;
    char path[4096];
#if GF_CLI_HAVE_TJ
    tjhandle tj = NULL;
    unsigned char *jbuf = NULL;
    unsigned long jcap = 0;
#endif

    sc.gw = o->width / CELL + 3;
    sc.gh = o->height / CELL + 3;
    sc.img = malloc((size_t)o->width * (size_t)o->height * 3 * sizeof(float));
    sc.rgb = malloc((size_t)o->width * (size_t)o->height * 3);
    sc.cloud = malloc((size_t)sc.gw * (size_t)sc.gh * sizeof(float));
    sc.tex = malloc((size_t)sc.gw * (size_t)sc.gh * sizeof(float));
    sc.fw = o->width / FINE_CELL + 3;
    sc.fh = o->height / FINE_CELL + 3;
    sc.fine = malloc((size_t)sc.fw * (size_t)sc.fh * sizeof(float));
    if (!sc.img || !sc.rgb || !sc.cloud || !sc.tex || !sc.fine) {
        pool_fail(p, "%s%s", "out of memory", "");
        goto out;
    }
#if GF_CLI_HAVE_TJ
    if (o->format == FMT_JPG) {
        tj = tjInitCompress();
        jcap = tjBufSize(o->width, o->height, TJSAMP_420);
        jbuf = tj ? tjAlloc((int)jcap) : NULL;
        if (!tj || !jbuf) {
            pool_fail(p, "turbojpeg: %s%s", tj ? "out of memory" : tjGetErrorStr(), "");
            goto out;
        }
    }
#endif

    while (!atomic_load(&p->stop)) {
        long j = atomic_fetch_add(&p->next, 1);
        if (j >= total)
            break;
        long pos = j; /* shards: the position; the sample is the permutation's */
        if (o->shards)
            j = (long)perm_at(&p->order, (uint64_t)pos);
        int c = (int)(j / o->per_class), i = (int)(j % o->per_class);
        const void *data = NULL;
        size_t len = 0;
        int rc;

        render(o, c, i, &sc);
        if (o->shards)
            snprintf(path, sizeof path, "%s/train-%06ld.tar:class_%0*d_img_%05d.%s", o->dir,
                     shard_of(p, pos), p->class_width, c, i,
                     o->format == FMT_JPG ? "jpg" : "png");
        else
            snprintf(path, sizeof path, "%s/class_%0*d/img_%05d.%s", o->dir, p->class_width,
                     c, i, o->format == FMT_JPG ? "jpg" : "png");
        mb.n = 0;
        if (o->format == FMT_JPG) {
#if GF_CLI_HAVE_TJ
            unsigned long jsize = jcap;
            if (tjCompress2(tj, sc.rgb, o->width, 0, o->height, TJPF_RGB, &jbuf, &jsize,
                            TJSAMP_420, o->quality, TJFLAG_NOREALLOC) != 0) {
                pool_fail(p, "%s: turbojpeg: %s", path, tjGetErrorStr2(tj));
                break;
            }
            data = jbuf;
            len = jsize;
#else
            if (!stbi_write_jpg_to_func(membuf_write, &mb, o->width, o->height, 3, sc.rgb,
                                        o->quality) || mb.oom) {
                pool_fail(p, "%s: %s", path, "JPEG encoding failed");
                break;
            }
            data = mb.p;
            len = mb.n;
#endif
        } else {
            if (!stbi_write_png_to_func(membuf_write, &mb, o->width, o->height, 3, sc.rgb,
                                        o->width * 3) || mb.oom) {
                pool_fail(p, "%s: %s", path, "PNG encoding failed");
                break;
            }
            data = mb.p;
            len = mb.n;
        }
        if (o->shards) {
            if (shard_append(p, pos, c, i, data, len) < 0)
                break;
        } else if ((rc = write_all(path, data, len)) < 0) {
            pool_fail(p, "%s: %s", path, strerror(-rc));
            break;
        }
        bytes += len;
        images++;
    }
out:
    pthread_mutex_lock(&p->mu);
    p->bytes += bytes;
    p->images += images;
    pthread_mutex_unlock(&p->mu);
#if GF_CLI_HAVE_TJ
    if (jbuf)
        tjFree(jbuf);
    if (tj)
        tjDestroy(tj);
#endif
    free(mb.p);
    free(sc.img);
    free(sc.rgb);
    free(sc.cloud);
    free(sc.tex);
    free(sc.fine);
    return NULL;
}

/* ---- the command ---------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpufeed make-dataset DIR [options]\n"
            "\n"
            "Writes a synthetic ImageFolder: DIR/class_XX/img_YYYYY.jpg. Each class has\n"
            "its own hue, shape and stripe frequency (independent of --seed, so sets made\n"
            "with different seeds share classes); samples vary in pose, size, lighting,\n"
            "background, distractors and noise. Deterministic from --seed.\n"
            "\n"
            "With --shards N, the same images go into N tar shards instead,\n"
            "DIR/train-000000.tar .. DIR/train-{N-1}.tar (six digits), WebDataset\n"
            "style: per sample KEY.jpg (or .png) and KEY.cls (the class index as\n"
            "text), KEY = class_XX_img_YYYYY, in an order shuffled by --seed and\n"
            "cut into N runs of (nearly) equal size. Read them back with --data 'DIR/train-{000000..\n"
            "0000NN}.tar' (verify, bench, the library).\n"
            "\n"
            "options:\n"
            "  --classes K      classes (default 10)\n"
            "  --per-class M    images per class (default 100)\n"
            "  --size WxH       image size (default 500x375)\n"
            "  --format F       jpg|png (default jpg)\n"
            "  --seed S         seed (default 0)\n"
            "  --quality Q      JPEG quality 1..100 (default 90)\n"
            "  --threads N      worker threads (default: all cores)\n"
            "  --shards N       write N tar shards (1..1000000, at most one per image)\n"
            "                   instead of a folder tree\n"
            "  --force          write into a non-empty DIR (replaces same-named files)\n"
            "  -h, --help       this text\n");
}

/* 1 if dir exists and has entries, 0 if empty or missing, -errno on error. */
static int dir_nonempty(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISDIR(st.st_mode))
        return -ENOTDIR;
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    struct dirent *e;
    int found = 0;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            found = 1;
            break;
        }
    closedir(d);
    return found;
}

/* The shard table (files are opened as they are reached). Returns 0, or
 * -1 with the message printed. */
static int open_shards(const char *cmd, const md_opts *o, pool *p)
{
    int rc = cli_mkdir_p(o->dir);
    if (rc < 0) {
        cli_error(cmd, "%s: %s", o->dir, strerror(-rc));
        return -1;
    }
    p->shards = calloc((size_t)o->shards, sizeof *p->shards);
    if (!p->shards) {
        cli_error(cmd, "out of memory");
        return -1;
    }
    return 0;
}

/* Closes what a failed run left open (a finished shard is closed by its
 * last append) and frees the table. */
static void close_shards(pool *p)
{
    if (!p->shards)
        return;
    for (int k = 0; k < p->o->shards; k++)
        if (p->shards[k].f)
            fclose(p->shards[k].f);
    free(p->shards);
    p->shards = NULL;
}

/* Renders and writes the set o describes; see cli_make_dataset. */
static int make(const char *cmd, const md_opts *o, int quiet)
{
    int rc;

    rc = dir_nonempty(o->dir);
    if (rc < 0) {
        cli_error(cmd, "%s: %s", o->dir, strerror(-rc));
        return -1;
    }
    if (rc > 0 && !o->force) {
        cli_error(cmd, "%s is not empty (use --force to write into it)", o->dir);
        return -1;
    }

    pool p = {.o = o};
    p.class_width = 2;
    for (int k = o->classes - 1; k >= 100; k /= 10)
        p.class_width++;
    long total = (long)o->classes * (long)o->per_class;
    char path[4096];
    p.total = total;
    if (o->shards) {
        if ((rc = open_shards(cmd, o, &p)) < 0)
            return -1;
        perm_init(&p.order, (uint64_t)total, o->seed);
    }
    for (int c = 0; c < o->classes && !o->shards; c++) {
        snprintf(path, sizeof path, "%s/class_%0*d", o->dir, p.class_width, c);
        if ((rc = cli_mkdir_p(path)) < 0) {
            cli_error(cmd, "%s: %s", path, strerror(-rc));
            return -1;
        }
    }

    int nt = o->threads ? o->threads : cli_cores();
    if (nt > total)
        nt = (int)total;
    pthread_t *tids = calloc((size_t)nt, sizeof *tids);
    if (!tids) {
        cli_error(cmd, "out of memory");
        close_shards(&p);
        return -1;
    }
    atomic_init(&p.next, 0);
    atomic_init(&p.stop, 0);
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.turn, NULL);

    double t0 = cli_now();
    int started = 0;
    for (; started < nt; started++)
        if (pthread_create(&tids[started], NULL, worker, &p) != 0)
            break;
    if (started == 0) {
        cli_error(cmd, "could not start a thread");
        free(tids);
        pthread_cond_destroy(&p.turn);
        pthread_mutex_destroy(&p.mu);
        close_shards(&p);
        return -1;
    }
    for (int i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    free(tids);
    pthread_cond_destroy(&p.turn);
    pthread_mutex_destroy(&p.mu);
    close_shards(&p); /* a failed run leaves what it wrote */
    double secs = cli_now() - t0;

    if (p.err[0]) {
        cli_error(cmd, "%s", p.err);
        return -1;
    }
    if (quiet)
        return 0;
    if (o->shards) {
        printf("make-dataset: %llu images (%d classes x %d, %dx%d %s) in %s as %d tar "
               "shard%s train-%06d.tar..train-%06d.tar: mean %.1f KB, %.2f s, %d threads\n",
               (unsigned long long)p.images, o->classes, o->per_class, o->width, o->height,
               o->format == FMT_JPG ? "jpg" : "png", o->dir, o->shards,
               o->shards == 1 ? "" : "s", 0, o->shards - 1,
               p.images ? (double)p.bytes / (double)p.images / 1000.0 : 0.0, secs, started);
        return 0;
    }
    printf("make-dataset: %llu images (%d classes x %d, %dx%d %s) in %s: mean %.1f KB, "
           "%.2f s, %d threads\n",
           (unsigned long long)p.images, o->classes, o->per_class, o->width, o->height,
           o->format == FMT_JPG ? "jpg" : "png", o->dir,
           p.images ? (double)p.bytes / (double)p.images / 1000.0 : 0.0, secs, started);
    return 0;
}

int cli_make_dataset(const char *cmd, const char *dir, int classes, int per_class, int width,
                     int height, uint64_t seed, int threads, int quiet)
{
    md_opts o = {.dir = dir, .classes = classes, .per_class = per_class, .width = width,
                 .height = height, .format = FMT_JPG, .quality = 90, .threads = threads,
                 .seed = seed};
    return make(cmd, &o, quiet);
}

int cmd_make_dataset(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"classes", required_argument, NULL, 'k'},
        {"per-class", required_argument, NULL, 'm'},
        {"size", required_argument, NULL, 's'},
        {"format", required_argument, NULL, 'f'},
        {"seed", required_argument, NULL, 'S'},
        {"quality", required_argument, NULL, 'q'},
        {"threads", required_argument, NULL, 't'},
        {"force", no_argument, NULL, 'F'},
        {"shards", required_argument, NULL, 'N'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const char *const formats[] = {"jpg", "png", NULL};
    md_opts o = {.classes = 10, .per_class = 100, .width = 500, .height = 375,
                 .format = FMT_JPG, .quality = 90, .threads = 0};
    int ch;

    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'k': if (cli_parse_int(CMD, "classes", optarg, 1, 100000, &o.classes)) return CLI_USAGE; break;
        case 'm': if (cli_parse_int(CMD, "per-class", optarg, 1, 10000000, &o.per_class)) return CLI_USAGE; break;
        case 's': if (cli_parse_size(CMD, "size", optarg, 16384, &o.width, &o.height)) return CLI_USAGE; break;
        case 'f': if ((o.format = cli_parse_choice(CMD, "format", optarg, formats)) < 0) return CLI_USAGE; break;
        case 'S': if (cli_parse_u64(CMD, "seed", optarg, &o.seed)) return CLI_USAGE; break;
        case 'q': if (cli_parse_int(CMD, "quality", optarg, 1, 100, &o.quality)) return CLI_USAGE; break;
        case 't': if (cli_parse_int(CMD, "threads", optarg, 1, 1024, &o.threads)) return CLI_USAGE; break;
        case 'F': o.force = 1; break;
        case 'N': if (cli_parse_int(CMD, "shards", optarg, 1, SHARDS_MAX, &o.shards)) return CLI_USAGE; break;
        case 'h': usage(stdout); return CLI_OK;
        case ':': cli_error(CMD, "%s needs a value", argv[optind - 1]); return CLI_USAGE;
        default: cli_error(CMD, "unknown option '%s' (try --help)", argv[optind - 1]); return CLI_USAGE;
        }
    }
    if (optind >= argc) {
        cli_error(CMD, "missing DIR (try --help)");
        return CLI_USAGE;
    }
    if (optind < argc - 1) {
        cli_error(CMD, "one DIR expected, got also '%s'", argv[optind + 1]);
        return CLI_USAGE;
    }
    o.dir = argv[optind];
    if ((long)o.classes * (long)o.per_class > 1000000000L) {
        cli_error(CMD, "too many images (classes x per-class > 1e9)");
        return CLI_USAGE;
    }
    if (o.width < 16 || o.height < 16) {
        cli_error(CMD, "--size: at least 16x16");
        return CLI_USAGE;
    }
    if ((long)o.shards > (long)o.classes * (long)o.per_class) {
        cli_error(CMD, "--shards %d: more shards than images (%ld): some would be empty",
                  o.shards, (long)o.classes * (long)o.per_class);
        return CLI_USAGE;
    }

    return make(CMD, &o, 0) < 0 ? CLI_FAIL : CLI_OK;
}
