/* Settings: the defaults, the one validator and the one resolver of
 * "0 = pick for me" (src/settings.c) over the table (src/settings_table.c),
 * and what the launcher's environment fills in. The caller's thread. */
#ifndef GF_SETTINGS_H
#define GF_SETTINGS_H

#include "common.h"
#include "remote_url.h" /* gf__data_is_remote: order auto */

#include <stdbool.h>
#include <string.h>

/* What gf__check_settings asks beyond the table: */
enum {
    GF__CHECK_DATA = 1,   /* s->data names a data set (gf_open, gf_index_open) */
    GF__CHECK_READER = 2, /* the reader io asks for is built (gf_open) */
};

/* 0, or GF_EINVAL naming the setting, its value and its bounds ("invalid
 * settings: batch_size: 0 is out of range 1..65536") or GF_ENODEV for a
 * backend this build lacks, with the message in msg. Every entry point
 * that takes a gf_settings calls it first. */
int gf__check_settings(const gf_settings *s, unsigned what, char *msg, size_t msg_len);

/* The table's check of row r's value in s (gf_settings_set's too):
 * 0, or GF_EINVAL with why = "name: value is out of range ...". */
int gf__setting_check(const gf_setting_info *r, const gf_settings *s, char *why,
                      size_t why_len);

/* Every "0 = pick for me" replaced by what it picks (threads, depths,
 * budgets, limits, std, shard_window; order AUTO by where data is; not
 * world or device_id: the launcher's, below).
 * On checked settings. */
void gf__resolve_settings(gf_settings *s);

/* Rank, world and device id from the launcher (torchrun, Open MPI's
 * mpirun, Slurm) where s leaves them to it (world 0, device_id -1).
 * *device_id_from_env: device_id is the launcher's local rank. Returns 0,
 * or GF_EINVAL with msg naming the variable: a value that is not a whole
 * number, a rank without its world size, or a rank past its world. */
int gf__resolve_launcher(gf_settings *s, bool *device_id_from_env, char *msg, size_t msg_len);

#endif
