/* user_heap.h — first-class heaps (hak_heap_new and friends): heaps a program
 * creates, allocates from on any thread, and destroys at once or deletes
 * (protocol in user_heap.c). The public entry points are in
 * front/heap_api.c; this is the core they and free() call. */
#ifndef HAK_USER_HEAP_H
#define HAK_USER_HEAP_H

#include "hak_internal.h"
#include "guard/registry.h"

enum { HAK_UHEAP_NONE = 0, HAK_UHEAP_LIVE = 1, HAK_UHEAP_DYING = 2, HAK_UHEAP_GONE = 3 };

/* The slice-map value of a first-class heap's class pages: the large
 * sentinel's (bin index HAK_CLASS_NONE + 1, a cap-0 bin), so free()'s fast
 * path never caches their blocks and sends them to free_slow; the segment's
 * own slice_cls still says the class, which is how free_slow tells them from
 * large blocks. */
#define HAK_UHEAP_MAP_V (HAK_CLASS_NONE + 1u)

/* p (registered, its slice_cls a class) lies in a page of a first-class heap. */
HAK_INLINE bool uheap_class_block(const void *p) {
  return slice_map_bin_offset(p) == HAK_UHEAP_MAP_V * HAK_SLICE_MAP_SCALE;
}

hak_heap_t *uheap_new(void) HAK_HIDDEN;
/* A live first-class heap (cheap test of its state word; h must be a heap
 * pointer hak_heap_new returned at some time). */
bool  uheap_live(hak_heap_t *h) HAK_HIDDEN;
/* One block of class cls from h; NULL when the OS refuses memory or h is
 * not live (errno is the caller's). */
void *uheap_alloc(hak_heap_t *h, unsigned cls) HAK_HIDDEN;
/* A large block fits a page of a heap: at most 15 slices (960 KiB) with its
 * alignment slack, alignment at most 64 KiB. Bigger blocks are the
 * process's (front/heap_api.c). */
HAK_INLINE bool uheap_large_fits(size_t size, size_t align) {
  /* the secure build's guard page after the block (room for the biggest
   * page) and its head before it (up to the alignment, heap/canary.h) */
  size_t guard = HAK_SECURE ? 2 * HAK_SLICE_SIZE : 0;
  return align <= HAK_SLICE_SIZE && size + guard < (size_t)HAK_LARGE_MAX_SLICES * HAK_SLICE_SIZE;
}
/* A large block with uheap_large_fits from h, aligned to align; NULL when
 * the OS refuses memory or h is not live. */
void *uheap_alloc_large(hak_heap_t *h, size_t size, size_t align, bool zero) HAK_HIDDEN;
/* The first-class heap p (a registered pointer) belongs to, or NULL. */
hak_heap_t *uheap_of(const void *p) HAK_HIDDEN;
/* free() of a class block p with uheap_class_block(p): back to its page.
 * False if its page has stopped belonging to a heap (hak_heap_delete ran
 * meanwhile): the caller frees it as an ordinary block. Reports bad frees. */
bool  uheap_free(void *p) HAK_HIDDEN;
/* free() of the large block of page pg whose owner is set: back to its
 * segment if it is a first-class heap's; false otherwise. */
bool  uheap_free_large(hak_page_t *pg) HAK_HIDDEN;
/* Every page of h back to the segments (no per-block work). False (and
 * reported) if h is not a live heap; else h is dying until uheap_finish. */
bool  uheap_destroy(hak_heap_t *h) HAK_HIDDEN;
/* h's live blocks become the process's; returns as uheap_destroy. */
bool  uheap_delete(hak_heap_t *h) HAK_HIDDEN;
/* A dying heap's record goes to the pool (after its huge blocks are dealt
 * with, front/heap_huge.c). */
void  uheap_finish(hak_heap_t *h) HAK_HIDDEN;

void uheap_atfork_prepare(void) HAK_HIDDEN;
void uheap_atfork_parent(void) HAK_HIDDEN;
void uheap_atfork_child(void) HAK_HIDDEN;

#endif
