/* The ring's memory: D slots, each with its pixels and flips (pinned when
 * the device allows, so copies to it never block the controller), labels,
 * indices, cells, and on the CPU path the converted batch. Allocated and
 * freed on gf_open/gf_close's thread; the slots' states are in ring.h. */
#include "loader_impl.h"

#include <stdlib.h>
#include <string.h>

gf__slot *gf__slot_of(gf_loader *l, uint64_t seq)
{
    return &l->slots[seq % (uint64_t)l->D];
}

int gf__ring_alloc(gf_loader *l)
{
    size_t B = (size_t)l->B;
    size_t pix = B * l->cell_bytes;
    if (l->cell_bytes && pix / l->cell_bytes != B)
        return gf__fail(l, GF_EINVAL, "batch of %d x %zu bytes overflows", l->B, l->cell_bytes);
    l->slots = calloc((size_t)l->D, sizeof *l->slots);
    if (!l->slots)
        return GF_ENOMEM;
    size_t out = l->convert && !l->dev ? B * gf__convert_sample_bytes(&l->cv) : 0;
    for (int i = 0; i < l->D; i++) {
        gf__slot *sl = &l->slots[i];
        sl->l = l;
        sl->cell_bytes = l->cell_bytes;
        char why[192] = "";
        /* The flips live after the pixels: pinned with them, so their copy
         * to the device cannot block the controller either. */
        sl->pixels = gf__host_alloc(l->dev, pix + B, &sl->pinned, why, sizeof why);
        if (!sl->pixels)
            return gf__fail(l, GF_ENOMEM, "cannot allocate a %zu-byte batch slot", pix + B);
        sl->flips = sl->pixels + pix;
        memset(sl->flips, 0, B);
        if (sl->pinned) {
            l->pinned_bytes += pix + B;
        } else if (l->dev) {
            l->pageable_slots++;
            snprintf(l->device_note, sizeof l->device_note, "%s", why);
        }
        if (out && posix_memalign(&sl->out, 4096, out) != 0)
            return gf__fail(l, GF_ENOMEM, "cannot allocate a %zu-byte converted batch", out);
        sl->labels = calloc(B, sizeof *sl->labels);
        sl->indices = calloc(B, sizeof *sl->indices);
        sl->cells = calloc(B, sizeof *sl->cells);
        if (!sl->labels || !sl->indices || !sl->cells)
            return GF_ENOMEM;
        if (l->dev) {
            sl->out_labels = calloc(B, sizeof *sl->out_labels);
            sl->out_indices = calloc(B, sizeof *sl->out_indices);
            if (!sl->out_labels || !sl->out_indices)
                return GF_ENOMEM;
        }
        gf_batch *b = &sl->batch;
        b->height = l->s.height;
        b->width = l->s.width;
        b->channels = l->s.channels;
        b->dtype = l->cv.dtype;
        b->layout = l->cv.layout;
        b->slot_ = (uint32_t)i;
        if (l->dev) {
            b->device = GF_DEVICE_CUDA;
            b->data = gf__device_out(l->dev, i);
            b->ready_event = gf__device_ready_event(l->dev, i);
            b->labels = sl->out_labels;
            b->indices = sl->out_indices;
        } else {
            b->device = GF_DEVICE_CPU;
            b->pixels = sl->pixels;
            b->data = sl->out ? sl->out : sl->pixels;
            b->labels = sl->labels;
            b->indices = sl->indices;
        }
    }
    l->out_bytes = (uint64_t)out * (uint64_t)l->D;
    return 0;
}

void gf__ring_free(gf_loader *l)
{
    if (!l->slots)
        return;
    for (int i = 0; i < l->D; i++) {
        gf__slot *sl = &l->slots[i];
        if (sl->pixels)
            gf__host_free(l->dev, sl->pixels, sl->pinned);
        free(sl->out);
        free(sl->labels);
        free(sl->indices);
        free(sl->out_labels);
        free(sl->out_indices);
        free(sl->cells);
        free(sl->errs);
    }
    free(l->slots);
    l->slots = NULL;
}
