/*
 * Writing POSIX ustar archives: make-dataset's shards and the tests'
 * archives (tests/meson.build compiles this file into the suites too).
 * Pure functions on the caller's buffers and FILEs; any thread.
 */
#ifndef GF_CLI_TAR_WRITE_H
#define GF_CLI_TAR_WRITE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A ustar header into h: name (up to 100 bytes, not NUL-terminated at
 * 100), mode 0644, owner 0:0, the given size, mtime and type ('0' a
 * regular file), prefix (up to 155 bytes; NULL: none), checksum as the
 * standard says. */
void tar_write_header(uint8_t h[512], const char *name, char type, uint64_t size,
                      uint64_t mtime, const char *prefix);
/* Recomputes the checksum of the header at h (six octal digits, NUL,
 * space), e.g. after editing a field. */
void tar_write_checksum(uint8_t h[512]);
/* One regular member to f: header, data, zero padding to the next
 * 512-byte block. Returns 0 or -errno. */
int tar_write_member(FILE *f, const char *name, const void *data, size_t len, uint64_t mtime);

#ifdef __cplusplus
}
#endif
#endif /* GF_CLI_TAR_WRITE_H */
