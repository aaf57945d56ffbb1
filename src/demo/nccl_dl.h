/* NCCL, loaded at run time (src/demo/nccl_dl.c says why), for gpufeed
 * train's gradient all-reduce on CUDA devices. Built with the `nccl`
 * feature (nccl.h found); the library is looked up when first needed:
 * $GPUFEED_NCCL_LIBRARY, else libnccl.so.2 on the loader's path.
 * Each int function returns 0, or -1 with the reason in why. */
#ifndef GF_CLI_NCCL_DL_H
#define GF_CLI_NCCL_DL_H

#include <stddef.h>

enum { CLI_NCCL_ID_BYTES = 128 };

typedef struct cli_nccl cli_nccl;

int cli_nccl_load(char *why, size_t why_len);              /* once; later calls: 0 */
const char *cli_nccl_describe(char *buf, size_t len);      /* "NCCL 2.28.9 (path)" */
/* Rank 0 makes the id; every rank gets it (MPI_Bcast) before init. */
int cli_nccl_unique_id(unsigned char id[CLI_NCCL_ID_BYTES], char *why, size_t why_len);
/* On the current CUDA device (set it first). Collective: every rank. */
int cli_nccl_init(cli_nccl **out, int world, int rank,
                  const unsigned char id[CLI_NCCL_ID_BYTES], char *why, size_t why_len);
/* Sums count floats of device memory over the ranks, in place, queued on
 * stream (a cudaStream_t). */
int cli_nccl_sum(cli_nccl *c, float *device_buf, size_t count, void *stream, char *why,
                 size_t why_len);
void cli_nccl_destroy(cli_nccl *c); /* NULL: no-op */

#endif
