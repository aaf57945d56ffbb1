/* CRC32C (Castagnoli), as iSCSI and ext4 use it: SSE4.2 where the CPU has
 * it, tables otherwise; the same value either way. */
#ifndef GF_CRC32C_H
#define GF_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* The CRC32C of p[0..n) (0 for n == 0). */
uint32_t gf__crc32c(const uint8_t *p, size_t n);
/* The CRC32C of A||p[0..n), crc being A's: a digest built piece by piece. */
uint32_t gf__crc32c_extend(uint32_t crc, const uint8_t *p, size_t n);

#endif
