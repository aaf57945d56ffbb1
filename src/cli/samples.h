/*
 * The naive input step of a synchronous loop (bench --overlap's baseline,
 * the demo trainer's synchronous loader), on the calling thread: read a
 * sample through an index, decode it with a gf_decoder.
 */
#ifndef GF_CLI_SAMPLES_H
#define GF_CLI_SAMPLES_H

#include <stddef.h>
#include <stdint.h>

#include "gpufeed.h"

#ifdef __cplusplus
extern "C" {
#endif

/* For each of n samples, reads sample ids[i] through the index and decodes
 * it with dec as sample ids[i] of epoch (the loader's transform for it)
 * into out + i * cell. A sample that cannot be read or decoded is counted
 * in *errors and its cell zeroed. Returns the samples decoded. */
int cli_index_read_decode(gf_index *index, gf_decoder *dec, const uint64_t *ids, int n,
                          uint64_t epoch, uint8_t *out, size_t cell, uint64_t *errors);

/* ---- For bench/train.c until it adopts gf_index (then delete) ----------
 * cli_open_index opens a loader for its index only (gf_read_sample,
 * gf_sample_path, gf_sample_label, gf_get_stats): the whole data set, one
 * thread, one 16x16 slot, so it does next to no decoding. Returns gf_open's
 * code; *out is set as gf_open sets it. cli_read_decode is
 * cli_index_read_decode through such a loader. */
int cli_open_index(const char *data, gf_loader **out);
int cli_read_decode(gf_loader *index, gf_decoder *dec, const uint64_t *ids, int n, uint64_t epoch,
                    uint8_t *out, size_t cell, uint64_t *errors);

#ifdef __cplusplus
}
#endif
#endif /* GF_CLI_SAMPLES_H */
