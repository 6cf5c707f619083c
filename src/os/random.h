/* random.h — random numbers for the secure build's hardening (free-list keys,
 * the order of the blocks of a fresh page): a per-thread generator seeded
 * from the kernel on its first use, all on the cold side. Not compiled into
 * the other builds. */
#ifndef HAK_RANDOM_H
#define HAK_RANDOM_H

#include "hak_internal.h"

/* The next 64 random bits of the calling thread's generator. */
uint64_t os_random_next(void) HAK_HIDDEN;
/* Fork child: the generator reseeds, so parent and child part ways. */
void os_random_atfork_child(void) HAK_HIDDEN;

#endif
