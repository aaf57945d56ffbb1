/*
 * Read + decode on the calling thread, through a gf_index; see samples.h.
 */
#include "samples.h"

#include <stdlib.h>
#include <string.h>

int cli_index_read_decode(gf_index *index, gf_decoder *dec, const uint64_t *ids, int n,
                          uint64_t epoch, uint8_t *out, size_t cell, uint64_t *errors)
{
    char why[256];
    int good = 0;
    for (int i = 0; i < n; i++) {
        void *buf;
        size_t len;
        uint8_t *dst = out + (size_t)i * cell;
        if (gf_index_read(index, ids[i], &buf, &len, NULL, 0) < 0) {
            memset(dst, 0, cell);
            (*errors)++;
            continue;
        }
        if (gf_decoder_decode(dec, buf, len, epoch, ids[i], dst, why, sizeof why) < 0) {
            memset(dst, 0, cell);
            (*errors)++;
        } else {
            good++;
        }
        gf_free(buf);
    }
    return good;
}
