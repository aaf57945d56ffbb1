/* settings.augment: parsed at open, drawn per sample from its key, applied
 * on the decode thread (augment.h says what and where). The magnitude
 * tables are torchvision's _augmentation_space, computed as torch.linspace
 * computes them in float32, so a bin's magnitude is torchvision's to the
 * bit (python/tests/test_augment.py holds them to torch's own). */
#include "augment.h"


#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the draws: splitmix64 on a stream of the key's own ---- */

/* Distinct from crop.c's key + GOLDEN64 stream: the crops and flips a key
 * gives are the same with augmentation or without. */
static uint64_t stream(uint64_t key, uint64_t which)
{
    return gf__mix64(key ^ which);
}
#define STREAM_OPS 0x6a09e667f3bcc909ull
#define STREAM_ERASE 0xbb67ae8584caa73bull

/* ---- torchvision's magnitude tables ---- */

/* torch.linspace(start, end, steps)[i] in float32, as its CPU kernel
 * (AVX2) computes it: the first half counted up from start, the rest down
 * from end, each a fused multiply-add; but in whole blocks of 16 only each
 * 8-lane vector's first value is, the others are that one plus k steps
 * (Vectorized::arange), rounded twice. Held to torch.linspace for 1..256
 * steps by test_augment.py. */
static float linspace32(double start, double end, int steps, int i)
{
    float s = (float)start, e = (float)end;
    if (steps == 1)
        return s;
    float step = (e - s) / (float)(steps - 1);
    int half = steps / 2, lane = 0;
    if (i < steps / 16 * 16) { /* a vector's: from its first lane */
        lane = i % 8;
        i -= lane;
    }
    float at = i < half ? fmaf(step, (float)i, s) : fmaf(-step, (float)(steps - i - 1), e);
    if (!lane)
        return at;
    float k_steps = (float)lane * step;
    return at + k_steps;
}

/* 8 - (torch.arange(bins) / ((bins - 1) / d)).round().int(): float32, halves to even */
static int posterize_bits(int bins, double d, int i)
{
    float q = (float)i / (float)((bins - 1) / d);
    return 8 - (int)nearbyintf(q);
}

typedef struct mag_info {
    int has;    /* a table (else the magnitude is 0.0) */
    int is_signed;
    double value;
} mag_info;

/* The op's magnitude at bin i in the space of kind (TA's wide ranges or
 * RandAugment's and AutoAugment's), for a w x h image. */
static mag_info magnitude(gf__aug_kind kind, gf__aug_op op, int bins, int i, int w, int h)
{
    int wide = kind == GF__AUG_TA_WIDE;
    switch (op) {
    case GF__OP_SHEAR_X:
    case GF__OP_SHEAR_Y:
        return (mag_info){1, 1, linspace32(0.0, wide ? 0.99 : 0.3, bins, i)};
    case GF__OP_TRANSLATE_X:
        return (mag_info){1, 1, linspace32(0.0, wide ? 32.0 : 150.0 / 331.0 * w, bins, i)};
    case GF__OP_TRANSLATE_Y:
        return (mag_info){1, 1, linspace32(0.0, wide ? 32.0 : 150.0 / 331.0 * h, bins, i)};
    case GF__OP_ROTATE:
        return (mag_info){1, 1, linspace32(0.0, wide ? 135.0 : 30.0, bins, i)};
    case GF__OP_BRIGHTNESS:
    case GF__OP_COLOR:
    case GF__OP_CONTRAST:
    case GF__OP_SHARPNESS:
        return (mag_info){1, 1, linspace32(0.0, wide ? 0.99 : 0.9, bins, i)};
    case GF__OP_POSTERIZE:
        return (mag_info){1, 0, posterize_bits(bins, wide ? 6.0 : 4.0, i)};
    case GF__OP_SOLARIZE:
        return (mag_info){1, 0, linspace32(255.0, 0.0, bins, i)};
    default:
        return (mag_info){0, 0, 0.0};
    }
}

/* TrivialAugmentWide's and RandAugment's spaces, in their dicts' order. */
static const gf__aug_op space_ops[] = {
    GF__OP_IDENTITY,   GF__OP_SHEAR_X,    GF__OP_SHEAR_Y,      GF__OP_TRANSLATE_X, GF__OP_TRANSLATE_Y,
    GF__OP_ROTATE,     GF__OP_BRIGHTNESS, GF__OP_COLOR,        GF__OP_CONTRAST,    GF__OP_SHARPNESS,
    GF__OP_POSTERIZE,  GF__OP_SOLARIZE,   GF__OP_AUTOCONTRAST, GF__OP_EQUALIZE,
};
#define N_SPACE ((int)(sizeof space_ops / sizeof space_ops[0]))

/* AutoAugmentPolicy.IMAGENET: (op, probability, magnitude bin or -1), twice. */
typedef struct aa_step {
    gf__aug_op op;
    double p;
    int bin;
} aa_step;
#define S_(name, p, bin) {GF__OP_##name, p, bin}
static const aa_step imagenet[][2] = {
    {S_(POSTERIZE, 0.4, 8), S_(ROTATE, 0.6, 9)},     {S_(SOLARIZE, 0.6, 5), S_(AUTOCONTRAST, 0.6, -1)},
    {S_(EQUALIZE, 0.8, -1), S_(EQUALIZE, 0.6, -1)},  {S_(POSTERIZE, 0.6, 7), S_(POSTERIZE, 0.6, 6)},
    {S_(EQUALIZE, 0.4, -1), S_(SOLARIZE, 0.2, 4)},   {S_(EQUALIZE, 0.4, -1), S_(ROTATE, 0.8, 8)},
    {S_(SOLARIZE, 0.6, 3), S_(EQUALIZE, 0.6, -1)},   {S_(POSTERIZE, 0.8, 5), S_(EQUALIZE, 1.0, -1)},
    {S_(ROTATE, 0.2, 3), S_(SOLARIZE, 0.6, 8)},      {S_(EQUALIZE, 0.6, -1), S_(POSTERIZE, 0.4, 6)},
    {S_(ROTATE, 0.8, 8), S_(COLOR, 0.4, 0)},         {S_(ROTATE, 0.4, 9), S_(EQUALIZE, 0.6, -1)},
    {S_(EQUALIZE, 0.0, -1), S_(EQUALIZE, 0.8, -1)},  {S_(INVERT, 0.6, -1), S_(EQUALIZE, 1.0, -1)},
    {S_(COLOR, 0.6, 4), S_(CONTRAST, 1.0, 8)},       {S_(ROTATE, 0.8, 8), S_(COLOR, 1.0, 2)},
    {S_(COLOR, 0.8, 8), S_(SOLARIZE, 0.8, 7)},       {S_(SHARPNESS, 0.4, 7), S_(INVERT, 0.6, -1)},
    {S_(SHEAR_X, 0.6, 5), S_(EQUALIZE, 1.0, -1)},    {S_(COLOR, 0.4, 0), S_(EQUALIZE, 0.6, -1)},
    {S_(EQUALIZE, 0.4, -1), S_(SOLARIZE, 0.2, 4)},   {S_(SOLARIZE, 0.6, 5), S_(AUTOCONTRAST, 0.6, -1)},
    {S_(INVERT, 0.6, -1), S_(EQUALIZE, 1.0, -1)},    {S_(COLOR, 0.6, 4), S_(CONTRAST, 1.0, 8)},
    {S_(EQUALIZE, 0.8, -1), S_(EQUALIZE, 0.6, -1)},
};
#undef S_
#define N_IMAGENET ((int)(sizeof imagenet / sizeof imagenet[0]))

typedef struct drawn {
    gf__aug_draw d;
    int stage;
} drawn;

static int put(drawn *out, int n, int max, int stage, int op, double m)
{
    if (n < max)
        out[n] = (drawn){{op, m}, stage};
    return n + 1;
}

/* Each stage's draws as its forward() makes them. */
static int draw_all(const gf__augment *a, uint64_t key, drawn *out, int max)
{
    uint64_t r = stream(key, STREAM_OPS);
    int n = 0, w = a->out_w, h = a->out_h;
    for (int s = 0; s < a->n_stages; s++) {
        const gf__aug_stage *st = &a->stages[s];
        switch (st->kind) {
        case GF__AUG_TA_WIDE:
        case GF__AUG_RANDAUGMENT: {
            int ops = st->kind == GF__AUG_TA_WIDE ? 1 : st->num_ops;
            for (int k = 0; k < ops; k++) {
                gf__aug_op op = space_ops[gf__draw_below(&r, N_SPACE)];
                mag_info m = magnitude(st->kind, op, st->bins, 0, w, h);
                if (m.has) {
                    int bin = st->kind == GF__AUG_TA_WIDE ? gf__draw_below(&r, st->bins) : st->magnitude;
                    m = magnitude(st->kind, op, st->bins, bin, w, h);
                }
                double v = m.has ? m.value : 0.0;
                if (m.is_signed && gf__draw_below(&r, 2))
                    v = -v;
                n = put(out, n, max, s, op, v);
            }
            break;
        }
        case GF__AUG_AUTOAUGMENT: {
            const aa_step *pol = imagenet[gf__draw_below(&r, N_IMAGENET)];
            float prob[2] = {(float)gf__draw_unit(&r), (float)gf__draw_unit(&r)}; /* torch.rand: float32 */
            int sign[2] = {gf__draw_below(&r, 2), gf__draw_below(&r, 2)};
            for (int k = 0; k < 2; k++) {
                if (!(prob[k] <= pol[k].p))
                    continue;
                mag_info m = pol[k].bin >= 0 ? magnitude(st->kind, pol[k].op, 10, pol[k].bin, w, h)
                                             : (mag_info){0, 0, 0.0};
                double v = m.has ? m.value : 0.0;
                if (m.is_signed && sign[k] == 0)
                    v = -v;
                n = put(out, n, max, s, pol[k].op, v);
            }
            break;
        }
        case GF__AUG_JITTER: {
            int order[4] = {0, 1, 2, 3}; /* torch.randperm(4): uniform */
            for (int k = 3; k > 0; k--) {
                int j = gf__draw_below(&r, k + 1), t = order[k];
                order[k] = order[j];
                order[j] = t;
            }
            double f[4];
            for (int k = 0; k < 4; k++)
                if (st->jitter_on[k])
                    f[k] = st->jitter[k][0] + (st->jitter[k][1] - st->jitter[k][0]) * gf__draw_unit(&r);
            for (int k = 0; k < 4; k++)
                if (st->jitter_on[order[k]])
                    n = put(out, n, max, s, GF__JITTER_BRIGHTNESS + order[k], f[order[k]]);
            break;
        }
        }
    }
    return n;
}

int gf__augment_draws(const gf__augment *a, uint64_t key, gf__aug_draw *out, int max)
{
    drawn d[GF__AUG_DRAWS_MAX];
    int n = draw_all(a, key, d, GF__AUG_DRAWS_MAX);
    for (int i = 0; i < n && i < max; i++)
        out[i] = d[i].d;
    return GF__MIN(n, max);
}

void gf__augment_cell(const gf__augment *a, uint64_t key, uint8_t *px, uint8_t *scratch)
{
    drawn d[GF__AUG_DRAWS_MAX];
    int n = draw_all(a, key, d, GF__AUG_DRAWS_MAX), w = a->out_w, h = a->out_h, c = a->channels;
    for (int i = 0; i < n; i++) {
        const gf__aug_stage *st = &a->stages[d[i].stage];
        double m = d[i].d.magnitude;
        switch (d[i].d.op) {
        case GF__JITTER_BRIGHTNESS:
            gf__adjust_brightness(px, w, h, c, m);
            break;
        case GF__JITTER_CONTRAST:
            gf__adjust_contrast(px, w, h, c, m);
            break;
        case GF__JITTER_SATURATION:
            gf__adjust_saturation(px, w, h, c, m);
            break;
        case GF__JITTER_HUE:
            gf__adjust_hue(px, w, h, c, m);
            break;
        default:
            gf__aug_apply((gf__aug_op)d[i].d.op, m, px, w, h, c, st->interp,
                          st->has_fill ? st->fill : NULL, scratch);
        }
    }
}

/* ---- RandomErasing ---- */

int gf__erase_rect(const gf__augment *a, uint64_t key, int *i, int *j, int *h, int *w)
{
    if (!a->erase)
        return 0;
    uint64_t r = stream(key, STREAM_ERASE);
    if (!(gf__draw_unit(&r) < a->erase_p))
        return 0;
    int H = a->out_h, W = a->out_w;
    double area = (double)H * W, lr0 = log(a->erase_ratio[0]), lr1 = log(a->erase_ratio[1]);
    for (int attempt = 0; attempt < 10; attempt++) {
        double ea = area * (a->erase_scale[0] + (a->erase_scale[1] - a->erase_scale[0]) * gf__draw_unit(&r));
        double ar = exp(lr0 + (lr1 - lr0) * gf__draw_unit(&r));
        double eh = gf__round_even(sqrt(ea * ar)), ew = gf__round_even(sqrt(ea / ar));
        if (!(eh < H && ew < W))
            continue;
        *h = (int)eh;
        *w = (int)ew;
        *i = gf__draw_below(&r, H - *h + 1);
        *j = gf__draw_below(&r, W - *w + 1);
        return 1;
    }
    return 0; /* torchvision gives the image back unchanged */
}

void gf__erase_cell(const gf__augment *a, uint64_t key, uint8_t *px)
{
    int i, j, h, w, c = a->channels;
    if (!gf__erase_rect(a, key, &i, &j, &h, &w))
        return;
    uint8_t v[4];
    for (int k = 0; k < c; k++) { /* a float into a uint8 tensor: truncated, as torch's copy;
                                     past 0..255 (undefined in C and in torch) saturated */
        float x = a->erase_value[k];
        v[k] = (uint8_t)(x <= 0 ? 0 : x >= 255 ? 255 : x);
    }
    for (int y = i; y < i + h; y++)
        for (int x = j; x < j + w; x++)
            memcpy(px + ((size_t)y * a->out_w + x) * c, v, (size_t)c);
}

void gf__erase_out(const gf__augment *a, const gf__convert *cv, uint64_t key, void *sample)
{
    int i, j, h, w, C = cv->c, W = cv->w, H = cv->h;
    if (!gf__erase_rect(a, key, &i, &j, &h, &w))
        return;
    for (int k = 0; k < C; k++) {
        float v = a->erase_value[k];
        uint16_t v16 = cv->dtype == GF_DTYPE_FLOAT16 ? gf__f32_to_f16(v) : gf__f32_to_bf16(v);
        for (int y = i; y < i + h; y++)
            for (int x = j; x < j + w; x++) {
                size_t at = cv->layout == GF_LAYOUT_NCHW ? ((size_t)k * H + y) * W + x
                                                         : ((size_t)y * W + x) * C + k;
                if (cv->dtype == GF_DTYPE_FLOAT32)
                    ((float *)sample)[at] = v;
                else
                    ((uint16_t *)sample)[at] = v16;
            }
    }
}

/* ---- the spec ---- */

typedef struct parser {
    const char *stage; /* the stage's name, for messages */
    char *why;
    size_t why_len;
} parser;

#define FAIL_(...)                                                                                 \
    do {                                                                                           \
        gf__why(p->why, p->why_len, __VA_ARGS__);                                                  \
        return GF_EINVAL;                                                                          \
    } while (0)

/* value: up to max comma-separated numbers. Returns how many, or -1. */
static int numbers(const char *v, double *out, int max)
{
    int n = 0;
    while (*v) {
        char *end;
        double x = strtod(v, &end);
        if (end == v || n == max || !isfinite(x))
            return -1;
        out[n++] = x;
        v = end;
        if (*v == ',')
            v++;
        else if (*v)
            return -1;
    }
    return n;
}

static int interp_of(parser *p, const char *v, gf_interpolation *out)
{
    if (!strcmp(v, "nearest"))
        *out = GF_INTERP_NEAREST;
    else if (!strcmp(v, "bilinear"))
        *out = GF_INTERP_BILINEAR;
    else if (!strcmp(v, "bicubic"))
        *out = GF_INTERP_BICUBIC;
    else
        FAIL_("augment: %s: interpolation %s (nearest, bilinear or bicubic)", p->stage, v);
    return 0;
}

static int fill_of(parser *p, const char *v, int c, gf__aug_stage *st)
{
    double f[4];
    int n = numbers(v, f, 4);
    if (n != 1 && n != c)
        FAIL_("augment: %s: fill=%s (one value, or one per channel: %d)", p->stage, v, c);
    for (int k = 0; k < c; k++) {
        double x = f[n == 1 ? 0 : k];
        if (!(x >= 0 && x <= 255) || x != floor(x))
            FAIL_("augment: %s: fill=%s (whole numbers 0..255)", p->stage, v);
        st->fill[k] = (uint8_t)x;
    }
    st->has_fill = 1;
    return 0;
}

static int int_of(parser *p, const char *key, const char *v, int lo, int hi, int *out)
{
    double x;
    if (numbers(v, &x, 1) != 1 || x != floor(x) || x < lo || x > hi)
        FAIL_("augment: %s: %s=%s (a whole number %d..%d)", p->stage, key, v, lo, hi);
    *out = (int)x;
    return 0;
}

/* ColorJitter's _check_input: one number b is [max(0, c - b), c + b] (hue:
 * [-b, b], b <= 0.5); two are the range; none (c, c) turns it off. */
static int jitter_of(parser *p, const char *key, const char *v, int k, gf__aug_stage *st)
{
    double x[2], center = k == 3 ? 0.0 : 1.0;
    int n = numbers(v, x, 2);
    if (n == 1) {
        if (x[0] < 0)
            FAIL_("augment: jitter: %s=%s must be non-negative", key, v);
        x[1] = center + x[0];
        x[0] = k == 3 ? -x[0] : fmax(center - x[0], 0.0);
    } else if (n != 2) {
        FAIL_("augment: jitter: %s=%s (one number, or two: min,max)", key, v);
    }
    /* torchvision bounds the factors by infinity; past 1000 every pixel is
     * 0 or 255 already, and the ops' float arithmetic stays finite */
    double lo = k == 3 ? -0.5 : 0.0, hi = k == 3 ? 0.5 : 1000.0;
    if (!(lo <= x[0] && x[0] <= x[1] && x[1] <= hi))
        FAIL_("augment: jitter: %s=%s: values should be within [%g, %g]", key, v, lo, hi);
    st->jitter_on[k] = !(x[0] == center && x[1] == center);
    st->jitter[k][0] = x[0];
    st->jitter[k][1] = x[1];
    return 0;
}

static int set_key(parser *p, gf__augment *a, gf__aug_stage *st, int is_erase, const char *key,
                   const char *v)
{
    int c = a->channels;
    if (is_erase) {
        double x[4];
        int n;
        if (!strcmp(key, "p")) {
            if (numbers(v, x, 1) != 1 || x[0] < 0 || x[0] > 1)
                FAIL_("augment: erase: p=%s (a probability, 0..1)", v);
            a->erase_p = x[0];
        } else if (!strcmp(key, "scale") || !strcmp(key, "ratio")) {
            double *to = key[0] == 's' ? a->erase_scale : a->erase_ratio;
            if (numbers(v, x, 2) != 2 || !(x[0] <= x[1]) || x[0] < 0 ||
                (key[0] == 's' && x[1] > 1) || (key[0] == 'r' && !(x[0] > 0)))
                FAIL_("augment: erase: %s=%s (min,max: %s)", key, v,
                      key[0] == 's' ? "0 <= min <= max <= 1" : "0 < min <= max");
            to[0] = x[0];
            to[1] = x[1];
        } else if (!strcmp(key, "value")) {
            if ((n = numbers(v, x, 4)) != 1 && n != c)
                FAIL_("augment: erase: value=%s (one number, or one per channel: %d; "
                      "'random' is not supported)", v, c);
            for (int k = 0; k < c; k++)
                a->erase_value[k] = (float)x[n == 1 ? 0 : k];
        } else {
            FAIL_("augment: erase: no setting %s (p, scale, ratio, value)", key);
        }
        return 0;
    }
    if (st->kind == GF__AUG_JITTER) {
        static const char *const names[] = {"brightness", "contrast", "saturation", "hue"};
        for (int k = 0; k < 4; k++)
            if (!strcmp(key, names[k]))
                return jitter_of(p, key, v, k, st);
        FAIL_("augment: jitter: no setting %s (brightness, contrast, saturation, hue)", key);
    }
    if (!strcmp(key, "interpolation"))
        return interp_of(p, v, &st->interp);
    if (!strcmp(key, "fill"))
        return fill_of(p, v, c, st);
    if (st->kind != GF__AUG_AUTOAUGMENT && !strcmp(key, "bins"))
        return int_of(p, key, v, 2, GF__AUG_BINS_MAX, &st->bins);
    if (st->kind == GF__AUG_RANDAUGMENT && !strcmp(key, "num_ops"))
        return int_of(p, key, v, 0, GF__AUG_RA_OPS_MAX, &st->num_ops);
    if (st->kind == GF__AUG_RANDAUGMENT && !strcmp(key, "magnitude"))
        return int_of(p, key, v, 0, GF__AUG_BINS_MAX - 1, &st->magnitude);
    if (st->kind == GF__AUG_AUTOAUGMENT && !strcmp(key, "policy")) {
        if (strcmp(v, "imagenet"))
            FAIL_("augment: autoaugment: policy=%s (imagenet only)", v);
        return 0;
    }
    FAIL_("augment: %s: no setting %s (%s)", p->stage, key,
          st->kind == GF__AUG_RANDAUGMENT ? "num_ops, magnitude, bins, interpolation, fill"
          : st->kind == GF__AUG_TA_WIDE   ? "bins, interpolation, fill"
                                          : "policy, interpolation, fill");
}

/* mix's KEY=VALUE: torchvision v2's MixUp(alpha) and CutMix(alpha), timm's
 * switch_prob, num_classes. */
static int mix_key(parser *p, gf__augment *a, const char *key, const char *v)
{
    double x;
    if (!strcmp(key, "mixup") || !strcmp(key, "cutmix")) {
        if (numbers(v, &x, 1) != 1 || !(x >= 0) || x > 1e6)
            FAIL_("augment: mix: %s=%s (an alpha >= 0; 0 turns it off)", key, v);
        *(key[0] == 'm' ? &a->mixup_alpha : &a->cutmix_alpha) = x;
    } else if (!strcmp(key, "switch")) {
        if (numbers(v, &x, 1) != 1 || x < 0 || x > 1)
            FAIL_("augment: mix: switch=%s (CutMix's probability, 0..1)", v);
        a->mix_switch = x;
    } else if (!strcmp(key, "classes")) {
        return int_of(p, key, v, 1, 1 << 20, &a->mix_classes);
    } else {
        FAIL_("augment: mix: no setting %s (mixup, cutmix, switch, classes)", key);
    }
    return 0;
}

static int parse_stage(parser *p, gf__augment *a, char *text)
{
    char *save = NULL, *word = strtok_r(text, " \t\n", &save);
    if (!word)
        return 0; /* an empty stage: "a;;b", or a trailing ';' */
    p->stage = word;
    if (a->mix)
        FAIL_("augment: %s after mix (MixUp/CutMix mixes the whole batch: it comes last)",
              word);
    int is_erase = !strcmp(word, "erase"), is_mix = !strcmp(word, "mix");
    if (a->erase && !is_mix)
        FAIL_("augment: %s after erase (RandomErasing works on the output: it comes last, "
              "but for mix)", word);
    gf__aug_stage *st = NULL;
    if (is_mix) {
        a->mix = 1;
        a->mixup_alpha = a->cutmix_alpha = 1.0; /* MixUp()'s and CutMix()'s */
        a->mix_switch = 0.5;                    /* RandomChoice of the two */
    } else if (is_erase) {
        a->erase = 1;
        a->erase_p = 0.5; /* RandomErasing()'s defaults */
        a->erase_scale[0] = 0.02, a->erase_scale[1] = 0.33;
        a->erase_ratio[0] = 0.3, a->erase_ratio[1] = 3.3;
    } else {
        if (a->n_stages == GF__AUG_STAGES_MAX)
            FAIL_("augment: more than %d stages", GF__AUG_STAGES_MAX);
        st = &a->stages[a->n_stages++];
        *st = (gf__aug_stage){.interp = GF_INTERP_NEAREST, .bins = 31, .num_ops = 2,
                              .magnitude = 9};
        if (!strcmp(word, "ta_wide"))
            st->kind = GF__AUG_TA_WIDE;
        else if (!strcmp(word, "randaugment"))
            st->kind = GF__AUG_RANDAUGMENT;
        else if (!strcmp(word, "autoaugment"))
            st->kind = GF__AUG_AUTOAUGMENT, st->bins = 10;
        else if (!strcmp(word, "jitter"))
            st->kind = GF__AUG_JITTER;
        else
            FAIL_("augment: no stage %s (ta_wide, randaugment, autoaugment, jitter, erase, "
                  "mix)", word);
    }
    while ((word = strtok_r(NULL, " \t\n", &save))) {
        char *eq = strchr(word, '=');
        if (!eq || eq == word || !eq[1])
            FAIL_("augment: %s: %s is not KEY=VALUE", p->stage, word);
        *eq = '\0';
        int rc = is_mix ? mix_key(p, a, word, eq + 1) : set_key(p, a, st, is_erase, word, eq + 1);
        if (rc)
            return rc;
    }
    if (is_mix && a->mixup_alpha == 0 && a->cutmix_alpha == 0)
        FAIL_("augment: mix: mixup=0 and cutmix=0 leave nothing to do");
    if (st && st->kind == GF__AUG_RANDAUGMENT && st->magnitude >= st->bins)
        FAIL_("augment: randaugment: magnitude %d is not below bins %d", st->magnitude, st->bins);
    return 0;
}

int gf__augment_parse(const char *spec, int w, int h, int c, gf__augment *a, char *why,
                      size_t why_len)
{
    memset(a, 0, sizeof *a);
    a->out_w = w;
    a->out_h = h;
    a->channels = c;
    if (!spec || !*spec)
        return 0;
    size_t n = strlen(spec);
    char *copy = malloc(n + 1);
    if (!copy) {
        gf__why(why, why_len, "out of memory");
        return GF_ENOMEM;
    }
    memcpy(copy, spec, n + 1);
    parser p = {"", why, why_len};
    int rc = 0;
    char *save = NULL;
    for (char *s = strtok_r(copy, ";", &save); s && !rc; s = strtok_r(NULL, ";", &save))
        rc = parse_stage(&p, a, s);
    free(copy);
    if (!rc && a->n_stages && c != 3 && c != 1) {
        gf__why(why, why_len, "augment: the PIL stages take 1 or 3 channels, not %d", c);
        rc = GF_EINVAL;
    }
    if (rc)
        memset(a, 0, sizeof *a);
    return rc;
}
