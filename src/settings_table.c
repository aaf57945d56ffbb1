/* The settings table: every value setting of gf_settings with its type,
 * default, bounds, spellings and help, and the calls that read and write
 * a setting by name through it (gf_settings_set/get, gf_setting_*). The
 * one place a setting's facts live: gf_default_settings, the validator
 * (settings.c), the CLI's options, the Python keywords and the settings
 * fuzz target all read them from here (paths too: GF_SETTING_PATH).
 * Const data: any thread. */
#include "settings.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The enum fields are read and written as int. */
_Static_assert(sizeof(gf_io) == sizeof(int) && sizeof(gf_dtype) == sizeof(int) &&
                   sizeof(gf_on_shard_error) == sizeof(int) && sizeof(gf_order) == sizeof(int) &&
                   sizeof(gf_folder_walk) == sizeof(int) && sizeof(gf_interpolation) == sizeof(int) &&
                   sizeof(gf_mix_epoch) == sizeof(int) && sizeof(gf_mix_labels) == sizeof(int),
               "enum fields are int-sized");

static const char *const io_names[] = {"auto", "uring", "posix", NULL};
static const char *const decoder_names[] = {"auto", "stb", "turbo", NULL};
static const char *const transform_names[] = {"train", "eval", NULL};
static const char *const on_error_names[] = {"skip", "fail", NULL};
static const char *const device_names[] = {"auto", "cuda", "cpu", NULL};
static const char *const dtype_names[] = {"uint8", "float32", "float16", "bfloat16", NULL};
static const char *const dtype_aliases[] = {"u8", "f32", "f16", "bf16", NULL};
static const char *const layout_names[] = {"nhwc", "nchw", NULL};
static const char *const strictness_names[] = {"strict", "lenient", "whole", NULL};
static const char *const extensions_names[] = {"torchvision", "all", NULL};
static const char *const folder_walk_names[] = {"gpufeed", "torchvision", NULL};
static const char *const on_shard_error_names[] = {"follow", "fail", "skip", NULL};
static const char *const interpolation_names[] = {"bilinear", "bicubic", "nearest", NULL};
static const char *const order_names[] = {"auto", "global", "shards", NULL};
static const char *const mix_epoch_names[] = {"cycle", "first", NULL};
static const char *const mix_labels_names[] = {"offset", "source", NULL};
static const char *const channel_values[] = {"1", "3", "4", NULL};

#define AT_(field) offsetof(gf_settings, field)
#define INT_(f, def, lo, hi, fl, zero, help)                                                       \
    {#f, GF_SETTING_INT, AT_(f), def, lo, hi, 0, 0, fl, zero, NULL, NULL, help}
#define U64_(f, def, lo, fl, zero, help)                                                           \
    {#f, GF_SETTING_U64, AT_(f), def, lo, UINT64_MAX, 0, 0, fl, zero, NULL, NULL, help}
#define FLOAT_(f, type, def, lo, hi, fl, zero, help)                                               \
    {#f, type, AT_(f), def, 0, 0, lo, hi, fl, zero, NULL, NULL, help}
#define CHOICE_(f, def, names, aliases, help)                                                      \
    {#f, GF_SETTING_CHOICE, AT_(f), def, 0, 0, 0, 0, 0, NULL, names, aliases, help}
#define FLAG_(f, def, help) {#f, GF_SETTING_FLAG, AT_(f), def, 0, 1, 0, 0, 0, NULL, NULL, NULL, help}
#define PATH_(f, none, help) {#f, GF_SETTING_PATH, AT_(f), NULL, 0, 0, 0, 0, 0, none, NULL, NULL, help}
#define TEXT_(f, none, help) {#f, GF_SETTING_TEXT, AT_(f), NULL, 0, 0, 0, 0, 0, none, NULL, NULL, help}
#define PICK_ GF_SETTING_ZERO_PICKS
#define ABOVE_ GF_SETTING_MIN_EXCLUSIVE

/* In gf_settings order. A new setting: its field in gpufeed.h, a row here,
 * and (if 0 picks) its value in gf__resolve_settings. */
static const gf_setting_info rows[] = {
    U64_(seed, "0", 0, 0, NULL, "the seed of the shuffle, crops and flips"),
    U64_(epochs, "1", 0, PICK_, "unbounded", "epochs to deliver"),
    INT_(batch_size, "64", 1, 1 << 16, 0, NULL, "samples per batch"),
    INT_(height, "224", 1, 16384, 0, NULL, "output height"),
    INT_(width, "224", 1, 16384, 0, NULL, "output width"),
    {"channels", GF_SETTING_INT, AT_(channels), "3", 1, 4, 0, 0, 0, NULL, channel_values, NULL,
     "output channels: 1 gray, 3 RGB, 4 RGBA"},
    INT_(threads, "0", 1, 1024, PICK_, "cores - 1, at least 1", "decode threads"),
    INT_(prefetch_depth, "0", 1, 1024, PICK_, "4", "batch slots in the ring"),
    INT_(queue_depth, "0", 1, 4096, PICK_, "64", "io_uring reads in flight"),
    CHOICE_(io, "auto", io_names, NULL,
            "the reader: io_uring where the kernel allows it, the decode threads reading what "
            "the page cache holds with pread first (auto); io_uring alone (uring); pread (posix)"),
    CHOICE_(decoder, "auto", decoder_names, NULL,
            "JPEG and PNG by libjpeg-turbo and libspng (auto), stb_image (stb), or turbo only"),
    CHOICE_(transform, "train", transform_names, NULL,
            "random-resized crop and flip (train), or resize and center crop (eval)"),
    CHOICE_(on_error, "skip", on_error_names, NULL,
            "a bad sample is counted and replaced (skip), or fails the batch"),
    FLAG_(shuffle, "1", "shuffle each epoch"),
    FLAG_(drop_last, "0", "drop each epoch's last short batch"),
    INT_(rank, "0", 0, (1 << 30) - 1, 0, NULL, "the share of world this process reads"),
    INT_(world, "0", 1, 1 << 30, PICK_, "the launcher's, else 1",
         "shares the data set is split into"),
    U64_(max_pixels, "67108864", 1, PICK_, "64 Mi",
         "pixels an image may have, checked from its header"),
    U64_(max_file_bytes, "268435456", 1, PICK_, "256 MiB", "bytes a file may have"),
    FLOAT_(scale_min, GF_SETTING_FLOAT, "0.08", 0, 1, ABOVE_, NULL,
           "train: the crop's least area, a fraction of the image"),
    FLOAT_(scale_max, GF_SETTING_FLOAT, "1", 0, 1, ABOVE_, NULL,
           "train: the crop's greatest area, a fraction of the image"),
    FLOAT_(ratio_min, GF_SETTING_FLOAT, "0.75", 0, FLT_MAX, ABOVE_, NULL,
           "train: the crop's least aspect ratio"),
    FLOAT_(ratio_max, GF_SETTING_FLOAT, "1.3333334", 0, FLT_MAX, ABOVE_, NULL,
           "train: the crop's greatest aspect ratio"),
    FLOAT_(flip_prob, GF_SETTING_FLOAT, "0.5", 0, 1, 0, NULL,
           "train: the chance of a horizontal flip"),
    FLOAT_(crop_fraction, GF_SETTING_FLOAT, "0.875", 0, 1, ABOVE_, NULL,
           "eval: the center crop's side over the resized shorter side"),
    CHOICE_(device, "auto", device_names, NULL, "where batches are delivered"),
    INT_(device_id, "-1", -1, 1 << 30, 0, NULL,
         "the CUDA device; -1: the launcher's local rank, else 0"),
    CHOICE_(dtype, "uint8", dtype_names, dtype_aliases, "the batch's element type"),
    CHOICE_(layout, "nhwc", layout_names, NULL, "the batch's layout (uint8 is always nhwc)"),
    FLOAT_(mean, GF_SETTING_FLOAT4, "0,0,0,0", -FLT_MAX, FLT_MAX, 0, NULL,
           "per channel, on 0..255 values: subtracted (not for uint8)"),
    FLOAT_(std, GF_SETTING_FLOAT4, "1,1,1,1", 1e-3, FLT_MAX, PICK_, "1",
           "per channel, on 0..255 values: divided by (not for uint8)"),
    FLAG_(flip_on_device, "0", "the device kernel mirrors, not the decoder (same bytes)"),
    U64_(pinned_max_bytes, "0", 1, PICK_, "no cap", "pinned host memory the ring may take"),
    U64_(device_max_bytes, "0", 1, PICK_, "what is free", "device memory the ring may take"),
    FLAG_(autotune, "0", "add threads and depth while the consumer waits"),
    INT_(max_threads, "0", 1, 1024, PICK_, "cores - 1, at least 1", "autotune's thread ceiling"),
    FLAG_(copy_stream_per_slot, "0", "CUDA: a copy stream per slot, not one for the ring"),
    CHOICE_(strictness, "strict", strictness_names, NULL,
            "a decoder warning fails the sample (strict), is counted (lenient), or "
            "strict reading every JPEG whole"),
    CHOICE_(extensions, "torchvision", extensions_names, NULL,
            "the files an ImageFolder indexes: torchvision's, or all stb_image reads"),
    CHOICE_(folder_walk, "gpufeed", folder_walk_names, NULL,
            "ImageFolder: leave out what would relabel or repeat samples, naming each (gpufeed), "
            "or walk as torchvision does, loops aside (torchvision)"),
    U64_(read_budget_bytes, "0", 1u << 20, PICK_, "256 MiB",
         "bytes the read buffers hold at once"),
    CHOICE_(on_shard_error, "follow", on_shard_error_names, NULL,
            "a damaged tar shard fails the open, or is taken in part (follow: as on_error)"),
    INT_(max_held_batches, "0", 1, 1024, PICK_, "16",
         "batches the consumer may hold at once, each in a slot of its own"),
    CHOICE_(order, "auto", order_names, NULL,
            "sample order: one shuffle of all (global), or shard windows (shards: tar "
            "shards only; ranks take contiguous spans); auto: shards for remote data"),
    INT_(shard_window, "0", 1, 65536, PICK_, "4",
         "order shards: consecutive shards whose samples are shuffled together"),
    PATH_(ca_file, "the system's", "https: verify servers against this CA bundle (PEM)"),
    INT_(remote_connections, "0", 1, 1024, PICK_, "8", "remote shards: connections to a host at once"),
    INT_(remote_retries, "5", 0, 100, 0, NULL,
         "remote shards: times a request cut short is resumed (backoff 0.1 s doubling, at most 5 s)"),
    INT_(remote_stall_s, "0", 1, 3600, PICK_, "30",
         "remote shards: seconds in which a request must bring 1 KiB, else it is retried"),
    INT_(prefetch_shards, "0", 1, 4096, PICK_, "2 x shard_window",
         "remote shards, order shards: shards held in memory (the window's and those fetched ahead)"),
    U64_(remote_buffer_bytes, "0", 1 << 20, PICK_, "1 GiB",
         "remote shards, order shards: cap on the bytes of the shards held"),
    PATH_(cache_dir, "no cache",
          "remote shards: keep them in this directory between epochs and runs, keyed by URL "
          "and ETag, within cache_bytes"),
    U64_(cache_bytes, "0", 1, PICK_, "80% of the free space",
         "remote shards: cap on the bytes of the cache (--cache-dir)"),
    INT_(remote_deadline_s, "0", 1, 604800, PICK_, "20 x remote_stall_s x (remote_retries + 1)",
         "remote shards: seconds one request, all its retries and resumes together, may take"),
    TEXT_(fields, "an image and its .cls",
          "tar shards: the sample's members by extension, in the batch's order, e.g. "
          "jpg;png,cls,txt (';' alternatives; ':KIND' image, label, text, bytes)"),
    CHOICE_(interpolation, "bilinear", interpolation_names, NULL,
            "the crop's resize, as torchvision's InterpolationMode over PIL"),
    TEXT_(augment, "none",
          "augmentations after the crop and flip, ';' between stages, e.g. "
          "ta_wide; erase p=0.25; mix classes=1000 (README: Augmentations)"),
    CHOICE_(mix_epoch, "cycle", mix_epoch_names, NULL,
            "data as a mix: an epoch is the sources' sizes summed, each cycling its own epochs "
            "(cycle), or ends when the first source is exhausted (first)"),
    CHOICE_(mix_labels, "offset", mix_labels_names, NULL,
            "data as a mix: labels after the previous sources' classes (offset), or each "
            "source's own with the batch's sources (source)"),
};
#define N_ROWS ((int)(sizeof rows / sizeof rows[0]))

int gf_setting_count(void)
{
    return N_ROWS;
}

const gf_setting_info *gf_setting_at(int i)
{
    return i >= 0 && i < N_ROWS ? &rows[i] : NULL;
}

const gf_setting_info *gf_setting_find(const char *name)
{
    if (!name)
        return NULL;
    for (int i = 0; i < N_ROWS; i++) {
        const char *a = rows[i].name, *b = name;
        while (*a && (*a == *b || (*a == '_' && *b == '-')))
            a++, b++;
        if (!*a && !*b)
            return &rows[i];
    }
    return NULL;
}

static int n_names(const char *const *names)
{
    int n = 0;
    while (names[n])
        n++;
    return n;
}

/* "a, b, c" into out. */
static void join(char *out, size_t len, const char *const *names)
{
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; names[i] && used < len; i++) {
        int k = snprintf(out + used, len - used, "%s%s", i ? ", " : "", names[i]);
        if (k < 0)
            break;
        used += (size_t)k;
    }
}

static void int_range(const gf_setting_info *r, char *out, size_t len)
{
    char zero[64] = "";
    if ((r->flags & GF_SETTING_ZERO_PICKS) && r->min_int > 0)
        snprintf(zero, sizeof zero, "0 (%s) or ", r->zero);
    snprintf(out, len, "%s%" PRId64 "..%" PRIu64, zero, r->min_int, r->max_int);
}

static void float_range(const gf_setting_info *r, char *out, size_t len)
{
    char zero[64] = "", hi[32] = "";
    if (r->flags & GF_SETTING_ZERO_PICKS)
        snprintf(zero, sizeof zero, "0 (%s) or ", r->zero);
    if (r->max_float < FLT_MAX)
        snprintf(hi, sizeof hi, "%g]", r->max_float);
    else
        snprintf(hi, sizeof hi, "inf)");
    if (r->min_float <= -FLT_MAX)
        snprintf(out, len, "any finite number");
    else
        snprintf(out, len, "%s%c%g, %s", zero, r->flags & GF_SETTING_MIN_EXCLUSIVE ? '(' : '[',
                 r->min_float, hi);
}

static bool float_ok(const gf_setting_info *r, float v)
{
    if (v == 0 && (r->flags & GF_SETTING_ZERO_PICKS))
        return true;
    bool above = r->flags & GF_SETTING_MIN_EXCLUSIVE ? v > r->min_float : v >= r->min_float;
    return isfinite(v) && above && v <= r->max_float;
}

static void *field(const gf_setting_info *r, gf_settings *s)
{
    return (char *)s + r->offset;
}

static const void *cfield(const gf_setting_info *r, const gf_settings *s)
{
    return (const char *)s + r->offset;
}

int gf__setting_check(const gf_setting_info *r, const gf_settings *s, char *why, size_t why_len)
{
    char range[128], list[160];
    switch (r->type) {
    case GF_SETTING_INT:
    case GF_SETTING_U64: {
        bool u = r->type == GF_SETTING_U64;
        int64_t v = u ? 0 : *(const int *)cfield(r, s);
        uint64_t uv = u ? *(const uint64_t *)cfield(r, s) : 0;
        if (u ? (uv == 0 && (r->flags & GF_SETTING_ZERO_PICKS)) || (uv >= (uint64_t)r->min_int &&
                                                                   uv <= r->max_int)
              : (v == 0 && (r->flags & GF_SETTING_ZERO_PICKS)) ||
                    (v >= r->min_int && (v < 0 || (uint64_t)v <= r->max_int))) {
            if (!r->choices)
                return 0;
            char text[24];
            snprintf(text, sizeof text, "%" PRId64, v);
            for (int i = 0; r->choices[i]; i++)
                if (strcmp(text, r->choices[i]) == 0)
                    return 0;
            join(list, sizeof list, r->choices);
            gf__why(why, why_len, "%s: %" PRId64 " is not one of %s", r->name, v, list);
            return GF_EINVAL;
        }
        int_range(r, range, sizeof range);
        if (u)
            gf__why(why, why_len, "%s: %" PRIu64 " is out of range %s", r->name, uv, range);
        else
            gf__why(why, why_len, "%s: %" PRId64 " is out of range %s", r->name, v, range);
        return GF_EINVAL;
    }
    case GF_SETTING_FLOAT:
    case GF_SETTING_FLOAT4: {
        const float *v = cfield(r, s);
        for (int c = 0; c < (r->type == GF_SETTING_FLOAT ? 1 : 4); c++)
            if (!float_ok(r, v[c])) {
                float_range(r, range, sizeof range);
                if (r->type == GF_SETTING_FLOAT)
                    gf__why(why, why_len, "%s: %g is out of range %s", r->name, v[c], range);
                else
                    gf__why(why, why_len, "%s: channel %d's %g is out of range %s", r->name, c,
                            v[c], range);
                return GF_EINVAL;
            }
        return 0;
    }
    case GF_SETTING_CHOICE: {
        int v = *(const int *)cfield(r, s);
        if (v >= 0 && v < n_names(r->choices))
            return 0;
        join(list, sizeof list, r->choices);
        gf__why(why, why_len, "%s: %d is not a value of %s", r->name, v, list);
        return GF_EINVAL;
    }
    case GF_SETTING_PATH: /* any path, NULL too; what it names is checked where it is used */
    case GF_SETTING_TEXT: /* any text; gf_open parses it */
        return 0;
    default: { /* GF_SETTING_FLAG */
        int v = *(const int *)cfield(r, s);
        if (v == 0 || v == 1)
            return 0;
        gf__why(why, why_len, "%s: %d is not 0 or 1", r->name, v);
        return GF_EINVAL;
    }
    }
}

/* A whole decimal number, nothing around it. */
static bool parse_i64(const char *t, int64_t *out)
{
    char *end;
    if (!*t || isspace((unsigned char)*t))
        return false;
    errno = 0;
    long long v = strtoll(t, &end, 10);
    *out = v;
    return *end == '\0' && errno == 0;
}

static bool parse_u64(const char *t, uint64_t *out)
{
    char *end;
    if (!*t || isspace((unsigned char)*t) || *t == '-' || *t == '+')
        return false;
    errno = 0;
    unsigned long long v = strtoull(t, &end, 10);
    *out = v;
    return *end == '\0' && errno == 0;
}

static bool parse_float(const char *t, size_t len, float *out)
{
    char buf[64], *end;
    if (len == 0 || len >= sizeof buf || isspace((unsigned char)*t))
        return false;
    memcpy(buf, t, len);
    buf[len] = '\0';
    *out = strtof(buf, &end);
    return *end == '\0';
}

static int parse_choice(const gf_setting_info *r, const char *t, int *out, char *why,
                        size_t why_len)
{
    for (int i = 0; r->choices[i]; i++)
        if (strcmp(t, r->choices[i]) == 0 || (r->aliases && strcmp(t, r->aliases[i]) == 0)) {
            *out = i;
            return 0;
        }
    char list[160], also[120] = "";
    join(list, sizeof list, r->choices);
    if (r->aliases) {
        char alist[100];
        join(alist, sizeof alist, r->aliases);
        snprintf(also, sizeof also, " (also %s)", alist);
    }
    gf__why(why, why_len, "%s: '%s' is not one of %s%s", r->name, t, list, also);
    return GF_EINVAL;
}

static int parse_flag(const char *t, int *out)
{
    static const char *const no[] = {"0", "false", "no", "off", NULL};
    static const char *const yes[] = {"1", "true", "yes", "on", NULL};
    for (int i = 0; no[i]; i++) {
        if (strcmp(t, no[i]) == 0)
            return *out = 0, 0;
        if (strcmp(t, yes[i]) == 0)
            return *out = 1, 0;
    }
    return GF_EINVAL;
}

/* value into r's field of s, unchecked against the bounds; GF_EINVAL with
 * why if it is not of the type. */
static int parse_into(const gf_setting_info *r, gf_settings *s, const char *value, char *why,
                      size_t why_len)
{
    switch (r->type) {
    case GF_SETTING_INT: {
        int64_t v;
        if (!parse_i64(value, &v)) {
            gf__why(why, why_len, "%s: '%s' is not an integer", r->name, value);
            return GF_EINVAL;
        }
        if (v < INT32_MIN || v > INT32_MAX) {
            char range[128];
            int_range(r, range, sizeof range);
            gf__why(why, why_len, "%s: %s is out of range %s", r->name, value, range);
            return GF_EINVAL;
        }
        *(int *)field(r, s) = (int)v;
        return 0;
    }
    case GF_SETTING_U64:
        if (!parse_u64(value, field(r, s))) {
            gf__why(why, why_len, "%s: '%s' is not an integer from 0 to %" PRIu64, r->name,
                    value, UINT64_MAX);
            return GF_EINVAL;
        }
        return 0;
    case GF_SETTING_FLOAT:
        if (!parse_float(value, strlen(value), field(r, s))) {
            gf__why(why, why_len, "%s: '%s' is not a number", r->name, value);
            return GF_EINVAL;
        }
        return 0;
    case GF_SETTING_FLOAT4: {
        float *v = field(r, s);
        const char *p = value;
        for (int c = 0;; c++) {
            size_t len = strcspn(p, ",");
            if (c == 4) {
                gf__why(why, why_len, "%s: '%s' has more than 4 values (one per channel)",
                        r->name, value);
                return GF_EINVAL;
            }
            if (!parse_float(p, len, &v[c])) {
                gf__why(why, why_len, "%s: '%s' is not a number or a list of up to 4 (a,b,c)",
                        r->name, value);
                return GF_EINVAL;
            }
            if (!p[len]) {
                /* One value is every channel's, as numpy broadcasts it. */
                for (int k = 1; c == 0 && k < 4; k++)
                    v[k] = v[0];
                return 0;
            }
            p += len + 1;
        }
    }
    case GF_SETTING_CHOICE:
        return parse_choice(r, value, field(r, s), why, why_len);
    case GF_SETTING_PATH: /* the caller's text itself */
    case GF_SETTING_TEXT:
        *(const char **)field(r, s) = value;
        return 0;
    default: /* GF_SETTING_FLAG */
        if (parse_flag(value, field(r, s)) < 0) {
            gf__why(why, why_len, "%s: '%s' is not one of 0, 1, false, true, no, yes, off, on",
                    r->name, value);
            return GF_EINVAL;
        }
        return 0;
    }
}

int gf_settings_set(gf_settings *s, const char *name, const char *value, char *why,
                    size_t why_len)
{
    if (why && why_len)
        why[0] = '\0';
    if (!s || !name || !value) {
        gf__why(why, why_len, "gf_settings_set: %s is NULL", !s ? "s" : !name ? "name" : "value");
        return GF_EINVAL;
    }
    const gf_setting_info *r = gf_setting_find(name);
    if (!r) {
        gf__why(why, why_len, "unknown setting '%s'", name);
        return GF_EINVAL;
    }
    gf_settings t = *s; /* nothing written unless the value is good */
    int rc = parse_into(r, &t, value, why, why_len);
    if (rc == 0)
        rc = gf__setting_check(r, &t, why, why_len);
    if (rc == 0)
        *s = t;
    return rc;
}

/* The shortest text that strtof reads back as v ("0.08", not "0.0799999982"). */
static int float_text(char *buf, size_t len, float v)
{
    char t[32];
    for (int digits = 6; digits < 9; digits++) {
        snprintf(t, sizeof t, "%.*g", digits, v);
        if (strtof(t, NULL) == v)
            return snprintf(buf, len, "%s", t);
    }
    return snprintf(buf, len, "%.9g", v);
}

int gf_settings_get(const gf_settings *s, const char *name, char *buf, size_t len)
{
    const gf_setting_info *r = gf_setting_find(name);
    if (!s || !r || !buf || len == 0)
        return GF_EINVAL;
    const void *at = cfield(r, s);
    int n;
    switch (r->type) {
    case GF_SETTING_U64: n = snprintf(buf, len, "%" PRIu64, *(const uint64_t *)at); break;
    case GF_SETTING_FLOAT: n = float_text(buf, len, *(const float *)at); break;
    case GF_SETTING_FLOAT4: {
        const float *v = at;
        n = 0;
        for (int c = 0; c < 4 && n >= 0 && (size_t)n < len; c++) {
            int k = float_text(buf + n, len - (size_t)n, v[c]);
            n = k < 0 ? k : n + k;
            if (c < 3 && n >= 0 && (size_t)n + 1 < len)
                buf[n++] = ',', buf[n] = '\0';
        }
        break;
    }
    case GF_SETTING_CHOICE: {
        int v = *(const int *)at;
        n = v >= 0 && v < n_names(r->choices) ? snprintf(buf, len, "%s", r->choices[v])
                                               : snprintf(buf, len, "%d", v);
        break;
    }
    case GF_SETTING_PATH:
    case GF_SETTING_TEXT: {
        const char *path = *(const char *const *)at;
        n = snprintf(buf, len, "%s", path ? path : "");
        break;
    }
    default: n = snprintf(buf, len, "%d", *(const int *)at); break;
    }
    return n < 0 ? GF_EINVAL : n >= (int)len ? (int)len - 1 : n;
}
