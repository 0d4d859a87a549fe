/* compute.c: the compute grant region (see docs/enforcement.md) and the
 * launch wrappers. A launch takes one token from its device's record; with
 * none left it waits with bounded exponential backoff (nanosleep, 16 us
 * doubling to 1 ms) until the arbiter adds tokens. A missing or stale
 * region (no heartbeat for stale_after_ms) follows TESSERA_COMPUTE_FAIL:
 * open runs the launch ungated, closed keeps waiting for the arbiter. */
#include "compute.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "hooks.h"
#include "log.h"
#include "memory.h"

#define MAX_REGION_BYTES (1u << 20)
#define ATTACH_INTERVAL_NS 50000000ull /* retry a missing or stale region every 50 ms */
#define BACKOFF_MIN_NS 16000L
#define BACKOFF_MAX_NS 1000000L

_Atomic(struct grant_map *) tessera_grant;
int tessera_gate_mode; /* written once, before tessera_gate_ready (release) */
_Atomic int tessera_gate_ready;
static pthread_once_t g_gate_once = PTHREAD_ONCE_INIT;
static _Atomic uint64_t g_last_attach_ns;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Map and validate the region file; NULL if absent or not (yet) valid.
 * Mappings are never unmapped: launching threads may still hold them. */
static struct grant_map *map_region(const char *path, const struct stat *seen)
{
    struct grant_map *m = NULL;
    struct tessera_grant_header *h;
    struct stat st;
    void *base;
    int fd = open(path, O_RDWR | O_CLOEXEC);

    if (fd < 0)
        return NULL;
    if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof *h || st.st_size > MAX_REGION_BYTES ||
        (seen != NULL && st.st_dev == seen->st_dev && st.st_ino == seen->st_ino)) {
        close(fd);
        return NULL;
    }
    base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
        TLOG_ONCE(TLOG_WARN, "cannot map arbiter region %s: %s", path, strerror(errno));
        return NULL;
    }
    h = base;
    if (atomic_load_explicit(&h->magic, memory_order_acquire) != TESSERA_GRANT_MAGIC)
        goto invalid; /* not published yet */
    if (h->version_major != TESSERA_GRANT_VERSION_MAJOR || h->header_size < sizeof *h || h->header_size % 8 != 0 ||
        h->record_size < sizeof(struct tessera_grant_record) || h->record_size % 8 != 0 || h->ndev < 1 ||
        h->ndev > TESSERA_MAX_DEV || (uint64_t)h->header_size + (uint64_t)h->ndev * h->record_size > (uint64_t)st.st_size) {
        TLOG_ONCE(TLOG_WARN, "arbiter region %s has an unsupported layout (version %u, %u records); treating it as missing",
                  path, (unsigned)h->version_major, (unsigned)h->ndev);
        goto invalid;
    }
    m = calloc(1, sizeof *m);
    if (m == NULL)
        goto invalid;
    m->hdr = h;
    m->rec0 = (struct tessera_grant_record *)(void *)((char *)base + h->header_size);
    m->base = base;
    m->len = (size_t)st.st_size;
    m->ndev = h->ndev;
    m->record_size = h->record_size;
    m->stale_ns = (uint64_t)(h->stale_after_ms ? h->stale_after_ms : TESSERA_GRANT_DEFAULT_STALE_MS) * 1000000ull;
    m->st_dev = st.st_dev;
    m->st_ino = st.st_ino;
    tlog(TLOG_INFO, "attached arbiter region %s (%u devices)", path, (unsigned)m->ndev);
    return m;
invalid:
    munmap(base, (size_t)st.st_size);
    return NULL;
}

static int stale(const struct grant_map *m, uint64_t now)
{
    uint64_t hb = atomic_load_explicit(&m->hdr->heartbeat_ns, memory_order_acquire);
    /* A beat written just after now was read is fresh; one further in
     * the future is garbage (another clock), hence stale. */
    return hb == 0 || (now >= hb ? now - hb : hb - now) > m->stale_ns;
}

/* (Re)attach at most every ATTACH_INTERVAL_NS across all threads: when no
 * region is mapped, or when the mapped one is stale and the path now names
 * a different file (the arbiter restarted and replaced it). */
static struct grant_map *maybe_attach(struct grant_map *cur, uint64_t now)
{
    const struct tessera_config *c = tessera_cfg();
    uint64_t last = atomic_load_explicit(&g_last_attach_ns, memory_order_relaxed);
    struct stat seen;
    struct grant_map *m;

    if (last != 0 && now - last < ATTACH_INTERVAL_NS)
        return cur;
    if (!atomic_compare_exchange_strong_explicit(&g_last_attach_ns, &last, now, memory_order_relaxed,
                                                 memory_order_relaxed))
        return cur;
    if (cur != NULL) {
        seen.st_dev = cur->st_dev;
        seen.st_ino = cur->st_ino;
    }
    m = map_region(c->region_path, cur != NULL ? &seen : NULL);
    if (m == NULL)
        return cur;
    atomic_store_explicit(&tessera_grant, m, memory_order_release);
    return m;
}

static void gate_init_once(void)
{
    const struct tessera_config *c = tessera_cfg();

    tessera_resolve(TLIB_CU); /* the fast path calls raw_* */

    if (c->bad) {
        tessera_gate_mode = GATE_ERROR;
    } else if (!c->region_set) {
        tessera_gate_mode = GATE_OFF;
    } else {
        tessera_gate_mode = GATE_ON;
        struct grant_map *m = map_region(c->region_path, NULL);
        if (m != NULL)
            atomic_store_explicit(&tessera_grant, m, memory_order_release);
        atomic_store_explicit(&g_last_attach_ns, now_ns(), memory_order_relaxed);
    }
    atomic_store_explicit(&tessera_gate_ready, 1, memory_order_release);
}



static int take(struct tessera_grant_record *r)
{
    if (atomic_fetch_sub_explicit(&r->tokens, 1, memory_order_relaxed) > 0)
        return 1;
    atomic_fetch_add_explicit(&r->tokens, 1, memory_order_relaxed);
    return 0;
}

static void fail_open_log(const char *why)
{
    TLOG_ONCE(TLOG_WARN, "arbiter region %s is %s: running kernel launches ungated (TESSERA_COMPUTE_FAIL=open)",
              tessera_cfg()->region_path, why);
}

static void fail_closed_log(const char *why)
{
    TLOG_ONCE(TLOG_WARN, "arbiter region %s is %s: kernel launches wait for the arbiter (TESSERA_COMPUTE_FAIL=closed)",
              tessera_cfg()->region_path, why);
}

/* The record a launch on the current device draws from. */
static struct tessera_grant_record *record_for(const struct grant_map *m, int *dev)
{
    if (m->ndev == 1)
        *dev = 0;
    else if (*dev < 0 && tessera_current_device(dev) != CUDA_SUCCESS)
        *dev = 0;
    if ((uint32_t)*dev >= m->ndev) {
        TLOG_ONCE(TLOG_WARN, "arbiter region has no record for device %d", *dev);
        return NULL;
    }
    return tessera_grant_rec(m, (uint32_t)*dev);
}

CUresult tessera_gate_slow(void)
{
    const struct tessera_config *c = tessera_cfg();
    struct tessera_grant_record *counted = NULL, *r;
    long backoff = BACKOFF_MIN_NS;
    int dev = -1;

    pthread_once(&g_gate_once, gate_init_once);
    if (tessera_gate_mode == GATE_OFF)
        return CUDA_SUCCESS;
    if (tessera_gate_mode == GATE_ERROR) {
        tessera_config_report();
        return CUDA_ERROR_NOT_PERMITTED;
    }
    for (;;) {
        uint64_t now = now_ns();
        struct grant_map *m = atomic_load_explicit(&tessera_grant, memory_order_acquire);
        if (m == NULL || stale(m, now))
            m = maybe_attach(m, now);
        if (m == NULL) {
            if (!c->compute_fail_closed) {
                fail_open_log("missing");
                break;
            }
            fail_closed_log("missing");
        } else if ((r = record_for(m, &dev)) == NULL) {
            if (!c->compute_fail_closed)
                break;
        } else {
            if (take(r))
                break;
            if (stale(m, now)) {
                if (!c->compute_fail_closed) {
                    fail_open_log("stale");
                    atomic_fetch_add_explicit(&r->ungated, 1, memory_order_relaxed);
                    break;
                }
                fail_closed_log("stale");
            }
            if (counted != r) { /* count this thread as waiting on r */
                if (counted != NULL)
                    atomic_fetch_sub_explicit(&counted->waiters, 1, memory_order_relaxed);
                else
                    atomic_fetch_add_explicit(&r->waits, 1, memory_order_relaxed);
                atomic_fetch_add_explicit(&r->waiters, 1, memory_order_relaxed);
                counted = r;
            }
        }
        struct timespec ts = {0, backoff};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        backoff = backoff * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : backoff * 2;
    }
    if (counted != NULL)
        atomic_fetch_sub_explicit(&counted->waiters, 1, memory_order_relaxed);
    return CUDA_SUCCESS;
}

/* ---- launch wrappers ---- */

/* The slow half is out of line so the fast half needs no stack frame. */
#define GATED(name, params, args)                           \
    __attribute__((noinline)) static CUresult name##_slow params \
    {                                                       \
        CUresult rc = tessera_gate_slow();                  \
        if (rc != CUDA_SUCCESS)                             \
            return rc;                                      \
        return real_##name args;                            \
    }                                                       \
    TESSERA_EXPORT CUresult name params                     \
    {                                                       \
        if (__builtin_expect(tessera_gate_fast(), 1))       \
            return raw_##name args;                         \
        return name##_slow args;                            \
    }

#define LAUNCH_PARAMS                                                                                       \
    (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, \
     unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,         \
     void **kernelParams, void **extra)
#define LAUNCH_ARGS \
    (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams, extra)
#define COOP_PARAMS                                                                                         \
    (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, \
     unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,         \
     void **kernelParams)
#define COOP_ARGS \
    (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams)

GATED(cuLaunchKernel, LAUNCH_PARAMS, LAUNCH_ARGS)
GATED(cuLaunchKernel_ptsz, LAUNCH_PARAMS, LAUNCH_ARGS)
GATED(cuLaunchKernelEx, (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra),
      (config, f, kernelParams, extra))
GATED(cuLaunchKernelEx_ptsz, (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra),
      (config, f, kernelParams, extra))
GATED(cuLaunchCooperativeKernel, COOP_PARAMS, COOP_ARGS)
GATED(cuLaunchCooperativeKernel_ptsz, COOP_PARAMS, COOP_ARGS)
GATED(cuGraphLaunch, (CUgraphExec hGraphExec, CUstream hStream), (hGraphExec, hStream))
GATED(cuGraphLaunch_ptsz, (CUgraphExec hGraphExec, CUstream hStream), (hGraphExec, hStream))
