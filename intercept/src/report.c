/* report.c: what the container sees as its device memory. With a limit,
 * total is the limit (capped at the physical size unless oversubscribing)
 * and free is total minus the whole container's usage (capped at the
 * physical free memory unless oversubscribing). */
#include <limits.h>

#include "acct.h"
#include "config.h"
#include "hooks.h"
#include "memory.h"

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

int tessera_report(int dev, uint64_t real_total, uint64_t real_free, uint64_t *total, uint64_t *free,
                   uint64_t *used)
{
    const struct tessera_config *c = tessera_cfg();
    uint64_t u = 0, t;

    if (c->bad) {
        tessera_config_report();
        *total = real_total;
        *free = 0; /* fail closed: nothing can be allocated */
        *used = 0;
        return 0;
    }
    if (!c->mem_limited)
        return -1;
    t = dev >= 0 && dev < TESSERA_MAX_DEV ? c->limit[dev] : 0;
    if (!c->oversubscribe)
        t = min_u64(t, real_total);
    if (t != 0 && acct_used(dev, &u) != 0)
        u = t; /* accounting unavailable: allocations fail, so show none free */
    *total = t;
    *used = min_u64(u, t);
    *free = t - *used;
    if (!c->oversubscribe)
        *free = min_u64(*free, real_free);
    return 0;
}

static CUresult get_info(uint64_t *free, uint64_t *total)
{
    size_t rf = 0, rt = 0;
    uint64_t used;
    int dev;
    CUresult rc = real_cuMemGetInfo_v2(&rf, &rt);

    if (rc != CUDA_SUCCESS)
        return rc;
    *free = rf;
    *total = rt;
    if (tessera_current_device(&dev) == CUDA_SUCCESS)
        (void)tessera_report(dev, rt, rf, total, free, &used);
    return CUDA_SUCCESS;
}

TESSERA_EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
    uint64_t f, t;
    CUresult rc;

    if (free == NULL || total == NULL)
        return real_cuMemGetInfo_v2(free, total);
    rc = get_info(&f, &t);
    if (rc == CUDA_SUCCESS) {
        *free = (size_t)f;
        *total = (size_t)t;
    }
    return rc;
}

TESSERA_EXPORT CUresult cuMemGetInfo(unsigned int *free, unsigned int *total)
{
    uint64_t f, t;
    CUresult rc;

    if (free == NULL || total == NULL)
        return real_cuMemGetInfo(free, total);
    rc = get_info(&f, &t);
    if (rc == CUDA_SUCCESS) {
        *free = (unsigned int)min_u64(f, UINT_MAX);
        *total = (unsigned int)min_u64(t, UINT_MAX);
    }
    return rc;
}

static CUresult total_mem(uint64_t *bytes, CUdevice dev)
{
    size_t real = 0;
    uint64_t t, f, u;
    CUresult rc = real_cuDeviceTotalMem_v2(&real, dev);

    if (rc != CUDA_SUCCESS)
        return rc;
    *bytes = real;
    if (tessera_report(dev, real, real, &t, &f, &u) == 0)
        *bytes = t;
    return CUDA_SUCCESS;
}

TESSERA_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    uint64_t b;
    CUresult rc;

    if (bytes == NULL)
        return real_cuDeviceTotalMem_v2(bytes, dev);
    rc = total_mem(&b, dev);
    if (rc == CUDA_SUCCESS)
        *bytes = (size_t)b;
    return rc;
}

TESSERA_EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    uint64_t b;
    CUresult rc;

    if (bytes == NULL)
        return real_cuDeviceTotalMem(bytes, dev);
    rc = total_mem(&b, dev);
    if (rc == CUDA_SUCCESS)
        *bytes = (unsigned int)min_u64(b, UINT_MAX);
    return rc;
}
