/*
 * Read + decode on the calling thread, through a gf_index (or, for the
 * demo trainer until it adopts gf_index, a loader's index); see samples.h.
 */
#include "samples.h"

#include <stdlib.h>
#include <string.h>

typedef int (*read_fn)(void *src, uint64_t id, void **buf, size_t *len);

static int read_index(void *src, uint64_t id, void **buf, size_t *len)
{
    return gf_index_read(src, id, buf, len, NULL, 0);
}

static int read_loader(void *src, uint64_t id, void **buf, size_t *len)
{
    return gf_read_sample(src, id, buf, len, NULL, 0);
}

static int read_decode(read_fn read, void *src, gf_decoder *dec, const uint64_t *ids, int n,
                       uint64_t epoch, uint8_t *out, size_t cell, uint64_t *errors)
{
    char why[256];
    int good = 0;
    for (int i = 0; i < n; i++) {
        void *buf;
        size_t len;
        uint8_t *dst = out + (size_t)i * cell;
        if (read(src, ids[i], &buf, &len) < 0) {
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

int cli_index_read_decode(gf_index *index, gf_decoder *dec, const uint64_t *ids, int n,
                          uint64_t epoch, uint8_t *out, size_t cell, uint64_t *errors)
{
    return read_decode(read_index, index, dec, ids, n, epoch, out, cell, errors);
}

int cli_read_decode(gf_loader *index, gf_decoder *dec, const uint64_t *ids, int n, uint64_t epoch,
                    uint8_t *out, size_t cell, uint64_t *errors)
{
    return read_decode(read_loader, index, dec, ids, n, epoch, out, cell, errors);
}

int cli_open_index(const char *data, gf_loader **out)
{
    gf_settings s;
    gf_default_settings(&s);
    s.data = data;
    s.batch_size = 1;
    s.prefetch_depth = 1;
    s.threads = 1;
    s.width = s.height = 16;
    s.transform = GF_TRANSFORM_EVAL;
    s.shuffle = 0;
    s.world = 1; /* the whole data set, whatever the launcher says */
    s.device = GF_DEVICE_CPU;
    s.io = GF_IO_POSIX;
    return gf_open(out, &s);
}
