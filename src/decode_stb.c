/* Every format but JPEG-through-libjpeg-turbo: stb_image (compiled alone
 * in stb_image_impl.c), on the decode threads; a call holds nothing
 * between samples but the decoder's own scratch.
 *
 * stb_image decodes the whole image; the crop is then resampled from it.
 * Before it sees the data, a check refuses what Debian's 2.27 mishandles
 * (JPEG Huffman tables of over 256 codes: an out-of-bounds write), and
 * decode_check.c checks that a GIF, BMP, TGA, PSD or PNM holds what its
 * header promises (stb_image fills in what is missing) and refuses header
 * nonsense, PNM numbers over INT_MAX (signed overflow in stb) among it.
 * The pixel limit is checked from the header (where the format keeps the
 * size at a known place, else from stb_image's info call) before anything
 * is decoded; then every allocation of stb_image's is capped by what an
 * image of that size can need (alloc_cap), so a PNG whose deflate data
 * goes on past its rows fails at the cap instead of growing to gigabytes. */
#include "decode_formats.h"

#include "stb_image_impl.h"

#include <stdlib.h>
#include <string.h>

/* Byte i of p, or 0 past the end (what stb_image's reader returns). */
static uint8_t byte_at(const uint8_t *p, size_t n, size_t i)
{
    return i < n ? p[i] : 0;
}

/* 1 if the DHT segment whose length field starts at p[i] declares a table
 * of more than 256 codes, read as stb_image reads it (it stops at a bad
 * table class or id, and each table shortens the segment by >= 17). */
static int dht_overfull(const uint8_t *p, size_t n, size_t i)
{
    long left = (long)((unsigned)byte_at(p, n, i) << 8 | byte_at(p, n, i + 1)) - 2;
    for (i += 2; left > 0 && i < n;) {
        uint8_t q = p[i++];
        if (q >> 4 > 1 || (q & 15) > 3)
            return 0;
        unsigned codes = 0;
        for (int k = 0; k < 16; k++)
            codes += byte_at(p, n, i++);
        if (codes > 256)
            return 1;
        i += codes;
        left -= 17 + (long)codes;
    }
    return 0;
}

/* Debian's stb_image (2.27) writes past its Huffman tables when a DHT
 * table declares more than 256 codes (fixed upstream later: nothings/stb
 * #1289). 1 if p (a JPEG to stb_image: FF fill bytes, then SOI) has such
 * a table wherever stb_image could read one: in the segments before the
 * first scan, walked as stb_image walks them (a segment it accepts is
 * exactly its length long), and, from the first scan on, at every FF C4
 * (a marker it may find in or after entropy-coded data). */
/* The segments before a JPEG's first scan as stb_image walks them (a
 * segment it accepts is exactly its length long): *pos starts at 0; each
 * call returns the next marker, *pos at its length field, or -1 where
 * stb_image gives up (no SOI, the data ends, a marker without a length).
 * SOS (0xDA) is the last. */
static int jpeg_next_segment(const uint8_t *p, size_t n, size_t *pos)
{
    size_t i = *pos;
    if (i == 0) { /* stb_image's SOI: any run of FF fill bytes, then D8 */
        while (i < n && p[i] == 0xff)
            i++;
        if (i == 0 || i >= n || p[i] != 0xd8)
            return -1;
        i++;
    } else if (i < n && p[i - 1] != 0xda) {
        i += (size_t)byte_at(p, n, i) << 8 | byte_at(p, n, i + 1);
    } else {
        return -1;
    }
    while (i < n && p[i] != 0xff) /* stb_image skips such bytes */
        i++;
    while (i < n && p[i] == 0xff)
        i++;
    if (i + 2 > n)
        return -1;
    uint8_t m = p[i++];
    if (m == 0xd8 || m == 0xd9 || m == 0x01 || (m >= 0xd0 && m <= 0xd7))
        return -1; /* no length: stb_image gives up here */
    *pos = i;
    return m;
}

static int jpeg_dht_overfull(const uint8_t *p, size_t n)
{
    size_t pos = 0;
    int m;
    while ((m = jpeg_next_segment(p, n, &pos)) >= 0 && m != 0xda)
        if (m == 0xc4 && dht_overfull(p, n, pos))
            return 1;
    if (m < 0)
        return 0;
    for (const uint8_t *ff; pos + 1 < n; pos = (size_t)(ff - p) + 1) {
        if (!(ff = memchr(p + pos, 0xff, n - 1 - pos)))
            break;
        if (ff[1] == 0xc4 && dht_overfull(p, n, (size_t)(ff - p) + 2))
            return 1;
    }
    return 0;
}

/* libjpeg refuses a scan whose component's quantization table no DQT
 * defined ("Quantization table 0x00 was not defined"); stb_image decodes
 * it with a table of zeros, a flat grey image, as good. 1 (with why) if
 * the first scan has such a component. */
static int jpeg_quant_undefined(const uint8_t *p, size_t n, char *why, size_t why_len)
{
    size_t pos = 0;
    unsigned defined = 0, nf = 0;
    uint8_t id[4], tq[4];
    int m;
    while ((m = jpeg_next_segment(p, n, &pos)) >= 0) {
        size_t len = (size_t)byte_at(p, n, pos) << 8 | byte_at(p, n, pos + 1);
        if (m == 0xdb) { /* tables of 64 bytes, or 128 at 16 bits */
            for (size_t i = pos + 2; i < pos + len && i < n; i += 1 + (p[i] >> 4 ? 128 : 64))
                defined |= 1u << (p[i] & 15);
        } else if (m >= 0xc0 && m <= 0xc2) { /* the frames stb_image reads */
            nf = byte_at(p, n, pos + 7);
            nf = nf > 4 ? 4 : nf;
            for (unsigned k = 0; k < nf; k++) {
                id[k] = byte_at(p, n, pos + 8 + 3 * k);
                tq[k] = byte_at(p, n, pos + 10 + 3 * k);
            }
        } else if (m == 0xda) {
            unsigned ns = byte_at(p, n, pos + 2);
            for (unsigned s = 0; s < ns && s < 4; s++)
                for (unsigned k = 0; k < nf; k++)
                    if (id[k] == byte_at(p, n, pos + 3 + 2 * s) && tq[k] < 16 &&
                        !(defined >> tq[k] & 1)) {
                        gf__why(why, why_len, "JPEG: Quantization table 0x%02x was not "
                                "defined (libjpeg's words: stb_image decodes with zeros)", tq[k]);
                        return 1;
                    }
            return 0;
        }
    }
    return 0;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

/* Width and height from the header, for the pixel limit, when the format
 * keeps them at a known place; 0 if unknown. stb_image's info call would
 * say "unknown image type" for a header it finds too large, losing why. */
static int header_dims(int fmt, const uint8_t *p, size_t n, uint64_t *W, uint64_t *H)
{
    switch (fmt) {
    case F_PNG:
        if (n < 24 || memcmp(p + 12, "IHDR", 4) != 0)
            return 0;
        *W = gf__be32(p + 16);
        *H = gf__be32(p + 20);
        return 1;
    case F_GIF:
        if (n < 10)
            return 0;
        *W = (uint32_t)p[6] | (uint32_t)p[7] << 8;
        *H = (uint32_t)p[8] | (uint32_t)p[9] << 8;
        return 1;
    case F_BMP:
        if (n < 26)
            return 0;
        *W = (uint64_t)llabs((long long)(int32_t)le32(p + 18));
        *H = (uint64_t)llabs((long long)(int32_t)le32(p + 22));
        return 1;
    case F_TGA:
        if (n < 16)
            return 0;
        *W = (uint32_t)p[12] | (uint32_t)p[13] << 8;
        *H = (uint32_t)p[14] | (uint32_t)p[15] << 8;
        return 1;
    case F_PSD:
        if (n < 22)
            return 0;
        *H = gf__be32(p + 14);
        *W = gf__be32(p + 18);
        return 1;
    case F_JPEG:
        for (size_t pos = 2; pos + 4 <= n;) {
            if (p[pos] != 0xff)
                return 0;
            uint8_t m = p[pos + 1];
            if (m == 0xff) {
                pos++;
                continue;
            }
            if (m == 0xd8 || m == 0x01 || (m >= 0xd0 && m <= 0xd7)) {
                pos += 2;
                continue;
            }
            if (m == 0xd9 || m == 0xda)
                return 0;
            size_t L = (size_t)p[pos + 2] << 8 | p[pos + 3];
            int sof = m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc;
            if (sof) {
                if (pos + 9 > n)
                    return 0;
                *H = (uint32_t)p[pos + 5] << 8 | p[pos + 6];
                *W = (uint32_t)p[pos + 7] << 8 | p[pos + 8];
                return 1;
            }
            pos += 2 + L;
        }
        return 0;
    default:
        return 0;
    }
}

/* The most one stb_image allocation may take for a W x H image read from
 * len bytes: its pixels at 16 bits and 4 channels, with 32 rows and
 * columns of slack (JPEG's MCUs), filter bytes; or the data twice (a
 * PNG's IDATs gathered, doubling); and 1 MiB. Past it the data lies. */
static size_t alloc_cap(int W, int H, size_t len)
{
    uint64_t px = ((uint64_t)W + 32) * ((uint64_t)H + 32) * 8 + (uint64_t)H * 8;
    uint64_t data = 2 * (uint64_t)len;
    uint64_t cap = (px > data ? px : data) + (1u << 20); /* TGA: a 256 KiB colour map */
    return cap < SIZE_MAX ? (size_t)cap : SIZE_MAX;
}

/* stb_image's load under alloc_cap(cw, ch, len); NULL with *refused set
 * when the cap refused an allocation. */
static uint8_t *load_capped(const uint8_t *data, size_t len, int is16, int cw, int ch, int *W,
                            int *H, int *n, size_t *refused)
{
    gf__stb_cap_allocations(alloc_cap(cw, ch, len));
    uint8_t *px = is16 ? (uint8_t *)gf__stb_load_16(data, (int)len, W, H, n)
                       : gf__stb_load(data, (int)len, W, H, n);
    *refused = px ? 0 : gf__stb_refused_bytes();
    gf__stb_cap_allocations(0);
    return px;
}

/* What an allocation the cap refused means. */
static int refused_why(int fmt, size_t refused, int W, int H, size_t len, char *why,
                       size_t why_len)
{
    gf__why(why, why_len,
            "%s: corrupt data (stb_image asked for %zu bytes, more than a %dx%d image of %zu "
            "bytes can need%s)",
            gf__fmt_name[fmt], refused, W, H, len,
            fmt == F_PNG ? ": image data past the last row, a deflate bomb?" : "");
    return GF_ECORRUPT;
}

static int stb_error(int fmt, char *why, size_t why_len)
{
    const char *r = gf__stb_failure_reason();
    r = r ? r : "unknown error";
    int code = GF_ECORRUPT;
    if (!strcmp(r, "outofmem"))
        code = GF_ENOMEM;
    else if (!strcmp(r, "outofdata"))
        code = GF_ETRUNC;
    else if (!strcmp(r, "too large"))
        code = GF_ETOOBIG;
    else if (fmt == F_UNKNOWN || !strcmp(r, "unknown image type"))
        code = GF_EFORMAT;
    if (code == GF_EFORMAT && fmt == F_UNKNOWN)
        gf__why(why, why_len, "not an image of a known format");
    else
        gf__why(why, why_len, "%s: %s (stb_image: %s)", gf__fmt_name[fmt],
                code == GF_ETRUNC ? "premature end of data (truncated?)" : "corrupt data", r);
    return code;
}

int gf__decode_stb(gf__decoder *d, const uint8_t *data, size_t len, int fmt,
                   const gf__transform *t, uint64_t key, uint8_t *dst, char *why,
                   size_t why_len)
{
    if (len > INT32_MAX) {
        gf__why(why, why_len, "%s: %zu bytes is over stb_image's 2 GiB limit", gf__fmt_name[fmt], len);
        return GF_ETOOBIG;
    }
    uint64_t hw, hh;
    if (header_dims(fmt, data, len, &hw, &hh) && gf__too_big(t, fmt, hw, hh, why, why_len))
        return GF_ETOOBIG;
    /* stbi_info tries every reader on anything, whatever sniff says. */
    if (jpeg_dht_overfull(data, len)) {
        gf__why(why, why_len, "JPEG: corrupt data (a Huffman table with more than 256 codes)");
        return GF_ECORRUPT;
    }
    if (fmt == F_JPEG && jpeg_quant_undefined(data, len, why, why_len))
        return GF_ECORRUPT;
    int rc = gf__check_stb_format(fmt, data, len, t->strictness, d, why, why_len);
    if (rc)
        return rc;
    int W, H, n;
    if (!gf__stb_info(data, (int)len, &W, &H, &n)) {
        /* info tried every format and kept the last one's complaint; for a
         * known format its own loader says what is wrong (in the header:
         * what info rejected, so nothing big is allocated) */
        if (fmt != F_UNKNOWN) {
            int known = header_dims(fmt, data, len, &hw, &hh) && hw < INT32_MAX &&
                        hh < INT32_MAX;
            int cw = known ? (int)hw : 0, ch = known ? (int)hh : 0;
            size_t refused;
            void *px = load_capped(data, len, 0, cw, ch, &W, &H, &n, &refused);
            if (refused)
                return refused_why(fmt, refused, cw, ch, len, why, why_len);
            if (px) { /* info and load disagree: trust neither */
                gf__stb_free(px);
                gf__why(why, why_len, "%s: corrupt header", gf__fmt_name[fmt]);
                return GF_ECORRUPT;
            }
        }
        return stb_error(fmt, why, why_len);
    }
    if (gf__too_big(t, fmt, (uint64_t)W, (uint64_t)H, why, why_len))
        return GF_ETOOBIG;
    int is16 = gf__stb_is_16_bit(data, (int)len);
    size_t refused;
    uint8_t *px = load_capped(data, len, is16, W, H, &W, &H, &n, &refused);
    if (refused)
        return refused_why(fmt, refused, W, H, len, why, why_len);
    if (!px)
        return stb_error(fmt, why, why_len);
    if (is16) { /* narrow in place, rounded: v * 255 / 65535 */
        const uint16_t *s = (const uint16_t *)px;
        size_t cnt = (size_t)W * H * n;
        for (size_t i = 0; i < cnt; i++)
            px[i] = (uint8_t)(((uint32_t)s[i] * 255 + 32767) / 65535);
    }
    gf__crop c;
    if (!(t = gf__plan_whole(d, t, W, H, key, &c, &dst, why, why_len))) {
        rc = GF_ENOMEM;
    } else {
        size_t stride = (size_t)W * n;
        const uint8_t *src = px + stride * d->rs.v.lo + (size_t)d->rs.h.lo * n;
        rc = gf__decode_finish(d, src, stride, n, t, c.flip, dst, why, why_len);
    }
    gf__stb_free(px);
    return rc;
}
