/* The batch slots (src/ring.c): their memory, and the states of a slot's
 * two sides with the transitions allowed between them.
 *
 * A slot has two sides. Its host side (pixels, cells) is filled by the
 * decode pool; once finalised it is handed, in sequence order, to a
 * delivery side: on the CPU its own (the same memory, after the CPU twin
 * of the device kernel when a dtype is asked for), on CUDA the device
 * slot of any slot whose delivery side is free (copy + kernel queued on
 * the copy stream; the host side is free again when the copy has run,
 * see device.c). No slot is tied to a sequence number: a batch takes any
 * free slot, so a batch the consumer keeps costs its slot, not the ring.
 *
 * gf_open allocates prefetch_depth slots; gf_next adds one (gf__ring_grow,
 * on the consumer's thread) when fewer than prefetch_depth are not held,
 * up to prefetch_depth + max_held_batches - 1; all are freed by gf_close.
 * Their states change on the controller, the consumer (gf_next,
 * gf_release*) and, on CUDA, the copy callback's thread and the copy
 * thread (gf-copy), always through gf__slot_set_host / gf__slot_set_out
 * with mu held: they assert that the change is one of those listed
 * below. */
#ifndef GF_RING_H
#define GF_RING_H

#include "common.h"
#include "augment.h" /* gf__mix_draw */
#include "fields.h" /* GF__FIELDS_MAX */

#include <assert.h>
#include <stdbool.h>

struct gf_loader;

/* A cell's sample. HOLE: failed, or given to an earlier batch; the batch
 * fills it again before it is finalised (or drops it at an epoch's end). */
enum { GF__CELL_PENDING, GF__CELL_OK, GF__CELL_HOLE };

/* The host side:
 *   FREE -> FILLING     the controller assigns the slot a batch
 *   FILLING -> FINAL    the controller finalised it
 *   FINAL -> OUT        handed on (CPU: it is the batch until released;
 *                       CUDA: until its copy has run)
 *   FINAL -> FREE       CUDA, nothing to copy (empty or failed batch)
 *   OUT -> FREE         released (CPU) or copied (CUDA); a slot whose
 *                       copy the controller could not queue stays OUT
 *                       (halted); on gf-copy a failed queueing still
 *                       runs done(), so OUT -> FREE there */
enum { GF__HOST_FREE, GF__HOST_FILLING, GF__HOST_FINAL, GF__HOST_OUT };
/* The delivery side, the batch the consumer sees (on CUDA, the device
 * slot of the same index, fed from any host slot):
 *   FREE -> CONVERTING  CPU: convert jobs queued; their completion -> READY
 *                       (with augment's mix: the last queues the mix jobs,
 *                       whose completion -> READY)
 *   FREE -> COPYING     CUDA, pageable slots: posted to the copy thread;
 *                       -> READY once it has queued the copy (the ready
 *                       event is recorded: gf_batch_wait waits for it)
 *   FREE -> READY | EMPTY
 *   READY -> HELD       gf_next hands it out
 *   READY | EMPTY -> FREE  gf_next skips an empty or failed batch
 *   HELD -> FREE        gf_release */
enum {
    GF__OUT_FREE,
    GF__OUT_CONVERTING,
    GF__OUT_COPYING,
    GF__OUT_READY,
    GF__OUT_EMPTY,
    GF__OUT_HELD
};

typedef struct gf__cell {
    uint64_t pos;
    /* The epoch its sample's randomness is keyed by (gf__sample_key): the
     * batch's, or in a mix its source's own (blend_order.c). */
    uint64_t key_epoch;
    uint8_t state;
} gf__cell;

typedef struct gf__sample_error {
    uint64_t pos;
    int64_t sample;
    int code;
    uint8_t member; /* 1 + the schema field whose member failed; 0: the sample's */
    char *why;
} gf__sample_error;

typedef struct gf__slot {
    struct gf_loader *l;
    gf_batch batch;      /* the consumer's view */
    uint8_t *pixels;
    size_t cell_bytes;   /* one cell's pixels */
    int32_t *labels;
    int64_t *indices;
    uint8_t *flips;      /* per cell: to be mirrored by the device kernel */
    void *out;           /* CPU: the converted batch, or NULL (data = pixels) */
    float *targets;      /* mix: B x classes soft targets (on CUDA the host's,
                            copied with the pixels) */
    gf__mix_draw mix;    /* mix: the batch's draw, gf-control's, written before
                            its mix jobs (CPU) or its copy (CUDA) are queued */
    int32_t *out_labels; /* CUDA: the delivered batch's own copies, since */
    int64_t *out_indices; /* the host slot is refilled while it is held */
    /* data as a mix: the delivered batch's sources (gf_batch.sources, the
     * consumer's, written by gf_next), and the source whose sample was the
     * batch's last to arrive (gf-control's): gf_next's wait is its. */
    int32_t *sources;
    int last_source, out_last_source;
    /* The fields beyond image and label (sample_fields.h), l->ds.n_var: per
     * field B regions and each one's length (an array's or mask's inside
     * `tensors`); cell c's are region home[c] until delivery puts each in
     * its cell's place; the delivered batch's offsets and lengths; on CUDA
     * their copies. */
    uint8_t *var_bytes[GF__FIELDS_MAX];
    uint32_t *var_len[GF__FIELDS_MAX];
    uint64_t *var_offsets[GF__FIELDS_MAX];
    uint32_t *var_lengths[GF__FIELDS_MAX];
    int32_t *home;
    int32_t *home_cell;  /* delivery's scratch: the cell whose bytes a region holds */
    uint8_t *tensors;    /* arrays and masks: their regions, the batch's tensors */
    uint32_t var_in_tensors; /* bit k: var_bytes[k] points into tensors */
    int tensors_pinned;
    gf_field *fields;    /* the batch's table, and on CUDA the delivered one */
    uint8_t *out_var_bytes[GF__FIELDS_MAX];
    uint64_t *out_var_offsets[GF__FIELDS_MAX];
    uint32_t *out_var_lengths[GF__FIELDS_MAX];
    gf_field *out_fields;
    int pinned;
    gf__cell *cells;
    int n_cells;         /* cells in use: B, or fewer at the end of an epoch */
    int pending;         /* cells with a read or decode outstanding */
    int converting;      /* convert jobs outstanding */
    int count, status;   /* once finalised */
    bool empty;
    uint64_t seq, epoch, end_pos;
    uint64_t seed;       /* the cursor's when assigned: the cells' keys (gf__sample_key) */
    gf__sample_error *errs; /* bad samples met by this batch (rare) */
    int n_errs;
    size_t cap_errs;
    int host;            /* GF__HOST_*, under mu */
    int out_state;       /* GF__OUT_*, under mu */
    uint64_t out_seq;    /* the batch the delivery side holds */
    int out_status;      /* that batch's status (0 or its failure) */
    int out_src;         /* CUDA: the host slot its copy reads, and */
    bool copying;        /* its done() is still to run (under mu) */
} gf__slot;

static inline bool gf__host_step_ok(int from, int to)
{
    switch (from) {
    case GF__HOST_FREE: return to == GF__HOST_FILLING;
    case GF__HOST_FILLING: return to == GF__HOST_FINAL;
    case GF__HOST_FINAL: return to == GF__HOST_OUT || to == GF__HOST_FREE;
    case GF__HOST_OUT: return to == GF__HOST_FREE;
    }
    return false;
}

static inline bool gf__out_step_ok(int from, int to)
{
    switch (from) {
    case GF__OUT_FREE:
        return to == GF__OUT_CONVERTING || to == GF__OUT_COPYING || to == GF__OUT_READY ||
               to == GF__OUT_EMPTY;
    case GF__OUT_CONVERTING: return to == GF__OUT_READY;
    case GF__OUT_COPYING: return to == GF__OUT_READY;
    case GF__OUT_READY: return to == GF__OUT_HELD || to == GF__OUT_FREE;
    case GF__OUT_EMPTY: return to == GF__OUT_FREE;
    case GF__OUT_HELD: return to == GF__OUT_FREE;
    }
    return false;
}

/* Under mu. */
static inline void gf__slot_set_host(gf__slot *sl, int from, int to)
{
    assert(sl->host == from && gf__host_step_ok(from, to));
    (void)from;
    sl->host = to;
}

/* Under mu. */
static inline void gf__slot_set_out(gf__slot *sl, int from, int to)
{
    assert(sl->out_state == from && gf__out_step_ok(from, to));
    (void)from;
    sl->out_state = to;
}

/* The pipeline has stopped: every side FREE but a held batch's, which
 * stays valid until released (on the CPU its host side is the batch). */
static inline void gf__slot_reset(gf__slot *sl, bool cpu)
{
    sl->copying = false;
    if (sl->out_state == GF__OUT_HELD) {
        sl->host = cpu ? GF__HOST_OUT : GF__HOST_FREE;
        return;
    }
    sl->host = GF__HOST_FREE;
    sl->out_state = GF__OUT_FREE;
}

static inline uint8_t *gf__cell_pixels(const gf__slot *sl, int c)
{
    return sl->pixels + (size_t)c * sl->cell_bytes;
}

/* gf-control: the host slot assign_batches gave batch seq, for seq from
 * l->xfer to l->tail (fewer than D apart, so seq % D names it). */
gf__slot *gf__slot_of(struct gf_loader *l, uint64_t seq);

/* Allocates room for l->max_slots slots and the first l->D of them, for
 * l->B cells (pinned when l->dev can, else pageable), and points each
 * batch at its memory. Returns 0, GF_ENOMEM or GF_EINVAL, with l->msg set
 * unless it is a bare GF_ENOMEM. gf_open's thread. */
int gf__ring_alloc(struct gf_loader *l);
/* The consumer's thread, the pipeline running: one more slot (and its
 * device slot), published under mu. Returns 0, or GF_ENOMEM with why
 * (the device budget, or memory). */
int gf__ring_grow(struct gf_loader *l, char *why, size_t why_len);
void gf__ring_free(struct gf_loader *l);

#endif
