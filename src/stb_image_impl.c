/* Debian's stb_image, compiled here alone:
 * - static (STB_IMAGE_STATIC), so no stbi_ symbol of ours clashes with a
 *   program that links its own copy;
 * - without two UBSan checks its PNG reader trips on valid files: a
 *   zero-length IDAT chunk makes it add 0 to a NULL buffer and memcpy 0
 *   bytes into it (meson.build), so sanitizer builds of gpufeed, and of
 *   programs that embed it, report only real faults. The two bugs of 2.27
 *   that are real (Huffman tables, PNM numbers) are refused before the
 *   data gets here: decode_stb.c.
 * - without the shift-exponent check (gcc: shift): on a corrupt JPEG, 2.27's bit reader
 *   lets code_bits go negative once a marker ends the data, and
 *   stbi__grow_buffer_unsafe then shifts a byte by 32 or more (2.28 returns
 *   zeros there instead). The shifted value only fills the bit buffer,
 *   whose every use is masked (table lookups included), so it decodes
 *   garbage or fails, within bounds: ASan replays the input
 *   (tests/fuzz/regressions/decode/stb-jpeg-shift-by-32). stb_image is
 *   gpufeed's JPEG decoder only with decoder = STB or without
 *   libjpeg-turbo. */
#include "stb_image_impl.h"

#include <stdlib.h>

/* stb_image sizes its buffers from the data, not the header: a PNG's
 * inflate doubles its output until the stream ends (a 1 MB file took
 * 1 GB). Every allocation goes through a per-thread cap the caller sets
 * from the header, refused before it is made. */
static _Thread_local size_t alloc_cap, alloc_refused;

static void *capped_malloc(size_t n)
{
    if (alloc_cap && n > alloc_cap) {
        alloc_refused = n;
        return NULL;
    }
    return malloc(n);
}

static void *capped_realloc(void *p, size_t n)
{
    if (alloc_cap && n > alloc_cap) {
        alloc_refused = n;
        return NULL;
    }
    return realloc(p, n);
}

#define STBI_MALLOC(n) capped_malloc(n)
#define STBI_REALLOC(p, n) capped_realloc(p, n)
#define STBI_FREE(p) free(p)
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_NO_STDIO
#define STBI_NO_HDR
#define STBI_NO_PIC
#define STBI_NO_LINEAR
#define STBI_ASSERT(x) ((void)(x))
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-value"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wtype-limits"
#pragma GCC diagnostic ignored "-Wshadow"
#include <stb_image.h>
/* stb_image 2.27 declares this but never defines it; with STB_IMAGE_STATIC
 * gcc warns "declared static but never defined". A no-op we never call. */
__attribute__((unused)) static void stbi_set_unpremultiply_on_load_thread(int flag)
{
    (void)flag;
}
#pragma GCC diagnostic pop

int gf__stb_info(const uint8_t *data, int len, int *w, int *h, int *comp)
{
    return stbi_info_from_memory(data, len, w, h, comp);
}

int gf__stb_is_16_bit(const uint8_t *data, int len)
{
    return stbi_is_16_bit_from_memory(data, len);
}

void gf__stb_cap_allocations(size_t max_bytes)
{
    alloc_cap = max_bytes;
    alloc_refused = 0;
}

size_t gf__stb_refused_bytes(void)
{
    return alloc_refused;
}

uint8_t *gf__stb_load(const uint8_t *data, int len, int *w, int *h, int *comp)
{
    return stbi_load_from_memory(data, len, w, h, comp, 0);
}

uint16_t *gf__stb_load_16(const uint8_t *data, int len, int *w, int *h, int *comp)
{
    return stbi_load_16_from_memory(data, len, w, h, comp, 0);
}

void gf__stb_free(void *pixels)
{
    stbi_image_free(pixels);
}

const char *gf__stb_failure_reason(void)
{
    return stbi_failure_reason();
}
