/* TEMPORARY stand-in (untracked) until the aug-ops branch lands. */
#ifndef GF_AUGMENT_OPS_H
#define GF_AUGMENT_OPS_H
#include "common.h"
typedef enum gf__aug_op { GF__OP_IDENTITY, GF__OP_SHEAR_X, GF__OP_SHEAR_Y, GF__OP_TRANSLATE_X,
    GF__OP_TRANSLATE_Y, GF__OP_ROTATE, GF__OP_BRIGHTNESS, GF__OP_COLOR, GF__OP_CONTRAST,
    GF__OP_SHARPNESS, GF__OP_POSTERIZE, GF__OP_SOLARIZE, GF__OP_AUTOCONTRAST, GF__OP_EQUALIZE,
    GF__OP_INVERT, GF__OP_COUNT } gf__aug_op;
void gf__aug_apply(gf__aug_op op, double magnitude, uint8_t *img, int w, int h, int c,
                   gf_interpolation interp, const uint8_t *fill, uint8_t *scratch);
void gf__adjust_brightness(uint8_t *img, int w, int h, int c, double factor);
void gf__adjust_contrast(uint8_t *img, int w, int h, int c, double factor);
void gf__adjust_saturation(uint8_t *img, int w, int h, int c, double factor);
void gf__adjust_hue(uint8_t *img, int w, int h, int c, double hue_factor, uint8_t *scratch);
const char *gf__aug_op_name(gf__aug_op op);
#endif
