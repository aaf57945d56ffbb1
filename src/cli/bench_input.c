/*
 * gpufeed bench --input-only: the loader alone, images/s, and the
 * single-thread decode+transform rate on the same files (efficiency).
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

/* ---- input-only ------------------------------------------------------------ */

/* Up to ST_MAX_FILES samples spread evenly over the data set (the
 * library's index), with the page-cache probe on those. Returns CLI_OK or
 * an exit status, message printed. */
int sample_files(const bench_opts *o, sample_set *ss, double *page_cache)
{
    int status = sample_set_open(&o->s, ss);
    if (status != CLI_OK)
        return status;
    *page_cache = sample_set_page_cache(ss, o->s.data);
    return CLI_OK;
}

int run_input_only(const bench_opts *o, input_result *r)
{
    sample_set ss = {0};
    loop_result lr;
    int status;

    memset(r, 0, sizeof *r);
    if ((status = sample_files(o, &ss, &r->page_cache)) != CLI_OK)
        goto out;
    r->shards = ss.shards;
    if ((status = run_loader(o, NULL, &lr)) != CLI_OK)
        goto out;
    r->st = lr.st;
    r->src = lr.src; /* the caller's to free now */
    r->elapsed_s = lr.elapsed_s;
    r->images_per_s = r->elapsed_s > 0 ? (double)r->st.samples / r->elapsed_s : 0;
    r->stall_fraction = r->elapsed_s > 0 ? r->st.wait_s / r->elapsed_s : 0;
    if (r->stall_fraction > 1)
        r->stall_fraction = 1;

    /* After the loader is closed, so its threads do not compete. */
    if (single_thread_rate(&o->s, &ss, r) < 0) {
        cli_error(CMD, "out of memory");
        status = CLI_FAIL;
        goto out;
    }
    r->efficiency = r->st_images_per_s > 0 && r->st.threads > 0
                        ? r->images_per_s / ((double)r->st.threads * r->st_images_per_s)
                        : 0;
    r->peak_rss = cli_peak_rss_bytes();
out:
    sample_set_free(&ss);
    return status;
}

void print_input_human(const bench_opts *o, const input_result *r)
{
    const gf_stats *st = &r->st;
    const double mib = 1024.0 * 1024.0;
    char cache[64];
    if (r->page_cache < 0)
        snprintf(cache, sizeof cache, "%s", r->shards ? "not probed for tar shards" : "unknown");
    else
        snprintf(cache, sizeof cache, "%.0f%% resident before the run%s", r->page_cache * 100,
                 r->page_cache < 0.9 ? " (cold: run again)" : "");

    cli_put_heading(stdout, "gpufeed bench --input-only  ", o->s.data);
    printf("  %-18s %d x %dx%d, %s transform, %" PRIu64 " epoch(s)\n", "batches", st->batch_size,
           o->s.width, o->s.height, cli_transform_names[o->s.transform], o->s.epochs);
    printf("  %-18s %" PRIu64 " in %.3f s\n", "samples", st->samples, r->elapsed_s);
    printf("  %-18s %.1f\n", "images/s", r->images_per_s);
    printf("  %-18s %.1f images/s (decode+transform, %zu samples in memory)\n", "single thread",
           r->st_images_per_s, r->st_files);
    printf("  %-18s %.2f (%d thread%s)\n", "efficiency", r->efficiency, st->threads,
           st->threads == 1 ? "" : "s");
    printf("  %-18s %.2f (waiting in gf_next; ~1 when nothing consumes)\n", "stall fraction",
           r->stall_fraction);
    printf("  %-18s %s, queue depth %d\n", "reader", reader_name(st->reader), st->queue_depth);
    if (st->page_cache_reads || st->page_cache_misses)
        printf("  %-18s %" PRIu64 " read by the decode threads from the page cache, %" PRIu64
               " not cached (left to io_uring)\n",
               "page cache reads", st->page_cache_reads, st->page_cache_misses);
    printf("  %-18s %s (turbo %" PRIu64 ", stb %" PRIu64 ", spng %" PRIu64 ", webp %" PRIu64 ")\n",
           "decoder", decoder_used(st), st->decoded_turbo, st->decoded_stb, st->decoded_spng,
           st->decoded_webp);
    printf("  %-18s %" PRIu64 "\n", "errors", st->errors);
    printf("  %-18s %.1f MiB (%d slots)\n", "ring", (double)st->ring_bytes / mib,
           st->prefetch_depth);
    if (st->autotune)
        printf("  %-18s chose %d decode thread%s and depth %d (%" PRIu64 " changes)\n",
               "autotune", st->threads, st->threads == 1 ? "" : "s", st->prefetch_depth,
               st->autotune_changes);
    printf("  %-18s %.1f MiB\n", "peak RSS", (double)r->peak_rss / mib);
    printf("  %-18s %.1f MB read, %s\n", "page cache", (double)st->bytes_read / 1e6, cache);
    if (st->remote_requests > 0)
        printf("  %-18s %" PRIu64 " requests, %" PRIu64 " retries, %.1f MB fetched; the decoders "
               "waited for remote shards %.2f s (%.0f%% of the run)\n",
               "remote", st->remote_requests, st->remote_retries, (double)st->remote_bytes / 1e6,
               st->remote_wait_s, r->elapsed_s > 0 ? 100 * st->remote_wait_s / r->elapsed_s : 0.0);
    if (st->cache_hits || st->cache_misses)
        printf("  %-18s %" PRIu64 " shards read from it, %" PRIu64 " fetched\n", "cache",
               st->cache_hits, st->cache_misses);
    if (st->cache_warning[0]) { /* it names the cache directory: bytes the user chose */
        printf("  %-18s ", "cache warning");
        cli_put_quoted(stdout, st->cache_warning);
        putchar('\n');
    }
    print_sources_human(&r->src);
}

void print_input_json(const bench_opts *o, const input_result *r)
{
    const gf_stats *st = &r->st;
    cli_json j;
    cli_json_init(&j, stdout);
    cli_json_object(&j);
    cli_json_kstr(&j, "mode", "input-only");
    cli_json_kstr(&j, "data", o->s.data);
    json_stat(&j, st, STAT_samples);
    cli_json_knum(&j, "elapsed_s", r->elapsed_s);
    cli_json_knum(&j, "images_per_s", r->images_per_s);
    cli_json_knum(&j, "single_thread_images_per_s", r->st_images_per_s);
    cli_json_kuint(&j, "single_thread_files", r->st_files);
    cli_json_knum(&j, "efficiency", r->efficiency);
    json_stats(&j, st, STAT_threads, STAT_prefetch_depth);
    json_stat(&j, st, STAT_batch_size);
    json_stat(&j, st, STAT_queue_depth);
    json_stats(&j, st, STAT_autotune, STAT_autotune_changes);
    cli_json_kints(&j, "image_size", (const int[]){o->s.width, o->s.height}, 2);
    cli_json_kstr(&j, "transform", cli_transform_names[o->s.transform]);
    cli_json_kuint(&j, "epochs", o->s.epochs);
    cli_json_knum(&j, "stall_fraction", r->stall_fraction);
    json_stats(&j, st, STAT_wait_s, STAT_decode_busy_s);
    cli_json_kstr(&j, "reader", reader_name(st->reader)); /* by name, not the enum's value */
    json_stats(&j, st, STAT_page_cache_reads, STAT_page_cache_misses);
    cli_json_kstr(&j, "decoder", decoder_used(st));
    json_decoded(&j, st);
    json_stat(&j, st, STAT_errors);
    json_stat(&j, st, STAT_bytes_read);
    json_stat(&j, st, STAT_ring_bytes);
    cli_json_kuint(&j, "peak_rss_bytes", r->peak_rss);
    cli_json_knum(&j, "page_cache_resident", r->page_cache >= 0 ? r->page_cache : NAN);
    json_stats(&j, st, STAT_remote_requests, STAT_remote_wait_s);
    json_stats(&j, st, STAT_cache_hits, STAT_cache_warning);
    json_sources(&j, &r->src);
    cli_json_object_end(&j);
    cli_json_end(&j);
}

