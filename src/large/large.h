/* large.h — blocks above the size classes: one block per page of slices up to
 * ~2 MiB, and beyond that a mapping of its own ("huge"), with a bounded cache
 * of freed huge mappings so repeated big buffers cost no system call. */
#ifndef HAK_LARGE_H
#define HAK_LARGE_H

#include "hak_internal.h"

void  *large_alloc(size_t size, size_t align, bool zero) HAK_HIDDEN;
void   large_free(void *p) HAK_HIDDEN;                /* p's chunk is registered, class NONE */
size_t large_usable(const void *p) HAK_HIDDEN;
/* Usable bytes of the live large or huge block starting at p; 0 if p is
 * not one (freed, interior): the test large_free makes before acting. */
size_t large_live_usable(const void *p) HAK_HIDDEN;
bool   large_resize_inplace(void *p, size_t size) HAK_HIDDEN;
/* A huge block grown by moving its pages (mremap, no copy); NULL if p is not
 * huge or the kernel cannot (then the caller copies). */
void  *large_realloc_move(void *p, size_t size) HAK_HIDDEN;
bool   large_trim(void) HAK_HIDDEN;
/* Purge cached huge mappings idle for min_age ms (the purge delay; 0: all);
 * returns when the next one is due (coarse ms), 0 if none. */
uint32_t large_purge_aged(uint32_t now, uint32_t min_age, bool *any) HAK_HIDDEN;
void   large_counts(size_t *blocks, size_t *bytes) HAK_HIDDEN;

/* Blocks aligned to 2 MiB or more live outside the registry, in a table
 * (overaligned.c): false at once for a pointer that is not 2 MiB aligned. */
bool   overaligned_owns(const void *p, size_t *usable) HAK_HIDDEN;
bool   overaligned_free(void *p) HAK_HIDDEN;

void large_atfork_prepare(void) HAK_HIDDEN;
void large_atfork_parent(void) HAK_HIDDEN;
void large_atfork_child(void) HAK_HIDDEN;

#endif
