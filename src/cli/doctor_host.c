/*
 * gpufeed doctor's host checks (doctor.h): the library's io_uring and
 * decoders (from gf_probe), the cgroup's CPU quota and the memory.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "doctor.h"

/* ---- io_uring and decoders ----------------------------------------------- */

void doctor_check_library(doctor_report *r)
{
    const gf_probe_info *p = &r->lib;
    if (!p->have_uring_build)
        doctor_issue(r, "io_uring not built (install liburing-dev and rebuild; reads use pread)");
    else if (!p->uring_ok) {
        switch (p->uring_errno) {
        case EPERM:
            if (p->uring_disabled == 1)
                doctor_issue(r, "io_uring restricted by kernel.io_uring_disabled=1 (to "
                         "kernel.io_uring_group and CAP_SYS_ADMIN)");
            else if (p->uring_disabled > 1)
                doctor_issue(r, "io_uring disabled by kernel.io_uring_disabled=%d", p->uring_disabled);
            else
                doctor_issue(r, "io_uring blocked by seccomp or container policy");
            break;
        case ENOSYS:
            doctor_issue(r, "io_uring not in kernel %s", p->kernel);
            break;
        default:
            doctor_issue(r, "io_uring unavailable: %s", p->uring_why);
            break;
        }
    } else {
        doctor_ok(r, "io_uring");
    }
    char tv[32];
    doctor_turbo_version(p->turbo_version, tv, sizeof tv);
    if (p->have_turbo)
        doctor_ok(r, "libjpeg-turbo %s", tv);
    else
        doctor_issue(r, "no libjpeg-turbo (JPEG decodes with stb_image, slower; install "
                 "libjpeg-turbo8-dev or libjpeg62-turbo-dev and rebuild)");
    if (p->have_spng)
        doctor_ok(r, "libspng");
    else
        doctor_issue(r, "no libspng (PNG decodes with stb_image: chunk CRCs and the zlib "
                 "checksum unchecked; install libspng-dev and rebuild)");
    if (p->have_webp)
        doctor_ok(r, "libwebp");
    else
        doctor_issue(r, "no libwebp (WebP files cannot be decoded; install libwebp-dev and "
                 "rebuild)");
}

/* ---- CPU and memory ------------------------------------------------------ */

/* cgroup v2 "quota period" (or "max period") in CPUs, 0 if unlimited or
 * not readable. */
static double cgroup_cpu_quota(void)
{
    FILE *f = fopen("/sys/fs/cgroup/cpu.max", "re");
    char q[32] = "";
    unsigned long long period = 0;
    double v = 0;
    if (!f)
        return 0;
    if (fscanf(f, "%31s %llu", q, &period) == 2 && strcmp(q, "max") != 0 && period > 0)
        v = strtod(q, NULL) / (double)period;
    fclose(f);
    return v;
}

static uint64_t meminfo_kb(const char *key)
{
    FILE *f = fopen("/proc/meminfo", "re");
    char line[256];
    size_t kl = strlen(key);
    uint64_t v = 0;
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ':') {
            v = strtoull(line + kl + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

void doctor_probe_host(doctor_report *r)
{
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psz > 0)
        r->mem_total = (uint64_t)pages * (uint64_t)psz;
    r->mem_available = meminfo_kb("MemAvailable") * 1024;
    if (!r->mem_available) {
        long av = sysconf(_SC_AVPHYS_PAGES);
        if (av > 0 && psz > 0)
            r->mem_available = (uint64_t)av * (uint64_t)psz;
    }
    FILE *f = fopen("/sys/fs/cgroup/memory.max", "re");
    if (f) {
        char v[32] = "";
        if (fscanf(f, "%31s", v) == 1 && strcmp(v, "max") != 0)
            r->mem_limit = strtoull(v, NULL, 10);
        fclose(f);
    }
    r->cpu_quota = cgroup_cpu_quota();
    /* threads = 0 starts cores - 1 decoders from the affinity mask; a CFS
     * quota well below it makes them take turns instead. */
    if (r->cpu_quota > 0 && r->cpu_quota + 1 < r->lib.cores)
        doctor_issue(r, "cgroup CPU quota is %.1f CPUs but %d cores are in the affinity mask: set "
                 "threads to about %d",
              r->cpu_quota, r->lib.cores, r->cpu_quota > 2 ? (int)r->cpu_quota - 1 : 1);
}
