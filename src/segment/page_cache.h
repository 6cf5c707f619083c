/* page_cache.h — empty pages kept for reuse without a segment shard's lock.
 *
 * A page that empties (a class page retired by its heap, a large block
 * freed) goes first to the freeing thread's own cache, then to a process-wide
 * exchange of lock-free stacks, and only when both are full back to its
 * segment (under the thread's shard lock, or through the segment's returned
 * stack). A new page comes from the same places in
 * the same order. Only pages of the same kind are reused: a class page for
 * its own class (same block boundaries, so nothing new becomes resident), a
 * large page for a block of the same number of slices. */
#ifndef HAK_PAGE_CACHE_H
#define HAK_PAGE_CACHE_H

#include "hak_internal.h"

#define HAK_PCACHE_SLOTS 16

/* One per thread heap, touched only by its thread (or under the shared heap's
 * lock). Oldest first. */
typedef struct hak_page_cache {
  hak_page_t *page[HAK_PCACHE_SLOTS];
  uint32_t    n;
  uint32_t    slices;
  uint32_t    shard;    /* its heap's segment shard, 0 until drawn (segment.h) */
  uint16_t    miss_n;   /* slices of the last large miss, and how many misses */
  uint16_t    misses;   /*   of that size in a row (the batch's slow start) */
} hak_page_cache_t;

/* A page of n slices for class cls (HAK_CLASS_NONE: a large block), from c
 * (may be NULL), the exchange, or the segments. NULL when the OS refuses. */
hak_page_t *page_cache_alloc(hak_page_cache_t *c, unsigned n, unsigned cls) HAK_HIDDEN;
/* The same, the segments' part from the given shard (a first-class heap's). */
hak_page_t *page_cache_alloc_in(hak_page_cache_t *c, unsigned shard, unsigned n, unsigned cls) HAK_HIDDEN;
/* An empty page (no block in use, no remote free pending) to c (may be NULL),
 * the exchange, or its segment. */
void page_cache_free(hak_page_cache_t *c, hak_page_t *pg) HAK_HIDDEN;
/* Thread exit (heap_park): the empty pages of `chain` (linked through next,
 * still attached to the slice map) and every page of c to the exchange (or
 * their segments), counted into the exchange at once. */
void page_cache_park(hak_page_cache_t *c, hak_page_t *chain) HAK_HIDDEN;
/* Thread exit: every page of c to the exchange (or its segment). */
void page_cache_flush(hak_page_cache_t *c) HAK_HIDDEN;
/* malloc_trim: every page of the exchange back to its segment; true if any. */
bool page_cache_trim(void) HAK_HIDDEN;
/* Bytes held in thread caches and the exchange (resident, free). */
size_t page_cache_bytes(void) HAK_HIDDEN;

#endif
