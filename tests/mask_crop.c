/*
 * A mask PNG cropped by src/mask.c, for tests/mask_pil.py to hold against
 * PIL's resize(NEAREST, box) + ImageOps.mirror.
 *
 *   mask_crop PNG IMG_W IMG_H    reads "X Y W H FLIP OUT_W OUT_H" lines on
 *                                stdin (X..H as Python's repr writes a
 *                                float: strtod reads back the same double)
 *                                and writes each crop's OUT_H x OUT_W bytes
 *                                to stdout, one after another
 *
 * A refused mask: its reason on stderr, exit 1.
 */
#include "mask.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 4) {
        fputs("usage: mask_crop PNG IMG_W IMG_H < \"X Y W H FLIP OUT_W OUT_H\" lines\n", stderr);
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    size_t cap = 1 << 16, n = 0, got;
    uint8_t *png = malloc(cap);
    while (png && (got = fread(png + n, 1, cap - n, f)) > 0)
        if ((n += got) == cap)
            png = realloc(png, cap *= 2);
    fclose(f);
    if (!png)
        return 2;
    int img_w = atoi(argv[2]), img_h = atoi(argv[3]);
    gf__mask_scratch s = {0};
    gf__crop c;
    int ow, oh, rc = 0;
    while (scanf("%lf %lf %lf %lf %d %d %d", &c.x, &c.y, &c.w, &c.h, &c.flip, &ow, &oh) == 7) {
        uint8_t *out = malloc((size_t)ow * oh);
        char why[256];
        if (!out)
            return 2;
        if ((rc = gf__mask_crop(&s, png, n, img_w, img_h, &c, ow, oh, out, why, sizeof why))) {
            fprintf(stderr, "%s\n", why);
            free(out);
            break;
        }
        fwrite(out, 1, (size_t)ow * oh, stdout);
        free(out);
    }
    gf__mask_scratch_free(&s);
    free(png);
    return rc ? 1 : 0;
}
