/* malloc.c — malloc and free: the two fast paths, and the doors to the cold
 * side they share (refill, flush, large blocks, foreign pointers). */
#include "front/front.h"
#include "guard/guard.h"
#include "guard/unmapped.h"
#include "front/heap_huge.h"
#include "heap/user_heap.h"
#include "large/large.h"
#include "policy/purger.h"

#include <stdlib.h>
#include <string.h>

/* last: renames the entry points in the prefix-only build */
#include "front/prefix.h"
#include "front/valgrind.h"

HAK_EXPORT void *malloc(size_t n) {
  HAK_VG_RETURN_ALLOC(alloc_small_or_large(n), n, false);
}

HAK_EXPORT void free(void *p) {
  HAK_VG_FREEING(p);
  HAK_VG_ENTER();
  free_block(p);
  HAK_VG_LEAVE();
}

#if !HAK_PREFIX_ONLY
HAK_EXPORT void *hak_malloc(size_t n) __attribute__((alias("malloc"), copy(malloc)));
HAK_EXPORT void hak_free(void *p) __attribute__((alias("free"), copy(free)));
#endif

HAK_NOINLINE void *alloc_bin_slow(hak_fast_bin_t *b) {
  unsigned cls = class_of_bin_off(fast_bin_off(b));
  void *p = heap_refill_alloc(&hak_tls, cls);
  if (HAK_UNLIKELY(!p)) errno = ENOMEM;
  else HAK_MARK_ALLOCATED(p);
  purge_tick();
  return p;
}

#if HAK_CHECKS
uintptr_t hak_free_key = 0x9e3779b97f4a7c15u;

/* Freed before and not handed out since: in the thread's cache, or (a class
 * whose cache is small or empty sends blocks straight back) on its page. */
static bool freed_already(hak_bin_t *b, void *p) {
  for (uint32_t i = 0; i < b->count; i++)
    if (b->slots[i] == p) return true;
  return heap_block_on_page(hak_tls.heap, p);
}

/* A block freed before whose page has emptied and gone back since (to a
 * page cache or its segment: no page owns the slice now), still carrying the
 * free key. The key is read with memcpy: p may be unaligned. */
static bool freed_page_block(const void *p) {
  hak_segment_t *s = segment_of(p);
  if (s->kind != HAK_SEG_SMALL || s->slice_page[slice_index(p)] != NULL) return false;
  uintptr_t key;
  memcpy(&key, (const char *)p + sizeof(uintptr_t), sizeof key);
  return key == hak_free_key;
}

HAK_NOINLINE void free_checked(void *p) {
  if (!block_is_live_start(p)) {
    if (registry_has(p)) report_invalid("free", p);
    else free_slow(p); /* the slice map was behind the registry: the slow path decides */
    return;
  }
  if (((uintptr_t *)p)[1] == HAK_FREE_MARK(p)) {
    free_suspect(p);
    return;
  }
  hak_bin_t *b = bin_of_block(p);
  ((uintptr_t *)p)[1] = HAK_FREE_MARK(p);
  if (b->count < b->cap) b->slots[b->count++] = p;
  else free_slow(p);
}

HAK_NOINLINE void free_suspect(void *p) {
  hak_bin_t *b = bin_of_block(p);
  if (freed_already(b, p)) {
    report_bad("free", "double free", p);
    return;
  }
  /* User data that happened to equal the key: an ordinary free. */
  ((uintptr_t *)p)[1] = HAK_FREE_MARK(p);
  if (b->count < b->cap) b->slots[b->count++] = p;
  else free_slow(p);
}
#endif

HAK_NOINLINE void *alloc_large_slow(size_t n) {
  void *p = large_alloc(n, HAK_MIN_ALIGN, false);
  if (HAK_UNLIKELY(!p)) errno = ENOMEM;
  purge_tick();
  return p;
}

/* Everything the fast path refused: a full cache, a large block, a thread
 * without a heap, a pointer that is not ours (or not known yet). The
 * registry is the ground truth here, not the slice map. */
HAK_NOINLINE void free_slow(void *p) {
  if (HAK_LIKELY(registry_has(p))) {
    unsigned cls = segment_of(p)->slice_cls[slice_index(p)];
    if (cls == HAK_CLASS_NONE) {
#if HAK_CHECKS
      if (HAK_UNLIKELY(freed_page_block(p))) {
        report_bad("free", "double free", p);
        return;
      }
#endif
      heap_huge_forget(p); /* if a first-class heap had it */
      large_free(p);
      purge_tick_free();
      return;
    }
#if HAK_CHECKS
    /* Not a block start (interior, header): never written, never cached. */
    if (HAK_UNLIKELY(!block_is_live_start(p))) {
      report_invalid("free", p);
      return;
    }
#endif
    /* A block of a first-class heap: its slice map entry is a cap-0
     * sentinel, so it always comes here, and goes back to its heap. */
    if (HAK_UNLIKELY(uheap_class_block(p))) {
#if HAK_SECURE
      secure_check("free", p);
#endif
      if (uheap_free(p)) {
        purge_tick();
        return;
      }
    }
#if HAK_SECURE
    secure_check("free", p);
    ((uintptr_t *)p)[1] = HAK_FREE_MARK(p);
#elif HAK_CHECKS
    /* The block may go straight back to its page (a class cache of cap 0),
     * where the fast path's check cannot see it: stamp and check here too. */
    if (HAK_UNLIKELY(((uintptr_t *)p)[1] == HAK_FREE_MARK(p)) && freed_already(bin_of(&hak_tls, cls), p)) {
      report_bad("free", "double free", p);
      return;
    }
    ((uintptr_t *)p)[1] = HAK_FREE_MARK(p);
#endif
    heap_flush_free(&hak_tls, cls, p);
    purge_tick_free();
    return;
  }
  if (!p) return;
  heap_huge_forget(p);
  if (overaligned_free(p)) return;
  /* A block of ours freed again after its memory went back to the OS:
   * glibc's free would crash on it. */
  if (HAK_UNLIKELY(unmapped_recently(p))) {
    report_invalid("free", p);
    return;
  }
  foreign_free(p);
}

#if HAK_SECURE
void secure_reject(const char *fn, const char *problem, const void *p) {
  report_bad(fn, problem, p); /* aborts in this build */
  abort();
}

void hak_sized_free_check(void *p, size_t n) {
  if (!p || !registry_has(p)) return;
  unsigned cls = segment_of(p)->slice_cls[slice_index(p)];
  if (cls != HAK_CLASS_NONE) secure_check("delete", p); /* a block start, not freed */
  bool ok = cls != HAK_CLASS_NONE ? n <= HAK_MID_MAX && size_class_of(n) == cls : n <= large_usable(p);
  if (!ok) secure_reject("delete", "size does not match the block", p);
}
#endif

size_t usable_ours(const void *p) {
  unsigned cls = segment_of(p)->slice_cls[slice_index(p)];
  if (cls != HAK_CLASS_NONE) return hak_class_size[cls];
  return large_usable(p);
}
