/* config.h: the environment the node agent sets, parsed once per process. */
#ifndef TESSERA_CONFIG_H
#define TESSERA_CONFIG_H

#include <stdint.h>

#include "shm_layout.h"

#define TESSERA_MAX_LIMIT (1ull << 50) /* 1 PiB */
#define TESSERA_PATH_MAX 3800
#define TESSERA_MAX_ERRORS 8

struct tessera_config {
    int bad;                           /* an enforcement variable is invalid: fail closed */
    int mem_limited;                   /* TESSERA_MEMORY_LIMIT is set */
    uint64_t limit[TESSERA_MAX_DEV];   /* per device ordinal; 0 = none granted */
    char container_id[129];
    char shm_dir[TESSERA_PATH_MAX];
    int region_set;                    /* TESSERA_ARBITER_REGION is set */
    char region_path[TESSERA_PATH_MAX];
    int oversubscribe;
    int compute_fail_closed;
    int log_level;
    int nerrors;
    char errors[TESSERA_MAX_ERRORS][320];
};

/* Parse with getenv-style lookup into *c (pure: no logging). */
void tessera_config_parse(struct tessera_config *c, const char *(*get)(const char *));

/* The process's configuration (parsed on first use). */
const struct tessera_config *tessera_cfg(void);

/* Print the configuration errors, once per process, on first CUDA use. */
void tessera_config_report(void);

#endif
