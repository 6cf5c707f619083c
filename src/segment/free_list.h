/* free_list.h — the links between free blocks: a page's local free list and
 * its remote list (remote/remote.c) keep the next pointer in the first word
 * of each free block, and every link joins two blocks of the same page.
 *
 * In the secure build a link is stored encoded with keys of the page
 * (mimalloc's scheme: rotl(next ^ k1, k0) + k0, k0 and k1 secret: k0 random
 * per segment, k1 a random per-process secret mixed with the page record's
 * address, so that each page has its own pair), and every link read is
 * decoded and checked: the block it names must
 * lie on the same page, at a block boundary (the block-start test of
 * guard/block_check.h, one multiply and one comparison). A use-after-free
 * write or an overflow into a free block's first word, an attempt to steer
 * malloc to an address of the attacker's choice, is caught at the next
 * refill or collection that reads it: one line ("hakmem: malloc: corrupted
 * free list 0x<block>") and abort. Only the cold side reads and writes links
 * (refill, flush, remote frees): the thread caches are arrays, and the other
 * builds store plain pointers, compiled to the same code as before.
 *
 * Debug builds with HAKMEM_DEBUG_LISTS (the UBSan build) also check every
 * list where it is popped, pushed, spliced or taken whole: links within
 * the page at block starts, lengths against the page's counts, tails
 * (segment/list_check.h; nothing in the other builds). */
#ifndef HAK_FREE_LIST_H
#define HAK_FREE_LIST_H

#include "hak_internal.h"
#include "guard/block_check.h"

#if HAK_SECURE
/* A link that does not decode to a block of its page: report and abort. */
_Noreturn void free_list_corrupt(const void *block) HAK_HIDDEN HAK_COLD;
/* A fresh key for a newly mapped segment (and the process secret, once). */
void free_list_keys_init(hak_segment_t *s) HAK_HIDDEN;
extern uintptr_t hak_list_secret HAK_HIDDEN;

HAK_INLINE uintptr_t fl_rotl(uintptr_t x, unsigned r) { r &= 63; return (x << r) | (x >> ((64 - r) & 63)); }
HAK_INLINE uintptr_t fl_rotr(uintptr_t x, unsigned r) { r &= 63; return (x >> r) | (x << ((64 - r) & 63)); }

HAK_INLINE void block_set_next(const hak_page_t *pg, void *b, void *next) {
  uintptr_t k0 = segment_of(pg)->list_key, k1 = hak_list_secret ^ (uintptr_t)pg;
  *(uintptr_t *)b = fl_rotl((uintptr_t)next ^ k1, (unsigned)k0) + k0;
}

/* What decoding a page's links needs, read once before a walk (the loads
 * would otherwise stay in the loop: the compiler cannot tell that the
 * blocks read are not the page record). */
typedef struct hak_fl_walk {
  uintptr_t k0, k1, start;
  uint64_t inv;
  unsigned shift, capacity;
} hak_fl_walk_t;

HAK_INLINE hak_fl_walk_t fl_walk(const hak_page_t *pg) {
  const hak_block_check_t *c = &hak_block_check[pg->cls + 1];
  hak_fl_walk_t w = {segment_of(pg)->list_key, hak_list_secret ^ (uintptr_t)pg, (uintptr_t)pg->start,
                     c->inv, c->shift, pg->capacity};
  return w;
}

HAK_INLINE void *fl_next(const hak_fl_walk_t *w, const void *b) {
  uintptr_t d = fl_rotr(*(const uintptr_t *)b - w->k0, (unsigned)w->k0) ^ w->k1, x = (d - w->start) * w->inv;
  if (d && HAK_UNLIKELY(((x >> w->shift) | (x << ((64 - w->shift) & 63))) >= w->capacity)) free_list_corrupt(b);
  return (void *)d;
}

HAK_INLINE void *block_next(const hak_page_t *pg, const void *b) {
  hak_fl_walk_t w = fl_walk(pg);
  return fl_next(&w, b);
}
#else
HAK_INLINE void block_set_next(const hak_page_t *pg, void *b, void *next) { (void)pg; *(void **)b = next; }
HAK_INLINE void *block_next(const hak_page_t *pg, const void *b) { (void)pg; return *(void *const *)b; }
typedef struct hak_fl_walk { char unused; } hak_fl_walk_t;
HAK_INLINE hak_fl_walk_t fl_walk(const hak_page_t *pg) { (void)pg; hak_fl_walk_t w = {0}; return w; }
HAK_INLINE void *fl_next(const hak_fl_walk_t *w, const void *b) { (void)w; return *(void *const *)b; }
#endif

/* The chain first..last, whose last block's link already names pg's local
 * free list (NULL when it is empty), becomes the front of that list. Every
 * change of the list other than a pop from its head goes through here, so
 * that pg->free_tail stays its last block for the owner (heap/heap.c: a
 * pending list goes back onto its page without a walk). */
HAK_INLINE void page_free_prepended(hak_page_t *pg, void *first, void *last) {
  if (!pg->free) pg->free_tail = last;
  pg->free = first;
}

#endif
