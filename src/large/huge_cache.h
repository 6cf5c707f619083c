/* huge_cache.h — freed huge mappings (blocks above 960 KiB) kept for reuse,
 * without a lock: a fixed array of atomic slots (protocol in huge_cache.c).
 * Its byte budget follows demand: HAKMEM_HUGE_CACHE is the floor, and the
 * cache may hold as much again as twice the recent peak of live huge bytes,
 * up to 16 times the floor. */
#ifndef HAK_HUGE_CACHE_H
#define HAK_HUGE_CACHE_H

#include "hak_internal.h"

/* A cached mapping of map..most bytes (the smallest such; of equal sizes a
 * resident one), now the caller's; NULL if none. *resident: its pages were
 * not purged since it was freed (only its header page is known resident
 * otherwise, the rest reads zero). */
hak_segment_t *huge_cache_take(size_t map, size_t most, bool *resident) HAK_HIDDEN;
/* Keep a freed mapping (its header says free: huge_size 0); false if it does
 * not fit the budget (the caller unmaps it). May unmap older entries to stay
 * within the budget. */
bool huge_cache_put(hak_segment_t *s) HAK_HIDDEN;
/* Live huge bytes after an allocation: raises the demand the budget follows. */
void huge_cache_note_live(size_t live_bytes) HAK_HIDDEN;
/* Purge entries idle for min_age ms; returns when the next is due, 0 if none. */
uint32_t huge_cache_purge_aged(uint32_t now, uint32_t min_age, bool *any) HAK_HIDDEN;
/* Unmap every entry; true if there was one. */
bool huge_cache_trim(void) HAK_HIDDEN;
/* Bytes held (mapped; resident until purged). */
size_t huge_cache_bytes(void) HAK_HIDDEN;

/* Owned by large.c: give a huge mapping back to the OS. */
void huge_unmap(hak_segment_t *s) HAK_HIDDEN;

#endif
