/*
 * Transitional: everything the old cliutil.h declared, for bench/train.c
 * until it includes what it uses (cli.h, sysinfo.h, f16.h, json.h,
 * samples.h, compute.h). Nothing in src/cli includes this; delete it then.
 */
#ifndef GF_CLI_UTIL_H
#define GF_CLI_UTIL_H

#include "cli.h"
#include "compute.h"
#include "f16.h"
#include "json.h"
#include "samples.h"
#include "sysinfo.h"

#endif /* GF_CLI_UTIL_H */
