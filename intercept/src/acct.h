/* acct.h: container-wide memory accounting in the shared accounting file. */
#ifndef TESSERA_ACCT_H
#define TESSERA_ACCT_H

#include <stdint.h>

enum { ACCT_OK = 0, ACCT_OVER = 1, ACCT_ERR = 2 };

/* Reserve bytes on device dev if the container's usage stays <= limit. */
int acct_reserve(int dev, uint64_t bytes, uint64_t limit);
/* Add bytes unconditionally (a driver rounded an allocation up). */
int acct_charge(int dev, uint64_t bytes);
/* Give bytes back. */
void acct_release(int dev, uint64_t bytes);
/* The container's usage on dev, after reclaiming dead processes' slots. */
int acct_used(int dev, uint64_t *used);
/* Drop this process's slot (normal exit). */
void acct_exit(void);
/* In a fork child: the slot belongs to the parent; register anew later. */
void acct_atfork_child(void);

#endif
