/* Does a GIF, BMP, TGA, PSD or PNM hold what its header promises? Run on
 * the decode threads by decode_stb.c before stb_image, which reads past
 * the end of its data as zeros and so "decodes" a file cut in half, and
 * tolerates header nonsense (PNM maxval 0, a 2^31-entry BMP palette, a
 * 0x0 GIF frame). The PNM walk also heads the raw path
 * (decode_pnm_raw.c), so both paths fail a file alike.
 *
 * Each check walks the header and, for RLE/LZW formats, the packet or
 * block structure: linear in the file, every read bounds-checked, sizes
 * in uint64_t with overflow checks, nothing allocated. Outcomes, in every
 * strictness: the data runs out = GF_ETRUNC; a header field no writer
 * would produce = GF_ECORRUPT. A file that is complete but untidy (a GIF
 * with no trailer after its last whole frame; a later GIF frame outside
 * the screen; a BMP palette overlapping the pixels) fails STRICT and
 * passes LENIENT with d->warn set. Bytes after the image (a TGA footer, a
 * BMP V5 profile, concatenated PNMs, anything after a GIF trailer) are
 * allowed in every mode. A GIF's LZW minimum code size may be 9-11 (valid,
 * rare): frame 0's codes are then walked for a literal stb_image cannot
 * hold in a byte. What stb_image does not read at all (RLE BMP,
 * PSB, ZIP-compressed PSD) is left for it to refuse by name. */
#include "decode_formats.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct chk {
    const uint8_t *p;
    size_t n;
    const char *fmt; /* the format's name, first in every reason */
    int lenient;
    gf__decoder *d;
    char *why;
    size_t why_len;
} chk;

static void vsay(char *buf, size_t len, const char *fmt_name, const char *fmt, va_list ap)
{
    if (!buf || !len)
        return;
    int k = snprintf(buf, len, "%s: ", fmt_name);
    if (k >= 0 && (size_t)k < len)
        vsnprintf(buf + k, len - (size_t)k, fmt, ap);
}

/* Fails the file with code and a reason. */
static int fail(chk *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(c->why, c->why_len, c->fmt, fmt, ap);
    va_end(ap);
    return code;
}

/* Complete but untidy: STRICT fails it; LENIENT keeps the first such
 * reason as the sample's warning and returns 0 (go on checking). */
static int untidy(chk *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (!c->lenient)
        vsay(c->why, c->why_len, c->fmt, fmt, ap);
    else if (!c->d->warned) {
        c->d->warned = 1;
        c->d->warn_code = code;
        vsay(c->d->warn, sizeof c->d->warn, c->fmt, fmt, ap);
    }
    va_end(ap);
    return c->lenient ? 0 : code;
}

static unsigned le16(const uint8_t *p)
{
    return (unsigned)p[0] | (unsigned)p[1] << 8;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)le16(p) | (uint32_t)le16(p + 2) << 16;
}

static unsigned be16(const uint8_t *p)
{
    return (unsigned)p[0] << 8 | p[1];
}

/* a * b, or UINT64_MAX when that overflows (never a real size). */
static uint64_t mul(uint64_t a, uint64_t b)
{
    return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

typedef unsigned long long ull; /* for printf */

/* ---- BMP ---- */

/* RLE4/RLE8: the stream must reach its end-of-bitmap escape (00 01). */
static int bmp_rle(chk *c, size_t pos, int rle4)
{
    while (c->n - pos >= 2) {
        unsigned count = c->p[pos], op = c->p[pos + 1];
        pos += 2;
        if (count || op == 0) /* a run, or end of line */
            continue;
        if (op == 1)
            return 0;
        if (op == 2) { /* delta: dx, dy follow */
            if (c->n - pos < 2)
                break;
            pos += 2;
            continue;
        }
        size_t bytes = rle4 ? (op + 1) / 2 : op; /* absolute run, padded to 16 bits */
        bytes += bytes & 1;
        if (c->n - pos < bytes)
            break;
        pos += bytes;
    }
    return fail(c, GF_ETRUNC, "RLE data ends at byte %zu without its end-of-bitmap marker "
                "(truncated?)", c->n);
}

static int check_bmp(chk *c)
{
    const uint8_t *p = c->p;
    size_t n = c->n;
    if (n < 18)
        return fail(c, GF_ETRUNC, "header ends at byte %zu (truncated?)", n);
    uint32_t off = le32(p + 10), hsz = le32(p + 14);
    if (hsz == 52 || hsz == 64)
        return 0; /* V2, OS/2 2.x: stb_image refuses them by name */
    if (hsz != 12 && hsz != 40 && hsz != 56 && hsz != 108 && hsz != 124)
        return fail(c, GF_ECORRUPT, "header size %lu", (unsigned long)hsz);
    if (n < 14 + hsz)
        return fail(c, GF_ETRUNC, "header ends at byte %zu of %lu (truncated?)", n,
                    (unsigned long)(14 + hsz));
    int64_t w, h;
    unsigned planes, bpp;
    uint32_t comp = 0, colors = 0;
    if (hsz == 12) {
        w = le16(p + 18);
        h = le16(p + 20);
        planes = le16(p + 22);
        bpp = le16(p + 24);
    } else {
        w = (int32_t)le32(p + 18);
        h = (int32_t)le32(p + 22);
        planes = le16(p + 26);
        bpp = le16(p + 28);
        comp = le32(p + 30);
        colors = le32(p + 46);
    }
    if (planes != 1)
        return fail(c, GF_ECORRUPT, "%u planes (not 1)", planes);
    if (bpp != 1 && bpp != 4 && bpp != 8 && bpp != 16 && bpp != 24 && bpp != 32)
        return fail(c, GF_ECORRUPT, "%u bits per pixel", bpp);
    if (comp > 6 && (comp < 11 || comp > 13))
        return fail(c, GF_ECORRUPT, "unknown compression %lu", (unsigned long)comp);
    if (comp >= 4)
        return 0; /* JPEG, PNG, CMYK: stb_image refuses them by name */
    if ((comp == 1 && bpp != 8) || (comp == 2 && bpp != 4) ||
        (comp == 3 && bpp != 16 && bpp != 32))
        return fail(c, GF_ECORRUPT, "compression %lu with %u bits per pixel",
                    (unsigned long)comp, bpp);
    if (w <= 0 || h == 0 || h == INT32_MIN)
        return fail(c, GF_ECORRUPT, "%lldx%lld image", (long long)w, (long long)h);
    uint64_t rows = (uint64_t)(h < 0 ? -h : h);
    size_t hdr_end = 14 + hsz + (hsz == 40 && comp == 3 ? 12 : 0); /* + bit masks */
    if (off < hdr_end)
        return fail(c, GF_ECORRUPT, "pixel data at byte %lu, inside the %zu-byte header",
                    (unsigned long)off, hdr_end);
    if (off > n)
        return fail(c, GF_ETRUNC, "pixel data starts at byte %lu of a %zu-byte file (truncated?)",
                    (unsigned long)off, n);
    uint64_t entries = colors ? colors : bpp <= 8 ? 1u << bpp : 0;
    if (bpp <= 8 && entries > 256)
        return fail(c, GF_ECORRUPT, "palette of %llu entries (at most 256 for %u bits per pixel)",
                    (ull)entries, bpp);
    uint64_t pal_end = hdr_end + entries * (hsz == 12 ? 3 : 4);
    if (pal_end > n)
        return fail(c, GF_ECORRUPT, "palette of %llu entries runs past the end of the %zu-byte "
                    "file", (ull)entries, n);
    int rc;
    if (pal_end > off &&
        (rc = untidy(c, GF_ECORRUPT, "palette of %llu entries (to byte %llu) overlaps the pixel "
                     "data at byte %lu", (ull)entries, (ull)pal_end, (unsigned long)off)))
        return rc;
    if (comp == 1 || comp == 2)
        return bmp_rle(c, off, comp == 2);
    uint64_t stride = ((uint64_t)w * bpp + 31) / 32 * 4; /* rows padded to 4 bytes */
    uint64_t size = mul(stride, rows);
    if (size > n - off)
        return fail(c, GF_ETRUNC, "pixel data ends at byte %zu of a %llu-byte array (truncated?)",
                    n - off, (ull)size);
    return 0;
}

/* ---- TGA ---- */

static uint8_t byte_at(const uint8_t *p, size_t n, size_t i)
{
    return i < n ? p[i] : 0; /* stb_image reads zeros past the end */
}

/* stbi__tga_test: the header tests stb_image decides TGA by (it tries TGA
 * last, and no other format it reads has byte 1 below 2). */
int gf__sniff_tga(const uint8_t *p, size_t n)
{
    unsigned cmap = byte_at(p, n, 1), type = byte_at(p, n, 2), bpp = byte_at(p, n, 16);
    if (cmap > 1)
        return 0;
    if (cmap == 1) {
        unsigned entry = byte_at(p, n, 7);
        if ((type != 1 && type != 9) ||
            (entry != 8 && entry != 15 && entry != 16 && entry != 24 && entry != 32) ||
            (bpp != 8 && bpp != 16))
            return 0;
    } else if (type != 2 && type != 3 && type != 10 && type != 11) {
        return 0;
    }
    unsigned w = byte_at(p, n, 12) | byte_at(p, n, 13) << 8;
    unsigned h = byte_at(p, n, 14) | byte_at(p, n, 15) << 8;
    return w >= 1 && h >= 1 && (bpp == 8 || bpp == 15 || bpp == 16 || bpp == 24 || bpp == 32);
}

static int check_tga(chk *c)
{
    const uint8_t *p = c->p;
    size_t n = c->n;
    if (n < 18)
        return fail(c, GF_ETRUNC, "header ends at byte %zu of 18 (truncated?)", n);
    unsigned cmap = p[1], type = p[2], cm_len = le16(p + 5), cm_bits = p[7];
    unsigned w = le16(p + 12), h = le16(p + 14), bpp = p[16];
    if (w == 0 || h == 0)
        return fail(c, GF_ECORRUPT, "%ux%u image", w, h);
    if (cmap == 1 && cm_len == 0)
        return fail(c, GF_ECORRUPT, "colour map of 0 entries");
    if (cmap == 1 && cm_bits != 8 && cm_bits != 15 && cm_bits != 16 && cm_bits != 24 &&
        cm_bits != 32)
        return fail(c, GF_ECORRUPT, "colour map entries of %u bits", cm_bits);
    uint64_t pos = 18 + (uint64_t)p[0] + (cmap == 1 ? (uint64_t)cm_len * ((cm_bits + 7) / 8) : 0);
    if (pos > n)
        return fail(c, GF_ETRUNC, "colour map ends at byte %llu of a %zu-byte file (truncated?)",
                    (ull)pos, n);
    uint64_t px_bytes = (bpp + 7) / 8, pixels = (uint64_t)w * h, left = n - pos;
    if (type < 8) {
        if (pixels * px_bytes > left)
            return fail(c, GF_ETRUNC, "%llu of %llu pixel bytes (truncated?)", (ull)left,
                        (ull)(pixels * px_bytes));
        return 0;
    }
    /* RLE: a packet header, then one pixel repeated or count literal ones */
    uint64_t got = 0;
    while (got < pixels) {
        if (pos >= n)
            break;
        unsigned hd = p[pos++], count = (hd & 127) + 1;
        uint64_t bytes = hd & 128 ? px_bytes : count * px_bytes;
        if (bytes > n - pos)
            break;
        pos += bytes;
        got += count;
    }
    if (got < pixels)
        return fail(c, GF_ETRUNC, "RLE data ends after %llu of %llu pixels (truncated?)",
                    (ull)got, (ull)pixels);
    return 0;
}

/* ---- PNM (P5, P6: what stb_image reads) ---- */

static int pnm_space(uint8_t b)
{
    return b == ' ' || (b >= '\t' && b <= '\r');
}

/* hdr, when not NULL, gets the size, maxval and raster offset. */
static int check_pnm(chk *c, gf__pnm_header *hdr)
{
    static const char *const what[3] = {"width", "height", "maxval"};
    const uint8_t *p = c->p;
    size_t n = c->n, pos = 2;
    uint64_t v[3];
    for (int k = 0; k < 3; k++) {
        size_t start = pos;
        for (;;) { /* whitespace and comments, at least one of them */
            while (pos < n && pnm_space(p[pos]))
                pos++;
            if (pos >= n || p[pos] != '#')
                break;
            while (pos < n && p[pos] != '\n' && p[pos] != '\r')
                pos++;
        }
        if (pos >= n)
            return fail(c, GF_ETRUNC, "header ends at byte %zu, before the %s (truncated?)", n,
                        what[k]);
        if (pos == start)
            return fail(c, GF_ECORRUPT, "garbage after the magic number");
        if (p[pos] < '0' || p[pos] > '9')
            return fail(c, GF_ECORRUPT, "the %s is not a number", what[k]);
        for (v[k] = 0; pos < n && p[pos] >= '0' && p[pos] <= '9'; pos++)
            if ((v[k] = v[k] * 10 + (unsigned)(p[pos] - '0')) > INT32_MAX)
                return fail(c, GF_ECORRUPT, "corrupt header (%s over 2147483647)", what[k]);
        if (pos >= n)
            return fail(c, GF_ETRUNC, "header ends at byte %zu, in the %s (truncated?)", n,
                        what[k]);
        /* after maxval exactly one whitespace byte, then the raster */
        if (!pnm_space(p[pos]) && (k == 2 || p[pos] != '#'))
            return fail(c, GF_ECORRUPT, "garbage after %s", what[k]);
    }
    pos++;
    if (v[0] == 0 || v[1] == 0)
        return fail(c, GF_ECORRUPT, "%llux%llu image", (ull)v[0], (ull)v[1]);
    if (v[2] == 0 || v[2] > 65535)
        return fail(c, GF_ECORRUPT, "maxval %llu%s", (ull)v[2], v[2] ? " (over 65535)" : "");
    uint64_t need = mul(mul(v[0], v[1]), (p[1] == '6' ? 3 : 1) * (v[2] > 255 ? 2 : 1));
    if (need > n - pos)
        return fail(c, GF_ETRUNC, "%zu of %llu raster bytes (truncated?)", n - pos, (ull)need);
    if (hdr)
        *hdr = (gf__pnm_header){(uint32_t)v[0], (uint32_t)v[1], (uint32_t)v[2], pos};
    return 0;
}

int gf__check_pnm_binary(const uint8_t *p, size_t n, gf__pnm_header *hdr, char *why,
                         size_t why_len)
{
    chk c = {p, n, gf__fmt_name[F_PNM], 0, NULL, why, why_len}; /* never untidy: no decoder */
    return check_pnm(&c, hdr);
}

/* ---- GIF ---- */

/* Skips a chain of data sub-blocks ended by a 0-length one; 0, or -1 if
 * the data runs out first. */
static int gif_sub_blocks(const chk *c, size_t *pos)
{
    size_t i = *pos;
    for (;;) {
        if (i >= c->n)
            return -1;
        unsigned len = c->p[i++];
        if (len == 0)
            break;
        if (c->n - i < len)
            return -1;
        i += len;
    }
    *pos = i;
    return 0;
}

/* stb_image keeps a literal code's low 8 bits: with a minimum code size
 * of 9-11 (valid, rare, read by PIL and ImageMagick) a literal code of
 * 256 or more would decode to another colour. Walks the frame's codes at
 * pos as stb_image does, without pixels, and returns the first such code,
 * or 0 (also where stb_image itself stops with an error). */
static unsigned gif_wide_literal(const chk *c, size_t pos, unsigned min_code)
{
    unsigned clear = 1u << min_code, size = min_code + 1, avail = clear + 2, len = 0;
    uint32_t bits = 0;
    unsigned have = 0;
    int old = -1;
    for (;;) {
        if (have < size) {
            if (len == 0 && (pos >= c->n || (len = c->p[pos++]) == 0))
                return 0;
            if (pos >= c->n)
                return 0;
            len--;
            bits |= (uint32_t)c->p[pos++] << have;
            have += 8;
            continue;
        }
        unsigned code = bits & ((1u << size) - 1);
        bits >>= size;
        have -= size;
        if (code == clear) {
            size = min_code + 1;
            avail = clear + 2;
            old = -1;
        } else if (code == clear + 1 || code > avail) {
            return 0;
        } else {
            if (code >= 256 && code < clear)
                return code;
            if (old >= 0 && ++avail > 8192)
                return 0;
            if ((avail & ((1u << size) - 1)) == 0 && avail <= 0x0fff)
                size++;
            old = (int)code;
        }
    }
}

static int check_gif(chk *c)
{
    const uint8_t *p = c->p;
    size_t n = c->n;
    if (n < 13)
        return fail(c, GF_ETRUNC, "header ends at byte %zu of 13 (truncated?)", n);
    if (memcmp(p, "GIF87a", 6) != 0 && memcmp(p, "GIF89a", 6) != 0)
        return fail(c, GF_ECORRUPT, "version is not 87a or 89a");
    unsigned W = le16(p + 6), H = le16(p + 8), flags = p[10];
    if (W == 0 || H == 0)
        return fail(c, GF_ECORRUPT, "logical screen is %ux%u", W, H);
    size_t pos = 13 + (flags & 0x80 ? 3 * (2u << (flags & 7)) : 0);
    if (pos > n)
        return fail(c, GF_ETRUNC, "global colour table ends at byte %zu of a %zu-byte file "
                    "(truncated?)", pos, n);
    unsigned frames = 0;
    int rc;
    for (;;) {
        if (pos >= n) {
            if (!frames)
                return fail(c, GF_ETRUNC, "data ends at byte %zu, before the first frame "
                            "(truncated?)", n);
            return untidy(c, GF_ETRUNC, "no trailer (0x3B) after the last frame (truncated?)");
        }
        size_t at = pos;
        unsigned tag = p[pos++];
        if (tag == 0x3b) {
            if (!frames)
                return fail(c, GF_ECORRUPT, "no frame before the trailer");
            return 0;
        }
        if (tag == 0x21) { /* extension: a label, then sub-blocks */
            pos++;
            if (gif_sub_blocks(c, &pos))
                return fail(c, GF_ETRUNC, "extension at byte %zu ends with the data (truncated?)",
                            at);
            continue;
        }
        if (tag != 0x2c)
            return fail(c, GF_ECORRUPT, "unknown block 0x%02X at byte %zu", tag, at);
        if (n - pos < 9)
            return fail(c, GF_ETRUNC, "frame %u's descriptor ends at byte %zu (truncated?)",
                        frames, n);
        unsigned x = le16(p + pos), y = le16(p + pos + 2), w = le16(p + pos + 4),
                 h = le16(p + pos + 6), lflags = p[pos + 8];
        pos += 9;
        if (w == 0 || h == 0)
            return fail(c, GF_ECORRUPT, "frame %u is %ux%u", frames, w, h);
        /* stb_image refuses that in frame 0, the one it decodes */
        if (x + w > W || y + h > H) {
            if (!frames)
                return fail(c, GF_ECORRUPT, "frame 0 (%ux%u at %u,%u) is outside the %ux%u "
                            "screen", w, h, x, y, W, H);
            if ((rc = untidy(c, GF_ECORRUPT, "frame %u (%ux%u at %u,%u) is outside the %ux%u "
                             "screen", frames, w, h, x, y, W, H)))
                return rc;
        }
        if (lflags & 0x80)
            pos += 3 * (2u << (lflags & 7));
        if (pos >= n)
            return fail(c, GF_ETRUNC, "frame %u's colour table ends with the data (truncated?)",
                        frames);
        unsigned min_code = p[pos++], wide;
        if (min_code < 2 || min_code > 11) /* codes are 12 bits at most */
            return fail(c, GF_ECORRUPT, "frame %u has LZW minimum code size %u", frames,
                        min_code);
        if (!frames && min_code > 8 && (wide = gif_wide_literal(c, pos, min_code)))
            return fail(c, GF_ECORRUPT, "frame 0 has the literal code %u: a colour index "
                        "over 255 (LZW minimum code size %u)", wide, min_code);
        if (gif_sub_blocks(c, &pos))
            return fail(c, GF_ETRUNC, "frame %u's image data ends at byte %zu (truncated?)",
                        frames, n);
        frames++;
    }
}

/* ---- PSD ---- */

/* Bytes one PackBits row of `len` bytes decodes to; UINT64_MAX if a
 * packet runs past the row. */
static uint64_t packbits_len(const uint8_t *p, size_t len)
{
    uint64_t out = 0;
    for (size_t i = 0; i < len;) {
        unsigned b = p[i++];
        if (b < 128) {
            if (len - i < b + 1)
                return UINT64_MAX;
            i += b + 1;
            out += b + 1;
        } else if (b > 128) {
            if (i >= len)
                return UINT64_MAX;
            i++;
            out += 257 - b;
        }
    }
    return out;
}

static int check_psd(chk *c)
{
    static const char *const section[3] = {"colour mode data", "image resources",
                                           "layer and mask information"};
    const uint8_t *p = c->p;
    size_t n = c->n;
    if (n < 26)
        return fail(c, GF_ETRUNC, "header ends at byte %zu of 26 (truncated?)", n);
    unsigned version = be16(p + 4), channels = be16(p + 12), depth = be16(p + 22),
             mode = be16(p + 24);
    uint32_t h = gf__be32(p + 14), w = gf__be32(p + 18);
    if (version == 2)
        return 0; /* PSB: stb_image refuses it by name */
    if (version != 1)
        return fail(c, GF_ECORRUPT, "version %u", version);
    if (channels < 1 || channels > 56)
        return fail(c, GF_ECORRUPT, "%u channels", channels);
    if (w == 0 || h == 0 || w > 30000 || h > 30000)
        return fail(c, GF_ECORRUPT, "%lux%lu image", (unsigned long)w, (unsigned long)h);
    if (depth != 1 && depth != 8 && depth != 16 && depth != 32)
        return fail(c, GF_ECORRUPT, "%u bits per channel", depth);
    if (mode > 9 || mode == 5 || mode == 6)
        return fail(c, GF_ECORRUPT, "colour mode %u", mode);
    size_t pos = 26;
    for (int k = 0; k < 3; k++) {
        if (n - pos < 4)
            return fail(c, GF_ETRUNC, "%s ends with the data (truncated?)", section[k]);
        uint32_t len = gf__be32(p + pos);
        pos += 4;
        if (len > n - pos)
            return fail(c, GF_ETRUNC, "%s (%lu bytes at byte %zu) runs past the end of the "
                        "%zu-byte file (truncated?)", section[k], (unsigned long)len, pos, n);
        pos += len;
    }
    if (n - pos < 2)
        return fail(c, GF_ETRUNC, "image data ends with the data (truncated?)");
    unsigned comp = be16(p + pos);
    pos += 2;
    uint64_t row = ((uint64_t)w * depth + 7) / 8, rows = (uint64_t)channels * h;
    if (comp == 0) {
        if (row * rows > n - pos)
            return fail(c, GF_ETRUNC, "%zu of %llu image data bytes (truncated?)", n - pos,
                        (ull)(row * rows));
        return 0;
    }
    if (comp == 2 || comp == 3)
        return 0; /* ZIP: stb_image refuses it by name */
    if (comp != 1)
        return fail(c, GF_ECORRUPT, "compression %u", comp);
    /* RLE: a table of each row's byte count, then the rows */
    if (2 * rows > n - pos)
        return fail(c, GF_ETRUNC, "RLE row table ends with the data (truncated?)");
    size_t table = pos;
    pos += 2 * rows;
    for (uint64_t r = 0; r < rows; r++) {
        size_t len = be16(p + table + 2 * r);
        if (len > n - pos)
            return fail(c, GF_ETRUNC, "RLE data ends in row %llu of channel %llu (truncated?)",
                        (ull)(r % h), (ull)(r / h));
        uint64_t got = packbits_len(p + pos, len);
        if (got == UINT64_MAX)
            return fail(c, GF_ECORRUPT, "RLE row %llu of channel %llu: a packet runs past the "
                        "row's %zu bytes", (ull)(r % h), (ull)(r / h), len);
        if (got != row)
            return fail(c, GF_ECORRUPT, "RLE row %llu of channel %llu decodes to %llu bytes, "
                        "not %llu", (ull)(r % h), (ull)(r / h), (ull)got, (ull)row);
        pos += len;
    }
    return 0;
}

int gf__check_stb_format(int fmt, const uint8_t *p, size_t n, gf_strictness s, gf__decoder *d,
                         char *why, size_t why_len)
{
    chk c = {p, n, gf__fmt_name[fmt], s == GF_LENIENT, d, why, why_len};
    /* stb_image reads any data starting P5 or P6 as PNM, whatever sniff says */
    if (n >= 2 && p[0] == 'P' && (p[1] == '5' || p[1] == '6')) {
        c.fmt = gf__fmt_name[F_PNM];
        return check_pnm(&c, NULL);
    }
    switch (fmt) {
    case F_BMP: return check_bmp(&c);
    case F_GIF: return check_gif(&c);
    case F_PSD: return check_psd(&c);
    case F_TGA: return check_tga(&c);
    default: return 0;
    }
}
