/*
 * A loader's failure: its message (l->msg) and halts. gf__fail and the
 * halts run on any loader thread (the controller, a decode thread, a CUDA
 * callback, the caller's); a writer that can race an observer holds mu,
 * and gf_last_error, an observer from any thread, copies the message
 * under mu.
 */
#include "loader_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

GF__COLD int gf__fail(gf_loader *l, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->msg, sizeof l->msg, fmt, ap);
    va_end(ap);
    return code;
}

GF__COLD int gf__fail_locking(gf_loader *l, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&l->mu);
    vsnprintf(l->msg, sizeof l->msg, fmt, ap);
    pthread_mutex_unlock(&l->mu);
    va_end(ap);
    return code;
}

/* The first halt wins; with mu held. */
GF__COLD void gf__halt_locked(gf_loader *l, int code, const char *what)
{
    if (!l->halted) {
        l->halted = true;
        l->halt_code = gf__fail(l, code, "%s", what);
    }
    pthread_cond_broadcast(&l->ready_cv);
}

GF__COLD void gf__halt(gf_loader *l, int code, const char *what)
{
    pthread_mutex_lock(&l->mu);
    gf__halt_locked(l, code, what);
    pthread_mutex_unlock(&l->mu);
}

/* A loader thread may rewrite l->msg (under mu) while any thread asks:
 * each caller gets its own copy, taken under mu. */
const char *gf_last_error(const gf_loader *l)
{
    static _Thread_local char copy[sizeof l->msg];
    if (!l)
        return "";
    pthread_mutex_t *mu = (pthread_mutex_t *)&l->mu; /* l is the caller's, not const */
    pthread_mutex_lock(mu);
    memcpy(copy, l->msg, sizeof copy);
    pthread_mutex_unlock(mu);
    return copy;
}
