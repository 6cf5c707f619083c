/* heap_huge.h — blocks of first-class heaps above what a page of slices
 * holds: the process's huge and over-aligned blocks, recorded per heap so
 * that destroy frees them (protocol in heap_huge.c). */
#ifndef HAK_HEAP_HUGE_H
#define HAK_HEAP_HUGE_H

#include "hak_internal.h"
#include "os/lock.h"

/* A huge or over-aligned block for heap h; NULL when the OS refuses. */
void *heap_huge_alloc(hak_heap_t *h, size_t n, size_t align, bool zero) HAK_HIDDEN;
/* free()/realloc() of a huge or over-aligned block p: no heap has it any more. */
void  heap_huge_forget(const void *p) HAK_HIDDEN;
/* The heap whose block p is, or NULL. */
hak_heap_t *heap_huge_owner(const void *p) HAK_HIDDEN;
/* Every block of h off the table, freed with `free_them` (destroy) or left
 * to the process (delete); returns how many. */
size_t heap_huge_release(hak_heap_t *h, bool free_them) HAK_HIDDEN;

/* Its lock, process-wide (read by tests/test_shard_locks.c: no system call
 * while it is held). */
extern hak_lock_t heap_huge_lock HAK_HIDDEN;

void heap_huge_atfork_prepare(void) HAK_HIDDEN;
void heap_huge_atfork_parent(void) HAK_HIDDEN;
void heap_huge_atfork_child(void) HAK_HIDDEN;

#endif
