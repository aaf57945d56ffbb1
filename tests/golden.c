/*
 * Golden checksums of delivered batches, through the public API only, so
 * that a refactor of the library's insides can be shown to change no byte.
 *
 *   golden DATA_ROOT        prints one line per case: name, batches,
 *                           samples, FNV-1a 64 of (pixels or data, labels,
 *                           indices, epoch, position) over every batch
 *
 * DATA_ROOT holds the sets tests/golden.sh makes with `gpufeed
 * make-dataset`: jpg/, png/, shards/ and bad/ (jpg/ with damaged files).
 * Each case runs at several thread counts and ring depths; they must agree
 * (determinism), and golden.sh compares the one line against
 * tests/golden-DECODER.txt, recorded before the house refactor.
 */
#include "gpufeed.h"
/* Header-only (no link to the library's insides): gf__fnv1a64. */
#include "../src/mix.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct golden_case {
    const char *name;
    const char *set;
    gf_transform transform;
    gf_dtype dtype;
    gf_layout layout;
    int batch_size, size, epochs, drop_last;
    uint64_t seek_epoch, seek_pos; /* 0, 0: no seek */
} golden_case;

static const golden_case cases[] = {
    {"jpg-train-u8", "jpg", GF_TRANSFORM_TRAIN, GF_DTYPE_UINT8, GF_LAYOUT_NHWC, 7, 40, 2, 0, 0, 0},
    {"jpg-eval-u8", "jpg", GF_TRANSFORM_EVAL, GF_DTYPE_UINT8, GF_LAYOUT_NHWC, 8, 33, 1, 0, 0, 0},
    {"jpg-train-f32-nchw", "jpg", GF_TRANSFORM_TRAIN, GF_DTYPE_FLOAT32, GF_LAYOUT_NCHW, 5, 24, 1, 0, 0, 0},
    {"jpg-train-f16-droplast", "jpg", GF_TRANSFORM_TRAIN, GF_DTYPE_FLOAT16, GF_LAYOUT_NHWC, 9, 24, 2, 1, 0, 0},
    {"jpg-train-seek", "jpg", GF_TRANSFORM_TRAIN, GF_DTYPE_UINT8, GF_LAYOUT_NHWC, 6, 32, 3, 0, 1, 18},
    {"png-train-u8", "png", GF_TRANSFORM_TRAIN, GF_DTYPE_UINT8, GF_LAYOUT_NHWC, 7, 40, 1, 0, 0, 0},
    {"png-eval-bf16", "png", GF_TRANSFORM_EVAL, GF_DTYPE_BFLOAT16, GF_LAYOUT_NCHW, 8, 28, 1, 0, 0, 0},
    {"shards-train-u8", "shards/train-{000000..000002}.tar", GF_TRANSFORM_TRAIN, GF_DTYPE_UINT8, GF_LAYOUT_NHWC, 7, 40, 2, 0, 0, 0},
    {"shards-eval-seek", "shards/train-{000000..000002}.tar", GF_TRANSFORM_EVAL, GF_DTYPE_UINT8, GF_LAYOUT_NHWC, 5, 32, 2, 0, 1, 15},
    {"bad-train-skip", "bad", GF_TRANSFORM_TRAIN, GF_DTYPE_UINT8, GF_LAYOUT_NHWC, 7, 40, 2, 0, 0, 0},
    {"bad-eval-skip", "bad", GF_TRANSFORM_EVAL, GF_DTYPE_FLOAT32, GF_LAYOUT_NHWC, 4, 24, 1, 0, 0, 0},
};

static const int thread_counts[] = {1, 2, 3};
static const int depths[] = {1, 2, 4};

static size_t dtype_bytes(gf_dtype t)
{
    return t == GF_DTYPE_FLOAT32 ? 4 : t == GF_DTYPE_UINT8 ? 1 : 2;
}

/* 0 and the checksum, or -1 after printing why. */
static int run_case(const char *root, const golden_case *c, int threads, int depth,
                    uint64_t *hash, uint64_t *batches, uint64_t *samples, uint64_t *errors)
{
    char data[4096];
    snprintf(data, sizeof data, "%s/%s", root, c->set);
    gf_settings s;
    gf_default_settings(&s);
    s.data = data;
    s.device = GF_DEVICE_CPU;
    s.seed = 1234;
    s.batch_size = c->batch_size;
    s.height = s.width = c->size;
    s.epochs = (uint64_t)c->epochs;
    s.drop_last = c->drop_last;
    s.threads = threads;
    s.prefetch_depth = depth;
    s.transform = c->transform;
    s.dtype = c->dtype;
    s.layout = c->layout;
    if (c->dtype != GF_DTYPE_UINT8)
        for (int k = 0; k < 3; k++) {
            s.mean[k] = 100.0f + 10.0f * (float)k;
            s.std[k] = 50.0f + 5.0f * (float)k;
        }
    gf_loader *l = NULL;
    if (gf_open(&l, &s) < 0) {
        fprintf(stderr, "golden: %s: open: %s\n", c->name, gf_last_error(l));
        gf_close(&l);
        return -1;
    }
    if ((c->seek_epoch || c->seek_pos) && gf_seek(l, c->seek_epoch, c->seek_pos) < 0) {
        fprintf(stderr, "golden: %s: seek: %s\n", c->name, gf_last_error(l));
        gf_close(&l);
        return -1;
    }
    uint64_t h = GF__FNV1A64_BASIS;
    *batches = *samples = 0;
    gf_batch *b;
    int rc;
    while ((rc = gf_next(l, &b)) == 0) {
        size_t px = (size_t)b->count * (size_t)b->height * (size_t)b->width * (size_t)b->channels;
        h = gf__fnv1a64(h, b->data, px * dtype_bytes(b->dtype));
        h = gf__fnv1a64(h, b->labels, (size_t)b->count * sizeof *b->labels);
        h = gf__fnv1a64(h, b->indices, (size_t)b->count * sizeof *b->indices);
        h = gf__fnv1a64(h, &b->epoch, sizeof b->epoch);
        h = gf__fnv1a64(h, &b->position, sizeof b->position);
        ++*batches;
        *samples += (uint64_t)b->count;
        gf_release(l, b);
    }
    if (rc != GF_EOF) {
        fprintf(stderr, "golden: %s: next: %s\n", c->name, gf_last_error(l));
        gf_close(&l);
        return -1;
    }
    gf_stats st;
    gf_get_stats(l, &st);
    *errors = st.errors;
    gf_close(&l);
    *hash = h;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: golden DATA_ROOT\n");
        return 2;
    }
    int failed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const golden_case *c = &cases[i];
        uint64_t first = 0, first_batches = 0, first_samples = 0, first_errors = 0;
        for (size_t t = 0; t < sizeof thread_counts / sizeof thread_counts[0]; t++)
            for (size_t d = 0; d < sizeof depths / sizeof depths[0]; d++) {
                uint64_t h, nb, ns, ne;
                if (run_case(argv[1], c, thread_counts[t], depths[d], &h, &nb, &ns, &ne) < 0)
                    return 1;
                if (t == 0 && d == 0) {
                    first = h, first_batches = nb, first_samples = ns, first_errors = ne;
                } else if (h != first || nb != first_batches || ns != first_samples ||
                           ne != first_errors) {
                    fprintf(stderr, "golden: %s: %d threads, depth %d gives %016" PRIx64
                            " (%" PRIu64 " batches, %" PRIu64 " samples, %" PRIu64 " errors) but 1 thread,"
                            " depth 1 gave %016" PRIx64 " (%" PRIu64 ", %" PRIu64 ", %" PRIu64 ")\n",
                            c->name, thread_counts[t], depths[d], h, nb, ns, ne, first,
                            first_batches, first_samples, first_errors);
                    failed = 1;
                }
            }
        printf("%s batches %" PRIu64 " samples %" PRIu64 " errors %" PRIu64 " %016" PRIx64 "\n",
               c->name, first_batches, first_samples, first_errors, first);
    }
    return failed;
}
