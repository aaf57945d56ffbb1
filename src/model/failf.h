/*
 * The model's and the demo's one way to fail with a reason: format it
 * into the caller's why buffer and return -1 (model.cu; the demo's
 * nvml.c, nccl_dl.c). Here, with the model, which the demo is above. Any
 * thread. Header-only, so that each of those files still builds on its
 * own (tests/ builds nvml.c and model.cu without the rest of the demo); C
 * and C++ (model.cu is C++ on cudaemu).
 */
#ifndef GF_DEMO_FAILF_H
#define GF_DEMO_FAILF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static inline int demo_failf(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return -1;
}

#endif /* GF_DEMO_FAILF_H */
