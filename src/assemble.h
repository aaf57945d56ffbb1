/* Batch assembly (src/assemble.c), on the controller thread: a batch's
 * bad samples and warnings, and finalising the oldest batch. Below the
 * controller; it dispatches holes through dispatch.c. */
#ifndef GF_ASSEMBLE_H
#define GF_ASSEMBLE_H

#include "loader_impl.h"

/* A sample decoded although its decoder warned (LENIENT): into the ring
 * gf_recent_warnings reads, and to settings.on_sample_warning. */
void gf__record_warning(gf_loader *l, int64_t sample, int code, const char *why);
/* Under mu: one entry of l->recent (newest), as gf_get_stats hands it out. */
void gf__recent_add(gf_loader *l, int64_t sample, int code, const char *path,
                    const char *reason);
/* Tries to finalise the oldest unfinished batch, appending the jobs its
 * holes need to js. Returns true when it did. */
bool gf__finalise_oldest(gf_loader *l, gf__job *js, int *n_jobs);
void gf__clear_errors(gf__slot *sl);

#endif
