/* stb_image behind gf__stb_* names (see stb_image_impl.c for why). */
#ifndef GF_STB_IMAGE_IMPL_H
#define GF_STB_IMAGE_IMPL_H

#include <stddef.h>
#include <stdint.h>

int gf__stb_info(const uint8_t *data, int len, int *w, int *h, int *comp);
int gf__stb_is_16_bit(const uint8_t *data, int len);
/* Until called again on this thread, every allocation of stb_image's over
 * max_bytes fails (0: none); gf__stb_refused_bytes then says the size
 * refused last (0: none since the cap was set). */
void gf__stb_cap_allocations(size_t max_bytes);
size_t gf__stb_refused_bytes(void);
/* In the file's own channel count; free with gf__stb_free. */
uint8_t *gf__stb_load(const uint8_t *data, int len, int *w, int *h, int *comp);
uint16_t *gf__stb_load_16(const uint8_t *data, int len, int *w, int *h, int *comp);
void gf__stb_free(void *pixels);
/* Why the last call on this thread failed. */
const char *gf__stb_failure_reason(void);

#endif
