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

#ifdef __cplusplus
}
#endif
#endif /* GF_CLI_SAMPLES_H */
