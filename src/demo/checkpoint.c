/*
 * gpufeed train --checkpoint / --resume, on the command's thread (rank 0
 * writes; every rank reads): the file's format, its writing (atomic:
 * FILE.tmp renamed over FILE) and its checks on reading.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../mix.h" /* header-only: gf__fnv1a64 */
#include "cli.h"
#include "train.h"

/* ---- checkpoints ---------------------------------------------------------- */

/* The file, in this machine's byte order:
 *   "GFTRAIN\0", then u32 version, world, width, image size, classes,
 *   batch size, 0 (pad); u64 seed, epochs done, parameter count; the
 *   loader's gf_state, its bytes (after --stop-after inside an epoch: at
 *   the position in epoch "epochs done" where the run stopped; the loop
 *   goes on from any position, so the header did not change for it); the
 *   training set's identity as u64 samples, FNV-1a of
 *   every sample's path (with its NUL) and label; float
 *   parameters[count], momentum[count] (the gfm_checksum layout); u64
 *   FNV-1a of all the bytes before it, and nothing after. */
#define CKPT_MAGIC "GFTRAIN"
#define CKPT_VERSION 3u /* 3: the whole gf_state (its version 3) */

typedef struct ckpt_head {
    char magic[8];
    uint32_t version, world, width, size, classes, batch, pad;
    uint64_t seed, epochs_done, n_params;
    gf_state st;
    uint64_t data_n, data_hash;
} ckpt_head;

/* The training set's identity (t->data_*), from its index (train_probe's,
 * whatever form --data, --train-data or the demo set gave it): a
 * checkpoint resumed on other files would go on silently with their
 * labels. The same files and labels are the same set under either form. */
static void data_identity(trainer *t)
{
    if (t->data_known)
        return;
    const gf_index *ix = t->train_index;
    uint64_t n = gf_index_count(ix), hash = GF__FNV1A64_BASIS;
    for (uint64_t i = 0; i < n; i++) {
        const char *p = gf_index_path(ix, i);
        int32_t label = gf_index_label(ix, i);
        hash = gf__fnv1a64(hash, p, strlen(p) + 1);
        hash = gf__fnv1a64(hash, &label, sizeof label);
    }
    t->data_n = n;
    t->data_hash = hash;
    t->data_known = 1;
}

/* Written to FILE.tmp, then renamed over FILE: a crash never leaves a
 * torn checkpoint. */
int checkpoint_save(trainer *t, gfm_model *m, int epochs_done)
{
    const char *path = t->o->checkpoint;
    size_t n = t->n_params, bytes = n * sizeof(float);
    float *params = malloc(bytes ? bytes : 1), *vel = malloc(bytes ? bytes : 1);
    char tmp[4200];
    ckpt_head h;
    FILE *f = NULL;
    int ok = 0;
    if (!params || !vel) {
        cli_error(CMD, "out of memory");
        goto out;
    }
    if (gfm_state_get(m, params, vel) < 0) {
        cli_error(CMD, "model: %s", gfm_error(m));
        goto out;
    }
    data_identity(t);
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CKPT_MAGIC, sizeof CKPT_MAGIC);
    h.version = CKPT_VERSION;
    h.world = (uint32_t)t->world;
    h.width = (uint32_t)t->mc.width;
    h.size = (uint32_t)t->o->size;
    h.classes = (uint32_t)t->classes;
    h.batch = (uint32_t)t->o->batch;
    h.seed = t->o->seed;
    h.epochs_done = (uint64_t)epochs_done;
    h.n_params = n;
    h.st = t->lstate;
    h.data_n = t->data_n;
    h.data_hash = t->data_hash;
    uint64_t sum = gf__fnv1a64(GF__FNV1A64_BASIS, &h, sizeof h);
    sum = gf__fnv1a64(sum, params, bytes);
    sum = gf__fnv1a64(sum, vel, bytes);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (!(f = fopen(tmp, "wb")) || fwrite(&h, sizeof h, 1, f) != 1 ||
        (n && (fwrite(params, bytes, 1, f) != 1 || fwrite(vel, bytes, 1, f) != 1)) ||
        fwrite(&sum, sizeof sum, 1, f) != 1 || fflush(f) != 0 || fsync(fileno(f)) != 0) {
        cli_error(CMD, "--checkpoint %s: %s", tmp, strerror(errno));
        goto out;
    }
    if (fclose(f) != 0) {
        f = NULL;
        cli_error(CMD, "--checkpoint %s: %s", tmp, strerror(errno));
        goto out;
    }
    f = NULL;
    if (rename(tmp, path) != 0) {
        cli_error(CMD, "--checkpoint %s -> %s: %s", tmp, path, strerror(errno));
        goto out;
    }
    ok = 1;
out:
    if (f) {
        fclose(f);
        remove(tmp);
    }
    free(params);
    free(vel);
    return ok ? CLI_OK : CLI_FAIL;
}

/* The model width FILE was saved with; 0 if it is not a checkpoint this
 * version reads (checkpoint_load then says why). */
int checkpoint_width(const char *path)
{
    ckpt_head h;
    FILE *f = fopen(path, "rb");
    int ok = f && fread(&h, sizeof h, 1, f) == 1 &&
             memcmp(h.magic, CKPT_MAGIC, sizeof CKPT_MAGIC) == 0 && h.version == CKPT_VERSION &&
             h.width >= 1 && h.width <= 4096;
    if (f)
        fclose(f);
    return ok ? (int)h.width : 0;
}

/* Reads --resume into t (checked against this run's model and world);
 * the model and the loader get it when the run starts. */
int checkpoint_load(trainer *t)
{
    const char *path = t->o->resume;
    ckpt_head h;
    uint64_t sum, want;
    size_t n = t->n_params, bytes = n * sizeof(float);
    FILE *f = fopen(path, "rb");
    int status = CLI_USAGE;
    if (!f) {
        cli_error(CMD, "--resume %s: %s", path, strerror(errno));
        return CLI_USAGE;
    }
    t->rparams = malloc(bytes ? bytes : 1);
    t->rvel = malloc(bytes ? bytes : 1);
    if (!t->rparams || !t->rvel) {
        cli_error(CMD, "out of memory");
        status = CLI_FAIL;
        goto out;
    }
    if (fread(&h, sizeof h, 1, f) != 1 || memcmp(h.magic, CKPT_MAGIC, sizeof CKPT_MAGIC) != 0) {
        cli_error(CMD, "--resume %s: not a gpufeed train checkpoint", path);
        goto out;
    }
    if (h.version != CKPT_VERSION) {
        cli_error(CMD, "--resume %s: checkpoint version %u, this gpufeed reads %u", path,
                  h.version, CKPT_VERSION);
        goto out;
    }
    if (h.n_params != n || h.width != (uint32_t)t->mc.width || h.size != (uint32_t)t->o->size ||
        h.classes != (uint32_t)t->classes) {
        cli_error(CMD, "--resume %s: saved for model width %u, image size %u, %u classes "
                       "(%" PRIu64 " parameters); this run has width %d, size %d, %d classes",
                  path, h.width, h.size, h.classes, h.n_params, t->mc.width, t->o->size,
                  t->classes);
        goto out;
    }
    if (h.seed != t->o->seed) {
        cli_error(CMD, "--resume %s: saved with seed %" PRIu64 "; this run has seed %" PRIu64
                       " (resume with the same --seed)",
                  path, h.seed, t->o->seed);
        goto out;
    }
    if ((n && (fread(t->rparams, bytes, 1, f) != 1 || fread(t->rvel, bytes, 1, f) != 1)) ||
        fread(&sum, sizeof sum, 1, f) != 1) {
        cli_error(CMD, "--resume %s: truncated", path);
        goto out;
    }
    if (fgetc(f) != EOF) {
        cli_error(CMD, "--resume %s: bytes after the checkpoint's end (not a file gpufeed "
                       "train wrote)", path);
        goto out;
    }
    want = gf__fnv1a64(GF__FNV1A64_BASIS, &h, sizeof h);
    want = gf__fnv1a64(want, t->rparams, bytes);
    want = gf__fnv1a64(want, t->rvel, bytes);
    if (sum != want) {
        cli_error(CMD, "--resume %s: checksum mismatch (damaged file)", path);
        goto out;
    }
    if (h.epochs_done > 100000) {
        cli_error(CMD, "--resume %s: %" PRIu64 " epochs done?", path, h.epochs_done);
        goto out;
    }
    if (h.epochs_done >= (uint64_t)t->o->epochs) {
        cli_error(CMD, "--resume %s: %" PRIu64 " epochs are done already; --epochs %d trains "
                       "none (ask for more than %" PRIu64 ")", path, h.epochs_done,
                  t->o->epochs, h.epochs_done);
        goto out;
    }
    data_identity(t);
    if (h.data_n != t->data_n || h.data_hash != t->data_hash) {
        cli_error(CMD, "--resume %s: saved on another data set (%" PRIu64 " samples, index "
                       "hash %016" PRIx64 "); the training set %s has %" PRIu64 " samples, "
                       "index hash %016" PRIx64,
                  path, h.data_n, h.data_hash, t->train_data, t->data_n, t->data_hash);
        goto out;
    }
    if (h.batch != (uint32_t)t->o->batch && !t->o->json)
        fprintf(stderr, "gpufeed train: note: the checkpoint was trained with batch size %u, "
                        "this run uses %d\n", h.batch, t->o->batch);
    t->rstate = h.st;
    t->start_epoch = (int)h.epochs_done;
    t->have_resume = 1;
    status = CLI_OK;
out:
    fclose(f);
    return status;
}
