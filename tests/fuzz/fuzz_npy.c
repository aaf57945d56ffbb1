/* A .npy member's header (src/npy.c): refused with a message, or a
 * dtype and shape within their bounds whose bytes are exactly the
 * member's after its header. */
#include "fuzz.h"
#include "npy.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly size bytes: a read past the member is the
     * sanitizer's to see, as the loader's buffers would not show it. */
    uint8_t *member = malloc(size ? size : 1);
    FUZZ_CHECK(member);
    if (size)
        memcpy(member, data, size);
    gf__npy a;
    char why[256] = "";
    int rc = gf__npy_parse(size ? member : NULL, size, &a, why, sizeof why);
    free(member);
    if (rc != 0) {
        FUZZ_CHECK((rc == GF_ECORRUPT || rc == GF_EFORMAT) && strncmp(why, "npy: ", 5) == 0);
        return 0;
    }
    FUZZ_CHECK(a.header_bytes <= size && a.header_bytes + a.data_bytes == size);
    FUZZ_CHECK(a.ndim >= 0 && a.ndim <= GF_FIELD_DIMS_MAX - 1);
    uint64_t elements = 1;
    for (int i = 0; i < a.ndim; i++) {
        FUZZ_CHECK(a.shape[i] >= 0 && a.shape[i] <= (int64_t)1 << 40);
        elements *= (uint64_t)a.shape[i]; /* no overflow: the product is at most size */
        FUZZ_CHECK(elements <= size);
    }
    size_t element = gf_dtype_size(a.dtype);
    FUZZ_CHECK(element > 0 && elements * element == a.data_bytes);
    char text[128];
    gf__npy_shape_text(&a, text, sizeof text);
    FUZZ_CHECK(text[0] == '(' && text[strlen(text) - 1] == ')');
    return 0;
}

/* Members as NumPy writes them, padded to 64 bytes. */
static void emit_npy(fuzz_emit emit, const char *name, int major, const char *dict,
                     size_t data_bytes)
{
    uint8_t buf[512];
    size_t prefix = major == 1 ? 10 : 12, len = strlen(dict);
    size_t header = (prefix + len + 1 + 63) / 64 * 64 - prefix;
    FUZZ_CHECK(prefix + header + data_bytes <= sizeof buf);
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major;
    buf[7] = 0;
    for (size_t i = 0; i < prefix - 8; i++)
        buf[8 + i] = (uint8_t)(header >> (8 * i));
    memcpy(buf + prefix, dict, len);
    memset(buf + prefix + len, ' ', header - len - 1);
    buf[prefix + header - 1] = '\n';
    for (size_t i = 0; i < data_bytes; i++)
        buf[prefix + header + i] = (uint8_t)(i * 37);
    emit(name, buf, prefix + header + data_bytes);
}

void fuzz_seeds(fuzz_emit emit)
{
    emit_npy(emit, "npy-f4", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24);
    emit_npy(emit, "npy-u1", 1, "{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }", 3);
    emit_npy(emit, "npy-f2-scalar", 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (), }",
             2);
    emit_npy(emit, "npy-i8-v2", 2, "{'descr': '<i8', 'fortran_order': False, 'shape': (1, 2, 2), }",
             32);
    emit_npy(emit, "npy-i4-v3", 3,
             "{\"shape\": (2, 1, 1, 1, 2), \"descr\": \"<i4\", "
             "\"fortran_order\": False}",
             16);
    emit_npy(emit, "npy-f8-empty", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 4), }",
             0);
    emit_npy(emit, "npy-fortran", 1, "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 2), }",
             32);
    emit_npy(emit, "npy-structured", 1,
             "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8);
}
