/* os.h — the only place HAKMEM asks the kernel for memory. */
#ifndef HAK_OS_H
#define HAK_OS_H

#include "hak_internal.h"

void  *os_map(size_t size) HAK_HIDDEN;                    /* page-granular, zeroed */
/* try_plain: first try an ordinary mapping (often aligned already when size is
 * a multiple of align); otherwise over-map and trim. */
void  *os_map_aligned(size_t size, size_t align, bool try_plain) HAK_HIDDEN;
void   os_unmap(void *p, size_t size) HAK_HIDDEN;
void   os_purge(void *p, size_t size) HAK_HIDDEN;         /* drop contents, keep mapping */
bool   os_remap_inplace(void *p, size_t old_size, size_t new_size) HAK_HIDDEN;
size_t os_page_size(void) HAK_HIDDEN;
uint32_t os_now_ms(void) HAK_HIDDEN;                      /* coarse monotonic clock (vDSO) */
/* Out of address space: ask the layer above (through a hook it sets, since
 * imports run upward) to give back what it keeps cached; true if it did. */
void   os_set_reclaim(bool (*fn)(void)) HAK_HIDDEN;
bool   os_reclaim(void) HAK_HIDDEN;

#endif
