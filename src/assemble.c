/* Batch assembly, on the controller thread: the bad samples a batch
 * met, and finalising the oldest batch: its holes filled
 * (from later batches of its epoch, or the cursor), its good cells packed
 * and put in sampler order, its errors reported. See loader_impl.h for
 * why only the oldest batch is ever filled. Below the controller: new
 * samples come from the cursor and start through dispatch.c. */
#include "assemble.h"

#include "dispatch.h"
#include "grow.h"
#include "sample_fields.h"

#include <stdlib.h>
#include <string.h>

/* The good cell of a later batch with the lowest position, or -1 with
 * *wait set when a lower position is still being decoded. */
static int find_donor(gf_loader *l, uint64_t epoch, gf__slot **donor_slot, bool *wait)
{
    for (uint64_t seq = l->fin + 1; seq < l->tail; seq++) {
        gf__slot *d = gf__slot_of(l, seq);
        if (d->epoch != epoch)
            break;
        int best = -1;
        for (int c = 0; c < d->n_cells; c++) {
            uint8_t st = d->cells[c].state;
            if ((st == GF__CELL_OK || st == GF__CELL_PENDING) &&
                (best < 0 || d->cells[c].pos < d->cells[best].pos))
                best = c;
        }
        if (best < 0)
            continue;
        if (d->cells[best].state == GF__CELL_PENDING) {
            *wait = true;
            return -1;
        }
        *donor_slot = d;
        return best;
    }
    return -1;
}

static void move_cell(gf_loader *l, gf__slot *from, int fc, gf__slot *to, int tc)
{
    assert(from->cells[fc].state == GF__CELL_OK);
    uint64_t pos = from->cells[fc].pos;
    memcpy(gf__cell_pixels(to, tc), gf__cell_pixels(from, fc), l->cell_bytes);
    to->cells[tc] =
        (gf__cell){.pos = pos, .key_epoch = from->cells[fc].key_epoch, .state = GF__CELL_OK};
    if (pos + 1 > to->end_pos)
        to->end_pos = pos + 1;
    to->labels[tc] = from->labels[fc];
    to->indices[tc] = from->indices[fc];
    to->flips[tc] = from->flips[fc];
    gf__fields_move(l, from, fc, to, tc);
    from->cells[fc].state = GF__CELL_HOLE;
}

static int cmp_err(const void *a, const void *b)
{
    uint64_t x = ((const gf__sample_error *)a)->pos, y = ((const gf__sample_error *)b)->pos;
    return x < y ? -1 : x > y;
}

void gf__recent_add(gf_loader *l, int64_t sample, int code, const char *path,
                    const char *reason)
{
    gf_sample_error *r = &l->recent[l->recent_at];
    l->recent_at = (l->recent_at + 1) % GF_RECENT_ERRORS;
    if (l->n_recent < GF_RECENT_ERRORS)
        l->n_recent++;
    r->sample = sample;
    r->code = code;
    gf__fit_path(r->path, sizeof r->path, path); /* its end names the file */
    snprintf(r->reason, sizeof r->reason, "%s", reason);
}

/* Reports a finished batch's bad samples, in sampler order. */
static void report_errors(gf_loader *l, gf__slot *sl)
{
    if (sl->n_errs == 0)
        return;
    qsort(sl->errs, (size_t)sl->n_errs, sizeof *sl->errs, cmp_err);
    for (int i = 0; i < sl->n_errs; i++) {
        gf__sample_error *e = &sl->errs[i];
        /* A field's failure names its member: the image may be fine. */
        char *member = e->member ? gf__dataset_member_path(&l->ds, (uint64_t)e->sample,
                                                           e->member - 1)
                                 : NULL;
        const char *path = member ? member : gf__dataset_path(&l->ds, (uint64_t)e->sample);
        if (l->s.on_sample_error)
            l->s.on_sample_error(l->s.on_sample_error_user, e->sample, path, e->code, e->why);
        pthread_mutex_lock(&l->mu);
        l->errors++;
        int kind = gf_sample_error_kind(e->code);
        if (kind >= 0)
            l->errors_by_kind[kind]++;
        gf__recent_add(l, e->sample, e->code, path, e->why);
        pthread_mutex_unlock(&l->mu);
        free(member);
    }
}

void gf__record_warning(gf_loader *l, int64_t sample, int code, const char *why)
{
    const char *path = gf__dataset_path(&l->ds, (uint64_t)sample);
    why = why ? why : "the decoder warned";
    if (l->s.on_sample_warning)
        l->s.on_sample_warning(l->s.on_sample_warning_user, sample, path, code, why);
    pthread_mutex_lock(&l->mu);
    gf_sample_error *r = &l->warnings[l->warnings_at];
    l->warnings_at = (l->warnings_at + 1) % GF_RECENT_WARNINGS;
    if (l->n_warnings < GF_RECENT_WARNINGS)
        l->n_warnings++;
    *r = (gf_sample_error){.sample = sample, .code = code};
    gf__fit_path(r->path, sizeof r->path, path);
    snprintf(r->reason, sizeof r->reason, "%s", why);
    pthread_mutex_unlock(&l->mu);
}

void gf__clear_errors(gf__slot *sl)
{
    for (int i = 0; i < sl->n_errs; i++)
        free(sl->errs[i].why);
    sl->n_errs = 0;
}

/* Packs good cells to the front, keeping their order (short final batch). */
static int compact(gf_loader *l, gf__slot *sl)
{
    int n = 0;
    for (int c = 0; c < sl->n_cells; c++) {
        if (sl->cells[c].state != GF__CELL_OK)
            continue;
        if (c != n)
            move_cell(l, sl, c, sl, n);
        n++;
    }
    return n;
}

typedef struct pos_cell {
    uint64_t pos;
    int cell;
} pos_cell;

static int cmp_pos_cell(const void *a, const void *b)
{
    uint64_t x = ((const pos_cell *)a)->pos, y = ((const pos_cell *)b)->pos;
    return x < y ? -1 : x > y;
}

/* Puts the first n cells in sampler order, so a batch that was filled
 * does not depend on where its holes were (ring depth, resume point).
 * Cheap unless the batch was filled after a bad sample. */
static int sort_cells(gf_loader *l, gf__slot *sl, int n)
{
    bool sorted = true;
    for (int c = 1; c < n && sorted; c++)
        sorted = sl->cells[c - 1].pos < sl->cells[c].pos;
    if (sorted)
        return 0;
    pos_cell *order = malloc((size_t)n * sizeof *order);
    uint8_t *tmp = malloc(l->cell_bytes ? l->cell_bytes : 1);
    if (!order || !tmp) {
        free(order);
        free(tmp);
        return GF_ENOMEM;
    }
    for (int c = 0; c < n; c++)
        order[c] = (pos_cell){sl->cells[c].pos, c};
    qsort(order, (size_t)n, sizeof *order, cmp_pos_cell);
    /* Destination i takes source order[i].cell: follow each cycle once. */
    for (int i = 0; i < n; i++) {
        if (order[i].cell < 0 || order[i].cell == i)
            continue;
        gf__cell c0 = sl->cells[i];
        int32_t lab0 = sl->labels[i];
        int64_t idx0 = sl->indices[i];
        uint8_t flip0 = sl->flips[i];
        int32_t home0 = sl->home ? sl->home[i] : 0;
        memcpy(tmp, gf__cell_pixels(sl, i), l->cell_bytes);
        int dst = i;
        for (;;) {
            int src = order[dst].cell;
            order[dst].cell = -1;
            if (src == i) {
                memcpy(gf__cell_pixels(sl, dst), tmp, l->cell_bytes);
                sl->cells[dst] = c0;
                sl->labels[dst] = lab0;
                sl->indices[dst] = idx0;
                sl->flips[dst] = flip0;
                gf__fields_home_set(sl, dst, home0);
                break;
            }
            memcpy(gf__cell_pixels(sl, dst), gf__cell_pixels(sl, src), l->cell_bytes);
            sl->cells[dst] = sl->cells[src];
            sl->labels[dst] = sl->labels[src];
            sl->indices[dst] = sl->indices[src];
            sl->flips[dst] = sl->flips[src];
            gf__fields_home_set(sl, dst, sl->home ? sl->home[src] : 0);
            dst = src;
        }
    }
    free(order);
    free(tmp);
    return 0;
}

/* Gives each hole of sl a donor cell or a new sample from the cursor
 * (new reads: more to wait for), in cell order, until the epoch has no
 * more. Returns true when sl is complete: no hole can be filled now and
 * nothing is outstanding; false when it must wait for a decode. */
static bool fill_holes(gf_loader *l, gf__slot *sl, gf__job *js, int *n_jobs)
{
    for (int c = 0; c < sl->n_cells;) {
        /* A cell moves on once filled or pending: a new sample may be a
         * hole again at once (its shard already failed, its member too
         * big), and is replaced by the next, not left a hole. */
        if (sl->cells[c].state != GF__CELL_HOLE) {
            c++;
            continue;
        }
        bool wait = false;
        gf__slot *d = NULL;
        int dc = find_donor(l, sl->epoch, &d, &wait);
        if (wait)
            return false;
        if (dc >= 0) {
            move_cell(l, d, dc, sl, c);
            continue;
        }
        uint64_t pos;
        if (gf__cursor_take(&l->cur, sl->epoch, &pos)) {
            gf__dispatch_cell(l, js, n_jobs, sl, c, pos);
            continue;
        }
        /* The epoch has no more samples: a short batch, and every
         * position is spent, whichever batch had dispatched the last
         * ones (deeper rings dispatch them to later batches). */
        sl->end_pos = l->cur.len;
        break;
    }
    return sl->pending == 0;
}

/* Tries to finalise the oldest unfinished batch (count, status, empty;
 * its errors reported). Returns true when it did: the caller may go on to
 * the next. A failed batch (on_error = fail) halts the loader. */
bool gf__finalise_oldest(gf_loader *l, gf__job *js, int *n_jobs)
{
    if (l->fin == l->tail)
        return false;
    /* Under mu: a worker, a CUDA callback or the consumer may halt. */
    pthread_mutex_lock(&l->mu);
    bool halted = l->halted;
    pthread_mutex_unlock(&l->mu);
    if (halted)
        return false;
    gf__slot *sl = gf__slot_of(l, l->fin);
    assert(sl->seq == l->fin && l->xfer <= l->fin);
    if (sl->pending > 0)
        return false;

    bool empty = false;
    int status = 0;
    int count = 0;
    if (l->s.on_error == GF_ON_ERROR_FAIL && sl->n_errs > 0) {
        qsort(sl->errs, (size_t)sl->n_errs, sizeof *sl->errs, cmp_err);
        status = sl->errs[0].code;
    } else {
        if (!fill_holes(l, sl, js, n_jobs))
            return false;
        count = compact(l, sl);
        if (sort_cells(l, sl, count) < 0) {
            gf__halt(l, GF_ENOMEM, "out of memory ordering a batch");
            return false;
        }
        empty = count == 0 || (count < l->B && l->s.drop_last);
        gf__fields_deliver(l, sl, count);
    }
    report_errors(l, sl);

    sl->count = count;
    sl->status = status;
    sl->empty = empty;
    pthread_mutex_lock(&l->mu);
    if (status < 0) {
        /* Nothing after a failed batch is made: its message must stand,
         * unless another thread halted first (the first halt wins). */
        gf__sample_error *e = &sl->errs[0];
        char *member = e->member ? gf__dataset_member_path(&l->ds, (uint64_t)e->sample,
                                                           e->member - 1)
                                 : NULL;
        if (!l->halted)
            gf__fail(l, status, "sample %lld (%s): %s", (long long)e->sample,
                     member ? member : gf__dataset_path(&l->ds, (uint64_t)e->sample), e->why);
        free(member);
        l->halted = true;
    }
    gf__slot_set_host(sl, GF__HOST_FILLING, GF__HOST_FINAL);
    l->fin++;
    pthread_mutex_unlock(&l->mu);
    gf__clear_errors(sl);
    return true;
}
