/* Crop planning: where in the source image a sample's output comes from.
 * Pure functions of the transform, the image size and the sample's key,
 * run on the decode threads (no state, no allocation).
 *
 * Both transforms reduce to one rectangle in source coordinates (float),
 * resampled to out_w x out_h and optionally mirrored: train is
 * torchvision's RandomResizedCrop + RandomHorizontalFlip, eval its
 * Resize(s) + CenterCrop((out_h, out_w)), box for box, to torchvision's
 * rounding (tests/crop_torchvision.py holds both to torchvision). */
#include "decoder.h"

#include <math.h>

static double uniform(uint64_t *r, double a, double b)
{
    return a + (b - a) * gf__draw_unit(r);
}

/* torchvision RandomResizedCrop.get_params, then the flip. */
static void plan_train(const gf__transform *t, int W, int H, uint64_t key, gf__crop *c)
{
    uint64_t r = key + GF__GOLDEN64; /* draw n is gf__mix64(key + n * GF__GOLDEN64), n >= 1 */
    double area = (double)W * H;
    double rmin = t->ratio_min, rmax = t->ratio_max;
    if (!(rmin > 0) || !(rmax > 0) || !isfinite(rmin) || !isfinite(rmax))
        rmin = rmax = 1.0;
    double lr0 = log(rmin), lr1 = log(rmax);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * uniform(&r, t->scale_min, t->scale_max);
        double ar = exp(uniform(&r, lr0, lr1));
        double w = gf__round_even(sqrt(target * ar)), h = gf__round_even(sqrt(target / ar));
        if (w >= 1 && w <= W && h >= 1 && h <= H) {
            int i = gf__draw_below(&r, H - (int)h + 1), j = gf__draw_below(&r, W - (int)w + 1);
            *c = (gf__crop){j, i, w, h, 0};
            goto flip;
        }
    }
    {
        /* fallback: central crop, clamped to the ratio range */
        double in_ratio = (double)W / H, w = W, h = H, lo = fmin(rmin, rmax),
               hi = fmax(rmin, rmax);
        if (in_ratio < lo)
            h = fmax(1, fmin(H, gf__round_even(w / lo)));
        else if (in_ratio > hi)
            w = fmax(1, fmin(W, gf__round_even(h * hi)));
        *c = (gf__crop){floor((W - w) / 2), floor((H - h) / 2), w, h, 0};
    }
flip:
    c->flip = gf__draw_unit(&r) < t->flip_prob;
}

/* Resize(s)'s shorter side: min(out) / crop_fraction, taken as the integer
 * it is meant to be when within float32's error of one (224 / 0.875 =
 * 256), else floored (timm's int(math.floor(size / crop_pct))). */
static int64_t eval_short_side(const gf__transform *t)
{
    double cf = t->crop_fraction > 0 && t->crop_fraction <= 1 ? t->crop_fraction : 1.0;
    double q = GF__MIN(t->out_w, t->out_h) / cf, r = floor(q + 0.5);
    q = fabs(q - r) <= 1e-6 * q ? r : floor(q);
    return (int64_t)fmin(q, 1 << 22); /* s * H stays exact in a double */
}

/* torchvision's Resize(s) of a W x H image (_compute_resized_output_size):
 * the shorter side to s, the longer to int(s * long / short), truncated. */
static void resized_size(int64_t W, int64_t H, int64_t s, int64_t *rw, int64_t *rh)
{
    if (W <= H) {
        *rw = s;
        *rh = (int64_t)((double)(s * H) / (double)W);
    } else {
        *rh = s;
        *rw = (int64_t)((double)(s * W) / (double)H);
    }
}

/* CenterCrop's offset, int(round((n - c) / 2.0)): halves to even. */
static int64_t center_offset(int64_t n, int64_t c)
{
    int64_t d = n - c, half = d / 2;
    return d % 2 && half % 2 ? half + 1 : half;
}

/* torchvision's Resize(s) + CenterCrop((out_h, out_w)), mapped back to
 * source coordinates per axis (each has its own scale, rw / W and
 * rh / H). Where the crop would be larger than the resized image (a
 * non-square output elongated beyond the room 1 / crop_fraction leaves),
 * torchvision pads with black; gpufeed instead takes the smallest s' > s
 * whose Resize(s') holds the crop: no black bars to learn from. */
static void plan_eval(const gf__transform *t, int W, int H, gf__crop *c)
{
    int64_t s = GF__MAX(1, eval_short_side(t)), rw, rh, ow = t->out_w, oh = t->out_h;
    resized_size(W, H, s, &rw, &rh);
    if (rw < ow || rh < oh) {
        /* the exact need, less one for the truncation's rounding */
        int64_t need = W <= H ? GF__MAX(ow, (oh * W + H - 1) / H)
                              : GF__MAX(oh, (ow * H + W - 1) / W);
        s = GF__MAX(s, need - 1);
        for (resized_size(W, H, s, &rw, &rh); rw < ow || rh < oh;
             resized_size(W, H, ++s, &rw, &rh))
            ;
    }
    double left = (double)center_offset(rw, ow), top = (double)center_offset(rh, oh);
    double fx = (double)W / (double)rw, fy = (double)H / (double)rh;
    *c = (gf__crop){left * fx, top * fy, ow * fx, oh * fy, 0};
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
