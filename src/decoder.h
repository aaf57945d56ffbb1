/* The decoders' toolbox (decoder.c, crop.c), below decode.c and every
 * format's files: the transform, the per-thread decoder state, the crop
 * rectangle, the format and pixel-layout codes, and the steps every path
 * ends with. Not for use outside the decoder; the rest of the library
 * includes decode.h. */
#ifndef GF_DECODER_H
#define GF_DECODER_H

#include "common.h"
#include "config.h"
#include "resample.h"

#include <stdatomic.h>

#if GF_HAVE_TURBO
#include <setjmp.h>
#include <stdio.h> /* before jpeglib.h, which needs FILE */
#include <jpeglib.h>
#endif

typedef struct gf__transform {
    int out_w, out_h, channels;      /* channels: 1, 3 or 4 */
    gf_transform kind;
    float scale_min, scale_max, ratio_min, ratio_max, flip_prob;
    float crop_fraction;
    uint64_t max_pixels;             /* source width*height limit */
    gf_decoder_kind decoder;         /* AUTO, STB or TURBO */
    gf_interpolation interp;         /* the resampler's filter, or NEAREST */
    int defer_flip;                  /* decide the flip, leave it to the device */
    int full_decode;                 /* 0; 1 = no DCT scaling, no row/column
                                        cropping (tests, benchmarks) */
    int uncropped;                   /* 0; 1 = JPEG: every row and column, at
                                        the DCT scale picked (tests: what a
                                        crop-only decode must equal) */
    gf_strictness strictness;        /* what a decoder warning does */
    /* 0; else a fitted decode (gf_decoder_decode_fit): the whole image,
     * its size decided from the header by gf__plan (longer side at most
     * fit_max_side, or kept when that is 0) into the decoder's own fit
     * buffer; out_w, out_h and dst are placeholders until then */
    int fit;
    int fit_max_side;
    /* settings.augment, parsed (augment.h), or NULL: applied to the cell
     * after the crop and flip; erase_in_cell: RandomErasing there too
     * (a uint8 batch; else the convert job does it) */
    const struct gf__augment *augment;
    int erase_in_cell;
} gf__transform;

/* The source rectangle (float, source pixels) to resample to the output,
 * and whether to mirror it. */
typedef struct gf__crop {
    double x, y, w, h;
    int flip;
} gf__crop;

/* Per-thread decoder state: codec handles, scratch, resampler weights.
 * Never shared between threads. */
typedef struct gf__decoder gf__decoder;

/* Test hooks, counted process-wide (decoder.c): JPEG decodes that ran past
 * GF__JPEG_LONG_SCANS scans, and decodes that saw the cancel flag. While
 * gf__jpeg_hold is set, a decode past GF__JPEG_LONG_SCANS waits there
 * (counted in gf__jpeg_held) until it is cleared or the decode is
 * cancelled: a test can then stop a loader with a decode surely in
 * progress, whatever the scheduler (valgrind runs one thread at a time). */
enum { GF__JPEG_MAX_SCANS = 500, GF__JPEG_LONG_SCANS = 100 };
extern atomic_uint gf__jpeg_long_decodes, gf__decode_cancels, gf__jpeg_held;
extern atomic_int gf__jpeg_hold;

#if GF_HAVE_TURBO
typedef struct gf__jerr {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    int eof;          /* JWRN_JPEG_EOF seen: the data ran out */
    int strict;       /* a warning ends the decode (longjmp), as an error */
    int warned;       /* warnings seen (libjpeg's num_warnings counts too) */
    int warn_code;    /* the first warning's msg_code */
    int stop;         /* J_STOP_*: the progress monitor ended the decode */
    int long_seen;    /* past GF__JPEG_LONG_SCANS scans (counted once) */
    char msg[JMSG_LENGTH_MAX];  /* the error's text */
    char warn[JMSG_LENGTH_MAX]; /* the first warning's text */
} gf__jerr;
#endif

struct gf__decoder {
    gf__resampler rs;
    uint8_t *aug_scratch; /* augment.h's scratch: a cell's bytes */
    size_t aug_cap;
    uint8_t *buf;    /* decoded span (libjpeg) */
    uint8_t *conv;   /* span converted to the output channels */
    size_t buf_cap, conv_cap;
    double total_s, resample_s;
    int flipped;     /* the last sample's flip decision */
    /* The last sample's source size and crop plan, in its pixels: what a
     * mask or boxes member of the same sample is moved by. */
    int src_w, src_h;
    gf__crop planned;
    /* LENIENT: the sample decoded although its decoder warned; warn is
     * the reason STRICT would have failed it with. */
    int warned;
    int warn_code;   /* STRICT's code; 0 means GF_ECORRUPT */
    char warn[160];
    const atomic_int *cancel; /* gf__decoder_set_cancel; may be NULL */
    /* A fitted decode's: its transform with the size decided, its output,
     * and the source's size. */
    gf__transform fitted;
    uint8_t *fit_out;
    size_t fit_cap;
    int fit_src_w, fit_src_h;
#if GF_HAVE_TURBO
    struct jpeg_decompress_struct ci;
    gf__jerr err;
    struct jpeg_progress_mgr progress; /* caps scans, polls cancel */
    JSAMPROW *rows;
    size_t rows_cap; /* in rows */
#endif
};

/* Formats, as sniffed from the first bytes; gf__fmt_name[fmt] for messages. */
/* F_PNM_PLAIN: P1-P4, which stb_image does not read (decode_pnm.c). */
enum { F_UNKNOWN, F_JPEG, F_PNG, F_GIF, F_BMP, F_PSD, F_PNM, F_TGA, F_WEBP, F_TIFF, F_PNM_PLAIN,
       F_COUNT };
extern const char *const gf__fmt_name[];

/* Pixel layouts a decoder hands back: 1-4 channels as their count, or
 * Adobe's inverted CMYK. */
enum { K_GRAY = 1, K_GA = 2, K_RGB = 3, K_RGBA = 4, K_CMYK = 5 };

/* crop.c: the rectangle of transform t for a W x H image; all randomness
 * from key. */
void gf__crop_plan(const gf__transform *t, int W, int H, uint64_t key, gf__crop *c);

/* decoder.c: what every format calls once it knows W x H: the crop plan,
 * and for a fitted decode (t->fit) the output size, d->fitted and *dst
 * (d->fit_out) as well. Returns the transform the decode goes on with (t,
 * or &d->fitted), or NULL when the output buffer cannot be had. */
const gf__transform *gf__plan(gf__decoder *d, const gf__transform *t, int W, int H,
                              uint64_t key, gf__crop *c, uint8_t **dst);

/* gf__plan, then the resampler's axes for a decode at full scale: what
 * every decoder but libjpeg's DCT-scaled one does once it knows W x H.
 * Returns the transform to go on with, or NULL (why set: no memory). */
const gf__transform *gf__plan_whole(gf__decoder *d, const gf__transform *t, int W, int H,
                                    uint64_t key, gf__crop *c, uint8_t **dst, char *why,
                                    size_t why_len);

/* The size a W x H image fits in with its longer side at most max_side
 * (0: no limit): never enlarged, the shorter side rounded half up, at
 * least 1. */
void gf__fit_size(int W, int H, int max_side, int *w, int *h);

static inline uint32_t gf__be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* 1 (with why) if W x H is over t's pixel limit. */
int gf__too_big(const gf__transform *t, int fmt, uint64_t W, uint64_t H, char *why,
                size_t why_len);

/* Sets the resampler's axes for crop c of an sw x sh decode that is the
 * source scaled by f, with t's interpolation (NEAREST: f is 1, its pixels
 * are PIL's only at full scale). Returns 0 or -1 (no memory). */
int gf__decode_set_axes(gf__decoder *d, int sw, int sh, double f, const gf__crop *c,
                        const gf__transform *t);

/* Resamples the span [h.lo, h.hi) x [v.lo, v.hi) of a kind-`kind` image
 * (src at the span's top-left) into dst, converting channels first when
 * the source layout is not already t->channels. */
int gf__decode_finish(gf__decoder *d, const uint8_t *src, size_t stride, int kind,
                      const gf__transform *t, int flip, uint8_t *dst, char *why,
                      size_t why_len);

/* 1 if this build has libjpeg-turbo. */
int gf__have_turbo(void);

#endif
