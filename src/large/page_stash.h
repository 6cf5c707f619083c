/* page_stash.h — freed large pages (blocks above 256 KiB in segments) and
 * emptied pages of the multi-slice classes (blocks above 8 KiB), kept for
 * reuse with their geometry and without the segment lock: lock-free slots,
 * at most the dirty budget's bytes (protocol in page_stash.c). */
#ifndef HAK_PAGE_STASH_H
#define HAK_PAGE_STASH_H

#include "hak_internal.h"

/* A stashed page of n..n+n/4 slices, re-initialised for a large block, now
 * the caller's; NULL if none. `last`: where the block's last byte will be,
 * in bytes from the run's start (a run whose blocks ended on that OS page
 * before is preferred). */
hak_page_t *page_stash_take(unsigned n, size_t last) HAK_HIDDEN;
/* pg, a large page, has a block whose last byte is at `last` (pg->ends). */
void page_stash_note_end(hak_page_t *pg, const void *last) HAK_HIDDEN;
/* A stashed page of class cls (one of several slices), re-initialised,
 * now the caller's; NULL if none. */
hak_page_t *page_stash_take_class(unsigned cls) HAK_HIDDEN;
/* Keep a large page whose block was freed, or an empty class page no block
 * of which is out; false if the stash is full or the page too big for it
 * (the caller frees it the usual way). */
bool page_stash_put(hak_page_t *pg) HAK_HIDDEN;
/* Give back to their segments the pages stashed min_age ms ago or more;
 * returns when the next is due, 0 if none. */
uint32_t page_stash_purge_aged(uint32_t now, uint32_t min_age, bool *any) HAK_HIDDEN;
/* Every stashed page back to its segment; true if there was one. */
bool page_stash_trim(void) HAK_HIDDEN;
/* Bytes stashed (free, resident). */
size_t page_stash_bytes(void) HAK_HIDDEN;

#endif
