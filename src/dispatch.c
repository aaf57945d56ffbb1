/* A cell's start and end, on the controller thread: its sample from the
 * cursor, its label and index, then the cell reader (cell_reader.h) has
 * its bytes read; what the reader hands back becomes a decode job for
 * the pool, or a hole with its error. The readers only return outcomes,
 * so a cell is finished here alone, never from below. */
#include "dispatch.h"

#include "grow.h"

#include <stdlib.h>
#include <string.h>

static int record_error(gf__slot *sl, int c, int code, int member, char *why)
{
    if (GF__GROW(&sl->errs, &sl->cap_errs, (size_t)sl->n_errs + 1, 4) < 0) {
        free(why);
        return GF_ENOMEM;
    }
    sl->errs[sl->n_errs++] = (gf__sample_error){
        .pos = sl->cells[c].pos,
        .sample = sl->indices[c],
        .code = code,
        .member = (uint8_t)member,
        .why = why};
    sl->cells[c].state = GF__CELL_HOLE;
    return 0;
}

void gf__cell_finished(gf_loader *l, gf__slot *sl, int c, int err, int member, char *why)
{
    assert(sl->pending > 0 && sl->cells[c].state == GF__CELL_PENDING);
    sl->pending--;
    if (l->blend.src)
        sl->last_source = gf__dataset_source_of(&l->ds, (uint64_t)sl->indices[c]);
    if (!err) {
        sl->cells[c].state = GF__CELL_OK;
        return;
    }
    if (!why)
        why = strdup(gf_strerror(err));
    if (record_error(sl, c, err, member, why) < 0)
        gf__halt(l, GF_ENOMEM, "out of memory recording a bad sample");
}

void gf__cells_out(gf_loader *l, const gf__cell_out *o, int n, gf__job *js, int *n_jobs)
{
    for (int i = 0; i < n; i++, o++) {
        gf__slot *sl = &l->slots[o->slot];
        if (o->err) {
            if (o->buf) {
                gf__budget_done(&l->budget, o->buf);
                pthread_mutex_lock(&l->mu);
                l->free_bufs[l->n_free_bufs++] = o->buf;
                pthread_mutex_unlock(&l->mu);
            }
            gf__cell_finished(l, sl, (int)o->cell, o->err, 0, o->why);
            continue;
        }
        uint64_t sample = (uint64_t)sl->indices[o->cell];
        *gf__add_job(l, js, n_jobs) = (gf__job){
            .kind = GF__JOB_DECODE,
            .slot = o->slot,
            .decode = {.dst = gf__cell_pixels(sl, (int)o->cell),
                       .buf = o->buf,
                       .bytes = o->bytes,
                       .n_bytes = o->n_bytes,
                       .sample = (int64_t)sample,
                       .key = gf__sample_key(sl->seed, sl->cells[o->cell].key_epoch, sample),
                       .cell = o->cell,
                       .cached = o->cached}};
    }
}

void gf__dispatch_cell(gf_loader *l, gf__job *js, int *n_jobs, gf__slot *sl, int c, uint64_t pos)
{
    uint64_t key_epoch;
    uint64_t sample = gf__cursor_sample(&l->cur, sl->epoch, pos, &key_epoch);
    sl->cells[c] = (gf__cell){.pos = pos, .key_epoch = key_epoch, .state = GF__CELL_PENDING};
    sl->indices[c] = (int64_t)sample;
    sl->labels[c] = l->ds.labels[sample];
    sl->flips[c] = 0;
    sl->pending++;
    if (pos + 1 > sl->end_pos)
        sl->end_pos = pos + 1;
    /* Finished at once, as it was taken (a shard already here). */
    int n = l->rd->take(l->rd_self, sl, c, pos, l->outs, l->js_cap);
    gf__cells_out(l, l->outs, n, js, n_jobs);
}
