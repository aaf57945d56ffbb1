/* The slots' memory: each with its pixels and flips (pinned when the
 * device allows, so copies to it never block the controller), labels,
 * indices, cells, and on the CPU path the converted batch. The first D are
 * allocated on gf_open's thread, more by gf_next on the consumer's
 * (gf__ring_grow), all freed on gf_close's; the slots' states are in
 * ring.h. */
#include "loader_impl.h"
#include "sample_fields.h"

#include <stdlib.h>
#include <string.h>

gf__slot *gf__slot_of(gf_loader *l, uint64_t seq)
{
    return &l->slots[l->seq_slot[seq % (uint64_t)l->D]];
}

static void free_slot(gf_loader *l, gf__slot *sl)
{
    if (sl->pixels)
        gf__host_free(l->dev, sl->pixels, sl->pinned);
    free(sl->out);
    free(sl->labels);
    free(sl->indices);
    free(sl->out_labels);
    free(sl->out_indices);
    free(sl->sources);
    free(sl->cells);
    free(sl->errs);
    gf__fields_free(sl);
    memset(sl, 0, sizeof *sl);
}

/* Slot i's memory (its device slot exists already); the tallies stats
 * report are added under mu, since observers may run. */
static int alloc_slot(gf_loader *l, int i, char *why, size_t why_len)
{
    gf__slot *sl = &l->slots[i];
    size_t B = (size_t)l->B;
    size_t pix = B * l->cell_bytes;
    size_t out = l->convert && !l->dev ? B * gf__convert_sample_bytes(&l->cv) : 0;
    sl->l = l;
    sl->cell_bytes = l->cell_bytes;
    char note[192] = "";
    /* The flips, and mix's soft targets (aligned), live after the pixels:
     * pinned with them, so their copies to the device cannot block the
     * controller either. */
    size_t classes = l->aug.mix ? (size_t)l->aug.mix_classes : 0;
    size_t at_targets = (pix + B + 63) & ~(size_t)63;
    size_t host = classes ? at_targets + B * classes * sizeof(float) : pix + B;
    sl->pixels = gf__host_alloc(l->dev, host, &sl->pinned, note, sizeof note);
    if (!sl->pixels) {
        gf__why(why, why_len, "cannot allocate a %zu-byte batch slot", host);
        goto fail;
    }
    sl->flips = sl->pixels + pix;
    memset(sl->flips, 0, B);
    if (classes)
        sl->targets = (float *)(void *)(sl->pixels + at_targets);
    if (out && !(sl->out = gf__host_alloc_pageable(out))) {
        gf__why(why, why_len, "cannot allocate a %zu-byte converted batch", out);
        goto fail;
    }
    sl->labels = calloc(B, sizeof *sl->labels);
    sl->indices = calloc(B, sizeof *sl->indices);
    sl->cells = calloc(B, sizeof *sl->cells);
    if (l->blend.src && !(sl->sources = calloc(B, sizeof *sl->sources))) {
        gf__why(why, why_len, "out of memory allocating a batch slot's arrays");
        goto fail;
    }
    if (l->dev) {
        sl->out_labels = calloc(B, sizeof *sl->out_labels);
        sl->out_indices = calloc(B, sizeof *sl->out_indices);
    }
    if (!sl->labels || !sl->indices || !sl->cells ||
        (l->dev && (!sl->out_labels || !sl->out_indices)) || gf__fields_alloc(l, sl) < 0) {
        gf__why(why, why_len, "out of memory allocating a batch slot's arrays");
        goto fail;
    }
    gf_batch *b = &sl->batch;
    if (l->cell_bytes) { /* else no image field: the batch has no pixels */
        b->height = l->s.height;
        b->width = l->s.width;
        b->channels = l->s.channels;
    }
    b->dtype = l->cv.dtype;
    b->layout = l->cv.layout;
    b->slot_ = (uint32_t)i;
    b->sources = sl->sources;
    b->n_fields = l->ds.schema.n;
    b->n_classes = (int)classes;
    b->fields = l->dev ? sl->out_fields : sl->fields;
    if (l->dev) {
        b->device = GF_DEVICE_CUDA;
        b->data = l->cell_bytes ? gf__device_out(l->dev, i) : NULL; /* no image: no pixels */
        b->ready_event = gf__device_ready_event(l->dev, i);
        b->labels = sl->out_labels;
        b->indices = sl->out_indices;
        b->targets = classes ? gf__device_targets(l->dev, i) : NULL;
    } else {
        b->device = GF_DEVICE_CPU;
        b->pixels = l->cell_bytes ? sl->pixels : NULL; /* no image: no pixels */
        b->data = sl->out ? sl->out : b->pixels;
        b->labels = sl->labels;
        b->indices = sl->indices;
        b->targets = sl->targets;
    }
    pthread_mutex_lock(&l->mu);
    if (sl->tensors_pinned)
        l->pinned_bytes += gf__fields_tensor_bytes(l);
    if (sl->pinned) {
        l->pinned_bytes += host;
    } else if (l->dev) {
        l->pageable_slots++;
        snprintf(l->device_note, sizeof l->device_note, "%s", note);
    }
    l->out_bytes += out;
    pthread_mutex_unlock(&l->mu);
    return 0;
fail:
    free_slot(l, sl);
    return GF_ENOMEM;
}

int gf__ring_alloc(gf_loader *l)
{
    size_t B = (size_t)l->B;
    size_t pix = B * l->cell_bytes;
    if (l->cell_bytes && pix / l->cell_bytes != B)
        return gf__fail(l, GF_EINVAL, "batch of %d x %zu bytes overflows", l->B, l->cell_bytes);
    l->slots = calloc((size_t)l->max_slots, sizeof *l->slots);
    l->seq_slot = calloc((size_t)l->D, sizeof *l->seq_slot);
    if (!l->slots || !l->seq_slot)
        return GF_ENOMEM;
    for (int i = 0; i < l->D; i++) {
        char why[160];
        if (alloc_slot(l, i, why, sizeof why) < 0)
            return gf__fail(l, GF_ENOMEM, "%s", why);
        l->n_slots = i + 1;
    }
    return 0;
}

int gf__ring_grow(gf_loader *l, char *why, size_t why_len)
{
    int i = l->n_slots; /* only this thread changes it while running */
    if (i >= l->max_slots) {
        gf__why(why, why_len, "all %d slots are allocated", i);
        return GF_ENOMEM;
    }
    /* The device slot first: one left by a failed host allocation is
     * taken again by the next try. */
    int rc = l->dev ? gf__device_grow(l->dev, i, why, why_len) : 0;
    if (rc < 0)
        return rc;
    if ((rc = alloc_slot(l, i, why, why_len)) < 0)
        return rc;
    pthread_mutex_lock(&l->mu);
    l->n_slots = i + 1;
    pthread_mutex_unlock(&l->mu);
    return 0;
}

void gf__ring_free(gf_loader *l)
{
    if (l->slots)
        for (int i = 0; i < l->n_slots; i++)
            free_slot(l, &l->slots[i]);
    free(l->slots);
    free(l->seq_slot);
    l->slots = NULL;
    l->seq_slot = NULL;
    l->n_slots = 0;
}
