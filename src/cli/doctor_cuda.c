/*
 * gpufeed doctor's CUDA checks (doctor.h): driver and runtime versions and
 * whether they fit, the devices and whether this build's kernels run on
 * them, and pinned/pageable copy bandwidth, through compute.cu (built where
 * meson found CUDA).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"

/* Bandwidth at the size of a default batch (64 x 224 x 224 x 3 uint8) and
 * at a large size that reaches the link's peak; repetitions sized so the
 * whole measurement stays well under 2 s even on a slow PCIe link. */
#define BW_BATCH_BYTES ((size_t)64 * 224 * 224 * 3)
#define BW_LARGE_BYTES ((size_t)128 << 20)
#define BW_BATCH_REPS 10
#define BW_LARGE_REPS 4

/* Below PCIe 3.0 x8's practical rate: a degraded link or a wrong slot. */
#define BW_LOW_GBS 6.0

#if GF_CLI_HAVE_CUDA
static void check_compat(doctor_report *r)
{
    char a[16], b[16];
    int dmaj = r->driver / 1000, rmaj = r->runtime / 1000;
    if (r->driver == 0) {
        r->compatible = -1;
        snprintf(r->compat_note, sizeof r->compat_note, "no driver to check");
    } else if (r->driver >= r->runtime) {
        r->compatible = 1;
        snprintf(r->compat_note, sizeof r->compat_note, "yes: driver %s >= runtime %s",
                 doctor_cuda_ver(r->driver, a, sizeof a), doctor_cuda_ver(r->runtime, b, sizeof b));
    } else if (dmaj == rmaj && rmaj >= 11) {
        r->compatible = 1;
        snprintf(r->compat_note, sizeof r->compat_note,
                 "yes, by minor-version compatibility: driver %s < runtime %s, same major "
                 "(no JIT of newer PTX)",
                 doctor_cuda_ver(r->driver, a, sizeof a), doctor_cuda_ver(r->runtime, b, sizeof b));
    } else {
        r->compatible = 0;
        snprintf(r->compat_note, sizeof r->compat_note,
                 "no: driver %s is older than runtime %s's major; install a driver for "
                 "CUDA %d.x or newer",
                 doctor_cuda_ver(r->driver, a, sizeof a), doctor_cuda_ver(r->runtime, b, sizeof b), rmaj);
    }
}

/* cudaGetDeviceCount's failure, in words an operator can act on. */
static void explain_count_error(doctor_report *r)
{
    char a[16], b[16];
    const char *e = r->count_error;
    if (!strcmp(e, "cudaErrorInsufficientDriver")) {
        if (r->driver == 0)
            snprintf(r->cuda_note, sizeof r->cuda_note, "no NVIDIA driver");
        else
            snprintf(r->cuda_note, sizeof r->cuda_note,
                     "NVIDIA driver too old (CUDA %s) for this build's runtime (CUDA %s)",
                     doctor_cuda_ver(r->driver, a, sizeof a), doctor_cuda_ver(r->runtime, b, sizeof b));
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

void doctor_probe_cuda(doctor_report *r, int device, int bandwidth)
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
        doctor_issue(r, "%s (GPU batches fall back to the CPU path)", r->cuda_note);
        return;
    }
    if (r->compatible == 0)
        doctor_issue(r, "CUDA driver/runtime mismatch: %s", r->compat_note);

    r->devs = calloc((size_t)p.count, sizeof *r->devs);
    if (!r->devs) {
        doctor_issue(r, "out of memory listing %d GPUs", p.count);
        return;
    }
    for (int i = 0; i < p.count; i++) {
        cli_cuda_device *d = &r->devs[i];
        if (cli_cuda_device_info(i, d) < 0) {
            snprintf(d->kernel_error, sizeof d->kernel_error, "%s", cli_cuda_error());
            doctor_issue(r, "GPU %d: %s", i, d->kernel_error);
        } else if (d->kernel_error[0]) {
            doctor_issue(r, "GPU %d (%s, compute capability %d.%d): %s: this build's CUDA kernels "
                     "cannot run on it",
                  i, d->name, d->major, d->minor, d->kernel_error);
        } else if (d->async_engines < 2) {
            doctor_issue(r, "GPU %d (%s): %d copy engine%s: host-to-device and device-to-host "
                     "copies do not overlap",
                  i, d->name, d->async_engines, d->async_engines == 1 ? "" : "s");
        }
        r->ndev = i + 1;
    }
    doctor_ok(r, "CUDA %s driver / %s runtime", doctor_cuda_ver(r->driver, a, sizeof a),
            doctor_cuda_ver(r->runtime, b, sizeof b));
    if (r->devs[0].name[0])
        doctor_ok(r, "%d GPU%s (%s)", r->ndev, r->ndev == 1 ? "" : "s", r->devs[0].name);
    else
        doctor_ok(r, "%d GPU%s", r->ndev, r->ndev == 1 ? "" : "s");

    if (!bandwidth)
        return;
    if (device >= r->ndev) {
        snprintf(r->bw_error, sizeof r->bw_error, "--device %d: %d GPU%s present", device,
                 r->ndev, r->ndev == 1 ? "" : "s");
        doctor_issue(r, "bandwidth not measured: %s", r->bw_error);
        return;
    }
    if (cli_cuda_bandwidth(device, BW_BATCH_BYTES, BW_LARGE_BYTES, BW_BATCH_REPS, BW_LARGE_REPS,
                           &r->bw) < 0) {
        snprintf(r->bw_error, sizeof r->bw_error, "%s", cli_cuda_error());
        doctor_issue(r, "bandwidth test on GPU %d failed: %s", device, r->bw_error);
        return;
    }
    r->bw_done = 1;
    if (r->bw.gbs[1][0] < BW_LOW_GBS)
        doctor_issue(r, "GPU %d: pinned host-to-device copies reach only %.1f GB/s (degraded PCIe "
                 "link or slot? nvidia-smi -q shows the link width and generation)",
              device, r->bw.gbs[1][0]);
#else
    (void)bandwidth;
    r->compatible = -1;
    snprintf(r->cuda_note, sizeof r->cuda_note,
             "this build has no CUDA (rebuild with -Dcuda=enabled)");
    doctor_issue(r, "%s", r->cuda_note);
#endif
}
