/*
 * gpufeed train's loops, on the command's thread (the loader's consumer):
 * one training step and the timing of its device work (CPU clock, or
 * CUDA events on the trainer's stream), the synchronous loop (read,
 * decode, convert, copy, step, one after the other), the gpufeed loop
 * (gf_next, step, gf_release_stream) and the evaluation on the validation
 * set.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../f16.h"
#include "../mix.h"
#include "cli.h"
#include "compute.h"
#include "json.h"
#include "samples.h"
#include "sysinfo.h"
#include "train.h"
#if GF_CLI_HAVE_CUDA
#include "nvml.h"
#endif

/* ---- timing the steps ---------------------------------------------------- */

/* NVML sampling on during the timed loops only (CUDA, where it loaded). */
void train_nvml_on(trainer *t)
{
#if GF_CLI_HAVE_CUDA
    if (t->nvml)
        cli_nvml_resume(t->nvml);
#else
    (void)t;
#endif
}

void train_nvml_off(trainer *t)
{
#if GF_CLI_HAVE_CUDA
    if (t->nvml)
        cli_nvml_pause(t->nvml);
#else
    (void)t;
#endif
}

void train_nvml_take(trainer *t, run_result *r)
{
    r->nvml_util = -1;
    r->nvml_readings = 0;
#if GF_CLI_HAVE_CUDA
    if (t->nvml)
        cli_nvml_take(t->nvml, &r->nvml_util, &r->nvml_readings);
#else
    (void)t;
#endif
}

void train_window_open(trainer *t, window *w)
{
    w->cpu0 = cli_cpu_seconds();
    w->t0 = cli_now();
    train_nvml_on(t);
}

int train_window_close(trainer *t, gfm_model *m, tally *a, window *w)
{
    int status = train_tally_sync(t, m, a); /* CUDA: the epoch's queued work done */
    w->t1 = cli_now();
    w->cpu1 = cli_cpu_seconds();
    train_nvml_off(t);
    return status;
}

/* CUDA: reads the step events recorded so far (one host wait). */
int train_events_flush(trainer *t)
{
#if GF_CLI_HAVE_CUDA
    if (!t->cuda || t->ev_used == 0)
        return CLI_OK;
    if (cli_cuda_stream_sync(t->stream) < 0)
        return train_cuda_failed();
    for (int i = 0; i < t->ev_used; i++) {
        double ms;
        if (cli_cuda_event_ms(t->ev[2 * i], t->ev[2 * i + 1], &ms) < 0)
            return train_cuda_failed();
        t->ev_busy_ms += ms;
    }
#endif
    t->ev_used = 0;
    return CLI_OK;
}

/* One training step on x (host memory on the CPU, device memory ready on
 * the trainer's stream on CUDA), its device time added to r->busy_s (CPU)
 * or to the event pairs (CUDA: recorded on the stream, so behind a step
 * in flight, as in the gpufeed loop and compute alone, the pair times the
 * kernels; on an idle stream, the synchronous loop's, it also holds the
 * host's launches: calibrate.c sizes the step well above them). wait: the naive loop's per-step wait
 * for the result (loss.item() in a PyTorch loop). */
int train_step(trainer *t, gfm_model *m, const float *x, const int32_t *labels, int n,
               int wait, run_result *r, tally *a)
{
    float loss = 0;
    int correct = 0, rc;
#if HAVE_DP
    if (t->dp_on) {
        uint64_t global_n;
        return dp_step(t, m, x, labels, n, r, a, &global_n);
    }
#endif
    if (!t->cuda) {
        double t0 = cli_now();
        rc = gfm_train_step(m, x, labels, n, NULL, &loss, &correct);
        r->busy_s += cli_now() - t0;
        if (rc < 0) {
            cli_error(CMD, "model: training step failed");
            return CLI_FAIL;
        }
        train_tally_add(a, loss, correct, n);
        r->steps++;
        return CLI_OK;
    }
#if GF_CLI_HAVE_CUDA
    if (t->ev_used == EVENT_PAIRS && train_events_flush(t) != CLI_OK)
        return CLI_FAIL;
    if (cli_cuda_event_record(t->ev[2 * t->ev_used], t->stream) < 0)
        return train_cuda_failed();
    rc = gfm_train_step(m, x, labels, n, t->stream, &loss, &correct);
    if (cli_cuda_event_record(t->ev[2 * t->ev_used + 1], t->stream) < 0)
        return train_cuda_failed();
    t->ev_used++;
    if (rc < 0) {
        cli_error(CMD, "model: training step failed");
        return CLI_FAIL;
    }
    train_tally_add(a, loss, correct, a->pending_n); /* the previous step's */
    a->pending_n = n;
    r->steps++;
    if (wait)
        return train_tally_sync(t, m, a);
    return CLI_OK;
#else
    (void)wait;
    return CLI_FAIL;
#endif
}

/* The device time of a run's steps: CUDA events read at the end of each
 * loop (CPU: measured around each step as it ran). */
int train_busy_collect(trainer *t, run_result *r)
{
    if (!t->cuda)
        return CLI_OK;
    if (train_events_flush(t) != CLI_OK)
        return CLI_FAIL;
    r->busy_s += t->ev_busy_ms * 1e-3;
    t->ev_busy_ms = 0;
    return CLI_OK;
}

/* ---- the synchronous loop ------------------------------------------------ */

/* uint8 HWC (the decoder's output) -> normalised float32 NCHW. */
static void to_nchw(const uint8_t *in, int n, int h, int w, float *out)
{
    size_t plane = (size_t)h * (size_t)w;
    for (int i = 0; i < n; i++) {
        const uint8_t *px = in + (size_t)i * plane * 3;
        float *o = out + (size_t)i * plane * 3;
        for (int c = 0; c < 3; c++) {
            float sc = 1.0f / train_std[c], mu = train_mean[c];
            float *oc = o + (size_t)c * plane;
            for (size_t k = 0; k < plane; k++)
                oc[k] = ((float)px[k * 3 + (size_t)c] - mu) * sc;
        }
    }
}

/* The epoch's order for the synchronous loop: a Fisher-Yates shuffle
 * seeded by (seed, epoch). (The loader's sampler is its own; both are
 * uniform permutations.) */
void train_shuffle_order(uint64_t *order, uint64_t n, uint64_t seed, uint64_t epoch)
{
    uint64_t st = gf__mix64(seed ^ gf__mix64(epoch + 0x5EED));
    for (uint64_t i = 0; i < n; i++)
        order[i] = i;
    for (uint64_t i = n; i > 1; i--) {
        st = gf__mix64(st);
        uint64_t j = st % i;
        uint64_t tmp = order[i - 1];
        order[i - 1] = order[j];
        order[j] = tmp;
    }
}

void train_sync_bufs_free(trainer *t, sync_bufs *b)
{
    gf_decoder_close(&b->dec);
#if GF_CLI_HAVE_CUDA
    if (t->cuda)
        cli_cuda_free(b->dev);
#else
    (void)t;
#endif
    free(b->u8);
    free(b->host);
    free(b->half);
    free(b->labels);
    free(b->order);
    memset(b, 0, sizeof *b);
}

int train_sync_bufs_init(trainer *t, sync_bufs *b)
{
    gf_settings s;
    size_t n = (size_t)t->train_n;
    int B = t->o->batch;
    train_loader_settings(t, &s, 0);
    memset(b, 0, sizeof *b);
    b->cell = (size_t)t->o->size * (size_t)t->o->size * 3;
    b->fbytes = b->cell * (size_t)B * (t->amp ? sizeof(uint16_t) : sizeof(float));
    b->u8 = malloc(b->cell * (size_t)B);
    b->host = malloc(b->cell * (size_t)B * sizeof(float));
    b->half = t->amp ? malloc(b->fbytes) : NULL;
    b->labels = malloc((size_t)B * sizeof *b->labels);
    b->order = malloc((n ? n : 1) * sizeof *b->order);
    if (!b->u8 || !b->host || (t->amp && !b->half) || !b->labels || !b->order ||
        gf_decoder_open(&b->dec, &s) < 0) {
        train_sync_bufs_free(t, b);
        cli_error(CMD, "out of memory");
        return CLI_FAIL;
    }
    b->dev = b->host;
#if GF_CLI_HAVE_CUDA
    if (t->cuda && cli_cuda_malloc((void **)&b->dev, b->fbytes) < 0) {
        b->dev = NULL;
        train_sync_bufs_free(t, b);
        return train_cuda_failed();
    }
#endif
    return CLI_OK;
}

/* The input of one synchronous batch: read + decode + convert + copy. */
int train_sync_input(trainer *t, sync_bufs *b, uint64_t epoch, uint64_t pos, int nb,
                     uint64_t *errors)
{
    cli_index_read_decode(t->train_index, b->dec, b->order + pos, nb, epoch, b->u8, b->cell, errors);
    for (int i = 0; i < nb; i++)
        b->labels[i] = gf_index_label(t->train_index, b->order[pos + (uint64_t)i]);
    to_nchw(b->u8, nb, t->o->size, t->o->size, b->host);
    const void *src = b->host;
    if (t->amp) { /* as the loader's float16: one rounding of the float */
        size_t count = b->cell * (size_t)nb;
        for (size_t i = 0; i < count; i++)
            b->half[i] = gf__f16_bits(b->host[i]);
        src = b->half;
    }
#if GF_CLI_HAVE_CUDA
    if (t->cuda &&
        cli_cuda_copy_h2d(b->dev, src, b->fbytes / (size_t)t->o->batch * (size_t)nb,
                          t->stream) < 0)
        return train_cuda_failed();
#else
    (void)src;
#endif
    return CLI_OK;
}

int train_epoch_sync(trainer *t, gfm_model *m, sync_bufs *b, int epoch, run_result *r,
                     tally *a, window *w)
{
    uint64_t n = t->train_n, B = (uint64_t)t->o->batch;
    uint64_t steps, k = 0;
    double t0, input_s = 0;
    train_window_open(t, w);
    t0 = w->t0;
    train_shuffle_order(b->order, n, t->o->seed, (uint64_t)epoch);
    if (t->dp_on) { /* the rank's share: every world-th, full batches */
        uint64_t share = n / (uint64_t)t->world;
        for (uint64_t i = 0; i < share; i++)
            b->order[i] = b->order[i * (uint64_t)t->world + (uint64_t)t->rank];
        n = share - share % B;
    }
    steps = (n + B - 1) / B;
    for (uint64_t pos = 0; pos < n; pos += B, k++) {
        int nb = (int)(n - pos < B ? n - pos : B);
        double ti = cli_now();
        if (train_sync_input(t, b, (uint64_t)epoch, pos, nb, &r->errors) != CLI_OK)
            return CLI_FAIL;
        input_s += cli_now() - ti;
        if (train_step(t, m, b->dev, b->labels, nb, 1, r, a) != CLI_OK)
            return CLI_FAIL;
        r->samples += (uint64_t)nb;
        report_progress(t, L_SYNC, epoch, k + 1, steps, pos + (uint64_t)nb, t0, input_s, 0);
    }
    r->input_s += input_s;
    int status = dp_drain(t, m, r, a);
    int closed = train_window_close(t, m, a, w);
    return status != CLI_OK ? status : closed;
}

/* ---- the gpufeed loop ---------------------------------------------------- */

int train_epoch_gpufeed(trainer *t, gfm_model *m, int epoch, run_result *r, tally *a,
                        window *w)
{
    gf_settings s;
    gf_loader *l = NULL;
    gf_stats st;
    gf_batch *b;
    uint64_t steps, k = 0, samples = 0;
    double input_s = 0, t0;
    int rc, status = CLI_OK;

    train_loader_settings(t, &s, 0);
    s.epochs = (uint64_t)epoch + 1;
    if ((status = train_open_loader(&s, &l)) != CLI_OK)
        return status;
    gf_get_stats(l, &st);
    if (t->dp && (st.rank != t->rank || st.world != t->world)) {
        /* The loader took its share from the launcher's environment. */
        if (st.world != 1 || t->explicit_rank) {
            cli_error(CMD, "the loader reads share %d of %d (launcher's environment), MPI says "
                           "rank %d of %d", st.rank, st.world, t->rank, t->world);
            status = CLI_FAIL;
            goto out;
        }
        t->explicit_rank = 1; /* no rank in the environment: MPI's */
        gf_close(&l);
        train_loader_settings(t, &s, 0);
        s.epochs = (uint64_t)epoch + 1;
        if ((status = train_open_loader(&s, &l)) != CLI_OK)
            return status;
    }
    if (t->have_resume && epoch == t->start_epoch) {
        /* Rank 0's state, as saved, on every rank: positions are equal, and
         * the library resumes any rank's state on any rank. Its rank is the
         * saving world's: setting this rank's there would make a rank past
         * that world (3 ranks resuming a 2-rank state: rank 2) "no rank". */
        rc = gf_set_state(l, &t->rstate);
    } else {
        rc = gf_seek(l, (uint64_t)epoch, 0);
    }
    if (rc < 0) {
        status = train_loader_failed(l, rc);
        goto out;
    }
    gf_get_stats(l, &st);
    if (st.resume_note[0] && t->rank == 0) /* the checkpoint's world was another */
        fprintf(stderr, "gpufeed train: note: %s\n", st.resume_note);
    /* This rank's batches from where the loader starts: the whole epoch,
     * or a resumed epoch's rest (mid-epoch: the position in it; another
     * world: its share of the rest, from 0). None if the state's epoch
     * had nothing left for this world (the loader went past it). */
    {
        uint64_t B = (uint64_t)st.batch_size, left = 0;
        if (st.epoch == (uint64_t)epoch && st.epoch_samples > st.position)
            left = st.epoch_samples - st.position;
        steps = s.drop_last ? left / B : (left + B - 1) / B;
    }
    /* The window opens at the first gf_next: opening (indexing, starting
     * threads) is a once-per-run cost a trainer pays before its loop, and
     * so is closing (after the window). */
    train_window_open(t, w);
    t0 = w->t0;
    for (;;) {
        /* --stop-after: stop before a batch this rank would take (r->steps
         * counts the ranks' common steps, so every rank stops at the same
         * one; shares are equal, so at the same position). The epoch's
         * last batch taken: its end, not a stop inside it. */
        if (t->o->stop_after && r->steps >= t->o->stop_after && k < steps) {
            t->stopped = t->stopped_mid = 1;
            t->stop_epoch = epoch;
            break;
        }
        double ti = cli_now();
        rc = gf_next(l, &b);
        input_s += cli_now() - ti;
        if (rc == GF_EOF)
            break;
        if (rc < 0) {
            status = train_loader_failed(l, rc);
            goto out;
        }
        if ((b->device == GF_DEVICE_CUDA) != (t->cuda != 0)) {
            gf_release(l, b);
            cli_error(CMD, "a batch arrived on %s, expected %s",
                      b->device == GF_DEVICE_CUDA ? "cuda" : "cpu", t->cuda ? "cuda" : "cpu");
            status = CLI_FAIL;
            goto out;
        }
        if (t->cuda && (rc = gf_batch_wait(b, t->stream)) < 0) {
            gf_release(l, b);
            status = train_loader_failed(l, rc);
            goto out;
        }
        int n = b->count;
        if (epoch == t->start_epoch) { /* the run's first epoch: what this rank read */
            for (int i = 0; i < n; i++) {
                t->first_epoch_hash += gf__mix64((uint64_t)b->indices[i] + 1);
                if (t->dump)
                    fprintf(t->dump, "%" PRId64 "\n", b->indices[i]);
            }
            t->first_epoch_samples += (uint64_t)n;
        }
        status = train_step(t, m, b->data, b->labels, n, 0, r, a);
        rc = t->cuda ? gf_release_stream(l, b, t->stream) : gf_release(l, b);
        if (status != CLI_OK)
            goto out;
        if (rc < 0) {
            status = train_loader_failed(l, rc);
            goto out;
        }
        samples += (uint64_t)n;
        k++;
        report_progress(t, L_GPUFEED, epoch, k, steps, samples, t0, input_s, 0);
    }
    if ((status = dp_drain(t, m, r, a)) != CLI_OK ||
        (status = train_window_close(t, m, a, w)) != CLI_OK)
        goto out;
    gf_get_stats(l, &st);
    if (st.autotune) {
        t->tuned_threads = st.threads;
        t->tuned_depth = st.prefetch_depth;
        t->tune_changes += st.autotune_changes;
    }
    r->errors += st.errors;
    r->remote_requests += st.remote_requests;
    r->remote_retries += st.remote_retries;
    r->remote_bytes += st.remote_bytes;
    r->remote_wait_s += st.remote_wait_s;
    r->cache_hits += st.cache_hits;
    r->cache_misses += st.cache_misses;
    if (!r->cache_warning[0])
        snprintf(r->cache_warning, sizeof r->cache_warning, "%s", st.cache_warning);
    r->samples += samples;
    r->input_s += input_s;
    if ((rc = gf_get_state(l, &t->lstate)) < 0) {
        status = train_loader_failed(l, rc);
        goto out;
    }
    if (t->stopped_mid && t->lstate.epoch != (uint64_t)epoch)
        t->stopped_mid = 0; /* it took the epoch's last batch after all: an end */
    if (t->dump && epoch == t->start_epoch && fflush(t->dump) != 0) {
        cli_error(CMD, "--dump-indices: %s", strerror(errno));
        status = CLI_FAIL;
        goto out;
    }
out:
    train_nvml_off(t); /* a failed epoch's window */
    gf_close(&l);
    return status;
}

/* ---- evaluation ---------------------------------------------------------- */

int train_evaluate(trainer *t, gfm_model *m, double *loss, double *acc)
{
    gf_settings s;
    gf_loader *l = NULL;
    gf_batch *b;
    double loss_sum = 0;
    uint64_t correct = 0, n = 0;
    int rc, status;

    if (t->rank != 0) { /* rank 0 evaluates, the others go on */
        *loss = NAN;
        *acc = NAN;
        return CLI_OK;
    }
    train_loader_settings(t, &s, 1);
    if ((status = train_open_loader(&s, &l)) != CLI_OK)
        return status;
    while ((rc = gf_next(l, &b)) == 0) {
        float lo = 0;
        int c = 0;
        if (t->cuda && (rc = gf_batch_wait(b, t->stream)) < 0) {
            gf_release(l, b);
            break;
        }
        int erc = gfm_evaluate(m, b->data, b->labels, b->count, t->stream, &lo, &c);
        int cnt = b->count;
        rc = t->cuda ? gf_release_stream(l, b, t->stream) : gf_release(l, b);
        if (erc < 0) {
            cli_error(CMD, "model: evaluation failed");
            gf_close(&l);
            return CLI_FAIL;
        }
        if (rc < 0)
            break;
        loss_sum += (double)lo * cnt;
        correct += (uint64_t)(c > 0 ? c : 0);
        n += (uint64_t)cnt;
    }
    if (rc != GF_EOF) {
        status = train_loader_failed(l, rc);
        gf_close(&l);
        return status;
    }
    gf_close(&l);
    *loss = n ? loss_sum / (double)n : NAN;
    *acc = n ? (double)correct / (double)n : 0;
    return CLI_OK;
}
