#include "testutil.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBIW_WINDOWS_UTF8
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#include <stb_image_write.h>
#pragma GCC diagnostic pop

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
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
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

char *tu_image_folder(int classes, int per_class, int w, int h, const char *ext)
{
    char *root = tu_mkdtemp();
    char path[4096];
    for (int k = 0; k < classes; k++)
        for (int i = 0; i < per_class; i++) {
            snprintf(path, sizeof path, "%s/class_%d/img_%03d.%s", root, k, i, ext);
            if (strcmp(ext, "jpg") == 0)
                tu_write_jpg(path, w, h, 3, (uint32_t)(k * 1000 + i), 95);
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
