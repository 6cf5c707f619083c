/* page_stash.h — freed large pages (blocks above 256 KiB in segments) and
 * emptied pages of the multi-slice classes (blocks above 8 KiB), kept for
 * reuse with their geometry and without the segment lock: lock-free slots,
 * at most the dirty budget's bytes (protocol in page_stash.c). */
#ifndef HAK_PAGE_STASH_H
#define HAK_PAGE_STASH_H

#include "hak_internal.h"

/* The bit of a large page's `ends` (hak_internal.h) for a block whose last
 * byte is `last` bytes into a run of n slices: bit d, the byte d 4 KiB pages
 * before the run's last one; 0 past the 16 the mask covers (SIZE_MAX: 0). */
HAK_INLINE uint16_t page_end_bit(unsigned n, size_t last) {
  size_t d = (((size_t)n << HAK_SLICE_SHIFT) >> 12) - 1 - (last >> 12);
  return d < 16 ? (uint16_t)(1u << d) : 0;
}
/* A stashed page of n..n+n/4 slices, re-initialised for a large block, now
 * the caller's; if none, the first n slices of a longer stashed run or of
 * stashed runs side by side, joined, when those are mostly resident (the
 * rest stays stashed); NULL if none. `last`: where the block's last byte will be,
 * in bytes from the run's start, and `last2` where it would be if moved up
 * to the next 4 KiB page (SIZE_MAX: it cannot be): a run whose blocks ended
 * on either OS page before is preferred. */
hak_page_t *page_stash_take(unsigned n, size_t last, size_t last2) HAK_HIDDEN;
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
/* Tests, with no put or take under way: the stashed entries a take would
 * not find (their key's bit clear: page_stash.c, has[]), and in *bytes the
 * bytes of all entries. */
size_t page_stash_unseen(size_t *bytes) HAK_HIDDEN;

#endif
