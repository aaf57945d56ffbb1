/* The Check suites' main(): run one suite, report, exit. Header-only, as
 * test_model and test_nvml are built without testutil.c. */
#ifndef GF_TEST_RUN_SUITE_H
#define GF_TEST_RUN_SUITE_H

#include <check.h>

/* Runs every test of s with the given fork mode; main()'s exit status:
 * 0 when all passed, else 1. */
static inline int tu_run_suite_forking(Suite *s, enum fork_status fork)
{
    SRunner *sr = srunner_create(s);
    if (fork != CK_FORK_GETENV)
        srunner_set_fork_status(sr, fork);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

/* Check's default mode: each test in its own process, unless CK_FORK=no. */
static inline int tu_run_suite(Suite *s)
{
    return tu_run_suite_forking(s, CK_FORK_GETENV);
}

#endif
