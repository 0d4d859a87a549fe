/* fake_nvml.c: a stand-in libnvidia-ml.so.1 for tests: two 80 GiB
 * devices, nothing used. */
#include "nvml_types.h"

#define EXPORT __attribute__((visibility("default")))
#define NDEV 2u
#define DEV_BYTES (80ull << 30)

static struct nvmlDevice_st {
    unsigned int index;
} devs[NDEV] = {{0}, {1}};

EXPORT nvmlReturn_t nvmlInit_v2(void) { return NVML_SUCCESS; }
EXPORT nvmlReturn_t nvmlInit(void) { return NVML_SUCCESS; }
EXPORT nvmlReturn_t nvmlShutdown(void) { return NVML_SUCCESS; }
EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n)
{
    *n = NDEV;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
    if (i >= NDEV)
        return NVML_ERROR_INVALID_ARGUMENT;
    *d = &devs[i];
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int *i)
{
    *i = d->index;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
    (void)d;
    m->total = DEV_BYTES;
    m->free = DEV_BYTES;
    m->used = 0;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m)
{
    (void)d;
    if (m->version == 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    m->total = DEV_BYTES;
    m->reserved = 0;
    m->free = DEV_BYTES;
    m->used = 0;
    return NVML_SUCCESS;
}
