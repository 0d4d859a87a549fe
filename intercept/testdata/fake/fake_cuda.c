/* fake_cuda.c: a stand-in libcuda.so.1 for tests. Two devices of 80 GiB;
 * allocations are bookkept in-process (addresses are never dereferenced);
 * launches are counted. Built with -Wl,-Bsymbolic so, like the real
 * driver, its cuGetProcAddress returns its own functions even when
 * libtessera-intercept interposes the same names.
 *
 * FAKE_PROCADDR_TRAMPOLINE=1 makes cuGetProcAddress return internal
 * trampolines (addresses no dlsym yields) for a few symbols, to exercise
 * the library's by-name fallback. */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_types.h"

#define EXPORT __attribute__((visibility("default")))
#define NDEV 2
#define DEV_BYTES (80ull << 30)

enum kind { K_DEV = 1, K_MANAGED, K_VMM, K_ARRAY, K_MIPMAP };

struct alloc {
    uint64_t key;
    uint64_t bytes;
    int dev;
    int kind;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct alloc *allocs;
static size_t nallocs, capallocs;
static uint64_t used[NDEV];
static uint64_t next_addr = 0x100000000ull, next_addr32 = 0x10000000ull;
static _Atomic long launches, managed_allocs, device_allocs;
static __thread int cur_dev;
static struct CUctx_st {
    int dev;
} ctxs[NDEV] = {{0}, {1}};

EXPORT long fake_launches(void) { return atomic_load(&launches); }
EXPORT long fake_managed_allocs(void) { return atomic_load(&managed_allocs); }
EXPORT long fake_device_allocs(void) { return atomic_load(&device_allocs); }

static CUresult add(int kind, int dev, uint64_t bytes, int small, unsigned long long *key)
{
    pthread_mutex_lock(&mu);
    if (kind != K_MANAGED && bytes > DEV_BYTES - used[dev]) {
        pthread_mutex_unlock(&mu);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (nallocs == capallocs) {
        capallocs = capallocs ? capallocs * 2 : 64;
        allocs = realloc(allocs, capallocs * sizeof *allocs);
    }
    uint64_t *next = small ? &next_addr32 : &next_addr;
    *key = *next;
    *next += (bytes + 0xffff) / 0x10000 * 0x10000 + 0x10000;
    allocs[nallocs++] = (struct alloc){*key, bytes, dev, kind};
    if (kind != K_MANAGED)
        used[dev] += bytes;
    pthread_mutex_unlock(&mu);
    atomic_fetch_add(kind == K_MANAGED ? &managed_allocs : &device_allocs, 1);
    return CUDA_SUCCESS;
}

static CUresult del(uint64_t key)
{
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < nallocs; i++) {
        if (allocs[i].key != key)
            continue;
        if (allocs[i].kind != K_MANAGED)
            used[allocs[i].dev] -= allocs[i].bytes;
        allocs[i] = allocs[--nallocs];
        pthread_mutex_unlock(&mu);
        return CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&mu);
    return CUDA_ERROR_INVALID_VALUE;
}

/* ---- devices and contexts ---- */
EXPORT CUresult cuInit(unsigned int flags) { return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
EXPORT CUresult cuDriverGetVersion(int *v) { *v = 12080; return CUDA_SUCCESS; }
EXPORT CUresult cuDeviceGetCount(int *n) { *n = NDEV; return CUDA_SUCCESS; }
EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
    if (ordinal < 0 || ordinal >= NDEV)
        return CUDA_ERROR_INVALID_DEVICE;
    *d = ordinal;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice d)
{
    if (len < 16 || d < 0 || d >= NDEV)
        return CUDA_ERROR_INVALID_VALUE;
    strcpy(name, "Fake GPU 80GB");
    return CUDA_SUCCESS;
}
EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d)
{
    if (d < 0 || d >= NDEV)
        return CUDA_ERROR_INVALID_DEVICE;
    *ctx = &ctxs[d];
    return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    cur_dev = ctx ? ctx->dev : 0;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxGetDevice(CUdevice *d) { *d = cur_dev; return CUDA_SUCCESS; }

/* ---- memory ---- */
EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
    if (n == 0)
        return CUDA_ERROR_INVALID_VALUE;
    return add(K_DEV, cur_dev, n, 0, p);
}
EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *p, unsigned int n)
{
    unsigned long long k;
    CUresult rc = n == 0 ? CUDA_ERROR_INVALID_VALUE : add(K_DEV, cur_dev, n, 1, &k);
    if (rc == CUDA_SUCCESS)
        *p = (CUdeviceptr_v1)k;
    return rc;
}
EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned int elem)
{
    if (w == 0 || h == 0 || (elem != 4 && elem != 8 && elem != 16))
        return CUDA_ERROR_INVALID_VALUE;
    *pitch = (w + 255) / 256 * 256;
    return add(K_DEV, cur_dev, *pitch * h, 0, p);
}
EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *p, unsigned int *pitch, unsigned int w, unsigned int h,
                                unsigned int elem)
{
    unsigned long long k;
    if (w == 0 || h == 0 || (elem != 4 && elem != 8 && elem != 16))
        return CUDA_ERROR_INVALID_VALUE;
    *pitch = (w + 255) / 256 * 256;
    CUresult rc = add(K_DEV, cur_dev, (uint64_t)*pitch * h, 1, &k);
    if (rc == CUDA_SUCCESS)
        *p = (CUdeviceptr_v1)k;
    return rc;
}
EXPORT CUresult cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned int flags)
{
    if (n == 0 || (flags != 1 && flags != 2))
        return CUDA_ERROR_INVALID_VALUE;
    return add(K_MANAGED, cur_dev, n, 0, p);
}
EXPORT CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s)
{
    (void)s;
    return add(K_DEV, cur_dev, n, 0, p);
}
EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t n, CUstream s) { return cuMemAllocAsync(p, n, s); }
EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s)
{
    (void)pool;
    return cuMemAllocAsync(p, n, s);
}
EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s)
{
    return cuMemAllocFromPoolAsync(p, n, pool, s);
}
EXPORT CUresult cuMemFree_v2(CUdeviceptr p) { return del(p); }
EXPORT CUresult cuMemFree(CUdeviceptr_v1 p) { return del(p); }
EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) { (void)s; return del(p); }
EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s) { return cuMemFreeAsync(p, s); }
EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t n, const CUmemAllocationProp *prop,
                            unsigned long long flags)
{
    if (prop == NULL || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return add(K_MANAGED, 0, n, 0, h);
    if (prop->location.id < 0 || prop->location.id >= NDEV)
        return CUDA_ERROR_INVALID_DEVICE;
    return add(K_VMM, prop->location.id, n, 0, h);
}
EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle h) { return del(h); }

static uint64_t elem_bytes(CUarray_format f, unsigned int ch)
{
    uint64_t b = f == CU_AD_FORMAT_FLOAT || f == CU_AD_FORMAT_UNSIGNED_INT32 || f == CU_AD_FORMAT_SIGNED_INT32 ? 4
                 : f == CU_AD_FORMAT_HALF || f == CU_AD_FORMAT_UNSIGNED_INT16 || f == CU_AD_FORMAT_SIGNED_INT16 ? 2
                                                                                                                  : 1;
    return b * ch;
}
static uint64_t dim(size_t x) { return x ? x : 1; }

EXPORT CUresult cuArrayCreate_v2(CUarray *a, const CUDA_ARRAY_DESCRIPTOR *d)
{
    unsigned long long k;
    CUresult rc = add(K_ARRAY, cur_dev, dim(d->Width) * dim(d->Height) * elem_bytes(d->Format, d->NumChannels), 0, &k);
    if (rc == CUDA_SUCCESS)
        *a = (CUarray)(uintptr_t)k;
    return rc;
}
EXPORT CUresult cuArray3DCreate_v2(CUarray *a, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    unsigned long long k;
    CUresult rc = add(K_ARRAY, cur_dev,
                      dim(d->Width) * dim(d->Height) * dim(d->Depth) * elem_bytes(d->Format, d->NumChannels), 0, &k);
    if (rc == CUDA_SUCCESS)
        *a = (CUarray)(uintptr_t)k;
    return rc;
}
EXPORT CUresult cuArrayDestroy(CUarray a) { return del((uint64_t)(uintptr_t)a); }
EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *a, const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned int levels)
{
    unsigned long long k, n = 0;
    size_t w = d->Width, h = d->Height, z = d->Depth;
    for (unsigned int l = 0; l < levels; l++) {
        n += dim(w) * dim(h) * dim(z) * elem_bytes(d->Format, d->NumChannels);
        w = w > 1 ? w / 2 : w;
        h = h > 1 ? h / 2 : h;
        z = z > 1 ? z / 2 : z;
    }
    CUresult rc = add(K_MIPMAP, cur_dev, n, 0, &k);
    if (rc == CUDA_SUCCESS)
        *a = (CUmipmappedArray)(uintptr_t)k;
    return rc;
}
EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray a) { return del((uint64_t)(uintptr_t)a); }

EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
    pthread_mutex_lock(&mu);
    *free = DEV_BYTES - used[cur_dev];
    pthread_mutex_unlock(&mu);
    *total = DEV_BYTES;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuMemGetInfo(unsigned int *free, unsigned int *total)
{
    size_t f, t;
    cuMemGetInfo_v2(&f, &t);
    *free = f > UINT_MAX ? UINT_MAX : (unsigned int)f;
    *total = t > UINT_MAX ? UINT_MAX : (unsigned int)t;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceTotalMem_v2(size_t *b, CUdevice d)
{
    if (d < 0 || d >= NDEV)
        return CUDA_ERROR_INVALID_DEVICE;
    *b = DEV_BYTES;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceTotalMem(unsigned int *b, CUdevice d)
{
    size_t t;
    CUresult rc = cuDeviceTotalMem_v2(&t, d);
    if (rc == CUDA_SUCCESS)
        *b = UINT_MAX;
    return rc;
}

/* ---- launches ---- */
#define LAUNCH_PARAMS                                                                                      \
    CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, \
        unsigned int bz, unsigned int shm, CUstream s, void **params
static CUresult launched(void)
{
    atomic_fetch_add_explicit(&launches, 1, memory_order_relaxed);
    return CUDA_SUCCESS;
}
EXPORT CUresult cuLaunchKernel(LAUNCH_PARAMS, void **extra)
{
    (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shm, (void)s, (void)params, (void)extra;
    return launched();
}
EXPORT CUresult cuLaunchKernel_ptsz(LAUNCH_PARAMS, void **extra)
{
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shm, s, params, extra);
}
EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
    (void)c, (void)f, (void)params, (void)extra;
    return launched();
}
EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
    return cuLaunchKernelEx(c, f, params, extra);
}
EXPORT CUresult cuLaunchCooperativeKernel(LAUNCH_PARAMS)
{
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shm, s, params, NULL);
}
EXPORT CUresult cuLaunchCooperativeKernel_ptsz(LAUNCH_PARAMS)
{
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shm, s, params, NULL);
}
EXPORT CUresult cuGraphLaunch(CUgraphExec g, CUstream s)
{
    (void)g, (void)s;
    return launched();
}
EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec g, CUstream s) { return cuGraphLaunch(g, s); }

/* ---- entry-point table ---- */
EXPORT CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, cuuint64_t flags);
EXPORT CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *st);

typedef void (*fn)(void);
#define E(name) {#name, (fn)name}
static const struct {
    const char *name;
    fn f;
} table[] = {
    E(cuInit), E(cuDriverGetVersion), E(cuDeviceGetCount), E(cuDeviceGet), E(cuDeviceGetName),
    E(cuDevicePrimaryCtxRetain), E(cuCtxSetCurrent), E(cuCtxGetDevice),
    E(cuMemAlloc), E(cuMemAlloc_v2), E(cuMemAllocPitch), E(cuMemAllocPitch_v2), E(cuMemAllocManaged),
    E(cuMemAllocAsync), E(cuMemAllocAsync_ptsz), E(cuMemAllocFromPoolAsync), E(cuMemAllocFromPoolAsync_ptsz),
    E(cuMemFree), E(cuMemFree_v2), E(cuMemFreeAsync), E(cuMemFreeAsync_ptsz), E(cuMemCreate), E(cuMemRelease),
    E(cuArrayCreate_v2), E(cuArray3DCreate_v2), E(cuArrayDestroy), E(cuMipmappedArrayCreate),
    E(cuMipmappedArrayDestroy), E(cuMemGetInfo), E(cuMemGetInfo_v2), E(cuDeviceTotalMem), E(cuDeviceTotalMem_v2),
    E(cuLaunchKernel), E(cuLaunchKernel_ptsz), E(cuLaunchKernelEx), E(cuLaunchKernelEx_ptsz),
    E(cuLaunchCooperativeKernel), E(cuLaunchCooperativeKernel_ptsz), E(cuGraphLaunch), E(cuGraphLaunch_ptsz),
    E(cuGetProcAddress), E(cuGetProcAddress_v2),
};

/* Trampolines: same behaviour, addresses no dlsym returns. */
static CUresult tramp_alloc(CUdeviceptr *p, size_t n) { return cuMemAlloc_v2(p, n); }
static CUresult tramp_launch(LAUNCH_PARAMS, void **extra)
{
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shm, s, params, extra);
}
static CUresult tramp_launch_ptsz(LAUNCH_PARAMS, void **extra)
{
    return cuLaunchKernel_ptsz(f, gx, gy, gz, bx, by, bz, shm, s, params, extra);
}

static fn lookup(const char *name)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, name) == 0)
            return table[i].f;
    return NULL;
}

/* Test hook: the fake's own address for an exported name. */
EXPORT void *fake_real_symbol(const char *name)
{
    fn f = lookup(name);
    void *p;
    memcpy(&p, &f, sizeof p);
    return p;
}

static CUresult getproc(const char *sym, void **pfn, int ver, cuuint64_t flags)
{
    char name[128];
    fn f = NULL;
    const char *tr = getenv("FAKE_PROCADDR_TRAMPOLINE");
    int ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;

    if (sym == NULL || pfn == NULL || strlen(sym) > 100)
        return CUDA_ERROR_INVALID_VALUE;
    if (tr != NULL && strcmp(tr, "1") == 0) {
        if (strcmp(sym, "cuMemAlloc") == 0 && ver >= 3020)
            f = (fn)tramp_alloc;
        else if (strcmp(sym, "cuLaunchKernel") == 0)
            f = ptsz ? (fn)tramp_launch_ptsz : (fn)tramp_launch;
    }
    if (f == NULL && ptsz) {
        strcat(strcpy(name, sym), "_ptsz");
        f = lookup(name);
    }
    if (f == NULL && ver >= (strcmp(sym, "cuGetProcAddress") == 0 ? 12000 : 3020)) {
        strcat(strcpy(name, sym), "_v2");
        f = lookup(name);
    }
    if (f == NULL)
        f = lookup(sym);
    memcpy(pfn, &f, sizeof f);
    return f == NULL ? CUDA_ERROR_NOT_FOUND : CUDA_SUCCESS;
}

EXPORT CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, cuuint64_t flags)
{
    return getproc(sym, pfn, ver, flags);
}
EXPORT CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *st)
{
    CUresult rc = getproc(sym, pfn, ver, flags);
    if (st != NULL)
        *st = rc == CUDA_SUCCESS ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return rc;
}
