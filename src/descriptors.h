/* Whether the process has the file descriptors a loader's start needs,
 * asked before libuv is (libuv aborts where its signal pipe cannot be
 * made). gf_open's and gf_seek's thread. */
#ifndef GF_DESCRIPTORS_H
#define GF_DESCRIPTORS_H

#include "loader_impl.h"

/* 0, or GF_EMFILE through gf__fail_locking: how many the loader needs,
 * how many are free, the limit. */
int gf__check_descriptors(gf_loader *l);

#endif
