/* Internal helpers shared by every stage. */
#ifndef GF_COMMON_H
#define GF_COMMON_H

#include "gpufeed.h"
#include "mix.h" /* gf__mix64 */

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sched.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define GF__MIN(a, b) ((a) < (b) ? (a) : (b))

/* White space within a line (a line's end is the caller's to take). */
static inline int gf__is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}
#define GF__MAX(a, b) ((a) > (b) ? (a) : (b))

#if defined(__GNUC__)
#define GF__COLD __attribute__((cold))
#define GF__PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#define GF__LIKELY(x) __builtin_expect(!!(x), 1)
#define GF__UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define GF__COLD
#define GF__PRINTF(fmt, args)
#define GF__LIKELY(x) (x)
#define GF__UNLIKELY(x) (x)
#endif

/* Per-sample key: all randomness of one sample derives from it, so batches
 * are identical for any thread count. */
/* Python's round(): halves to even, whatever the FPU's rounding mode
 * (torchvision's crop and erasing boxes round so). */
static inline double gf__round_even(double x)
{
    double r = floor(x + 0.5);
    if (r - x == 0.5 && fmod(r, 2) != 0)
        r -= 1;
    return r;
}

static inline uint64_t gf__sample_key(uint64_t seed, uint64_t epoch, uint64_t index)
{
    return gf__mix64(gf__mix64(gf__mix64(seed) ^ epoch) ^ index);
}

/* Cores this process may run on (its affinity mask), else those online. */
static inline int gf__available_cores(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Large buffers filled whole (ring slots, remote shards) ask for
 * transparent huge pages: a 2 MiB fault, not 512 of 4 KiB (about 11 us
 * each on a VM). A hint; [p, p + n) should start on a 2 MiB boundary. */
enum { GF__HUGE_PAGE = 2 << 20 };
static inline void gf__advise_huge(void *p, size_t n)
{
#ifdef MADV_HUGEPAGE
    if (n >= GF__HUGE_PAGE)
        (void)madvise(p, n / GF__HUGE_PAGE * GF__HUGE_PAGE, MADV_HUGEPAGE);
#else
    (void)p, (void)n;
#endif
}

static inline double gf__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* snprintf into a reason buffer; tolerates why == NULL. */
static inline void gf__why(char *why, size_t len, const char *fmt, ...) GF__PRINTF(3, 4);
static inline void gf__why(char *why, size_t len, const char *fmt, ...)
{
    if (!why || !len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
}

/* error.c: path into dst[len]; when too long, its middle gives way to
 * "..." (U+2026), keeping its start and, longer, its end (the file's
 * name). */
void gf__fit_path(char *dst, size_t len, const char *path);
/* "path: reason" into why[len] (tolerates why == NULL), fmt formatting
 * the reason: the reason is kept whole and the path fitted around it. */
GF__COLD void gf__why_path(char *why, size_t len, const char *path, const char *fmt, ...)
    GF__PRINTF(4, 5);

#endif
