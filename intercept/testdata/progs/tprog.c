/* tprog: runs a list of steps against the CUDA driver API (the fake one in
 * tests) and prints one line per result, for intercept_test.go to compare.
 *
 * TP_RESOLVE picks how driver entry points are found, as real programs do:
 *   link   direct calls bound by the dynamic linker (default)
 *   dlsym  dlopen("libcuda.so.1") + dlsym, as runtimes that dlopen do
 *   proc   cuGetProcAddress (found by dlsym), as CUDA 11.3+ runtimes do
 *   proc2  cuGetProcAddress_v2, as CUDA 12+ runtimes do
 *
 * Steps (sizes take Ki/Mi/Gi suffixes):
 *   alloc:PATH:SIZE  PATH: mem mem1 pitch pitch1 managed async async_ptsz
 *                    pool pool_ptsz vmm array array3d mipmap
 *   free:N           free what step N (0-based) allocated
 *   info info1 total:DEV total1:DEV nvml:DEV dev:DEV
 *   launch:KIND:N    KIND: kernel kernel_ptsz ex ex_ptsz coop coop_ptsz
 *                    graph graph_ptsz
 *   stats procaddr hold forkkill:SIZE
 *   race:THREADS:SIZE  threads allocate SIZE until refused; prints the total
 *   lockdie:FILE     take the accounting file's mutex and die holding it
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hooks.h"

CUresult cuInit(unsigned int flags);
CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuDeviceGetName(char *name, int len, CUdevice dev);
CUresult cuCtxGetDevice(CUdevice *dev);
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *dev);
long fake_launches(void);
long fake_managed_allocs(void);
long fake_device_allocs(void);
void *fake_real_symbol(const char *name);

typedef void (*fn)(void);

/* X(name, base, cuda version to ask for, per-thread-stream flavour) */
#define FNS(X)                                                   \
    X(cuMemAlloc, cuMemAlloc, 3000, 0)                           \
    X(cuMemAlloc_v2, cuMemAlloc, 12080, 0)                       \
    X(cuMemAllocPitch, cuMemAllocPitch, 3000, 0)                 \
    X(cuMemAllocPitch_v2, cuMemAllocPitch, 12080, 0)             \
    X(cuMemAllocManaged, cuMemAllocManaged, 12080, 0)            \
    X(cuMemAllocAsync, cuMemAllocAsync, 12080, 0)                \
    X(cuMemAllocAsync_ptsz, cuMemAllocAsync, 12080, 1)           \
    X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 12080, 0) \
    X(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync, 12080, 1) \
    X(cuMemFree, cuMemFree, 3000, 0)                             \
    X(cuMemFree_v2, cuMemFree, 12080, 0)                         \
    X(cuMemFreeAsync, cuMemFreeAsync, 12080, 0)                  \
    X(cuMemFreeAsync_ptsz, cuMemFreeAsync, 12080, 1)             \
    X(cuMemCreate, cuMemCreate, 12080, 0)                        \
    X(cuMemRelease, cuMemRelease, 12080, 0)                      \
    X(cuArrayCreate_v2, cuArrayCreate, 12080, 0)                 \
    X(cuArray3DCreate_v2, cuArray3DCreate, 12080, 0)             \
    X(cuArrayDestroy, cuArrayDestroy, 12080, 0)                  \
    X(cuMipmappedArrayCreate, cuMipmappedArrayCreate, 12080, 0)  \
    X(cuMipmappedArrayDestroy, cuMipmappedArrayDestroy, 12080, 0) \
    X(cuMemGetInfo, cuMemGetInfo, 3000, 0)                       \
    X(cuMemGetInfo_v2, cuMemGetInfo, 12080, 0)                   \
    X(cuDeviceTotalMem, cuDeviceTotalMem, 3000, 0)               \
    X(cuDeviceTotalMem_v2, cuDeviceTotalMem, 12080, 0)           \
    X(cuLaunchKernel, cuLaunchKernel, 12080, 0)                  \
    X(cuLaunchKernel_ptsz, cuLaunchKernel, 12080, 1)             \
    X(cuLaunchKernelEx, cuLaunchKernelEx, 12080, 0)              \
    X(cuLaunchKernelEx_ptsz, cuLaunchKernelEx, 12080, 1)         \
    X(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel, 12080, 0) \
    X(cuLaunchCooperativeKernel_ptsz, cuLaunchCooperativeKernel, 12080, 1) \
    X(cuGraphLaunch, cuGraphLaunch, 12080, 0)                    \
    X(cuGraphLaunch_ptsz, cuGraphLaunch, 12080, 1)               \
    X(cuGetProcAddress, cuGetProcAddress, 11030, 0)              \
    X(cuGetProcAddress_v2, cuGetProcAddress, 12080, 0)

enum {
#define X(name, base, ver, ptsz) F_##name,
    FNS(X)
#undef X
        NF
};
static const struct {
    const char *name, *base;
    int ver, ptsz;
    fn linked;
} fns[NF] = {
#define X(name, base, ver, ptsz) {#name, #base, ver, ptsz, (fn)name},
    FNS(X)
#undef X
};
static fn fp[NF];
static nvmlDeviceGetMemoryInfo_fn nvml_info;
static nvmlDeviceGetMemoryInfo_v2_fn nvml_info2;

#define C(name) ((name##_fn)fp[F_##name])

static void die(const char *msg, const char *arg)
{
    fprintf(stderr, "tprog: %s: %s\n", msg, arg);
    exit(64);
}

static fn from_ptr(void *p)
{
    fn f;
    memcpy(&f, &p, sizeof f);
    return f;
}

static void resolve(void)
{
    const char *mode = getenv("TP_RESOLVE");
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    void *hn = dlopen("libnvidia-ml.so.1", RTLD_NOW);

    if (h == NULL || hn == NULL)
        die("dlopen", dlerror());
    if (mode == NULL)
        mode = "link";
    nvml_info = nvmlDeviceGetMemoryInfo;
    nvml_info2 = nvmlDeviceGetMemoryInfo_v2;
    if (strcmp(mode, "link") == 0) {
        for (int i = 0; i < NF; i++)
            fp[i] = fns[i].linked;
        return;
    }
    for (int i = 0; i < NF; i++)
        fp[i] = from_ptr(dlsym(h, fns[i].name));
    nvml_info = (nvmlDeviceGetMemoryInfo_fn)from_ptr(dlsym(hn, "nvmlDeviceGetMemoryInfo"));
    nvml_info2 = (nvmlDeviceGetMemoryInfo_v2_fn)from_ptr(dlsym(hn, "nvmlDeviceGetMemoryInfo_v2"));
    if (strcmp(mode, "dlsym") == 0)
        return;
    int v2 = strcmp(mode, "proc2") == 0;
    if (!v2 && strcmp(mode, "proc") != 0)
        die("bad TP_RESOLVE", mode);
    cuGetProcAddress_fn gp = C(cuGetProcAddress);
    cuGetProcAddress_v2_fn gp2 = C(cuGetProcAddress_v2);
    for (int i = 0; i < NF; i++) {
        void *p = NULL;
        cuuint64_t flags = fns[i].ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0;
        CUdriverProcAddressQueryResult st;
        CUresult rc = v2 ? gp2(fns[i].base, &p, fns[i].ver, flags, &st) : gp(fns[i].base, &p, fns[i].ver, flags);
        if (rc != CUDA_SUCCESS)
            die("cuGetProcAddress failed", fns[i].base);
        fp[i] = from_ptr(p);
    }
}

static unsigned long long parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (strcmp(end, "Ki") == 0)
        v <<= 10;
    else if (strcmp(end, "Mi") == 0)
        v <<= 20;
    else if (strcmp(end, "Gi") == 0)
        v <<= 30;
    else if (*end != 0)
        die("bad size", s);
    return v;
}

struct handle {
    char path[16];
    unsigned long long key;
    int live;
};

static CUresult do_alloc(const char *path, unsigned long long n, struct handle *h, size_t *pitch_out)
{
    CUresult rc;
    snprintf(h->path, sizeof h->path, "%s", path);
    if (strcmp(path, "mem") == 0) {
        CUdeviceptr d;
        rc = C(cuMemAlloc_v2)(&d, n);
        h->key = d;
    } else if (strcmp(path, "mem1") == 0) {
        CUdeviceptr_v1 d;
        rc = C(cuMemAlloc)(&d, (unsigned int)n);
        h->key = d;
    } else if (strcmp(path, "pitch") == 0) { /* rows of 1100 bytes */
        CUdeviceptr d;
        rc = C(cuMemAllocPitch_v2)(&d, pitch_out, 1100, n / 1100, 4);
        h->key = d;
    } else if (strcmp(path, "pitch1") == 0) {
        CUdeviceptr_v1 d;
        unsigned int p = 0;
        rc = C(cuMemAllocPitch)(&d, &p, 1100, (unsigned int)(n / 1100), 4);
        *pitch_out = p;
        h->key = d;
    } else if (strcmp(path, "managed") == 0) {
        CUdeviceptr d;
        rc = C(cuMemAllocManaged)(&d, n, CU_MEM_ATTACH_GLOBAL);
        h->key = d;
    } else if (strcmp(path, "async") == 0 || strcmp(path, "async_ptsz") == 0) {
        CUdeviceptr d;
        rc = path[5] ? C(cuMemAllocAsync_ptsz)(&d, n, NULL) : C(cuMemAllocAsync)(&d, n, NULL);
        h->key = d;
    } else if (strcmp(path, "pool") == 0 || strcmp(path, "pool_ptsz") == 0) {
        CUdeviceptr d;
        rc = path[4] ? C(cuMemAllocFromPoolAsync_ptsz)(&d, n, NULL, NULL)
                     : C(cuMemAllocFromPoolAsync)(&d, n, NULL, NULL);
        h->key = d;
    } else if (strcmp(path, "vmm") == 0) {
        CUmemGenericAllocationHandle g;
        CUmemAllocationProp prop;
        memset(&prop, 0, sizeof prop);
        prop.type = 1; /* CU_MEM_ALLOCATION_TYPE_PINNED */
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        CUdevice dev = 0;
        cuCtxGetDevice(&dev);
        prop.location.id = dev;
        rc = C(cuMemCreate)(&g, n, &prop, 0);
        h->key = g;
    } else if (strcmp(path, "array") == 0) { /* float, 1 channel, n/4 wide */
        CUarray a;
        CUDA_ARRAY_DESCRIPTOR d = {n / 4, 0, CU_AD_FORMAT_FLOAT, 1};
        rc = C(cuArrayCreate_v2)(&a, &d);
        h->key = (unsigned long long)(uintptr_t)a;
    } else if (strcmp(path, "array3d") == 0) { /* float4, 2 x 2 deep, n/64 wide */
        CUarray a;
        CUDA_ARRAY3D_DESCRIPTOR d = {n / 64, 2, 2, CU_AD_FORMAT_FLOAT, 4, 0};
        rc = C(cuArray3DCreate_v2)(&a, &d);
        h->key = (unsigned long long)(uintptr_t)a;
    } else if (strcmp(path, "mipmap") == 0) { /* 1D float, 2 levels: 1.5 x n */
        CUmipmappedArray a;
        CUDA_ARRAY3D_DESCRIPTOR d = {n / 4, 0, 0, CU_AD_FORMAT_FLOAT, 1, 0};
        rc = C(cuMipmappedArrayCreate)(&a, &d, 2);
        h->key = (unsigned long long)(uintptr_t)a;
    } else {
        die("bad alloc path", path);
        return CUDA_ERROR_UNKNOWN;
    }
    h->live = rc == CUDA_SUCCESS;
    return rc;
}

static CUresult do_free(struct handle *h)
{
    const char *p = h->path;
    h->live = 0;
    if (strcmp(p, "mem1") == 0 || strcmp(p, "pitch1") == 0)
        return C(cuMemFree)((CUdeviceptr_v1)h->key);
    if (strcmp(p, "async") == 0 || strcmp(p, "pool") == 0)
        return C(cuMemFreeAsync)(h->key, NULL);
    if (strcmp(p, "async_ptsz") == 0 || strcmp(p, "pool_ptsz") == 0)
        return C(cuMemFreeAsync_ptsz)(h->key, NULL);
    if (strcmp(p, "vmm") == 0)
        return C(cuMemRelease)(h->key);
    if (strcmp(p, "array") == 0 || strcmp(p, "array3d") == 0)
        return C(cuArrayDestroy)((CUarray)(uintptr_t)h->key);
    if (strcmp(p, "mipmap") == 0)
        return C(cuMipmappedArrayDestroy)((CUmipmappedArray)(uintptr_t)h->key);
    return C(cuMemFree_v2)(h->key);
}

static CUresult do_launch(const char *kind)
{
    if (strcmp(kind, "kernel") == 0)
        return C(cuLaunchKernel)(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
    if (strcmp(kind, "kernel_ptsz") == 0)
        return C(cuLaunchKernel_ptsz)(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
    if (strcmp(kind, "ex") == 0)
        return C(cuLaunchKernelEx)(NULL, NULL, NULL, NULL);
    if (strcmp(kind, "ex_ptsz") == 0)
        return C(cuLaunchKernelEx_ptsz)(NULL, NULL, NULL, NULL);
    if (strcmp(kind, "coop") == 0)
        return C(cuLaunchCooperativeKernel)(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL);
    if (strcmp(kind, "coop_ptsz") == 0)
        return C(cuLaunchCooperativeKernel_ptsz)(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL);
    if (strcmp(kind, "graph") == 0)
        return C(cuGraphLaunch)(NULL, NULL);
    if (strcmp(kind, "graph_ptsz") == 0)
        return C(cuGraphLaunch_ptsz)(NULL, NULL);
    die("bad launch kind", kind);
    return CUDA_ERROR_UNKNOWN;
}

static void procaddr(void)
{
    for (int i = 0; i < NF; i++) {
        void *got, *linked, *fake;
        memcpy(&got, &fp[i], sizeof got);
        memcpy(&linked, &fns[i].linked, sizeof linked);
        fake = fake_real_symbol(fns[i].name);
        printf("procaddr %s wrapper=%d fake=%d\n", fns[i].name, got == linked, got == fake);
    }
    /* An unhooked symbol must come back as the driver's own. */
    void *p = NULL;
    C(cuGetProcAddress_v2)("cuDeviceGetName", &p, 12080, 0, NULL);
    printf("procaddr cuDeviceGetName fake=%d\n", p == fake_real_symbol("cuDeviceGetName"));
}

static void forkkill(unsigned long long n)
{
    int pfd[2];
    struct handle h;
    unsigned char crc = 255;
    if (pipe(pfd) != 0)
        die("pipe", "");
    fflush(stdout);
    pid_t c = fork();
    if (c == 0) {
        crc = (unsigned char)do_alloc("mem", n, &h, NULL);
        if (write(pfd[1], &crc, 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    if (read(pfd[0], &crc, 1) != 1)
        die("read", "");
    kill(c, SIGKILL);
    siginfo_t si;
    waitid(P_PID, (id_t)c, &si, WEXITED | WNOWAIT); /* dead, left a zombie */
    CUresult prc = do_alloc("mem", n, &h, NULL);
    printf("forkkill child=%d parent=%d\n", crc, prc);
    waitpid(c, NULL, 0);
}

static unsigned long long race_size;
static _Atomic long race_count;

static void *race_thread(void *arg)
{
    (void)arg;
    for (;;) {
        CUdeviceptr d;
        CUresult rc = C(cuMemAlloc_v2)(&d, race_size);
        if (rc != CUDA_SUCCESS) {
            if (rc != CUDA_ERROR_OUT_OF_MEMORY)
                printf("race rc=%d\n", rc);
            return NULL;
        }
        atomic_fetch_add(&race_count, 1);
    }
}

static void race(int threads, unsigned long long n)
{
    pthread_t th[64];
    if (threads < 1 || threads > 64)
        die("bad thread count", "");
    race_size = n;
    for (int i = 0; i < threads; i++)
        pthread_create(&th[i], NULL, race_thread, NULL);
    for (int i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    printf("raced %ld\n", atomic_load(&race_count));
}

/* The accounting mutex lives at offset 192 (docs/enforcement.md). */
static void lockdie(const char *path)
{
    int fd = open(path, O_RDWR);
    if (fd < 0)
        die("open", path);
    char *base = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED)
        die("mmap", path);
    int rc = pthread_mutex_lock((pthread_mutex_t *)(void *)(base + 192));
    printf("locked rc=%d\n", rc);
    fflush(stdout);
    raise(SIGKILL);
}

int main(int argc, char **argv)
{
    struct handle *hs = calloc((size_t)argc, sizeof *hs);
    CUcontext ctx;

    setvbuf(stdout, NULL, _IOLBF, 0);
    resolve();
    cuInit(0);
    nvmlInit_v2();
    for (int i = 1; i < argc; i++) {
        char step[256], *a, *b;
        snprintf(step, sizeof step, "%s", argv[i]);
        a = strchr(step, ':');
        if (a)
            *a++ = 0;
        b = a ? strchr(a, ':') : NULL;
        if (b)
            *b++ = 0;
        if (strcmp(step, "alloc") == 0 && a && b) {
            size_t pitch = 0;
            unsigned long long n = parse_size(b);
            CUresult rc = do_alloc(a, n, &hs[i - 1], &pitch);
            if (pitch)
                printf("alloc %s %llu rc=%d pitch=%zu\n", a, n, rc, pitch);
            else
                printf("alloc %s %llu rc=%d\n", a, n, rc);
        } else if (strcmp(step, "free") == 0 && a) {
            int k = atoi(a);
            if (k < 0 || k >= argc - 1 || !hs[k].live)
                die("nothing to free at step", a);
            printf("free %d rc=%d\n", k, do_free(&hs[k]));
        } else if (strcmp(step, "info") == 0) {
            size_t f = 0, t = 0;
            CUresult rc = C(cuMemGetInfo_v2)(&f, &t);
            printf("info rc=%d free=%zu total=%zu\n", rc, f, t);
        } else if (strcmp(step, "info1") == 0) {
            unsigned int f = 0, t = 0;
            CUresult rc = C(cuMemGetInfo)(&f, &t);
            printf("info1 rc=%d free=%u total=%u\n", rc, f, t);
        } else if (strcmp(step, "total") == 0 && a) {
            size_t t = 0;
            CUresult rc = C(cuDeviceTotalMem_v2)(&t, atoi(a));
            printf("total dev=%s rc=%d bytes=%zu\n", a, rc, t);
        } else if (strcmp(step, "total1") == 0 && a) {
            unsigned int t = 0;
            CUresult rc = C(cuDeviceTotalMem)(&t, atoi(a));
            printf("total1 dev=%s rc=%d bytes=%u\n", a, rc, t);
        } else if (strcmp(step, "nvml") == 0 && a) {
            nvmlDevice_t d;
            nvmlMemory_t m;
            nvmlMemory_v2_t m2;
            memset(&m2, 0, sizeof m2);
            m2.version = (unsigned int)(sizeof m2 | 2u << 24);
            nvmlDeviceGetHandleByIndex_v2((unsigned int)atoi(a), &d);
            int rc = nvml_info(d, &m);
            printf("nvml dev=%s rc=%d total=%llu free=%llu used=%llu\n", a, rc, m.total, m.free, m.used);
            rc = nvml_info2(d, &m2);
            printf("nvml2 dev=%s rc=%d total=%llu free=%llu used=%llu\n", a, rc, m2.total, m2.free, m2.used);
        } else if (strcmp(step, "dev") == 0 && a) {
            cuDevicePrimaryCtxRetain(&ctx, atoi(a));
            cuCtxSetCurrent(ctx);
        } else if (strcmp(step, "launch") == 0 && a && b) {
            int n = atoi(b);
            for (int k = 1; k <= n; k++)
                printf("launch %s %d rc=%d\n", a, k, do_launch(a));
        } else if (strcmp(step, "stats") == 0) {
            printf("stats launches=%ld managed=%ld device=%ld\n", fake_launches(), fake_managed_allocs(),
                   fake_device_allocs());
        } else if (strcmp(step, "procaddr") == 0) {
            procaddr();
        } else if (strcmp(step, "hold") == 0) {
            char buf[64];
            printf("holding\n");
            while (read(0, buf, sizeof buf) > 0)
                ;
        } else if (strcmp(step, "lockdie") == 0 && a) {
            lockdie(a);
        } else if (strcmp(step, "race") == 0 && a && b) {
            race(atoi(a), parse_size(b));
        } else if (strcmp(step, "forkkill") == 0 && a) {
            forkkill(parse_size(a));
        } else {
            die("bad step", argv[i]);
        }
    }
    return 0;
}
