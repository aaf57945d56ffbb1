/* A segmentation mask (a WebDataset KEY.seg.png member, in memory) given
 * its image's crop and flip (mask.c): the PNG decoded to class ids (the
 * stored samples: a palette's indices, never its colours) and resampled
 * by nearest neighbour, PIL's rule, so every output value is a value of
 * the mask and the result is pixel-equal to PIL's
 *   Image.resize((out_w, out_h), Image.NEAREST,
 *                box=(c.x, c.y, c.x + c.w, c.y + c.h))
 * then ImageOps.mirror when c->flip. A leaf: no loader state. On the
 * decode thread that holds the sample, with that thread's scratch. */
#ifndef GF_MASK_H
#define GF_MASK_H

#include "decoder.h"

#include <stddef.h>
#include <stdint.h>

/* Per decode thread, grown as needed (the index tables and the decoded
 * mask); zero-initialised before first use. */
typedef struct gf__mask_scratch {
    uint8_t *buf;
    size_t cap;
} gf__mask_scratch;

void gf__mask_scratch_free(gf__mask_scratch *s);

/* png[0, n): an 8-bit grey PNG, or a palette PNG of 1, 2, 4 or 8 bits;
 * its samples are class ids. It must be img_w x img_h, the image's stored
 * size (another size is refused naming both; this also bounds memory:
 * the mask is never larger than its image). Writes crop c of it (source
 * pixels of that size), resampled by nearest neighbour to out_w x out_h
 * and mirrored when c->flip, to dst (out_h rows of out_w bytes).
 * Returns 0, or with why:
 *   GF_EFORMAT  not a PNG; 16-bit or 1/2/4-bit grey, grey+alpha, RGB or
 *               RGBA; or a build without libspng
 *   GF_ECORRUPT damaged or cut short (libspng's reason), or not
 *               img_w x img_h
 *   GF_ENOMEM   no memory for the scratch or libspng
 *   GF_EINVAL   a caller's bug: a size below 1, a NULL pointer
 * dst is undefined on an error. Nothing printed. */
int gf__mask_crop(gf__mask_scratch *s, const uint8_t *png, size_t n, int img_w, int img_h,
                  const gf__crop *c, int out_w, int out_h, uint8_t *dst, char *why,
                  size_t why_len);

#endif
