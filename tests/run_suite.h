/* The Check suites' main(): run one suite, report, exit. Header-only, as
 * test_model and test_nvml are built without testutil.c.
 * Without fork (the CUDA suites: CUDA does not survive fork()) Check's
 * timeouts do nothing, so a watchdog thread bounds each test instead. */
#ifndef GF_TEST_RUN_SUITE_H
#define GF_TEST_RUN_SUITE_H

#include <check.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The exit status of a suite the watchdog ended: not 1 (a failed test),
 * 77 (skipped), 99 (meson's hard error) or 124/137 (timeout(1)). */
#define TU_WATCHDOG_EXIT 86

/* The watchdog reads Check's log, which Check writes and flushes as each
 * test ends, through a pipe: a line is progress. No test finished within
 * limit_s: it names the test running (tcase_name(), set as a test starts;
 * a fixture before it still shows the previous name) and the last one
 * that finished, and ends the process. The pipe takes Check's log:
 * without fork CK_LOG_FILE_NAME is not written. */
typedef struct {
    int fd;         /* the pipe's read end */
    int done;       /* set when the run is over (__atomic) */
    double limit_s;
    char suite[64]; /* from Check's first line, "Running suite NAME" */
    char last[160]; /* the last result line: the test that finished last */
} tu_watchdog;

static inline double tu_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline void *tu_watchdog_main(void *arg)
{
    tu_watchdog *w = arg;
    double since = tu_now_s();
    char buf[512];
    size_t held = 0; /* bytes of a line not yet ended */
    while (!__atomic_load_n(&w->done, __ATOMIC_ACQUIRE)) {
        struct pollfd p = {.fd = w->fd, .events = POLLIN};
        int n = poll(&p, 1, 200);
        if (n > 0) {
            ssize_t got = read(w->fd, buf + held, sizeof buf - 1 - held);
            if (got <= 0)
                return NULL; /* the run ended: Check closed its log */
            held += (size_t)got;
            buf[held] = '\0';
            char *end;
            while ((end = strchr(buf, '\n')) != NULL) {
                *end = '\0';
                if (strncmp(buf, "Running suite ", 14) == 0)
                    snprintf(w->suite, sizeof w->suite, "%.63s", buf + 14);
                else if (end > buf)
                    snprintf(w->last, sizeof w->last, "%.159s", buf);
                held -= (size_t)(end + 1 - buf);
                memmove(buf, end + 1, held + 1);
                since = tu_now_s();
            }
            if (held == sizeof buf - 1)
                held = 0; /* a line longer than the buffer: drop it */
            continue;
        }
        if (tu_now_s() - since < w->limit_s)
            continue;
        const char *running = tcase_name();
        char pat[200] = "";
        if (running)
            snprintf(pat, sizeof pat, ":%s:", running);
        /* The test that finished last still holds tcase_name() through the
         * next test's setup and through its own next loop iteration. */
        int after = running && strstr(w->last, pat) != NULL;
        char msg[640];
        int len = snprintf(msg, sizeof msg,
                           "\nWATCHDOG: suite %s: no test finished in %.0f s (GF_TEST_WATCHDOG_S): "
                           "hung %s '%s'%s; last finished: %s\n",
                           w->suite[0] ? w->suite : "?", w->limit_s, after ? "after test" : "in test",
                           running ? running : "(the first)",
                           after ? " (in the next test's setup, or its own next loop iteration)" : "",
                           w->last[0] ? w->last : "none");
        /* write(2), not stdio: the hung thread may hold stdout's lock. */
        if (len > 0 && write(2, msg, (size_t)len < sizeof msg ? (size_t)len : sizeof msg - 1) < 0)
            _exit(TU_WATCHDOG_EXIT);
        _exit(TU_WATCHDOG_EXIT);
    }
    return NULL;
}

/* The bound on one test without fork: GF_TEST_WATCHDOG_S, else what Check
 * would have allowed with fork, CK_DEFAULT_TIMEOUT (else 120, the CUDA
 * suites' tcase_set_timeout) times CK_TIMEOUT_MULTIPLIER. */
static inline double tu_watchdog_limit_s(void)
{
    const char *w = getenv("GF_TEST_WATCHDOG_S");
    if (w && atof(w) > 0)
        return atof(w);
    const char *t = getenv("CK_DEFAULT_TIMEOUT"), *m = getenv("CK_TIMEOUT_MULTIPLIER");
    double s = t && atof(t) > 0 ? atof(t) : 120;
    return m && atof(m) > 0 ? s * atof(m) : s;
}

/* Runs every test of s with the given fork mode; main()'s exit status:
 * 0 when all passed, TU_WATCHDOG_EXIT when a test hung without fork,
 * else 1. */
static inline int tu_run_suite_forking(Suite *s, enum fork_status fork)
{
    SRunner *sr = srunner_create(s);
    if (fork != CK_FORK_GETENV)
        srunner_set_fork_status(sr, fork);
    tu_watchdog w = {.fd = -1, .limit_s = tu_watchdog_limit_s()};
    pthread_t dog;
    int pipe_fd[2], dog_started = 0;
    /* Check keeps the name and opens it when the run starts: it must
     * outlive this block. */
    char path[32];
    if (srunner_fork_status(sr) == CK_NOFORK && pipe2(pipe_fd, O_CLOEXEC) == 0) {
        /* Check opens the log by name: the pipe's write end, as a path. */
        snprintf(path, sizeof path, "/dev/fd/%d", pipe_fd[1]);
        srunner_set_log(sr, path);
        w.fd = pipe_fd[0];
        dog_started = pthread_create(&dog, NULL, tu_watchdog_main, &w) == 0;
        if (!dog_started)
            fprintf(stderr, "no watchdog thread: a hung test hangs the suite\n");
    }
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr); /* closes Check's log */
    if (w.fd >= 0) {
        /* Not EOF alone: a child a test left running may hold Check's copy
         * of the write end. */
        __atomic_store_n(&w.done, 1, __ATOMIC_RELEASE);
        close(pipe_fd[1]);
        if (dog_started)
            pthread_join(dog, NULL);
        close(pipe_fd[0]);
    }
    return failed ? 1 : 0;
}

/* Check's default mode: each test in its own process, unless CK_FORK=no. */
static inline int tu_run_suite(Suite *s)
{
    return tu_run_suite_forking(s, CK_FORK_GETENV);
}

#endif
