/* PNG's checks by gpufeed itself: whether the chunk chain reaches IEND
 * (before any decoder runs), and chunk CRCs: for the stb_image path
 * (which checks none) and, in decode_png.c, for what libspng did not
 * read (the IDAT chunks below a crop) and to name the chunk libspng found
 * bad. Any thread. zlib's crc32 where libspng (which needs zlib) is
 * built, else a table of gpufeed's own, built once (pthread_once).
 *
 * PIL's rule decides what GF_LENIENT lets through: a chunk before the
 * first IDAT with a bad CRC fails in every mode (PIL checks those), one
 * from the first IDAT on only under GF_STRICT / GF_STRICT_WHOLE. */
#include "decode_formats.h"

#include <string.h>

#if GF_HAVE_SPNG
#include <zlib.h>

/* libspng's zlib: its crc32 runs at about 7 GB/s, the table below at 3. */
static uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t n)
{
    return (uint32_t)crc32_z(crc, p, n);
}
#else
#include <pthread.h>

static uint32_t crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
        crc_tab[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int i = 0; i < 256; i++)
            crc_tab[t][i] = crc_tab[0][crc_tab[t - 1][i] & 0xff] ^ (crc_tab[t - 1][i] >> 8);
}

/* zlib's crc32(), slicing by 8. */
static uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t n)
{
    pthread_once(&crc_once, crc_init);
    crc = ~crc;
    for (; n >= 8; n -= 8, p += 8) {
        uint32_t a = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                            (uint32_t)p[3] << 24);
        crc = crc_tab[7][a & 0xff] ^ crc_tab[6][(a >> 8) & 0xff] ^ crc_tab[5][(a >> 16) & 0xff] ^
              crc_tab[4][a >> 24] ^ crc_tab[3][p[4]] ^ crc_tab[2][p[5]] ^ crc_tab[1][p[6]] ^
              crc_tab[0][p[7]];
    }
    while (n--)
        crc = crc_tab[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}
#endif

int gf__png_find_bad_crc(const uint8_t *p, size_t n, gf__png_bad *bad)
{
    int seen_idat = 0;
    for (size_t pos = 8; pos + 12 <= n;) {
        uint32_t len = gf__be32(p + pos);
        if (len > 0x7fffffffu || len > n - pos - 12)
            return 0; /* the decoder names a bad length or truncation */
        const uint8_t *type = p + pos + 4;
        seen_idat |= memcmp(type, "IDAT", 4) == 0;
        if (crc32_update(0, type, 4 + (size_t)len) != gf__be32(type + 4 + len)) {
            bad->at = pos;
            memcpy(bad->type, type, 4);
            for (int i = 0; i < 4; i++) /* a type is letters; keep the reason printable */
                if (!((bad->type[i] | 32) >= 'a' && (bad->type[i] | 32) <= 'z'))
                    bad->type[i] = '?';
            bad->type[4] = 0;
            bad->before_idat = !seen_idat;
            return 1;
        }
        if (memcmp(type, "IEND", 4) == 0)
            break;
        pos += 12 + (size_t)len;
    }
    return 0;
}

void gf__png_crc_why(const gf__png_bad *bad, const char *tail, char *why, size_t why_len)
{
    gf__why(why, why_len, "PNG: %s chunk CRC mismatch (chunk at byte %zu)%s", bad->type, bad->at,
            tail);
}

int gf__png_check_crcs(gf__decoder *d, const uint8_t *p, size_t n, const gf__transform *t,
                       char *why, size_t why_len)
{
    /* the pixel limit first, as on libspng's path: a header over it is
     * GF_ETOOBIG whatever its CRC */
    if (n >= 24 && memcmp(p + 12, "IHDR", 4) == 0 &&
        gf__too_big(t, F_PNG, gf__be32(p + 16), gf__be32(p + 20), why, why_len))
        return GF_ETOOBIG;
    gf__png_bad bad;
    if (!gf__png_find_bad_crc(p, n, &bad))
        return 0;
    if (bad.before_idat || t->strictness != GF_LENIENT) {
        gf__png_crc_why(&bad, "", why, why_len);
        return GF_ECORRUPT;
    }
    d->warned = 1;
    gf__png_crc_why(&bad, "", d->warn, sizeof d->warn);
    return 0;
}

/* 1 if the PNG's chunk chain runs out before IEND. */
int gf__png_truncated(const uint8_t *p, size_t n)
{
    size_t pos = 8;
    while (pos + 8 <= n) {
        uint32_t len = gf__be32(p + pos);
        if (len > 0x7fffffffu)
            return 0; /* corrupt, not truncated: stb will say */
        if (memcmp(p + pos + 4, "IEND", 4) == 0)
            return pos + 12 > n; /* its CRC too */
        pos += 12 + (size_t)len;
    }
    return 1;
}
