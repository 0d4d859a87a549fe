/* atab.c: open-addressing hash table (linear probing, tombstones) behind
 * one mutex. Allocation calls are rare next to launches, so one lock is
 * enough. */
#include "atab.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { EMPTY = 0, FULL = 1, TOMB = 2 };

struct rec {
    uint64_t key;
    uint64_t bytes;
    int32_t dev;
    uint8_t kind;
    uint8_t state;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct rec *g_tab;
static size_t g_cap, g_full, g_tomb;

static size_t hash(enum atab_kind kind, uint64_t key)
{
    uint64_t x = key ^ ((uint64_t)kind << 59);
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (size_t)x;
}

static int grow_locked(void)
{
    size_t ncap = g_cap == 0 ? 1024 : (g_full * 4 >= g_cap ? g_cap * 2 : g_cap);
    struct rec *nt = calloc(ncap, sizeof *nt);
    if (nt == NULL)
        return -1;
    for (size_t i = 0; i < g_cap; i++) {
        if (g_tab[i].state != FULL)
            continue;
        size_t j = hash(g_tab[i].kind, g_tab[i].key) & (ncap - 1);
        while (nt[j].state == FULL)
            j = (j + 1) & (ncap - 1);
        nt[j] = g_tab[i];
    }
    free(g_tab);
    g_tab = nt;
    g_cap = ncap;
    g_tomb = 0;
    return 0;
}

int atab_insert(enum atab_kind kind, uint64_t key, int dev, uint64_t bytes)
{
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    if ((g_full + g_tomb + 1) * 2 > g_cap && grow_locked() != 0) {
        rc = -1;
        goto out;
    }
    size_t i = hash(kind, key) & (g_cap - 1), slot = SIZE_MAX;
    for (;; i = (i + 1) & (g_cap - 1)) {
        struct rec *r = &g_tab[i];
        if (r->state == FULL && r->key == key && r->kind == kind) {
            slot = i; /* a stale record for a reused handle: overwrite */
            break;
        }
        if (r->state == TOMB && slot == SIZE_MAX)
            slot = i;
        if (r->state == EMPTY) {
            if (slot == SIZE_MAX)
                slot = i;
            break;
        }
    }
    if (g_tab[slot].state == TOMB)
        g_tomb--;
    if (g_tab[slot].state != FULL)
        g_full++;
    g_tab[slot] = (struct rec){key, bytes, dev, (uint8_t)kind, FULL};
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

int atab_take(enum atab_kind kind, uint64_t key, int *dev, uint64_t *bytes)
{
    int found = 0;
    pthread_mutex_lock(&g_mu);
    if (g_cap == 0)
        goto out;
    for (size_t i = hash(kind, key) & (g_cap - 1);; i = (i + 1) & (g_cap - 1)) {
        struct rec *r = &g_tab[i];
        if (r->state == EMPTY)
            break;
        if (r->state == FULL && r->key == key && r->kind == kind) {
            *dev = r->dev;
            *bytes = r->bytes;
            r->state = TOMB;
            g_full--;
            g_tomb++;
            found = 1;
            break;
        }
    }
out:
    pthread_mutex_unlock(&g_mu);
    return found;
}

void atab_atfork_prepare(void) { pthread_mutex_lock(&g_mu); }
void atab_atfork_parent(void) { pthread_mutex_unlock(&g_mu); }

/* A fork child has no CUDA context: the parent's allocations are not its.
 * The child's only thread is the one that locked g_mu in prepare. */
void atab_atfork_child(void)
{
    pthread_mutex_unlock(&g_mu);
    if (g_cap != 0)
        memset(g_tab, 0, g_cap * sizeof *g_tab);
    g_full = g_tomb = 0;
}
