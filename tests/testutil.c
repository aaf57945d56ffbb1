#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

void tu_cpu_settings(gf_settings *s)
{
    gf_default_settings(s);
    s->device = GF_DEVICE_CPU;
}

void tu_exact_settings(gf_settings *s, const char *data, int w, int h)
{
    tu_cpu_settings(s);
    s->data = data;
    s->width = w;
    s->height = h;
    s->transform = GF_TRANSFORM_EVAL;
    s->crop_fraction = 1.0f;
    s->shuffle = 0;
    s->batch_size = 4;
    s->threads = 2;
}

/* The implementation lives in stb_write_impl.c, built without UBSan. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#include <stb_image_write.h>
#pragma GCC diagnostic pop
/* Declared only in stb's implementation section (stb_write_impl.c). */
unsigned char *stbi_zlib_compress(unsigned char *data, int data_len, int *out_len, int quality);

char *tu_mkdtemp(void)
{
    const char *tmp = getenv("TMPDIR");
    char buf[4096];
    snprintf(buf, sizeof buf, "%s/gftest-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(buf)) {
        perror("mkdtemp");
        exit(1);
    }
    return strdup(buf);
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

void tu_rmrf(const char *path)
{
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void mkparents(const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
                perror(buf);
                exit(1);
            }
            *p = '/';
        }
    }
}

void tu_write_file(const char *path, const void *data, size_t len)
{
    mkparents(path);
    FILE *f = fopen(path, "wb");
    if (!f || (len && fwrite(data, 1, len, f) != len) || fclose(f) != 0) { /* data NULL when empty */
        perror(path);
        exit(1);
    }
}

void tu_write_text(const char *path, const char *text)
{
    tu_write_file(path, text, strlen(text));
}

uint8_t tu_pixel(uint32_t seed, int x, int y, int c)
{
    uint32_t h = seed * 2654435761u ^ (uint32_t)x * 40503u ^ (uint32_t)y * 2246822519u ^
                 (uint32_t)c * 3266489917u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    return (uint8_t)h;
}

void tu_fill(uint8_t *px, int w, int h, int c, uint32_t seed)
{
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int k = 0; k < c; k++)
                px[((size_t)y * w + x) * c + k] = tu_pixel(seed, x, y, k);
}

void tu_write_png(const char *path, int w, int h, int c, uint32_t seed)
{
    uint8_t *px = malloc((size_t)w * h * c);
    tu_fill(px, w, h, c, seed);
    mkparents(path);
    if (!stbi_write_png(path, w, h, c, px, w * c)) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    free(px);
}

void tu_write_jpg(const char *path, int w, int h, int c, uint32_t seed, int quality)
{
    uint8_t *px = malloc((size_t)w * h * c);
    tu_fill(px, w, h, c, seed);
    mkparents(path);
    if (!stbi_write_jpg(path, w, h, c, px, quality)) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    free(px);
}

static void write_ppm(const char *path, int w, int h, uint32_t seed)
{
    char head[48];
    int hn = snprintf(head, sizeof head, "P6\n%d %d\n255\n", w, h);
    uint8_t *p = malloc((size_t)hn + (size_t)w * h * 3);
    memcpy(p, head, (size_t)hn);
    tu_fill(p + hn, w, h, 3, seed);
    tu_write_file(path, p, (size_t)hn + (size_t)w * h * 3);
    free(p);
}

#ifndef RWF_NOWAIT
#define RWF_NOWAIT 0x00000008
#endif

static _Atomic long nowait_budget = -1;

void tu_nowait_budget(long bytes)
{
    nowait_budget = bytes;
}

/* The reader's calls bind to this definition before libc's. The system
 * call itself, as glibc makes it (the offset in two halves); no sanitizer
 * intercepts preadv2, so none loses sight of it. */
ssize_t preadv2(int fd, const struct iovec *iov, int iovcnt, off_t offset, int flags)
{
    struct iovec first = iovcnt > 0 ? iov[0] : (struct iovec){0};
    long left = nowait_budget;
    bool on_cue = (flags & RWF_NOWAIT) && left >= 0;
    if (on_cue) {
        if (left == 0) {
            errno = EAGAIN;
            return -1;
        }
        if (first.iov_len > (size_t)left)
            first.iov_len = (size_t)left;
        iov = &first;
        iovcnt = 1;
    }
    long n = syscall(SYS_preadv2, fd, iov, iovcnt, (unsigned long)offset,
                     (unsigned long)((uint64_t)offset >> 32), flags);
    if (on_cue && n > 0)
        nowait_budget -= n; /* one reader at a time uses a budget over 0 */
    return (ssize_t)n;
}

int tu_evict(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    int gone = 0;
    if (fsync(fd) == 0 && fstat(fd, &st) == 0 && st.st_size > 0 &&
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE), n = ((size_t)st.st_size + page - 1) / page;
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        unsigned char *v = malloc(n);
        if (m != MAP_FAILED && v && mincore(m, (size_t)st.st_size, v) == 0) {
            gone = 1;
            for (size_t i = 0; i < n; i++)
                gone &= !(v[i] & 1);
        }
        free(v);
        if (m != MAP_FAILED)
            munmap(m, (size_t)st.st_size);
    }
    close(fd);
    return gone;
}

uint64_t tu_counted_shards(const char *dir, const int *counts, int n, int px, char *pattern,
                           size_t pattern_len)
{
    uint64_t samples = 0;
    uint8_t *pixels = malloc((size_t)px * px * 3);
    for (int k = 0; k < n; k++) {
        tu_tar w = {0};
        for (int j = 0; j < counts[k]; j++) {
            size_t len;
            tu_fill(pixels, px, px, 3, (uint32_t)(k * 100 + j));
            uint8_t *png = tu_png_mem(pixels, px, px, 3, &len);
            char name[32], cls[16];
            snprintf(name, sizeof name, "k%d_%d.png", k, j);
            tu_tar_file(&w, name, png, len);
            snprintf(name, sizeof name, "k%d_%d.cls", k, j);
            snprintf(cls, sizeof cls, "%d\n", k); /* the label is the shard */
            tu_tar_file(&w, name, cls, strlen(cls));
            free(png);
            samples++;
        }
        if (counts[k])
            tu_tar_end(&w);
        char path[4096];
        snprintf(path, sizeof path, "%s/s%d.tar", dir, k);
        tu_write_file(path, w.p, w.len);
        free(w.p);
    }
    free(pixels);
    snprintf(pattern, pattern_len, "%s/s{0..%d}.tar", dir, n - 1);
    return samples;
}

char *tu_image_folder(int classes, int per_class, int w, int h, const char *ext)
{
    char *root = tu_mkdtemp();
    char path[4096];
    for (int k = 0; k < classes; k++)
        for (int i = 0; i < per_class; i++) {
            snprintf(path, sizeof path, "%s/class_%d/img_%03d.%s", root, k, i, ext);
            if (strcmp(ext, "jpg") == 0)
                tu_write_jpg(path, w, h, 3, (uint32_t)(k * 1000 + i), 95);
            else if (strcmp(ext, "ppm") == 0)
                write_ppm(path, w, h, (uint32_t)(k * 1000 + i));
            else
                tu_write_png(path, w, h, 3, (uint32_t)(k * 1000 + i));
        }
    return root;
}

uint8_t *tu_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
    *len = fread(b, 1, (size_t)n, f);
    fclose(f);
    return b;
}

/* ---- in-memory encoders (added for test_decode) ---- */

#include <math.h>

typedef struct tu_membuf {
    uint8_t *p;
    size_t n, cap;
} tu_membuf;

static void tu_put(void *ctx, void *data, int size)
{
    tu_membuf *m = ctx;
    if (m->n + (size_t)size > m->cap) {
        m->cap = (m->n + (size_t)size) * 2 + 64;
        m->p = realloc(m->p, m->cap);
        if (!m->p)
            abort();
    }
    memcpy(m->p + m->n, data, (size_t)size);
    m->n += (size_t)size;
}

uint8_t *tu_png_mem(const uint8_t *px, int w, int h, int c, size_t *len)
{
    tu_membuf m = {0};
    if (!stbi_write_png_to_func(tu_put, &m, w, h, c, px, w * c))
        abort();
    *len = m.n;
    return m.p;
}

uint8_t *tu_jpg_mem(const uint8_t *px, int w, int h, int c, int quality, size_t *len)
{
    tu_membuf m = {0};
    if (!stbi_write_jpg_to_func(tu_put, &m, w, h, c, px, quality))
        abort();
    *len = m.n;
    return m.p;
}

static uint32_t tu_crc(const uint8_t *p, size_t n)
{
    static uint32_t table[256]; /* bytewise: tu_png_bomb's chunks are megabytes */
    if (!table[1])
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++)
        c = table[(c ^ p[i]) & 255] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

static void tu_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void tu_chunk(tu_membuf *m, const char *type, const uint8_t *data, size_t n)
{
    uint8_t hdr[8];
    tu_be32(hdr, (uint32_t)n);
    memcpy(hdr + 4, type, 4);
    tu_put(m, hdr, 8);
    uint8_t *body = malloc(n + 4);
    memcpy(body, type, 4);
    if (n)
        memcpy(body + 4, data, n);
    uint8_t crc[4];
    tu_be32(crc, tu_crc(body, n + 4));
    if (n)
        tu_put(m, (void *)data, (int)n);
    tu_put(m, crc, 4);
    free(body);
}

void tu_png_fix_crc(uint8_t *png, size_t at)
{
    uint32_t n = (uint32_t)png[at] << 24 | (uint32_t)png[at + 1] << 16 |
                 (uint32_t)png[at + 2] << 8 | png[at + 3];
    tu_be32(png + at + 8 + n, tu_crc(png + at + 4, (size_t)n + 4));
}

uint8_t *tu_png_raw(int w, int h, int depth, int color_type, const uint8_t *raw,
                    size_t raw_row_bytes, const uint8_t *plte, int plte_entries,
                    const uint8_t *trns, int trns_len, size_t *len)
{
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    tu_membuf m = {0};
    tu_put(&m, (void *)sig, 8);
    uint8_t ihdr[13];
    tu_be32(ihdr, (uint32_t)w);
    tu_be32(ihdr + 4, (uint32_t)h);
    ihdr[8] = (uint8_t)depth;
    ihdr[9] = (uint8_t)color_type;
    ihdr[10] = ihdr[11] = ihdr[12] = 0;
    tu_chunk(&m, "IHDR", ihdr, 13);
    if (plte)
        tu_chunk(&m, "PLTE", plte, (size_t)plte_entries * 3);
    if (trns)
        tu_chunk(&m, "tRNS", trns, (size_t)trns_len);
    size_t fl = (raw_row_bytes + 1) * (size_t)h;
    uint8_t *filt = malloc(fl);
    for (int y = 0; y < h; y++) {
        filt[(raw_row_bytes + 1) * y] = 0; /* filter: none */
        memcpy(filt + (raw_row_bytes + 1) * y + 1, raw + raw_row_bytes * y, raw_row_bytes);
    }
    int zlen;
    uint8_t *z = stbi_zlib_compress(filt, (int)fl, &zlen, 8);
    tu_chunk(&m, "IDAT", z, (size_t)zlen);
    tu_chunk(&m, "IEND", NULL, 0);
    free(z);
    free(filt);
    *len = m.n;
    return m.p;
}

/* Deflate's bits, least significant first; Huffman codes go in reversed. */
typedef struct tu_bits {
    uint8_t *p;
    size_t n;    /* whole bytes written */
    uint32_t acc;
    int fill;
} tu_bits;

static void tu_put_bits(tu_bits *b, uint32_t v, int n)
{
    b->acc |= v << b->fill;
    b->fill += n;
    while (b->fill >= 8) {
        b->p[b->n++] = (uint8_t)b->acc;
        b->acc >>= 8;
        b->fill -= 8;
    }
}

static void tu_put_code(tu_bits *b, uint32_t code, int n)
{
    uint32_t r = 0;
    for (int i = 0; i < n; i++)
        r |= (code >> i & 1) << (n - 1 - i);
    tu_put_bits(b, r, n);
}

uint8_t *tu_png_bomb(size_t deflate_bytes, size_t *len)
{
    /* One fixed-Huffman block: the row (filter 0, gray 0x80), then copies
     * of 258 bytes at distance 1 (13 bits each: 158x), an end of block;
     * an empty final block and the Adler-32 of it all. */
    size_t copies = deflate_bytes * 8 / 13;
    tu_bits b = {.p = malloc(deflate_bytes + 64)};
    b.p[b.n++] = 0x78;
    b.p[b.n++] = 0x01;
    tu_put_bits(&b, 0, 1); /* not final */
    tu_put_bits(&b, 1, 2); /* fixed Huffman */
    tu_put_code(&b, 0x30 + 0x00, 8);
    tu_put_code(&b, 0x30 + 0x80, 8);
    for (size_t i = 0; i < copies; i++) {
        tu_put_code(&b, 0xc0 + (285 - 280), 8); /* length 258 */
        tu_put_code(&b, 0, 5);                  /* distance 1 */
    }
    tu_put_code(&b, 0, 7); /* end of block */
    tu_put_bits(&b, 1, 1);
    tu_put_bits(&b, 1, 2);
    tu_put_code(&b, 0, 7);
    tu_put_bits(&b, 0, 7); /* to a byte */
    /* Adler-32 of 0x00, then n bytes of 0x80, in closed form mod 65521 */
    const uint64_t M = 65521, v = 0x80;
    uint64_t n = (uint64_t)copies * 258 + 1, a0 = 1, b0 = 1;
    uint64_t tri = n % 2 ? (n % M) * (((n + 1) / 2) % M) : ((n / 2) % M) * ((n + 1) % M);
    uint64_t a = (a0 + (n % M) * v) % M, bb = (b0 + (n % M) * a0 + v * (tri % M)) % M;
    uint8_t adler[4];
    tu_be32(adler, (uint32_t)(bb << 16 | a));
    memcpy(b.p + b.n, adler, 4);
    b.n += 4;
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    static const uint8_t ihdr[13] = {0, 0, 0, 1, 0, 0, 0, 1, 8, 0, 0, 0, 0};
    tu_membuf m = {0};
    tu_put(&m, (void *)sig, 8);
    tu_chunk(&m, "IHDR", ihdr, 13);
    tu_chunk(&m, "IDAT", b.p, b.n);
    tu_chunk(&m, "IEND", NULL, 0);
    free(b.p);
    *len = m.n;
    return m.p;
}

void tu_fill_smooth(uint8_t *px, int w, int h, int c, uint32_t seed)
{
    double ph = (seed % 97) * 0.1;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int k = 0; k < c; k++) {
                double v = 128 + 70 * sin(x / (11.0 + 3 * k) + ph) * cos(y / (13.0 + 2 * k)) +
                           40 * sin((x + y) / 29.0 + k);
                px[((size_t)y * w + x) * c + k] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
}

void tu_tar_raw(tu_tar *w, const void *d, size_t n)
{
    if (w->len + n > w->cap) {
        w->cap = (w->len + n) * 2 + 4096;
        w->p = realloc(w->p, w->cap);
        if (!w->p) {
            perror("tu_tar_raw");
            exit(1);
        }
    }
    if (d)
        memcpy(w->p + w->len, d, n);
    else
        memset(w->p + w->len, 0, n);
    w->len += n;
}

void tu_tar_pad(tu_tar *w)
{
    size_t r = w->len % 512;
    if (r)
        tu_tar_raw(w, NULL, 512 - r);
}

size_t tu_tar_header(tu_tar *w, const char *name, char type, uint64_t size, const char *prefix)
{
    uint8_t h[512];
    tar_write_header(h, name, type, size, 014000000000ull, prefix);
    size_t at = w->len;
    tu_tar_raw(w, h, 512);
    return at;
}

size_t tu_tar_file(tu_tar *w, const char *name, const void *data, size_t n)
{
    tu_tar_header(w, name, '0', n, NULL);
    size_t at = w->len;
    tu_tar_raw(w, data, n);
    tu_tar_pad(w);
    return at;
}

void tu_tar_end(tu_tar *w)
{
    tu_tar_raw(w, NULL, 1024);
}

#include "config.h"
#if GF_HAVE_TURBO
#include <jpeglib.h>

/* Offset of the marker after the scan whose SOS is at p[sos]: entropy
 * data holds FF only as FF 00 (stuffed) or FF D0-D7 (restarts). */
static size_t scan_end(const uint8_t *p, size_t n, size_t sos)
{
    size_t i = sos + 2 + ((size_t)p[sos + 2] << 8 | p[sos + 3]);
    for (; i + 1 < n; i++)
        if (p[i] == 0xff && p[i + 1] != 0 && (p[i + 1] < 0xd0 || p[i + 1] > 0xd7))
            return i;
    return n;
}

/* libjpeg's encoder into memory, RGB (c 3) or CMYK (c 4, with the Adobe
 * marker jpeg_set_defaults writes for it); a scan script when script is
 * not NULL. */
static uint8_t *encode(const uint8_t *px, int w, int h, int c, int q, int how,
                       const jpeg_scan_info *script, int n_scans, size_t *len)
{
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr je;
    ci.err = jpeg_std_error(&je);
    jpeg_create_compress(&ci);
    unsigned char *mem = NULL;
    unsigned long n = 0;
    jpeg_mem_dest(&ci, &mem, &n);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    ci.input_components = c;
    ci.in_color_space = c == 4 ? JCS_CMYK : JCS_RGB;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, q, TRUE);
    if (how == TU_JPEG_PROGRESSIVE)
        jpeg_simple_progression(&ci);
    ci.arith_code = how == TU_JPEG_ARITH;
    if (script) {
        ci.scan_info = script;
        ci.num_scans = n_scans;
    }
    jpeg_start_compress(&ci, TRUE);
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW row = (JSAMPROW)(px + (size_t)ci.next_scanline * w * c);
        jpeg_write_scanlines(&ci, &row, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    *len = n;
    return mem;
}

uint8_t *tu_jpeg_lib(const uint8_t *px, int w, int h, int q, int how, size_t *len)
{
    return encode(px, w, h, 3, q, how, NULL, 0, len);
}

uint8_t *tu_jpeg_cmyk(const uint8_t *cmyk, int w, int h, int q, size_t *len)
{
    return encode(cmyk, w, h, 4, q, TU_JPEG_BASELINE, NULL, 0, len);
}

uint8_t *tu_jpeg_scans(const uint8_t *px, int w, int h, int scans, size_t *len)
{
    /* Every scan a first pass at full precision (Ah = Al = 0), so a
     * repeat is no bogus progression for libjpeg to warn about. */
    static const jpeg_scan_info script[] = {
        {3, {0, 1, 2}, 0, 0, 0, 0},
        {1, {0}, 1, 63, 0, 0},
        {1, {1}, 1, 63, 0, 0},
        {1, {2}, 1, 63, 0, 0},
    };
    const int base = (int)(sizeof script / sizeof *script);
    if (scans < base)
        abort();
    size_t n;
    uint8_t *mem = encode(px, w, h, 3, 90, TU_JPEG_BASELINE, script, base, &n);
    size_t sos = 2; /* the second SOS: Y's AC scan */
    for (int seen = 0; sos + 3 < n; sos++)
        if (mem[sos] == 0xff && mem[sos + 1] == 0xda && ++seen == 2)
            break;
    if (sos + 3 >= n)
        abort();
    size_t end = scan_end(mem, n, sos), seg = end - sos, extra = (size_t)(scans - base);
    uint8_t *out = malloc(n + seg * extra);
    if (!out)
        abort();
    /* The copies right after the scan: the Huffman tables before it hold */
    memcpy(out, mem, end);
    for (size_t k = 0; k < extra; k++)
        memcpy(out + end + seg * k, mem + sos, seg);
    memcpy(out + end + seg * extra, mem + end, n - end);
    *len = n + seg * extra;
    free(mem);
    return out;
}
#endif

void tu_limit_address_space(void)
{
#if !defined(__SANITIZE_ADDRESS__) && !defined(__has_feature)
#define GF_NO_ASAN 1
#elif defined(__has_feature)
#if !__has_feature(address_sanitizer) && !defined(__SANITIZE_ADDRESS__)
#define GF_NO_ASAN 1
#endif
#endif
#ifdef GF_NO_ASAN
    /* fork mode: only this test's process; valgrind needs its own room */
    if (!getenv("GF_TEST_NO_RLIMIT")) {
        struct rlimit rl = {1ull << 30, 1ull << 30};
        setrlimit(RLIMIT_AS, &rl);
    }
#endif
}
