/* atab.h: this process's live allocations (handle -> device, bytes), so a
 * free knows how much to give back. */
#ifndef TESSERA_ATAB_H
#define TESSERA_ATAB_H

#include <stdint.h>

enum atab_kind { ATAB_MEM = 1, ATAB_VMM = 2, ATAB_ARRAY = 3, ATAB_MIPMAP = 4 };

int atab_insert(enum atab_kind kind, uint64_t key, int dev, uint64_t bytes);
/* Remove and return the record; 1 if it was there. */
int atab_take(enum atab_kind kind, uint64_t key, int *dev, uint64_t *bytes);

void atab_atfork_prepare(void);
void atab_atfork_parent(void);
void atab_atfork_child(void);

#endif
