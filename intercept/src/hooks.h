/* hooks.h: everything generated from hooks.def for the rest of the library.
 * See hooks.def for the table format. */
#ifndef TESSERA_HOOKS_H
#define TESSERA_HOOKS_H

#include <stdatomic.h>
#include <stddef.h>

#include "cuda_types.h"
#include "nvml_types.h"

#define TESSERA_EXPORT __attribute__((visibility("default")))

/* The library a hooked symbol lives in. */
enum tessera_lib { TLIB_CU = 0, TLIB_NVML = 1, TLIB_COUNT };

/* Typedefs <name>_fn and the exported wrapper prototypes (the hand-written
 * wrappers must match them). */
#define HOOK(lib, base, sfx, since, ret, params, args) \
    typedef ret (*base##sfx##_fn) params;              \
    TESSERA_EXPORT ret base##sfx params;
#define REAL(lib, name, ret, params, args) typedef ret (*name##_fn) params;
#include "hooks.def"

/* Indexes into the hook table, one per HOOK and REAL line. */
enum tessera_hook_id {
#define HOOK(lib, base, sfx, since, ret, params, args) TH_##base##sfx,
#define REAL(lib, name, ret, params, args) TH_##name,
#include "hooks.def"
    TH_COUNT
};

/* The real driver pointers (hooks.c), written once per library before
 * tessera_lib_ready[lib] is set with release order. */
typedef void (*tessera_generic_fn)(void);
extern tessera_generic_fn tessera_real[TH_COUNT];
extern _Atomic int tessera_lib_ready[TLIB_COUNT];
void tessera_resolve_slow(enum tessera_lib lib);

/* Resolve the real symbols of one library (idempotent, thread-safe). */
static inline void tessera_resolve(enum tessera_lib lib)
{
    if (!atomic_load_explicit(&tessera_lib_ready[lib], memory_order_acquire))
        tessera_resolve_slow(lib);
}

static inline tessera_generic_fn tessera_real_fn(enum tessera_hook_id id, enum tessera_lib lib)
{
    tessera_resolve(lib);
    return tessera_real[id];
}

/* real_<name>(): inline checked calls into the driver; a symbol the driver
 * lacks gives CUDA_ERROR_NOT_FOUND / NVML_ERROR_FUNCTION_NOT_FOUND. */
#define TESSERA_MISSING_TLIB_CU CUDA_ERROR_NOT_FOUND
#define TESSERA_MISSING_TLIB_NVML NVML_ERROR_FUNCTION_NOT_FOUND
#define TESSERA_CALL_REAL(lib, id, type, ret, params, args)            \
    static inline ret real_##id params                                 \
    {                                                                  \
        tessera_generic_fn tessera_fn_ = tessera_real_fn(TH_##id, lib); \
        if (tessera_fn_ == NULL)                                       \
            return TESSERA_MISSING_##lib;                              \
        return ((type)tessera_fn_)args;                                \
    }
/* raw_<name>(): the same without the resolution check, for hot paths that
 * know the library was resolved (the launch gate resolves libcuda before
 * it reports ready). */
#define TESSERA_CALL_RAW(lib, id, type, ret, params, args)   \
    static inline ret raw_##id params                        \
    {                                                        \
        tessera_generic_fn tessera_fn_ = tessera_real[TH_##id]; \
        if (tessera_fn_ == NULL)                             \
            return TESSERA_MISSING_##lib;                    \
        return ((type)tessera_fn_)args;                      \
    }
#define HOOK(lib, base, sfx, since, ret, params, args)                           \
    TESSERA_CALL_REAL(TLIB_##lib, base##sfx, base##sfx##_fn, ret, params, args) \
    TESSERA_CALL_RAW(TLIB_##lib, base##sfx, base##sfx##_fn, ret, params, args)
#define REAL(lib, name, ret, params, args) TESSERA_CALL_REAL(TLIB_##lib, name, name##_fn, ret, params, args)
#include "hooks.def"

#endif
