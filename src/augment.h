/* The augmentation stages after the crop and flip (settings.augment), as
 * torchvision's transforms draw and apply them: TrivialAugmentWide,
 * RandAugment, AutoAugment(IMAGENET) and ColorJitter over the cell's uint8
 * pixels on its decode thread (augment_ops.c: PIL's ops, bit for bit), and
 * RandomErasing last, on the output values (after the normalisation: in
 * the convert job, or in the cell when the batch is uint8). Parsed once at
 * open; every draw is a pure function of the sample's key, with
 * torchvision's distributions (the order and count of draws are not
 * torch's: the key's stream is gpufeed's own). Last, MixUp or CutMix over
 * the whole converted batch (batch_mix.c), drawn per batch. */
#ifndef GF_AUGMENT_H
#define GF_AUGMENT_H

#include "common.h"

#include "augment_ops.h"
#include "convert.h"

enum { GF__AUG_STAGES_MAX = 8, GF__AUG_BINS_MAX = 256, GF__AUG_RA_OPS_MAX = 16,
       GF__AUG_DRAWS_MAX = GF__AUG_STAGES_MAX * GF__AUG_RA_OPS_MAX };

typedef enum gf__aug_kind {
    GF__AUG_TA_WIDE,      /* TrivialAugmentWide(num_magnitude_bins) */
    GF__AUG_RANDAUGMENT,  /* RandAugment(num_ops, magnitude, num_magnitude_bins) */
    GF__AUG_AUTOAUGMENT,  /* AutoAugment(AutoAugmentPolicy.IMAGENET) */
    GF__AUG_JITTER,       /* ColorJitter(brightness, contrast, saturation, hue) */
} gf__aug_kind;

typedef struct gf__aug_stage {
    gf__aug_kind kind;
    int num_ops, magnitude, bins;
    gf_interpolation interp;     /* the geometric ops' sampling: NEAREST by default */
    int has_fill;                /* else black, torchvision's fill=None */
    uint8_t fill[4];
    int jitter_on[4];            /* brightness, contrast, saturation, hue */
    double jitter[4][2];         /* each factor's [min, max] */
} gf__aug_stage;

typedef struct gf__augment {
    int n_stages;
    gf__aug_stage stages[GF__AUG_STAGES_MAX];
    int out_w, out_h, channels;
    int erase;                   /* RandomErasing(p, scale, ratio, value) */
    double erase_p, erase_scale[2], erase_ratio[2];
    float erase_value[4];        /* per channel, in the output's units */
    int mix;                     /* MixUp / CutMix, the last stage (batch_mix.c) */
    double mixup_alpha, cutmix_alpha, mix_switch; /* an alpha of 0: that one off */
    int mix_classes;             /* the targets' width; 0 until the loader gives
                                    the data set's (parsed without classes=) */
} gf__augment;

/* One op as drawn: what torchvision's _apply_op was called with (op a
 * gf__aug_op), or a ColorJitter step (op GF__JITTER_*, magnitude its
 * factor). */
enum { GF__JITTER_BRIGHTNESS = 100, GF__JITTER_CONTRAST, GF__JITTER_SATURATION, GF__JITTER_HUE };
typedef struct gf__aug_draw {
    int op;
    double magnitude;
} gf__aug_draw;

/* spec (settings.augment; NULL or "" is none) for outputs of w x h x c.
 * Returns 0 (a->n_stages 0 and a->erase 0: nothing to do) or GF_EINVAL
 * naming the stage and word in why. */
int gf__augment_parse(const char *spec, int w, int h, int c, gf__augment *a, char *why,
                      size_t why_len);
/* The stages' ops for the sample keyed `key`, in order; returns how many
 * (at most max; GF__AUG_DRAWS_MAX always holds them). */
int gf__augment_draws(const gf__augment *a, uint64_t key, gf__aug_draw *out, int max);
/* Applies them to the cell's pixels; scratch: w * h * c bytes. */
void gf__augment_cell(const gf__augment *a, uint64_t key, uint8_t *px, uint8_t *scratch);
/* RandomErasing's draw: 1 and the rectangle (rows i.., cols j..) or 0. */
int gf__erase_rect(const gf__augment *a, uint64_t key, int *i, int *j, int *h, int *w);
/* RandomErasing on uint8 cells (the batch's own values). */
void gf__erase_cell(const gf__augment *a, uint64_t key, uint8_t *px);
/* RandomErasing on one converted sample (cv's dtype and layout). */
void gf__erase_out(const gf__augment *a, const gf__convert *cv, uint64_t key, void *sample);

/* ---- MixUp / CutMix (batch_mix.c): torchvision v2's, per batch ---- */

enum { GF__MIX_MIXUP = 1, GF__MIX_CUTMIX = 2 };

/* One batch's draw: which, lam (float32, as torch's Beta sample is),
 * CutMix's box [x1, x2) x [y1, y2) and the targets' lam (MixUp: lam;
 * CutMix: 1 - the box's share of the image). */
typedef struct gf__mix_draw {
    int kind;
    float lam;
    double lam_target;
    int x1, y1, x2, y2;
} gf__mix_draw;

/* The batch's key: a pure function of the cursor's seed, the epoch and
 * the batch's gf_batch.position (where the next batch starts: unique in
 * its epoch), never of threads or timing. */
uint64_t gf__mix_key(uint64_t seed, uint64_t epoch, uint64_t position);
/* a's draw for the batch keyed key (a->mix set). */
void gf__mix_draw_of(const gf__augment *a, uint64_t key, gf__mix_draw *d);
/* Beta(alpha, beta) from two Marsaglia-Tsang Gamma draws on key's own
 * stream, in double (the tests hold its distribution to numpy's). */
double gf__beta_draw(double alpha, double beta, uint64_t key);
/* The soft targets, count x classes float32: row i is lam_target *
 * onehot(labels[i]) + (1 - lam_target) * onehot(labels[i - 1]) (row 0
 * takes the last's), each product in float32 as torch's; a label outside
 * 0..classes-1 adds nothing (the loader refuses such data sets at open
 * where it knows their labels). */
void gf__mix_targets(const gf__mix_draw *d, const int32_t *labels, int count, int classes,
                     float *targets);
/* The CPU twin, in place over count converted samples at out (cv's dtype,
 * not uint8, and layout): elements [first, first + n) of every sample,
 * sample i mixed with sample i - 1's original (0 with the last's), in
 * float32, stored in the dtype. Disjoint element ranges may run in
 * parallel: each reads and writes only its own. */
void gf__mix_cpu(const gf__mix_draw *d, const gf__convert *cv, void *out, int count,
                 size_t first, size_t n);
#if GF_HAVE_CUDA
/* kernels/mix.cu: the same over a whole converted batch on the device,
 * queued on stream (cudaStream_t). Returns 0, GF_EINVAL (not a float
 * dtype) or GF_ENODEV with why. */
int gf__mix_cuda(const gf__convert *cv, const gf__mix_draw *d, void *d_out, int count,
                 void *stream, char *why, size_t why_len);
#endif

#endif
