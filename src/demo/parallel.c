/*
 * gpufeed train, data-parallel, on the command's thread of each rank:
 * MPI's start and end, how the ranks sum their gradients (MPI through
 * host memory, or NCCL on the devices) and the all-reduce of each step.
 * Rank 0 prints and evaluates; the others are quiet.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "compute.h"
#include "json.h"
#include "samples.h"
#include "sysinfo.h"
#include "train.h"
#if GF_CLI_HAVE_MPI
#include <mpi.h>
#endif
#if GF_CLI_HAVE_NCCL
#include "nccl_dl.h"
#endif

#if HAVE_DP
/* The sums of a data-parallel step: [gradient x n, n, correct, loss x n]
 * over the ranks, on the host (MPI) or on the devices (NCCL, in the
 * model's packed array); *totals gets the last three. */
static int dp_sum_host(trainer *t, gfm_model *m, const float *x, const int32_t *labels, int n,
                       run_result *r, float totals[3])
{
#if GF_CLI_HAVE_MPI
    const size_t P = t->n_params;
    float *g = t->gbuf, loss = 0;
    int correct = 0;
    double t0 = cli_now();
    if (n > 0) {
        if (gfm_grad_step(m, x, labels, n, t->stream, g, &loss, &correct) < 0) {
            cli_error(CMD, "model: %s", gfm_error(m));
            return CLI_FAIL;
        }
        for (size_t i = 0; i < P; i++)
            g[i] *= (float)n;
    } else {
        memset(g, 0, P * sizeof *g);
    }
    g[P] = (float)n;
    g[P + 1] = (float)(correct > 0 ? correct : 0);
    g[P + 2] = loss * (float)n;
    double t1 = cli_now();
    int rc = MPI_Allreduce(MPI_IN_PLACE, g, (int)(P + 3), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double t2 = cli_now();
    r->comm_s += t2 - t1;
    if (rc != MPI_SUCCESS) {
        cli_error(CMD, "MPI_Allreduce failed (%d)", rc);
        return CLI_FAIL;
    }
    if (g[P] > 0) {
        const float inv = 1.0f / g[P];
        for (size_t i = 0; i < P; i++)
            g[i] *= inv;
        if (gfm_apply(m, g, t->stream) < 0) {
            cli_error(CMD, "model: %s", gfm_error(m));
            return CLI_FAIL;
        }
    }
    memcpy(totals, g + P, 3 * sizeof *totals);
    r->busy_s += (t1 - t0) + (cli_now() - t2);
    return CLI_OK;
#else
    (void)t, (void)m, (void)x, (void)labels, (void)n, (void)r, (void)totals;
    cli_error(CMD, "built without MPI");
    return CLI_FAIL;
#endif
}

static int dp_sum_device(trainer *t, gfm_model *m, const float *x, const int32_t *labels,
                         int n, run_result *r, float totals[3])
{
#if GF_CLI_HAVE_NCCL
    char why[512];
    float *packed;
    double comm_ms = 0, t0 = cli_now();
    if (gfm_grad_pack(m, x, labels, n, t->stream, &packed) < 0) {
        cli_error(CMD, "model: %s", gfm_error(m));
        return CLI_FAIL;
    }
    if (cli_cuda_event_record(t->nccl_ev[0], t->stream) < 0)
        return train_cuda_failed();
    if (cli_nccl_sum(t->nccl, packed, t->n_params + 3, t->stream, why, sizeof why) < 0) {
        cli_error(CMD, "%s", why);
        return CLI_FAIL;
    }
    if (cli_cuda_event_record(t->nccl_ev[1], t->stream) < 0)
        return train_cuda_failed();
    if (gfm_apply_packed(m, t->stream, totals) < 0) { /* waits for the sum */
        cli_error(CMD, "model: %s", gfm_error(m));
        return CLI_FAIL;
    }
    if (cli_cuda_event_ms(t->nccl_ev[0], t->nccl_ev[1], &comm_ms) < 0)
        return train_cuda_failed();
    r->comm_s += comm_ms * 1e-3;
    double busy = cli_now() - t0 - comm_ms * 1e-3;
    r->busy_s += busy > 0 ? busy : 0;
    return CLI_OK;
#else
    (void)t, (void)m, (void)x, (void)labels, (void)n, (void)r, (void)totals;
    cli_error(CMD, "built without NCCL");
    return CLI_FAIL;
#endif
}

/* A data-parallel step: this rank's gradient on its n samples (n = 0: it
 * has no batch left and joins with nothing), summed over the ranks
 * weighted by their sample counts, the mean applied on every rank. The
 * tally gets the global figures. *global_n: the samples of the step
 * over all ranks (0: every rank is done). */
int dp_step(trainer *t, gfm_model *m, const float *x, const int32_t *labels, int n,
            run_result *r, tally *a, uint64_t *global_n)
{
    float tot[3];
    int rc = t->nccl ? dp_sum_device(t, m, x, labels, n, r, tot)
                     : dp_sum_host(t, m, x, labels, n, r, tot);
    if (rc != CLI_OK)
        return rc;
    *global_n = (uint64_t)tot[0];
    if (tot[0] > 0) {
        train_tally_add(a, tot[2] * (1.0f / tot[0]), (int)tot[1], (int)tot[0]);
        r->steps++;
    }
    return CLI_OK;
}
#endif

/* Data-parallel: after this rank's last batch of an epoch, all-reduces
 * with nothing until every rank is done, or until --stop-after's step:
 * the ranks count the same steps, so those still with batches stop there
 * too (loops.c) and none waits in an all-reduce the others left. */
int dp_drain(trainer *t, gfm_model *m, run_result *r, tally *a)
{
#if HAVE_DP
    uint64_t global_n = 1, stop = t->o->stop_after;
    while (t->dp_on && global_n > 0 && !(stop && r->steps >= stop))
        if (dp_step(t, m, NULL, NULL, 0, r, a, &global_n) != CLI_OK)
            return CLI_FAIL;
#else
    (void)t, (void)m, (void)r, (void)a;
#endif
    return CLI_OK;
}

/* Data-parallel: how the ranks sum their gradients. NCCL (--allreduce
 * nccl, or auto on CUDA) where libnccl loads on every rank, bootstrapped
 * over MPI (rank 0's id, broadcast); else MPI through host memory. */
int dp_allreduce_setup(trainer *t)
{
    const int want = t->o->allreduce;
    snprintf(t->allreduce_desc, sizeof t->allreduce_desc, "MPI_Allreduce (host memory)");
#if GF_CLI_HAVE_NCCL
    char why[512] = "", desc[560];
    int ok = want == AR_NCCL || (want == AR_AUTO && t->cuda);
    if (ok && cli_nccl_load(why, sizeof why) < 0) {
        if (want == AR_NCCL) {
            cli_error(CMD, "--allreduce nccl: %s", why);
            return CLI_FAIL;
        }
        ok = 0;
    }
    if (want == AR_NCCL && !t->cuda) {
        cli_error(CMD, "--allreduce nccl sums gradients on CUDA devices; the loader delivers "
                       "on the CPU%s%s",
                  t->device_note[0] ? ": " : "", t->device_note);
        return CLI_USAGE;
    }
#if GF_CLI_HAVE_MPI
    if (t->mpi && want == AR_AUTO) { /* every rank the same way, or none */
        int all = ok;
        MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        ok = all;
    }
    if (ok && t->mpi && t->world > 1) {
        /* NCCL refuses two ranks on one GPU (its init fails on every
         * rank); find that first, by host and PCI bus id. */
        enum { KEY = 320 };
        char key[KEY] = "", host[256] = "", *all = malloc((size_t)t->world * KEY);
        cli_cuda_device info;
        if (!all) {
            cli_error(CMD, "out of memory");
            return CLI_FAIL;
        }
        gethostname(host, sizeof host - 1);
        if (cli_cuda_device_info(t->device_id, &info) == 0)
            snprintf(key, sizeof key, "%s/%s", host, info.pci_bus_id);
        else
            snprintf(key, sizeof key, "%s/device %d", host, t->device_id);
        MPI_Allgather(key, KEY, MPI_CHAR, all, KEY, MPI_CHAR, MPI_COMM_WORLD);
        int a = -1, b = -1;
        for (int i = 0; i < t->world && a < 0; i++)
            for (int j = i + 1; j < t->world; j++)
                if (strncmp(all + (size_t)i * KEY, all + (size_t)j * KEY, KEY) == 0) {
                    a = i, b = j;
                    break;
                }
        if (a >= 0) {
            snprintf(why, sizeof why, "ranks %d and %d share GPU %.200s: NCCL needs one GPU per "
                     "rank", a, b, all + (size_t)a * KEY);
            ok = 0;
        }
        free(all);
        if (!ok && want == AR_NCCL) {
            cli_error(CMD, "--allreduce nccl: %s (use --allreduce mpi, or fewer ranks)", why);
            return CLI_USAGE;
        }
    }
#endif
    if (!ok) {
        if (want == AR_AUTO && t->cuda && why[0])
            snprintf(t->allreduce_desc, sizeof t->allreduce_desc,
                     "MPI_Allreduce (host memory; NCCL: %s)", why);
        if (!t->mpi) { /* one rank without MPI: only for --allreduce nccl */
            cli_error(CMD, "--allreduce nccl: NCCL is not usable here%s%s", why[0] ? ": " : "",
                      why);
            return CLI_FAIL;
        }
        return CLI_OK;
    }
    unsigned char id[CLI_NCCL_ID_BYTES];
    int rc = t->rank == 0 ? cli_nccl_unique_id(id, why, sizeof why) : 0;
#if GF_CLI_HAVE_MPI
    if (t->mpi) {
        int st = rc;
        MPI_Bcast(&st, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (st == 0)
            MPI_Bcast(id, CLI_NCCL_ID_BYTES, MPI_BYTE, 0, MPI_COMM_WORLD);
        else if (rc == 0)
            snprintf(why, sizeof why, "rank 0 could not make an NCCL id");
        rc = st;
    }
#endif
    cli_nccl *c = NULL;
    if (rc == 0)
        rc = cli_nccl_init(&c, t->world, t->rank, id, why, sizeof why);
    if (rc < 0) {
        cli_error(CMD, "NCCL: %s", why);
        return CLI_FAIL;
    }
    t->nccl = c;
    if (cli_cuda_event_create(&t->nccl_ev[0]) < 0 || cli_cuda_event_create(&t->nccl_ev[1]) < 0)
        return train_cuda_failed();
    snprintf(t->allreduce_desc, sizeof t->allreduce_desc, "ncclAllReduce on the GPUs, %s",
             cli_nccl_describe(desc, sizeof desc));
#else
    (void)want;
#endif
    return CLI_OK;
}

/* ---- MPI's start and end ------------------------------------------------- */

/* MPI_Init when launched by mpirun with several ranks or given --mpi:
 * t's rank, world, mpi and dp. On failure t->mpi says whether MPI was
 * started (and must be ended). */
int dp_init(trainer *t, int *argc, char ***argv)
{
    const train_opts *o = t->o;
    const char *ompi = getenv("OMPI_COMM_WORLD_SIZE");
    int launched = ompi && atoi(ompi) > 1;
#if GF_CLI_HAVE_MPI
    if (launched || o->mpi) {
        int provided;
        if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
            cli_error(CMD, "MPI_Init failed");
            return CLI_FAIL;
        }
        t->mpi = t->dp = 1;
        MPI_Comm_rank(MPI_COMM_WORLD, &t->rank);
        MPI_Comm_size(MPI_COMM_WORLD, &t->world);
        /* Rank 0 speaks for all; errors still reach stderr. */
        if (t->rank != 0 && !freopen("/dev/null", "w", stdout)) {
            cli_error(CMD, "/dev/null: %s", strerror(errno));
            return CLI_FAIL;
        }
    }
#else
    (void)argc, (void)argv;
    if (launched || o->mpi || o->allreduce == AR_MPI) {
        cli_error(CMD, "%s, but this gpufeed was built without MPI (install "
                       "libopenmpi-dev; meson setup -Dmpi=enabled)",
                  o->mpi                   ? "--mpi given"
                  : o->allreduce == AR_MPI ? "--allreduce mpi given"
                                           : "launched by mpirun with several ranks");
        return CLI_USAGE;
    }
#endif
    /* NCCL needs no MPI for one rank: a one-rank data-parallel run,
     * the same steps through the all-reduce path. */
    if (!t->dp && o->allreduce == AR_NCCL)
        t->dp = 1;
    return CLI_OK;
}

/* Rank 0's status, on every rank (a status only rank 0 had). */
int dp_share_status(const trainer *t, int status)
{
#if GF_CLI_HAVE_MPI
    if (t->mpi) {
        int st = status;
        MPI_Bcast(&st, 1, MPI_INT, 0, MPI_COMM_WORLD);
        status = st;
    }
#else
    (void)t;
#endif
    return status;
}

/* After a run: every rank's weights, samples and first-epoch hash, on
 * rank 0 (one rank: its own, set by the caller). */
int dp_gather(trainer *t, run_result *r)
{
#if GF_CLI_HAVE_MPI
    if (t->dp && t->mpi) {
        uint64_t mine[3] = {r->checksum, r->samples, t->first_epoch_hash}, *all;
        all = malloc((size_t)t->world * 3 * sizeof *all);
        if (!all) {
            cli_error(CMD, "out of memory");
            return CLI_FAIL;
        }
        MPI_Allgather(mine, 3, MPI_UINT64_T, all, 3, MPI_UINT64_T, MPI_COMM_WORLD);
        r->global_samples = 0;
        for (int i = 0; i < t->world; i++) {
            t->rank_checksums[i] = all[3 * i];
            t->rank_samples[i] = all[3 * i + 1];
            t->rank_hashes[i] = all[3 * i + 2];
            r->global_samples += all[3 * i + 1];
        }
        free(all);
    }
#else
    (void)t, (void)r;
#endif
    return CLI_OK;
}

/* Before anything that may wait for the other ranks (an NCCL
 * communicator's teardown): they may be waiting in a collective. */
void dp_abort(const trainer *t, int status)
{
#if GF_CLI_HAVE_MPI
    if (t->mpi && status != CLI_OK && t->world > 1)
        MPI_Abort(MPI_COMM_WORLD, status);
#else
    (void)t, (void)status;
#endif
}

void dp_finalize(const trainer *t)
{
#if GF_CLI_HAVE_MPI
    if (t->mpi)
        MPI_Finalize();
#else
    (void)t;
#endif
}
