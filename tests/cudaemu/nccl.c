/* cudaemu: a one-rank NCCL, loaded by gpufeed train through
 * GPUFEED_NCCL_LIBRARY, so the NCCL path (gradients packed, summed in
 * place on the stream, unpacked) runs without a GPU. With one rank an
 * in-place sum leaves the buffer as it is: nothing to queue. More ranks,
 * or a sum into another buffer, are refused: they would need the
 * device memory of other processes. */
#include "nccl.h"

#include <stdlib.h>
#include <string.h>

struct ncclComm {
    int nranks;
};

ncclResult_t ncclGetVersion(int *version)
{
    *version = 22800; /* 2.28.0, the toolkit's */
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    memset(id, 0, sizeof *id);
    memcpy(id->internal, "cudaemu", 7);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    (void)id;
    if (nranks != 1 || rank != 0)
        return ncclInvalidUsage;
    *comm = calloc(1, sizeof **comm);
    if (!*comm)
        return ncclSystemError;
    (*comm)->nranks = 1;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    free(comm);
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    (void)count, (void)stream;
    if (!comm || type != ncclFloat32 || op != ncclSum)
        return ncclInvalidArgument;
    return send == recv ? ncclSuccess : ncclInvalidUsage;
}

const char *ncclGetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage (cudaemu's NCCL has one rank and sums in place)";
    default: return "NCCL error (cudaemu)";
    }
}
