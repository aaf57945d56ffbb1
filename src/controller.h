/* The controller (src/controller.c): the gf-control thread and its libuv
 * loop, whole: init, handles, run, close. Over assemble.c, dispatch.c,
 * the cell reader (cell_reader.h), cursor.c, autotune.c and the pool; the
 * lifecycle (loader.c) starts and stops it. */
#ifndef GF_CONTROLLER_H
#define GF_CONTROLLER_H

#include "loader_impl.h"

/* Lifecycle thread, the pool started: the loop, its handles (the wake-up,
 * the cell reader's, autotune's timer) and the thread. Returns 0; a
 * negative code with l->msg (the loop could not be made); or
 * pthread_create's error (positive), the loop closed again. */
int gf__controller_start(gf_loader *l);
/* Lifecycle thread, l->stopping set: wakes the loop, which closes its
 * handles and ends; joins the thread and closes the loop. */
void gf__controller_stop(gf_loader *l);
/* Any thread: the loop runs a round soon. */
void gf__wake_controller(gf_loader *l);
/* gf__pool_user's completed hook (a decode thread, mu held): wakes the
 * loop when it may be asleep (ctl_may_sleep), or halts when the
 * completion was lost (a full queue, a bug). */
void gf__controller_job_done(void *arg, bool queued);

#endif
