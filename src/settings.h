/* Settings: the defaults, their validation, and what the launcher's
 * environment fills in (src/settings.c). gf_open's thread only. */
#ifndef GF_SETTINGS_H
#define GF_SETTINGS_H

#include "common.h"

#include <stdbool.h>

/* 0, or GF_EINVAL naming the failed check ("invalid settings: ...") or
 * GF_ENODEV for a backend this build lacks, with the message in msg. */
int gf__check_settings(const gf_settings *s, char *msg, size_t msg_len);

/* Rank, world and device id from the launcher (torchrun, Open MPI's
 * mpirun, Slurm) where s leaves them to it (world 0, device_id -1).
 * *device_id_from_env: device_id is the launcher's local rank. Returns 0,
 * or GF_EINVAL with msg when the launcher's rank is past its world. */
int gf__resolve_launcher(gf_settings *s, bool *device_id_from_env, char *msg, size_t msg_len);

#endif
