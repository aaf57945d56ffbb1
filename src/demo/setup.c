/*
 * gpufeed train's set-up and teardown, on the command's thread: the
 * training and validation sources (a --data root's train/ and val/, or
 * the cached demo set, made once), the loaders' settings, the look at
 * the data and the device before the runs (probe: CUDA stream, events,
 * and the NVML sampler, whose thread nvml.c owns), and freeing all of it.
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "loader_options.h"
#include "compute.h"
#include "samples.h"
#include "train.h"
#if GF_CLI_HAVE_NCCL
#include "nccl_dl.h"
#endif
#if GF_CLI_HAVE_CUDA
#include "nvml.h"
#endif

/* ImageNet's statistics on 0..255 values. */
const float train_mean[3] = {123.7f, 116.3f, 103.5f};
const float train_std[3] = {58.4f, 57.1f, 57.4f};

#if GF_CLI_HAVE_CUDA
int train_cuda_failed(void)
{
    cli_error(CMD, "CUDA: %s", cli_cuda_error());
    return CLI_FAIL;
}
#endif

/* ---- the data set ------------------------------------------------------- */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

int train_is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The cached demo set: made once in a side folder, then renamed into
 * place, so an interrupted run never leaves a half-made set behind. */
int train_demo_data(trainer *t)
{
    const char *cache = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    char parent[4000], part[4100], sub[4200], root[4096];
    if (cache && *cache)
        snprintf(parent, sizeof parent, "%s/gpufeed", cache);
    else if (home && *home)
        snprintf(parent, sizeof parent, "%s/.cache/gpufeed", home);
    else {
        cli_error(CMD, "neither XDG_CACHE_HOME nor HOME is set: give --data DIR, or "
                       "--train-data and --val-data");
        return CLI_USAGE;
    }
    snprintf(root, sizeof root, "%s/train-data", parent);
    snprintf(sub, sizeof sub, "%s/train", root);
    if (train_is_dir(sub))
        return train_data_from_root(t, root);
    int rc = cli_mkdir_p(parent);
    if (rc < 0) {
        cli_error(CMD, "%s: %s", parent, strerror(-rc));
        return CLI_FAIL;
    }
    snprintf(part, sizeof part, "%s/train-data.partial", parent);
    if (train_is_dir(part))
        nftw(part, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (!t->o->json) {
        printf("making the demo data set (once): %d classes, %d train + %d val images, "
               "%dx%d JPEG, in %s\n",
               DEMO_CLASSES, DEMO_CLASSES * DEMO_TRAIN_PER_CLASS,
               DEMO_CLASSES * DEMO_VAL_PER_CLASS, DEMO_W, DEMO_H, root);
        fflush(stdout);
    }
    snprintf(sub, sizeof sub, "%s/train", part);
    if (cli_make_dataset(CMD, sub, DEMO_CLASSES, DEMO_TRAIN_PER_CLASS, DEMO_W, DEMO_H, 0, 0, 1) <
        0)
        return CLI_FAIL;
    snprintf(sub, sizeof sub, "%s/val", part);
    if (cli_make_dataset(CMD, sub, DEMO_CLASSES, DEMO_VAL_PER_CLASS, DEMO_W, DEMO_H, 1, 0, 1) < 0)
        return CLI_FAIL;
    if (rename(part, root) != 0) {
        cli_error(CMD, "%s -> %s: %s (remove %s and run again)", part, root, strerror(errno),
                  root);
        return CLI_FAIL;
    }
    return train_data_from_root(t, root);
}

/* --data ROOT (and the demo set): ROOT/train and ROOT/val, which must be
 * folders; --train-data and --val-data are taken as given, the loader
 * saying what is wrong with them. */
int train_data_from_root(trainer *t, const char *root)
{
    snprintf(t->train_data, sizeof t->train_data, "%s/train", root);
    snprintf(t->val_data, sizeof t->val_data, "%s/val", root);
    if (!train_is_dir(t->train_data) || !train_is_dir(t->val_data)) {
        cli_error(CMD, "%s: expected an ImageFolder with train/ and val/ sub-folders "
                       "(gpufeed make-dataset DIR/train --seed 0; ... DIR/val --seed 1), or "
                       "give --train-data and --val-data",
                  root);
        return CLI_USAGE;
    }
    return CLI_OK;
}

/* ---- loaders ------------------------------------------------------------- */

void train_loader_settings(const trainer *t, gf_settings *s, int eval)
{
    const train_opts *o = t->o;
    *s = o->loader_settings;
    s->data = eval ? t->val_data : t->train_data;
    s->seed = o->seed;
    s->epochs = 1;
    s->batch_size = o->batch;
    s->height = s->width = o->size;
    s->channels = 3; /* the model's input, as size, dtype, layout, mean and std */
    s->threads = o->autotune && t->tuned_threads ? t->tuned_threads : o->threads;
    s->prefetch_depth = o->depth;
    s->autotune = o->autotune && !eval;
    s->device = o->device;
    s->dtype = t->amp ? GF_DTYPE_FLOAT16 : GF_DTYPE_FLOAT32;
    s->layout = GF_LAYOUT_NCHW;
    for (int c = 0; c < 3; c++) {
        s->mean[c] = train_mean[c];
        s->std[c] = train_std[c];
    }
    /* Evaluation (rank 0 only) and single-process training read the whole
     * set; data-parallel training reads the rank's share, from the
     * launcher's environment (world 0) unless it names none. */
    s->rank = 0;
    s->world = 1;
    if (!eval && t->dp) {
        s->drop_last = 1; /* disjoint, equal shares; full batches */
        if (t->explicit_rank) {
            s->rank = t->rank;
            s->world = t->world;
        } else {
            s->world = 0;
        }
    }
    if (eval) {
        s->transform = GF_TRANSFORM_EVAL;
        s->shuffle = 0;
    } else {
        /* Gentler than the default 0.08: the model is small and the
         * images are small. */
        s->scale_min = 0.35f;
        s->scale_max = 1.0f;
    }
}

/* A source's failure, naming the set: the message may name a file inside
 * it (one shard of a pattern) and not what the user gave. train_loader_
 * settings gives the eval transform to the validation set only. */
static void set_error(const gf_settings *s, const char *msg)
{
    const char *what = s->transform == GF_TRANSFORM_EVAL ? "validation set" : "training set";
    size_t n = strlen(s->data);
    if (strncmp(msg, s->data, n) == 0 && msg[n] == ':')
        cli_error(CMD, "%s %s", what, msg);
    else
        cli_error(CMD, "%s %s: %s", what, s->data, msg);
}

int train_open_loader(const gf_settings *s, gf_loader **l)
{
    int rc = gf_open(l, s);
    if (rc < 0) {
        const char *msg = *l ? gf_last_error(*l) : "";
        set_error(s, *msg ? msg : gf_strerror(rc));
        gf_close(l);
        return CLI_USAGE;
    }
    cli_warn_damaged_shards(CMD, *l, s->data);
    return CLI_OK;
}

int train_loader_failed(gf_loader *l, int rc)
{
    cli_error_msg(CMD, gf_last_error(l), rc);
    return CLI_FAIL;
}

/* ---- setup --------------------------------------------------------------- */

/* CUDA: one batch of the validation set through a loader with the runs'
 * dtype, so the first load of the loader's kernels (lazy module loading)
 * and the first pinned allocations happen here, before any timed window. */
static int warm(trainer *t)
{
    gf_settings s;
    gf_loader *l = NULL;
    gf_batch *b;
    int rc, status;
    train_loader_settings(t, &s, 1);
    s.epochs = 1;
    if ((status = train_open_loader(&s, &l)) != CLI_OK)
        return status;
    rc = gf_next(l, &b);
    if (rc == 0) {
        if ((rc = gf_batch_wait(b, t->stream)) < 0)
            gf_release(l, b);
        else
            rc = gf_release_stream(l, b, t->stream);
    }
    status = rc < 0 && rc != GF_EOF ? train_loader_failed(l, rc) : CLI_OK;
#if GF_CLI_HAVE_CUDA
    if (status == CLI_OK && cli_cuda_stream_sync(t->stream) < 0)
        status = train_cuda_failed();
#endif
    gf_close(&l);
    return status;
}

/* How a source's classes are counted (gf_stats.classes), for a mismatch's
 * message: a list file's or shards' are a bare largest label + 1. */
static const char *classes_counted(const char *data)
{
    return train_is_dir(data) ? "class folders" : "largest label + 1";
}

/* Where the batches are (the loader resolves AUTO), the classes and the
 * validation set's size: one look at the validation set through a loader.
 * The training set is indexed with the training loader's own settings
 * (on_shard_error...), so the synchronous loop and the checkpoint's
 * identity see the samples that loader reads. */
int train_probe(trainer *t)
{
    gf_settings s;
    gf_loader *l = NULL;
    gf_stats st;
    int status, train_classes = 0;

    gf_settings is;
    train_loader_settings(t, &is, 0);
    int rc = gf_index_open(&t->train_index, &is);
    if (rc < 0) {
        const char *msg = gf_index_last_error(t->train_index);
        set_error(&is, *msg ? msg : gf_strerror(rc));
        return CLI_USAGE;
    }
    t->train_n = gf_index_count(t->train_index);
    train_classes = gf_index_classes(t->train_index);
    train_loader_settings(t, &s, 1);
    if ((status = train_open_loader(&s, &l)) != CLI_OK)
        return status;
    gf_get_stats(l, &st);
    gf_close(&l);
    t->cuda = st.device == GF_DEVICE_CUDA;
    t->device_id = st.device_id < 0 ? 0 : st.device_id;
    snprintf(t->device_note, sizeof t->device_note, "%s", st.device_note);
    t->pageable_slots = st.pageable_slots;
    t->val_samples = st.epoch_samples;
    t->classes = st.classes;
    if (train_classes != st.classes) {
        cli_error(CMD, "the training set %s has %d classes (%s), the validation set %s has "
                       "%d (%s): they must be the same classes",
                  t->train_data, train_classes, classes_counted(t->train_data), t->val_data,
                  st.classes, classes_counted(t->val_data));
        return CLI_USAGE;
    }
    if (t->cuda) {
#if GF_CLI_HAVE_CUDA
        if (cli_cuda_set_device(t->device_id) < 0 || cli_cuda_stream_create(&t->stream) < 0)
            return train_cuda_failed();
        for (int i = 0; i < 2 * EVENT_PAIRS; i++)
            if (cli_cuda_event_create(&t->ev[i]) < 0)
                return train_cuda_failed();
        cli_cuda_device info;
        char why[256] = "";
        if (cli_cuda_device_info(t->device_id, &info) < 0)
            snprintf(t->nvml_note, sizeof t->nvml_note, "NVML: no PCI bus id for device %d",
                     t->device_id);
        else if (cli_nvml_open((cli_nvml **)&t->nvml, info.pci_bus_id, why, sizeof why) < 0)
            snprintf(t->nvml_note, sizeof t->nvml_note, "NVML: %s", why);
#else
        cli_error(CMD, "the loader delivers on CUDA, but this gpufeed was built without CUDA; "
                       "use --device cpu");
        return CLI_FAIL;
#endif
    }
    memset(&t->mc, 0, sizeof t->mc);
    t->mc.in_c = 3;
    t->mc.in_h = t->mc.in_w = t->o->size;
    t->mc.classes = t->classes;
    t->mc.width = t->o->width; /* 0: train_choose_width's */
    t->mc.seed = t->o->seed;
    t->mc.lr = (float)t->o->lr;
    t->mc.momentum = 0.9f;
    t->mc.weight_decay = 5e-4f;
    t->mc.device = t->cuda ? GFM_CUDA : GFM_CPU;
    t->mc.device_id = t->device_id;
    t->amp = t->o->amp && t->cuda;
    t->mc.amp = t->amp;
    return t->cuda ? warm(t) : CLI_OK;
}

void train_free(trainer *t)
{
#if GF_CLI_HAVE_CUDA
    cli_nvml_close(t->nvml);
#endif
#if GF_CLI_HAVE_NCCL
    cli_nccl_destroy(t->nccl);
    cli_cuda_event_destroy(t->nccl_ev[0]);
    cli_cuda_event_destroy(t->nccl_ev[1]);
#endif
#if GF_CLI_HAVE_CUDA
    for (int i = 0; i < 2 * EVENT_PAIRS; i++)
        cli_cuda_event_destroy(t->ev[i]);
    cli_cuda_stream_destroy(t->stream);
#endif
    gf_index_close(&t->train_index);
    free(t->rows);
    free(t->gbuf);
    free(t->rank_checksums);
    free(t->rank_samples);
    free(t->rank_hashes);
    free(t->rparams);
    free(t->rvel);
    if (t->dump)
        fclose(t->dump);
}
