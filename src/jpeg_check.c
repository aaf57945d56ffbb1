/* JPEG's checks before any decoder runs, with or without libjpeg-turbo:
 * truncation (no EOI after the first scan) and what stb_image cannot
 * decode. Pure functions of the bytes, any thread; decode.c calls them
 * through its format table. */
#include "decode_formats.h"

#include <string.h>

/* 1 if the JPEG has no EOI after its first SOS. Marker segments before
 * SOS are length-prefixed (so an EXIF thumbnail's EOI is skipped), and in
 * entropy-coded data 0xFF is always stuffed or an RST/real marker, so any
 * FF D9 after SOS is the end of the image: a backward scan finds it at
 * once in a whole file. */
int gf__jpeg_truncated(const uint8_t *p, size_t n)
{
    size_t pos = 2;
    for (;;) {
        if (pos >= n)
            return 1;
        if (p[pos] != 0xff)
            return 0; /* not a marker: corrupt, the decoder will say */
        while (pos < n && p[pos] == 0xff)
            pos++;
        if (pos >= n)
            return 1;
        uint8_t m = p[pos++];
        if (m == 0xd8 || m == 0x01 || (m >= 0xd0 && m <= 0xd7))
            continue;
        if (m == 0xd9)
            return 0; /* EOI before any image: the decoder will say */
        if (pos + 2 > n)
            return 1;
        size_t L = (size_t)p[pos] << 8 | p[pos + 1];
        if (L < 2)
            return 0;
        pos += L;
        if (m == 0xda)
            break;
    }
    if (pos > n)
        return 1;
    for (size_t i = n - 1; i > pos; i--)
        if (p[i] == 0xd9 && p[i - 1] == 0xff)
            return 0;
    return 1;
}

/* What stb_image cannot decode, seen from the markers: a frame (SOFn,
 * before the first scan: later "markers" may be damaged entropy data)
 * other than baseline/extended/progressive Huffman, or not 8-bit, and
 * more than GF__JPEG_MAX_SCANS scans (libjpeg's progress monitor caps
 * those on the other path). Walks segments by their length and entropy
 * data by memchr. 0, or GF_EFORMAT / GF_ECORRUPT with why. */
int gf__jpeg_stb_refuses(gf__decoder *d, const uint8_t *p, size_t n, const gf__transform *t,
                         char *why, size_t why_len)
{
    (void)d; /* the shape of every check before stb_image (decode_formats.h) */
    (void)t;
    int scans = 0;
    for (size_t pos = 2; pos + 4 <= n;) {
        const uint8_t *ff = memchr(p + pos, 0xff, n - pos - 1);
        if (!ff)
            break;
        pos = (size_t)(ff - p);
        uint8_t m = p[pos + 1];
        if (m == 0xff || m == 0 || m == 0x01 || m == 0xd8 || (m >= 0xd0 && m <= 0xd7)) {
            pos += m == 0xff ? 1 : 2; /* fill, stuffing, restart: no length */
            continue;
        }
        if (m == 0xd9 || pos + 4 > n)
            break;
        if (scans == 0 && m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc) {
            const char *what = m >= 0xc9 ? "arithmetic coding"
                               : m == 0xc3 ? "lossless coding"
                               : m >= 0xc5 ? "hierarchical coding" : NULL;
            if (what) {
                gf__why(why, why_len, "JPEG: %s is not supported by stb_image", what);
                return GF_EFORMAT;
            }
            if (pos + 4 < n && p[pos + 4] != 8) {
                gf__why(why, why_len, "JPEG: %d-bit samples are not supported", p[pos + 4]);
                return GF_EFORMAT;
            }
        }
        if (m == 0xda && ++scans > GF__JPEG_MAX_SCANS) {
            gf__why(why, why_len, "JPEG: more than %d scans (a decompression-time bomb?)",
                    GF__JPEG_MAX_SCANS);
            return GF_ECORRUPT;
        }
        pos += 2 + ((size_t)p[pos + 2] << 8 | p[pos + 3]);
    }
    return 0;
}
