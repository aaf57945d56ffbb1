/* Helpers for the Check suites: temporary trees and synthetic images. */
#ifndef GF_TESTUTIL_H
#define GF_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "gpufeed.h"
#include "tar_write.h"

/* gf_default_settings on the CPU path: the suites that read batches as
 * host bytes (the gpu suites cover CUDA). */
void tu_cpu_settings(gf_settings *s);
/* tu_cpu_settings for exact bytes: eval at the source size (w x h) with
 * crop_fraction 1, the identity; in order, batches of 4, 2 threads. */
void tu_exact_settings(gf_settings *s, const char *data, int w, int h);

/* A fresh directory under $TMPDIR; the caller frees the string. */
char *tu_mkdtemp(void);
void tu_rmrf(const char *path);
/* Creates parent directories as needed. */
void tu_write_file(const char *path, const void *data, size_t len);
void tu_write_text(const char *path, const char *text);
/* Deterministic pixels: value at (x, y, c) = tu_pixel(seed, x, y, c). */
uint8_t tu_pixel(uint32_t seed, int x, int y, int c);
void tu_fill(uint8_t *px, int w, int h, int c, uint32_t seed);
/* Writes a w x h x c image (pixels from tu_fill(seed)) as PNG or JPEG. */
void tu_write_png(const char *path, int w, int h, int c, uint32_t seed);
void tu_write_jpg(const char *path, int w, int h, int c, uint32_t seed, int quality);
/* Builds root/class_k/img_i.EXT for k < classes, i < per_class; returns
 * root (caller frees). Image (k, i) is w x h RGB filled with seed k*1000+i;
 * EXT jpg, ppm (binary P6), else PNG. */
char *tu_image_folder(int classes, int per_class, int w, int h, const char *ext);
/* Tar shards dir/s0.tar .. s{n-1}.tar, shard k with counts[k] samples
 * "k<k>_<j>.png" (px x px RGB, tu_fill seed k * 100 + j) and their .cls,
 * the label k; a count of 0 writes an empty file (a damaged shard). Writes
 * the shards' "{0..n-1}" pattern into pattern; returns the samples. */
uint64_t tu_counted_shards(const char *dir, const int *counts, int n, int px, char *pattern,
                           size_t pattern_len);
/* Drops path's pages from the page cache (fsync, then
 * POSIX_FADV_DONTNEED). Returns 1 if none is resident after (mincore), 0
 * if the file system keeps them (tmpfs). */
int tu_evict(const char *path);
/* The reader's RWF_NOWAIT reads in this program, on cue (testutil.c
 * defines preadv2): bytes >= 0 lets that many more through and then says
 * EAGAIN, as a cold page cache does; -1 (the start) leaves it to the kernel,
 * whose answer races its own readahead. */
void tu_nowait_budget(long bytes);
/* Reads a whole file; caller frees. */
uint8_t *tu_read_file(const char *path, size_t *len);

/* A tar archive built in memory (ustar headers, correct checksums). */
typedef struct tu_tar {
    uint8_t *p;
    size_t len, cap;
} tu_tar;
/* Appends n bytes (zeros when d is NULL). */
void tu_tar_raw(tu_tar *w, const void *d, size_t n);
/* Pads to a 512-byte block. */
void tu_tar_pad(tu_tar *w);
/* Recomputes the checksum of the header at h (src/cli/tar_write.c, the
 * one ustar writer, which make-dataset uses too). */
#define tu_tar_checksum tar_write_checksum
/* Appends a header; returns its offset. prefix may be NULL. */
size_t tu_tar_header(tu_tar *w, const char *name, char type, uint64_t size, const char *prefix);
/* Appends a regular member; returns its data offset. */
size_t tu_tar_file(tu_tar *w, const char *name, const void *data, size_t n);
/* Appends the two zero blocks that end an archive. */
void tu_tar_end(tu_tar *w);

/* In-memory encoders (added for test_decode). Caller frees the result. */
uint8_t *tu_png_mem(const uint8_t *px, int w, int h, int c, size_t *len);
uint8_t *tu_jpg_mem(const uint8_t *px, int w, int h, int c, int quality, size_t *len);
/* A PNG from raw scanlines (filter bytes added here), any bit depth and
 * color type; plte/trns may be NULL. For what stbi_write_png cannot make:
 * 16-bit, palette, tRNS. */
uint8_t *tu_png_raw(int w, int h, int depth, int color_type, const uint8_t *raw,
                    size_t raw_row_bytes, const uint8_t *plte, int plte_entries,
                    const uint8_t *trns, int trns_len, size_t *len);
/* Makes the CRC of the PNG chunk at byte `at` (its length field) match
 * its type and data again, after a test changed them. */
void tu_png_fix_crc(uint8_t *png, size_t at);
/* A 1x1 gray PNG whose one IDAT holds about deflate_bytes of deflate
 * data that inflate to the row and then 158 times as much past it (a
 * valid stream, Adler-32 and CRCs right): a time and memory bomb. */
uint8_t *tu_png_bomb(size_t deflate_bytes, size_t *len);
/* Smooth, photo-like pixels (JPEG-friendly), deterministic in seed. */
void tu_fill_smooth(uint8_t *px, int w, int h, int c, uint32_t seed);
/* libjpeg-turbo builds: a w x h RGB JPEG by libjpeg itself at quality q:
 * baseline, progressive (jpeg_simple_progression, which stb_image_write
 * cannot make) or arithmetic-coded. */
enum { TU_JPEG_BASELINE, TU_JPEG_PROGRESSIVE, TU_JPEG_ARITH };
uint8_t *tu_jpeg_lib(const uint8_t *px, int w, int h, int q, int how, size_t *len);
/* The same from w x h x 4 CMYK samples, baseline, with the Adobe marker. */
uint8_t *tu_jpeg_cmyk(const uint8_t *cmyk, int w, int h, int q, size_t *len);
/* libjpeg-turbo builds: a w x h RGB progressive JPEG of `scans` scans
 * (>= 4): DC, each component's AC, then Y's AC scan repeated (a
 * decompression-time bomb when scans is large). Caller frees. */
uint8_t *tu_jpeg_scans(const uint8_t *px, int w, int h, int scans, size_t *len);
/* Lowers RLIMIT_AS to 1 GiB (not under ASan or GF_TEST_NO_RLIMIT=1, as
 * valgrind sets): for tests that a huge header allocates nothing. */
void tu_limit_address_space(void);

#endif
