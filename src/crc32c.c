/* CRC32C of a buffer: the digest a shard's cache copy ends in (its
 * trailer, remote_cache.c) and the one an index sidecar records of its
 * whole shard (shard_crc32c=, dataset_shard_sidecar.c). */
#include "crc32c.h"

#include <pthread.h>
#include <string.h>

/* CRC32C (Castagnoli, reflected 0x82f63b78): the SSE4.2 instruction where
 * the CPU has it (several GB/s: a hit's check costs far less than its
 * decode), else slicing by 8 over tables built once. */
static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_tables(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t v = i;
        for (int b = 0; b < 8; b++)
            v = v & 1 ? v >> 1 ^ 0x82f63b78u : v >> 1;
        crc_table[0][i] = v;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = crc_table[t - 1][i] >> 8 ^ crc_table[0][crc_table[t - 1][i] & 0xff];
}

static uint32_t crc32c_table(uint32_t crc, const uint8_t *p, size_t n)
{
    pthread_once(&crc_once, crc_tables);
    for (; n >= 8; p += 8, n -= 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                             (uint32_t)p[3] << 24);
        crc = crc_table[7][lo & 0xff] ^ crc_table[6][lo >> 8 & 0xff] ^
              crc_table[5][lo >> 16 & 0xff] ^ crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^
              crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
    }
    while (n--)
        crc = crc >> 8 ^ crc_table[0][(crc ^ *p++) & 0xff];
    return crc;
}

/* The CRC of A||B from those of A and B (zlib's crc32_combine, GF(2)
 * matrices: log(len2) squarings). */
static uint32_t gf2_times(const uint32_t *mat, uint32_t vec)
{
    uint32_t sum = 0;
    for (; vec; vec >>= 1, mat++)
        if (vec & 1)
            sum ^= *mat;
    return sum;
}

static void gf2_square(uint32_t *square, const uint32_t *mat)
{
    for (int n = 0; n < 32; n++)
        square[n] = gf2_times(mat, mat[n]);
}

static uint32_t crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t len2)
{
    uint32_t even[32], odd[32];
    odd[0] = 0x82f63b78u; /* one zero bit */
    for (int n = 1; n < 32; n++)
        odd[n] = 1u << (n - 1);
    gf2_square(even, odd); /* two */
    gf2_square(odd, even); /* four */
    while (len2) {
        gf2_square(even, odd);
        if (len2 & 1)
            crc1 = gf2_times(even, crc1);
        len2 >>= 1;
        if (!len2)
            break;
        gf2_square(odd, even);
        if (len2 & 1)
            crc1 = gf2_times(odd, crc1);
        len2 >>= 1;
    }
    return crc1 ^ crc2;
}

#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const uint8_t *p,
                                                               size_t n)
{
    uint64_t v = crc;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        v = __builtin_ia32_crc32di(v, w);
    }
    uint32_t c = (uint32_t)v;
    while (n--)
        c = __builtin_ia32_crc32qi(c, *p++);
    return c;
}

/* Three streams at once: one crc32 instruction's latency is three of its
 * issue slots, so one stream runs at a third of the speed. */
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42_x3(const uint8_t *p, size_t n)
{
    size_t third = n / 3 / 8 * 8;
    const uint8_t *a = p, *b = p + third, *c = p + 2 * third;
    uint64_t ca = ~0u, cb = ~0u, cc = ~0u;
    for (size_t i = 0; i < third; i += 8) {
        uint64_t wa, wb, wc;
        memcpy(&wa, a + i, 8);
        memcpy(&wb, b + i, 8);
        memcpy(&wc, c + i, 8);
        ca = __builtin_ia32_crc32di(ca, wa);
        cb = __builtin_ia32_crc32di(cb, wb);
        cc = __builtin_ia32_crc32di(cc, wc);
    }
    uint32_t tail = ~crc32c_sse42((uint32_t)cc, c + third, n - 3 * third);
    uint32_t ab = crc32c_combine(~(uint32_t)ca, ~(uint32_t)cb, third);
    return crc32c_combine(ab, tail, n - 2 * third);
}
#endif

/* Three streams pay two combines (about 25 us each here, the GF(2)
 * squarings): below 1 MiB one stream (7 GB/s, 13 us a 100 KB member) is
 * faster. */
#define X3_MIN ((size_t)1 << 20)

uint32_t gf__crc32c(const uint8_t *p, size_t n)
{
#if defined(__GNUC__) && defined(__x86_64__)
    if (__builtin_cpu_supports("sse4.2"))
        return n >= X3_MIN ? crc32c_sse42_x3(p, n) : ~crc32c_sse42(~0u, p, n);
#endif
    return ~crc32c_table(~0u, p, n);
}

uint32_t gf__crc32c_extend(uint32_t crc, const uint8_t *p, size_t n)
{
    return crc32c_combine(crc, gf__crc32c(p, n), n);
}
