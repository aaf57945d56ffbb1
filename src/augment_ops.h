/* torchvision's auto-augment ops and ColorJitter's steps over one 8-bit
 * image, byte for byte what torchvision 0.14 gives on a PIL image (Pillow
 * 9.4): augment_ops.c says how. Pure and allocation-free, for the decode
 * threads: any thread, any number at once, each on its own image. */
#ifndef GF_AUGMENT_OPS_H
#define GF_AUGMENT_OPS_H

#include <stdint.h>

#include "gpufeed.h"

/* torchvision.transforms.autoaugment's op names, in _apply_op's order. */
typedef enum gf__aug_op {
    GF__OP_IDENTITY,
    GF__OP_SHEAR_X,
    GF__OP_SHEAR_Y,
    GF__OP_TRANSLATE_X,
    GF__OP_TRANSLATE_Y,
    GF__OP_ROTATE,
    GF__OP_BRIGHTNESS,
    GF__OP_COLOR,
    GF__OP_CONTRAST,
    GF__OP_SHARPNESS,
    GF__OP_POSTERIZE,
    GF__OP_SOLARIZE,
    GF__OP_AUTOCONTRAST,
    GF__OP_EQUALIZE,
    GF__OP_INVERT,
    GF__OP_COUNT
} gf__aug_op;

/* The image: h rows of w pixels of c bytes (c = 3 RGB or 1 grey), rows
 * packed; w, h >= 1. Nothing is checked here: the caller passes valid
 * arguments (python/module.c's hooks check theirs). */

/* torchvision's _apply_op(img, name, magnitude, interpolation, fill) over
 * PIL, in place. magnitude: as torchvision's forward passes it (the
 * float32 bin value widened to double, negated for the signed half).
 * interp: GF_INTERP_NEAREST, _BILINEAR or _BICUBIC (any other is taken as
 * NEAREST). fill: c bytes, or NULL for fill=None (black). scratch: at
 * least w*h*c bytes, not overlapping img; its contents are undefined
 * after. */
void gf__aug_apply(gf__aug_op op, double magnitude, uint8_t *img, int w, int h, int c,
                   gf_interpolation interp, const uint8_t *fill, uint8_t *scratch);

/* ColorJitter's steps, torchvision.transforms.functional's adjust_* over
 * PIL, in place. Brightness, contrast and saturation take any factor
 * (PIL's ImageEnhance); hue_factor is in [-0.5, 0.5] (torchvision refuses
 * the rest). Hue works pixel by pixel and needs no scratch. */
void gf__adjust_brightness(uint8_t *img, int w, int h, int c, double factor);
void gf__adjust_contrast(uint8_t *img, int w, int h, int c, double factor);
void gf__adjust_saturation(uint8_t *img, int w, int h, int c, double factor);
void gf__adjust_hue(uint8_t *img, int w, int h, int c, double hue_factor);

/* torchvision's name of op ("ShearX", ...); NULL past GF__OP_COUNT. */
const char *gf__aug_op_name(gf__aug_op op);
/* The op named name (torchvision's spelling), or GF__OP_COUNT. */
gf__aug_op gf__aug_op_from_name(const char *name);

#endif
