/* memory.c: the allocation and free wrappers. Every allocation reserves its
 * size in the container's accounting before the driver is called (so
 * concurrent processes cannot overshoot together), and gives it back if
 * the driver fails. Frees take the record out of the table before calling
 * the driver, so a reused address can never be confused with the old one. */
#include <stdint.h>

#include "acct.h"
#include "arrays.h"
#include "atab.h"
#include "config.h"
#include "hooks.h"
#include "log.h"
#include "memory.h"

#define PITCH_ALIGN 512u

CUresult tessera_current_device(int *dev)
{
    CUdevice d = 0;
    CUresult rc = real_cuCtxGetDevice(&d);
    if (rc == CUDA_SUCCESS)
        *dev = d;
    return rc;
}

struct pending {
    int dev;
    uint64_t bytes;
    int accounted;
};

/* Reserve bytes on dev (dev < 0: the current device). */
static CUresult mem_begin(struct pending *p, int dev, uint64_t bytes)
{
    const struct tessera_config *c = tessera_cfg();

    p->dev = dev;
    p->bytes = bytes;
    p->accounted = 0;
    if (c->bad) {
        tessera_config_report();
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (!c->mem_limited)
        return CUDA_SUCCESS;
    if (p->dev < 0) {
        CUresult rc = tessera_current_device(&p->dev);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    if (p->dev < 0 || p->dev >= TESSERA_MAX_DEV || c->limit[p->dev] == 0) {
        TLOG_ONCE(TLOG_ERROR, "device %d has no entry in TESSERA_MEMORY_LIMIT; its allocations fail", p->dev);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    switch (acct_reserve(p->dev, bytes, c->limit[p->dev])) {
    case ACCT_OK:
        p->accounted = 1;
        return CUDA_SUCCESS;
    case ACCT_OVER:
        tlog(TLOG_INFO, "allocation of %llu bytes on device %d refused: over the limit of %llu",
             (unsigned long long)bytes, p->dev, (unsigned long long)c->limit[p->dev]);
        return CUDA_ERROR_OUT_OF_MEMORY;
    default:
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
}

/* After the driver call: record the allocation, or undo the reservation. */
static CUresult mem_end(struct pending *p, CUresult rc, enum atab_kind kind, uint64_t key)
{
    if (!p->accounted)
        return rc;
    if (rc != CUDA_SUCCESS) {
        acct_release(p->dev, p->bytes);
        return rc;
    }
    if (atab_insert(kind, key, p->dev, p->bytes) != 0)
        TLOG_ONCE(TLOG_WARN, "out of memory tracking allocations; their frees will not be credited");
    return rc;
}

/* Frees: take the record, call the driver, then credit or put it back. */
struct taken {
    int found;
    int dev;
    uint64_t bytes;
};

static struct taken free_begin(enum atab_kind kind, uint64_t key)
{
    struct taken t = {0, 0, 0};
    t.found = atab_take(kind, key, &t.dev, &t.bytes);
    return t;
}

static CUresult free_end(const struct taken *t, CUresult rc, enum atab_kind kind, uint64_t key)
{
    if (!t->found)
        return rc;
    if (rc == CUDA_SUCCESS)
        acct_release(t->dev, t->bytes);
    else
        (void)atab_insert(kind, key, t->dev, t->bytes);
    return rc;
}

static int oversubscribe(void) { return tessera_cfg()->oversubscribe; }

/* ---- linear allocations ---- */

TESSERA_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    struct pending p;
    CUresult rc = mem_begin(&p, -1, bytesize);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (oversubscribe())
        rc = real_cuMemAllocManaged(dptr, bytesize, CU_MEM_ATTACH_GLOBAL);
    else
        rc = real_cuMemAlloc_v2(dptr, bytesize);
    return mem_end(&p, rc, ATAB_MEM, rc == CUDA_SUCCESS ? *dptr : 0);
}

/* The pre-3.2 ABI returns 32-bit pointers: never converted to managed. */
TESSERA_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    struct pending p;
    CUresult rc = mem_begin(&p, -1, bytesize);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = real_cuMemAlloc(dptr, bytesize);
    return mem_end(&p, rc, ATAB_MEM, rc == CUDA_SUCCESS ? *dptr : 0);
}

static uint64_t pitch_estimate(uint64_t width, uint64_t height)
{
    uint64_t pitch = (width + PITCH_ALIGN - 1) / PITCH_ALIGN * PITCH_ALIGN;
    if (pitch < width || (height != 0 && pitch > UINT64_MAX / height))
        return UINT64_MAX;
    return pitch * height;
}

/* The driver picks the pitch; reserve an estimate first, then settle the
 * difference (a few bytes per row) once the real pitch is known. */
static void pitch_settle(struct pending *p, uint64_t actual)
{
    if (!p->accounted || actual == p->bytes)
        return;
    if (actual > p->bytes)
        (void)acct_charge(p->dev, actual - p->bytes);
    else
        acct_release(p->dev, p->bytes - actual);
    p->bytes = actual;
}

TESSERA_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                           unsigned int ElementSizeBytes)
{
    struct pending p;
    CUresult rc = mem_begin(&p, -1, pitch_estimate(WidthInBytes, Height));
    if (rc != CUDA_SUCCESS)
        return rc;
    if (oversubscribe()) {
        if (pPitch == NULL || WidthInBytes == 0 || Height == 0 ||
            (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16)) {
            rc = CUDA_ERROR_INVALID_VALUE;
        } else {
            size_t pitch = (WidthInBytes + PITCH_ALIGN - 1) / PITCH_ALIGN * PITCH_ALIGN;
            rc = real_cuMemAllocManaged(dptr, p.bytes, CU_MEM_ATTACH_GLOBAL);
            if (rc == CUDA_SUCCESS)
                *pPitch = pitch;
        }
    } else {
        rc = real_cuMemAllocPitch_v2(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    }
    if (rc == CUDA_SUCCESS)
        pitch_settle(&p, (uint64_t)*pPitch * Height);
    return mem_end(&p, rc, ATAB_MEM, rc == CUDA_SUCCESS ? *dptr : 0);
}

TESSERA_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes,
                                        unsigned int Height, unsigned int ElementSizeBytes)
{
    struct pending p;
    CUresult rc = mem_begin(&p, -1, pitch_estimate(WidthInBytes, Height));
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = real_cuMemAllocPitch(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    if (rc == CUDA_SUCCESS)
        pitch_settle(&p, (uint64_t)*pPitch * Height);
    return mem_end(&p, rc, ATAB_MEM, rc == CUDA_SUCCESS ? *dptr : 0);
}

/* Managed memory counts against the current device: it is where it lives
 * until the driver migrates it. */
TESSERA_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    struct pending p;
    CUresult rc = mem_begin(&p, -1, bytesize);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = real_cuMemAllocManaged(dptr, bytesize, flags);
    return mem_end(&p, rc, ATAB_MEM, rc == CUDA_SUCCESS ? *dptr : 0);
}

/* Stream-ordered allocations are accounted when requested and credited when
 * their free is enqueued; they are never converted to managed memory. */
#define ASYNC_ALLOC(name, params, call)                                       \
    TESSERA_EXPORT CUresult name params                                       \
    {                                                                         \
        struct pending p;                                                     \
        CUresult rc = mem_begin(&p, -1, bytesize);                            \
        if (rc != CUDA_SUCCESS)                                               \
            return rc;                                                        \
        rc = call;                                                            \
        return mem_end(&p, rc, ATAB_MEM, rc == CUDA_SUCCESS ? *dptr : 0);     \
    }
ASYNC_ALLOC(cuMemAllocAsync, (CUdeviceptr * dptr, size_t bytesize, CUstream hStream),
            real_cuMemAllocAsync(dptr, bytesize, hStream))
ASYNC_ALLOC(cuMemAllocAsync_ptsz, (CUdeviceptr * dptr, size_t bytesize, CUstream hStream),
            real_cuMemAllocAsync_ptsz(dptr, bytesize, hStream))
ASYNC_ALLOC(cuMemAllocFromPoolAsync, (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream),
            real_cuMemAllocFromPoolAsync(dptr, bytesize, pool, hStream))
ASYNC_ALLOC(cuMemAllocFromPoolAsync_ptsz,
            (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream),
            real_cuMemAllocFromPoolAsync_ptsz(dptr, bytesize, pool, hStream))

#define FREE(name, params, key, call)                        \
    TESSERA_EXPORT CUresult name params                      \
    {                                                        \
        struct taken t = free_begin(ATAB_MEM, (key));        \
        return free_end(&t, call, ATAB_MEM, (key));          \
    }
FREE(cuMemFree_v2, (CUdeviceptr dptr), dptr, real_cuMemFree_v2(dptr))
FREE(cuMemFree, (CUdeviceptr_v1 dptr), dptr, real_cuMemFree(dptr))
FREE(cuMemFreeAsync, (CUdeviceptr dptr, CUstream hStream), dptr, real_cuMemFreeAsync(dptr, hStream))
FREE(cuMemFreeAsync_ptsz, (CUdeviceptr dptr, CUstream hStream), dptr, real_cuMemFreeAsync_ptsz(dptr, hStream))

/* ---- virtual memory management: physical allocations ---- */

TESSERA_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                    const CUmemAllocationProp *prop, unsigned long long flags)
{
    struct pending p;
    CUresult rc;

    if (prop == NULL || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
        if (tessera_cfg()->bad) {
            tessera_config_report();
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        return real_cuMemCreate(handle, size, prop, flags); /* host memory: not counted */
    }
    rc = mem_begin(&p, prop->location.id, size);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = real_cuMemCreate(handle, size, prop, flags);
    return mem_end(&p, rc, ATAB_VMM, rc == CUDA_SUCCESS ? *handle : 0);
}

TESSERA_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    struct taken t = free_begin(ATAB_VMM, handle);
    return free_end(&t, real_cuMemRelease(handle), ATAB_VMM, handle);
}

/* ---- arrays ---- */

static uint64_t handle_key(const void *h) { return (uint64_t)(uintptr_t)h; }

TESSERA_EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray)
{
    struct pending p;
    CUresult rc;

    if (pAllocateArray == NULL)
        return real_cuArrayCreate_v2(pHandle, pAllocateArray);
    rc = mem_begin(&p, -1,
                   tessera_array_bytes(pAllocateArray->Width, pAllocateArray->Height, 1, pAllocateArray->Format,
                                       pAllocateArray->NumChannels));
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = real_cuArrayCreate_v2(pHandle, pAllocateArray);
    return mem_end(&p, rc, ATAB_ARRAY, rc == CUDA_SUCCESS ? handle_key(*pHandle) : 0);
}

TESSERA_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray)
{
    struct pending p;
    CUresult rc;

    if (pAllocateArray == NULL)
        return real_cuArray3DCreate_v2(pHandle, pAllocateArray);
    rc = mem_begin(&p, -1,
                   tessera_array_bytes(pAllocateArray->Width, pAllocateArray->Height, pAllocateArray->Depth,
                                       pAllocateArray->Format, pAllocateArray->NumChannels));
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = real_cuArray3DCreate_v2(pHandle, pAllocateArray);
    return mem_end(&p, rc, ATAB_ARRAY, rc == CUDA_SUCCESS ? handle_key(*pHandle) : 0);
}

TESSERA_EXPORT CUresult cuArrayDestroy(CUarray hArray)
{
    struct taken t = free_begin(ATAB_ARRAY, handle_key(hArray));
    return free_end(&t, real_cuArrayDestroy(hArray), ATAB_ARRAY, handle_key(hArray));
}

TESSERA_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                               unsigned int numMipmapLevels)
{
    struct pending p;
    CUresult rc;

    if (pMipmappedArrayDesc == NULL)
        return real_cuMipmappedArrayCreate(pHandle, pMipmappedArrayDesc, numMipmapLevels);
    rc = mem_begin(&p, -1, tessera_mipmap_bytes(pMipmappedArrayDesc, numMipmapLevels));
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = real_cuMipmappedArrayCreate(pHandle, pMipmappedArrayDesc, numMipmapLevels);
    return mem_end(&p, rc, ATAB_MIPMAP, rc == CUDA_SUCCESS ? handle_key(*pHandle) : 0);
}

TESSERA_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    struct taken t = free_begin(ATAB_MIPMAP, handle_key(hMipmappedArray));
    return free_end(&t, real_cuMipmappedArrayDestroy(hMipmappedArray), ATAB_MIPMAP, handle_key(hMipmappedArray));
}
