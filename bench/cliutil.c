/*
 * Shared helpers for the gpufeed subcommands; see cliutil.h.
 */
#include "cliutil.h"
#include "gpufeed.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    if (cmd && *cmd)
        fprintf(stderr, "gpufeed %s: ", cmd);
    else
        fputs("gpufeed: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int cli_parse_int(const char *cmd, const char *opt, const char *s, long min,
                  long max, int *out)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (end == s || *end || errno) {
        cli_error(cmd, "--%s: '%s' is not an integer", opt, s);
        return -1;
    }
    if (v < min || v > max) {
        cli_error(cmd, "--%s: %ld is out of range [%ld, %ld]", opt, v, min, max);
        return -1;
    }
    *out = (int)v;
    return 0;
}

int cli_parse_u64(const char *cmd, const char *opt, const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;
    errno = 0;
    if (*s == '-' || !isdigit((unsigned char)*s)) {
        cli_error(cmd, "--%s: '%s' is not a non-negative integer", opt, s);
        return -1;
    }
    v = strtoull(s, &end, 0);
    if (end == s || *end || errno) {
        cli_error(cmd, "--%s: '%s' is not a non-negative integer", opt, s);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

int cli_parse_double(const char *cmd, const char *opt, const char *s, double min,
                     double max, double *out)
{
    char *end;
    double v;
    errno = 0;
    v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v)) {
        cli_error(cmd, "--%s: '%s' is not a number", opt, s);
        return -1;
    }
    if (v < min || v > max) {
        cli_error(cmd, "--%s: %g is out of range [%g, %g]", opt, v, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_size(const char *cmd, const char *opt, const char *s, int max,
                   int *w, int *h)
{
    char *end;
    long a, b;
    errno = 0;
    a = strtol(s, &end, 10);
    if (end == s || errno)
        goto bad;
    if (*end == 'x' || *end == 'X') {
        const char *t = end + 1;
        b = strtol(t, &end, 10);
        if (end == t || errno)
            goto bad;
    } else {
        b = a;
    }
    if (*end)
        goto bad;
    if (a < 1 || b < 1 || a > max || b > max) {
        cli_error(cmd, "--%s: %s is out of range (1..%d per side)", opt, s, max);
        return -1;
    }
    *w = (int)a;
    *h = (int)b;
    return 0;
bad:
    cli_error(cmd, "--%s: '%s' is not a size (WxH or S)", opt, s);
    return -1;
}

int cli_parse_choice(const char *cmd, const char *opt, const char *s,
                     const char *const *names)
{
    char list[256] = "";
    size_t used = 0;
    for (int i = 0; names[i]; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    for (int i = 0; names[i] && used < sizeof list; i++) {
        int n = snprintf(list + used, sizeof list - used, "%s%s", i ? "|" : "",
                         names[i]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    cli_error(cmd, "--%s: '%s' is not one of %s", opt, s, list);
    return -1;
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0 if invalid. */
static int utf8_len(const unsigned char *p)
{
    unsigned c = p[0];
    int n;
    unsigned min;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if ((c & 0xE0) == 0xC0) {
        n = 2;
        cp = c & 0x1F;
        min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        n = 3;
        cp = c & 0x0F;
        min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        n = 4;
        cp = c & 0x07;
        min = 0x10000;
    } else {
        return 0;
    }
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

void cli_json_string(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    fputc('"', f);
    while (*p) {
        unsigned c = *p;
        int n;
        switch (c) {
        case '"': fputs("\\\"", f); p++; continue;
        case '\\': fputs("\\\\", f); p++; continue;
        case '\b': fputs("\\b", f); p++; continue;
        case '\f': fputs("\\f", f); p++; continue;
        case '\n': fputs("\\n", f); p++; continue;
        case '\r': fputs("\\r", f); p++; continue;
        case '\t': fputs("\\t", f); p++; continue;
        default: break;
        }
        if (c < 0x20 || c == 0x7F) {
            fprintf(f, "\\u%04x", c);
            p++;
            continue;
        }
        n = utf8_len(p);
        if (n == 0) { /* not UTF-8: keep the byte visible, output stays valid */
            fprintf(f, "\\u%04x", c);
            p++;
            continue;
        }
        fwrite(p, 1, (size_t)n, f);
        p += n;
    }
    fputc('"', f);
}

void cli_json_double(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fputs("null", f);
}

uint16_t cli_f16_bits(float f)
{
    /* Normals: rebias, add half an ulp less one (plus the kept bit's
     * parity: ties to even), truncate. Subnormals: one float addition of
     * 2^-1 aligns the kept bits at the bottom, and the FPU rounds. */
    const uint32_t inf32 = 255u << 23, max16 = (127u + 16) << 23, min_normal16 = 113u << 23;
    const uint32_t magic_bits = ((127u - 15) + (23 - 10) + 1) << 23;
    uint32_t u, sign;
    float magic;
    memcpy(&u, &f, sizeof u);
    memcpy(&magic, &magic_bits, sizeof magic);
    sign = u & 0x80000000u;
    u ^= sign;
    uint16_t h;
    if (u >= max16) {
        h = u > inf32 ? 0x7e00 : 0x7c00; /* NaN, or too large: infinity */
    } else if (u < min_normal16) {
        float a;
        memcpy(&a, &u, sizeof a);
        a += magic;
        memcpy(&u, &a, sizeof u);
        h = (uint16_t)(u - magic_bits);
    } else {
        u += ((uint32_t)(15 - 127) << 23) + 0xfff + ((u >> 13) & 1);
        h = (uint16_t)(u >> 13);
    }
    return (uint16_t)(h | (sign >> 16));
}

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t cli_peak_rss_bytes(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (uint64_t)ru.ru_maxrss * 1024u; /* Linux reports KiB */
}

double cli_cpu_seconds(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

int cli_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (n > 1024 ? 1024 : (int)n);
}

int cli_parse_int_list(const char *cmd, const char *opt, const char *s, long min, long max,
                       int *out, int max_n, int *n)
{
    const char *p = s;
    *n = 0;
    for (;;) {
        char item[32], *end;
        long v;
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof item) {
            cli_error(cmd, "--%s: '%s' is not a list of integers (e.g. 1,2,4)", opt, s);
            return -1;
        }
        memcpy(item, p, len);
        item[len] = 0;
        errno = 0;
        v = strtol(item, &end, 10);
        if (end == item || *end || errno) {
            cli_error(cmd, "--%s: '%s' is not an integer", opt, item);
            return -1;
        }
        if (v < min || v > max) {
            cli_error(cmd, "--%s: %ld is out of range [%ld, %ld]", opt, v, min, max);
            return -1;
        }
        if (*n == max_n) {
            cli_error(cmd, "--%s: at most %d values", opt, max_n);
            return -1;
        }
        out[(*n)++] = (int)v;
        p += len;
        if (!*p)
            return 0;
        p++; /* the comma: a trailing one leaves an empty item, refused above */
    }
}

void cli_cpu_model(char *buf, size_t len)
{
    char line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    snprintf(buf, len, "unknown");
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon)
            continue;
        colon++;
        while (*colon == ' ' || *colon == '\t')
            colon++;
        colon[strcspn(colon, "\n")] = 0;
        snprintf(buf, len, "%s", colon);
        break;
    }
    fclose(f);
}

double cli_page_cache_fraction(char *const *paths, size_t n)
{
    long page = sysconf(_SC_PAGESIZE);
    uint64_t total = 0, resident = 0;
    unsigned char *vec = NULL;
    size_t vec_cap = 0;
    if (page <= 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        int fd = open(paths[i], O_RDONLY | O_CLOEXEC);
        struct stat st;
        void *m;
        size_t pages;
        if (fd < 0)
            continue;
        if (fstat(fd, &st) != 0 || st.st_size <= 0) {
            close(fd);
            continue;
        }
        m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        close(fd);
        if (m == MAP_FAILED)
            continue;
        pages = ((size_t)st.st_size + (size_t)page - 1) / (size_t)page;
        if (pages > vec_cap) {
            unsigned char *v = realloc(vec, pages);
            if (!v) {
                munmap(m, (size_t)st.st_size);
                break;
            }
            vec = v;
            vec_cap = pages;
        }
        if (mincore(m, (size_t)st.st_size, vec) == 0) {
            total += pages;
            for (size_t k = 0; k < pages; k++)
                resident += vec[k] & 1;
        }
        munmap(m, (size_t)st.st_size);
    }
    free(vec);
    return total ? (double)resident / (double)total : -1;
}

/* ---- samples through a loader's index ------------------------------------- */

int cli_open_index(const char *data, gf_loader **out)
{
    gf_settings s;
    gf_default_settings(&s);
    s.data = data;
    s.batch_size = 1;
    s.prefetch_depth = 1;
    s.threads = 1;
    s.width = s.height = 16;
    s.transform = GF_TRANSFORM_EVAL;
    s.shuffle = 0;
    s.world = 1; /* the whole data set, whatever the launcher says */
    s.device = GF_DEVICE_CPU;
    s.io = GF_IO_POSIX;
    return gf_open(out, &s);
}

int cli_read_decode(gf_loader *index, gf_decoder *dec, const uint64_t *ids, int n, uint64_t epoch,
                    uint8_t *out, size_t cell, uint64_t *errors)
{
    char why[256];
    int good = 0;
    for (int i = 0; i < n; i++) {
        void *buf;
        size_t len;
        uint8_t *dst = out + (size_t)i * cell;
        if (gf_read_sample(index, ids[i], &buf, &len, NULL, 0) < 0) {
            memset(dst, 0, cell);
            (*errors)++;
            continue;
        }
        if (gf_decoder_decode(dec, buf, len, epoch, ids[i], dst, why, sizeof why) < 0) {
            memset(dst, 0, cell);
            (*errors)++;
        } else {
            good++;
        }
        gf_free(buf);
    }
    return good;
}
