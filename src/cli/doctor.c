/*
 * gpufeed doctor: what this build and machine give the loader, and what is
 * missing or misconfigured, in one report. CUDA (driver and runtime
 * versions and whether they fit, devices, whether this build's kernels run
 * on them, copy bandwidth), io_uring (and why not), decoders, cores and
 * memory, then one summary line: "ok: ..." or "missing: ...; ...".
 *
 * The library's side comes from gf_probe(), the CUDA side from compute.cu
 * (built where meson found CUDA). Doctor reports; it does not fail: exit 0
 * whatever it finds (1 with --strict if something is missing), 2 on a
 * usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "compute.h"
#include "json.h"
#include "sysinfo.h"
#include "gpufeed.h"

#define CMD "doctor"

/* Bandwidth at the size of a default batch (64 x 224 x 224 x 3 uint8) and
 * at a large size that reaches the link's peak; repetitions sized so the
 * whole measurement stays well under 2 s even on a slow PCIe link. */
#define BW_BATCH_BYTES ((size_t)64 * 224 * 224 * 3)
#define BW_LARGE_BYTES ((size_t)128 << 20)
#define BW_BATCH_REPS 10
#define BW_LARGE_REPS 4

/* Below PCIe 3.0 x8's practical rate: a degraded link or a wrong slot. */
#define BW_LOW_GBS 6.0

#define MAX_ISSUES 16

typedef struct report {
    gf_probe_info lib;

    /* CUDA */
    int cuda_built;
    int driver, runtime;      /* 12040 = 12.4; driver 0 = none */
    int compatible;           /* 1, 0, -1 unknown (no driver or no CUDA) */
    char compat_note[200];
    int count;
    char count_error[64], count_error_text[160];
    char cuda_note[200];      /* why CUDA is unusable, "" if usable */
    int ndev;
#if GF_CLI_HAVE_CUDA
    cli_cuda_device *devs;
    cli_bandwidth bw;
#endif
    int bw_device, bw_done;
    char bw_error[256];

    /* CPU and memory */
    double cpu_quota;         /* cgroup v2 cpu.max in CPUs, 0 = none */
    uint64_t mem_total, mem_available, mem_limit; /* limit 0 = none */

    char issues[MAX_ISSUES][240];
    int nissues;
    char ok[512];
    char summary[2048];
} report;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpufeed doctor [options]\n"
            "\n"
            "Reports what this build and machine give the loader: CUDA driver and\n"
            "runtime versions and whether they fit, GPUs (name, compute capability,\n"
            "memory, PCIe bus, copy engines), pinned and pageable copy bandwidth,\n"
            "io_uring (and why not), decoders, cores and memory; the last line sums\n"
            "up what is missing or misconfigured. Works without a GPU.\n"
            "\n"
            "Exit status: 0 (it reports, it does not fail); 1 with --strict if\n"
            "something is missing; 2 usage error.\n"
            "\n"
            "options:\n"
            "  --device N       GPU for the bandwidth test (default 0)\n"
            "  --no-bandwidth   skip the bandwidth test (about 1 s)\n"
            "  --strict         exit 1 if something is missing or misconfigured\n"
            "  --json           one JSON object instead of text\n"
            "  -h, --help       this text\n");
}

static void issue(report *r, const char *fmt, ...) CLI_PRINTF(2, 3);
static void issue(report *r, const char *fmt, ...)
{
    if (r->nissues >= MAX_ISSUES)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->issues[r->nissues++], sizeof r->issues[0], fmt, ap);
    va_end(ap);
}

static void ok_item(report *r, const char *fmt, ...) CLI_PRINTF(2, 3);
static void ok_item(report *r, const char *fmt, ...)
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
static const char *cuda_ver(int v, char *buf, size_t n)
{
    snprintf(buf, n, "%d.%d", v / 1000, (v % 1000) / 10);
    return buf;
}

/* ---- CUDA ---------------------------------------------------------------- */

/* The rule applied: a CUDA driver runs every runtime of its own CUDA major
 * version or older (CUDA 11+ minor-version compatibility: a 12.2 driver runs
 * a 12.8 runtime), but not a newer major. Within the major, a driver older
 * than the runtime's minor cannot JIT the newer toolkit's PTX; the build
 * ships SASS for sm_80 and sm_90, so that matters only on other GPUs, and
 * the per-device kernel check below catches it. */
#define COMPAT_RULE                                                                          \
    "driver major >= runtime major (CUDA 11+ minor-version compatibility; "                \
    "below the runtime's minor, no JIT of newer PTX)"

#if GF_CLI_HAVE_CUDA
static void check_compat(report *r)
{
    char a[16], b[16];
    int dmaj = r->driver / 1000, rmaj = r->runtime / 1000;
    if (r->driver == 0) {
        r->compatible = -1;
        snprintf(r->compat_note, sizeof r->compat_note, "no driver to check");
    } else if (r->driver >= r->runtime) {
        r->compatible = 1;
        snprintf(r->compat_note, sizeof r->compat_note, "yes: driver %s >= runtime %s",
                 cuda_ver(r->driver, a, sizeof a), cuda_ver(r->runtime, b, sizeof b));
    } else if (dmaj == rmaj && rmaj >= 11) {
        r->compatible = 1;
        snprintf(r->compat_note, sizeof r->compat_note,
                 "yes, by minor-version compatibility: driver %s < runtime %s, same major "
                 "(no JIT of newer PTX)",
                 cuda_ver(r->driver, a, sizeof a), cuda_ver(r->runtime, b, sizeof b));
    } else {
        r->compatible = 0;
        snprintf(r->compat_note, sizeof r->compat_note,
                 "no: driver %s is older than runtime %s's major; install a driver for "
                 "CUDA %d.x or newer",
                 cuda_ver(r->driver, a, sizeof a), cuda_ver(r->runtime, b, sizeof b), rmaj);
    }
}

/* cudaGetDeviceCount's failure, in words an operator can act on. */
static void explain_count_error(report *r)
{
    char a[16], b[16];
    const char *e = r->count_error;
    if (!strcmp(e, "cudaErrorInsufficientDriver")) {
        if (r->driver == 0)
            snprintf(r->cuda_note, sizeof r->cuda_note, "no NVIDIA driver");
        else
            snprintf(r->cuda_note, sizeof r->cuda_note,
                     "NVIDIA driver too old (CUDA %s) for this build's runtime (CUDA %s)",
                     cuda_ver(r->driver, a, sizeof a), cuda_ver(r->runtime, b, sizeof b));
    } else if (!strcmp(e, "cudaErrorNoDevice")) {
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
        if (vis)
            snprintf(r->cuda_note, sizeof r->cuda_note,
                     "no GPU visible (driver loaded; CUDA_VISIBLE_DEVICES='%.40s')", vis);
        else
            snprintf(r->cuda_note, sizeof r->cuda_note,
                     "no GPU visible (driver loaded; a container without --gpus?)");
    } else if (!strcmp(e, "cudaErrorSystemDriverMismatch")) {
        snprintf(r->cuda_note, sizeof r->cuda_note,
                 "NVIDIA kernel module and user-space driver versions differ (reboot, or "
                 "reinstall the driver)");
    } else if (!strcmp(e, "cudaErrorCompatNotSupportedOnDevice")) {
        snprintf(r->cuda_note, sizeof r->cuda_note,
                 "the forward-compatibility driver in use does not support this GPU");
    } else if (!strcmp(e, "cudaErrorDevicesUnavailable")) {
        snprintf(r->cuda_note, sizeof r->cuda_note,
                 "GPUs busy or unavailable (exclusive-process mode held by another process?)");
    } else if (!strcmp(e, "cudaErrorSystemNotReady")) {
        snprintf(r->cuda_note, sizeof r->cuda_note,
                 "CUDA system not ready (NVSwitch machines: is nvidia-fabricmanager running?)");
    } else {
        snprintf(r->cuda_note, sizeof r->cuda_note, "CUDA unusable: %.48s (%.120s)", e,
                 r->count_error_text);
    }
}
#endif

static void probe_cuda(report *r, int device, int bandwidth)
{
    r->bw_device = device;
#if GF_CLI_HAVE_CUDA
    cli_cuda_probe p;
    char a[16], b[16];
    r->cuda_built = 1;
    cli_cuda_probe_run(&p);
    r->driver = p.driver_version;
    r->runtime = p.runtime_version;
    r->count = p.count;
    snprintf(r->count_error, sizeof r->count_error, "%s", p.count_error_name);
    snprintf(r->count_error_text, sizeof r->count_error_text, "%s", p.count_error_text);
    check_compat(r);
    if (p.count_error)
        explain_count_error(r);
    else if (p.count == 0)
        snprintf(r->cuda_note, sizeof r->cuda_note, "no GPU visible");
    if (r->cuda_note[0]) {
        issue(r, "%s (GPU batches fall back to the CPU path)", r->cuda_note);
        return;
    }
    if (r->compatible == 0)
        issue(r, "CUDA driver/runtime mismatch: %s", r->compat_note);

    r->devs = calloc((size_t)p.count, sizeof *r->devs);
    if (!r->devs) {
        issue(r, "out of memory listing %d GPUs", p.count);
        return;
    }
    for (int i = 0; i < p.count; i++) {
        cli_cuda_device *d = &r->devs[i];
        if (cli_cuda_device_info(i, d) < 0) {
            snprintf(d->kernel_error, sizeof d->kernel_error, "%s", cli_cuda_error());
            issue(r, "GPU %d: %s", i, d->kernel_error);
        } else if (d->kernel_error[0]) {
            issue(r, "GPU %d (%s, compute capability %d.%d): %s: this build's CUDA kernels "
                     "cannot run on it",
                  i, d->name, d->major, d->minor, d->kernel_error);
        } else if (d->async_engines < 2) {
            issue(r, "GPU %d (%s): %d copy engine%s: host-to-device and device-to-host "
                     "copies do not overlap",
                  i, d->name, d->async_engines, d->async_engines == 1 ? "" : "s");
        }
        r->ndev = i + 1;
    }
    ok_item(r, "CUDA %s driver / %s runtime", cuda_ver(r->driver, a, sizeof a),
            cuda_ver(r->runtime, b, sizeof b));
    if (r->devs[0].name[0])
        ok_item(r, "%d GPU%s (%s)", r->ndev, r->ndev == 1 ? "" : "s", r->devs[0].name);
    else
        ok_item(r, "%d GPU%s", r->ndev, r->ndev == 1 ? "" : "s");

    if (!bandwidth)
        return;
    if (device >= r->ndev) {
        snprintf(r->bw_error, sizeof r->bw_error, "--device %d: %d GPU%s present", device,
                 r->ndev, r->ndev == 1 ? "" : "s");
        issue(r, "bandwidth not measured: %s", r->bw_error);
        return;
    }
    if (cli_cuda_bandwidth(device, BW_BATCH_BYTES, BW_LARGE_BYTES, BW_BATCH_REPS, BW_LARGE_REPS,
                           &r->bw) < 0) {
        snprintf(r->bw_error, sizeof r->bw_error, "%s", cli_cuda_error());
        issue(r, "bandwidth test on GPU %d failed: %s", device, r->bw_error);
        return;
    }
    r->bw_done = 1;
    if (r->bw.gbs[1][0] < BW_LOW_GBS)
        issue(r, "GPU %d: pinned host-to-device copies reach only %.1f GB/s (degraded PCIe "
                 "link or slot? nvidia-smi -q shows the link width and generation)",
              device, r->bw.gbs[1][0]);
#else
    (void)bandwidth;
    r->compatible = -1;
    snprintf(r->cuda_note, sizeof r->cuda_note,
             "this build has no CUDA (rebuild with -Dcuda=enabled)");
    issue(r, "%s", r->cuda_note);
#endif
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

static void probe_host(report *r)
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
        issue(r, "cgroup CPU quota is %.1f CPUs but %d cores are in the affinity mask: set "
                 "threads to about %d",
              r->cpu_quota, r->lib.cores, r->cpu_quota > 2 ? (int)r->cpu_quota - 1 : 1);
}

static void turbo_version(int v, char *buf, size_t n)
{
    if (v > 0)
        snprintf(buf, n, "%d.%d.%d", v / 1000000, v / 1000 % 1000, v % 1000);
    else
        snprintf(buf, n, "unknown");
}

/* ---- io_uring and decoders ----------------------------------------------- */

static void check_library(report *r)
{
    const gf_probe_info *p = &r->lib;
    if (!p->have_uring_build)
        issue(r, "io_uring not built (install liburing-dev and rebuild; reads use pread)");
    else if (!p->uring_ok) {
        switch (p->uring_errno) {
        case EPERM:
            if (p->uring_disabled == 1)
                issue(r, "io_uring restricted by kernel.io_uring_disabled=1 (to "
                         "kernel.io_uring_group and CAP_SYS_ADMIN)");
            else if (p->uring_disabled > 1)
                issue(r, "io_uring disabled by kernel.io_uring_disabled=%d", p->uring_disabled);
            else
                issue(r, "io_uring blocked by seccomp or container policy");
            break;
        case ENOSYS:
            issue(r, "io_uring not in kernel %s", p->kernel);
            break;
        default:
            issue(r, "io_uring unavailable: %s", p->uring_why);
            break;
        }
    } else {
        ok_item(r, "io_uring");
    }
    char tv[32];
    turbo_version(p->turbo_version, tv, sizeof tv);
    if (p->have_turbo)
        ok_item(r, "libjpeg-turbo %s", tv);
    else
        issue(r, "no libjpeg-turbo (JPEG decodes with stb_image, slower; install "
                 "libjpeg-turbo8-dev or libjpeg62-turbo-dev and rebuild)");
}

/* ---- output -------------------------------------------------------------- */

static void summarize(report *r)
{
    size_t used = 0;
    if (r->nissues == 0) {
        snprintf(r->summary, sizeof r->summary, "ok: %s, %d cores", r->ok, r->lib.cores);
        return;
    }
    used = (size_t)snprintf(r->summary, sizeof r->summary, "missing: ");
    for (int i = 0; i < r->nissues && used < sizeof r->summary; i++)
        used += (size_t)snprintf(r->summary + used, sizeof r->summary - used, "%s%s",
                                 i ? "; " : "", r->issues[i]);
    if (used < sizeof r->summary)
        snprintf(r->summary + used, sizeof r->summary - used, ". ok: %s%s%d cores", r->ok,
                 r->ok[0] ? ", " : "", r->lib.cores);
}

static double gib(uint64_t b)
{
    return (double)b / (1024.0 * 1024 * 1024);
}

static void print_text(const report *r)
{
    const gf_probe_info *p = &r->lib;
    char a[16], b[16];
    printf("gpufeed %s doctor\n\nCUDA\n", p->version);
    if (!r->cuda_built) {
        printf("  %-14s %s\n", "build", r->cuda_note);
    } else {
        printf("  %-14s CUDA %s (cudart_static)\n", "runtime", cuda_ver(r->runtime, a, sizeof a));
        if (r->driver)
            printf("  %-14s CUDA %s\n", "driver", cuda_ver(r->driver, b, sizeof b));
        else
            printf("  %-14s none (cudaDriverGetVersion: 0)\n", "driver");
        printf("  %-14s %s\n", "compatible", r->compat_note);
        printf("  %-14s %s\n", "  rule", COMPAT_RULE);
        if (r->count_error[0])
            printf("  %-14s none: %s (%s)\n", "GPUs", r->count_error, r->count_error_text);
        else
            printf("  %-14s %d\n", "GPUs", r->count);
        if (r->cuda_note[0])
            printf("  %-14s %s: GPU batches fall back to the CPU path\n", "=>", r->cuda_note);
    }
#if GF_CLI_HAVE_CUDA
    for (int i = 0; i < r->ndev; i++) {
        const cli_cuda_device *d = &r->devs[i];
        char label[16];
        snprintf(label, sizeof label, "GPU %d", i);
        printf("  %-14s %s, compute capability %d.%d, %d SMs\n", label, d->name, d->major,
               d->minor, d->multiprocessors);
        printf("  %-14s %.1f GiB, %.1f GiB free; PCI %s; %d copy engine%s\n", "", gib(d->total_bytes),
               gib(d->free_bytes), d->pci_bus_id, d->async_engines,
               d->async_engines == 1 ? "" : "s");
        if (d->kernel_error[0])
            printf("  %-14s kernels: %s\n", "", d->kernel_error);
        else
            printf("  %-14s kernels: sm_%d image (PTX %d)\n", "", d->binary_version,
                   d->ptx_version);
    }
    if (r->bw_done) {
        const char *names[2] = {"batch", "large"};
        printf("  %-14s GPU %d, GB/s      H2D pin  H2D page   D2H pin  D2H page\n",
               "bandwidth", r->bw_device);
        for (int k = 0; k < 2; k++)
            printf("  %-14s %-5s %7.1f MiB %8.1f %9.1f %9.1f %9.1f\n", "", names[k],
                   r->bw.bytes[k] / 1048576.0, r->bw.gbs[k][0], r->bw.gbs[k][1],
                   r->bw.gbs[k][2], r->bw.gbs[k][3]);
        printf("  %-14s batch-sized pinned H2D = %.0f%% of the large-copy rate; %.2f s\n", "",
               r->bw.gbs[1][0] > 0 ? 100 * r->bw.gbs[0][0] / r->bw.gbs[1][0] : 0,
               r->bw.seconds);
    } else if (r->bw_error[0]) {
        printf("  %-14s not measured: %s\n", "bandwidth", r->bw_error);
    }
#endif

    printf("\nio_uring\n");
    printf("  %-14s %s\n", "build", p->have_uring_build ? "yes (liburing)" : "no");
    if (p->uring_disabled >= 0)
        printf("  %-14s %s, kernel.io_uring_disabled=%d\n", "kernel", p->kernel,
               p->uring_disabled);
    else
        printf("  %-14s %s\n", "kernel", p->kernel);
    if (p->uring_ok)
        printf("  %-14s available (GF_IO_AUTO reads with io_uring)\n", "status");
    else
        printf("  %-14s unavailable: %s (reads use pread)\n", "status", p->uring_why);

    char tv[32];
    turbo_version(p->turbo_version, tv, sizeof tv);
    printf("\ndecoders\n");
    if (p->have_turbo)
        printf("  %-14s libjpeg-turbo %s\n", "JPEG", tv);
    else
        printf("  %-14s stb_image (no libjpeg-turbo in this build)\n", "JPEG");
    printf("  %-14s stb_image (PNG, BMP, GIF, TGA, PSD, PNM)\n", "others");
    printf("  %-14s %s (CPU %s AVX2)\n", "resampler", p->resample_isa,
           p->cpu_avx2 ? "has" : "lacks");

    printf("\nCPU and memory\n");
    printf("  %-14s %d usable (affinity), %d online", "cores", p->cores, p->cores_online);
    if (r->cpu_quota > 0)
        printf(", cgroup quota %.1f", r->cpu_quota);
    printf("; threads = 0 starts %d decoder%s\n", p->cores > 1 ? p->cores - 1 : 1,
           p->cores > 2 ? "s" : "");
    printf("  %-14s %.1f GiB, %.1f GiB available", "memory", gib(r->mem_total),
           gib(r->mem_available));
    if (r->mem_limit)
        printf(", cgroup limit %.1f GiB", gib(r->mem_limit));
    printf("\n\n%s\n", r->summary);
}

static void print_json(const report *r)
{
    const gf_probe_info *p = &r->lib;
    char a[16];
    cli_json j;
    cli_json_init(&j, stdout);
    cli_json_object(&j);
    cli_json_kstr(&j, "version", p->version);

    cli_json_key(&j, "cuda");
    cli_json_object(&j);
    cli_json_kbool(&j, "built", r->cuda_built);
    if (r->cuda_built) {
        cli_json_kstr_or_null(&j, "driver_version", r->driver ? cuda_ver(r->driver, a, sizeof a) : NULL);
        cli_json_kstr(&j, "runtime_version", cuda_ver(r->runtime, a, sizeof a));
        if (r->compatible < 0)
            cli_json_knull(&j, "compatible");
        else
            cli_json_kbool(&j, "compatible", r->compatible);
        cli_json_kstr(&j, "compatibility", r->compat_note);
        cli_json_kstr(&j, "compatibility_rule", COMPAT_RULE);
        cli_json_kint(&j, "device_count", r->count);
        cli_json_kstr_or_null(&j, "error", r->count_error);
    }
    cli_json_kstr_or_null(&j, "note", r->cuda_note);
    cli_json_key(&j, "devices");
    cli_json_array(&j);
#if GF_CLI_HAVE_CUDA
    for (int i = 0; i < r->ndev; i++) {
        const cli_cuda_device *d = &r->devs[i];
        char cc[32];
        snprintf(cc, sizeof cc, "%d.%d", d->major, d->minor);
        cli_json_object(&j);
        cli_json_kint(&j, "index", i);
        cli_json_kstr(&j, "name", d->name);
        cli_json_kstr(&j, "compute_capability", cc);
        cli_json_kint(&j, "multiprocessors", d->multiprocessors);
        cli_json_kuint(&j, "total_bytes", d->total_bytes);
        cli_json_kuint(&j, "free_bytes", d->free_bytes);
        cli_json_kstr(&j, "pci_bus_id", d->pci_bus_id);
        cli_json_kint(&j, "async_engines", d->async_engines);
        cli_json_kbool(&j, "kernels_ok", !d->kernel_error[0]);
        if (d->kernel_error[0]) {
            cli_json_kstr(&j, "kernel_error", d->kernel_error);
        } else {
            cli_json_kint(&j, "kernel_binary", d->binary_version);
            cli_json_kint(&j, "kernel_ptx", d->ptx_version);
        }
        cli_json_object_end(&j);
    }
#endif
    cli_json_array_end(&j);
    cli_json_key(&j, "bandwidth");
#if GF_CLI_HAVE_CUDA
    if (r->bw_done) {
        const char *names[2] = {"batch", "large"};
        cli_json_object(&j);
        cli_json_kint(&j, "device", r->bw_device);
        cli_json_knum(&j, "seconds", r->bw.seconds);
        for (int k = 0; k < 2; k++) {
            cli_json_key(&j, names[k]);
            cli_json_object(&j);
            cli_json_kuint(&j, "bytes", r->bw.bytes[k]);
            cli_json_knum(&j, "pinned_h2d_gbs", r->bw.gbs[k][0]);
            cli_json_knum(&j, "pageable_h2d_gbs", r->bw.gbs[k][1]);
            cli_json_knum(&j, "pinned_d2h_gbs", r->bw.gbs[k][2]);
            cli_json_knum(&j, "pageable_d2h_gbs", r->bw.gbs[k][3]);
            cli_json_object_end(&j);
        }
        cli_json_object_end(&j);
    } else
#endif
    if (r->bw_error[0]) {
        cli_json_object(&j);
        cli_json_kstr(&j, "error", r->bw_error);
        cli_json_object_end(&j);
    } else {
        cli_json_null(&j);
    }
    cli_json_object_end(&j);

    cli_json_key(&j, "io_uring");
    cli_json_object(&j);
    cli_json_kbool(&j, "built", p->have_uring_build);
    cli_json_kbool(&j, "available", p->uring_ok);
    if (p->uring_ok)
        cli_json_knull(&j, "why");
    else
        cli_json_kstr(&j, "why", p->uring_why);
    cli_json_kint(&j, "errno", p->uring_errno);
    cli_json_kstr(&j, "kernel", p->kernel);
    if (p->uring_disabled >= 0)
        cli_json_kint(&j, "io_uring_disabled", p->uring_disabled);
    else
        cli_json_knull(&j, "io_uring_disabled");
    cli_json_object_end(&j);

    char tv[32];
    turbo_version(p->turbo_version, tv, sizeof tv);
    cli_json_key(&j, "decoders");
    cli_json_object(&j);
    cli_json_kbool(&j, "libjpeg_turbo", p->have_turbo);
    cli_json_kstr_or_null(&j, "libjpeg_turbo_version",
                          p->have_turbo && p->turbo_version > 0 ? tv : NULL);
    cli_json_kbool(&j, "stb_image", 1);
    cli_json_kstr(&j, "jpeg", p->have_turbo ? "libjpeg-turbo" : "stb_image");
    cli_json_kstr(&j, "resample_isa", p->resample_isa);
    cli_json_kbool(&j, "cpu_avx2", p->cpu_avx2);
    cli_json_object_end(&j);

    cli_json_key(&j, "cores");
    cli_json_object(&j);
    cli_json_kint(&j, "affinity", p->cores);
    cli_json_kint(&j, "online", p->cores_online);
    if (r->cpu_quota > 0)
        cli_json_knum(&j, "cgroup_quota", r->cpu_quota);
    else
        cli_json_knull(&j, "cgroup_quota");
    cli_json_kint(&j, "default_threads", p->cores > 1 ? p->cores - 1 : 1);
    cli_json_object_end(&j);
    cli_json_key(&j, "memory");
    cli_json_object(&j);
    cli_json_kuint(&j, "total_bytes", r->mem_total);
    cli_json_kuint(&j, "available_bytes", r->mem_available);
    if (r->mem_limit)
        cli_json_kuint(&j, "cgroup_limit_bytes", r->mem_limit);
    else
        cli_json_knull(&j, "cgroup_limit_bytes");
    cli_json_object_end(&j);

    cli_json_key(&j, "missing");
    cli_json_array(&j);
    for (int i = 0; i < r->nissues; i++)
        cli_json_str(&j, r->issues[i]);
    cli_json_array_end(&j);
    cli_json_kbool(&j, "ok", !r->nissues);
    cli_json_kstr(&j, "summary", r->summary);
    cli_json_object_end(&j);
    cli_json_end(&j);
}

int cmd_doctor(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"device", required_argument, NULL, 'd'},
        {"no-bandwidth", no_argument, NULL, 'B'},
        {"strict", no_argument, NULL, 's'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int device = 0, bandwidth = 1, strict = 0, json = 0, ch;

    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'd': if (cli_parse_int(CMD, "device", optarg, 0, 1023, &device)) return CLI_USAGE; break;
        case 'B': bandwidth = 0; break;
        case 's': strict = 1; break;
        case 'j': json = 1; break;
        case 'h': usage(stdout); return CLI_OK;
        case ':': cli_error(CMD, "%s needs a value", argv[optind - 1]); return CLI_USAGE;
        default: cli_error(CMD, "unknown option '%s' (try --help)", argv[optind - 1]); return CLI_USAGE;
        }
    }
    if (optind < argc) {
        cli_error(CMD, "unexpected argument '%s'", argv[optind]);
        return CLI_USAGE;
    }

    report *r = calloc(1, sizeof *r);
    if (!r) {
        cli_error(CMD, "out of memory");
        return CLI_FAIL;
    }
    gf_probe(&r->lib); /* cannot fail with a non-NULL argument */
    probe_cuda(r, device, bandwidth);
    check_library(r);
    probe_host(r);
    summarize(r);
    if (json)
        print_json(r);
    else
        print_text(r);
    fflush(stdout);
    int missing = r->nissues > 0;
#if GF_CLI_HAVE_CUDA
    free(r->devs);
#endif
    free(r);
    return strict && missing ? CLI_FAIL : CLI_OK;
}
