/*
 * NCCL for gpufeed train's gradient all-reduce, loaded at run time.
 *
 * Why dlopen and not a link: libnccl.so is over 200 MB, ships apart from
 * the driver (a toolkit, a wheel, a module), and there is no static
 * archive. Linked, it would make every CUDA build of gpufeed fail to start
 * on a machine without it, also for the runs that never all-reduce. Loaded
 * on demand, the same binary uses NCCL where it is found and MPI where it
 * is not, and says which. nccl.h gives the types; the entry points used
 * are stable across NCCL 2.x.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nccl.h>

#include "failf.h"
#include "nccl_dl.h"

_Static_assert(sizeof(ncclUniqueId) == CLI_NCCL_ID_BYTES, "ncclUniqueId size");

typedef ncclResult_t (*get_version_fn)(int *);
typedef ncclResult_t (*get_unique_id_fn)(ncclUniqueId *);
typedef ncclResult_t (*comm_init_rank_fn)(ncclComm_t *, int, ncclUniqueId, int);
typedef ncclResult_t (*comm_destroy_fn)(ncclComm_t);
typedef ncclResult_t (*all_reduce_fn)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                                      ncclComm_t, cudaStream_t);
typedef const char *(*error_string_fn)(ncclResult_t);

static struct {
    void *lib;
    char path[512];
    int version;
    get_version_fn get_version;
    get_unique_id_fn get_unique_id;
    comm_init_rank_fn comm_init_rank;
    comm_destroy_fn comm_destroy;
    all_reduce_fn all_reduce;
    error_string_fn error_string;
} nccl;

struct cli_nccl {
    ncclComm_t comm;
};

static const char *nccl_error(ncclResult_t r)
{
    return nccl.error_string ? nccl.error_string(r) : "NCCL error";
}

int cli_nccl_load(char *why, size_t why_len)
{
    if (nccl.lib)
        return 0;
    const char *env = getenv("GPUFEED_NCCL_LIBRARY");
    const char *name = env && *env ? env : "libnccl.so.2";
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror(); /* names the file */
        return demo_failf(why, why_len, "%s%s", e ? e : "libnccl cannot be loaded",
                     env && *env ? "" : " (set GPUFEED_NCCL_LIBRARY to its path)");
    }
#define SYM(field, type, sym)                                                              \
    do {                                                                                   \
        *(void **)&nccl.field = dlsym(lib, sym);                                           \
        if (!nccl.field) {                                                                 \
            dlclose(lib);                                                                  \
            memset(&nccl, 0, sizeof nccl);                                                 \
            return demo_failf(why, why_len, "%s: no %s (not an NCCL 2 library)", name,     \
                              sym);                                                        \
        }                                                                                  \
    } while (0)
    SYM(get_version, get_version_fn, "ncclGetVersion");
    SYM(get_unique_id, get_unique_id_fn, "ncclGetUniqueId");
    SYM(comm_init_rank, comm_init_rank_fn, "ncclCommInitRank");
    SYM(comm_destroy, comm_destroy_fn, "ncclCommDestroy");
    SYM(all_reduce, all_reduce_fn, "ncclAllReduce");
    SYM(error_string, error_string_fn, "ncclGetErrorString");
#undef SYM
    nccl.lib = lib;
    snprintf(nccl.path, sizeof nccl.path, "%s", name);
    if (nccl.get_version(&nccl.version) != ncclSuccess)
        nccl.version = 0;
    return 0;
}

const char *cli_nccl_describe(char *buf, size_t len)
{
    int v = nccl.version;
    /* 2.9 on: major*10000 + minor*100 + patch; before: *1000, *100 */
    int major = v >= 10000 ? v / 10000 : v / 1000;
    int minor = v >= 10000 ? v / 100 % 100 : v / 100 % 10;
    int patch = v % 100;
    snprintf(buf, len, "NCCL %d.%d.%d (%s)", major, minor, patch, nccl.path);
    return buf;
}

int cli_nccl_unique_id(unsigned char id[CLI_NCCL_ID_BYTES], char *why, size_t why_len)
{
    ncclUniqueId u;
    ncclResult_t r = nccl.get_unique_id(&u);
    if (r != ncclSuccess)
        return demo_failf(why, why_len, "ncclGetUniqueId: %s", nccl_error(r));
    memcpy(id, &u, sizeof u);
    return 0;
}

int cli_nccl_init(cli_nccl **out, int world, int rank,
                  const unsigned char id[CLI_NCCL_ID_BYTES], char *why, size_t why_len)
{
    cli_nccl *c = calloc(1, sizeof *c);
    ncclUniqueId u;
    *out = NULL;
    if (!c)
        return demo_failf(why, why_len, "out of memory");
    memcpy(&u, id, sizeof u);
    ncclResult_t r = nccl.comm_init_rank(&c->comm, world, u, rank);
    if (r != ncclSuccess) {
        free(c);
        return demo_failf(why, why_len, "ncclCommInitRank (rank %d of %d): %s", rank, world,
                     nccl_error(r));
    }
    *out = c;
    return 0;
}

int cli_nccl_sum(cli_nccl *c, float *device_buf, size_t count, void *stream, char *why,
                 size_t why_len)
{
    ncclResult_t r = nccl.all_reduce(device_buf, device_buf, count, ncclFloat32, ncclSum,
                                     c->comm, (cudaStream_t)stream);
    if (r != ncclSuccess)
        return demo_failf(why, why_len, "ncclAllReduce of %zu floats: %s", count, nccl_error(r));
    return 0;
}

void cli_nccl_destroy(cli_nccl *c)
{
    if (!c)
        return;
    nccl.comm_destroy(c->comm);
    free(c);
}
