/*
 * gpufeed make-dataset's parts, shared by its files (make_dataset.c says
 * what the command writes):
 *
 *   make_dataset.c        the command: options, usage, cli_make_dataset
 *   make_dataset_image.c  the image: a pure function of (seed, class, index)
 *   make_dataset_write.c  encoding, the worker pool, the folder and shard
 *                         writers
 */
#ifndef GF_CLI_MAKE_DATASET_H
#define GF_CLI_MAKE_DATASET_H

#include <stdint.h>

/* --format's choices, in its order; FMT_WEBP* need libwebp. */
enum { FMT_JPG = 0, FMT_PNG = 1, FMT_WEBP = 2, FMT_WEBP_LOSSLESS = 3 };

/* The file suffix of format f: "jpg", "png", "webp". */
const char *md_format_ext(int f);

typedef struct md_opts {
    const char *dir;
    int classes, per_class, width, height, format, quality, threads, force;
    int shards; /* 0: an ImageFolder; else tar shards */
    uint64_t seed;
} md_opts;

/* Shard files: DIR/train-NNNNNN.tar, six digits, as WebDataset names them. */
#define SHARDS_MAX 1000000

/* ---- the image (make_dataset_image.c); any thread, one scratch each ---- */

typedef struct md_scratch {
    float *img;   /* w*h*3 linear-ish RGB in [0, 255] */
    float *cloud; /* coarse fields */
    float *tex;
    float *fine;  /* fine surface detail (FINE_CELL grid, fw x fh) */
    int fw, fh;
    uint8_t *rgb; /* w*h*3 output */
    int gw, gh;
} md_scratch;

/* Buffers for width x height images: 0, or -1 (out of memory; free it
 * anyway). */
int md_scratch_init(md_scratch *sc, int width, int height);
void md_scratch_free(md_scratch *sc);
/* Image idx of class c into sc->rgb (width x height x 3). */
void md_render(const md_opts *o, int c, int idx, md_scratch *sc);

/* ---- the writers (make_dataset_write.c) ---------------------------------- */

/* Renders and writes the set o describes with o->threads workers; see
 * cli_make_dataset. */
int md_make(const char *cmd, const md_opts *o, int quiet);

#endif /* GF_CLI_MAKE_DATASET_H */
