/*
 * Compiles the installed header with nothing before it (as C99, pedantic),
 * and pins the ABI: the size and key offsets of every struct a caller
 * allocates (gf_settings, gf_stats, gf_sample_error, gf_state,
 * gf_probe_info) or reads fields of (gf_batch). A change that moves one
 * fails this build. If it was meant, it is an ABI break: update the
 * numbers and the library's version (meson.build) together; a new field
 * takes its bytes from the struct's reserved[] instead.
 */
#include "gpufeed.h"

#include <stddef.h>
#include <string.h>

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define ABI_CHECK(cond) _Static_assert(cond, #cond)
#else /* C99: an array of negative size when cond is false */
#define ABI_CHECK_AT_(cond, line) typedef char abi_check_##line[(cond) ? 1 : -1]
#define ABI_CHECK_LINE_(cond, line) ABI_CHECK_AT_(cond, line)
#define ABI_CHECK(cond) ABI_CHECK_LINE_(cond, __LINE__)
#endif

/* The numbers are those of LP64 Linux (x86_64, aarch64). */
#if defined(__LP64__) && (defined(__x86_64__) || defined(__aarch64__))
#define SIZE(T, n) ABI_CHECK(sizeof(T) == (n))
#define AT(T, f, n) ABI_CHECK(offsetof(T, f) == (n))

SIZE(gf_settings, 376);
AT(gf_settings, data, 0);
AT(gf_settings, seed, 8);
AT(gf_settings, batch_size, 24);
AT(gf_settings, max_pixels, 88);
AT(gf_settings, on_sample_error, 128);
AT(gf_settings, device, 144);
AT(gf_settings, mean, 160);
AT(gf_settings, copy_stream_per_slot, 224);
AT(gf_settings, strictness, 228);
AT(gf_settings, on_sample_warning, 232);
AT(gf_settings, extensions, 248);
AT(gf_settings, folder_walk, 252);
AT(gf_settings, read_budget_bytes, 256);
AT(gf_settings, on_shard_error, 264);
AT(gf_settings, max_held_batches, 268);
AT(gf_settings, order, 272);
AT(gf_settings, shard_window, 276);
AT(gf_settings, ca_file, 280);
AT(gf_settings, remote_connections, 288);
AT(gf_settings, prefetch_shards, 300);
AT(gf_settings, remote_buffer_bytes, 304);
AT(gf_settings, cache_dir, 312);
AT(gf_settings, cache_bytes, 320);
AT(gf_settings, remote_deadline_s, 328);
AT(gf_settings, fields, 336); /* after 4 bytes of padding */
AT(gf_settings, interpolation, 344);
AT(gf_settings, augment, 352); /* after 4 bytes of padding */
AT(gf_settings, mix_epoch, 360);
AT(gf_settings, mix_labels, 364);
AT(gf_settings, reserved, 368);

SIZE(gf_sample_error, 432);
AT(gf_sample_error, code, 8);
AT(gf_sample_error, path, 12);
AT(gf_sample_error, reason, 268);

SIZE(gf_stats, 4608);
AT(gf_stats, samples, 0);
AT(gf_stats, errors_by_kind, 80);
AT(gf_stats, recent, 144);
AT(gf_stats, n_recent, 3600);
AT(gf_stats, device_note, 3684);
AT(gf_stats, dataset_warning, 3928);
AT(gf_stats, shards, 4088);
AT(gf_stats, h2d_bytes, 4096);
AT(gf_stats, h2d_copies, 4104);
AT(gf_stats, h2d_s, 4112);
AT(gf_stats, decode_warnings, 4120);
AT(gf_stats, decoded_spng, 4128);
AT(gf_stats, decoded_webp, 4136);
AT(gf_stats, folder_dirs, 4144);
AT(gf_stats, folder_dirs_again, 4152);
AT(gf_stats, folder_skipped, 4160);
AT(gf_stats, read_budget_bytes, 4224);
AT(gf_stats, read_bytes_peak, 4232);
AT(gf_stats, read_budget_waits, 4240);
AT(gf_stats, shards_damaged, 4248);
AT(gf_stats, shard_members_lost, 4256);
AT(gf_stats, remote_requests, 4264);
AT(gf_stats, remote_wait_s, 4288);
AT(gf_stats, page_cache_reads, 4296);
AT(gf_stats, page_cache_misses, 4304);
AT(gf_stats, cache_hits, 4312);
AT(gf_stats, cache_warning, 4328);
AT(gf_stats, resume_note, 4520);
AT(gf_stats, reserved, 4600);

SIZE(gf_state, 80);
AT(gf_state, seed, 16);
AT(gf_state, epoch, 24);
AT(gf_state, position, 32);
AT(gf_state, samples, 40);
AT(gf_state, index_hash, 48);
AT(gf_state, rest_world, 56);
AT(gf_state, rest_position, 64);
AT(gf_state, rest_taken, 72);

SIZE(gf_probe_info, 352);
SIZE(gf_shard_index_info, 40);
SIZE(gf_shard_index_opts, 64);
AT(gf_shard_index_opts, remote_settings, 8);
AT(gf_shard_index_opts, fields, 16);
AT(gf_shard_index_opts, reserved, 24);
AT(gf_probe_info, uring_why, 24);
AT(gf_probe_info, kernel, 184);
AT(gf_probe_info, resample_isa, 272);
AT(gf_probe_info, have_spng, 288);
AT(gf_probe_info, reserved, 296);

/* The library's, but callers read these fields where they are. */
AT(gf_batch, data, 0);
AT(gf_batch, ready_event, 24);
AT(gf_batch, pixels, 32);
AT(gf_batch, labels, 40);
AT(gf_batch, indices, 48);
AT(gf_batch, count, 56);
AT(gf_batch, channels, 68);
AT(gf_batch, epoch, 72);
AT(gf_batch, position, 80);
AT(gf_batch, n_fields, 92);
AT(gf_batch, fields, 96);
AT(gf_batch, targets, 104);
AT(gf_batch, n_classes, 112);
AT(gf_batch, sources, 120);

SIZE(gf_source_stats, 104);
AT(gf_source_stats, label_offset, 32);
AT(gf_source_stats, samples, 40);
AT(gf_source_stats, reserved, 72);
#endif

/* Fixed, whatever the number of kinds. */
ABI_CHECK(GF_SAMPLE_ERROR_KINDS <= GF_SAMPLE_ERROR_KINDS_MAX);
ABI_CHECK(GF_VERSION_HEX ==
          (GF_VERSION_MAJOR << 16 | GF_VERSION_MINOR << 8 | GF_VERSION_PATCH));

/* GF_STATS_MAP: its rows in the struct's order, and they with the arrays
 * that are not rows cover every byte of gf_stats but alignment padding
 * (a field missing from the table fails here). 1 if so. */
#define ALIGN_U64 8
#define ALIGN_DBL 8
#define ALIGN_INT 4
#define ALIGN_FLAG 4
#define ALIGN_STR 1
static int stats_map_covers(void)
{
    struct field {
        size_t at, size, align;
    } f[] = {
#define ROW_(kind, name) {offsetof(gf_stats, name), sizeof(((gf_stats *)0)->name), ALIGN_##kind},
        GF_STATS_MAP(ROW_)
#undef ROW_
    };
    const struct field others[] = {
        {offsetof(gf_stats, errors_by_kind), sizeof(((gf_stats *)0)->errors_by_kind), 8},
        {offsetof(gf_stats, recent), sizeof(((gf_stats *)0)->recent), 8},
        {offsetof(gf_stats, n_recent), sizeof(((gf_stats *)0)->n_recent), 4},
        {offsetof(gf_stats, folder_skipped), sizeof(((gf_stats *)0)->folder_skipped), 8},
        {offsetof(gf_stats, reserved), sizeof(((gf_stats *)0)->reserved), 1},
    };
    const size_t n = sizeof f / sizeof f[0], n_others = sizeof others / sizeof others[0];
    size_t end = 0, i = 0, k = 0;
    for (i = 1; i < n; i++)
        if (f[i].at <= f[i - 1].at)
            return 0; /* out of the struct's order */
    i = 0;
    while (i < n || k < n_others) { /* merged by offset */
        const struct field *next =
            k == n_others || (i < n && f[i].at < others[k].at) ? &f[i++] : &others[k++];
        if (next->at != (end + next->align - 1) / next->align * next->align)
            return 0; /* overlapping, or a gap more than padding: a field not listed */
        end = next->at + next->size;
    }
    return sizeof(gf_stats) == (end + 7) / 8 * 8;
}

int main(void)
{
    gf_settings s;
    gf_default_settings(&s);
    if (s.batch_size <= 0)
        return 1;
    /* The library and the header it was built with agree. */
    if (strcmp(gf_version(), GF_VERSION) != 0)
        return 2;
    /* The documented index and the function give the same kind. */
    if (gf_sample_error_kind(GF_ETOOBIG) != GF_ENOENT - GF_ETOOBIG ||
        gf_sample_error_kind(GF_ENOENT) != GF_KIND_ENOENT || gf_sample_error_kind(GF_EOF) != -1)
        return 3;
    gf_free(NULL);
    if (!stats_map_covers())
        return 4;
    return 0;
}
