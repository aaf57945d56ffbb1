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
 *
 * This file: the options and the order of the checks; doctor.h lists the
 * other files. The command's one thread.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"

#define CMD "doctor"

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

    doctor_report *r = calloc(1, sizeof *r);
    if (!r) {
        cli_error(CMD, "out of memory");
        return CLI_FAIL;
    }
    gf_probe(&r->lib); /* cannot fail with a non-NULL argument */
    doctor_probe_cuda(r, device, bandwidth);
    doctor_check_library(r);
    doctor_probe_host(r);
    doctor_summarize(r);
    if (json)
        doctor_print_json(r);
    else
        doctor_print_text(r);
    fflush(stdout);
    int missing = r->nissues > 0;
#if GF_CLI_HAVE_CUDA
    free(r->devs);
#endif
    free(r);
    return strict && missing ? CLI_FAIL : CLI_OK;
}
