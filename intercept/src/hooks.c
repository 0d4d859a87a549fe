/* hooks.c: the hook table generated from hooks.def, real-symbol resolution,
 * and the two ways applications find driver entry points besides plain
 * symbol binding: dlsym (overridden here) and cuGetProcAddress(_v2). */
#include "hooks.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "config.h"
#include "log.h"

typedef tessera_generic_fn generic_fn;

struct hook {
    const char *name;   /* exported symbol, e.g. "cuMemAlloc_v2" */
    const char *base;   /* cuGetProcAddress name, e.g. "cuMemAlloc" */
    const char *suffix; /* "", "_v2", "_ptsz" */
    int since;
    enum tessera_lib lib;
    generic_fn wrapper; /* NULL for REAL lines */
};

static const struct hook g_hooks[TH_COUNT] = {
#define HOOK(lib, base, sfx, since, ret, params, args) \
    [TH_##base##sfx] = {#base #sfx, #base, #sfx, since, TLIB_##lib, (generic_fn)base##sfx},
#define REAL(lib, name, ret, params, args) [TH_##name] = {#name, #name, "", 0, TLIB_##lib, NULL},
#include "hooks.def"
};

_Static_assert(sizeof(void *) == sizeof(generic_fn), "POSIX: data and code pointers agree");

static void *fn_to_ptr(generic_fn f)
{
    void *p;
    memcpy(&p, &f, sizeof p);
    return p;
}

static generic_fn ptr_to_fn(void *p)
{
    generic_fn f;
    memcpy(&f, &p, sizeof f);
    return f;
}

/* ---- the real dlsym ----
 * This library exports dlsym, so it must find libc's by version with
 * dlvsym, which it does not override. */
typedef void *(*dlsym_fn)(void *, const char *);
static dlsym_fn g_real_dlsym;
static pthread_once_t g_dlsym_once = PTHREAD_ONCE_INIT;

static void find_real_dlsym(void)
{
    static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0"};
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
        void *p = dlvsym(RTLD_NEXT, "dlsym", versions[i]);
        if (p != NULL) {
            memcpy(&g_real_dlsym, &p, sizeof p);
            return;
        }
    }
    tlog(TLOG_ERROR, "cannot find libc's dlsym; dynamic symbol lookups will fail");
}

static dlsym_fn real_dlsym(void)
{
    pthread_once(&g_dlsym_once, find_real_dlsym);
    return g_real_dlsym;
}

/* ---- resolution of the real driver symbols ---- */
static const char *const g_lib_sonames[TLIB_COUNT][2] = {
    {"libcuda.so.1", "libcuda.so"},
    {"libnvidia-ml.so.1", "libnvidia-ml.so"},
};
static pthread_once_t g_lib_once[TLIB_COUNT] = {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT};
/* Set (release) after a library's real pointers are written: the hot path
 * checks it with one acquire load instead of calling pthread_once. */
_Atomic int tessera_lib_ready[TLIB_COUNT];
tessera_generic_fn tessera_real[TH_COUNT];

static void resolve_lib(enum tessera_lib lib)
{
    dlsym_fn sym = real_dlsym();
    void *h = NULL;

    /* dlopen returns the application's handle when it already loaded the
     * library (linked or dlopened); otherwise it loads it. Looking up
     * through the library's own handle never finds our interposed copies. */
    for (int i = 0; i < 2 && h == NULL; i++)
        h = dlopen(g_lib_sonames[lib][i], RTLD_NOW | RTLD_LOCAL);
    if (h == NULL || sym == NULL) {
        tlog(TLOG_WARN, "cannot load %s: %s", g_lib_sonames[lib][0], h == NULL ? dlerror() : "no dlsym");
        return;
    }
    for (int i = 0; i < TH_COUNT; i++)
        if (g_hooks[i].lib == lib)
            tessera_real[i] = ptr_to_fn(sym(h, g_hooks[i].name));
}

static void resolve_cu(void)
{
    tessera_config_report(); /* first CUDA use: print any bad TESSERA_* once */
    resolve_lib(TLIB_CU);
    atomic_store_explicit(&tessera_lib_ready[TLIB_CU], 1, memory_order_release);
}

static void resolve_nvml(void)
{
    resolve_lib(TLIB_NVML);
    atomic_store_explicit(&tessera_lib_ready[TLIB_NVML], 1, memory_order_release);
}

void tessera_resolve_slow(enum tessera_lib lib)
{
    pthread_once(&g_lib_once[lib], lib == TLIB_CU ? resolve_cu : resolve_nvml);
}

/* ---- lookups ---- */
static const struct hook *hook_by_name(const char *name)
{
    if (!((name[0] == 'c' && name[1] == 'u') || strncmp(name, "nvml", 4) == 0))
        return NULL;
    for (int i = 0; i < TH_COUNT; i++)
        if (g_hooks[i].wrapper != NULL && strcmp(g_hooks[i].name, name) == 0)
            return &g_hooks[i];
    return NULL;
}

/* Exported: dlsym(handle, "cuMemAlloc_v2") on the driver's handle (how
 * runtimes that dlopen libcuda find it) returns our wrapper whenever the
 * real lookup succeeds, so the set of symbols a handle offers is unchanged.
 * Everything else is forwarded; the forward is the function's last call so
 * the compiler emits a tail jump and RTLD_NEXT keeps the caller's meaning. */
TESSERA_EXPORT void *dlsym(void *handle, const char *symbol)
{
    dlsym_fn sym = real_dlsym();
    const struct hook *h;

    if (sym == NULL)
        return NULL;
    h = hook_by_name(symbol);
    if (h != NULL && sym(handle, symbol) != NULL) {
        tlog(TLOG_DEBUG, "dlsym(%s): returning the tessera wrapper", symbol);
        return fn_to_ptr(h->wrapper);
    }
    return sym(handle, symbol);
}

/* The wrapper to hand out for what the real cuGetProcAddress returned:
 * first by identity with a real pointer we resolved by name, then by the
 * queried name and version (for drivers whose table holds other
 * addresses). Anything not hooked passes through unchanged. */
static void *substitute(const char *symbol, void *got, int cuda_version, cuuint64_t flags)
{
    const struct hook *best = NULL;
    int want_ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    int has_ptsz = 0;

    if (got == NULL || symbol == NULL)
        return got;
    tessera_resolve(TLIB_CU);
    for (int i = 0; i < TH_COUNT; i++) {
        const struct hook *h = &g_hooks[i];
        if (h->lib == TLIB_CU && h->wrapper != NULL && tessera_real[i] != NULL && fn_to_ptr(tessera_real[i]) == got)
            return fn_to_ptr(h->wrapper);
    }
    for (int i = 0; i < TH_COUNT; i++)
        if (g_hooks[i].wrapper != NULL && g_hooks[i].lib == TLIB_CU &&
            strcmp(g_hooks[i].base, symbol) == 0 && strcmp(g_hooks[i].suffix, "_ptsz") == 0)
            has_ptsz = 1;
    for (int i = 0; i < TH_COUNT; i++) {
        const struct hook *h = &g_hooks[i];
        int ptsz = strcmp(h->suffix, "_ptsz") == 0;
        if (h->wrapper == NULL || h->lib != TLIB_CU || strcmp(h->base, symbol) != 0 ||
            h->since > cuda_version || ptsz != (want_ptsz && has_ptsz))
            continue;
        if (best == NULL || h->since > best->since)
            best = h;
    }
    if (best == NULL)
        return got;
    tlog(TLOG_DEBUG, "cuGetProcAddress(%s, %d): matched %s by name", symbol, cuda_version, best->name);
    return fn_to_ptr(best->wrapper);
}

TESSERA_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    CUresult rc = real_cuGetProcAddress(symbol, pfn, cudaVersion, flags);
    if (rc == CUDA_SUCCESS && pfn != NULL)
        *pfn = substitute(symbol, *pfn, cudaVersion, flags);
    return rc;
}

TESSERA_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                            CUdriverProcAddressQueryResult *symbolStatus)
{
    CUresult rc = real_cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (rc == CUDA_SUCCESS && pfn != NULL)
        *pfn = substitute(symbol, *pfn, cudaVersion, flags);
    return rc;
}
