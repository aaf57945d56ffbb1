/* stb_image_write's implementation, for making test inputs. Built without
 * UBSan: its JPEG writer shifts signed ints past their range, which is
 * stb's business, not ours. */
#define STB_IMAGE_WRITE_IMPLEMENTATION
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#include <stb_image_write.h>
#pragma GCC diagnostic pop
