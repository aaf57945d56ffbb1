/*
 * Detection boxes moved with the image (src/boxes.c), printed for
 * tests/boxes_torchvision.py to hold against torchvision's v2 box kernels.
 *
 *   boxes_apply < cases
 *
 * Each case on stdin: a line "OUT_W OUT_H CX CY CW CH FLIP COLS N" (the
 * crop as gf__crop holds it), then N rows of COLS numbers (x1 y1 x2 y2
 * [class]). Each case printed: "kept K" and K rows of COLS numbers (%.9g:
 * a float32 read back is the same float32), or "error WHY".
 */
#include "boxes.h"

#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    int out_w, out_h, flip, cols;
    double cx, cy, cw, ch;
    size_t n;
    while (scanf("%d %d %lf %lf %lf %lf %d %d %zu", &out_w, &out_h, &cx, &cy, &cw, &ch, &flip,
                 &cols, &n) == 9) {
        if (cols < 1 || cols > 5 || n > 1u << 20) {
            fprintf(stderr, "boxes_apply: a case of %zu rows of %d\n", n, cols);
            return 2;
        }
        double *in = malloc(sizeof *in * (n * (size_t)cols + 1));
        float *out = malloc(sizeof *out * (n * (size_t)cols + 1));
        if (!in || !out) {
            fputs("boxes_apply: no memory\n", stderr);
            return 2;
        }
        for (size_t i = 0; i < n * (size_t)cols; i++)
            if (scanf("%lf", &in[i]) != 1) {
                fputs("boxes_apply: a row cut short\n", stderr);
                return 2;
            }
        gf__crop c = {cx, cy, cw, ch, flip};
        char why[256];
        long k = gf__boxes_apply(&c, out_w, out_h, in, n, cols, out, why, sizeof why);
        if (k < 0) {
            printf("error %s\n", why);
        } else {
            printf("kept %ld\n", k);
            for (long i = 0; i < k; i++)
                for (int j = 0; j < cols; j++)
                    printf("%.9g%c", out[i * cols + j], j + 1 < cols ? ' ' : '\n');
        }
        free(in);
        free(out);
    }
    return 0;
}
