/* src/demo/nvml.c, gpufeed train's NVML sampler, against a stub library
 * (nvml_stub.c): readings only while on, their mean, errors that name
 * the library or the device, and a close that does not hang. */
#include <check.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nvml.h"

#ifndef STUB_PATH
#error "STUB_PATH: the stub library's path"
#endif

static int (*stub_reads)(void);

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void setup(void)
{
    setenv("GPUFEED_NVML_LIBRARY", STUB_PATH, 1);
    unsetenv("STUB_NVML_GPU");
    unsetenv("STUB_NVML_INIT");
    void *h = dlopen(STUB_PATH, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(h != NULL, "%s", dlerror());
    *(void **)&stub_reads = dlsym(h, "stub_nvml_reads");
    ck_assert_ptr_nonnull(stub_reads);
}

/* Waits (up to 10 s) until the sampler has read `more` times more. */
static void wait_reads(int more)
{
    int want = stub_reads() + more;
    for (int i = 0; i < 1000 && stub_reads() < want; i++)
        sleep_ms(10);
    ck_assert_int_ge(stub_reads(), want);
}

START_TEST(samples_only_while_on_and_averages)
{
    cli_nvml *n = NULL;
    char why[256] = "";
    ck_assert_msg(cli_nvml_open(&n, "0000:65:00.0", why, sizeof why) == 0, "%s", why);
    double mean;
    int readings;
    sleep_ms(3 * CLI_NVML_PERIOD_MS);
    cli_nvml_take(n, &mean, &readings);
    ck_assert_int_eq(readings, 0); /* off: nothing read */
    ck_assert(mean == -1);

    cli_nvml_resume(n);
    wait_reads(3);
    cli_nvml_pause(n);
    cli_nvml_take(n, &mean, &readings);
    ck_assert_int_ge(readings, 2);
    ck_assert_double_eq_tol(mean, 0.73, 1e-12);

    /* paused: later readings do not count; a take resets */
    int before = stub_reads();
    sleep_ms(3 * CLI_NVML_PERIOD_MS);
    ck_assert_int_le(stub_reads(), before + 1); /* at most the one in flight */
    cli_nvml_take(n, &mean, &readings);
    ck_assert_int_eq(readings, 0);

    setenv("STUB_NVML_GPU", "20", 1);
    cli_nvml_resume(n);
    wait_reads(2);
    cli_nvml_pause(n);
    cli_nvml_take(n, &mean, &readings);
    ck_assert_int_ge(readings, 1);
    ck_assert_double_eq_tol(mean, 0.20, 1e-12);
    cli_nvml_close(n);
}
END_TEST

START_TEST(close_while_sampling_returns)
{
    cli_nvml *n = NULL;
    char why[256] = "";
    ck_assert_msg(cli_nvml_open(&n, "0000:65:00.0", why, sizeof why) == 0, "%s", why);
    cli_nvml_resume(n);
    cli_nvml_close(n);
    cli_nvml_close(NULL);
}
END_TEST

START_TEST(an_unknown_device_is_refused_with_its_bus_id)
{
    cli_nvml *n = (cli_nvml *)1;
    char why[256] = "";
    ck_assert_int_eq(cli_nvml_open(&n, "0000:99:00.0", why, sizeof why), -1);
    ck_assert_ptr_null(n);
    ck_assert_msg(strstr(why, "0000:99:00.0") && strstr(why, "stub error 6"), "%s", why);
}
END_TEST

START_TEST(a_failed_init_is_reported)
{
    cli_nvml *n = NULL;
    char why[256] = "";
    setenv("STUB_NVML_INIT", "9", 1); /* NVML_ERROR_DRIVER_NOT_LOADED */
    ck_assert_int_eq(cli_nvml_open(&n, "0000:65:00.0", why, sizeof why), -1);
    ck_assert_msg(strstr(why, "nvmlInit") && strstr(why, "stub error 9"), "%s", why);
}
END_TEST

START_TEST(a_missing_or_wrong_library_is_named)
{
    cli_nvml *n = NULL;
    char why[256] = "";
    setenv("GPUFEED_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
    ck_assert_int_eq(cli_nvml_open(&n, "0000:65:00.0", why, sizeof why), -1);
    ck_assert_msg(strstr(why, "/nonexistent/libnvidia-ml.so.1"), "%s", why);
    setenv("GPUFEED_NVML_LIBRARY", "libm.so.6", 1);
    ck_assert_int_eq(cli_nvml_open(&n, "0000:65:00.0", why, sizeof why), -1);
    ck_assert_msg(strstr(why, "not an NVML library"), "%s", why);
}
END_TEST

#include "run_suite.h"

int main(void)
{
    Suite *s = suite_create("nvml");
    TCase *t = tcase_create("nvml");
    tcase_add_checked_fixture(t, setup, NULL);
    tcase_add_test(t, samples_only_while_on_and_averages);
    tcase_add_test(t, close_while_sampling_returns);
    tcase_add_test(t, an_unknown_device_is_refused_with_its_bus_id);
    tcase_add_test(t, a_failed_init_is_reported);
    tcase_add_test(t, a_missing_or_wrong_library_is_named);
    suite_add_tcase(s, t);
    return tu_run_suite(s);
}
