/* A stand-in for libnvidia-ml.so.1 (the five entry points src/demo/nvml.c
 * uses): one device at PCI 0000:65:00.0 whose utilization is
 * $STUB_NVML_GPU percent (default 73). stub_nvml_reads counts the
 * utilization reads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct stub_util {
    unsigned int gpu, memory;
} stub_util;

static int reads;

int stub_nvml_reads(void)
{
    return __atomic_load_n(&reads, __ATOMIC_SEQ_CST);
}

int nvmlInit_v2(void)
{
    const char *e = getenv("STUB_NVML_INIT");
    return e ? atoi(e) : 0;
}

int nvmlShutdown(void)
{
    return 0;
}

int nvmlDeviceGetHandleByPciBusId_v2(const char *bus, void **dev)
{
    if (strcmp(bus, "0000:65:00.0") != 0)
        return 6; /* NVML_ERROR_NOT_FOUND */
    *dev = (void *)&reads;
    return 0;
}

int nvmlDeviceGetUtilizationRates(void *dev, stub_util *u)
{
    if (dev != (void *)&reads)
        return 2; /* NVML_ERROR_INVALID_ARGUMENT */
    const char *e = getenv("STUB_NVML_GPU");
    u->gpu = e ? (unsigned)atoi(e) : 73;
    u->memory = 10;
    __atomic_add_fetch(&reads, 1, __ATOMIC_SEQ_CST);
    return 0;
}

const char *nvmlErrorString(int r)
{
    static char buf[32];
    snprintf(buf, sizeof buf, "stub error %d", r);
    return buf;
}
