/* Each format's room, as decode.c dispatches to it (its format table): a
 * decoder of the format's own library, the checks before stb_image, and
 * stb_image for the rest. Each room takes its tools from decoder.h, never
 * from decode.c. Run on the decoding thread, with its own gf__decoder. */
#ifndef GF_DECODE_FORMATS_H
#define GF_DECODE_FORMATS_H

#include "decoder.h"

/* A format's own decoder: t->out_h x t->out_w x t->channels bytes to dst,
 * randomness from key; 0, or a sample error with why, or GF__DECLINED:
 * a file of the format it leaves to stb_image (nothing written). */
enum { GF__DECLINED = 1 };
typedef int gf__format_decode_fn(gf__decoder *d, const uint8_t *data, size_t len,
                                 const gf__transform *t, uint64_t key, uint8_t *dst, char *why,
                                 size_t why_len);
/* A check before stb_image, for what it would miss: 0, or a sample error
 * with why (under GF_LENIENT it may set d->warned instead). */
typedef int gf__format_check_fn(gf__decoder *d, const uint8_t *p, size_t n,
                                const gf__transform *t, char *why, size_t why_len);

/* jpeg_check.c: 1 if the JPEG has no EOI after its first scan. */
int gf__jpeg_truncated(const uint8_t *p, size_t n);
/* jpeg_check.c: what stb_image cannot decode (arithmetic, lossless or
 * hierarchical coding, not 8-bit, over GF__JPEG_MAX_SCANS scans):
 * GF_EFORMAT / GF_ECORRUPT, else 0. */
gf__format_check_fn gf__jpeg_stb_refuses;

/* png_check.c: 1 if the PNG's chunk chain runs out before IEND. */
int gf__png_truncated(const uint8_t *p, size_t n);

/* decode_stb.c: anything stb_image reads; fmt as sniffed. */
int gf__decode_stb(gf__decoder *d, const uint8_t *data, size_t len, int fmt,
                   const gf__transform *t, uint64_t key, uint8_t *dst, char *why,
                   size_t why_len);

/* decode_pnm.c: P1-P4 PNM (data[1] says which), which stb_image does not
 * read. */
int gf__decode_pnm_plain(gf__decoder *d, const uint8_t *data, size_t len,
                         const gf__transform *t, uint64_t key, uint8_t *dst, char *why,
                         size_t why_len);

/* decode_pnm_raw.c: P5 and P6 at maxval 255, resampled from the data in
 * place, any other maxval by gf__decode_pnm_scaled; GF__DECLINED for
 * maxval 255 under decoder = STB and for what stb_image refuses by size,
 * so those keep stb_image's pixels and reasons. */
int gf__decode_pnm_raw(gf__decoder *d, const uint8_t *data, size_t len,
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
/* decode_check.c: a P5 or P6 file's header, as stb_image reads it. */
typedef struct gf__pnm_header {
    uint32_t w, h, maxval; /* each checked: 1..INT32_MAX, maxval <= 65535 */
    size_t raster;         /* the pixels' offset; the raster is whole */
} gf__pnm_header;
/* check_pnm's walk for the raw path: 0 with *hdr, else the stb path's
 * GF_ETRUNC / GF_ECORRUPT and reason. p starts "P5" or "P6". */
int gf__check_pnm_binary(const uint8_t *p, size_t n, gf__pnm_header *hdr, char *why,
                         size_t why_len);
/* decode_pnm.c: a P5 or P6 at a maxval other than 255, its header
 * checked (above) and under the pixel limit: the samples as torchvision's
 * pil_loader gives them. */
int gf__decode_pnm_scaled(gf__decoder *d, const uint8_t *data, const gf__pnm_header *hdr,
                          const gf__transform *t, uint64_t key, uint8_t *dst, char *why,
                          size_t why_len);
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
