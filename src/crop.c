/* Crop planning: where in the source image a sample's output comes from.
 * Pure functions of the transform, the image size and the sample's key,
 * run on the decode threads (no state, no allocation).
 *
 * Both transforms reduce to one rectangle in source coordinates (float),
 * resampled to out_w x out_h and optionally mirrored: train is
 * torchvision's RandomResizedCrop + RandomHorizontalFlip, eval its
 * Resize(size / crop_fraction) + CenterCrop. */
#include "decoder.h"

#include <math.h>

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *r)
{
    return gf__splitmix64(&r->s);
}

static double rng_unit(rng *r) /* [0, 1) */
{
    return (double)(rng_next(r) >> 11) * 0x1p-53;
}

static double rng_uniform(rng *r, double a, double b)
{
    return a + (b - a) * rng_unit(r);
}

static int rng_int(rng *r, int n) /* [0, n] */
{
    return (int)(((rng_next(r) >> 32) * (uint64_t)((uint32_t)n + 1)) >> 32);
}

/* Python's round(): halves to even. Whatever the FPU's rounding mode. */
static double round_even(double x)
{
    double r = floor(x + 0.5);
    if (r - x == 0.5 && fmod(r, 2) != 0)
        r -= 1;
    return r;
}

/* torchvision RandomResizedCrop.get_params, then the flip. */
static void plan_train(const gf__transform *t, int W, int H, uint64_t key, gf__crop *c)
{
    rng r = {key + GF__GOLDEN64}; /* draw n is gf__mix64(key + n * GF__GOLDEN64), n >= 1 */
    double area = (double)W * H;
    double rmin = t->ratio_min, rmax = t->ratio_max;
    if (!(rmin > 0) || !(rmax > 0) || !isfinite(rmin) || !isfinite(rmax))
        rmin = rmax = 1.0;
    double lr0 = log(rmin), lr1 = log(rmax);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * rng_uniform(&r, t->scale_min, t->scale_max);
        double ar = exp(rng_uniform(&r, lr0, lr1));
        double w = round_even(sqrt(target * ar)), h = round_even(sqrt(target / ar));
        if (w >= 1 && w <= W && h >= 1 && h <= H) {
            int i = rng_int(&r, H - (int)h), j = rng_int(&r, W - (int)w);
            *c = (gf__crop){j, i, w, h, 0};
            goto flip;
        }
    }
    {
        /* fallback: central crop, clamped to the ratio range */
        double in_ratio = (double)W / H, w = W, h = H, lo = fmin(rmin, rmax),
               hi = fmax(rmin, rmax);
        if (in_ratio < lo)
            h = fmax(1, fmin(H, round_even(w / lo)));
        else if (in_ratio > hi)
            w = fmax(1, fmin(W, round_even(h * hi)));
        *c = (gf__crop){floor((W - w) / 2), floor((H - h) / 2), w, h, 0};
    }
flip:
    c->flip = rng_unit(&r) < t->flip_prob;
}

/* Shorter side to min(out)/crop_fraction (scaled up further if the output
 * would not fit), then a center crop rounded to whole resized pixels; the
 * result mapped back to source coordinates. */
static void plan_eval(const gf__transform *t, int W, int H, gf__crop *c)
{
    double cf = t->crop_fraction > 0 && t->crop_fraction <= 1 ? t->crop_fraction : 1.0;
    double target = GF__MIN(t->out_w, t->out_h) / cf;
    double f = target / GF__MIN(W, H);
    f = fmax(f, fmax((double)t->out_w / W, (double)t->out_h / H));
    double rw = W * f, rh = H * f;
    double left = floor((rw - t->out_w) / 2 + 0.5), top = floor((rh - t->out_h) / 2 + 0.5);
    left = fmax(0, left);
    top = fmax(0, top);
    *c = (gf__crop){left / f, top / f, t->out_w / f, t->out_h / f, 0};
    /* guard the right/bottom edges against rounding past the image */
    c->w = fmin(c->w, W - c->x);
    c->h = fmin(c->h, H - c->y);
}

void gf__crop_plan(const gf__transform *t, int W, int H, uint64_t key, gf__crop *c)
{
    if (t->kind == GF_TRANSFORM_EVAL)
        plan_eval(t, W, H, c);
    else
        plan_train(t, W, H, key, c);
}
