/*
 * The loader's lifecycle and public API: gf_open and gf_close, starting
 * and stopping the pipeline (gf_open, gf_seek, gf_close), the order,
 * the stats and state; the consumer's calls (gf_next*, gf_release*) are
 * loader_next.c's. Runs on the caller's threads, on top of the stages: pool.c
 * (decode threads) running work.c's jobs, controller.c (the controller
 * and its loop) over assemble.c, dispatch.c, the cell reader
 * (cell_reader.h), cursor.c and autotune.c,
 * ring.c (slot memory) and settings.c; the failure message in failure.c,
 * the sample accessors in samples.c. loader_impl.h says who owns what.
 */
#include "loader_impl.h"

#include "assemble.h"
#include "cell_reader.h"
#include "config.h"
#include "controller.h"
#include "decode.h"
#include "settings.h"
#include "work.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Joins every thread and drops in-flight work; slots become FREE, but
 * those of held batches, which stay valid until released. */
static void stop_pipeline(gf_loader *l)
{
    if (!l->running)
        return;
    pthread_mutex_lock(&l->mu);
    l->stopping = true;
    atomic_store_explicit(&l->cancel, 1, memory_order_relaxed);
    gf__pool_stop_locked(&l->pool);
    pthread_cond_broadcast(&l->ready_cv);
    pthread_mutex_unlock(&l->mu);
    gf__budget_wake(&l->budget); /* reads waiting for it give up */
    gf__pool_join(&l->pool);
    gf__controller_stop(l);
    /* After the join: nothing queues a copy any more, and the callbacks of
     * those queued see `stopping` and leave the closed loop alone. Every
     * callback runs, errors included; wait for each, not only the stream. */
    gf__device_sync(l->dev);
    pthread_mutex_lock(&l->mu);
    while (l->copies_in_flight > 0)
        pthread_cond_wait(&l->ready_cv, &l->mu);
    pthread_mutex_unlock(&l->mu);
    l->rd->stop(l->rd_self); /* waits for reads still in flight */
    gf__pool_reset(&l->pool);
    pthread_mutex_lock(&l->mu);
    for (int i = 0; i < l->n_slots; i++) {
        gf__clear_errors(&l->slots[i]);
        gf__slot_reset(&l->slots[i], !l->dev);
    }
    pthread_mutex_unlock(&l->mu);
    l->running = false;
}

/* Observers may run alongside (gf_seek): what they read is written
 * under mu. */
static int start_pipeline(gf_loader *l, uint64_t epoch, uint64_t pos)
{
    gf__cursor_start(&l->cur, &l->sampler, l->order.idx ? &l->order : NULL,
                     l->sampler.shards ? &l->shard_epoch : NULL, l->blend.src ? &l->blend : NULL,
                     epoch, pos);
    pthread_mutex_lock(&l->mu);
    l->next_epoch = l->cur.epoch;
    l->next_pos = l->cur.pos;
    l->epoch_len = l->cur.len;
    pthread_mutex_unlock(&l->mu);
    l->live_any = l->cur.pos > 0;
    l->live_epoch = l->cur.epoch;
    l->head = l->tail = l->fin = l->xfer = 0; /* held batches keep theirs */
    l->grow_refused = false;
    l->ctl_remote_waiting = false;
    l->exhausted = l->stopping = l->halted = false;
    l->ctl_may_sleep = true;
    l->unwritten = l->eof_unwritten = 0;
    atomic_store_explicit(&l->cancel, 0, memory_order_relaxed);
    l->fail_code = l->halt_code = 0;
    gf__pool_reset(&l->pool);
    l->n_free_bufs = l->n_bufs;
    for (int i = 0; i < l->n_bufs; i++)
        l->free_bufs[i] = &l->bufs[i];
    /* The local reader picks io_uring or POSIX here (io = AUTO). */
    int rc = l->rd->restart(l->rd_self);
    if (rc < 0)
        return rc;
    l->ctl_page_cache_hits = l->ctl_page_cache_misses = 0;
    /* io = AUTO on io_uring: the decode threads read from the page cache
     * first, into their own buffers (read_local.c). */
    bool page_cache_first = (!l->ds.remote || l->ds.n_sources) && l->io == GF_IO_URING &&
                            l->s.io == GF_IO_AUTO;
    /* A mix of remote and local sources: the decode threads read the
     * local samples into buffers of their own beside the reader's. */
    bool workers_read = page_cache_first || (l->ds.remote && l->ds.n_sources);
    /* Reads a stop dropped leave their buffers behind: start from none,
     * sized for the buffers this reader uses. */
    for (int i = 0; i < l->n_bufs; i++)
        gf__buf_free(&l->bufs[i]);
    for (int i = 0; i < l->n_workers; i++) {
        gf__buf_free(&l->workers[i].buf);
        gf__fd_cache_drop(&l->workers[i].fds); /* a shard replaced since is seen as such */
    }
    gf__budget_restart(&l->budget,
                       (unsigned)(l->rd->uses_buffers(l->rd_self)
                                      ? l->n_bufs + (workers_read ? l->n_workers : 0)
                                      : l->n_workers));

    l->running = true;
    /* pthread_create returns its error; it does not set errno. */
    rc = gf__pool_start(&l->pool);
    if (rc == 0 && (rc = gf__controller_start(l)) != 0) {
        pthread_mutex_lock(&l->mu);
        gf__pool_stop_locked(&l->pool);
        pthread_mutex_unlock(&l->mu);
        gf__pool_join(&l->pool);
    }
    if (rc == 0)
        return 0;
    /* Unwind what did start. */
    l->rd->stop(l->rd_self);
    l->running = false;
    return rc < 0 ? rc
                  : gf__fail_locking(l, GF_ETHREAD, "could not start a loader thread: %s",
                                     strerror(rc));
}

/* CUDA when asked for and present; AUTO falls back to the CPU path and
 * says why in stats. */
/* data as a mix: its order over the joined table (blend_order.c), each
 * source in its own. Under order SHARDS its shard sources read in shard
 * windows, its folders and lists in their global order (their only one). */
static int open_mix(gf_loader *l)
{
    const gf__dataset *ds = &l->ds;
    uint64_t sizes[GF__MIX_SOURCES_MAX], firsts[GF__MIX_SOURCES_MAX];
    double weights[GF__MIX_SOURCES_MAX];
    bool any_shards = false;
    for (int k = 0; k < ds->n_sources; k++) {
        if (ds->sources[k].n == 0) /* its damage is reported: nothing to draw */
            return gf__fail(l, GF_EDATASET, "mix: source %d (%s): no samples left: every shard "
                            "is damaged", k + 1, ds->sources[k].data);
        sizes[k] = ds->sources[k].n;
        firsts[k] = ds->sources[k].first;
        weights[k] = ds->sources[k].weight;
        any_shards |= !ds->sources[k].files;
    }
    bool shards = l->s.order == GF_ORDER_SHARDS;
    if (shards && !any_shards)
        return gf__fail(l, GF_EINVAL,
                        "order shards needs tar shards: no source of the mix %s is tar shards "
                        "(order global reads it)", l->data_path);
    char why[256] = "";
    bool first = l->s.mix_epoch == GF_MIX_EPOCH_FIRST;
    int rc = gf__blend_order_init(&l->blend, ds->n_sources, sizes, firsts, weights,
                                  shards ? ds->shard : NULL, (uint32_t)l->s.shard_window,
                                  l->s.seed, l->s.shuffle, first, &l->sampler, why, sizeof why);
    if (rc == 0 && ds->remote) /* a second walk, for the remote reader's scan ahead */
        rc = gf__blend_order_init(&l->blend_scan, ds->n_sources, sizes, firsts, weights,
                                  shards ? ds->shard : NULL, (uint32_t)l->s.shard_window,
                                  l->s.seed, l->s.shuffle, first, &l->sampler, why, sizeof why);
    if (rc < 0)
        return gf__fail(l, rc, "%s: %s", l->data_path, rc == GF_ENOMEM ? "out of memory" : why);
    /* The ranks split each epoch's sequence as a lone data set's: in spans
     * under the shard order. */
    uint64_t size = gf__blend_order_size(&l->blend, 0);
    rc = gf__sampler_init(&l->sampler, size, l->s.seed, l->s.shuffle, (uint32_t)l->s.rank,
                          (uint32_t)l->s.world, l->s.drop_last);
    if (rc < 0)
        return gf__fail(l, rc, "%s: the mix's %llu samples an epoch cannot be split into %d "
                        "shares", l->data_path, (unsigned long long)size, l->s.world);
    l->sampler.spans = shards;
    l->src_samples = calloc((size_t)ds->n_sources, sizeof *l->src_samples);
    l->src_wait_s = calloc((size_t)ds->n_sources, sizeof *l->src_wait_s);
    if (!l->src_samples || !l->src_wait_s)
        return gf__fail(l, GF_ENOMEM, "out of memory");
    return 0;
}

static int open_device(gf_loader *l)
{
    l->device = GF_DEVICE_CPU;
    if (l->s.device == GF_DEVICE_CPU)
        return 0;
    if (l->aug.erase && !l->tf.erase_in_cell) { /* no device kernel erases yet */
        static const char not_yet[] = "augment's erase on a float batch runs on the CPU only, "
                                      "for now (device cpu, or dtype uint8)";
        if (l->s.device == GF_DEVICE_CUDA)
            return gf__fail(l, GF_EINVAL, "%s", not_yet);
        snprintf(l->device_note, sizeof l->device_note, "CPU path: %s", not_yet);
        return 0;
    }
    size_t B = (size_t)l->B;
    size_t in = l->convert ? B * l->cell_bytes : 0;
    size_t out = l->cell_bytes ? B * gf__convert_sample_bytes(&l->cv) : 0; /* 0: no image */
    size_t flips = l->s.flip_on_device ? B : 0;
    size_t targets = l->aug.mix ? B * (size_t)l->aug.mix_classes * sizeof(float) : 0;
    char why[256] = "";
    int rc = gf__device_open(&l->dev, &l->s, l->device_id_from_env, l->D, l->max_slots, in, out,
                             flips, gf__fields_tensor_bytes(l), targets, why, sizeof why);
    if (rc == 0) {
        l->device = GF_DEVICE_CUDA;
        return 0;
    }
    if (rc == GF_ENODEV && l->s.device == GF_DEVICE_AUTO) {
        snprintf(l->device_note, sizeof l->device_note, "CPU path: %s", why);
        return 0;
    }
    return gf__fail(l, rc, "%s", why);
}

/* settings.augment's mix: the targets' width, classes= or the data set's
 * own class list (an ImageFolder's, or classes.txt beside shards). Not a
 * list's max label + 1: a class no sample has would narrow the targets
 * silently. Every label must fit. */
static int mix_classes(gf_loader *l)
{
    if (!l->aug.mix_classes) {
        if (!l->ds.class_names)
            return gf__fail(l, GF_EINVAL,
                            "augment: mix: classes= is missing (the soft targets' width): %s "
                            "has no class list to take it from",
                            l->data_path ? l->data_path : "the data");
        l->aug.mix_classes = l->ds.n_classes;
    }
    if (l->ds.n_classes > l->aug.mix_classes)
        return gf__fail(l, GF_EINVAL, "augment: mix: classes=%d, but the data has label %d",
                        l->aug.mix_classes, l->ds.n_classes - 1);
    return 0;
}

/* The controller's queues and buffers, and the decode pool. */
static int alloc_queues(gf_loader *l)
{
    uint32_t cap = gf__pool_capacity(l->D, l->B);
    l->js_cap = (int)cap;
    l->n_bufs = l->s.queue_depth + 2 * l->threads;
    l->bufs = calloc((size_t)l->n_bufs, sizeof *l->bufs);
    l->free_bufs = calloc((size_t)l->n_bufs, sizeof *l->free_bufs);
    l->js = calloc(cap, sizeof *l->js);
    l->outs = calloc(cap, sizeof *l->outs);
    if (!l->bufs || !l->free_bufs || !l->js || !l->outs)
        return gf__fail(l, GF_ENOMEM, "out of memory allocating queues");
    /* Fewer buffers than the window's shards would fetch a shard again
     * for nearly every batch. */
    if (l->s.cache_dir && (!*l->s.cache_dir || !l->ds.remote || !gf__remote_whole_shards(&l->s)))
        return gf__fail(l, GF_EINVAL, "cache_dir: %s",
                        !*l->s.cache_dir ? "an empty path"
                        : !l->ds.remote  ? "only remote shards are cached (this data is local)"
                                         : "the cache holds whole shards: it needs order shards, "
                                           "not global (a ranged GET a sample)");
    if (l->ds.remote && gf__remote_whole_shards(&l->s) && l->s.prefetch_shards < l->s.shard_window)
        return gf__fail(l, GF_EINVAL,
                        "prefetch_shards %d is below shard_window %d: the window's shards are "
                        "read together, so they must fit (2 x shard_window fetches the next window too)",
                        l->s.prefetch_shards, l->s.shard_window);
    /* The shard order reads remote shards whole; the global order, a
     * ranged GET a sample. Without `remote` no URL opens. */
    bool local_too = false; /* a mix of remote and local sources */
    for (int k = 0; l->ds.remote && k < l->ds.n_sources; k++)
        local_too |= !l->ds.sources[k].remote;
    const gf__cell_reader_ops *rd = !l->ds.remote ? &gf__local_reader
                                    : local_too
                                        ? (gf__remote_whole_shards(&l->s) ? &gf__mixed_shard_reader
                                                                          : &gf__mixed_ranged_reader)
                                    : gf__remote_whole_shards(&l->s) ? gf__shard_reader
                                                                     : gf__ranged_reader;
    if (!rd)
        return gf__fail(l, GF_EINVAL, "remote data: this build has the `remote` feature off");
    int rc = rd->create(l, &l->rd_self);
    if (rc < 0)
        return rc;
    l->rd = rd;
    rc = gf__work_init(l);
    if (rc < 0)
        return rc;
    const gf__pool_user user = {.arg = l,
                                .run = gf__work_run,
                                .run_batch = gf__work_run_batch,
                                .settle = gf__work_settle,
                                .completed = gf__controller_job_done,
                                /* no image: a job is a read of microseconds */
                                .grab = l->ds.schema.image < 0 ? GF__POOL_GRAB_MAX : 1};
    if (gf__pool_alloc(&l->pool, cap, l->threads, l->active_threads, user) < 0)
        return gf__fail(l, GF_ENOMEM, "out of memory allocating queues");
    return 0;
}

/* Each damaged shard the index took in part: one on_sample_error call
 * (on gf_open's thread: no loader thread runs yet) and one recent entry. */
static void report_damaged_shards(gf_loader *l)
{
    for (size_t i = 0; i < l->ds.n_damage; i++) {
        gf_sample_error e;
        gf__dataset_damage_entry(&l->ds, i, &e);
        const char *path = l->ds.shard_paths[l->ds.damage[i].shard]; /* whole */
        if (l->s.on_sample_error)
            l->s.on_sample_error(l->s.on_sample_error_user, e.sample, path, e.code, e.reason);
        pthread_mutex_lock(&l->mu);
        gf__recent_add(l, e.sample, e.code, path, e.reason);
        pthread_mutex_unlock(&l->mu);
    }
}

/* Each shard key skipped for a .cls that is no label (the first few): a
 * warning, as on_sample_warning and gf_recent_warnings give them (sample
 * -1: the key is no sample), on gf_open's thread. */
static void report_label_skips(gf_loader *l)
{
    for (int i = 0; i < l->ds.n_label_skips; i++) {
        const gf_sample_error *e = &l->ds.label_skips[i];
        if (l->s.on_sample_warning)
            l->s.on_sample_warning(l->s.on_sample_warning_user, e->sample, e->path, e->code,
                                   e->reason);
        pthread_mutex_lock(&l->mu);
        l->warnings[l->warnings_at] = *e;
        l->warnings_at = (l->warnings_at + 1) % GF_RECENT_WARNINGS;
        if (l->n_warnings < GF_RECENT_WARNINGS)
            l->n_warnings++;
        pthread_mutex_unlock(&l->mu);
    }
}

/* The samples gf_open_samples was given, or none: gf_open indexes s->data. */
typedef struct sample_arrays {
    const char *const *paths;
    const int32_t *labels;
    uint64_t n;
} sample_arrays;

/* gf_open and gf_open_samples: one contract, but for where the index
 * comes from. */
static int open_loader(gf_loader **out, const gf_settings *s, const sample_arrays *given,
                       bool joined)
{
    if (!out)
        return GF_EINVAL;
    *out = NULL;
    gf_loader *l = calloc(1, sizeof *l);
    if (!l)
        return GF_ENOMEM;
    *out = l;
    l->t_open = gf__now();
    l->ds.root_fd = -1;
    pthread_mutex_init(&l->mu, NULL);
    gf__pool_init(&l->pool, &l->mu);
    /* gf_next_timed's deadlines: monotonic, so a clock step cannot stretch one. */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->ready_cv, &ca);
    pthread_condattr_destroy(&ca);
    gf__budget_init(&l->budget, 0, 1, &l->cancel);
    if (!s)
        return gf__fail(l, GF_EINVAL, "invalid settings: s != NULL");
    int rc = gf__check_settings(s, (given ? 0 : GF__CHECK_DATA) | GF__CHECK_READER, l->msg,
                                sizeof l->msg);
    if (rc < 0)
        return rc;

    l->s = *s;
    gf__resolve_settings(&l->s);
    /* The name messages give the data set: samples may have no root. */
    l->data_path = strdup(s->data && *s->data ? s->data : given ? "samples" : "");
    if (!l->data_path)
        return GF_ENOMEM;
    l->s.data = s->data && *s->data ? l->data_path : NULL;
    l->B = s->batch_size;
    l->D = l->s.prefetch_depth;
    l->max_slots = l->D + l->s.max_held_batches - 1;
    l->threads = l->s.threads;
    if (s->autotune) {
        l->active_threads = GF__MIN(l->s.threads, l->s.max_threads);
        l->threads = GF__MAX(l->s.max_threads, l->active_threads);
        l->active_depth = GF__MIN(2, l->D);
    } else {
        l->active_threads = l->threads;
        l->active_depth = l->D;
    }
    l->budget.limit = (size_t)l->s.read_budget_bytes;
    l->io = s->io;
    l->cell_bytes = (size_t)s->height * (size_t)s->width * (size_t)s->channels;
    gf__transform_from_settings(&l->tf, &l->s);
    gf__convert_init(&l->cv, &l->s);
    l->convert = s->dtype != GF_DTYPE_UINT8 || s->flip_on_device;
    if ((rc = gf__augment_parse(s->augment, s->width, s->height, s->channels, &l->aug, l->msg,
                                sizeof l->msg)) < 0)
        return rc;
    if (l->aug.n_stages || l->aug.erase) {
        l->tf.augment = &l->aug;
        l->tf.erase_in_cell = l->aug.erase && s->dtype == GF_DTYPE_UINT8;
        l->tf.defer_flip = 0; /* the stages see the flipped image, as torchvision's do */
    }

    if ((rc = gf__resolve_launcher(&l->s, &l->device_id_from_env, l->msg, sizeof l->msg)) < 0)
        return rc;
    char why[sizeof l->msg] = "";
    gf__dataset_opts dopts;
    gf__dataset_default_opts(&dopts);
    gf__schema schema;
    if ((rc = gf__schema_of_settings(s, &schema, &dopts.schema, l->msg, sizeof l->msg)) < 0)
        return rc;
    if (given && dopts.schema)
        return gf__fail(l, GF_EINVAL, "fields name the members of tar shards' samples; "
                                      "gf_open_samples' are image files (leave fields unset)");
    if (dopts.schema && dopts.schema->image < 0) { /* no image: nothing to decode or convert */
        l->cell_bytes = 0;
        l->convert = false;
    }
    dopts.extensions = s->extensions;
    dopts.folder_walk = s->folder_walk;
    dopts.shard_skip = gf__shard_skip_of(s) ? 2 : 0;
    dopts.bad_label_fails = s->on_error == GF_ON_ERROR_FAIL;
    dopts.ca_file = s->ca_file;
    dopts.remote_settings = s;
    dopts.mix_labels = s->mix_labels;
    if (given)
        rc = gf__dataset_open_samples(&l->ds, l->s.data, given->paths, given->labels, given->n,
                                      why, sizeof why);
    else
        rc = gf__dataset_open_with(&l->ds, l->data_path, &dopts, why, sizeof why);
    if (rc < 0)
        return gf__fail(l, rc, "%s", why);
    report_damaged_shards(l);
    report_label_skips(l);
    if (l->ds.n == 0) /* every shard damaged: reported, then refused */
        return gf__fail(l, GF_EDATASET, "%s", why);
    rc = gf__sampler_init(&l->sampler, l->ds.n, s->seed, s->shuffle, (uint32_t)l->s.rank,
                          (uint32_t)l->s.world, s->drop_last);
    if (rc < 0)
        return gf__fail(l, rc, "%s: %llu samples cannot be split into %d shares", l->data_path,
                        (unsigned long long)l->ds.n, l->s.world);
    if (l->ds.n_sources && joined) {
        /* The joined table is no one source's shards: in index order (a
         * remote member by a ranged GET). */
        l->s.order = GF_ORDER_GLOBAL;
    } else if (l->ds.n_sources) {
        if ((rc = open_mix(l)) < 0)
            return rc;
    } else if (l->s.order == GF_ORDER_SHARDS) {
        if (!l->ds.shard)
            return gf__fail(l, GF_EINVAL,
                            "order shards needs tar shards: %s is %s (order global reads it)",
                            l->data_path,
                            given             ? "samples given to gf_open_samples"
                            : l->ds.class_names ? "an ImageFolder"
                                                : "a list file");
        rc = gf__shards_init(&l->shards, l->ds.shard, l->ds.n, (uint32_t)l->s.shard_window);
        if (rc == 0)
            rc = gf__shard_epoch_alloc(&l->shard_epoch, &l->shards);
        if (rc < 0)
            return gf__fail(l, rc, "%s: the shard order's tables (%u shards): %s", l->data_path,
                            l->ds.n_shards, rc == GF_ENOMEM ? "out of memory"
                                                            : "a shard's samples are not contiguous");
        l->sampler.shards = &l->shards;
    }
    uint64_t share = l->blend.src ? gf__blend_order_len(&l->blend, 0) : l->sampler.len;
    if (s->drop_last && share < (uint64_t)l->B)
        return gf__fail(l, GF_EINVAL,
                        "%s: drop_last drops every batch: this rank's share is %llu samples, "
                        "under one batch of %d",
                        l->data_path, (unsigned long long)share, l->B);

    if ((rc = gf__fields_plan(l)) < 0)
        return rc;
    if (l->aug.mix && (rc = mix_classes(l)) < 0)
        return rc;
    if ((rc = open_device(l)) < 0)
        return rc;
    if ((rc = gf__ring_alloc(l)) < 0)
        return rc == GF_ENOMEM && !l->msg[0] ? gf__fail(l, rc, "out of memory allocating the ring")
                                             : rc;
    if ((rc = alloc_queues(l)) < 0)
        return rc;
    gf__range_init();
    return start_pipeline(l, 0, 0);
}

int gf_open(gf_loader **out, const gf_settings *s)
{
    return open_loader(out, s, NULL, false);
}

int gf__open_joined(gf_loader **out, const gf_settings *s)
{
    return open_loader(out, s, NULL, true);
}

int gf_open_samples(gf_loader **out, const gf_settings *s, const char *const *paths,
                    const int32_t *labels, uint64_t n)
{
    const sample_arrays given = {.paths = paths, .labels = labels, .n = n};
    return open_loader(out, s, &given, false);
}

/* The sampler as it splits epoch: a mix's sequence has its own length
 * each epoch under mix_epoch FIRST (blend_order.c); else s itself. */
static gf__sampler sampler_of(const gf_loader *l, const gf__sampler *s, uint64_t epoch)
{
    return l->blend.src ? gf__blend_order_ranks(&l->blend, s, epoch) : *s;
}

/* gf_seek's and gf_set_order's one path: refused while a batch is held,
 * (epoch, position) checked against the order that will be in force
 * (next, when given: it replaces the current one, which is freed; else
 * the current), prefetched batches discarded, and delivery restarted
 * there. */
static int restart_at(gf_loader *l, const char *who, gf__order *next, uint64_t epoch,
                      uint64_t position, const gf__rest *rest)
{
    const gf__order *o = next ? next : l->order.idx ? &l->order : NULL;
    gf__sampler after = l->sampler;
    if (rest)
        after.rest = *rest;
    else if (after.rest.on && epoch != after.rest.epoch)
        after.rest = (gf__rest){0}; /* a seek out of the split epoch: the world's own epochs */
    gf__sampler split = sampler_of(l, &after, epoch);
    uint64_t len = o ? o->n : gf__sampler_len(&split, epoch);
    /* Under mu: the controller may be writing the message too. */
    int rc = 0;
    pthread_mutex_lock(&l->mu);
    if (position > len)
        rc = gf__fail(l, GF_EINVAL, "%s: position %llu is past the epoch's %llu samples", who,
                  (unsigned long long)position, (unsigned long long)len);
    else if (o && epoch != o->epoch && !(epoch == o->epoch + 1 && position == 0))
        rc = gf__fail(l, GF_EINVAL,
                  "%s: epoch %llu is not the epoch of the order in force (%llu): "
                  "gf_set_order gives another epoch's order", who,
                  (unsigned long long)epoch, (unsigned long long)o->epoch);
    pthread_mutex_unlock(&l->mu);
    if (rc < 0)
        return rc;
    /* A short order under drop_last has no batch: it is spent at once, as
     * torch's DataLoader yields nothing (not "an epoch delivered none"). */
    if (o && l->s.drop_last && len < (uint64_t)l->B && epoch == o->epoch)
        position = len;
    if (o && epoch == o->epoch + 1) { /* the order's end, as gf_get_state says it */
        epoch = o->epoch;
        position = len;
    }
    stop_pipeline(l);
    int64_t *old = NULL;
    pthread_mutex_lock(&l->mu);
    l->msg[0] = '\0';
    if (next) {
        old = l->order.idx;
        l->order = *next;
    }
    l->sampler.rest = after.rest; /* no loader thread runs */
    pthread_mutex_unlock(&l->mu);
    free(old);
    return start_pipeline(l, epoch, position);
}

int gf_seek(gf_loader *l, uint64_t epoch, uint64_t position)
{
    if (!l)
        return GF_EINVAL;
    if (!l->slots)
        return GF_EINVAL;
    return restart_at(l, "gf_seek", NULL, epoch, position, NULL);
}

int gf_set_order(gf_loader *l, uint64_t seed, uint64_t epoch, const int64_t *order, uint64_t n)
{
    if (!l || !l->slots)
        return GF_EINVAL;
    if (!order && n > 0)
        return gf__fail_locking(l, GF_EINVAL, "gf_set_order: order is NULL with n = %llu",
                                (unsigned long long)n);
    if (n > SIZE_MAX / sizeof *order)
        return gf__fail_locking(l, GF_EINVAL, "gf_set_order: n = %llu is too many positions",
                                (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++)
        if (order[i] < 0 || (uint64_t)order[i] >= l->ds.n)
            return gf__fail_locking(l, GF_EINVAL,
                                    "gf_set_order: order[%llu] = %lld is not a sample index: "
                                    "the data set has %llu samples",
                                    (unsigned long long)i, (long long)order[i],
                                    (unsigned long long)l->ds.n);
    gf__order next = {.idx = malloc(n ? (size_t)n * sizeof *order : 1),
                      .n = n,
                      .epoch = epoch,
                      .seed = seed};
    if (!next.idx)
        return gf__fail_locking(l, GF_ENOMEM, "gf_set_order: out of memory copying %llu positions",
                                (unsigned long long)n);
    if (n)
        memcpy(next.idx, order, (size_t)n * sizeof *order);
    int rc = restart_at(l, "gf_set_order", &next, epoch, 0, NULL);
    if (rc < 0 && l->order.idx != next.idx)
        free(next.idx); /* refused before it was installed */
    return rc;
}

int gf_damaged_shards(gf_loader *l, gf_sample_error *out, int max)
{
    if (!l || (!out && max > 0) || max < 0)
        return GF_EINVAL;
    return gf__dataset_damage(&l->ds, out, max); /* read-only after gf_open */
}

int gf_recent_warnings(gf_loader *l, gf_sample_error *out, int max)
{
    if (!l || (!out && max > 0) || max < 0)
        return GF_EINVAL;
    pthread_mutex_lock(&l->mu);
    int n = l->n_warnings < max ? l->n_warnings : max;
    for (int i = 0; i < n; i++)
        out[i] = l->warnings[(l->warnings_at - 1 - i + 2 * GF_RECENT_WARNINGS) % GF_RECENT_WARNINGS];
    pthread_mutex_unlock(&l->mu);
    return n;
}

int gf_get_stats(gf_loader *l, gf_stats *st)
{
    if (!l || !st)
        return GF_EINVAL;
    memset(st, 0, sizeof *st);
    pthread_mutex_lock(&l->mu);
    st->samples = l->samples;
    st->batches = l->batches;
    st->epoch = l->next_epoch;
    st->position = l->next_pos;
    st->elapsed_s = gf__now() - l->t_open;
    st->wait_s = l->wait_s;
    st->read_busy_s = l->uring_submit_s;
    st->bytes_read = l->uring_bytes;
    st->page_cache_reads = l->page_cache_reads;
    st->page_cache_misses = l->page_cache_misses;
    st->buffer_bytes = l->buf_bytes;
    for (int i = 0; i < l->n_workers; i++) {
        gf__worker *w = &l->workers[i];
        st->read_busy_s += w->read_s;
        st->decode_busy_s += w->decode_s;
        st->convert_busy_s += w->convert_s;
        st->bytes_read += w->bytes;
        st->buffer_bytes += w->scratch;
    }
    st->errors = l->errors;
    memcpy(st->errors_by_kind, l->errors_by_kind, sizeof l->errors_by_kind);
    for (int i = 0; i < l->n_recent; i++)
        st->recent[i] = l->recent[(l->recent_at - 1 - i + 2 * GF_RECENT_ERRORS) % GF_RECENT_ERRORS];
    st->n_recent = l->n_recent;
    st->reader = l->io;
#define DECODED_(name) st->decoded_##name = l->decoded[GF__DECODED_##name];
    GF_DECODED_MAP(DECODED_)
#undef DECODED_
    st->decode_warnings = l->decode_warnings;
    st->threads = l->pool.active;
    st->prefetch_depth = l->active_depth;
    st->autotune = l->s.autotune != 0;
    st->autotune_changes = l->tune_changes;
    st->queue_depth = l->s.queue_depth;
    st->batch_size = l->B;
    st->ring_bytes = (uint64_t)l->n_slots * ((uint64_t)l->B * (l->cell_bytes + sizeof(int32_t) +
                                                        sizeof(int64_t) + sizeof(gf__cell)));
    st->ring_bytes += l->out_bytes + (uint64_t)l->n_slots * gf__fields_slot_bytes(l);
    st->dataset_samples = l->ds.n;
    st->epoch_samples = l->epoch_len;
    st->classes = l->ds.n_classes;
    st->device = l->device;
    st->device_id = gf__device_id(l->dev);
    snprintf(st->device_note, sizeof st->device_note, "%s", l->device_note);
    memcpy(st->resume_note, l->resume_note, sizeof st->resume_note);
    st->pinned_bytes = l->pinned_bytes;
    st->pageable_slots = l->pageable_slots;
    st->device_bytes = gf__device_bytes(l->dev);
    st->rank = l->s.rank;
    st->world = l->s.world;
    st->shard_members_skipped = l->ds.skipped_members;
    st->shard_keys_skipped = l->ds.skipped_keys;
    st->dataset_warnings = l->ds.warnings;
    st->folder_dirs = l->ds.dirs;
    st->folder_dirs_again = l->ds.dirs_again;
    memcpy(st->folder_skipped, l->ds.skipped_ext, sizeof st->folder_skipped);
    /* The index keeps 256 bytes of it; stats carry the start. */
    snprintf(st->dataset_warning, sizeof st->dataset_warning, "%.*s",
             (int)sizeof st->dataset_warning - 1, l->ds.warning);
    st->shards = l->ds.n_shards;
    st->shards_damaged = l->ds.n_damage;
    st->shard_members_lost = l->ds.members_lost;
    st->remote_requests = l->remote_requests;
    st->remote_retries = l->remote_retries;
    st->remote_bytes = l->remote_bytes;
    st->remote_wait_s = l->remote_wait_s;
    if (l->rd && l->rd->cache_stats)
        l->rd->cache_stats(l->rd_self, &st->cache_hits, &st->cache_misses, st->cache_warning,
                           sizeof st->cache_warning);
    st->read_budget_bytes = l->s.read_budget_bytes;
    gf__budget_stats(&l->budget, &st->read_bytes_peak, &st->read_budget_waits);
    gf__device_h2d(l->dev, &st->h2d_bytes, &st->h2d_copies, &st->h2d_s);
    pthread_mutex_unlock(&l->mu);
    return 0;
}

uint64_t gf_epoch_samples(gf_loader *l, uint64_t epoch)
{
    if (!l || !l->slots)
        return 0;
    pthread_mutex_lock(&l->mu); /* the order and the rest change under it */
    gf__sampler s = l->sampler;
    uint64_t n = l->order.idx ? (epoch == l->order.epoch ? l->order.n : 0) : UINT64_MAX;
    pthread_mutex_unlock(&l->mu);
    if (n != UINT64_MAX)
        return n;
    s = sampler_of(l, &s, epoch);
    return gf__sampler_len(&s, epoch);
}

int gf_sources(const gf_loader *l)
{
    return l && l->ds.n_sources ? l->ds.n_sources : 1;
}

int gf_source_stats_get(gf_loader *l, int k, gf_source_stats *st)
{
    if (!l || !st || k < 0 || k >= gf_sources(l) || (l->ds.n_sources && !l->src_samples))
        return GF_EINVAL;
    memset(st, 0, sizeof *st);
    pthread_mutex_lock(&l->mu);
    uint64_t epoch = l->next_epoch, pos = l->next_pos, all = l->samples;
    if (l->ds.n_sources) {
        const gf__source *src = &l->ds.sources[k];
        *st = (gf_source_stats){.data = src->data,
                                .weight = src->weight,
                                .size = src->n,
                                .first_index = src->first,
                                .label_offset = src->label_offset,
                                .n_classes = src->n_classes,
                                .samples = l->src_samples[k],
                                .wait_s = l->src_wait_s[k]};
    } else {
        *st = (gf_source_stats){.data = l->data_path,
                                .weight = 1,
                                .size = l->ds.n,
                                .n_classes = l->ds.n_classes,
                                .samples = all,
                                .wait_s = l->wait_s,
                                .epoch = epoch};
    }
    gf__sampler ranks = l->sampler; /* its rest is set under mu */
    pthread_mutex_unlock(&l->mu);
    if (l->blend.src) /* O(epoch): not under mu */
        st->epoch = gf__blend_order_source_epoch(&l->blend, &ranks, k, epoch, pos);
    st->share = all ? (double)st->samples / (double)all : 0;
    return 0;
}

int gf_get_state(gf_loader *l, gf_state *st)
{
    if (!l || !st || !l->slots)
        return GF_EINVAL;
    uint64_t hash = gf_index_hash(l); /* before mu: its first call is a pass */
    pthread_mutex_lock(&l->mu);
    bool shards = (l->sampler.shards || l->sampler.spans) && !l->order.idx;
    const gf__rest *r = &l->sampler.rest;
    bool split = r->on && !l->order.idx && l->next_epoch == r->epoch;
    *st = (gf_state){.version = GF_STATE_VERSION,
                     .rank = (uint32_t)l->s.rank,
                     .shard_window = shards ? (uint32_t)l->s.shard_window : 0,
                     .world = (uint32_t)l->s.world,
                     .seed = l->order.idx ? l->order.seed : l->s.seed,
                     .epoch = l->next_epoch,
                     .position = l->next_pos,
                     .samples = l->ds.n,
                     .index_hash = hash,
                     .rest_world = split ? r->first_world : 0,
                     .rest_position = split ? r->first_pos : 0,
                     .rest_taken = split ? r->taken : 0};
    pthread_mutex_unlock(&l->mu);
    return 0;
}

/* A state's order: its shard window, 0 for the global order (version 1,
 * whose bytes there were padding, whatever they hold). */
static uint32_t state_window(const gf_state *st)
{
    return st->version == GF_STATE_VERSION_SHARDS || st->version == GF_STATE_VERSION
               ? st->shard_window
               : 0;
}

static void order_name(char *buf, size_t len, uint32_t window)
{
    if (window)
        snprintf(buf, len, "shards (shard_window %u)", window);
    else
        snprintf(buf, len, "global");
}

/* Why st cannot resume l (a message set, GF_EINVAL), or 0. Under mu. */
static int state_refused(gf_loader *l, const gf_state *st, uint64_t hash)
{
    uint32_t mine = l->sampler.shards || l->sampler.spans ? (uint32_t)l->s.shard_window : 0;
    if (l->order.idx)
        return gf__fail(l, GF_EINVAL,
                        "gf_set_state: the caller owns the epoch's order (gf_set_order is in "
                        "force): set the order again, then gf_seek to the saved epoch and "
                        "position");
    if (st->version != GF_STATE_VERSION && st->version != GF_STATE_VERSION_SHARDS &&
        st->version != 1)
        return gf__fail(l, GF_EINVAL, "gf_set_state: state version %u, this library reads 1 to %u",
                        st->version, GF_STATE_VERSION);
    if (state_window(st) != mine) { /* positions of one order are other samples in another */
        char saved[48], ours[48];
        order_name(saved, sizeof saved, state_window(st));
        order_name(ours, sizeof ours, mine);
        return gf__fail(l, GF_EINVAL, "gf_set_state: saved in order %s; this loader reads order %s",
                        saved, ours);
    }
    if (st->seed != l->s.seed)
        return gf__fail(l, GF_EINVAL, "gf_set_state: seed: the state's %llu, this loader's %llu",
                        (unsigned long long)st->seed, (unsigned long long)l->s.seed);
    if (st->world == 0 || st->rank >= st->world)
        return gf__fail(l, GF_EINVAL, "gf_set_state: rank %u of world %u is no rank", st->rank,
                        st->world);
    if (st->version != GF_STATE_VERSION)
        return 0; /* an earlier library's: no identity, no change of world */
    if (st->samples != l->ds.n || st->index_hash != hash)
        return gf__fail(l, GF_EINVAL,
                        "gf_set_state: %s: the state's %llu, this loader's %llu (another data set)",
                        st->samples != l->ds.n ? "samples" : "index_hash",
                        (unsigned long long)(st->samples != l->ds.n ? st->samples : st->index_hash),
                        (unsigned long long)(st->samples != l->ds.n ? l->ds.n : hash));
    if (st->rest_world == 0 && (st->rest_position || st->rest_taken))
        return gf__fail(l, GF_EINVAL, "gf_set_state: rest_position and rest_taken without a "
                                      "rest_world");
    return 0;
}

static GF__COLD int bad_rest(gf_loader *l, const gf_state *st)
{
    return gf__fail_locking(l, GF_EINVAL,
                            "gf_set_state: epoch %llu's rest (rest_world %u, rest_position "
                            "%llu, rest_taken %llu, position %llu of world %u) does not fit "
                            "this data set's %llu samples",
                            (unsigned long long)st->epoch, st->rest_world,
                            (unsigned long long)st->rest_position,
                            (unsigned long long)st->rest_taken,
                            (unsigned long long)st->position, st->world,
                            (unsigned long long)l->ds.n);
}

int gf_set_state(gf_loader *l, const gf_state *st)
{
    if (!l || !st || !l->slots)
        return GF_EINVAL;
    uint64_t hash = gf_index_hash(l);
    /* Under mu: the controller may be writing the message too. */
    pthread_mutex_lock(&l->mu);
    int rc = state_refused(l, st, hash);
    pthread_mutex_unlock(&l->mu);
    if (rc < 0)
        return rc;
    bool split = st->version == GF_STATE_VERSION && st->rest_world;
    bool moved = st->world != (uint32_t)l->s.world;
    uint64_t epoch = st->epoch, position = st->position;
    gf__sampler next = sampler_of(l, &l->sampler, epoch);
    next.rest = (gf__rest){0};
    if (split || moved) {
        /* The epoch's first world, what it delivered, and what later
         * worlds took of the rest before this one. */
        uint32_t first_world = split ? st->rest_world : st->world;
        uint64_t first_pos = split ? st->rest_position : st->position;
        uint64_t taken = split ? st->rest_taken : 0;
        if (split && moved) { /* the saving world's ranks each took position */
            gf__sampler saved = next;
            saved.world = st->world;
            rc = gf__sampler_rest(&saved, epoch, first_world, first_pos, taken);
            /* The position is in the saving world's share of the rest. */
            if (rc < 0 || position > (rc == 1 ? 0 : saved.rest.len))
                return bad_rest(l, st);
            taken = rc == 1 ? UINT64_MAX : saved.rest.on ? gf__rest_taken(&saved, position) : 0;
        }
        rc = gf__sampler_rest(&next, epoch, first_world, first_pos, taken);
        if (rc < 0)
            return bad_rest(l, st);
        if (moved)
            position = 0;
        if (rc == 1) { /* nothing of the epoch is left for this world */
            epoch++;
            position = 0;
        }
    }
    char note[sizeof l->resume_note] = "";
    if (moved) {
        /* Delivered of the epoch (what drop_last cut from this world's
         * share is not). */
        uint64_t done = next.rest.first_world ? next.n - next.rest.size + next.rest.taken : 0;
        snprintf(note, sizeof note,
                 "resumed a %u-rank state on %d ranks at epoch %llu, sample %llu of %llu",
                 st->world, l->s.world, (unsigned long long)st->epoch, (unsigned long long)done,
                 (unsigned long long)next.n);
    }
    rc = restart_at(l, "gf_set_state", NULL, epoch, position, &next.rest);
    pthread_mutex_lock(&l->mu);
    memcpy(l->resume_note, rc == 0 ? note : "", rc == 0 ? sizeof note : 1);
    pthread_mutex_unlock(&l->mu);
    return rc;
}

void gf_close(gf_loader **lp)
{
    if (!lp || !*lp)
        return;
    gf_loader *l = *lp;
    stop_pipeline(l);
    gf__pool_free(&l->pool);
    gf__work_free(l);
    gf__ring_free(l);
    if (l->rd)
        l->rd->destroy(l->rd_self);
    for (int i = 0; i < l->n_bufs; i++)
        gf__buf_free(&l->bufs[i]);
    free(l->bufs);
    free(l->free_bufs);
    free(l->js);
    free(l->outs);
    gf__device_close(l->dev);
    gf__dataset_close(&l->ds);
    gf__shard_epoch_free(&l->shard_epoch);
    gf__shards_free(&l->shards);
    gf__blend_order_free(&l->blend);
    gf__blend_order_free(&l->blend_scan);
    free(l->src_samples);
    free(l->src_wait_s);
    free(l->order.idx);
    free(l->data_path);
    pthread_cond_destroy(&l->ready_cv);
    pthread_mutex_destroy(&l->mu);
    gf__budget_destroy(&l->budget);
    free(l);
    *lp = NULL;
}
