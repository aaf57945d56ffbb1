/* What the decoder's files share (decode.c, crop.c, decode_stb.c,
 * decode_jpeg.c): the per-thread decoder state, the crop rectangle, the
 * format and pixel-layout codes, and the steps every path ends with. Not
 * for use outside them; the rest of the library includes decode.h. */
#ifndef GF_DECODE_INTERNAL_H
#define GF_DECODE_INTERNAL_H

#include "decode.h"

#include "config.h"
#include "resample.h"

#if GF_HAVE_TURBO
#include <setjmp.h>
#include <stdio.h> /* before jpeglib.h, which needs FILE */
#include <jpeglib.h>
#endif

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
    uint8_t *buf;    /* decoded span (libjpeg) */
    uint8_t *conv;   /* span converted to the output channels */
    size_t buf_cap, conv_cap;
    double total_s, resample_s;
    int flipped;     /* the last sample's flip decision */
    /* LENIENT: the sample decoded although its decoder warned; warn is
     * the reason STRICT would have failed it with. */
    int warned;
    int warn_code;   /* STRICT's code; 0 means GF_ECORRUPT */
    char warn[160];
    const atomic_int *cancel; /* gf__decoder_set_cancel; may be NULL */
#if GF_HAVE_TURBO
    struct jpeg_decompress_struct ci;
    gf__jerr err;
    struct jpeg_progress_mgr progress; /* caps scans, polls cancel */
    JSAMPROW *rows;
    size_t rows_cap; /* in rows */
#endif
};

/* Formats, as sniffed from the first bytes; gf__fmt_name[fmt] for messages. */
enum { F_UNKNOWN, F_JPEG, F_PNG, F_GIF, F_BMP, F_PSD, F_PNM, F_TGA, F_WEBP, F_TIFF };
extern const char *const gf__fmt_name[];

/* Pixel layouts a decoder hands back: 1-4 channels as their count, or
 * Adobe's inverted CMYK. */
enum { K_GRAY = 1, K_GA = 2, K_RGB = 3, K_RGBA = 4, K_CMYK = 5 };

/* The source rectangle (float, source pixels) to resample to the output,
 * and whether to mirror it. */
typedef struct gf__crop {
    double x, y, w, h;
    int flip;
} gf__crop;

/* crop.c: the rectangle of transform t for a W x H image; all randomness
 * from key. */
void gf__crop_plan(const gf__transform *t, int W, int H, uint64_t key, gf__crop *c);

static inline uint32_t gf__be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* 1 (with why) if W x H is over t's pixel limit. */
int gf__too_big(const gf__transform *t, int fmt, uint64_t W, uint64_t H, char *why,
                size_t why_len);

/* Sets the resampler's axes for crop c of an sw x sh decode that is the
 * source scaled by f. Returns 0 or -1 (no memory). */
int gf__decode_set_axes(gf__decoder *d, int sw, int sh, double f, const gf__crop *c,
                        const gf__transform *t);

/* Resamples the span [h.lo, h.hi) x [v.lo, v.hi) of a kind-`kind` image
 * (src at the span's top-left) into dst, converting channels first when
 * the source layout is not already t->channels. */
int gf__decode_finish(gf__decoder *d, const uint8_t *src, size_t stride, int kind,
                      const gf__transform *t, int flip, uint8_t *dst, char *why,
                      size_t why_len);

/* decode_stb.c: anything stb_image reads; fmt as sniffed. */
int gf__decode_stb(gf__decoder *d, const uint8_t *data, size_t len, int fmt,
                   const gf__transform *t, uint64_t key, uint8_t *dst, char *why,
                   size_t why_len);

/* png_check.c: the first chunk whose CRC is wrong (1, in *bad) or 0.
 * Walks from the first chunk to IEND; stops quietly at a bad length. */
typedef struct gf__png_bad {
    size_t at;       /* the chunk's offset */
    char type[5];    /* its type, '?' for bytes that are not letters */
    int before_idat; /* a header chunk: bad in every strictness */
} gf__png_bad;
int gf__png_find_bad_crc(const uint8_t *p, size_t n, gf__png_bad *bad);
/* "PNG: IDAT chunk CRC mismatch (chunk at byte N)" + tail. */
void gf__png_crc_why(const gf__png_bad *bad, const char *tail, char *why, size_t why_len);
/* The stb_image path's CRC check: 0, or GF_ECORRUPT with why; under
 * GF_LENIENT a bad CRC from the first IDAT on is d->warned instead. */
int gf__png_check_crcs(gf__decoder *d, const uint8_t *p, size_t n, const gf__transform *t,
                       char *why, size_t why_len);

#if GF_HAVE_SPNG
/* decode_png.c: PNG through libspng; a context per sample. */
int gf__decode_png(gf__decoder *d, const uint8_t *data, size_t len, const gf__transform *t,
                   uint64_t key, uint8_t *dst, char *why, size_t why_len);
#endif

/* decode_check.c: 0 if a GIF, BMP, TGA, PSD or PNM (any data starting P5
 * or P6, as stb_image reads it) holds what its header promises, else
 * GF_ETRUNC / GF_ECORRUPT with why; under GF_LENIENT a complete but
 * untidy file returns 0 with d->warned set. Other formats: 0. */
int gf__check_stb_format(int fmt, const uint8_t *p, size_t n, gf_strictness s, gf__decoder *d,
                         char *why, size_t why_len);
/* 1 if p passes stb_image's TGA test (TGA has no magic number). */
int gf__sniff_tga(const uint8_t *p, size_t n);

#if GF_HAVE_TURBO
/* decode_jpeg.c: JPEG through libjpeg-turbo; its handle set up in d at
 * create (0 or GF_ENOMEM) and torn down at destroy. */
int gf__decode_jpeg_init(gf__decoder *d);
void gf__decode_jpeg_free(gf__decoder *d);
int gf__decode_jpeg(gf__decoder *d, const uint8_t *data, size_t len, const gf__transform *t,
                    uint64_t key, uint8_t *dst, char *why, size_t why_len);
#endif

#if GF_HAVE_WEBP
/* decode_webp.c: WebP through libwebp (lossy, lossless, alpha; not
 * animated). */
int gf__decode_webp(gf__decoder *d, const uint8_t *data, size_t len, const gf__transform *t,
                    uint64_t key, uint8_t *dst, char *why, size_t why_len);
#endif

#endif
