/*
 * gpufeed train's model width, by calibration, on the command's thread
 * before the runs, on the CPU and on CUDA alike. The demo exists to show
 * a job whose input, done naively, holds the model back, and a loader
 * that keeps it fed: that needs a step a little longer than what the
 * decode threads the demo leaves take per batch. A fixed width cannot be
 * that on every machine (a CUDA step at the CPU's width is tens of
 * microseconds; a faster CPU core outruns one decode thread). So with no
 * --model-width the demo measures the loader's input time per batch (the
 * gpufeed loader with no model, at its steady rate, with the runs'
 * threads), then the step on one cached batch for increasing widths, and
 * takes the smallest width whose step is >= CALIB_FACTOR x the input.
 *
 * On the CPU a step's time is the wall time of the calls (the model runs
 * on this thread). On CUDA it is kernel time: a CUDA event pair on the
 * trainer's stream around steps queued back to back behind a step
 * already running, so the first event fires when that step ends, not
 * when the host enqueues (on an idle stream a pair around the enqueue
 * measures the host's launches). CUDA graphs would cut the launches
 * further; cudaemu has no graphs, so the step is not captured.
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

#define CALIB_INPUT_BATCHES 48 /* timed at most, after the ring's first fill */
#define CALIB_INPUT_SECONDS 1.5
#define CALIB_STEP_SECONDS 0.1 /* per width, about */
#define CALIB_BUDGET_SECONDS 20.0 /* the whole calibration, about */

/* The widths tried, in order. The step grows about as the width's
 * square: on the CPU (a step of ~20 ms at width 7) every width up to 16
 * keeps the chosen step within ~30% of the target; a GPU step is
 * launch-bound below 8. */
static const int cpu_widths[] = {2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 16, 20, 24, 32};
#if GF_CLI_HAVE_CUDA
static const int cuda_widths[] = {8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512};
#endif

/* The gpufeed loader's time per batch with no model, at its steady rate:
 * full batches (drop_last), epoch after epoch so that a set the ring
 * holds whole is still timed at the decode threads' pace, after the
 * ring's first fill (on CUDA, to the stream); *threads: its decode
 * threads. 0 ms when the set has no full batch. */
static int input_ms(trainer *t, double *ms, int *threads)
{
    gf_settings s;
    gf_loader *l = NULL;
    gf_stats st;
    gf_batch *b;
    int rc, status, skip, timed = 0;
    double t0 = 0;
    *ms = 0;
    if (t->train_n / (uint64_t)t->world < (uint64_t)t->o->batch)
        return CLI_OK; /* the rank's share: drop_last would refuse it */
    train_loader_settings(t, &s, 0);
    s.epochs = 0; /* unbounded */
    s.drop_last = 1;
    if ((status = train_open_loader(&s, &l)) != CLI_OK)
        return status;
    gf_get_stats(l, &st);
    *threads = st.threads;
    skip = st.prefetch_depth + 1; /* what the ring filled ahead comes fast */
    for (int k = 0;; k++) {
        if (k == skip)
            t0 = cli_now();
        if (k > skip && (timed >= CALIB_INPUT_BATCHES || cli_now() - t0 >= CALIB_INPUT_SECONDS))
            break;
        if ((rc = gf_next(l, &b)) == GF_EOF)
            break;
        if (rc == 0 && t->cuda && (rc = gf_batch_wait(b, t->stream)) < 0)
            gf_release(l, b);
        else if (rc == 0)
            rc = t->cuda ? gf_release_stream(l, b, t->stream) : gf_release(l, b);
        if (rc < 0) {
            status = train_loader_failed(l, rc);
            gf_close(&l);
            return status;
        }
        if (k >= skip)
            timed++;
    }
#if GF_CLI_HAVE_CUDA
    if (t->cuda && cli_cuda_stream_sync(t->stream) < 0) {
        gf_close(&l);
        return train_cuda_failed();
    }
#endif
    *ms = timed ? (cli_now() - t0) * 1e3 / timed : 0;
    gf_close(&l);
    return CLI_OK;
}

/* The time of `steps` steps, one after the other, on the cached batch. */
static int time_steps(trainer *t, gfm_model *m, sync_bufs *sb, int nb, int steps, double *ms)
{
    float loss;
    int correct;
    if (!t->cuda) {
        double t0 = cli_now();
        for (int i = 0; i < steps; i++)
            if (gfm_train_step(m, sb->dev, sb->labels, nb, NULL, &loss, &correct) < 0)
                return -1;
        *ms = (cli_now() - t0) * 1e3;
        return 0;
    }
#if GF_CLI_HAVE_CUDA
    if (cli_cuda_event_record(t->ev[0], t->stream) < 0)
        return -1;
    for (int i = 0; i < steps; i++)
        if (gfm_train_step(m, sb->dev, sb->labels, nb, t->stream, &loss, &correct) < 0)
            return -1;
    if (cli_cuda_event_record(t->ev[1], t->stream) < 0 || gfm_sync(m, &loss, &correct) < 0 ||
        cli_cuda_event_ms(t->ev[0], t->ev[1], ms) < 0)
        return -1;
    return 0;
#else
    return -1;
#endif
}

/* The time of one step at width w on the cached batch; -1 if the model
 * cannot be made or step at that width (too large). */
static int step_ms(trainer *t, sync_bufs *sb, int nb, int w, double *ms)
{
    gfm_config c = t->mc;
    gfm_model *m = NULL;
    char why[256];
    float loss;
    int correct, rc = -1, steps = 1;
    double all;
    c.width = w;
    if (gfm_create(&m, &c, why, sizeof why) < 0)
        return -1;
    /* The first step loads and allocates (and on CUDA leaves a step in
     * flight, so each pair times kernels, not launches). */
    if (gfm_train_step(m, sb->dev, sb->labels, nb, t->stream, &loss, &correct) < 0)
        goto out;
    for (int round = 0; round < 2; round++) {
        if (time_steps(t, m, sb, nb, steps, &all) < 0)
            goto out;
        *ms = all / steps;
        if (round == 0) { /* then enough steps for about CALIB_STEP_SECONDS */
            steps = *ms > 0 ? (int)(CALIB_STEP_SECONDS * 1e3 / *ms) : 20;
            steps = steps < 1 ? 1 : steps > 20 ? 20 : steps;
            if (*ms >= CALIB_STEP_SECONDS * 1e3)
                break;
            /* CUDA: again behind a step in flight */
            if (t->cuda && gfm_train_step(m, sb->dev, sb->labels, nb, t->stream, &loss,
                                          &correct) < 0)
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
    int status, nb = t->o->batch, n_widths = (int)(sizeof cpu_widths / sizeof *cpu_widths);
    const int *widths = cpu_widths;
    double t0 = cli_now();
#if GF_CLI_HAVE_CUDA
    if (t->cuda) {
        widths = cuda_widths;
        n_widths = (int)(sizeof cuda_widths / sizeof *cuda_widths);
    }
#endif
    memset(k, 0, sizeof *k);
    t->mc.width = fallback;
    if ((status = input_ms(t, &k->input_ms, &k->input_threads)) != CLI_OK)
        return status;
    if (k->input_ms <= 0) {
        k->skipped = "fewer samples than a batch, no input to time: the default width";
        return CLI_OK;
    }
    if ((status = train_sync_bufs_init(t, &sb)) != CLI_OK)
        return status;
    if ((uint64_t)nb > t->train_n)
        nb = (int)t->train_n;
    train_shuffle_order(sb.order, t->train_n, t->o->seed, 0);
    if ((status = train_sync_input(t, &sb, 0, 0, nb, &k->errors)) != CLI_OK)
        goto out;
    k->done = 1;
    for (int i = 0; i < n_widths && k->n < CALIB_MAX_WIDTHS; i++) {
        double ms;
        if (step_ms(t, &sb, nb, widths[i], &ms) < 0)
            break; /* too wide for this device or batch: the last one stands */
        k->widths[k->n] = widths[i];
        k->step_ms_at[k->n++] = ms;
        t->mc.width = widths[i];
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

int train_choose_width(trainer *t, int fallback)
{
    t->mc.width = fallback;
    if (t->o->resume) { /* the model goes on at the width it was saved with */
        int w = checkpoint_width(t->o->resume);
        t->mc.width = w ? w : fallback;
        t->calib.skipped = "--resume: the checkpoint's width";
        return CLI_OK;
    }
    int status = t->rank == 0 ? calibrate(t, fallback) : CLI_OK;
    if (t->dp) { /* every rank steps the same model: rank 0's width */
        int w = dp_share_status(t, status == CLI_OK ? t->mc.width : -1);
        if (w < 0)
            return status == CLI_OK ? CLI_FAIL : status;
        t->mc.width = w;
        if (t->rank != 0)
            t->calib.done = 1; /* rank 0's choice, whatever it was */
    }
    return status;
}
