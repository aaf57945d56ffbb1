/* The loader's work on the decode pool (src/work.c): each decode thread's
 * decoder, read buffer and times, and the pool's run and settle hooks for
 * the loader's jobs. */
#ifndef GF_WORK_H
#define GF_WORK_H

#include "loader_impl.h"
#include "sample_fields.h"

typedef struct gf__worker {
    gf__decoder *dec;
    gf__fields_scratch fields;
    gf__buf field_bufs[GF__FIELDS_MAX]; /* a list sample's field files */
    gf__buf buf;
    gf__fd_cache fds; /* the shards it reads from */
    gf__read_batch *batch;  /* NULL: its reads one at a time */
    gf__buf batch_bufs[GF__POOL_GRAB_MAX];
    double read_s, decode_s, convert_s; /* under mu */
    uint64_t bytes;                     /* under mu */
    size_t scratch;                     /* under mu: read buffer + decoder scratch */
    /* The jobs run and not yet settled: this worker's alone. */
    double ran_read_s, ran_work_s;
    size_t ran_got, ran_scratch;
} gf__worker;

/* Lifecycle thread: l->threads workers' decoders. Returns 0 or GF_ENOMEM,
 * with l->msg. */
int gf__work_init(gf_loader *l);
void gf__work_free(gf_loader *l);

/* gf__pool_user's run, run_batch and settle; arg is the loader. A batch
 * of image-less jobs reads its members in one system call where the
 * worker has an io_uring (read_batch.c) and the page cache has them. */
void gf__work_run(void *arg, int worker, const gf__job *j, gf__done *d);
void gf__work_run_batch(void *arg, int worker, const gf__job *js, int n, gf__done *ds);
bool gf__work_settle(void *arg, int worker, const gf__job *j, gf__done *d);

#endif
