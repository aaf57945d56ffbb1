/* A build without `remote`: no remote cell reader. dataset.c refuses a
 * URL, so the loader never asks for one. */
#include "cell_reader.h"

const gf__cell_reader_ops *const gf__ranged_reader = NULL;
const gf__cell_reader_ops *const gf__shard_reader = NULL;
