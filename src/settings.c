/* Settings: gf_default_settings, the checks gf_open makes on them, and the
 * rank, world and device the launcher's environment gives. Runs on the
 * caller's thread inside gf_open (and gf_default_settings' caller). */
#include "settings.h"

#include "decode.h"
#include "reader.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void gf_default_settings(gf_settings *s)
{
    memset(s, 0, sizeof *s);
    s->epochs = 1;
    s->batch_size = 64;
    s->height = s->width = 224;
    s->channels = 3;
    s->shuffle = 1;
    s->max_pixels = 64ull << 20;
    s->max_file_bytes = 256ull << 20;
    s->scale_min = 0.08f;
    s->scale_max = 1.0f;
    s->ratio_min = 3.0f / 4.0f;
    s->ratio_max = 4.0f / 3.0f;
    s->flip_prob = 0.5f;
    s->crop_fraction = 0.875f;
    s->device_id = -1;
    for (int c = 0; c < 4; c++)
        s->std[c] = 1.0f;
}

#define validate_or_ret(cond)                                                  \
    do {                                                                       \
        if (!(cond)) {                                                         \
            gf__why(msg, msg_len, "invalid settings: %s", #cond);              \
            return GF_EINVAL;                                                  \
        }                                                                      \
    } while (0)

int gf__check_settings(const gf_settings *s, char *msg, size_t msg_len)
{
    validate_or_ret(s->data != NULL && s->data[0] != '\0');
    validate_or_ret(s->batch_size >= 1 && s->batch_size <= (1 << 16));
    validate_or_ret(s->height >= 1 && s->height <= 16384);
    validate_or_ret(s->width >= 1 && s->width <= 16384);
    validate_or_ret(s->channels == 1 || s->channels == 3 || s->channels == 4);
    validate_or_ret(s->threads >= 0 && s->threads <= 1024);
    validate_or_ret(s->prefetch_depth >= 0 && s->prefetch_depth <= 1024);
    validate_or_ret(s->queue_depth >= 0 && s->queue_depth <= 4096);
    validate_or_ret(s->io >= GF_IO_AUTO && s->io <= GF_IO_POSIX);
    validate_or_ret(s->decoder >= GF_DECODER_AUTO && s->decoder <= GF_DECODER_TURBO);
    validate_or_ret(s->transform == GF_TRANSFORM_TRAIN || s->transform == GF_TRANSFORM_EVAL);
    validate_or_ret(s->on_error == GF_ON_ERROR_SKIP || s->on_error == GF_ON_ERROR_FAIL);
    validate_or_ret(s->on_shard_error >= GF_SHARD_FOLLOW && s->on_shard_error <= GF_SHARD_SKIP);
    validate_or_ret(s->strictness >= GF_STRICT && s->strictness <= GF_STRICT_WHOLE);
    validate_or_ret(s->extensions == GF_EXT_TORCHVISION || s->extensions == GF_EXT_ALL);
    validate_or_ret(s->world >= 0 && s->rank >= 0 && (s->world == 0 || s->rank < s->world));
    validate_or_ret(s->max_pixels >= 1 && s->max_file_bytes >= 1);
    validate_or_ret(s->read_budget_bytes == 0 ||
                    (s->read_budget_bytes >= (1u << 20) &&
                     (uint64_t)(size_t)s->read_budget_bytes == s->read_budget_bytes));
    validate_or_ret(s->scale_min > 0 && s->scale_min <= s->scale_max && s->scale_max <= 1);
    validate_or_ret(s->ratio_min > 0 && s->ratio_min <= s->ratio_max);
    validate_or_ret(s->flip_prob >= 0 && s->flip_prob <= 1);
    validate_or_ret(s->crop_fraction > 0 && s->crop_fraction <= 1);
    validate_or_ret(s->device >= GF_DEVICE_AUTO && s->device <= GF_DEVICE_CPU);
    validate_or_ret(s->device_id >= -1);
    validate_or_ret(s->max_threads >= 0 && s->max_threads <= 1024);
    validate_or_ret(s->copy_stream_per_slot == 0 || s->copy_stream_per_slot == 1);
    validate_or_ret(s->dtype >= GF_DTYPE_UINT8 && s->dtype <= GF_DTYPE_BFLOAT16);
    validate_or_ret(s->layout == GF_LAYOUT_NHWC || s->layout == GF_LAYOUT_NCHW);
    for (int c = 0; c < 4; c++) {
        validate_or_ret(isfinite(s->mean[c]) && isfinite(s->std[c]));
        validate_or_ret(s->std[c] == 0 || s->std[c] >= 1e-3f); /* 0 means 1 */
    }
    validate_or_ret((uint64_t)s->batch_size * (uint64_t)(s->prefetch_depth ? s->prefetch_depth : 4) <
                           (1ull << 30));
    if (s->decoder == GF_DECODER_TURBO && !gf__have_turbo()) {
        gf__why(msg, msg_len, "decoder turbo requested but this build has no libjpeg-turbo");
        return GF_ENODEV;
    }
    if (s->io == GF_IO_URING && !gf__have_uring()) {
        gf__why(msg, msg_len, "io_uring requested but this build has no liburing");
        return GF_ENODEV;
    }
    return 0;
}

/* A non-negative integer from the first of names that is set, or -1. */
static long env_first(const char *const *names)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (v && *v) {
            char *end;
            long x = strtol(v, &end, 10);
            return *end == '\0' && x >= 0 && x < (1L << 30) ? x : -1;
        }
    }
    return -1;
}

int gf__resolve_launcher(gf_settings *s, bool *device_id_from_env, char *msg, size_t msg_len)
{
    static const char *const ranks[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", NULL};
    static const char *const worlds[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS",
                                         NULL};
    static const char *const locals[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                         "SLURM_LOCALID", NULL};
    if (s->world == 0) {
        long r = env_first(ranks), w = env_first(worlds);
        if (r >= 0 && w >= 1) {
            if (r >= w) {
                gf__why(msg, msg_len, "the launcher says rank %ld of a world of %ld", r, w);
                return GF_EINVAL;
            }
            s->rank = (int)r;
            s->world = (int)w;
        } else {
            s->rank = 0;
            s->world = 1;
        }
    }
    if (s->device_id < 0) {
        long lr = env_first(locals);
        s->device_id = lr >= 0 ? (int)lr : 0;
        *device_id_from_env = lr >= 0;
    }
    return 0;
}
