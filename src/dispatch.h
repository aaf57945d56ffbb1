/* A cell's start and end (src/dispatch.c), on the controller thread: its
 * sample from the cursor, handed to the cell reader (cell_reader.h); the
 * outcomes readers hand back become decode jobs or holes. Below the
 * controller and assemble.c, above the readers. */
#ifndef GF_DISPATCH_H
#define GF_DISPATCH_H

#include "cell_reader.h"

/* js holds one job per cell at most (l->js_cap): a cell has one read or
 * decode outstanding, and a converting slot has no cell outstanding. */
static inline gf__job *gf__add_job(gf_loader *l, gf__job *js, int *n_jobs)
{
    assert(*n_jobs < l->js_cap);
    (void)l;
    return &js[(*n_jobs)++];
}

/* Cell c of sl is done: OK (err 0), or a HOLE with why (malloc'd, taken;
 * NULL: gf_strerror's) and member (gf__sample_error's: which member the
 * error names). */
void gf__cell_finished(gf_loader *l, gf__slot *sl, int c, int err, int member, char *why);

/* The reader's outcomes o[0, n): a decode job appended to js each, or a
 * hole (its read buffer back on the free list). */
void gf__cells_out(gf_loader *l, const gf__cell_out *o, int n, gf__job *js, int *n_jobs);

/* Starts work on cell c of sl at sampler position pos: the reader has it
 * read (a job appended to js once its bytes are there), or it fails. */
void gf__dispatch_cell(gf_loader *l, gf__job *js, int *n_jobs, gf__slot *sl, int c, uint64_t pos);

#endif
