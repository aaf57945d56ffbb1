/* A sample's text and bytes fields in its batch slot (sample_fields.c).
 * Each slot holds, per field, B regions of the field's largest member
 * (the data set's, known at open); a cell's bytes go to the region
 * home[c] names. Cells move (holes filled, batches sorted); their bytes
 * move only between slots: within one, home[] is permuted instead. The
 * delivered batch points at the regions through per-sample offsets.
 * Threads: gf__fields_take on the decode thread that holds the cell's
 * job (it owns the cell's region, as its pixels); the rest on gf-control
 * or gf_open's and gf_next's threads as ring.c's allocation is. */
#ifndef GF_SAMPLE_FIELDS_H
#define GF_SAMPLE_FIELDS_H

#include "ring.h"

#include <stddef.h>
#include <stdint.h>

struct gf_loader;

/* Slot sl's regions and its batch's gf_field table (on CUDA also the
 * delivered batch's own copies). 0 or GF_ENOMEM. */
int gf__fields_alloc(struct gf_loader *l, gf__slot *sl);
void gf__fields_free(gf__slot *sl);

/* The decode thread: sample's text and bytes members, read with its
 * image (bytes: the extent gf__dataset_extent gives, headers checked),
 * into cell's region. 0, or GF_ECORRUPT (a text member that is not UTF-8)
 * with why naming the member, the field and the byte. */
int gf__fields_take(const struct gf_loader *l, gf__slot *sl, int cell, uint64_t sample,
                    const uint8_t *bytes, char *why, size_t why_len);

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
 * lengths the batch delivers. */
void gf__fields_deliver(const struct gf_loader *l, gf__slot *sl, int count);
/* CUDA, when the batch's copy is queued: its fields into the delivered
 * batch's own memory (the host slot is refilled while the batch is
 * held), packed. */
void gf__fields_copy_out(const struct gf_loader *l, const gf__slot *src, gf__slot *out,
                         int count);

#endif
