/* heap_api.c — the public face of first-class heaps (include/hakmem.h,
 * docs/api.md): argument rules, size to class, errno. The heaps themselves,
 * and their locking protocol, are in heap/user_heap.c; their huge blocks in
 * front/heap_huge.c.
 *
 * Bad input: a NULL heap is the process's ordinary allocator (as mimalloc's
 * default heap); a heap that was destroyed or deleted gets a message on
 * stderr and NULL with errno EINVAL (destroy and delete: the message only);
 * sizes that overflow, or above PTRDIFF_MAX, get NULL and ENOMEM; an
 * alignment that is not a power of two gets NULL and EINVAL. */
#include "front/front.h"
#include "front/heap_huge.h"
#include "front/init.h"
#include "guard/guard.h"
#include "heap/user_heap.h"
#include "large/large.h"
#include "policy/purger.h"
#include "hakmem.h"

#include <string.h>

#include "front/valgrind.h"
#include "front/zero.h"

#define HAK_MAX_REQUEST ((size_t)PTRDIFF_MAX)

static void *fail(int err) {
  errno = err;
  return NULL;
}

static void *not_live(const char *fn, hak_heap_t *h) {
  report_bad(fn, "not a live heap (destroyed or deleted?)", h);
  return fail(EINVAL);
}

HAK_EXPORT hak_heap_t *hak_heap_new(void) {
  if (!hak_init_done() && !hak_init()) return fail(ENOMEM);
  hak_heap_t *h = uheap_new();
  return h ? h : fail(ENOMEM);
}

/* Above the classes: a page of the heap, or (too big for one) a huge block
 * recorded as the heap's (heap_huge.c). The secure build's blocks carry its
 * canary (heap/canary.h): room for the repeat, sealed for n. */
static void *heap_large(hak_heap_t *h, size_t n, size_t align, bool zero) {
  if (n > HAK_MAX_REQUEST) return fail(ENOMEM);
  void *p;
  if (uheap_large_fits(n + HAK_TAIL, align)) {
#if HAK_SECURE
    canary_key_ensure();
#endif
    p = uheap_alloc_large(h, n + HAK_TAIL, align, zero);
#if HAK_SECURE
    if (p) canary_seal_large(p, large_usable(p), n);
#endif
  } else {
    p = heap_huge_alloc(h, n, align, zero);
  }
  purge_tick();
  return p ? p : fail(ENOMEM);
}

/* A block of class cls (at least n + HAK_TAIL bytes) for n bytes. */
static void *heap_class(hak_heap_t *h, unsigned cls, size_t n) {
  void *p = uheap_alloc(h, cls);
  if (HAK_UNLIKELY(!p)) return uheap_live(h) ? fail(ENOMEM) : not_live("hak_heap_malloc", h);
  HAK_MARK_ALLOCATED(p);
#if HAK_SECURE
  canary_seal(p, hak_class_size[cls], n);
#else
  (void)n;
#endif
  return p;
}

static void *heap_malloc_core(hak_heap_t *h, size_t n) {
  if (HAK_UNLIKELY(!uheap_live(h))) return not_live("hak_heap_malloc", h);
  if (HAK_LIKELY(n <= HAK_MID_MAX - HAK_TAIL)) return heap_class(h, size_class_of(n + HAK_TAIL), n);
  return heap_large(h, n, HAK_MIN_ALIGN, false);
}

HAK_EXPORT void *hak_heap_malloc(hak_heap_t *h, size_t n) {
#if HAK_UHEAP_OWNER_CACHE
  /* The owning thread's fast path: a pop from its cache (protocol in
   * heap/user_heap_oc.c); being the owner implies a live heap. */
  if (HAK_LIKELY(h != NULL) && HAK_LIKELY(n <= HAK_MID_MAX - HAK_TAIL)) {
    void *p = uheap_cached(h, size_class_of(n + HAK_TAIL));
    if (HAK_LIKELY(p != NULL)) {
      HAK_MARK_ALLOCATED(p);
      return p;
    }
  }
#endif
  if (!h) return hak_malloc(n);
  HAK_VG_RETURN_ALLOC(heap_malloc_core(h, n), n, false);
}

static void *heap_calloc_core(hak_heap_t *h, size_t count, size_t size) {
  size_t total;
  if (HAK_UNLIKELY(__builtin_mul_overflow(count, size, &total))) return fail(ENOMEM);
  if (HAK_UNLIKELY(!uheap_live(h))) return not_live("hak_heap_calloc", h);
  if (total > HAK_CLASS_ZERO_MAX - HAK_TAIL) return heap_large(h, total, HAK_MIN_ALIGN, true);
  void *p = heap_class(h, size_class_of(total + HAK_TAIL), total);
  if (p) zero_class_block(p, total);
  return p;
}

HAK_EXPORT void *hak_heap_calloc(hak_heap_t *h, size_t count, size_t size) {
  if (!h) return hak_calloc(count, size);
  HAK_VG_RETURN_ALLOC(heap_calloc_core(h, count, size), count * size, true);
}

static void *heap_aligned_core(hak_heap_t *h, size_t align, size_t size) {
  if (align == 0 || (align & (align - 1))) return fail(EINVAL);
  if (HAK_UNLIKELY(!uheap_live(h))) return not_live("hak_heap_aligned_alloc", h);
  if (align <= HAK_MIN_ALIGN) return heap_malloc_core(h, size);
  /* As aligned_alloc: a class whose size is a multiple of align is
   * align-aligned (pages start on 64 KiB, slice 0's on 8 KiB boundaries). */
  if (size <= HAK_ALIGN_CLASS_MAX - HAK_TAIL && align <= HAK_SEG_HDR_SIZE) {
    size_t need = size + HAK_TAIL;
    unsigned cls = size_class_of(need < align ? align : need);
    while (cls < HAK_NCLASSES && (hak_class_size[cls] & (align - 1))) cls++;
    if (cls < HAK_NCLASSES && hak_class_size[cls] <= HAK_ALIGN_CLASS_MAX) return heap_class(h, cls, size);
  }
  return heap_large(h, size, align, false);
}

HAK_EXPORT void *hak_heap_aligned_alloc(hak_heap_t *h, size_t align, size_t size) {
  if (!h) return hak_aligned_alloc(align, size);
  HAK_VG_RETURN_ALLOC(heap_aligned_core(h, align, size), size, false);
}

/* p stays where it is if it is h's and the new size fits without wasting
 * more than half of it; otherwise it moves into h (from wherever it was:
 * another heap, the process, or not HAKMEM's at all). */
HAK_EXPORT void *hak_heap_realloc(hak_heap_t *h, void *p, size_t n) {
  if (!h) return hak_realloc(p, n);
  if (!p) return hak_heap_malloc(h, n);
  if (n == 0) { /* as realloc: freed, NULL */
    hak_free(p);
    return NULL;
  }
  if (HAK_UNLIKELY(!uheap_live(h))) return not_live("hak_heap_realloc", h);
  size_t old;
  if (registry_has(p)) {
#if HAK_WORD_CHECKS /* secure: usable_ours checks the block start first */
    unsigned cls = segment_of(p)->slice_cls[slice_index(p)];
    if (cls != HAK_CLASS_NONE && !block_is_start_of_class(p, cls)) {
      report_invalid("hak_heap_realloc", p); /* the block stays as it is */
      return fail(EINVAL);
    }
#endif
    old = usable_ours(p);
#if !HAK_VALGRIND
    if (n <= old && (n > old / 2 || old <= 16) && (uheap_of(p) == h || heap_huge_owner(p) == h)) return p;
#endif
  } else {
    old = hak_usable_size(p);
  }
  void *q = hak_heap_malloc(h, n);
  if (!q) return NULL; /* the old block is untouched */
  memcpy(q, p, old < n ? old : n);
  hak_free(p);
  return q;
}

HAK_EXPORT void hak_heap_destroy(hak_heap_t *h) {
  if (!h) return;
  if (uheap_destroy(h)) { /* its huge blocks go too, before the record can be reused */
    heap_huge_release(h, true);
    uheap_finish(h);
  }
  purge_tick();
}

HAK_EXPORT void hak_heap_delete(hak_heap_t *h) {
  if (!h) return;
  if (uheap_delete(h)) {
    heap_huge_release(h, false);
    uheap_finish(h);
  }
}
