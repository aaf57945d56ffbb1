/* The descriptors a loader's start needs, found before libuv's loop is
 * made: libuv calls abort() where its first loop in a process cannot make
 * its signal pipe, and reports the rest as a bare failure. Probed by
 * taking them (dup of one) and giving them back at once: exact where
 * counting /proc/self/fd against RLIMIT_NOFILE needs a descriptor itself.
 * Another thread may take one in between; this is a check, not a
 * reservation. */
#include "descriptors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

/* libuv's: the epoll instance, the loop's wake-up (an eventfd, or a pipe),
 * the process's signal pipe (made once). */
enum { LIBUV_FDS = 1 + 2 + 2 };

int gf__check_descriptors(gf_loader *l)
{
    /* and one file open per active decode thread, its sample's */
    int need = LIBUV_FDS + (l->active_threads > 0 ? l->active_threads : 1);
    int fds[LIBUV_FDS + 1024 + 1], have = 0, err = 0;
    if (need > (int)(sizeof fds / sizeof *fds))
        need = (int)(sizeof fds / sizeof *fds);
    fds[0] = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fds[0] < 0)
        err = errno;
    else
        for (have = 1; have < need; have++)
            if ((fds[have] = fcntl(fds[0], F_DUPFD_CLOEXEC, 0)) < 0) {
                err = errno;
                break;
            }
    for (int i = 0; i < have; i++)
        close(fds[i]);
    if (have == need)
        return 0;
    struct rlimit r;
    char limit[48] = "unknown";
    if (getrlimit(RLIMIT_NOFILE, &r) == 0)
        snprintf(limit, sizeof limit, "%llu", (unsigned long long)r.rlim_cur);
    return gf__fail_locking(l, GF_EMFILE,
                            "too few file descriptors: the loader needs %d (%d for libuv's "
                            "loop, one per decode thread), %d %s free (RLIMIT_NOFILE %s%s)",
                            need, LIBUV_FDS, have, have == 1 ? "is" : "are", limit,
                            err == ENFILE ? "; the system's table is full" : "");
}
