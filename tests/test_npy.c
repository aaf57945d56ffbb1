/* The .npy header reader (src/npy.c): every dtype read, shapes of 0, 1
 * and more dimensions, versions 1.0 to 3.0, the dict's spellings, files
 * NumPy wrote, each refusal by its message, and every cut of a valid file
 * refused. Each member is parsed from a heap copy of its exact size, so a
 * read past its end is ASan's to see. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npy.h"

/* ---- NumPy's own ----
 * Written by NumPy 1.24.2 (Debian's python3-numpy) into memory, its bytes
 * printed as these arrays:
 *   /usr/bin/python3 -c "import io, numpy as np; f = io.BytesIO(); np.save(f, ARRAY);
 *                        print(', '.join('0x%02x' % b for b in f.getvalue()))"
 * with ARRAY as named above each; "version (2, 0)": written with
 * np.lib.format.write_array(f, ARRAY, version=(2, 0)) instead. */
/* np.arange(6, dtype='<f4').reshape(2, 3) */
static const uint8_t numpy_f4[] = {
    0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 0x01, 0x00, 0x76, 0x00, 0x7b, 0x27, 0x64, 0x65, 0x73, 0x63,
    0x72, 0x27, 0x3a, 0x20, 0x27, 0x3c, 0x66, 0x34, 0x27, 0x2c, 0x20, 0x27, 0x66, 0x6f, 0x72, 0x74,
    0x72, 0x61, 0x6e, 0x5f, 0x6f, 0x72, 0x64, 0x65, 0x72, 0x27, 0x3a, 0x20, 0x46, 0x61, 0x6c, 0x73,
    0x65, 0x2c, 0x20, 0x27, 0x73, 0x68, 0x61, 0x70, 0x65, 0x27, 0x3a, 0x20, 0x28, 0x32, 0x2c, 0x20,
    0x33, 0x29, 0x2c, 0x20, 0x7d, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x0a,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x40, 0x40,
    0x00, 0x00, 0x80, 0x40, 0x00, 0x00, 0xa0, 0x40,
};
/* np.arange(3, dtype=np.uint8) */
static const uint8_t numpy_u1[] = {
    0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 0x01, 0x00, 0x76, 0x00, 0x7b, 0x27, 0x64, 0x65, 0x73,
    0x63, 0x72, 0x27, 0x3a, 0x20, 0x27, 0x7c, 0x75, 0x31, 0x27, 0x2c, 0x20, 0x27, 0x66, 0x6f,
    0x72, 0x74, 0x72, 0x61, 0x6e, 0x5f, 0x6f, 0x72, 0x64, 0x65, 0x72, 0x27, 0x3a, 0x20, 0x46,
    0x61, 0x6c, 0x73, 0x65, 0x2c, 0x20, 0x27, 0x73, 0x68, 0x61, 0x70, 0x65, 0x27, 0x3a, 0x20,
    0x28, 0x33, 0x2c, 0x29, 0x2c, 0x20, 0x7d, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x0a, 0x00, 0x01, 0x02,
};
/* np.array(1.5, dtype='<f2') */
static const uint8_t numpy_f2[] = {
    0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 0x01, 0x00, 0x76, 0x00, 0x7b, 0x27, 0x64, 0x65, 0x73,
    0x63, 0x72, 0x27, 0x3a, 0x20, 0x27, 0x3c, 0x66, 0x32, 0x27, 0x2c, 0x20, 0x27, 0x66, 0x6f,
    0x72, 0x74, 0x72, 0x61, 0x6e, 0x5f, 0x6f, 0x72, 0x64, 0x65, 0x72, 0x27, 0x3a, 0x20, 0x46,
    0x61, 0x6c, 0x73, 0x65, 0x2c, 0x20, 0x27, 0x73, 0x68, 0x61, 0x70, 0x65, 0x27, 0x3a, 0x20,
    0x28, 0x29, 0x2c, 0x20, 0x7d, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x0a, 0x00, 0x3e,
};
/* np.arange(4, dtype='<i8').reshape(1, 2, 2) */
static const uint8_t numpy_i8[] = {
    0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 0x01, 0x00, 0x76, 0x00, 0x7b, 0x27, 0x64, 0x65, 0x73, 0x63,
    0x72, 0x27, 0x3a, 0x20, 0x27, 0x3c, 0x69, 0x38, 0x27, 0x2c, 0x20, 0x27, 0x66, 0x6f, 0x72, 0x74,
    0x72, 0x61, 0x6e, 0x5f, 0x6f, 0x72, 0x64, 0x65, 0x72, 0x27, 0x3a, 0x20, 0x46, 0x61, 0x6c, 0x73,
    0x65, 0x2c, 0x20, 0x27, 0x73, 0x68, 0x61, 0x70, 0x65, 0x27, 0x3a, 0x20, 0x28, 0x31, 0x2c, 0x20,
    0x32, 0x2c, 0x20, 0x32, 0x29, 0x2c, 0x20, 0x7d, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x0a,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};
/* np.arange(2, dtype='<i4'), version (2, 0) */
static const uint8_t numpy_v2[] = {
    0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 0x02, 0x00, 0x74, 0x00, 0x00, 0x00, 0x7b, 0x27, 0x64, 0x65,
    0x73, 0x63, 0x72, 0x27, 0x3a, 0x20, 0x27, 0x3c, 0x69, 0x34, 0x27, 0x2c, 0x20, 0x27, 0x66, 0x6f,
    0x72, 0x74, 0x72, 0x61, 0x6e, 0x5f, 0x6f, 0x72, 0x64, 0x65, 0x72, 0x27, 0x3a, 0x20, 0x46, 0x61,
    0x6c, 0x73, 0x65, 0x2c, 0x20, 0x27, 0x73, 0x68, 0x61, 0x70, 0x65, 0x27, 0x3a, 0x20, 0x28, 0x32,
    0x2c, 0x29, 0x2c, 0x20, 0x7d, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x0a,
    0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
};
/* np.arange(2, dtype='<f8'), version (3, 0) */
static const uint8_t numpy_v3[] = {
    0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 0x03, 0x00, 0x74, 0x00, 0x00, 0x00, 0x7b, 0x27, 0x64, 0x65,
    0x73, 0x63, 0x72, 0x27, 0x3a, 0x20, 0x27, 0x3c, 0x66, 0x38, 0x27, 0x2c, 0x20, 0x27, 0x66, 0x6f,
    0x72, 0x74, 0x72, 0x61, 0x6e, 0x5f, 0x6f, 0x72, 0x64, 0x65, 0x72, 0x27, 0x3a, 0x20, 0x46, 0x61,
    0x6c, 0x73, 0x65, 0x2c, 0x20, 0x27, 0x73, 0x68, 0x61, 0x70, 0x65, 0x27, 0x3a, 0x20, 0x28, 0x32,
    0x2c, 0x29, 0x2c, 0x20, 0x7d, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x0a,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf0, 0x3f,
};
/* np.asfortranarray(np.arange(6.).reshape(2, 3)) */
static const uint8_t numpy_F[] = {
    0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 0x01, 0x00, 0x76, 0x00, 0x7b, 0x27, 0x64, 0x65, 0x73, 0x63,
    0x72, 0x27, 0x3a, 0x20, 0x27, 0x3c, 0x66, 0x38, 0x27, 0x2c, 0x20, 0x27, 0x66, 0x6f, 0x72, 0x74,
    0x72, 0x61, 0x6e, 0x5f, 0x6f, 0x72, 0x64, 0x65, 0x72, 0x27, 0x3a, 0x20, 0x54, 0x72, 0x75, 0x65,
    0x2c, 0x20, 0x27, 0x73, 0x68, 0x61, 0x70, 0x65, 0x27, 0x3a, 0x20, 0x28, 0x32, 0x2c, 0x20, 0x33,
    0x29, 0x2c, 0x20, 0x7d, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x0a,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x40,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf0, 0x3f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x40,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x14, 0x40,
};
/* np.arange(2, dtype='>f4') */
static const uint8_t numpy_be[] = {
    0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 0x01, 0x00, 0x76, 0x00, 0x7b, 0x27, 0x64, 0x65, 0x73, 0x63,
    0x72, 0x27, 0x3a, 0x20, 0x27, 0x3e, 0x66, 0x34, 0x27, 0x2c, 0x20, 0x27, 0x66, 0x6f, 0x72, 0x74,
    0x72, 0x61, 0x6e, 0x5f, 0x6f, 0x72, 0x64, 0x65, 0x72, 0x27, 0x3a, 0x20, 0x46, 0x61, 0x6c, 0x73,
    0x65, 0x2c, 0x20, 0x27, 0x73, 0x68, 0x61, 0x70, 0x65, 0x27, 0x3a, 0x20, 0x28, 0x32, 0x2c, 0x29,
    0x2c, 0x20, 0x7d, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x0a,
    0x00, 0x00, 0x00, 0x00, 0x3f, 0x80, 0x00, 0x00,
};
/* np.zeros(2, dtype=[('a', '<f4')]) */
static const uint8_t numpy_st[] = {
    0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 0x01, 0x00, 0x76, 0x00, 0x7b, 0x27, 0x64, 0x65, 0x73, 0x63,
    0x72, 0x27, 0x3a, 0x20, 0x5b, 0x28, 0x27, 0x61, 0x27, 0x2c, 0x20, 0x27, 0x3c, 0x66, 0x34, 0x27,
    0x29, 0x5d, 0x2c, 0x20, 0x27, 0x66, 0x6f, 0x72, 0x74, 0x72, 0x61, 0x6e, 0x5f, 0x6f, 0x72, 0x64,
    0x65, 0x72, 0x27, 0x3a, 0x20, 0x46, 0x61, 0x6c, 0x73, 0x65, 0x2c, 0x20, 0x27, 0x73, 0x68, 0x61,
    0x70, 0x65, 0x27, 0x3a, 0x20, 0x28, 0x32, 0x2c, 0x29, 0x2c, 0x20, 0x7d, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x0a,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

/* ---- a writer ---- */

static uint8_t buf[1 << 16];

/* A member into buf: the prefix of version major, header[0, header_len)
 * as is, then data_bytes bytes of data; returns its size. */
static size_t write_raw(int major, const char *header, size_t header_len, size_t data_bytes)
{
    size_t prefix = major == 1 ? 10 : 12;
    ck_assert_uint_le(prefix + header_len + data_bytes, sizeof buf);
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major;
    buf[7] = 0;
    for (size_t i = 0; i < prefix - 8; i++)
        buf[8 + i] = (uint8_t)(header_len >> (8 * i));
    memcpy(buf + prefix, header, header_len);
    for (size_t i = 0; i < data_bytes; i++)
        buf[prefix + header_len + i] = (uint8_t)(7 * i + 1);
    return prefix + header_len + data_bytes;
}

/* As NumPy writes: dict padded with spaces so the data starts on 64
 * bytes, then '\n'. */
static size_t write_npy(int major, const char *dict, size_t data_bytes)
{
    char header[1024];
    size_t prefix = major == 1 ? 10 : 12, len = strlen(dict);
    size_t total = (prefix + len + 1 + 63) / 64 * 64 - prefix;
    ck_assert_uint_lt(total, sizeof header);
    memcpy(header, dict, len);
    memset(header + len, ' ', total - len - 1);
    header[total - 1] = '\n';
    return write_raw(major, header, total, data_bytes);
}

/* ---- parsing ---- */

/* p[0, n) parsed from a heap copy of exactly n bytes; *out is left as
 * 0xab bytes unless parsed, which is checked. */
static int parse(const uint8_t *p, size_t n, gf__npy *out, char *why, size_t why_len)
{
    uint8_t *copy = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(copy);
    if (n)
        memcpy(copy, p, n);
    gf__npy untouched;
    memset(&untouched, 0xab, sizeof untouched);
    *out = untouched;
    int rc = gf__npy_parse(n ? copy : NULL, n, out, why, why_len);
    free(copy);
    if (rc)
        ck_assert(memcmp(out, &untouched, sizeof untouched) == 0);
    return rc;
}

static gf__npy parse_ok(const uint8_t *p, size_t n)
{
    gf__npy a;
    char why[256] = "";
    int rc = parse(p, n, &a, why, sizeof why);
    ck_assert_msg(rc == 0, "%zu bytes: %d %s", n, rc, why);
    ck_assert_uint_eq(a.header_bytes + a.data_bytes, n);
    return a;
}

static void refused(const uint8_t *p, size_t n, int code, const char *want)
{
    gf__npy a;
    char why[256] = "";
    int rc = parse(p, n, &a, why, sizeof why);
    ck_assert_msg(rc == code, "wanted %d, got %d (%s)", code, rc, why);
    ck_assert_msg(strstr(why, want), "'%s' lacks '%s'", why, want);
    ck_assert_int_eq(parse(p, n, &a, NULL, 0), code); /* no message asked for */
}

static void dict_refused(const char *dict, size_t data_bytes, int code, const char *want)
{
    refused(buf, write_npy(1, dict, data_bytes), code, want);
}

static void shape_is(const gf__npy *a, int ndim, const int64_t *shape)
{
    ck_assert_int_eq(a->ndim, ndim);
    for (int i = 0; i < ndim; i++)
        ck_assert_int_eq(a->shape[i], shape[i]);
}

/* ---- the tests ---- */

START_TEST(every_dtype_and_shape_is_read)
{
    static const struct {
        const char *descr;
        gf_dtype dtype;
        size_t size;
    } dt[] = {
        {"|u1", GF_DTYPE_UINT8, 1},   {"<u1", GF_DTYPE_UINT8, 1},   {"=u1", GF_DTYPE_UINT8, 1},
        {">u1", GF_DTYPE_UINT8, 1},   {"<i4", GF_DTYPE_INT32, 4},   {"<i8", GF_DTYPE_INT64, 8},
        {"<f2", GF_DTYPE_FLOAT16, 2}, {"<f4", GF_DTYPE_FLOAT32, 4}, {"<f8", GF_DTYPE_FLOAT64, 8},
        {"=f4", GF_DTYPE_FLOAT32, 4}, {"=i8", GF_DTYPE_INT64, 8},
    };
    static const struct {
        const char *text;
        int ndim;
        int64_t shape[5];
        size_t elements;
    } sh[] = {
        {"()", 0, {0}, 1},
        {"(3,)", 1, {3}, 3},
        {"(4, 3, 2)", 3, {4, 3, 2}, 24},
        {"(1, 2, 1, 2, 3)", 5, {1, 2, 1, 2, 3}, 12},
        {"(0,)", 1, {0}, 0},
        {"(2, 0, 1099511627776)", 3, {2, 0, (int64_t)1 << 40}, 0}, /* empty, however large */
    };
    for (size_t d = 0; d < sizeof dt / sizeof dt[0]; d++)
        for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++)
            for (int major = 1; major <= 3; major++) {
                char dict[256];
                snprintf(dict, sizeof dict,
                         "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", dt[d].descr,
                         sh[s].text);
                size_t data = sh[s].elements * dt[d].size;
                size_t n = write_npy(major, dict, data);
                gf__npy a = parse_ok(buf, n);
                ck_assert_int_eq(a.dtype, dt[d].dtype);
                shape_is(&a, sh[s].ndim, sh[s].shape);
                ck_assert_uint_eq(a.data_bytes, data);
                ck_assert_uint_eq(a.header_bytes % 64, 0); /* write_npy's alignment */
                ck_assert_uint_eq(gf_dtype_size(a.dtype), dt[d].size);
            }
}
END_TEST

START_TEST(quotes_orders_and_white_space_as_python_takes_them)
{
    static const char *const keys[3] = {"'descr': \"<f2\"", "\"fortran_order\" : False",
                                        "'shape':(4,32,)"};
    static const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                     {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    for (int o = 0; o < 6; o++)
        for (int trailing = 0; trailing < 2; trailing++) {
            char dict[256];
            snprintf(dict, sizeof dict, "{%s, %s, %s%s}", keys[orders[o][0]], keys[orders[o][1]],
                     keys[orders[o][2]], trailing ? "," : "");
            gf__npy a = parse_ok(buf, write_npy(1, dict, 4 * 32 * 2));
            ck_assert_int_eq(a.dtype, GF_DTYPE_FLOAT16);
            shape_is(&a, 2, (const int64_t[]){4, 32});
        }
    /* white space anywhere, tabs and newlines among it */
    gf__npy a =
        parse_ok(buf, write_npy(2,
                                " \t{ \"shape\"\n:\t( 4 ,\n32 , 5\t) ,'descr' :\"<i4\" ,\r\n"
                                "  'fortran_order' :False\f}",
                                4 * 32 * 5 * 4));
    ck_assert_int_eq(a.dtype, GF_DTYPE_INT32);
    shape_is(&a, 3, (const int64_t[]){4, 32, 5});
    a = parse_ok(buf, write_npy(1, "{'descr':'<f8','fortran_order':False,'shape':( )}", 8));
    ck_assert_int_eq(a.ndim, 0);
    /* no padding at all, the data not aligned: NumPy reads it */
    static const char bare[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}\n";
    a = parse_ok(buf, write_raw(1, bare, strlen(bare), 8));
    ck_assert_uint_eq(a.header_bytes, 10 + strlen(bare));
    shape_is(&a, 1, (const int64_t[]){2});
}
END_TEST

START_TEST(numpy_files_are_read)
{
    float f4[6];
    gf__npy a = parse_ok(numpy_f4, sizeof numpy_f4);
    ck_assert_int_eq(a.dtype, GF_DTYPE_FLOAT32);
    shape_is(&a, 2, (const int64_t[]){2, 3});
    ck_assert_uint_eq(a.header_bytes, 128);
    ck_assert_uint_eq(a.data_bytes, sizeof f4);
    memcpy(f4, numpy_f4 + a.header_bytes, sizeof f4);
    for (int i = 0; i < 6; i++)
        ck_assert(f4[i] == (float)i);

    a = parse_ok(numpy_u1, sizeof numpy_u1);
    ck_assert_int_eq(a.dtype, GF_DTYPE_UINT8);
    shape_is(&a, 1, (const int64_t[]){3});
    ck_assert_mem_eq(numpy_u1 + a.header_bytes, "\x00\x01\x02", 3);

    a = parse_ok(numpy_f2, sizeof numpy_f2);
    ck_assert_int_eq(a.dtype, GF_DTYPE_FLOAT16);
    ck_assert_int_eq(a.ndim, 0);
    ck_assert_mem_eq(numpy_f2 + a.header_bytes, "\x00\x3e", 2); /* 1.5 */

    a = parse_ok(numpy_i8, sizeof numpy_i8);
    ck_assert_int_eq(a.dtype, GF_DTYPE_INT64);
    shape_is(&a, 3, (const int64_t[]){1, 2, 2});
    int64_t i8[4];
    memcpy(i8, numpy_i8 + a.header_bytes, sizeof i8);
    ck_assert(i8[0] == 0 && i8[3] == 3);

    a = parse_ok(numpy_v2, sizeof numpy_v2);
    ck_assert_int_eq(a.dtype, GF_DTYPE_INT32);
    shape_is(&a, 1, (const int64_t[]){2});
    ck_assert_uint_eq(a.header_bytes, 128);

    a = parse_ok(numpy_v3, sizeof numpy_v3);
    ck_assert_int_eq(a.dtype, GF_DTYPE_FLOAT64);
    shape_is(&a, 1, (const int64_t[]){2});
    double f8[2];
    memcpy(f8, numpy_v3 + a.header_bytes, sizeof f8);
    ck_assert(f8[0] == 0.0 && f8[1] == 1.0);
}
END_TEST

START_TEST(numpy_files_not_read_are_named)
{
    refused(numpy_F, sizeof numpy_F, GF_EFORMAT,
            "npy: Fortran order (fortran_order True) is not read; save C order");
    refused(numpy_be, sizeof numpy_be, GF_EFORMAT,
            "npy: dtype '>f4' is big-endian, not read; save little-endian ('<f4')");
    refused(numpy_st, sizeof numpy_st, GF_EFORMAT, "npy: a structured dtype (descr is a list)");
}
END_TEST

START_TEST(refusals_name_what_is_wrong)
{
    /* the prefix */
    refused((const uint8_t *)"GIF89a\x01\x00", 8, GF_ECORRUPT,
            "npy: not a .npy (no \\x93NUMPY magic)");
    static const char *const ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
    size_t n = write_npy(1, ok, 8);
    buf[6] = 4;
    refused(buf, n, GF_EFORMAT, "npy: format version 4.0 is not read (1.0, 2.0, 3.0 are)");
    buf[6] = 0;
    refused(buf, n, GF_EFORMAT, "version 0.0");
    buf[6] = 1, buf[7] = 1;
    refused(buf, n, GF_EFORMAT, "version 1.1");
    buf[7] = 0;
    buf[8] = 0xff; /* the header's length past the member */
    refused(buf, n, GF_ECORRUPT, "npy: a header of 255 bytes, the member has 126 after 10");
    n = write_npy(2, ok, 8);
    buf[11] = 0x80;
    refused(buf, n, GF_ECORRUPT, "a header of 2147483764 bytes");
    n = write_raw(1, ok, strlen(ok), 8);
    refused(buf, n, GF_ECORRUPT, "npy: the header does not end in '\\n'");
    refused(buf, write_raw(1, "", 0, 0), GF_ECORRUPT, "does not end in '\\n'");

    /* the dict */
    dict_refused("{'descr': '<f4', 'dtype': 1, 'shape': (2,)}", 8, GF_ECORRUPT,
                 "npy: header key 'dtype' is none of 'descr', 'fortran_order', 'shape'");
    dict_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (2,)}", 8,
                 GF_ECORRUPT, "npy: header key 'shape' twice");
    dict_refused("{'descr': '<f4', 'shape': (2,)}", 8, GF_ECORRUPT,
                 "npy: the header has no 'fortran_order'");
    dict_refused("{}", 0, GF_ECORRUPT, "npy: the header has no 'descr'");
    dict_refused("{'descr': '<f4', 'fortran_order': False}", 0, GF_ECORRUPT, "has no 'shape'");
    dict_refused("['descr', '<f4']", 0, GF_ECORRUPT,
                 "npy: header byte 10 is '[', not the header's '{'");
    dict_refused("{descr: '<f4'}", 0, GF_ECORRUPT,
                 "header byte 11 is 'd', not a quoted key or '}'");
    dict_refused("{,}", 0, GF_ECORRUPT, "is ',', not a quoted key");
    dict_refused("{'descr' '<f4'}", 0, GF_ECORRUPT, "is ''', not ':'");
    dict_refused("{'descr': '<f4' 'fortran_order': False}", 0, GF_ECORRUPT, "not ',' or '}'");
    dict_refused("{'descr': '<f4',, 'fortran_order': False}", 0, GF_ECORRUPT, "not a quoted key");
    dict_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x", 8, GF_ECORRUPT,
                 "is 'x', not the padding's spaces after '}'");
    dict_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}}", 8, GF_ECORRUPT,
                 "padding");
    dict_refused("{'des\\cr': '<f4'}", 0, GF_ECORRUPT, "is '\\', not a string's printable ASCII");
    dict_refused("{'descr\xff': '<f4'}", 0, GF_ECORRUPT, "is 0xff, not a string's printable ASCII");
    dict_refused("{'descr\n': '<f4'}", 0, GF_ECORRUPT, "is 0x0a");
    dict_refused("{'descr': \"<f4'}", 0, GF_ECORRUPT, "is 0x0a");

    /* descr */
    dict_refused("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}", 8, GF_EFORMAT,
                 "npy: a structured dtype (descr is a list) is not read; only '|u1', '<i4', "
                 "'<i8', '<f2', '<f4', '<f8' are");
    dict_refused("{'descr': 4, 'fortran_order': False, 'shape': (2,)}", 8, GF_ECORRUPT,
                 "is '4', not a quoted dtype");
    static const char *const big[] = {">f4", ">f2", ">f8", ">i4", ">i8"};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        char dict[128], want[64];
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (2,)}",
                 big[i]);
        snprintf(want, sizeof want, "dtype '%s' is big-endian, not read", big[i]);
        dict_refused(dict, 16, GF_EFORMAT, want);
    }
    static const char *const other[] = {"|b1", "<c8", "<U4",  "O", "<i2",  "|i1",     "|f4",
                                        "f4",  "<u8", "<f16", "",  "<f4 ", "bfloat16"};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        char dict[128], want[128];
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (2,)}",
                 other[i]);
        snprintf(want, sizeof want,
                 "npy: dtype '%s' is not read; only '|u1', '<i4', '<i8', '<f2', '<f4', '<f8' are",
                 other[i]);
        dict_refused(dict, 8, GF_EFORMAT, want);
    }
    dict_refused("{'descr': 'abcdefghijklmnopqrstuvwxyz0123456789', 'fortran_order': False, "
                 "'shape': (2,)}",
                 8, GF_EFORMAT, "dtype 'abcdefghijklmnopqrstuvwx' is not read"); /* cut short */

    /* fortran_order */
    dict_refused("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2)}", 16, GF_EFORMAT,
                 "npy: Fortran order (fortran_order True) is not read; save C order");
    dict_refused("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", 8, GF_ECORRUPT,
                 "is '0', not True or False");
    dict_refused("{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2,)}", 8, GF_ECORRUPT,
                 "is 'y', not ',' or '}'");

    /* shape */
    dict_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (3)}", 12, GF_ECORRUPT,
                 "npy: shape (3) is no tuple; (3,) is");
    dict_refused("{'descr': '<f4', 'fortran_order': False, 'shape': [3]}", 12, GF_ECORRUPT,
                 "is '[', not the shape's '('");
    dict_refused("{'descr': '<f4', 'fortran_order': False, 'shape': 3}", 12, GF_ECORRUPT,
                 "not the shape's '('");
    dict_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3)}", 0, GF_ECORRUPT,
                 "npy: the shape has a negative dimension");
    dict_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (,)}", 0, GF_ECORRUPT,
                 "is ',', not a dimension");
    dict_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (3,,)}", 0, GF_ECORRUPT,
                 "not a dimension");
    dict_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (3 4)}", 0, GF_ECORRUPT,
                 "is '4', not ',' or ')' in the shape");
    dict_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2.5,)}", 0, GF_ECORRUPT,
                 "is '.', not ',' or ')'");
    dict_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627777, 0)}", 0,
                 GF_ECORRUPT, "npy: the shape has a dimension over 2^40");
    dict_refused("{'descr': '<f4', 'fortran_order': False, 'shape': "
                 "(99999999999999999999999999999999999999999,)}",
                 0, GF_ECORRUPT, "over 2^40");
    dict_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1)}", 4,
                 GF_EFORMAT, "npy: the shape has 6 dimensions; at most 5 are read");
    dict_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1,1,1,1,)}", 4,
                 GF_EFORMAT, "12 dimensions");

    /* the data against the shape */
    dict_refused("{'descr': '<f2', 'fortran_order': False, 'shape': (4, 32)}", 200, GF_ECORRUPT,
                 "npy: shape (4, 32) claims 256 bytes of float16, the member has 200");
    dict_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000)}", 64,
                 GF_ECORRUPT,
                 "shape (1000000, 1000000) claims 4000000000000 bytes of float32, "
                 "the member has 64");
    dict_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", 25, GF_ECORRUPT,
                 "shape (2, 3) claims 24 bytes of float32, the member has 25"); /* trailing */
    dict_refused("{'descr': '|u1', 'fortran_order': False, 'shape': (3,)}", 0, GF_ECORRUPT,
                 "shape (3,) claims 3 bytes of uint8, the member has 0");
    dict_refused("{'descr': '<i8', 'fortran_order': False, 'shape': ()}", 4, GF_ECORRUPT,
                 "shape () claims 8 bytes of int64");
    dict_refused("{'descr': '<f8', 'fortran_order': False, 'shape': "
                 "(1099511627776, 1099511627776, 1099511627776)}",
                 0, GF_ECORRUPT,
                 "shape (1099511627776, 1099511627776, 1099511627776) claims over 2^64 bytes of "
                 "float64, the member has 0");
    /* 2^61 elements of 8 bytes: the product fits, the bytes do not */
    dict_refused("{'descr': '<f8', 'fortran_order': False, 'shape': (2097152, 1099511627776)}", 0,
                 GF_ECORRUPT, "claims over 2^64 bytes");
}
END_TEST

START_TEST(every_cut_of_a_valid_member_is_refused)
{
    const struct {
        const uint8_t *p;
        size_t n;
    } whole[] = {
        {numpy_f4, sizeof numpy_f4}, {numpy_u1, sizeof numpy_u1}, {numpy_f2, sizeof numpy_f2},
        {numpy_i8, sizeof numpy_i8}, {numpy_v2, sizeof numpy_v2}, {numpy_v3, sizeof numpy_v3},
    };
    for (size_t w = 0; w < sizeof whole / sizeof whole[0]; w++) {
        parse_ok(whole[w].p, whole[w].n);
        for (size_t n = 0; n < whole[w].n; n++) {
            gf__npy a;
            char why[256] = "";
            ck_assert_int_eq(parse(whole[w].p, n, &a, why, sizeof why), GF_ECORRUPT);
            ck_assert_msg(strncmp(why, "npy: ", 5) == 0, "%zu of %zu bytes: '%s'", n, whole[w].n,
                          why);
            ck_assert_int_eq(parse(whole[w].p, n, &a, NULL, 0), GF_ECORRUPT);
        }
    }
}
END_TEST

START_TEST(shapes_and_dtypes_as_messages_name_them)
{
    gf__npy a = {.ndim = 0};
    char text[64];
    gf__npy_shape_text(&a, text, sizeof text);
    ck_assert_str_eq(text, "()");
    a = (gf__npy){.ndim = 1, .shape = {3}};
    gf__npy_shape_text(&a, text, sizeof text);
    ck_assert_str_eq(text, "(3,)");
    a = (gf__npy){.ndim = 3, .shape = {4, 32, 32}};
    gf__npy_shape_text(&a, text, sizeof text);
    ck_assert_str_eq(text, "(4, 32, 32)");
    gf__npy_shape_text(&a, text, 6);
    ck_assert_str_eq(text, "(4, 3"); /* cut short to fit */
    text[0] = 'x';
    gf__npy_shape_text(&a, text, 0);
    ck_assert_int_eq(text[0], 'x');
    a = (gf__npy){.ndim = 5, .shape = {INT64_MAX, INT64_MIN, 1, 2, 3}};
    char wide[128];
    gf__npy_shape_text(&a, wide, sizeof wide);
    ck_assert_str_eq(wide, "(9223372036854775807, -9223372036854775808, 1, 2, 3)");

    static const struct {
        gf_dtype t;
        size_t size;
        const char *name;
    } dt[] = {
        {GF_DTYPE_UINT8, 1, "uint8"},     {GF_DTYPE_FLOAT32, 4, "float32"},
        {GF_DTYPE_FLOAT16, 2, "float16"}, {GF_DTYPE_BFLOAT16, 2, "bfloat16"},
        {GF_DTYPE_INT32, 4, "int32"},     {GF_DTYPE_INT64, 8, "int64"},
        {GF_DTYPE_FLOAT64, 8, "float64"}, {(gf_dtype)99, 0, "?"},
    };
    for (size_t i = 0; i < sizeof dt / sizeof dt[0]; i++) {
        ck_assert_uint_eq(gf_dtype_size(dt[i].t), dt[i].size);
        ck_assert_str_eq(gf__npy_dtype_name(dt[i].t), dt[i].name);
    }
}
END_TEST

static Suite *npy_suite(void)
{
    Suite *su = suite_create("npy");
    TCase *tc = tcase_create("npy");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, every_dtype_and_shape_is_read);
    tcase_add_test(tc, quotes_orders_and_white_space_as_python_takes_them);
    tcase_add_test(tc, numpy_files_are_read);
    tcase_add_test(tc, numpy_files_not_read_are_named);
    tcase_add_test(tc, refusals_name_what_is_wrong);
    tcase_add_test(tc, every_cut_of_a_valid_member_is_refused);
    tcase_add_test(tc, shapes_and_dtypes_as_messages_name_them);
    suite_add_tcase(su, tc);
    return su;
}

int main(void)
{
    SRunner *sr = srunner_create(npy_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
