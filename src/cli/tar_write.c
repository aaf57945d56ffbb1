/*
 * ustar headers and members; see tar_write.h.
 */
#include "tar_write.h"

#include <errno.h>
#include <string.h>

void tar_write_checksum(uint8_t h[512])
{
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum & 0777777u); /* "NNNNNN\0", then ' ' */
    h[155] = ' ';
}

void tar_write_header(uint8_t h[512], const char *name, char type, uint64_t size,
                      uint64_t mtime, const char *prefix)
{
    memset(h, 0, 512);
    strncpy((char *)h, name, 100);
    memcpy(h + 100, "0000644", 8);
    memcpy(h + 108, "0000000", 8);
    memcpy(h + 116, "0000000", 8);
    snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)size);
    snprintf((char *)h + 136, 12, "%011llo", (unsigned long long)mtime);
    h[156] = (uint8_t)type;
    memcpy(h + 257, "ustar", 6); /* magic "ustar\0", version "00" */
    memcpy(h + 263, "00", 2);
    if (prefix)
        strncpy((char *)h + 345, prefix, 155);
    tar_write_checksum(h);
}

int tar_write_member(FILE *f, const char *name, const void *data, size_t len, uint64_t mtime)
{
    static const uint8_t zeros[512];
    uint8_t h[512];
    tar_write_header(h, name, '0', len, mtime, NULL);
    size_t pad = (512 - len % 512) % 512;
    if (fwrite(h, 1, 512, f) != 512 || fwrite(data, 1, len, f) != len ||
        fwrite(zeros, 1, pad, f) != pad)
        return -(errno ? errno : EIO);
    return 0;
}
