/* shm_layout.h: the two shared-memory layouts, version 1. docs/enforcement.md
 * documents them for the Go arbiter; any change here needs a version bump
 * there. All multi-byte fields are little-endian host order, all 64-bit
 * fields 8-byte aligned, all atomics lock-free (checked below), so Go's
 * sync/atomic operates on the same words. */
#ifndef TESSERA_SHM_LAYOUT_H
#define TESSERA_SHM_LAYOUT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define TESSERA_MAX_DEV 16

/* ---- accounting file: $TESSERA_SHM_DIR/tessera-<container id>.acct ----
 * Written only by library instances (one slot per process that allocated),
 * under the robust process-shared mutex. Readers that do not take the mutex
 * (monitoring) may load any atomic field with an atomic load. */
#define TESSERA_ACCT_MAGIC 0x43415354u /* "TSAC" */
#define TESSERA_ACCT_VERSION_MAJOR 1
#define TESSERA_ACCT_VERSION_MINOR 0
#define TESSERA_ACCT_SLOTS 512

struct tessera_acct_header {
    _Atomic uint32_t magic;        /*   0: stored last at creation (release) */
    uint16_t version_major;        /*   4 */
    uint16_t version_minor;        /*   6 */
    uint32_t header_size;          /*   8: 256 */
    uint32_t slot_size;            /*  12: 144 */
    uint32_t nslots;               /*  16: 512 */
    uint32_t ndev;                 /*  20: 16 */
    uint8_t reserved[168];         /*  24 */
    union {                        /* 192: robust, process-shared */
        pthread_mutex_t mutex;
        uint8_t bytes[64];
    } lock;
};

struct tessera_acct_slot {
    _Atomic int32_t pid;                   /*   0: 0 = free */
    uint32_t reserved;                     /*   4 */
    _Atomic uint64_t start_time;           /*   8: /proc/PID/stat field 22 */
    _Atomic uint64_t used[TESSERA_MAX_DEV]; /* 16: bytes, per device ordinal */
};

_Static_assert(sizeof(pthread_mutex_t) <= 64, "mutex fits the lock area");
_Static_assert(offsetof(struct tessera_acct_header, lock) == 192, "acct lock");
_Static_assert(sizeof(struct tessera_acct_header) == 256, "acct header");
_Static_assert(sizeof(struct tessera_acct_slot) == 144, "acct slot");

/* ---- compute grant region: the file named by $TESSERA_ARBITER_REGION ----
 * Created and owned by the arbiter; the library maps it read-write. */
#define TESSERA_GRANT_MAGIC 0x52475354u /* "TSGR" */
#define TESSERA_GRANT_VERSION_MAJOR 1
#define TESSERA_GRANT_DEFAULT_STALE_MS 2000u

struct tessera_grant_header {
    _Atomic uint32_t magic;        /*  0: arbiter, stored last (release) */
    uint16_t version_major;        /*  4: arbiter: 1 */
    uint16_t version_minor;        /*  6: arbiter: 0 */
    uint32_t header_size;          /*  8: arbiter: 64 (offset of record 0) */
    uint32_t record_size;          /* 12: arbiter: 64 (stride) */
    uint32_t ndev;                 /* 16: arbiter: records, 1..16 */
    uint32_t stale_after_ms;       /* 20: arbiter: 0 = 2000 */
    _Atomic uint64_t heartbeat_ns; /* 24: arbiter: CLOCK_MONOTONIC ns */
    uint64_t arbiter_epoch;        /* 32: arbiter: informational */
    uint8_t reserved[24];          /* 40 */
};

struct tessera_grant_record {
    _Atomic int64_t tokens;        /*  0: arbiter adds, library takes 1/launch */
    _Atomic uint64_t waiters;      /*  8: library: threads waiting now */
    _Atomic uint64_t waits;        /* 16: library: launches that waited */
    _Atomic uint64_t ungated;      /* 24: library: fail-open launches */
    uint8_t reserved[32];          /* 32 */
};

_Static_assert(sizeof(struct tessera_grant_header) == 64, "grant header");
_Static_assert(offsetof(struct tessera_grant_header, heartbeat_ns) == 24, "hb");
_Static_assert(sizeof(struct tessera_grant_record) == 64, "grant record");
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics are lock-free");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "32-bit atomics are lock-free");

#endif
