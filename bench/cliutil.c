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

/* ---- data set walking ---------------------------------------------------- */

static int fl_push(cli_filelist *fl, char *path, int32_t label)
{
    if (fl->n == fl->cap) {
        size_t cap = fl->cap ? fl->cap * 2 : 256;
        char **p = realloc(fl->paths, cap * sizeof *p);
        if (!p)
            return -1;
        fl->paths = p;
        int32_t *l = realloc(fl->labels, cap * sizeof *l);
        if (!l)
            return -1;
        fl->labels = l;
        fl->cap = cap;
    }
    fl->labels[fl->n] = label;
    fl->paths[fl->n++] = path;
    return 0;
}

void cli_filelist_free(cli_filelist *fl)
{
    for (size_t i = 0; i < fl->n; i++)
        free(fl->paths[i]);
    free(fl->paths);
    free(fl->labels);
    fl->paths = NULL;
    fl->labels = NULL;
    fl->n = fl->cap = 0;
}

static char *join(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    int slash = la > 0 && a[la - 1] != '/';
    char *p = malloc(la + (size_t)slash + lb + 1);
    if (!p)
        return NULL;
    memcpy(p, a, la);
    if (slash)
        p[la] = '/';
    memcpy(p + la + (size_t)slash, b, lb + 1);
    return p;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of the visible entries of dir of the wanted kind
 * (want_dir: sub-directories; else regular files). */
static int sorted_entries(const char *dir, int want_dir, char ***out, size_t *n_out)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **v = NULL;
    size_t n = 0, cap = 0;
    if (!d)
        return -errno;
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        char *full;
        int is_dir;
        if (e->d_name[0] == '.')
            continue;
        full = join(dir, e->d_name);
        if (!full)
            goto nomem;
        if (stat(full, &st) != 0) {
            free(full);
            continue;
        }
        free(full);
        is_dir = S_ISDIR(st.st_mode);
        if (want_dir ? !is_dir : !S_ISREG(st.st_mode))
            continue;
        if (n == cap) {
            size_t c2 = cap ? cap * 2 : 64;
            char **p = realloc(v, c2 * sizeof *p);
            if (!p)
                goto nomem;
            v = p;
            cap = c2;
        }
        if (!(v[n] = strdup(e->d_name)))
            goto nomem;
        n++;
    }
    closedir(d);
    qsort(v, n, sizeof *v, cmp_str);
    *out = v;
    *n_out = n;
    return 0;
nomem:
    closedir(d);
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
    return -ENOMEM;
}

static void free_names(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static int list_folder(const char *root, cli_filelist *fl, char *why, size_t why_len)
{
    char **classes;
    size_t nc;
    int rc = sorted_entries(root, 1, &classes, &nc);
    if (rc < 0) {
        snprintf(why, why_len, "%s: %s", root, strerror(-rc));
        return -1;
    }
    for (size_t c = 0; c < nc; c++) {
        char *cdir = join(root, classes[c]);
        char **files;
        size_t nf;
        if (!cdir) {
            rc = -ENOMEM;
            break;
        }
        rc = sorted_entries(cdir, 0, &files, &nf);
        if (rc < 0) {
            snprintf(why, why_len, "%s: %s", cdir, strerror(-rc));
            free(cdir);
            free_names(classes, nc);
            return -1;
        }
        for (size_t i = 0; i < nf && rc == 0; i++) {
            char *p = join(cdir, files[i]);
            if (!p || fl_push(fl, p, (int32_t)c) < 0) {
                free(p);
                rc = -ENOMEM;
            }
        }
        free_names(files, nf);
        free(cdir);
        if (rc < 0)
            break;
    }
    free_names(classes, nc);
    if (rc < 0) {
        snprintf(why, why_len, "%s", strerror(-rc));
        return -1;
    }
    return 0;
}

/* "relative/path label" per line, paths relative to the list file's folder;
 * '#' comments and blank lines skipped (the loader's list format). */
static int list_file(const char *list, cli_filelist *fl, char *why, size_t why_len)
{
    FILE *f = fopen(list, "r");
    char *line = NULL, *dir;
    size_t cap = 0;
    const char *slash = strrchr(list, '/');
    int rc = 0;
    if (!f) {
        snprintf(why, why_len, "%s: %s", list, strerror(errno));
        return -1;
    }
    dir = slash ? strndup(list, (size_t)(slash - list + 1)) : strdup("");
    if (!dir) {
        fclose(f);
        snprintf(why, why_len, "%s", strerror(ENOMEM));
        return -1;
    }
    while (getline(&line, &cap, f) >= 0) {
        char *s = line, *e;
        while (isspace((unsigned char)*s))
            s++;
        if (!*s || *s == '#')
            continue;
        /* The label is the last field; the path is everything before it. */
        e = s + strlen(s);
        while (e > s && isspace((unsigned char)e[-1]))
            e--;
        while (e > s && !isspace((unsigned char)e[-1]))
            e--;
        long label = strtol(e, NULL, 10);
        while (e > s && isspace((unsigned char)e[-1]))
            e--;
        if (e == s)
            continue;
        *e = '\0';
        {
            char *p = s[0] == '/' ? strdup(s) : join(dir, s);
            if (!p || fl_push(fl, p, (int32_t)label) < 0) {
                free(p);
                rc = -1;
                snprintf(why, why_len, "%s", strerror(ENOMEM));
                break;
            }
        }
    }
    free(line);
    free(dir);
    fclose(f);
    return rc;
}

int cli_is_shard_source(const char *data)
{
    struct stat st;
    int depth = 0;
    size_t start = 0, len = strlen(data);
    if (len == 0)
        return 0;
    for (size_t i = 0; i <= len; i++) {
        char c = data[i];
        if (c == '{')
            depth++;
        else if (c == '}' && depth > 0)
            depth--;
        if ((c == ',' && depth == 0) || c == '\0') {
            if (i - start < 4 || strncasecmp(data + i - 4, ".tar", 4) != 0)
                return 0;
            start = i + 1;
        }
    }
    /* A lone "x.tar" that is a directory is an ImageFolder. */
    return strpbrk(data, ",{") || stat(data, &st) != 0 || !S_ISDIR(st.st_mode);
}

int cli_list_dataset(const char *data, cli_filelist *fl, char *why, size_t why_len)
{
    struct stat st;
    if (cli_is_shard_source(data)) {
        snprintf(why, why_len,
                 "%s: tar shards have no file per sample; open a loader on them and read "
                 "samples with gf_read_sample()",
                 data);
        return -1;
    }
    if (stat(data, &st) != 0) {
        snprintf(why, why_len, "%s: %s", data, strerror(errno));
        return -1;
    }
    if (S_ISDIR(st.st_mode))
        return list_folder(data, fl, why, why_len);
    return list_file(data, fl, why, why_len);
}

int cli_read_file(const char *path, uint8_t **buf, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    uint8_t *p;
    size_t got = 0;
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    p = malloc(st.st_size > 0 ? (size_t)st.st_size : 1);
    if (!p) {
        close(fd);
        return -ENOMEM;
    }
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, p + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break; /* shrank under us: keep what we have */
        got += (size_t)r;
    }
    close(fd);
    *buf = p;
    *len = got;
    return 0;
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

int cli_read_decode(struct gf_decoder *dec, char *const *paths, const uint64_t *index, int n,
                    uint64_t epoch, uint8_t *out, size_t cell, uint64_t *errors)
{
    char why[256];
    int good = 0;
    for (int i = 0; i < n; i++) {
        uint8_t *buf;
        size_t len;
        uint8_t *dst = out + (size_t)i * cell;
        if (cli_read_file(paths[index[i]], &buf, &len) < 0) {
            memset(dst, 0, cell);
            (*errors)++;
            continue;
        }
        if (gf_decoder_decode(dec, buf, len, epoch, index[i], dst, why, sizeof why) < 0) {
            memset(dst, 0, cell);
            (*errors)++;
        } else {
            good++;
        }
        free(buf);
    }
    return good;
}
