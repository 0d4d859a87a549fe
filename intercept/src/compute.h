/* compute.h: the launch gate. The fast path is inline: two acquire loads
 * (plain loads on x86-64) and one relaxed fetch_sub on the grant's token
 * counter; no system call, no function call. */
#ifndef TESSERA_COMPUTE_H
#define TESSERA_COMPUTE_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "cuda_types.h"
#include "shm_layout.h"

enum { GATE_OFF = 0, GATE_ON = 1, GATE_ERROR = 2 };

struct grant_map {
    struct tessera_grant_record *rec0; /* record of device 0 */
    struct tessera_grant_header *hdr;
    char *base;
    size_t len;
    uint32_t ndev;
    uint32_t record_size;
    uint64_t stale_ns;
    dev_t st_dev;
    ino_t st_ino;
};

extern _Atomic(struct grant_map *) tessera_grant;
extern int tessera_gate_mode;
extern _Atomic int tessera_gate_ready; /* set (release) once the mode is known */
/* Initialise if needed, then wait for a token or apply the failure
 * policy: CUDA_SUCCESS (launch) or CUDA_ERROR_NOT_PERMITTED. */
CUresult tessera_gate_slow(void);

static inline struct tessera_grant_record *tessera_grant_rec(const struct grant_map *m, uint32_t i)
{
    return (struct tessera_grant_record *)(void *)(m->base + m->hdr->header_size + (size_t)i * m->record_size);
}

/* The fast path: true when the launch may go ahead now, with its token
 * taken. No calls, so the wrapper tail-jumps into the driver. False sends
 * the launch to tessera_gate_slow (first launch, several devices, no
 * tokens, missing or stale region, configuration error). */
static inline int tessera_gate_fast(void)
{
    if (!atomic_load_explicit(&tessera_gate_ready, memory_order_acquire))
        return 0;
    struct grant_map *m = atomic_load_explicit(&tessera_grant, memory_order_acquire);
    if (m == NULL)
        return tessera_gate_mode == GATE_OFF;
    if (m->ndev != 1)
        return 0;
    _Atomic int64_t *tokens = &m->rec0->tokens;
    if (atomic_fetch_sub_explicit(tokens, 1, memory_order_relaxed) > 0)
        return 1;
    atomic_fetch_add_explicit(tokens, 1, memory_order_relaxed);
    return 0;
}

#endif
