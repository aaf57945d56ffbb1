/* Autotune (src/autotune.c): grows decode threads and depth while the
 * consumer waits. The controller's timer asks it once per window. */
#ifndef GF_AUTOTUNE_H
#define GF_AUTOTUNE_H

#include "loader_impl.h"

/* The first window starts now (before the controller thread runs). */
void gf__autotune_begin(gf_loader *l);
/* Ends a window: grows if the consumer stalled. Returns true when it
 * grew: the loop should wake, since a deeper ring may take a batch now. */
bool gf__autotune_window(gf_loader *l);

#endif
