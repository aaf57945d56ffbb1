/* MixUp / CutMix (settings.augment's last stage, `mix`) as torchvision
 * v2's: per batch lam ~ Beta(alpha, alpha), the batch paired with itself
 * rolled by one (sample i with i - 1, 0 with the last), MixUp's blend or
 * CutMix's box, and soft targets. Pure functions: the draw of a batch key
 * (gf__mix_key), the targets and the CPU twin of kernels/convert.cu's mix
 * kernel, bit for bit. The CPU twin runs as mix jobs on the decode threads
 * once a batch's convert jobs are done (controller.c's drain_dones); the
 * draw and the targets on gf-control (queue_mix, queue_copy).
 *
 * The batch's stream: splitmix64 from gf__mix64(gf__sample_key(seed,
 * epoch, position) ^ STREAM_MIX): first the switch (one uniform, always
 * drawn), then the Beta's two Gammas (each: Box-Muller normals and
 * uniforms, as many as Marsaglia-Tsang rejects, then for alpha < 1 one
 * more uniform), then CutMix's r_x, r_y. gpufeed's own stream, with torch's
 * distributions: not torch's numbers. */
#include "augment.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#define STREAM_MIX 0x3c6ef372fe94f82bull

static double normal(uint64_t *r) /* Box-Muller, one of the pair */
{
    double u1 = 1.0 - gf__draw_unit(r), u2 = gf__draw_unit(r); /* u1 in (0, 1]: its log is finite */
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* log of a Gamma(shape, 1) draw: Marsaglia and Tsang (2000) for shape >= 1;
 * below 1, Gamma(shape + 1) * U^(1/shape), in logs so a small shape's
 * tiny draws do not underflow to 0 (which would make 0/0 of the Beta). */
static double log_gamma_draw(uint64_t *r, double shape)
{
    double boost = 0;
    if (shape < 1) {
        double u = 1.0 - gf__draw_unit(r);
        boost = log(u) / shape;
        shape += 1;
    }
    const double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = normal(r), v = 1.0 + c * x;
        if (v <= 0)
            continue;
        v = v * v * v;
        double u = 1.0 - gf__draw_unit(r);
        if (log(u) < 0.5 * x * x + d - d * v + d * log(v))
            return log(d) + log(v) + boost;
    }
}

/* X / (X + Y) = 1 / (1 + Y / X), from the logs. */
static double beta_of(uint64_t *r, double a, double b)
{
    double lx = log_gamma_draw(r, a), ly = log_gamma_draw(r, b);
    return 1.0 / (1.0 + exp(ly - lx));
}

uint64_t gf__mix_key(uint64_t seed, uint64_t epoch, uint64_t position)
{
    return gf__mix64(gf__sample_key(seed, epoch, position) ^ STREAM_MIX);
}

double gf__beta_draw(double alpha, double beta, uint64_t key)
{
    uint64_t r = key;
    return beta_of(&r, alpha, beta);
}

void gf__mix_draw_of(const gf__augment *a, uint64_t key, gf__mix_draw *d)
{
    uint64_t r = key;
    /* timm's Mixup(switch_prob): CutMix with probability switch when both are on */
    bool cut = gf__draw_unit(&r) < a->mix_switch;
    if (a->mixup_alpha == 0)
        cut = true;
    else if (a->cutmix_alpha == 0)
        cut = false;
    double alpha = cut ? a->cutmix_alpha : a->mixup_alpha;
    /* torch's Beta samples a float32; v2 takes float() of it */
    float lam = (float)beta_of(&r, alpha, alpha);
    *d = (gf__mix_draw){.kind = cut ? GF__MIX_CUTMIX : GF__MIX_MIXUP, .lam = lam,
                        .lam_target = lam};
    if (!cut)
        return;
    /* CutMix._transform's box, in its integer arithmetic */
    const int W = a->out_w, H = a->out_h;
    int rx = gf__draw_below(&r, W), ry = gf__draw_below(&r, H);
    double rr = 0.5 * sqrt(1.0 - (double)lam);
    int rw = (int)(rr * W), rh = (int)(rr * H);
    d->x1 = GF__MAX(rx - rw, 0);
    d->y1 = GF__MAX(ry - rh, 0);
    d->x2 = GF__MIN(rx + rw, W);
    d->y2 = GF__MIN(ry + rh, H);
    d->lam_target = 1.0 - (double)(d->x2 - d->x1) * (d->y2 - d->y1) / ((double)W * H);
}

void gf__mix_targets(const gf__mix_draw *d, const int32_t *labels, int count, int classes,
                     float *t)
{
    /* _mixup_label: label.roll(1, 0).mul_(1.0 - lam).add_(label.mul(lam)),
     * a float32 tensor times a Python float: the scalar made float32 */
    const float keep = (float)d->lam_target, take = (float)(1.0 - d->lam_target);
    memset(t, 0, (size_t)count * (size_t)classes * sizeof *t);
    for (int i = 0; i < count; i++) {
        int32_t own = labels[i], other = labels[i ? i - 1 : count - 1];
        float *row = t + (size_t)i * (size_t)classes;
        if (other >= 0 && other < classes)
            row[other] = take;
        if (own >= 0 && own < classes)
            row[own] = row[own] + keep;
    }
}

/* ---- the CPU twin ---- */

static float load(const void *out, gf_dtype dt, size_t at)
{
    switch (dt) {
    case GF_DTYPE_FLOAT16: return gf__f16_to_f32(((const uint16_t *)out)[at]);
    case GF_DTYPE_BFLOAT16: return gf__bf16_to_f32(((const uint16_t *)out)[at]);
    default: return ((const float *)out)[at];
    }
}

/* NaN canonical, as the convert kernel's stores make it. */
static void store(void *out, gf_dtype dt, size_t at, float v)
{
    switch (dt) {
    case GF_DTYPE_FLOAT16:
        ((uint16_t *)out)[at] = v == v ? gf__f32_to_f16(v) : 0x7fff;
        break;
    case GF_DTYPE_BFLOAT16:
        ((uint16_t *)out)[at] = v == v ? gf__f32_to_bf16(v) : 0x7fff;
        break;
    default: {
        uint32_t nan = 0x7fffffff;
        if (v != v)
            memcpy(&v, &nan, sizeof v);
        ((float *)out)[at] = v;
    }
    }
}

/* Whether element e of a sample lies in CutMix's box. */
static bool in_box(const gf__mix_draw *d, const gf__convert *cv, size_t e)
{
    size_t px = cv->layout == GF_LAYOUT_NCHW ? e % ((size_t)cv->h * cv->w) : e / (size_t)cv->c;
    int y = (int)(px / (size_t)cv->w), x = (int)(px % (size_t)cv->w);
    return y >= d->y1 && y < d->y2 && x >= d->x1 && x < d->x2;
}

enum { BLOCK = 1024 }; /* elements kept from the last sample at once */

void gf__mix_cpu(const gf__mix_draw *d, const gf__convert *cv, void *out, int count,
                 size_t first, size_t n)
{
    if (count < 1)
        return;
    const size_t E = (size_t)cv->h * cv->w * cv->c;
    const gf_dtype dt = cv->dtype;
    /* MixUp._transform: inpt.roll(1, 0).mul_(1.0 - lam).add_(inpt.mul(lam)),
     * each product rounded to float32, then their sum (no fused multiply-add:
     * the kernel uses __fmul_rn/__fadd_rn) */
    const float lam = d->lam, rest = (float)(1.0 - (double)d->lam);
    const bool cut = d->kind == GF__MIX_CUTMIX;
    float keep[BLOCK];
    for (size_t b0 = first; b0 < first + n; b0 += BLOCK) {
        size_t m = GF__MIN((size_t)BLOCK, first + n - b0);
        const size_t last = (size_t)(count - 1) * E;
        for (size_t k = 0; k < m; k++)
            keep[k] = load(out, dt, last + b0 + k);
        /* from the last sample down: sample i - 1 is still its own */
        for (int i = count - 1; i >= 0; i--) {
            const size_t at = (size_t)i * E + b0, from = (size_t)(i ? i - 1 : 0) * E + b0;
            for (size_t k = 0; k < m; k++) {
                if (cut && !in_box(d, cv, b0 + k))
                    continue;
                float other = i ? load(out, dt, from + k) : keep[k];
                if (!cut) { /* two statements: no contraction, even under clang */
                    const float own = lam * load(out, dt, at + k), theirs = rest * other;
                    other = own + theirs;
                }
                store(out, dt, at + k, other);
            }
        }
    }
}
