/* Helpers for the suites that test the engine's internals: transforms built
 * as the loader builds them, and whether io_uring works on this kernel. */
#ifndef GF_TU_ENGINE_H
#define GF_TU_ENGINE_H

#include "decode.h"

#include <check.h>

/* gf__transform from settings with these fields, the rest defaults. */
gf__transform tu_eval_transform(int w, int h, int channels, float crop_fraction);
gf__transform tu_train_transform(int w, int h, int channels);
/* 1 when a ring can be set up here (kernels and sandboxes may refuse it).
 * TU_URING_REFUSED=1 makes it say 0, as such a kernel would. */
int tu_uring_works(void);

/* A suite's io_uring cases live in test cases made by tu_uring_tcase
 * (tagged "uring"). main() hands argv to tu_run_suite_split: the plain run
 * leaves them out; `test_X uring` runs them alone and exits 77 (meson:
 * skipped) where io_uring is refused, so CI counts them as skipped, never
 * as passed. */
TCase *tu_uring_tcase(const char *name);
int tu_run_suite_split(Suite *s, int argc, char **argv);

#endif
