/*
 * gpufeed bench --overlap: the loader alone, the compute alone on a cached
 * batch, both together, and the naive synchronous loop, on the same files.
 * Main thread.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_parts.h"
#include "compute.h"
#include "json.h"
#include "plot.h"
#include "quote.h"
#include "samples.h"
#include "sysinfo.h"

/* ---- overlap --------------------------------------------------------------- */


/* The compute alone, replayed n times on one cached batch: ms per step.
 * The model gets one untimed step first (its buffers are made on the
 * first). On CUDA the model's batch is a device buffer of the cached
 * batch's shape, zero-filled: the model's time does not depend on the
 * pixel values, and the API has no device-to-device copy to keep one. */
int run_compute_alone(consumer *c, int n, double *ms, double *robust_ms)
{
    double t0, t1;
    int status;
    marks mk = {0};
    const void *x = c->cache;
#if GF_CLI_HAVE_CUDA
    if (c->device == GF_DEVICE_CUDA && c->use_model) {
        if (!c->dev_x) {
            void *zero = calloc(c->cache_len ? c->cache_len : 1, 1);
            if (!zero) {
                cli_error(CMD, "out of memory");
                return CLI_FAIL;
            }
            if (cli_cuda_malloc(&c->dev_x, c->cache_len) < 0 ||
                cli_cuda_memcpy_h2d(c->dev_x, zero, c->cache_len) < 0) {
                free(zero);
                cli_error(CMD, "CUDA: %s", cli_cuda_error());
                return CLI_FAIL;
            }
            free(zero);
        }
        x = c->dev_x;
    }
#endif
    if (c->use_model &&
        (status = compute_step(c, x, c->labels, c->cache_count, c->cache_len)) != CLI_OK)
        return status;
    if ((status = mark(c, 0, &t0)) != CLI_OK)
        return status;
    for (int i = 0; i < n; i++) {
        if ((status = compute_step(c, x, c->labels, c->cache_count, c->cache_len)) != CLI_OK)
            goto out;
        /* The CPU's steps run here and now: each one's end is a mark. */
        if (robust_ms && c->device == GF_DEVICE_CPU &&
            ((i == 0 && marks_push(&mk, t0, 0) < 0) ||
             marks_push(&mk, cli_now(), (uint64_t)i + 1) < 0)) {
            cli_error(CMD, "out of memory");
            status = CLI_FAIL;
            goto out;
        }
    }
    if ((status = mark(c, 1, &t1)) != CLI_OK || (status = window_ms(c, 1, t0, t1, ms)) != CLI_OK)
        goto out;
    *ms /= n;
    if (robust_ms)
        *robust_ms = marks_median_ms(&mk, *ms);
out:
    marks_free(&mk);
    return status;
}

/* The loop the articles warn against, on this thread alone: per batch,
 * read each sample (gf_read_sample: one pread of its file or member),
 * decode + transform it (gf_decoder, the
 * loader's transform), copy the batch (CUDA: cudaMemcpy from pageable
 * memory; CPU: memcpy into a second buffer), compute, wait for it. The
 * files are the sample set's, in turn. The batch is the decoder's uint8
 * pixels; any dtype conversion is left out (in the loader it is part of
 * input_ms), so this baseline errs on the fast side. Batch 0 is an
 * untimed warm-up. */
static int run_sync(const bench_opts *o, consumer *c, const sample_set *ss, uint64_t max_batches,
                    overlap_result *r)
{
    size_t cell = (size_t)o->s.height * (size_t)o->s.width *
                  (size_t)(o->s.channels ? o->s.channels : 3);
    size_t bytes = cell * (size_t)o->s.batch_size;
    uint8_t *host = malloc(bytes), *dst = NULL;
    uint64_t *batch_ids = malloc((size_t)o->s.batch_size * sizeof *batch_ids);
    gf_decoder *dec = NULL;
    double t0 = 0;
    uint64_t k, next = 0;
    int status = CLI_OK;

    if (!host || !batch_ids || gf_decoder_open(&dec, &o->s) < 0) {
        cli_error(CMD, "out of memory");
        status = CLI_FAIL;
        goto out;
    }
#if GF_CLI_HAVE_CUDA
    if (c->device == GF_DEVICE_CUDA && cli_cuda_malloc((void **)&dst, bytes) < 0) {
        cli_error(CMD, "CUDA: %s", cli_cuda_error());
        status = CLI_FAIL;
        goto out;
    }
#endif
    if (c->device != GF_DEVICE_CUDA && (dst = malloc(bytes)) == NULL) {
        cli_error(CMD, "out of memory");
        status = CLI_FAIL;
        goto out;
    }
    if (max_batches > SYNC_MAX_BATCHES)
        max_batches = SYNC_MAX_BATCHES;
    for (k = 0; k <= max_batches; k++) {
        if (k == 1)
            t0 = cli_now();
        else if (k > SYNC_MIN_BATCHES && cli_now() - t0 >= SYNC_SECONDS)
            break;
        for (int i = 0; i < o->s.batch_size; i++, next++)
            batch_ids[i] = ss->ids[next % ss->n];
        cli_index_read_decode(ss->index, dec, batch_ids, o->s.batch_size, 0, host, cell,
                        &r->sync_errors);
#if GF_CLI_HAVE_CUDA
        if (c->device == GF_DEVICE_CUDA) {
            if (cli_cuda_memcpy_h2d(dst, host, bytes) < 0 ||
                (c->ms > 0 && cli_cuda_spin(c->ms, c->stream) < 0) ||
                cli_cuda_stream_sync(c->stream) < 0) {
                cli_error(CMD, "CUDA: %s", cli_cuda_error());
                status = CLI_FAIL;
                goto out;
            }
            continue;
        }
#endif
        memcpy(dst, host, bytes);
        cpu_compute(c->ms, dst, bytes);
    }
    r->sync_batches = (int)(k - 1);
    r->sync_step_ms = r->sync_batches > 0 ? (cli_now() - t0) * 1e3 / r->sync_batches : 0;
out:
#if GF_CLI_HAVE_CUDA
    if (c->device == GF_DEVICE_CUDA) {
        cli_cuda_free(dst);
        dst = NULL;
    }
#endif
    free(dst);
    free(host);
    free(batch_ids);
    gf_decoder_close(&dec);
    return status;
}

int run_overlap(const bench_opts *o, overlap_result *r)
{
    sample_set ss = {0};
    consumer c = {0};
    int status;

    memset(r, 0, sizeof *r);
    if ((status = sample_files(o, &ss, &r->page_cache)) != CLI_OK)
        goto out;
    r->shards = ss.shards;
    if (ss.n == 0) {
        cli_error(CMD, "%s: no files", o->s.data);
        status = CLI_USAGE;
        goto out;
    }
    /* 1. The loader alone (this also settles where batches are and keeps
     * one batch for 2). */
    if ((status = run_loader(o, &c, &r->input)) != CLI_OK)
        goto out;
    if (r->input.timed == 0) {
        cli_error(CMD, "too few full batches to time (%" PRIu64 " delivered): "
                       "a larger data set, --epochs or a smaller --batch-size",
                  r->input.batches);
        status = CLI_USAGE;
        goto out;
    }
    r->device = c.device;
    r->input_ms = r->input.batch_ms;
    /* 2. The compute alone. */
    c.ms = o->compute_ms;
    r->compute_replays = r->input.timed > COMPUTE_MIN_REPLAYS ? (int)r->input.timed
                                                                : COMPUTE_MIN_REPLAYS;
    if ((status = run_compute_alone(&c, r->compute_replays, &r->compute_ms, NULL)) != CLI_OK)
        goto out;
    /* 3. Both. */
    if ((status = run_loader(o, &c, &r->step)) != CLI_OK)
        goto out;
    r->step_ms = r->step.batch_ms;
    r->step_stall = r->step.elapsed_s > 0 ? r->step.st.wait_s / r->step.elapsed_s : 0;
    /* 4. The synchronous loop, as many batches as the step run timed. */
    if ((status = run_sync(o, &c, &ss, r->step.timed, r)) != CLI_OK)
        goto out;

    double m = r->input_ms > r->compute_ms ? r->input_ms : r->compute_ms;
    r->overlap_ratio = m > 0 ? r->step_ms / m : 0;
    r->saved = r->sync_step_ms > 0 ? 1 - r->step_ms / r->sync_step_ms : 0;
    r->peak_rss = cli_peak_rss_bytes();
out:
    consumer_free(&c);
    sample_set_free(&ss);
    return status;
}

/* The loader's copies in, at its batch size (stats.h2d_*); NAN without
 * any (the CPU path). */
static double h2d_batch_gbps(const gf_stats *st)
{
    return st->h2d_s > 0 ? (double)st->h2d_bytes / st->h2d_s / 1e9 : NAN;
}

void print_overlap_human(const bench_opts *o, const overlap_result *r)
{
    const gf_stats *st = &r->step.st;
    cli_put_heading(stdout, "gpufeed bench --overlap  ", o->s.data);
    printf("  %s, %s %s, batch %d x %dx%d, %s transform, %d thread%s, prefetch depth %d%s\n",
           where(r->device), cli_dtype_names[o->s.dtype],
           o->s.dtype == GF_DTYPE_UINT8 ? "nhwc" : cli_layout_names[o->s.layout], st->batch_size,
           o->s.width, o->s.height, cli_transform_names[o->s.transform], st->threads,
           st->threads == 1 ? "" : "s", st->prefetch_depth,
           r->device == GF_DEVICE_CUDA && o->s.copy_stream_per_slot ? ", a copy stream per slot"
                                                                     : "");
    printf("  %-17s %9s %8s\n", "", "ms/batch", "batches");
    printf("  %-17s %9.2f %8" PRIu64 "   the loader alone, steady state\n", "input",
           r->input_ms, r->input.timed);
    printf("  %-17s %9.2f %8d   --compute-ms %g on one cached batch\n", "compute",
           r->compute_ms, r->compute_replays, o->compute_ms);
    printf("  %-17s %9.2f %8" PRIu64 "   both, steady state (first %" PRIu64
           " not timed); stall %.2f\n",
           "step", r->step_ms, r->step.timed, r->step.skipped, r->step_stall);
    printf("  %-17s %9.2f %8d   one thread: read, decode, copy, compute\n", "synchronous",
           r->sync_step_ms, r->sync_batches);
    printf("  step %.1f ms = %.2f x max(input %.1f, compute %.1f); synchronous %.1f ms: "
           "prefetching saves %.0f%%\n",
           r->step_ms, r->overlap_ratio, r->input_ms, r->compute_ms, r->sync_step_ms,
           r->saved * 100);
    if (r->step.timed < 2 * (uint64_t)st->prefetch_depth)
        printf("  note: only %" PRIu64 " batches timed with %d slots: the ring may have held "
               "much of the run (more --epochs for a steady state)\n",
               r->step.timed, st->prefetch_depth);
    if (r->sync_errors || st->errors)
        printf("  errors: %" PRIu64 " bad samples in the loader, %" PRIu64
               " in the synchronous loop\n",
               st->errors, r->sync_errors);
    if (r->device == GF_DEVICE_CUDA && st->h2d_copies)
        printf("  h2d: the loader's own copies, %.2f MB each: %.2f GB/s on the copy stream "
               "(%" PRIu64 " timed by events)\n",
               st->h2d_bytes / (double)st->h2d_copies / 1e6, h2d_batch_gbps(st),
               st->h2d_copies);
    if (r->device == GF_DEVICE_CUDA && st->pageable_slots) {
        printf("  note: %d of %d host slots are pageable, not pinned (", st->pageable_slots,
               st->prefetch_depth);
        cli_put_quoted(stdout, st->device_note); /* the driver's words */
        printf("): their copies are staged by the driver and slower\n");
    }
    print_sources_human(&r->step.src);
}

void print_overlap_json(const bench_opts *o, const overlap_result *r)
{
    const gf_stats *st = &r->step.st;
    cli_json j;
    cli_json_init(&j, stdout);
    cli_json_object(&j);
    cli_json_kstr(&j, "mode", "overlap");
    cli_json_kstr(&j, "data", o->s.data);
    cli_json_kstr(&j, "device", where(r->device));
    cli_json_kstr(&j, "dtype", cli_dtype_names[o->s.dtype]);
    cli_json_kstr(&j, "layout", o->s.dtype == GF_DTYPE_UINT8 ? "nhwc" : cli_layout_names[o->s.layout]);
    cli_json_knum(&j, "step_ms", r->step_ms);
    cli_json_knum(&j, "input_ms", r->input_ms);
    cli_json_knum(&j, "compute_ms", r->compute_ms);
    cli_json_knum(&j, "sync_step_ms", r->sync_step_ms);
    cli_json_knum(&j, "overlap_ratio", r->overlap_ratio);
    cli_json_knum(&j, "prefetch_saving", r->saved);
    cli_json_knum(&j, "compute_ms_setting", o->compute_ms);
    json_stats(&j, st, STAT_threads, STAT_prefetch_depth);
    json_stat(&j, st, STAT_batch_size);
    cli_json_kints(&j, "image_size", (const int[]){o->s.width, o->s.height}, 2);
    cli_json_kstr(&j, "transform", cli_transform_names[o->s.transform]);
    cli_json_kuint(&j, "batches", r->step.batches);
    cli_json_kuint(&j, "timed_batches", r->step.timed);
    cli_json_kuint(&j, "skipped_batches", r->step.skipped);
    cli_json_kuint(&j, "input_timed_batches", r->input.timed);
    cli_json_kint(&j, "compute_replays", r->compute_replays);
    cli_json_kint(&j, "sync_batches", r->sync_batches);
    cli_json_knum(&j, "step_stall_fraction", r->step_stall);
    json_stat(&j, st, STAT_errors);
    cli_json_kuint(&j, "sync_errors", r->sync_errors);
    json_stats(&j, st, STAT_pinned_bytes, STAT_pageable_slots);
    json_stat(&j, st, STAT_device_note);
    cli_json_knum(&j, "h2d_batch_gbps", h2d_batch_gbps(st));
    cli_json_kuint(&j, "h2d_batch_bytes", st->h2d_copies ? st->h2d_bytes / st->h2d_copies : 0);
    cli_json_kstr(&j, "copy_streams", cli_copy_stream_names[o->s.copy_stream_per_slot]);
    cli_json_kstr(&j, "reader", reader_name(st->reader));
    cli_json_kstr(&j, "decoder", decoder_used(st));
    cli_json_kuint(&j, "peak_rss_bytes", r->peak_rss);
    cli_json_knum(&j, "page_cache_resident", r->page_cache >= 0 ? r->page_cache : NAN);
    json_sources(&j, &r->step.src);
    cli_json_object_end(&j);
    cli_json_end(&j);
}

