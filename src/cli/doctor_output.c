/*
 * gpufeed doctor's output (doctor.h): the one summary line, then the
 * report as text or as one JSON object.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "doctor.h"
#include "json.h"

void doctor_summarize(doctor_report *r)
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

void doctor_print_text(const doctor_report *r)
{
    const gf_probe_info *p = &r->lib;
    char a[16], b[16];
    printf("gpufeed %s doctor\n\nCUDA\n", p->version);
    if (!r->cuda_built) {
        printf("  %-14s %s\n", "build", r->cuda_note);
    } else {
        printf("  %-14s CUDA %s (cudart_static)\n", "runtime", doctor_cuda_ver(r->runtime, a, sizeof a));
        if (r->driver)
            printf("  %-14s CUDA %s\n", "driver", doctor_cuda_ver(r->driver, b, sizeof b));
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
    doctor_turbo_version(p->turbo_version, tv, sizeof tv);
    printf("\ndecoders\n");
    if (p->have_turbo)
        printf("  %-14s libjpeg-turbo %s\n", "JPEG", tv);
    else
        printf("  %-14s stb_image (no libjpeg-turbo in this build)\n", "JPEG");
    printf("  %-14s %s\n", "PNG", p->have_spng ? "libspng (chunk CRCs and zlib checked)"
                                              : "stb_image (no libspng: CRCs not checked)");
    printf("  %-14s %s\n", "WebP", p->have_webp ? "libwebp" : "none (no libwebp in this build)");
    printf("  %-14s stb_image (BMP, GIF, TGA, PSD, PNM)\n", "others");
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

void doctor_print_json(const doctor_report *r)
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
        cli_json_kstr_or_null(&j, "driver_version", r->driver ? doctor_cuda_ver(r->driver, a, sizeof a) : NULL);
        cli_json_kstr(&j, "runtime_version", doctor_cuda_ver(r->runtime, a, sizeof a));
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
    doctor_turbo_version(p->turbo_version, tv, sizeof tv);
    cli_json_key(&j, "decoders");
    cli_json_object(&j);
    cli_json_kbool(&j, "libjpeg_turbo", p->have_turbo);
    cli_json_kstr_or_null(&j, "libjpeg_turbo_version",
                          p->have_turbo && p->turbo_version > 0 ? tv : NULL);
    cli_json_kbool(&j, "stb_image", 1);
    cli_json_kstr(&j, "jpeg", p->have_turbo ? "libjpeg-turbo" : "stb_image");
    cli_json_kbool(&j, "libspng", p->have_spng);
    cli_json_kstr(&j, "png", p->have_spng ? "libspng" : "stb_image");
    cli_json_kbool(&j, "libwebp", p->have_webp);
    cli_json_kstr_or_null(&j, "webp", p->have_webp ? "libwebp" : NULL);
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
