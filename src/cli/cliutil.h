/*
 * Transitional: everything the old cliutil.h declared, for src/demo's
 * loops.c, parallel.c and report.c until each includes what it uses (cli.h,
 * sysinfo.h, ../f16.h, json.h, samples.h, compute.h). Nothing in src/cli
 * includes this; delete it then.
 */
#ifndef GF_CLI_UTIL_H
#define GF_CLI_UTIL_H

#include "cli.h"
#include "compute.h"
#include "json.h"
#include "samples.h"
#include "sysinfo.h"

/* src/f16.h: the one float16 rounding (header-only). cli_f16_bits was the
 * CLI's copy; loops.c calls gf__f16_bits once it includes ../f16.h. */
#include "../f16.h"
#define cli_f16_bits gf__f16_bits

#endif /* GF_CLI_UTIL_H */
