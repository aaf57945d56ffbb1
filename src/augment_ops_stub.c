#include "augment_ops.h"
void gf__aug_apply(gf__aug_op op, double m, uint8_t *img, int w, int h, int c, gf_interpolation i, const uint8_t *f, uint8_t *s){(void)op;(void)m;(void)img;(void)w;(void)h;(void)c;(void)i;(void)f;(void)s;}
void gf__adjust_brightness(uint8_t *img, int w, int h, int c, double f){(void)img;(void)w;(void)h;(void)c;(void)f;}
void gf__adjust_contrast(uint8_t *img, int w, int h, int c, double f){(void)img;(void)w;(void)h;(void)c;(void)f;}
void gf__adjust_saturation(uint8_t *img, int w, int h, int c, double f){(void)img;(void)w;(void)h;(void)c;(void)f;}
void gf__adjust_hue(uint8_t *img, int w, int h, int c, double f, uint8_t *s){(void)img;(void)w;(void)h;(void)c;(void)f;(void)s;}
const char *gf__aug_op_name(gf__aug_op op){static const char *n[]={"Identity","ShearX","ShearY","TranslateX","TranslateY","Rotate","Brightness","Color","Contrast","Sharpness","Posterize","Solarize","AutoContrast","Equalize","Invert"};return n[op];}
