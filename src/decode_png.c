/* PNG on the decode threads; compiled only where meson found libspng
 * (GF_HAVE_SPNG). libspng reads the chunks up to the first IDAT (IHDR,
 * PLTE, tRNS; a context per sample, about 2 us) and decodes interlaced
 * (Adam7) images whole. A non-interlaced image's rows gpufeed inflates
 * itself with zlib, all rows [0, bottom) into d->buf in one inflate() per
 * IDAT chunk, then unfilters them in place: libspng inflates a row per
 * call, so zlib's fast loop (it wants 258 bytes of room) misses the end
 * of every row; this is about a fifth faster.
 *
 * Pixels equal stb_image's on good files: the rows as the file stores
 * them and expand_row() widens them as stb_image does: gray of 1/2/4
 * bits times 0xff/0x55/0x11, 16 bits narrowed (v * 255 + 32767) / 65535
 * as decode_stb.c narrows them, a palette to RGB, or RGBA when there is a
 * tRNS, and a tRNS on gray or RGB to an alpha of 0 or 255. Neither
 * applies gAMA or sBIT. A palette index past the palette gives black
 * (stb_image reads stale stack bytes there).
 *
 * What each strictness checks (non-interlaced; an interlaced image is
 * read whole by libspng, on to IEND, every CRC and the Adler-32):
 * - STRICT: every chunk's CRC (gpufeed's walk, png_check.c, once), and
 *   the deflate data and filter bytes of the rows down to the crop's last
 *   one. When that is the last row, the stream to its end with its
 *   Adler-32, and the chunks after it to IEND; when it is above, zlib
 *   computes no Adler-32 (inflateValidate). Any damaged byte breaks a
 *   CRC, so storage or transfer damage anywhere is found; deflate data bad
 *   only below the crop under CRCs that match (an encoder's bug) is not,
 *   nor then the Adler-32.
 * - STRICT_WHOLE: every row, then on to IEND: all CRCs, the whole deflate
 *   stream and its Adler-32.
 * - Every mode that reads past the last row reads on only within
 *   trailing_budget(): more is a deflate bomb (STRICT*: an error naming
 *   it; LENIENT: the rows, warned). The inflate loop polls d->cancel.
 * - LENIENT (what PIL accepts): rows down to the crop's last one. A bad
 *   CRC before the first IDAT fails (libspng); a bad CRC of an IDAT read
 *   to its end (or of a chunk after, when the decode reaches the last
 *   row) or a bad Adler-32 passes with a warning (d->warn). A broken
 *   deflate stream or truncation fails in every mode. */
#include "decode_formats.h"

#include "grow.h"

#include <spng.h>
#include <string.h>
#include <zlib.h>

enum { IGNORE_ADLER = 1, IGNORE_CRC = 2 };

/* The layout of the rows libspng returns and what they widen to. */
typedef struct png_fmt {
    int ct, depth, n_src; /* colour type, bits per sample, samples per pixel */
    int kind;             /* K_GRAY .. K_RGBA, as stb_image returns it */
    int trns;             /* a tRNS applies (gray, RGB) */
    int direct;           /* rows are the output already (8-bit, no tRNS) */
    uint8_t scale;        /* gray < 8 bits: stb_image's depth scale */
    uint8_t tc8[4];       /* tRNS colour as stb_image keeps it, <= 8 bits */
    uint16_t tc16[4];     /* and at 16 bits (4: expand_row reads n of them) */
    uint8_t pal[256][4];
} png_fmt;

static inline uint8_t narrow16(uint32_t v)
{
    return (uint8_t)((v * 255 + 32767) / 65535);
}

static inline unsigned sample_at(const uint8_t *raw, size_t x, int depth)
{
    size_t bit = x * (size_t)depth;
    return (unsigned)(raw[bit >> 3] >> (8 - depth - (int)(bit & 7))) & ((1u << depth) - 1);
}

/* Columns [x0, x0 + w) of one raw row to f->kind bytes a pixel at o. */
static void expand_row(const png_fmt *f, const uint8_t *raw, int x0, int w, uint8_t *o)
{
    int n = f->n_src, K = f->kind;
    if (f->ct == SPNG_COLOR_TYPE_INDEXED) {
        for (int x = x0; x < x0 + w; x++, o += K) {
            unsigned i = f->depth == 8 ? raw[x] : sample_at(raw, (size_t)x, f->depth);
            memcpy(o, f->pal[i], (size_t)K);
        }
    } else if (f->depth == 16) {
        const uint16_t *s = (const uint16_t *)(const void *)raw + (size_t)x0 * n;
        for (int x = 0; x < w; x++, s += n, o += K) {
            int key = f->trns;
            for (int k = 0; k < n; k++) {
                o[k] = narrow16(s[k]);
                key &= s[k] == f->tc16[k];
            }
            if (f->trns)
                o[n] = key ? 0 : 255;
        }
    } else if (f->depth < 8) { /* gray */
        for (int x = x0; x < x0 + w; x++, o += K) {
            o[0] = (uint8_t)(sample_at(raw, (size_t)x, f->depth) * f->scale);
            if (f->trns)
                o[1] = o[0] == f->tc8[0] ? 0 : 255;
        }
    } else { /* 8-bit gray or RGB with a tRNS */
        const uint8_t *s = raw + (size_t)x0 * n;
        for (int x = 0; x < w; x++, s += n, o += K) {
            int key = 1;
            for (int k = 0; k < n; k++) {
                o[k] = s[k];
                key &= s[k] == f->tc8[k];
            }
            o[n] = key ? 0 : 255;
        }
    }
}

/* Fills f from the header chunks (libspng reads them, CRCs checked, up to
 * the first IDAT). Returns 0 or libspng's error. */
static int read_format(spng_ctx *ctx, const struct spng_ihdr *ih, png_fmt *f)
{
    static const uint8_t scale[9] = {0, 0xff, 0x55, 0, 0x11, 0, 0, 0, 0x01};
    f->ct = ih->color_type;
    f->depth = ih->bit_depth;
    f->n_src = f->ct == 2 ? 3 : f->ct == 4 ? 2 : f->ct == 6 ? 4 : 1;
    f->scale = f->depth <= 8 ? scale[f->depth] : 1;
    struct spng_trns tr = {0};
    int e = spng_get_trns(ctx, &tr);
    if (e && e != SPNG_ECHUNKAVAIL)
        return e;
    int has_trns = e == 0;
    if (f->ct == SPNG_COLOR_TYPE_INDEXED) {
        struct spng_plte pl;
        if ((e = spng_get_plte(ctx, &pl)))
            return e;
        memset(f->pal, 0, sizeof f->pal);
        for (unsigned i = 0; i < 256; i++) {
            if (i < pl.n_entries) {
                f->pal[i][0] = pl.entries[i].red;
                f->pal[i][1] = pl.entries[i].green;
                f->pal[i][2] = pl.entries[i].blue;
            }
            f->pal[i][3] = has_trns && i < tr.n_type3_entries ? tr.type3_alpha[i] : 255;
        }
        f->kind = has_trns ? K_RGBA : K_RGB;
        f->trns = 0;
    } else {
        f->trns = has_trns && (f->ct == 0 || f->ct == 2);
        f->kind = f->n_src + f->trns;
        uint16_t v[3] = {tr.red, tr.green, tr.blue};
        if (f->ct == SPNG_COLOR_TYPE_GRAYSCALE)
            v[0] = tr.gray;
        for (int k = 0; k < 3 && f->trns; k++) {
            f->tc16[k] = v[k];
            f->tc8[k] = (uint8_t)((v[k] & 255) * f->scale);
        }
    }
    if (!f->trns)
        memset(f->tc16, 0, sizeof f->tc16);
    f->direct = f->depth == 8 && f->ct != SPNG_COLOR_TYPE_INDEXED && !f->trns;
    return 0;
}

/* The reason and code of libspng's error e. */
static int why_of(int e, int flags, const char *tail, const uint8_t *data, size_t len,
                  const gf__transform *t, char *why, size_t why_len)
{
    switch (e) {
    case SPNG_EMEM:
        gf__why(why, why_len, "PNG: out of memory%s", tail);
        return GF_ENOMEM;
    case SPNG_IO_EOF:
    case SPNG_IO_ERROR:
    case SPNG_EIO:
    case SPNG_EOF:
        gf__why(why, why_len, "PNG: premature end of data (truncated?)%s", tail);
        return GF_ETRUNC;
    case SPNG_EUSER_WIDTH:
    case SPNG_EUSER_HEIGHT: /* only past the pixel limit (H, W >= 1) */
        if (len >= 24 && gf__too_big(t, F_PNG, gf__be32(data + 16), gf__be32(data + 20), why,
                                     why_len))
            return GF_ETOOBIG;
        gf__why(why, why_len, "PNG: over the pixel limit%s", tail);
        return GF_ETOOBIG;
    case SPNG_ECHUNK_CRC: {
        gf__png_bad bad;
        if (gf__png_find_bad_crc(data, len, &bad))
            gf__png_crc_why(&bad, tail, why, why_len);
        else
            gf__why(why, why_len, "PNG: chunk CRC mismatch%s", tail);
        return GF_ECORRUPT;
    }
    case SPNG_EIDAT_STREAM:
    case SPNG_EZLIB:
        gf__why(why, why_len, "PNG: %s%s",
                flags & IGNORE_ADLER ? "zlib Adler-32 checksum mismatch in the image data"
                                     : "damaged deflate stream in the image data",
                tail);
        return GF_ECORRUPT;
    case SPNG_EFILTER:
        gf__why(why, why_len, "PNG: invalid scanline filter%s", tail);
        return GF_ECORRUPT;
    case SPNG_EIDAT_TOO_SHORT:
        gf__why(why, why_len, "PNG: the image data ends before the last row%s", tail);
        return GF_ECORRUPT;
    default:
        gf__why(why, why_len, "PNG: corrupt data%s", tail);
        return GF_ECORRUPT;
    }
}

/* libspng's error e: its words, and libspng's text after them. */
static int spng_why(int e, int flags, const uint8_t *data, size_t len, const gf__transform *t,
                    char *why, size_t why_len)
{
    char tail[96];
    snprintf(tail, sizeof tail, " (libspng: %s)", spng_strerror(e));
    return why_of(e, flags, tail, data, len, t, why, why_len);
}

/* The same words for what gpufeed's own inflate met (libspng's code for
 * the kind), with zlib's text when it has one. */
static int zlib_why(int e, int flags, const z_stream *z, const uint8_t *data, size_t len,
                    const gf__transform *t, char *why, size_t why_len)
{
    char tail[96] = "";
    if (z && z->msg)
        snprintf(tail, sizeof tail, " (zlib: %s)", z->msg);
    return why_of(e, flags, tail, data, len, t, why, why_len);
}

/* PNG's unfiltering of `rows` rows in place: each row is its filter byte
 * then rowbytes bytes, the previous row (zeros above the first) already
 * unfiltered. Returns the first bad filter's row or -1. */
static int unfilter(uint8_t *zb, size_t rowbytes, int rows, size_t bpp)
{
    size_t stride = rowbytes + 1;
    for (int y = 0; y < rows; y++) {
        uint8_t *r = zb + stride * y + 1;
        const uint8_t *u = y ? r - stride : NULL;
        size_t i;
        switch (r[-1]) {
        case 0:
            break;
        case 1:
            for (i = bpp; i < rowbytes; i++)
                r[i] = (uint8_t)(r[i] + r[i - bpp]);
            break;
        case 2:
            if (u)
                for (i = 0; i < rowbytes; i++)
                    r[i] = (uint8_t)(r[i] + u[i]);
            break;
        case 3:
            if (u) {
                for (i = 0; i < bpp; i++)
                    r[i] = (uint8_t)(r[i] + (u[i] >> 1));
                for (; i < rowbytes; i++)
                    r[i] = (uint8_t)(r[i] + ((r[i - bpp] + u[i]) >> 1));
            } else {
                for (i = bpp; i < rowbytes; i++)
                    r[i] = (uint8_t)(r[i] + (r[i - bpp] >> 1));
            }
            break;
        case 4:
            if (u) {
                for (i = 0; i < bpp; i++)
                    r[i] = (uint8_t)(r[i] + u[i]); /* Paeth(0, b, 0) = b */
                for (; i < rowbytes; i++) {
                    int a = r[i - bpp], b = u[i], c = u[i - bpp];
                    int pa = b - c, pb = a - c, pc = pa + pb;
                    pa = pa < 0 ? -pa : pa;
                    pb = pb < 0 ? -pb : pb;
                    pc = pc < 0 ? -pc : pc;
                    r[i] = (uint8_t)(r[i] + (pa <= pb && pa <= pc ? a : pb <= pc ? b : c));
                }
            } else { /* Paeth(a, 0, 0) = a */
                for (i = bpp; i < rowbytes; i++)
                    r[i] = (uint8_t)(r[i] + r[i - bpp]);
            }
            break;
        default:
            return y;
        }
    }
    return -1;
}

/* The chunk at pos, whole in the file: its data length, or -1. */
static int64_t chunk_at(const uint8_t *p, size_t n, size_t pos)
{
    if (pos > n || n - pos < 12)
        return -1;
    uint32_t l = gf__be32(p + pos);
    if (l > 0x7fffffffu || l > n - pos - 12)
        return -1;
    return l;
}

/* 1 if the chunk at pos (length l) has a bad CRC, named in *bad. */
static int chunk_crc_bad(const uint8_t *p, size_t pos, uint32_t l, gf__png_bad *bad)
{
    const uint8_t *type = p + pos + 4;
    if ((uint32_t)crc32_z(0, type, 4 + (size_t)l) == gf__be32(type + 4 + l))
        return 0;
    bad->at = pos;
    memcpy(bad->type, type, 4);
    for (int i = 0; i < 4; i++)
        if (!((bad->type[i] | 32) >= 'a' && (bad->type[i] | 32) <= 'z'))
            bad->type[i] = '?';
    bad->type[4] = 0;
    bad->before_idat = 0;
    return 1;
}

/* Past the rows, a stream to its end is checked (its Adler-32) only while
 * it inflates to no more than this: a deflate bomb after one row costs
 * the time of the image, not of the bomb (1000x per byte). */
static size_t trailing_budget(size_t rows_bytes)
{
    return rows_bytes > (64u << 10) ? rows_bytes : 64u << 10;
}

/* The rows [0, bottom) of a non-interlaced PNG, inflated by zlib itself
 * from the IDAT chunks into zb (bottom rows of a filter byte and rowbytes
 * each) in as few inflate() calls as the chunks allow, then unfiltered.
 * libspng has read the chunks before the first IDAT. Returns 0 or a GF_E*
 * code with why; LENIENT damage it lets through goes to warn. A raised
 * *cancel ends it (GF_EBUSY) between inflate() calls. */
static int inflate_rows(const uint8_t *data, size_t len, const gf__transform *t, int H,
                        int bottom, size_t rowbytes, size_t bpp, uint8_t *zb,
                        const atomic_int *cancel, char *warn, size_t warn_len, char *why,
                        size_t why_len)
{
    int lenient = t->strictness == GF_LENIENT, want_end = bottom == H;
    size_t pos = 8;
    int64_t l;
    while ((l = chunk_at(data, len, pos)) >= 0 && memcmp(data + pos + 4, "IDAT", 4) != 0)
        pos += 12 + (size_t)l;
    if (l < 0)
        return zlib_why(SPNG_EOF, 0, NULL, data, len, t, why, why_len);
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit(&z) != Z_OK) {
        gf__why(why, why_len, "PNG: out of memory for zlib");
        return GF_ENOMEM;
    }
    if (!want_end)
        inflateValidate(&z, 0); /* the Adler-32 is never reached */
    uint8_t scratch[4096];
    size_t need = (rowbytes + 1) * (size_t)bottom;
    size_t out_left = need; /* past what avail_out (a uInt) holds */
    size_t trail_left = trailing_budget(need);
    /* 16 MiB an inflate() call at most: a cancel waits for no more */
#define REFILL()                                                                                   \
    if (z.avail_out == 0 && out_left) {                                                            \
        uInt n_ = out_left < (16u << 20) ? (uInt)out_left : 16u << 20;                             \
        z.avail_out = n_;                                                                          \
        out_left -= n_;                                                                            \
    }
    z.next_out = zb;
    REFILL();
    int rows_done = 0, ended = 0, rc = 0, ret = Z_OK;
    gf__png_bad bad;
    for (;;) {
        REFILL();
        if (z.avail_out == 0 && !rows_done) {
            rows_done = 1;
            if (!want_end)
                break;
        }
        if ((l = chunk_at(data, len, pos)) < 0) {
            rc = zlib_why(SPNG_EOF, 0, &z, data, len, t, why, why_len);
            goto out;
        }
        if (memcmp(data + pos + 4, "IDAT", 4) != 0)
            break; /* the stream ran out */
        z.next_in = (Bytef *)(uintptr_t)(data + pos + 8); /* zlib reads it only */
        z.avail_in = (uInt)l;
        while (z.avail_in) {
            if (cancel && atomic_load_explicit(cancel, memory_order_relaxed)) {
                atomic_fetch_add_explicit(&gf__decode_cancels, 1, memory_order_relaxed);
                gf__why(why, why_len, "PNG: decode cancelled (the loader is stopping)");
                rc = GF_EBUSY;
                goto out;
            }
            REFILL();
            if (z.avail_out == 0) {
                if (!rows_done) {
                    rows_done = 1;
                    if (!want_end)
                        goto rows_read;
                }
                if (z.next_out == scratch + sizeof scratch) {
                    if (trail_left < sizeof scratch) {
                        gf__why(why, why_len,
                                "PNG: the image data goes on past the last row (%zu bytes "
                                "more and not ended; the rows hold %zu: a deflate bomb?)",
                                trailing_budget(need) - trail_left, need);
                        if (!lenient) {
                            rc = GF_ECORRUPT;
                            goto out;
                        }
                        if (!warn[0])
                            snprintf(warn, warn_len, "%s", why);
                        why[0] = 0;
                        goto rows_read; /* the rows are whole: LENIENT uses them */
                    }
                    trail_left -= sizeof scratch;
                }
                z.next_out = scratch; /* data past the last row: read, dropped */
                z.avail_out = sizeof scratch;
            }
            ret = inflate(&z, Z_NO_FLUSH);
            if (ret == Z_STREAM_END) {
                ended = 1;
                break;
            }
            if (ret != Z_OK)
                break;
        }
        if (ret == Z_MEM_ERROR) {
            gf__why(why, why_len, "PNG: out of memory for zlib");
            rc = GF_ENOMEM;
            goto out;
        }
        if (ret == Z_DATA_ERROR && z.msg && strcmp(z.msg, "incorrect data check") == 0) {
            /* every row is out: only the Adler-32 is wrong */
            if (!lenient) {
                rc = zlib_why(SPNG_EIDAT_STREAM, IGNORE_ADLER, &z, data, len, t, why, why_len);
                goto out;
            }
            if (!warn[0])
                zlib_why(SPNG_EIDAT_STREAM, IGNORE_ADLER, &z, data, len, t, warn, warn_len);
            ended = 1;
        } else if (ret != Z_OK && ret != Z_STREAM_END) {
            rc = zlib_why(SPNG_EIDAT_STREAM, 0, &z, data, len, t, why, why_len);
            goto out;
        }
        /* a chunk read to its end: libspng compared its CRC there */
        if (lenient && !warn[0] && chunk_crc_bad(data, pos, (uint32_t)l, &bad))
            gf__png_crc_why(&bad, " (checked by gpufeed)", warn, warn_len);
        pos += 12 + (size_t)l;
        if (ended)
            break;
    }
#undef REFILL
    if ((z.avail_out == 0 && !out_left) || z.next_out < zb || z.next_out > zb + need)
        rows_done = 1;
    if (!rows_done) {
        rc = zlib_why(SPNG_EIDAT_TOO_SHORT, 0, &z, data, len, t, why,
                      why_len);
        goto out;
    }
    if (want_end && !ended) {
        rc = zlib_why(SPNG_EIDAT_STREAM, 0, &z, data, len, t, why, why_len);
        goto out;
    }
    if (want_end) { /* on to IEND: the rest of the IDATs, then the last chunks */
        for (;;) {
            if ((l = chunk_at(data, len, pos)) < 0) {
                rc = zlib_why(SPNG_EOF, 0, &z, data, len, t, why, why_len);
                goto out;
            }
            if (lenient && !warn[0] && chunk_crc_bad(data, pos, (uint32_t)l, &bad))
                gf__png_crc_why(&bad, " (checked by gpufeed)", warn, warn_len);
            if (memcmp(data + pos + 4, "IEND", 4) == 0)
                break;
            pos += 12 + (size_t)l;
        }
    }
rows_read: {
    int y = unfilter(zb, rowbytes, bottom, bpp);
    if (y >= 0) {
        gf__why(why, why_len, "PNG: invalid scanline filter %u in row %d",
                zb[(rowbytes + 1) * (size_t)y], y);
        rc = GF_ECORRUPT;
    }
}
out:
    inflateEnd(&z);
    return rc;
}

/* One decode with libspng's checks less `ignore`. Returns 0, a GF_E* code
 * with why, or 1 with *err = libspng's error (the caller words it). */
static int png_pass(gf__decoder *d, const uint8_t *data, size_t len, const gf__transform *t,
                    uint64_t key, uint8_t *dst, int ignore, int *err, char *why, size_t why_len)
{
    spng_ctx *ctx = spng_ctx_new(ignore & IGNORE_ADLER ? SPNG_CTX_IGNORE_ADLER32 : 0);
    if (!ctx) {
        gf__why(why, why_len, "PNG: out of memory for libspng");
        return GF_ENOMEM;
    }
    int crc = ignore & IGNORE_CRC ? SPNG_CRC_USE : SPNG_CRC_ERROR;
    uint64_t lim = t->max_pixels;
    uint32_t dim = lim < 0x7fffffffu ? (uint32_t)lim : 0x7fffffffu;
    /* text, ICC and EXIF chunks are inflated into libspng's cache: cap it */
    int e = spng_set_crc_action(ctx, crc, crc);
    if (!e)
        e = spng_set_image_limits(ctx, dim, dim);
    if (!e)
        e = spng_set_chunk_limits(ctx, 8u << 20, 32u << 20);
    if (!e)
        e = spng_set_png_buffer(ctx, data, len);
    struct spng_ihdr ih;
    if (!e)
        e = spng_get_ihdr(ctx, &ih);
    int rc = 1;
    if (e)
        goto out;
    if (gf__too_big(t, F_PNG, ih.width, ih.height, why, why_len)) {
        rc = GF_ETOOBIG;
        goto out;
    }
    int W = (int)ih.width, H = (int)ih.height;
    gf__crop c;
    if (!(t = gf__plan_whole(d, t, W, H, key, &c, &dst, why, why_len))) {
        rc = GF_ENOMEM;
        goto out;
    }
    const gf__rs_axis *h = &d->rs.h, *v = &d->rs.v;
    int bottom = t->strictness == GF_STRICT_WHOLE || t->full_decode || ih.interlace_method
                     ? H
                     : v->hi;
    png_fmt f;
    if ((e = read_format(ctx, &ih, &f)))
        goto out;
    if (!ih.interlace_method && t->strictness != GF_LENIENT && !(ignore & IGNORE_CRC)) {
        /* libspng reads no IDAT here: every CRC, once, to IEND */
        gf__png_bad bad;
        if (gf__png_find_bad_crc(data, len, &bad)) {
            gf__png_crc_why(&bad, " (checked by gpufeed)", why, why_len);
            rc = GF_ECORRUPT;
            goto out;
        }
    }
    int lo = v->lo, rows = v->hi - v->lo, x0 = h->lo, w = h->hi - h->lo;
    size_t rowbytes = ((size_t)W * f.n_src * f.depth + 7) / 8;
    size_t span_row = (size_t)w * f.kind;
    /* interlaced: the whole image (Adam7's passes cover every row) as
     * libspng returns it, plus the crop's rows widened when not direct;
     * else rows [0, bottom) as inflated (a filter byte before each), a
     * spare row (aligned, host order) and the widened rows */
    size_t zstride = rowbytes + 1;
    size_t span_bytes = f.direct ? 0 : span_row * rows;
    size_t head = ih.interlace_method ? rowbytes * H : zstride * bottom + rowbytes + 64;
    if ((ih.interlace_method ? rowbytes > (SIZE_MAX / 2) / H
                             : zstride > (SIZE_MAX / 2) / (size_t)bottom) ||
        span_bytes > SIZE_MAX / 4 ||
        GF__GROW(&d->buf, &d->buf_cap, head + span_bytes + 128, 4096)) {
        gf__why(why, why_len, "PNG: out of memory for the rows");
        rc = GF_ENOMEM;
        goto out;
    }
    uint8_t *raw = d->buf, *span = d->buf + ((head + 63) & ~(size_t)63);
    if (ih.interlace_method) {
        if (f.depth < 8) /* libspng ORs packed samples into place */
            memset(raw, 0, rowbytes * H);
        if ((e = spng_decode_image(ctx, raw, rowbytes * H, SPNG_FMT_PNG, 0)))
            goto out;
        if (!f.direct)
            for (int y = 0; y < rows; y++)
                expand_row(&f, raw + rowbytes * (lo + y), x0, w, span + span_row * y);
        else
            raw += rowbytes * lo;
    } else {
        char warn[sizeof d->warn];
        warn[0] = 0;
        size_t bpp = (size_t)f.n_src * f.depth / 8;
        rc = inflate_rows(data, len, t, H, bottom, rowbytes, bpp ? bpp : 1, raw, d->cancel,
                          warn, sizeof warn, why, why_len);
        if (rc)
            goto out;
        spng_ctx_free(ctx);
        uint8_t *first = raw + zstride * lo + 1;
        if (f.direct) {
            rc = gf__decode_finish(d, first + (size_t)x0 * f.n_src, zstride, f.kind, t, c.flip,
                                   dst, why, why_len);
        } else {
            /* a row at a time into the spare, aligned, 16 bits in host order */
            uint8_t *spare = raw + ((zstride * bottom + 63) & ~(size_t)63);
            for (int y = 0; y < rows; y++) {
                const uint8_t *r = first + zstride * y;
                if (f.depth == 16) {
                    uint16_t *s16 = (uint16_t *)(void *)spare;
                    for (size_t i = 0; i < rowbytes / 2; i++)
                        s16[i] = (uint16_t)(r[2 * i] << 8 | r[2 * i + 1]);
                    expand_row(&f, spare, x0, w, span + span_row * y);
                } else {
                    expand_row(&f, r, x0, w, span + span_row * y);
                }
            }
            rc = gf__decode_finish(d, span, span_row, f.kind, t, c.flip, dst, why, why_len);
        }
        if (rc == 0 && warn[0]) {
            d->warned = 1;
            snprintf(d->warn, sizeof d->warn, "%s", warn);
        }
        return rc;
    }
    if (bottom == H && (e = spng_decode_chunks(ctx))) /* the last CRCs, on to IEND */
        goto out;
    spng_ctx_free(ctx);
    if (f.direct)
        return gf__decode_finish(d, raw + (size_t)x0 * f.n_src, rowbytes, f.kind, t, c.flip,
                                 dst, why, why_len);
    return gf__decode_finish(d, span, span_row, f.kind, t, c.flip, dst, why, why_len);
out:
    spng_ctx_free(ctx);
    *err = e;
    return rc;
}

int gf__decode_png(gf__decoder *d, const uint8_t *data, size_t len, const gf__transform *t,
                   uint64_t key, uint8_t *dst, char *why, size_t why_len)
{
    int e = 0;
    int rc = png_pass(d, data, len, t, key, dst, 0, &e, why, why_len);
    if (rc != 1)
        return rc;
    int retry = 0;
    if (e == SPNG_EIDAT_STREAM || e == SPNG_EZLIB) {
        /* a data error: the deflate stream, or only its Adler-32? */
        int e2 = 0;
        int ignore = t->strictness == GF_LENIENT ? IGNORE_ADLER | IGNORE_CRC : IGNORE_ADLER;
        char w2[256];
        int rc2 = png_pass(d, data, len, t, key, dst, ignore, &e2, w2, sizeof w2);
        if (rc2 < 0 && rc2 != GF_ECORRUPT) { /* out of memory, say */
            gf__why(why, why_len, "%s", w2);
            return rc2;
        }
        if (rc2 != 1 || (e2 != SPNG_EIDAT_STREAM && e2 != SPNG_EZLIB)) {
            spng_why(e, IGNORE_ADLER, data, len, t, why, why_len);
            if (t->strictness == GF_LENIENT && rc2 == 0) {
                d->warned = 1;
                snprintf(d->warn, sizeof d->warn, "%s", why);
                return 0;
            }
            return GF_ECORRUPT;
        }
    } else if (e == SPNG_ECHUNK_CRC && t->strictness == GF_LENIENT) {
        gf__png_bad bad;
        retry = !gf__png_find_bad_crc(data, len, &bad) || !bad.before_idat;
    }
    rc = spng_why(e, 0, data, len, t, why, why_len);
    if (!retry)
        return rc;
    /* LENIENT, a bad CRC from the first IDAT on: what PIL does not check */
    snprintf(d->warn, sizeof d->warn, "%s", why);
    rc = png_pass(d, data, len, t, key, dst, IGNORE_ADLER | IGNORE_CRC, &e, why, why_len);
    if (rc == 1)
        rc = spng_why(e, 0, data, len, t, why, why_len);
    d->warned = rc == 0;
    if (rc)
        d->warn[0] = 0;
    return rc;
}
