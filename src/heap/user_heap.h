/* user_heap.h — first-class heaps (hak_heap_new and friends): heaps a program
 * creates, allocates from on any thread, and destroys at once or deletes
 * (protocol in user_heap.c). The public entry points are in
 * front/heap_api.c; this is the core they and free() call. */
#ifndef HAK_USER_HEAP_H
#define HAK_USER_HEAP_H

#include "hak_internal.h"
#include "guard/registry.h"
#include "heap/heap.h"
#include "os/vg_quiet.h"

enum { HAK_UHEAP_NONE = 0, HAK_UHEAP_LIVE = 1, HAK_UHEAP_DYING = 2, HAK_UHEAP_GONE = 3 };

/* The slice-map value of a first-class heap's class pages: the large
 * sentinel's (bin index HAK_CLASS_NONE + 1, a bin without slots), so free()'s fast
 * path never caches their blocks and sends them to free_slow; the segment's
 * own slice_cls still says the class, which is how free_slow tells them from
 * large blocks. */
#define HAK_UHEAP_MAP_V (HAK_CLASS_NONE + 1u)

/* p (registered, its slice_cls a class) lies in a page of a first-class heap. */
HAK_INLINE bool uheap_class_block(const void *p) {
  return slice_map_entry(p) == HAK_UHEAP_MAP_V * HAK_SLICE_MAP_SCALE;
}

/* The owner's cache (protocol in user_heap_oc.c): blocks of
 * the heap reserved for the thread that owns it, popped without a lock.
 * It lives in the heap's mapping, after the record, on lines of its own
 * (other threads' frees write the record's lock). Not in the secure build
 * (its free lists are encoded, its blocks checked at every hand-out) nor
 * in the valgrind build (memcheck sees every block it hands out). */
#define HAK_UHEAP_OWNER_CACHE (!HAK_SECURE && !HAK_VALGRIND)

typedef struct hak_uheap_oc {
  _Atomic(void *)   owner;              /* the owning thread's token (uheap_self), NULL: none */
  _Atomic(uint32_t) busy;               /* 1 while the owner reads or writes list[] */
  void             *list[HAK_NCLASSES]; /* reserved blocks, linked through their first word */
} hak_uheap_oc_t;

/* Builds with checks stamp a reserved block's second word with this (a
 * block handed out has 0 there, a freed one HAK_FREE_MARK): free() of a
 * block in the owner's cache is a double free. */
#define HAK_UHEAP_RESERVED(p) (~HAK_FREE_MARK(p))

#define HAK_UHEAP_OC_OFFSET align_up(sizeof(hak_heap_t), 64)

HAK_INLINE hak_uheap_oc_t *uheap_oc(hak_heap_t *h) {
  return (hak_uheap_oc_t *)((char *)h + HAK_UHEAP_OC_OFFSET);
}

/* The calling thread's token: the address of its TLS block, unique among
 * live threads (a thread that inherits a dead owner's address inherits its
 * cache, which is consistent: the dead thread is in no operation). */
HAK_INLINE void *uheap_self(void) { return (void *)&hak_tls; }

/* The owner's fast path: a block of class cls from h's cache, or NULL (not
 * the owner, or the class's list is empty: uheap_alloc then). No lock, no
 * atomic read-modify-write: busy is a plain store, and the thread that
 * takes the cache away (uheap_revoke) pays for the fence. */
HAK_INLINE void *uheap_cached(hak_heap_t *h, unsigned cls) {
#if HAK_UHEAP_OWNER_CACHE
  hak_uheap_oc_t *oc = uheap_oc(h);
  void *self = uheap_self();
  if (HAK_UNLIKELY(atomic_load_explicit(&oc->owner, memory_order_relaxed) != self)) return NULL;
  atomic_store_explicit(&oc->busy, 1, memory_order_relaxed);
  atomic_signal_fence(memory_order_seq_cst); /* busy is stored before owner is read again */
  void *b = NULL;
  if (HAK_LIKELY(atomic_load_explicit(&oc->owner, memory_order_relaxed) == self)) {
    b = oc->list[cls];
    if (HAK_LIKELY(b != NULL)) oc->list[cls] = *(void **)b;
  }
  atomic_store_explicit(&oc->busy, 0, memory_order_release);
  return b;
#else
  (void)h;
  (void)cls;
  return NULL;
#endif
}

/* The owner's cache can be used (membarrier registered; asked once). */
bool uheap_owner_cache_ok(void) HAK_HIDDEN;
/* h's cache taken from its owner: afterwards no thread is in it or will
 * enter it (user_heap_oc.c). No lock held. */
void uheap_revoke(hak_heap_t *h) HAK_HIDDEN;

/* Fork child: membarrier registered again (false: it is refused, the
 * owner caches go off); then for each heap, its owner kept only if it is
 * the forking thread (the others are not in the child). */
bool uheap_owner_cache_atfork_child(void) HAK_HIDDEN;
void uheap_oc_child(hak_heap_t *h, bool oc_on) HAK_HIDDEN;

hak_heap_t *uheap_new(void) HAK_HIDDEN;
/* A live first-class heap (cheap test of its state word; h must be a heap
 * pointer hak_heap_new returned at some time). */
bool  uheap_live(hak_heap_t *h) HAK_HIDDEN;
/* One block of class cls from h; NULL when the OS refuses memory or h is
 * not live (errno is the caller's). The owner's cache first; on the owner,
 * a miss refills the cache under the lock. */
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
