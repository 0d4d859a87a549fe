/* nvml.c: NVML memory queries (what nvidia-smi and many frameworks read)
 * report the same container view as cuMemGetInfo. The NVML index is taken
 * as the device ordinal; the agent sets CUDA_DEVICE_ORDER=PCI_BUS_ID so
 * both enumerate the container's GPUs in the same order. */
#include "hooks.h"
#include "memory.h"

static int report_for(nvmlDevice_t device, unsigned long long rtotal, unsigned long long rfree, uint64_t *total,
                      uint64_t *free, uint64_t *used)
{
    unsigned int idx = 0;
    if (real_nvmlDeviceGetIndex(device, &idx) != NVML_SUCCESS)
        return -1;
    return tessera_report((int)idx, rtotal, rfree, total, free, used);
}

TESSERA_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    uint64_t t, f, u;
    nvmlReturn_t rc = real_nvmlDeviceGetMemoryInfo(device, memory);

    if (rc == NVML_SUCCESS && memory != NULL && report_for(device, memory->total, memory->free, &t, &f, &u) == 0) {
        memory->total = t;
        memory->free = f;
        memory->used = u;
    }
    return rc;
}

TESSERA_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    uint64_t t, f, u;
    nvmlReturn_t rc = real_nvmlDeviceGetMemoryInfo_v2(device, memory);

    if (rc == NVML_SUCCESS && memory != NULL && report_for(device, memory->total, memory->free, &t, &f, &u) == 0) {
        memory->total = t;
        memory->reserved = 0;
        memory->free = f;
        memory->used = u;
    }
    return rc;
}
