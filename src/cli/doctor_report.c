/*
 * gpufeed doctor's report helpers: issues, ok items, version strings. Below
 * the command and its checks (doctor_report.h). The command's one thread.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "doctor_report.h"

void doctor_issue(doctor_report *r, const char *fmt, ...)
{
    if (r->nissues >= MAX_ISSUES)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->issues[r->nissues++], sizeof r->issues[0], fmt, ap);
    va_end(ap);
}

void doctor_ok(doctor_report *r, const char *fmt, ...)
{
    size_t used = strlen(r->ok);
    if (used && used + 2 < sizeof r->ok) {
        memcpy(r->ok + used, ", ", 3);
        used += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->ok + used, sizeof r->ok - used, fmt, ap);
    va_end(ap);
}

/* "12.4" from 12040. */
const char *doctor_cuda_ver(int v, char *buf, size_t n)
{
    snprintf(buf, n, "%d.%d", v / 1000, (v % 1000) / 10);
    return buf;
}

void doctor_turbo_version(int v, char *buf, size_t n)
{
    if (v > 0)
        snprintf(buf, n, "%d.%d.%d", v / 1000000, v / 1000 % 1000, v % 1000);
    else
        snprintf(buf, n, "unknown");
}
