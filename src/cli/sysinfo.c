/*
 * Clocks, resource use and the page-cache probe; see sysinfo.h.
 */
#include "sysinfo.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
