/* The image magic numbers the decoder knows, in one place: the reader
 * refuses a large file whose first bytes are none of them before reading
 * the rest (reader.c), and the decoder's sniff dispatches on them
 * (decode.c). Pure functions; any thread. */
#ifndef GF_MAGIC_H
#define GF_MAGIC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Bytes the longest magic needs (RIFF....WEBP). */
#define GF__MAGIC_BYTES 12

enum {
    GF__MAGIC_NONE,
    GF__MAGIC_JPEG,
    GF__MAGIC_PNG,
    GF__MAGIC_GIF,
    GF__MAGIC_BMP,
    GF__MAGIC_PSD,
    GF__MAGIC_PNM,
    GF__MAGIC_WEBP,
    GF__MAGIC_TIFF,
};

/* The format p[0, n) starts like, or GF__MAGIC_NONE. TGA has no magic
 * number: a caller that may meet one decides by its name. */
static inline int gf__magic(const uint8_t *p, size_t n)
{
    static const uint8_t png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (n >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff)
        return GF__MAGIC_JPEG;
    if (n >= 8 && memcmp(p, png, 8) == 0)
        return GF__MAGIC_PNG;
    if (n >= 4 && memcmp(p, "GIF8", 4) == 0)
        return GF__MAGIC_GIF;
    if (n >= 2 && p[0] == 'B' && p[1] == 'M')
        return GF__MAGIC_BMP;
    if (n >= 4 && memcmp(p, "8BPS", 4) == 0)
        return GF__MAGIC_PSD;
    if (n >= 12 && memcmp(p, "RIFF", 4) == 0 && memcmp(p + 8, "WEBP", 4) == 0)
        return GF__MAGIC_WEBP;
    if (n >= 3 && p[0] == 'P' && p[1] >= '1' && p[1] <= '6' && /* P1-P4: decode_pnm.c */
        (p[2] == ' ' || p[2] == '\n' || p[2] == '\r' || p[2] == '\t'))
        return GF__MAGIC_PNM;
    if (n >= 4 && (memcmp(p, "II*\0", 4) == 0 || memcmp(p, "MM\0*", 4) == 0))
        return GF__MAGIC_TIFF;
    return GF__MAGIC_NONE;
}

/* 1 if name ends in ".tga", any case: the one format without a magic. */
static inline int gf__name_is_tga(const char *name)
{
    size_t n = strlen(name);
    if (n < 4 || name[n - 4] != '.')
        return 0;
    const char *e = name + n - 3;
    return (e[0] | 0x20) == 't' && (e[1] | 0x20) == 'g' && (e[2] | 0x20) == 'a';
}

#endif
