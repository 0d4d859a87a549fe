/* shm.c: the accounting file. One slot per process that allocated; a
 * robust process-shared mutex serialises admission; slots of processes that
 * died (even by SIGKILL) are reclaimed by the next process that needs the
 * room, recognised by pid plus start time so a reused pid is not mistaken
 * for the dead owner. */
#include "acct.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "shm_layout.h"

#define ACCT_FILE_SIZE (sizeof(struct tessera_acct_header) + TESSERA_ACCT_SLOTS * sizeof(struct tessera_acct_slot))

static struct tessera_acct_header *g_hdr; /* set once under g_attach_once */
static struct tessera_acct_slot *g_slots;
static pthread_once_t g_attach_once = PTHREAD_ONCE_INIT;
/* Guarded by the file's mutex (or single-threaded in a fork child). */
static _Atomic int g_my_slot = -1;

/* /proc/PID/stat: state (field 3) and start time (field 22). */
static int proc_stat(pid_t pid, char *state, uint64_t *start)
{
    char path[64], buf[1024];
    ssize_t n;
    int fd;
    char *p;

    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    p = strrchr(buf, ')'); /* the command name may hold spaces and ')' */
    if (p == NULL || p[1] != ' ')
        return -1;
    p += 2;
    *state = *p;
    for (int field = 3; field < 22; field++) {
        p = strchr(p, ' ');
        if (p == NULL)
            return -1;
        p++;
    }
    *start = strtoull(p, NULL, 10);
    return 0;
}

static int slot_owner_alive(pid_t pid, uint64_t start)
{
    char state;
    uint64_t now_start;

    if (kill(pid, 0) != 0 && errno == ESRCH)
        return 0;
    if (proc_stat(pid, &state, &now_start) != 0)
        return 1; /* exists but unreadable (hidepid): keep */
    if (state == 'Z' || state == 'X')
        return 0; /* exited; the driver released its memory */
    return now_start == start;
}

static void attach(void)
{
    const struct tessera_config *c = tessera_cfg();
    char path[TESSERA_PATH_MAX + 160];
    struct stat st;
    void *base;
    int fd;

    snprintf(path, sizeof path, "%s/tessera-%s.acct", c->shm_dir, c->container_id);
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
        tlog(TLOG_ERROR, "cannot open accounting file %s: %s; allocations will fail", path, strerror(errno));
        return;
    }
    /* flock serialises creation between processes starting together. */
    while (flock(fd, LOCK_EX) != 0 && errno == EINTR)
        ;
    if (fstat(fd, &st) != 0 || (st.st_size < (off_t)ACCT_FILE_SIZE && ftruncate(fd, (off_t)ACCT_FILE_SIZE) != 0)) {
        tlog(TLOG_ERROR, "cannot size accounting file %s: %s; allocations will fail", path, strerror(errno));
        goto out;
    }
    (void)fchmod(fd, 0666); /* the container's processes may run as several users */
    base = mmap(NULL, ACCT_FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        tlog(TLOG_ERROR, "cannot map accounting file %s: %s; allocations will fail", path, strerror(errno));
        goto out;
    }
    struct tessera_acct_header *h = base;
    uint32_t magic = atomic_load_explicit(&h->magic, memory_order_acquire);
    if (magic == 0) {
        pthread_mutexattr_t a;
        pthread_mutexattr_init(&a);
        pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
        pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
        int rc = pthread_mutex_init(&h->lock.mutex, &a);
        pthread_mutexattr_destroy(&a);
        if (rc != 0) {
            tlog(TLOG_ERROR, "cannot initialise the accounting lock: %s; allocations will fail", strerror(rc));
            munmap(base, ACCT_FILE_SIZE);
            goto out;
        }
        h->version_major = TESSERA_ACCT_VERSION_MAJOR;
        h->version_minor = TESSERA_ACCT_VERSION_MINOR;
        h->header_size = sizeof(struct tessera_acct_header);
        h->slot_size = sizeof(struct tessera_acct_slot);
        h->nslots = TESSERA_ACCT_SLOTS;
        h->ndev = TESSERA_MAX_DEV;
        atomic_store_explicit(&h->magic, TESSERA_ACCT_MAGIC, memory_order_release);
    } else if (magic != TESSERA_ACCT_MAGIC || h->version_major != TESSERA_ACCT_VERSION_MAJOR ||
               h->header_size != sizeof(struct tessera_acct_header) ||
               h->slot_size != sizeof(struct tessera_acct_slot) || h->nslots != TESSERA_ACCT_SLOTS ||
               h->ndev != TESSERA_MAX_DEV) {
        tlog(TLOG_ERROR, "accounting file %s has an unknown layout (magic %#x, version %u); allocations will fail",
             path, (unsigned)magic, (unsigned)h->version_major);
        munmap(base, ACCT_FILE_SIZE);
        goto out;
    }
    g_slots = (struct tessera_acct_slot *)((char *)base + sizeof(struct tessera_acct_header));
    g_hdr = h;
out:
    flock(fd, LOCK_UN);
    close(fd);
}

static int lock(void)
{
    pthread_once(&g_attach_once, attach);
    if (g_hdr == NULL)
        return -1;
    int rc = pthread_mutex_lock(&g_hdr->lock.mutex);
    if (rc == EOWNERDEAD) {
        /* The holder died mid-update. Only its own slot can be half
         * written, and that slot is reclaimed as dead. */
        tlog(TLOG_INFO, "accounting lock holder died; recovering");
        pthread_mutex_consistent(&g_hdr->lock.mutex);
        return 0;
    }
    if (rc != 0) {
        TLOG_ONCE(TLOG_ERROR, "cannot take the accounting lock: %s; allocations will fail", strerror(rc));
        return -1;
    }
    return 0;
}

static void unlock(void) { pthread_mutex_unlock(&g_hdr->lock.mutex); }

static void clear_slot(struct tessera_acct_slot *s)
{
    for (int d = 0; d < TESSERA_MAX_DEV; d++)
        atomic_store_explicit(&s->used[d], 0, memory_order_relaxed);
    atomic_store_explicit(&s->start_time, 0, memory_order_relaxed);
    atomic_store_explicit(&s->pid, 0, memory_order_release);
}

static void reclaim_locked(void)
{
    for (int i = 0; i < TESSERA_ACCT_SLOTS; i++) {
        struct tessera_acct_slot *s = &g_slots[i];
        pid_t pid = atomic_load_explicit(&s->pid, memory_order_relaxed);
        if (pid == 0 || i == g_my_slot)
            continue;
        if (!slot_owner_alive(pid, atomic_load_explicit(&s->start_time, memory_order_relaxed))) {
            tlog(TLOG_INFO, "reclaiming the accounting slot of exited process %d", (int)pid);
            clear_slot(s);
        }
    }
}

static int register_locked(void)
{
    char state;
    uint64_t start;
    pid_t me = getpid();

    if (proc_stat(me, &state, &start) != 0) {
        TLOG_ONCE(TLOG_ERROR, "cannot read /proc/self/stat; allocations will fail");
        return -1;
    }
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < TESSERA_ACCT_SLOTS; i++) {
            struct tessera_acct_slot *s = &g_slots[i];
            if (atomic_load_explicit(&s->pid, memory_order_relaxed) != 0)
                continue;
            clear_slot(s);
            atomic_store_explicit(&s->start_time, start, memory_order_relaxed);
            atomic_store_explicit(&s->pid, me, memory_order_release);
            g_my_slot = i;
            return 0;
        }
        reclaim_locked();
    }
    TLOG_ONCE(TLOG_ERROR, "accounting file is full (%d live processes); allocations will fail", TESSERA_ACCT_SLOTS);
    return -1;
}

static uint64_t sum_locked(int dev)
{
    uint64_t sum = 0;
    for (int i = 0; i < TESSERA_ACCT_SLOTS; i++) {
        uint64_t u = atomic_load_explicit(&g_slots[i].used[dev], memory_order_relaxed);
        sum = sum + u < sum ? UINT64_MAX : sum + u;
    }
    return sum;
}

int acct_reserve(int dev, uint64_t bytes, uint64_t limit)
{
    uint64_t used;

    if (lock() != 0)
        return ACCT_ERR;
    if (g_my_slot < 0 && register_locked() != 0) {
        unlock();
        return ACCT_ERR;
    }
    used = sum_locked(dev);
    if (bytes > limit || used > limit - bytes) {
        reclaim_locked();
        used = sum_locked(dev);
        if (bytes > limit || used > limit - bytes) {
            unlock();
            return ACCT_OVER;
        }
    }
    _Atomic uint64_t *mine = &g_slots[g_my_slot].used[dev];
    atomic_store_explicit(mine, atomic_load_explicit(mine, memory_order_relaxed) + bytes, memory_order_relaxed);
    unlock();
    return ACCT_OK;
}

int acct_charge(int dev, uint64_t bytes)
{
    if (lock() != 0)
        return ACCT_ERR;
    if (g_my_slot < 0 && register_locked() != 0) {
        unlock();
        return ACCT_ERR;
    }
    _Atomic uint64_t *mine = &g_slots[g_my_slot].used[dev];
    uint64_t v = atomic_load_explicit(mine, memory_order_relaxed);
    atomic_store_explicit(mine, v + bytes < v ? UINT64_MAX : v + bytes, memory_order_relaxed);
    unlock();
    return ACCT_OK;
}

void acct_release(int dev, uint64_t bytes)
{
    if (lock() != 0)
        return;
    if (g_my_slot >= 0) {
        _Atomic uint64_t *mine = &g_slots[g_my_slot].used[dev];
        uint64_t v = atomic_load_explicit(mine, memory_order_relaxed);
        atomic_store_explicit(mine, v > bytes ? v - bytes : 0, memory_order_relaxed);
    }
    unlock();
}

int acct_used(int dev, uint64_t *used)
{
    if (lock() != 0)
        return -1;
    reclaim_locked();
    *used = sum_locked(dev);
    unlock();
    return 0;
}

void acct_exit(void)
{
    /* g_my_slot >= 0 implies attach() finished (it is set afterwards). */
    if (g_my_slot < 0 || lock() != 0)
        return;
    if (g_my_slot >= 0 && atomic_load_explicit(&g_slots[g_my_slot].pid, memory_order_relaxed) == getpid()) {
        clear_slot(&g_slots[g_my_slot]);
        g_my_slot = -1;
    }
    unlock();
}

void acct_atfork_child(void) { g_my_slot = -1; }
