/*
 * What gpufeed train prints, on the command's thread (rank 0's output;
 * the other ranks' stdout is /dev/null): the progress line, the set-up
 * lines, a line per epoch, and at the end the table or the --json object.
 */
#include <inttypes.h>
#include <stdio.h>

#include "cli.h"
#include "compute.h"
#include "json.h"
#include "quote.h"
#include "samples.h"
#include "sysinfo.h"
#include "train.h"

/* The progress line is redrawn at most this often (seconds). */
#define PROGRESS_EVERY 0.25

void report_progress(trainer *t, int loader, int epoch, uint64_t step_no, uint64_t steps,
                     uint64_t samples, double t0, double input_s, int force)
{
    double now = cli_now();
    if (!t->tty || t->o->json || (!force && now - t->last_progress < PROGRESS_EVERY))
        return;
    t->last_progress = now;
    double el = now - t0;
    printf("\r  %-8s epoch %d/%d  step %" PRIu64 "/%" PRIu64 "  %6.0f images/s  stall %3.0f%%\033[K",
           train_loader_names[loader], epoch + 1, t->o->epochs, step_no, steps,
           el > 0 ? (double)samples / el : 0.0, el > 0 ? 100 * input_s / el : 0.0);
    fflush(stdout);
}

void report_progress_clear(trainer *t)
{
    if (t->tty && !t->o->json) {
        printf("\r\033[K");
        fflush(stdout);
    }
}

/* ---- report -------------------------------------------------------------- */

typedef struct figures {
    double images_per_s, step_ms, stall, device_util, cpu_util, of_alone;
} figures;

static figures figures_of(const trainer *t, const run_result *r)
{
    figures f = {0};
    int cores = cli_cores();
    double alone = t->alone.wall_s > 0 ? t->alone.busy_s / t->alone.wall_s : 0;
    if (r->wall_s <= 0)
        return f;
    f.images_per_s = (double)r->samples / r->wall_s;
    f.step_ms = r->steps ? r->wall_s * 1e3 / (double)r->steps : 0;
    f.stall = r->input_s / r->wall_s;
    f.device_util = r->busy_s / r->wall_s;
    if (f.device_util > 1)
        f.device_util = 1;
    f.cpu_util = r->cpu_s / r->wall_s / cores;
    f.of_alone = alone > 0 ? f.device_util / alone : 0;
    return f;
}

static const char *row_name(int loader)
{
    return loader == L_ALONE ? "compute alone" : train_loader_names[loader];
}

/* ---- the lines as it goes -------------------------------------------------- */

/* No --model-width: the width chosen and why, in a line's words
 * (calibrate.c); "" when the width was given. */
static const char *width_reason(const trainer *t, char *buf, size_t len)
{
    const calibration *k = &t->calib;
    const int th = k->input_threads;
    if (k->skipped)
        snprintf(buf, len, "%s", k->skipped);
    else if (!k->done || t->rank != 0)
        snprintf(buf, len, "%s", t->o->width ? "" : "rank 0's calibration");
    else
        snprintf(buf, len, "calibrated%s: step %.2f ms %s %.1f x input %.2f ms a batch (%d "
                 "decode thread%s)", k->met ? "" : ", not reached at the widest tried",
                 k->step_ms, k->met ? ">=" : "<", CALIB_FACTOR, k->input_ms, th,
                 th == 1 ? "" : "s");
    return buf;
}

/* No --model-width: how the width was chosen (calibrate.c). */
static void report_calibration(const trainer *t)
{
    const calibration *k = &t->calib;
    char why[200];
    if (!*width_reason(t, why, sizeof why))
        return;
    printf("  model width %d (%s)\n", t->mc.width, why);
    if (!k->done || t->rank != 0 || k->skipped)
        return;
    printf("  calibration (%.1f s), width: step ms:", k->seconds);
    for (int i = 0; i < k->n; i++)
        printf(" %d: %.2f", k->widths[i], k->step_ms_at[i]);
    printf("\n");
}

/* Whether a run cannot reach the compute-alone rate whatever the loader
 * does: the synchronous loop (input and steps one after the other), or a
 * loader slower than the step by construction (calibration not met). */
static int input_bound_by_design(const trainer *t, const run_result *r)
{
    if (r->loader == L_SYNC)
        return 1;
    return r->loader == L_GPUFEED && t->calib.done && !t->calib.met &&
           t->calib.input_ms > t->calib.step_ms;
}

/* What this run is, before compute alone. */
void report_intro(const trainer *t)
{
    const train_opts *o = t->o;
    if (o->json)
        return;
    int th = o->threads ? o->threads : (cli_cores() > 1 ? cli_cores() - 1 : 1);
    printf("gpufeed train  (%" PRIu64 " train / %" PRIu64 " val images, %d classes)\n",
           t->train_n, t->val_samples, t->classes);
    cli_put_heading(stdout, "  train data  ", t->train_data);
    cli_put_heading(stdout, "  val data    ", t->val_data);
    printf("  %s%s, %dx%d, batch %d, model width %d (%.0f MFLOP/step), %d epoch%s, lr %g, "
           "%d decode thread%s, prefetch depth %d\n",
           t->cuda ? "cuda" : "cpu", t->amp ? " (amp: float16 batches)" : "", o->size, o->size,
           o->batch, t->mc.width, 2 * t->step_flops * o->batch / 1e6, o->epochs,
           o->epochs == 1 ? "" : "s", o->lr, th, th == 1 ? "" : "s", o->depth ? o->depth : 4);
    report_calibration(t);
    if (o->amp && !t->cuda)
        printf("  note: --amp is for CUDA (float16 batches); the CPU path reads float32\n");
    if (t->device_note[0])
        printf("  note: %s\n", t->device_note);
    if (t->dp)
        printf("  data-parallel: %d rank%s, each on its share of every epoch, "
               "gradients averaged each step with %s\n",
               t->world, t->world == 1 ? "" : "s", t->allreduce_desc);
    if (t->have_resume)
        printf("  resumed from %s: %d epoch%s done, loader at epoch %" PRIu64
               " sample %" PRIu64 "\n",
               o->resume, t->start_epoch, t->start_epoch == 1 ? "" : "s", t->rstate.epoch,
               t->rstate.position);
    fflush(stdout);
}

void report_alone(const trainer *t)
{
    if (t->o->json)
        return;
    figures f = figures_of(t, &t->alone);
    printf("  compute alone: %.1f ms/step, %.0f images/s (the model on one cached batch)\n\n",
           f.step_ms, f.images_per_s);
    fflush(stdout);
}

/* One epoch done (rank 0 prints; the others' stdout is /dev/null). */
void report_epoch(const trainer *t, int loader, int e, const epoch_row *row)
{
    if (t->o->json)
        return;
    printf("  %-8s epoch %d/%d  loss %.3f  train acc %5.1f%%  val acc %5.1f%%  "
           "%6.0f images/s%s  %.1f s\n",
           train_loader_names[loader], e + 1, t->o->epochs, row->loss,
           100 * row->train_accuracy, 100 * row->accuracy, row->images_per_s,
           t->dp ? " (rank 0)" : "", row->seconds);
    fflush(stdout);
}

void report_table(const trainer *t, const run_result *runs, int n)
{
    const run_result *s = NULL, *g = NULL;
    printf("\n  %-14s %9s %8s %6s %12s %17s %6s%s\n", "loader", "images/s", "step ms", "stall",
           "device util", "of compute-alone", "CPU", t->nvml ? "  NVML util" : "");
    for (int i = -1; i < n; i++) {
        const run_result *r = i < 0 ? &t->alone : &runs[i];
        figures f = figures_of(t, r);
        printf("  %-14s %9.0f %8.1f %5.0f%% %11.0f%% %16.0f%% %5.0f%%", row_name(r->loader),
               f.images_per_s, f.step_ms, 100 * f.stall, 100 * f.device_util,
               100 * f.of_alone, 100 * f.cpu_util);
        if (t->nvml && r->nvml_readings > 0)
            printf(" %10.0f%%", 100 * r->nvml_util);
        else if (t->nvml)
            printf(" %11s", "-");
        if (i >= 0 && input_bound_by_design(t, r))
            printf("  input-bound by design");
        else if (i >= 0 && r->loader == L_GPUFEED)
            printf("  goal >= 95%% of compute alone: %s", f.of_alone >= 0.95 ? "met" : "NOT met");
        printf("\n");
        if (i >= 0 && r->loader == L_SYNC)
            s = r;
        if (i >= 0 && r->loader == L_GPUFEED)
            g = r;
    }
    if (s && g) {
        figures fs = figures_of(t, s), fg = figures_of(t, g);
        printf("\n  gpufeed: %.2fx the images/s of the synchronous loop; the %s is busy %.0f%% "
               "of the time instead of %.0f%%\n",
               fs.images_per_s > 0 ? fg.images_per_s / fs.images_per_s : 0,
               t->cuda ? "GPU" : "model's core", 100 * fg.device_util, 100 * fs.device_util);
        printf("  (compute alone: %.0f%%), and waits for input %.0f%% of the time instead of "
               "%.0f%%.\n",
               100 * figures_of(t, &t->alone).device_util, 100 * fg.stall, 100 * fs.stall);
    }
    char why[200];
    if (*width_reason(t, why, sizeof why))
        printf("  model width %d: %s\n", t->mc.width, why);
    if (!t->cuda)
        printf("  CPU path: the model steps on the consumer thread; device util = time inside "
               "the step / wall.\n");
    else
        printf("  device util: the steps' kernel time (CUDA events) / wall%s%s\n",
               t->nvml ? "; NVML util: nvidia-smi's figure, sampled every 100 ms during the "
                         "loops"
                       : "; ",
               t->nvml ? "" : t->nvml_note);
    if (t->o->autotune && t->tuned_threads)
        printf("  autotune chose %d decode thread%s and prefetch depth %d (%llu changes)\n",
               t->tuned_threads, t->tuned_threads == 1 ? "" : "s", t->tuned_depth,
               (unsigned long long)t->tune_changes);
    if (t->dp && n > 0) {
        const run_result *r = &runs[n - 1];
        int same = 1;
        for (int i = 1; i < t->world; i++)
            same &= t->rank_checksums[i] == t->rank_checksums[0];
        printf("\n  data-parallel (%s): %d rank%s, %" PRIu64 " samples over all ranks "
               "(%.0f images/s together); %s all-reduce of %zu gradients: %.2f ms/step, "
               "%.0f%% of rank 0's wall\n",
               row_name(r->loader), t->world, t->world == 1 ? "" : "s", r->global_samples,
               r->wall_s > 0 ? (double)r->global_samples / r->wall_s : 0.0,
               t->nccl ? "NCCL" : "MPI", t->n_params,
               r->steps ? 1e3 * r->comm_s / (double)r->steps : 0.0,
               r->wall_s > 0 ? 100 * r->comm_s / r->wall_s : 0.0);
        printf("  final weights: %s (checksum %016" PRIx64 " on rank 0)\n",
               same ? "identical on every rank" : "DIFFER between ranks", t->rank_checksums[0]);
    }
    if (t->stopped && n > 0) {
        const train_opts *o = t->o;
        if (t->stopped_mid)
            printf("\n  stopped after %" PRIu64 " step%s (--stop-after): inside epoch %d/%d, at "
                   "sample %" PRIu64 " of each rank's share%s%s\n",
                   runs[n - 1].steps, runs[n - 1].steps == 1 ? "" : "s", t->stop_epoch + 1, o->epochs, t->lstate.position,
                   o->checkpoint ? "; --resume " : " (no --checkpoint: nothing saved)",
                   o->checkpoint ? o->checkpoint : "");
        else
            printf("\n  stopped after %" PRIu64 " step%s (--stop-after): at the end of epoch "
                   "%d/%d%s%s\n",
                   runs[n - 1].steps, runs[n - 1].steps == 1 ? "" : "s", t->stop_epoch, o->epochs,
                   o->checkpoint ? "; --resume " : " (no --checkpoint: nothing saved)",
                   o->checkpoint ? o->checkpoint : "");
    }
    for (int i = 0; i < n; i++)
        if (runs[i].errors)
            printf("  %s: %" PRIu64 " samples could not be decoded (skipped)\n",
                   row_name(runs[i].loader), runs[i].errors);
    for (int i = 0; i < n; i++)
        if (runs[i].remote_requests)
            printf("  %s: remote shards: %" PRIu64 " requests, %" PRIu64 " retries, %.1f MB "
                   "fetched; the decoders waited for them %.2f s (%.0f%% of the loop)\n",
                   row_name(runs[i].loader), runs[i].remote_requests, runs[i].remote_retries,
                   (double)runs[i].remote_bytes / 1e6, runs[i].remote_wait_s,
                   runs[i].wall_s > 0 ? 100 * runs[i].remote_wait_s / runs[i].wall_s : 0.0);
    for (int i = 0; i < n; i++) {
        if (runs[i].cache_hits || runs[i].cache_misses)
            printf("  %s: shard cache: %" PRIu64 " shards read from it, %" PRIu64 " fetched\n",
                   row_name(runs[i].loader), runs[i].cache_hits, runs[i].cache_misses);
        if (runs[i].cache_warning[0])
            printf("  %s: %s\n", row_name(runs[i].loader), runs[i].cache_warning);
    }
}

static void json_checksum(cli_json *j, uint64_t sum)
{
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, sum);
    cli_json_str(j, hex);
}

static void json_figures(cli_json *j, const trainer *t, const run_result *r)
{
    figures f = figures_of(t, r);
    cli_json_object(j);
    cli_json_kstr(j, "loader", r->loader == L_ALONE ? "compute-alone" : train_loader_names[r->loader]);
    cli_json_knum(j, "images_per_s", f.images_per_s);
    cli_json_knum(j, "step_ms", f.step_ms);
    cli_json_knum(j, "stall_fraction", f.stall);
    cli_json_knum(j, "device_utilization", f.device_util);
    cli_json_knum(j, "of_compute_alone", f.of_alone);
    cli_json_knum(j, "cpu_utilization", f.cpu_util);
    cli_json_kuint(j, "steps", r->steps);
    cli_json_kuint(j, "samples", r->samples);
    cli_json_knum(j, "seconds", r->wall_s);
    if (r->nvml_readings > 0)
        cli_json_knum(j, "nvml_utilization", r->nvml_util);
    else
        cli_json_knull(j, "nvml_utilization");
    cli_json_kint(j, "nvml_readings", r->nvml_readings);
    cli_json_kbool(j, "input_bound_by_design", input_bound_by_design(t, r));
    if (r->loader != L_ALONE) {
        cli_json_knum(j, "accuracy", r->accuracy);
        cli_json_kuint(j, "errors", r->errors);
        cli_json_kuint(j, "remote_requests", r->remote_requests);
        cli_json_kuint(j, "remote_retries", r->remote_retries);
        cli_json_kuint(j, "remote_bytes", r->remote_bytes);
        cli_json_knum(j, "remote_wait_s", r->remote_wait_s);
        cli_json_kuint(j, "cache_hits", r->cache_hits);
        cli_json_kuint(j, "cache_misses", r->cache_misses);
        cli_json_kstr(j, "cache_warning", r->cache_warning);
        cli_json_key(j, "weights_checksum");
        json_checksum(j, r->checksum);
    }
    cli_json_object_end(j);
}

void report_json(const trainer *t, const run_result *runs, int n)
{
    const train_opts *o = t->o;
    cli_json js, *j = &js;
    cli_json_init(j, stdout);
    cli_json_object(j);
    cli_json_kstr(j, "device", t->cuda ? "cuda" : "cpu");
    cli_json_kstr(j, "train_data", t->train_data);
    cli_json_kstr(j, "val_data", t->val_data);
    cli_json_kuint(j, "train_samples", t->train_n);
    cli_json_kuint(j, "val_samples", t->val_samples);
    cli_json_kint(j, "classes", t->classes);
    cli_json_kint(j, "batch_size", o->batch);
    cli_json_kint(j, "image_size", o->size);
    cli_json_kint(j, "model_width", t->mc.width);
    cli_json_kbool(j, "width_calibrated", t->calib.done);
    if (t->calib.skipped)
        cli_json_kstr(j, "width_note", t->calib.skipped);
    if (t->calib.done && t->rank == 0) {
        const calibration *k = &t->calib;
        cli_json_key(j, "calibration");
        cli_json_object(j);
        cli_json_knum(j, "factor", CALIB_FACTOR);
        cli_json_kbool(j, "met", k->met);
        cli_json_knum(j, "input_ms", k->input_ms);
        cli_json_kint(j, "input_threads", k->input_threads);
        cli_json_knum(j, "step_ms", k->step_ms);
        cli_json_knum(j, "seconds", k->seconds);
        cli_json_key(j, "widths");
        cli_json_array(j);
        for (int i = 0; i < k->n; i++) {
            cli_json_object(j);
            cli_json_kint(j, "width", k->widths[i]);
            cli_json_knum(j, "step_ms", k->step_ms_at[i]);
            cli_json_object_end(j);
        }
        cli_json_array_end(j);
        cli_json_object_end(j);
    }
    cli_json_kint(j, "threads", o->threads ? o->threads : (cli_cores() > 1 ? cli_cores() - 1 : 1));
    cli_json_kint(j, "prefetch_depth", o->depth ? o->depth : 4);
    cli_json_kbool(j, "amp", t->amp);
    cli_json_kuint(j, "seed", o->seed);
    cli_json_kint(j, "pageable_slots", t->pageable_slots);
    cli_json_kstr(j, "device_note", t->device_note);
    cli_json_knum(j, "lr", o->lr);
    cli_json_knum(j, "step_flops_per_sample", t->step_flops);
    cli_json_key(j, "compute_alone");
    json_figures(j, t, &t->alone);
    cli_json_key(j, "modes");
    cli_json_array(j);
    for (int i = 0; i < n; i++)
        json_figures(j, t, &runs[i]);
    cli_json_array_end(j);
    cli_json_key(j, "epochs");
    cli_json_array(j);
    for (int i = 0; i < t->n_rows; i++) {
        const epoch_row *e = &t->rows[i];
        cli_json_object(j);
        cli_json_kstr(j, "loader", train_loader_names[e->loader]);
        cli_json_kint(j, "epoch", e->epoch);
        cli_json_knum(j, "loss", e->loss);
        cli_json_knum(j, "train_accuracy", e->train_accuracy);
        cli_json_knum(j, "val_loss", e->val_loss);
        cli_json_knum(j, "accuracy", e->accuracy);
        cli_json_knum(j, "images_per_s", e->images_per_s);
        cli_json_knum(j, "seconds", e->seconds);
        cli_json_object_end(j);
    }
    cli_json_array_end(j);
    /* The final weights: of the gpufeed run when there is one. */
    cli_json_key(j, "weights_checksum");
    json_checksum(j, runs[n - 1].checksum);
    cli_json_kint(j, "world", t->world);
    cli_json_kint(j, "start_epoch", t->start_epoch);
    /* --resume: the checkpoint's loader position in start_epoch (a rank's,
     * of the world that saved it); 0 at an epoch's start */
    cli_json_kuint(j, "start_position",
                   t->have_resume && t->rstate.epoch == (uint64_t)t->start_epoch
                       ? t->rstate.position
                       : 0);
    /* --stop-after: whether the run stopped at it, in which epoch (its
     * index: the epochs done) and where (a rank's position; 0: at the
     * epoch's start, the previous one done) */
    cli_json_kbool(j, "stopped", t->stopped);
    if (t->stopped) {
        cli_json_kint(j, "stopped_epoch", t->stop_epoch);
        cli_json_kuint(j, "stopped_position", t->stopped_mid ? t->lstate.position : 0);
    }
    cli_json_kstr(j, "nvml",
                  t->nvml ? "sampled" : t->cuda ? t->nvml_note : "not on the CPU path");
    if (t->dp) {
        const run_result *r = &runs[n - 1];
        cli_json_kstr(j, "allreduce", t->nccl ? "nccl" : "mpi");
        cli_json_kuint(j, "global_samples", r->global_samples);
        cli_json_knum(j, "allreduce_s", r->comm_s);
        cli_json_key(j, "rank_checksums");
        cli_json_array(j);
        for (int i = 0; i < t->world; i++)
            json_checksum(j, t->rank_checksums[i]);
        cli_json_array_end(j);
        cli_json_key(j, "rank_samples");
        cli_json_array(j);
        for (int i = 0; i < t->world; i++)
            cli_json_uint(j, t->rank_samples[i]);
        cli_json_array_end(j);
        cli_json_key(j, "rank_samples_hash");
        cli_json_array(j);
        for (int i = 0; i < t->world; i++)
            json_checksum(j, t->rank_hashes[i]);
        cli_json_array_end(j);
    }
    cli_json_object_end(j);
    cli_json_end(j);
}
