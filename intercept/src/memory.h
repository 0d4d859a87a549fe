/* memory.h: helpers shared by the allocation and reporting wrappers. */
#ifndef TESSERA_MEMORY_H
#define TESSERA_MEMORY_H

#include <stdint.h>

#include "cuda_types.h"

/* The current context's device ordinal. */
CUresult tessera_current_device(int *dev);

/* What to report for device dev given the driver's real figures: returns 0
 * and fills the total, free and used figures when a limit applies, -1 to pass the real
 * figures through (no limit configured). */
int tessera_report(int dev, uint64_t real_total, uint64_t real_free, uint64_t *total, uint64_t *free,
                   uint64_t *used);

#endif
