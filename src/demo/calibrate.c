/*
 * gpufeed train's model width on CUDA, by calibration, on the command's
 * thread before the runs. The CPU default width makes a GPU step of tens
 * of microseconds: launch-bound, a toy next to any loader. So on CUDA,
 * with no --model-width, the demo measures the loader's input time per
 * batch (the gpufeed loader with no model, at its steady rate), then the
 * step on one cached batch for increasing widths, and takes the smallest
 * width whose step is >= CALIB_FACTOR x the input: the loader then has to
 * keep a busy GPU fed, the story the default tells on the CPU.
 *
 * A step's time is kernel time: a CUDA event pair on the trainer's
 * stream around steps queued back to back behind a step already running,
 * so the first event fires when that step ends, not when the host
 * enqueues (on an idle stream a pair around the enqueue measures the
 * host's launches). CUDA graphs would cut the launches further; cudaemu
 * has no graphs, so the step is not captured.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "compute.h"
#include "json.h"
#include "samples.h"
#include "sysinfo.h"
#include "train.h"

#define CALIB_FACTOR 1.2
#define CALIB_INPUT_BATCHES 48 /* timed at most, after the ring's first fill */
#define CALIB_INPUT_SECONDS 1.5
#define CALIB_STEP_SECONDS 0.1 /* per width, about */
#define CALIB_BUDGET_SECONDS 20.0 /* the whole calibration, about */

#if GF_CLI_HAVE_CUDA
static const int calib_widths[] = {8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512};

/* The gpufeed loader's time per batch with nothing else on the device:
 * batches after the ring's first fill, to the stream. */
static int input_ms(trainer *t, double *ms)
{
    gf_settings s;
    gf_loader *l = NULL;
    gf_stats st;
    gf_batch *b;
    int rc, status, skip, timed = 0;
    double t0 = 0;
    train_loader_settings(t, &s, 0);
    if ((status = train_open_loader(&s, &l)) != CLI_OK)
        return status;
    gf_get_stats(l, &st);
    uint64_t batches = st.epoch_samples / (uint64_t)st.batch_size;
    skip = st.prefetch_depth + 1; /* what the ring filled ahead comes fast */
    if ((uint64_t)skip > batches / 2)
        skip = (int)(batches / 2);
    for (int k = 0;; k++) {
        if (k == skip)
            t0 = cli_now();
        if (k > skip && (timed >= CALIB_INPUT_BATCHES || cli_now() - t0 >= CALIB_INPUT_SECONDS))
            break;
        if ((rc = gf_next(l, &b)) == GF_EOF)
            break;
        const int count = rc < 0 ? 0 : b->count;
        if (rc == 0 && (rc = gf_batch_wait(b, t->stream)) < 0)
            gf_release(l, b);
        else if (rc == 0)
            rc = gf_release_stream(l, b, t->stream);
        if (rc < 0) {
            status = train_loader_failed(l, rc);
            gf_close(&l);
            return status;
        }
        if (k >= skip && count == st.batch_size)
            timed++;
    }
    if (cli_cuda_stream_sync(t->stream) < 0) {
        gf_close(&l);
        return train_cuda_failed();
    }
    *ms = timed ? (cli_now() - t0) * 1e3 / timed : 0;
    gf_close(&l);
    return CLI_OK;
}

/* Kernel time of one step at width w on the cached batch; -1 if the
 * model cannot be made or step at that width (too large). */
static int step_ms(trainer *t, sync_bufs *sb, int nb, int w, double *ms)
{
    gfm_config c = t->mc;
    gfm_model *m = NULL;
    char why[256];
    float loss;
    int correct, rc = -1, steps = 1;
    double one;
    c.width = w;
    if (gfm_create(&m, &c, why, sizeof why) < 0)
        return -1;
    /* The first step loads and allocates; each pair is then recorded
     * behind a step in flight, so it times kernels, not launches. */
    if (gfm_train_step(m, sb->dev, sb->labels, nb, t->stream, &loss, &correct) < 0)
        goto out;
    for (int round = 0; round < 2; round++) {
        if (cli_cuda_event_record(t->ev[0], t->stream) < 0)
            goto out;
        for (int i = 0; i < steps; i++)
            if (gfm_train_step(m, sb->dev, sb->labels, nb, t->stream, &loss, &correct) < 0)
                goto out;
        if (cli_cuda_event_record(t->ev[1], t->stream) < 0 || gfm_sync(m, &loss, &correct) < 0 ||
            cli_cuda_event_ms(t->ev[0], t->ev[1], &one) < 0)
            goto out;
        *ms = one / steps;
        if (round == 0) { /* then enough steps for about CALIB_STEP_SECONDS */
            steps = *ms > 0 ? (int)(CALIB_STEP_SECONDS * 1e3 / *ms) : 20;
            steps = steps < 1 ? 1 : steps > 20 ? 20 : steps;
            if (*ms >= CALIB_STEP_SECONDS * 1e3)
                break;
            /* again behind a step in flight */
            if (gfm_train_step(m, sb->dev, sb->labels, nb, t->stream, &loss, &correct) < 0)
                goto out;
        }
    }
    rc = 0;
out:
    gfm_destroy(m);
    return rc;
}

/* Rank 0's (or the only rank's) calibration into t->calib and t->mc.width. */
static int calibrate(trainer *t, int fallback)
{
    calibration *k = &t->calib;
    sync_bufs sb;
    int status, nb = t->o->batch;
    double t0 = cli_now();
    memset(k, 0, sizeof *k);
    t->mc.width = fallback;
    if ((status = input_ms(t, &k->input_ms)) != CLI_OK)
        return status;
    if ((status = train_sync_bufs_init(t, &sb)) != CLI_OK)
        return status;
    if ((uint64_t)nb > t->train_n)
        nb = (int)t->train_n;
    train_shuffle_order(sb.order, t->train_n, t->o->seed, 0);
    if ((status = train_sync_input(t, &sb, 0, 0, nb, &k->errors)) != CLI_OK)
        goto out;
    k->done = 1;
    for (size_t i = 0; i < sizeof calib_widths / sizeof *calib_widths; i++) {
        double ms;
        if (step_ms(t, &sb, nb, calib_widths[i], &ms) < 0)
            break; /* too wide for this device or batch: the last one stands */
        k->widths[k->n] = calib_widths[i];
        k->step_ms_at[k->n++] = ms;
        t->mc.width = calib_widths[i];
        k->step_ms = ms;
        if (ms >= CALIB_FACTOR * k->input_ms) {
            k->met = 1;
            break;
        }
        if (cli_now() - t0 > CALIB_BUDGET_SECONDS)
            break;
    }
    k->seconds = cli_now() - t0;
out:
    train_sync_bufs_free(t, &sb);
    return status;
}
#endif

int train_choose_width(trainer *t, int fallback)
{
    t->mc.width = fallback;
    if (!t->cuda)
        return CLI_OK;
#if GF_CLI_HAVE_CUDA
    if (t->o->resume) {
        /* The checkpoint's width is not known before it is read: a
         * calibrated one must be given again (--model-width). */
        t->calib.skipped = "--resume: the default width, not calibrated";
        return CLI_OK;
    }
    int status = t->rank == 0 ? calibrate(t, fallback) : CLI_OK;
    if (t->dp) { /* every rank steps the same model: rank 0's width */
        int w = dp_share_status(t, status == CLI_OK ? t->mc.width : -1);
        if (w < 0)
            return status == CLI_OK ? CLI_FAIL : status;
        t->mc.width = w;
        t->calib.done = 1;
    }
    return status;
#else
    return CLI_OK;
#endif
}
