/* zero_size.h — the secure build's malloc(0) blocks: unique pointers into
 * address space of no access (guard/zero_size.c). */
#ifndef HAK_ZERO_SIZE_H
#define HAK_ZERO_SIZE_H

#include "hak_internal.h"

#if HAK_SECURE
typedef enum { ZS_NOT_OURS = 0, ZS_LIVE, ZS_FREE, ZS_INVALID } zs_state_t;

/* A fresh zero-size block, or NULL if the OS refused address space or
 * every region is full (the caller then hands out an ordinary block). */
void *zero_size_alloc(void) HAK_HIDDEN;
/* p lies in a zero-size region (async-signal-safe: the fault handler). */
bool zero_size_owns(const void *p) HAK_HIDDEN;
/* What p is: not in a region, a live block, a slot not handed out (freed),
 * or not a slot start. */
zs_state_t zero_size_state(const void *p) HAK_HIDDEN;
/* Frees p if it is a live block (returns ZS_LIVE); otherwise changes
 * nothing and says what p is. */
zs_state_t zero_size_free(const void *p) HAK_HIDDEN;
#endif

#endif
