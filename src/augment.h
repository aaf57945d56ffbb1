/* The augmentation stages after the crop and flip (settings.augment), as
 * torchvision's transforms draw and apply them: TrivialAugmentWide,
 * RandAugment, AutoAugment(IMAGENET) and ColorJitter over the cell's uint8
 * pixels on its decode thread (augment_ops.c: PIL's ops, bit for bit), and
 * RandomErasing last, on the output values (after the normalisation: in
 * the convert job, or in the cell when the batch is uint8). Parsed once at
 * open; every draw is a pure function of the sample's key, with
 * torchvision's distributions (the order and count of draws are not
 * torch's: the key's stream is gpufeed's own). */
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

#endif
