/*
 * gf_probe: what this build and machine offer the loader, for diagnostics.
 * Every answer comes from the code path a loader takes (the io_uring
 * reader's own setup, the resampler's own ISA choice), so the probe cannot
 * say "available" where gf_open() would fall back. Runs on the caller's
 * thread; it holds nothing afterwards.
 */
#include "common.h"

#include "config.h"
#include "reader.h"
#include "resample.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#if GF_HAVE_URING
#include <liburing.h>
#endif
#if GF_HAVE_TURBO
#include <jpeglib.h> /* after stdio.h; jconfig.h has the version */
#endif

/* The queue depth a default loader asks for (gf_settings.queue_depth 0). */
#define PROBE_QUEUE_DEPTH 64

static int read_int_file(const char *path, int fallback)
{
    int v = fallback;
    FILE *f = fopen(path, "re");
    if (f) {
        if (fscanf(f, "%d", &v) != 1)
            v = fallback;
        fclose(f);
    }
    return v;
}

static void probe_uring(gf_probe_info *p)
{
    p->have_uring_build = gf__have_uring();
    p->uring_disabled = read_int_file("/proc/sys/kernel/io_uring_disabled", -1);
#if GF_HAVE_URING
    /* The bare setup first, for the errno (the reader's message has the
     * words, not the number); then the reader's full setup, which also
     * needs IORING_OP_READ and an eventfd, for the verdict. */
    struct io_uring ring;
    int ret = io_uring_queue_init(PROBE_QUEUE_DEPTH, &ring, 0);
    if (ret < 0)
        p->uring_errno = -ret;
    else
        io_uring_queue_exit(&ring);
#endif
    gf__uring *u = NULL;
    if (gf__uring_create(&u, PROBE_QUEUE_DEPTH, 0, p->uring_why, sizeof p->uring_why) == 0) {
        p->uring_ok = 1;
        p->uring_why[0] = 0;
        gf__uring_destroy(u);
    }
}

int gf_probe(gf_probe_info *out)
{
    if (!out)
        return GF_EINVAL;
    memset(out, 0, sizeof *out);
    out->version = gf_version();

    struct utsname un;
    if (uname(&un) == 0)
        snprintf(out->kernel, sizeof out->kernel, "%s", un.release);
    probe_uring(out);

#if GF_HAVE_TURBO
    out->have_turbo = 1;
#if defined(LIBJPEG_TURBO_VERSION_NUMBER)
    out->turbo_version = LIBJPEG_TURBO_VERSION_NUMBER;
#endif
#endif
    out->have_spng = GF_HAVE_SPNG;
    out->have_webp = GF_HAVE_WEBP;
    out->have_cuda_build = GF_HAVE_CUDA;

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init();
    out->cpu_avx2 = __builtin_cpu_supports("avx2") != 0;
#endif
    switch (gf__rs_isa()) {
    case GF__RS_ISA_AVX2:
        out->resample_isa = "avx2";
        break;
    case GF__RS_ISA_SSE2:
        out->resample_isa = "sse2";
        break;
    default:
        out->resample_isa = "c";
        break;
    }

    out->cores = gf__available_cores();
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    out->cores_online = n > 0 ? (int)n : out->cores;
    return 0;
}
