/* init.c: process lifecycle. The constructor only parses the environment
 * (cheap, and before the application can change it) and registers fork
 * handlers; the driver is loaded lazily on the first CUDA call, the
 * accounting file on the first allocation and the grant region on the
 * first launch, each behind its own pthread_once. */
#include <pthread.h>

#include "acct.h"
#include "atab.h"
#include "config.h"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void fork_child(void)
{
    atab_atfork_child();
    acct_atfork_child();
}

static void init(void)
{
    (void)tessera_cfg();
    pthread_atfork(atab_atfork_prepare, atab_atfork_parent, fork_child);
}

__attribute__((constructor)) static void tessera_ctor(void) { pthread_once(&g_once, init); }

/* A normal exit gives the process's slot back at once; after a crash or
 * SIGKILL the next allocator reclaims it. */
__attribute__((destructor)) static void tessera_dtor(void) { acct_exit(); }
