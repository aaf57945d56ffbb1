/* Settings: gf_default_settings, the one check every entry point makes
 * (gf_open, gf_index_open, gf_decoder_open, gf_decode_image), the one
 * resolver of "0 = pick for me", and the rank, world and device the
 * launcher's environment gives. The per-setting facts are the table's
 * (settings_table.c); what is here is what ties settings together. Runs on
 * the caller's thread. */
#include "settings.h"

#include "augment.h"
#include "dataset.h"
#include "decode.h"
#include "reader.h"

#include <stdlib.h>
#include <string.h>

void gf_default_settings(gf_settings *s)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < gf_setting_count(); i++) {
        const gf_setting_info *r = gf_setting_at(i);
        if (r->default_text) /* a PATH's default is NULL, as memset left it */
            (void)gf_settings_set(s, r->name, r->default_text, NULL, 0); /* test_settings: all 0 */
    }
}

#define validate_or_ret(cond, ...)                                                             \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            gf__why(msg, msg_len, "invalid settings: " __VA_ARGS__);                           \
            return GF_EINVAL;                                                                  \
        }                                                                                      \
    } while (0)

int gf__check_settings(const gf_settings *s, unsigned what, char *msg, size_t msg_len)
{
    char why[256];
    validate_or_ret(s != NULL, "NULL");
    if (what & GF__CHECK_DATA)
        validate_or_ret(s->data != NULL && s->data[0] != '\0', "data: no data set named");
    for (int i = 0; i < gf_setting_count(); i++)
        validate_or_ret(gf__setting_check(gf_setting_at(i), s, why, sizeof why) == 0, "%s", why);
    validate_or_ret(s->scale_min <= s->scale_max, "scale_min %g is above scale_max %g",
                    s->scale_min, s->scale_max);
    validate_or_ret(s->ratio_min <= s->ratio_max, "ratio_min %g is above ratio_max %g",
                    s->ratio_min, s->ratio_max);
    validate_or_ret(s->world == 0 || s->rank < s->world, "rank %d is not below world %d",
                    s->rank, s->world);
    int depth = s->prefetch_depth ? s->prefetch_depth : 4; /* as resolved */
    validate_or_ret((uint64_t)s->batch_size * (uint64_t)depth < (1ull << 30),
                    "batch_size x prefetch_depth = %d x %d is 2^30 or more", s->batch_size, depth);
    if (s->augment && s->augment[0]) {
        gf__augment a;
        int rc = gf__augment_parse(s->augment, s->width, s->height, s->channels, &a, msg, msg_len);
        if (rc < 0)
            return rc;
        validate_or_ret(!a.mix || s->dtype != GF_DTYPE_UINT8,
                        "augment: mix blends samples: it needs a float dtype (float32, float16 "
                        "or bfloat16), not uint8");
    }
    if (s->decoder == GF_DECODER_TURBO && !gf__have_turbo()) {
        gf__why(msg, msg_len, "decoder turbo requested but this build has no libjpeg-turbo");
        return GF_ENODEV;
    }
    if ((what & GF__CHECK_READER) && s->io == GF_IO_URING && !gf__have_uring()) {
        gf__why(msg, msg_len, "io_uring requested but this build has no liburing");
        return GF_ENODEV;
    }
    return 0;
}

void gf__resolve_settings(gf_settings *s)
{
    int cores = GF__MAX(1, gf__available_cores() - 1);
    /* autotune starts from one thread unless told; it grows to max_threads */
    if (s->threads == 0)
        s->threads = s->autotune ? 1 : cores;
    if (s->max_threads == 0)
        s->max_threads = cores;
    if (s->prefetch_depth == 0)
        s->prefetch_depth = 4;
    if (s->max_held_batches == 0)
        s->max_held_batches = 16;
    if (s->remote_connections == 0)
        s->remote_connections = 8;
    if (s->remote_stall_s == 0)
        s->remote_stall_s = 30;
    /* remote_deadline_s 0 stays 0: the fetcher derives it from the stall
     * and retries it runs with (gf__fetcher_create). */
    if (s->remote_buffer_bytes == 0)
        s->remote_buffer_bytes = 1ull << 30;
    if (s->queue_depth == 0)
        s->queue_depth = 64;
    if (s->max_pixels == 0)
        s->max_pixels = 64ull << 20;
    if (s->max_file_bytes == 0)
        s->max_file_bytes = 256ull << 20;
    if (s->read_budget_bytes == 0)
        s->read_budget_bytes = GF_READ_BUDGET_DEFAULT;
    for (int c = 0; c < 4; c++)
        if (s->std[c] == 0)
            s->std[c] = 1;
    /* Remote shards cost a request per sample in a global shuffle. */
    if (s->order == GF_ORDER_AUTO)
        s->order = gf__data_is_remote(s->data) || gf__mix_has_remote(s->data) ? GF_ORDER_SHARDS
                                                                              : GF_ORDER_GLOBAL;
    if (s->shard_window == 0)
        s->shard_window = 4;
    /* The window being read, and the next one fetched meanwhile. */
    if (s->prefetch_shards == 0)
        s->prefetch_shards = s->shard_window > 2048 ? 4096 : 2 * s->shard_window;
}

/* The first launcher variable of names that is set: 1 and *out, 0 if none
 * is, or GF_EINVAL naming it if its value is not a whole number below 2^30. */
static int env_first(const char *const *names, const char **name, long *out, char *msg,
                     size_t msg_len)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (!v || !*v)
            continue;
        char *end;
        long x = strtol(v, &end, 10);
        *name = *names;
        *out = x;
        if (*end == '\0' && x >= 0 && x < (1L << 30))
            return 1;
        gf__why(msg, msg_len, "the launcher's %s='%s' is not a whole number (0..2^30-1)",
                *names, v);
        return GF_EINVAL;
    }
    return 0;
}

int gf__resolve_launcher(gf_settings *s, bool *device_id_from_env, char *msg, size_t msg_len)
{
    /* By launcher: a rank is read with its own launcher's world size. */
    static const char *const ranks[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", NULL};
    static const char *const worlds[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS",
                                         NULL};
    static const char *const locals[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                         "SLURM_LOCALID", NULL};
    const char *name = NULL;
    long r, w, lr;
    int rc;
    if (s->world == 0) {
        s->rank = 0;
        s->world = 1;
        if ((rc = env_first(ranks, &name, &r, msg, msg_len)) < 0)
            return rc;
        if (rc == 1) {
            int k = 0;
            while (strcmp(ranks[k], name) != 0)
                k++;
            const char *wname = worlds[k], *one[] = {wname, NULL};
            if ((rc = env_first(one, &wname, &w, msg, msg_len)) < 0)
                return rc;
            if (rc == 0 || w < 1) {
                gf__why(msg, msg_len, "the launcher's %s=%ld has no world size: %s is %s", name,
                        r, worlds[k], rc == 0 ? "not set" : "0");
                return GF_EINVAL;
            }
            if (r >= w) {
                gf__why(msg, msg_len, "the launcher says rank %ld of a world of %ld (%s, %s)", r,
                        w, name, wname);
                return GF_EINVAL;
            }
            s->rank = (int)r;
            s->world = (int)w;
        }
    }
    if (s->device_id < 0) {
        if ((rc = env_first(locals, &name, &lr, msg, msg_len)) < 0)
            return rc;
        s->device_id = rc == 1 ? (int)lr : 0;
        *device_id_from_env = rc == 1;
    }
    return 0;
}
