/* A sample's fields beyond its image and label, in its batch slot
 * (sample_fields.c): text and bytes as stored, arrays (.npy), masks and
 * boxes. Each slot holds, per field, B regions of the field's layout
 * (fields.h: its largest member, its array's bytes, the output's pixels);
 * a cell's go to the region home[c] names. Cells move (holes filled,
 * batches sorted); their bytes move only between slots: within one,
 * home[] is permuted instead. The delivered batch points at the regions
 * through per-sample offsets, or for arrays and masks at one tensor the
 * regions are gathered into.
 * Threads: gf__fields_take on the decode thread that holds the cell's
 * job (it owns the cell's region, as its pixels); gf__fields_plan on
 * gf_open's; the rest on gf-control or gf_open's and gf_next's threads
 * as ring.c's allocation is. */
#ifndef GF_SAMPLE_FIELDS_H
#define GF_SAMPLE_FIELDS_H

#include "decode.h" /* gf__decoder: the sample's crop, for masks and boxes */
#include "mask.h"
#include "reader.h" /* gf__buf */
#include "ring.h"

#include <stddef.h>
#include <stdint.h>

struct gf_loader;

/* A decode thread's scratch for the fields it takes. */
typedef struct gf__fields_scratch {
    gf__mask_scratch mask;
    double *boxes; /* a boxes member's values, as doubles */
    size_t boxes_cap;
} gf__fields_scratch;
void gf__fields_scratch_free(gf__fields_scratch *s);

/* gf_open, the data set indexed: each field's layout (l->field_layout).
 * An array's dtype and shape, and boxes' columns, are the first sample's
 * whose member parses (the data set's order: whatever the timing); a
 * sample of another is refused when read. 0, or a GF_E* with l->msg. */
int gf__fields_plan(struct gf_loader *l);
/* A slot's arrays and masks as a batch: the bytes of its block of
 * tensors (what a device slot holds of them). */
size_t gf__fields_tensor_bytes(const struct gf_loader *l);
/* The host memory a slot's fields take (regions and tensors; for stats). */
size_t gf__fields_slot_bytes(const struct gf_loader *l);

/* Slot sl's regions and its batch's gf_field table (on CUDA also the
 * delivered batch's own copies). 0 or GF_ENOMEM. */
int gf__fields_alloc(struct gf_loader *l, gf__slot *sl);
void gf__fields_free(gf__slot *sl);

/* A sample's field members as read: field k's (ds.var_field[k]) bytes. */
typedef struct gf__members {
    const uint8_t *p[GF__FIELDS_MAX];
    uint32_t n[GF__FIELDS_MAX];
    uint32_t in_place; /* bit k: field k's data is in its region already */
} gf__members;

/* The decode thread, before it reads shard sample `sample` (its extent
 * starting at byte `start` of its shard) into cell's place: the parts of
 * the read that go straight to the cell's regions
 * (h, at most GF__FIELDS_MAX), each array's data where its member is as
 * long as its field's first; *in_place their fields (gf__members'). */
int gf__fields_holes(const struct gf_loader *l, const gf__slot *sl, int cell, uint64_t sample,
                     uint64_t start, gf__read_hole *h, uint32_t *in_place);

/* A shard sample's members in the bytes of its extent (gf__dataset_extent,
 * headers checked). */
void gf__fields_members_in(const struct gf_loader *l, uint64_t sample, const uint8_t *bytes,
                           gf__members *m);
/* A list sample's members, each its own file, read on the decode thread
 * into bufs (the sample's own file is `own`, read already). 0, or the
 * read's GF_E* with why naming the field and its file, and *field the
 * schema's index of that field. */
int gf__fields_read_files(const struct gf_loader *l, uint64_t sample, const gf__buf *own,
                          gf__buf bufs[GF__FIELDS_MAX], gf__members *m, int *field, char *why,
                          size_t why_len);

/* The decode thread: sample's field members m into cell's regions; d
 * decoded the sample's image (masks and boxes take its crop). 0, or
 * GF_ECORRUPT / GF_EFORMAT / GF_ENOMEM with why naming the field and
 * what is wrong (text that is not UTF-8, an array of another shape, a
 * damaged mask) and *field the schema's index of that field (its member
 * is what the error names). */
int gf__fields_take(const struct gf_loader *l, gf__slot *sl, int cell, const gf__members *m,
                    const gf__decoder *d, gf__fields_scratch *ws, int *field, char *why,
                    size_t why_len);

/* gf-control: cell fc's bytes of `from` become cell tc's of `to` (tc a
 * hole: its region is free); within one slot the two cells' regions are
 * swapped. */
void gf__fields_move(const struct gf_loader *l, gf__slot *from, int fc, gf__slot *to, int tc);
/* gf-control, sorting: cell dst takes src's region (a cycle of moves). */
static inline void gf__fields_home_set(gf__slot *sl, int dst, int32_t home)
{
    if (sl->home)
        sl->home[dst] = home;
}
/* gf-control, once the batch's count cells are final: the offsets and
 * lengths the batch delivers, and its arrays and masks gathered. */
void gf__fields_deliver(const struct gf_loader *l, gf__slot *sl, int count);
/* CUDA, when the batch's copy is queued: its fields into the delivered
 * batch's own memory (the host slot is refilled while the batch is
 * held), packed. */
void gf__fields_copy_out(const struct gf_loader *l, const gf__slot *src, gf__slot *out,
                         int count);

#endif
