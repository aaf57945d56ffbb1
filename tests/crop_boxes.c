/*
 * The crop planner's boxes (src/crop.c), printed for tests/crop_torchvision.py
 * to hold against torchvision's Resize + CenterCrop and RandomResizedCrop.
 *
 *   crop_boxes eval OUT_W OUT_H CROP_FRACTION     reads "W H" lines on stdin,
 *                                                 prints "x y w h" each
 *   crop_boxes train W H SCALE_MIN SCALE_MAX RATIO_MIN RATIO_MAX FLIP_PROB N SEED
 *                                                 prints "x y w h flip" for the
 *                                                 keys of samples 0..N-1 of
 *                                                 epoch 0, as the loader draws
 *
 * Boxes are in source pixels, %.17g: a double read back is the same double.
 */
#include "decoder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void)
{
    fputs("usage: crop_boxes eval OUT_W OUT_H CROP_FRACTION < \"W H\" lines\n"
          "       crop_boxes train W H SCALE_MIN SCALE_MAX RATIO_MIN RATIO_MAX FLIP_PROB N SEED\n",
          stderr);
    return 2;
}

int main(int argc, char **argv)
{
    gf__transform t;
    memset(&t, 0, sizeof t);
    t.channels = 3;
    gf__crop c;
    if (argc == 5 && strcmp(argv[1], "eval") == 0) {
        t.kind = GF_TRANSFORM_EVAL;
        t.out_w = atoi(argv[2]);
        t.out_h = atoi(argv[3]);
        t.crop_fraction = strtof(argv[4], NULL);
        int W, H;
        while (scanf("%d %d", &W, &H) == 2) {
            gf__crop_plan(&t, W, H, 0, &c);
            printf("%.17g %.17g %.17g %.17g\n", c.x, c.y, c.w, c.h);
        }
        return 0;
    }
    if (argc == 11 && strcmp(argv[1], "train") == 0) {
        t.kind = GF_TRANSFORM_TRAIN;
        t.out_w = t.out_h = 224;
        int W = atoi(argv[2]), H = atoi(argv[3]);
        t.scale_min = strtof(argv[4], NULL);
        t.scale_max = strtof(argv[5], NULL);
        t.ratio_min = strtof(argv[6], NULL);
        t.ratio_max = strtof(argv[7], NULL);
        t.flip_prob = strtof(argv[8], NULL);
        long n = atol(argv[9]);
        uint64_t seed = strtoull(argv[10], NULL, 10);
        for (long i = 0; i < n; i++) {
            gf__crop_plan(&t, W, H, gf__sample_key(seed, 0, (uint64_t)i), &c);
            printf("%.17g %.17g %.17g %.17g %d\n", c.x, c.y, c.w, c.h, c.flip);
        }
        return 0;
    }
    return usage();
}
