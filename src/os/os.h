/* os.h — the only place HAKMEM asks the kernel for memory. Every mapping is
 * named in /proc/PID/maps where the kernel allows it: hakmem-segment,
 * hakmem-huge (blocks with a mapping of their own), hakmem-meta (heap
 * records), hakmem-slicemap (the slice map's leaves). */
#ifndef HAK_OS_H
#define HAK_OS_H

#include "hak_internal.h"

void  *os_map(size_t size) HAK_HIDDEN;                    /* page-granular, zeroed */
/* try_plain: first try an ordinary mapping (often aligned already when size is
 * a multiple of align); otherwise over-map and trim. */
void  *os_map_aligned(size_t size, size_t align, bool try_plain) HAK_HIDDEN;
void  *os_map_aligned_unnamed(size_t size, size_t align, bool try_plain) HAK_HIDDEN;
void   os_unmap(void *p, size_t size) HAK_HIDDEN;
/* The same, counted nowhere (reserve.c counts a segment when it hands it out). */
void  *os_map_aligned_unaccounted(size_t size, size_t align, bool try_plain) HAK_HIDDEN;
void   os_unmap_unaccounted(void *p, size_t size) HAK_HIDDEN;
void   os_purge(void *p, size_t size) HAK_HIDDEN;         /* drop contents, keep mapping */
void   os_populate(void *p, size_t size) HAK_HIDDEN;      /* make resident now (a hint: may do nothing) */
size_t os_resident(const void *p, size_t size) HAK_HIDDEN; /* bytes of the range resident (mincore; 0 if it fails) */
bool   os_remap_inplace(void *p, size_t old_size, size_t new_size) HAK_HIDDEN;
bool   os_remap_to(void *p, size_t old_size, void *dest, size_t new_size) HAK_HIDDEN; /* move, no copy */
size_t os_page_size(void) HAK_HIDDEN;
/* Secure build: make [p, p+size) a guard (no access) or ordinary memory
 * again; false if the kernel refused (hugetlb pages cannot be split). */
bool   os_guard(void *p, size_t size, bool guard) HAK_HIDDEN;
uint32_t os_now_ms(void) HAK_HIDDEN;                      /* coarse monotonic clock (vDSO) */
void   os_account_map(size_t size) HAK_HIDDEN;            /* count a mapping made outside os_map* */

/* hugepage.c: a 2 MiB segment, aligned, named, on huge pages as configured
 * (HAKMEM_HUGE_PAGES, HAKMEM_THP); and the hook that advises THP once a
 * segment is dense (HAKMEM_THP=auto). Both run under the segment's shard lock. */
void  *os_map_segment(bool dense) HAK_HIDDEN;
int    os_segment_in_use(void *seg, unsigned used_slices) HAK_HIDDEN;
void   os_segment_advise(void *seg, int advice) HAK_HIDDEN;
/* reserve.c: a 2 MiB segment-aligned range of fresh memory, uncounted, cut
 * from address space reserved several segments at a time (NULL when the
 * kernel refuses even one); and giving back the reserved rest (true if
 * there was some), when the address space runs out. */
void  *os_reserve_segment(void) HAK_HIDDEN;
bool   os_reserve_release(void) HAK_HIDDEN;
void   os_reserve_atfork_child(void) HAK_HIDDEN;
/* Name a mapping in /proc/PID/maps ("[anon:NAME]"); ignored where the kernel cannot. */
void   os_name(void *p, size_t size, const char *name) HAK_HIDDEN;
/* Out of address space: ask the layer above (through a hook it sets, since
 * imports run upward) to give back what it keeps cached; true if it did. */
void   os_set_reclaim(bool (*fn)(void)) HAK_HIDDEN;
bool   os_reclaim(void) HAK_HIDDEN;

#endif
