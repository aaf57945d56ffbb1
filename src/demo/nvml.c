/*
 * NVML utilization sampling for gpufeed train (nvml.h says what and why).
 * The few NVML entry points used are declared here: the driver ships the
 * library but Debian ships no header, and these have kept their ABI since
 * NVML's _v2 names (2012).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "failf.h"
#include "nvml.h"

typedef int nvml_return;         /* nvmlReturn_t: 0 is NVML_SUCCESS */
typedef struct nvml_device_st *nvml_device;
typedef struct nvml_utilization {
    unsigned int gpu, memory;    /* percent */
} nvml_utilization;

typedef nvml_return (*init_fn)(void);
typedef nvml_return (*shutdown_fn)(void);
typedef nvml_return (*by_bus_id_fn)(const char *, nvml_device *);
typedef nvml_return (*utilization_fn)(nvml_device, nvml_utilization *);
typedef const char *(*error_string_fn)(nvml_return);

struct cli_nvml {
    void *lib;
    shutdown_fn shutdown;
    utilization_fn utilization;
    nvml_device dev;

    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int active, quit;
    double sum;
    int readings;
};

static void *sampler(void *arg)
{
    cli_nvml *n = arg;
    struct timespec due;
    clock_gettime(CLOCK_MONOTONIC, &due);
    pthread_mutex_lock(&n->mu);
    while (!n->quit) {
        due.tv_nsec += CLI_NVML_PERIOD_MS * 1000000L;
        while (due.tv_nsec >= 1000000000L)
            due.tv_nsec -= 1000000000L, due.tv_sec++;
        while (!n->quit && pthread_cond_timedwait(&n->cv, &n->mu, &due) != ETIMEDOUT)
            ;
        if (n->quit)
            break;
        if (!n->active)
            continue;
        pthread_mutex_unlock(&n->mu);
        nvml_utilization u;
        nvml_return rc = n->utilization(n->dev, &u);
        pthread_mutex_lock(&n->mu);
        if (rc == 0 && n->active) {
            n->sum += u.gpu > 100 ? 1.0 : u.gpu / 100.0;
            n->readings++;
        }
    }
    pthread_mutex_unlock(&n->mu);
    return NULL;
}

int cli_nvml_open(cli_nvml **out, const char *pci_bus_id, char *why, size_t why_len)
{
    const char *env = getenv("GPUFEED_NVML_LIBRARY");
    const char *name = env && *env ? env : "libnvidia-ml.so.1";
    *out = NULL;
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror(); /* names the file */
        return demo_failf(why, why_len, "%s", e ? e : "libnvidia-ml cannot be loaded");
    }
    init_fn init = (init_fn)dlsym(lib, "nvmlInit_v2");
    shutdown_fn shutdown = (shutdown_fn)dlsym(lib, "nvmlShutdown");
    by_bus_id_fn by_bus_id = (by_bus_id_fn)dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    utilization_fn utilization = (utilization_fn)dlsym(lib, "nvmlDeviceGetUtilizationRates");
    error_string_fn error_string = (error_string_fn)dlsym(lib, "nvmlErrorString");
    if (!init || !shutdown || !by_bus_id || !utilization || !error_string) {
        dlclose(lib);
        return demo_failf(why, why_len, "%s: not an NVML library (a symbol is missing)", name);
    }
    nvml_return rc = init();
    if (rc != 0) {
        demo_failf(why, why_len, "nvmlInit: %s", error_string(rc));
        dlclose(lib);
        return -1;
    }
    cli_nvml *n = calloc(1, sizeof *n);
    if (!n) {
        shutdown();
        dlclose(lib);
        return demo_failf(why, why_len, "out of memory");
    }
    n->lib = lib;
    n->shutdown = shutdown;
    n->utilization = utilization;
    if ((rc = by_bus_id(pci_bus_id, &n->dev)) != 0) {
        demo_failf(why, why_len, "NVML has no device at PCI %s: %s", pci_bus_id, error_string(rc));
        goto fail;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&n->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&n->mu, NULL);
    if (pthread_create(&n->thread, NULL, sampler, n) != 0) {
        pthread_cond_destroy(&n->cv);
        pthread_mutex_destroy(&n->mu);
        demo_failf(why, why_len, "NVML sampler: cannot start a thread");
        goto fail;
    }
    *out = n;
    return 0;
fail:
    shutdown();
    dlclose(lib);
    free(n);
    return -1;
}

void cli_nvml_resume(cli_nvml *n)
{
    pthread_mutex_lock(&n->mu);
    n->active = 1;
    pthread_mutex_unlock(&n->mu);
}

void cli_nvml_pause(cli_nvml *n)
{
    pthread_mutex_lock(&n->mu);
    n->active = 0;
    pthread_mutex_unlock(&n->mu);
}

void cli_nvml_take(cli_nvml *n, double *mean, int *readings)
{
    pthread_mutex_lock(&n->mu);
    *mean = n->readings ? n->sum / n->readings : -1;
    *readings = n->readings;
    n->sum = 0;
    n->readings = 0;
    pthread_mutex_unlock(&n->mu);
}

void cli_nvml_close(cli_nvml *n)
{
    if (!n)
        return;
    pthread_mutex_lock(&n->mu);
    n->quit = 1;
    pthread_cond_signal(&n->cv);
    pthread_mutex_unlock(&n->mu);
    pthread_join(n->thread, NULL);
    pthread_cond_destroy(&n->cv);
    pthread_mutex_destroy(&n->mu);
    n->shutdown();
    dlclose(n->lib);
    free(n);
}
