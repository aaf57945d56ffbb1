/* Helpers for the suites that test the engine's internals: transforms built
 * as the loader builds them, and whether io_uring works on this kernel. */
#ifndef GF_TU_ENGINE_H
#define GF_TU_ENGINE_H

#include "decode.h"

/* gf__transform from settings with these fields, the rest defaults. */
gf__transform tu_eval_transform(int w, int h, int channels, float crop_fraction);
gf__transform tu_train_transform(int w, int h, int channels);
/* 1 when a ring can be set up here (kernels and sandboxes may refuse it). */
int tu_uring_works(void);

#endif
