/* grantfeed: a stand-in arbiter for GPU validation (NOT the Go arbiter).
 * Creates one grant region per client (protocol v1, docs/enforcement.md),
 * heartbeats every millisecond and adds RATE tokens per second to each,
 * capped at 10 ms worth. With BURST, a client may draw up to BURST tokens
 * per second while every other client has no thread waiting.
 *
 *   grantfeed SECONDS PATH:RATE[:BURST] [PATH:RATE[:BURST] ...]
 *
 * Build: gcc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -I../src -o grantfeed grantfeed.c */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "shm_layout.h"

struct client {
    struct tessera_grant_header *h;
    struct tessera_grant_record *r;
    double rate, burst, owed;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: grantfeed SECONDS PATH:RATE[:BURST]...\n");
        return 2;
    }
    double seconds = atof(argv[1]);
    int n = argc - 2;
    struct client *c = calloc((size_t)n, sizeof *c);
    for (int i = 0; i < n; i++) {
        char *spec = argv[i + 2], *rate = strchr(spec, ':');
        if (rate == NULL)
            return 2;
        *rate++ = 0;
        char *burst = strchr(rate, ':');
        if (burst)
            *burst++ = 0;
        c[i].rate = atof(rate);
        c[i].burst = burst ? atof(burst) : c[i].rate;
        int fd = open(spec, O_RDWR | O_CREAT | O_TRUNC, 0666);
        if (fd < 0 || ftruncate(fd, 128) != 0)
            return 1;
        char *m = mmap(NULL, 128, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (m == MAP_FAILED)
            return 1;
        c[i].h = (struct tessera_grant_header *)(void *)m;
        c[i].r = (struct tessera_grant_record *)(void *)(m + 64);
        c[i].h->version_major = 1;
        c[i].h->header_size = 64;
        c[i].h->record_size = 64;
        c[i].h->ndev = 1;
        c[i].h->stale_after_ms = 2000;
        atomic_store(&c[i].h->heartbeat_ns, now_ns());
        atomic_store(&c[i].h->magic, TESSERA_GRANT_MAGIC);
    }
    uint64_t end = now_ns() + (uint64_t)(seconds * 1e9);
    while (now_ns() < end) {
        for (int i = 0; i < n; i++) {
            int others_idle = 1;
            for (int j = 0; j < n; j++)
                if (j != i && atomic_load(&c[j].r->waiters) != 0)
                    others_idle = 0;
            double rate = others_idle ? c[i].burst : c[i].rate;
            c[i].owed += rate / 1000.0;
            int64_t add = (int64_t)c[i].owed, cap = (int64_t)(rate / 100.0) + 1;
            c[i].owed -= (double)add;
            int64_t cur = atomic_load(&c[i].r->tokens);
            while (add > 0 && cur < cap && !atomic_compare_exchange_weak(&c[i].r->tokens, &cur, cur + add < cap ? cur + add : cap))
                ;
            atomic_store(&c[i].h->heartbeat_ns, now_ns());
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return 0;
}
