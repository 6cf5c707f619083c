/* malloc.c — malloc and free: the two fast paths, and the doors to the cold
 * side they share (refill, flush, large blocks, foreign pointers). */
#include "front/front.h"
#include "guard/guard.h"
#include "guard/unmapped.h"
#include "guard/zero_size.h"
#include "front/heap_huge.h"
#include "heap/user_heap.h"
#include "large/large.h"
#include "policy/config.h"
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

/* The refill, once the pending list is empty too. */
static HAK_NOINLINE void *alloc_refill(unsigned cls) {
  bool cold;
  void *p = heap_refill_alloc(&hak_tls, cls, &cold);
  if (HAK_UNLIKELY(!p)) {
    errno = ENOMEM;
  } else {
    if (HAK_UNLIKELY(hak_config.zero_on_free)) zero_on_free_check(p, hak_class_size[cls]);
    HAK_MARK_ALLOCATED(p);
  }
  if (cold) purge_tick_refill();
  return p;
}

/* A dry class's miss once its own pending list is empty: the next block of
 * its lender's (heap/thread.c, "Borrowing"), while the class stays dry and
 * no remote frees wait; else the refill. */
static HAK_NOINLINE void *alloc_lent(hak_heap_t *h, hak_pend_t *q, unsigned off) {
  unsigned cls = class_of_bin_off(off);
  hak_pend_t *l = &h->pend[q->lend];
  if (l->head && !hak_tls.aligned && atomic_load_explicit(&h->dry[cls], memory_order_relaxed) &&
      !atomic_load_explicit(&h->remote_pages, memory_order_relaxed)) {
    void *p;
    PEND_POP(l, p);
    HAK_MARK_ALLOCATED(p);
    return p;
  }
  q->lend = 0;
  return alloc_refill(cls);
}

/* The pending list before a refill (heap.h: hak_pend_t), in a leaf: a
 * stream of pops saves no register. No purge_tick here: an armed purge
 * deadline would send every pop to purge_tick_slow; the refills tick. */
HAK_NOINLINE void *alloc_bin_slow(hak_fast_bin_t *b) {
  unsigned off = fast_bin_off(b);
  hak_heap_t *h = hak_tls.heap; /* NULL: no heap (yet, or any more) */
  hak_pend_t *q = h ? (hak_pend_t *)((char *)h->pend + off) : NULL; /* pend[] is indexed as bins[] */
  if (HAK_UNLIKELY(!q || q->head == NULL)) {
    if (q && q->lend) return alloc_lent(h, q, off);
    return alloc_refill(class_of_bin_off(off));
  }
  void *p;
  PEND_POP(q, p);
  HAK_MARK_ALLOCATED(p);
  return p;
}

#if HAK_SECURE
HAK_NOINLINE void *alloc_bin_slow_n(hak_fast_bin_t *b, size_t n) {
  void *p = alloc_bin_slow(b);
  if (p) canary_seal(p, hak_class_size[class_of_bin_off(fast_bin_off(b))], n);
  return p;
}
#endif

#if HAK_CHECKS
#if HAK_SECURE /* the standard build's mark is the window's address (guard/registry.h) */
uintptr_t hak_free_key = 0x9e3779b97f4a7c15u;
#endif

/* Freed before and not handed out since: in the thread's cache, in its
 * pending list (heap.h), or (a class whose cache is small or empty sends
 * blocks straight back) on its page. A class that borrows a block hands it
 * out at once, never caches it (heap/thread.c, "Borrowing"). */
static bool in_cache(const hak_bin_t *b, const void *p) {
  for (void **s = b->ptr; s[-1]; s--) /* down to the NULL below the area */
    if (s[-1] == p) return true;
  return false;
}
static bool freed_already(hak_bin_t *b, void *p) {
  if (in_cache(b, p)) return true;
  size_t c = (size_t)(b - hak_tls.bins) - 1; /* b's class */
  if (c < HAK_NCLASSES && hak_tls.state == HAK_THREAD_LIVE) {
    for (void *q = pend_of(&hak_tls, (unsigned)c)->head; q; q = block_next(page_of(q), q))
      if (q == p) return true;
  }
  return heap_block_on_page(hak_tls.heap, p);
}

/* A block freed before whose page has emptied and gone back since (to a
 * page cache or its segment: no page owns the slice now), still carrying the
 * free mark. The mark is read with memcpy: p may be unaligned. */
static bool freed_page_block(const void *p) {
  hak_segment_t *s = segment_of(p);
  if (s->kind != HAK_SEG_SMALL || s->slice_page[slice_index(p)] != NULL) return false;
  uintptr_t key;
  memcpy(&key, (const char *)p + sizeof(uintptr_t), sizeof key);
  return key == HAK_FREE_MARK(p);
}

#if HAK_WORD_CHECKS
HAK_NOINLINE void free_checked(void *p, uintptr_t off) {
  /* Not a small block of ours (foreign, large, NULL, a first-class heap's
   * block): the fast test fails for those too, the slow path decides. */
  if (off - HAK_SLICE_MAP_SCALE >= HAK_NCLASSES * HAK_SLICE_MAP_SCALE) {
    free_slow(p);
    return;
  }
  /* The slice map gave p a class: its segment is a small one
   * (block_live_page). A block of a class of several slices per page (all
   * of them come here) or one that failed only because the check copy was
   * not filled yet: below its page's bump at a multiple of the size
   * (block_carved_start), with the slice map's class and bin, as the fast
   * path has them; anything else (interior pointers, a header, past the
   * bump, another thread's page carved on meanwhile) the full test. */
  const hak_slice_window_t *w = __atomic_load_n(&hak_slice_window.w, __ATOMIC_ACQUIRE);
  hak_page_t *pg = block_slice_page(p);
  if (HAK_UNLIKELY(pg == NULL || !block_carved_start(p, pg, w, off))) {
    unsigned cls;
    if (!block_live_page_of(pg, p, hak_tls.heap, &cls)) {
      report_invalid("free", p);
      return;
    }
    /* The bin of the page's class (the slice map's, unless the two
     * disagree: a page re-made meanwhile). */
    off = bin_off_of_class(cls);
  }
  if (((uintptr_t *)p)[1] == (uintptr_t)w) { /* HAK_FREE_MARK: w (hak_word_mark) */
    free_suspect(p);
    return;
  }
  /* free_block has not looked at the bin's room: a full one sends p to
   * free_slow, which tests p again (a class of pages of several slices
   * with a full cache, or a pointer that failed the fast test only because
   * the check copy was not filled yet). The push as free_block's. */
  hak_fast_bin_t *b = fast_bin_at(off);
  void **s = b->ptr;
  if (HAK_UNLIKELY(*s == HAK_SLOT_FULL)) {
    free_slow(p);
    return;
  }
  ((uintptr_t *)p)[1] = (uintptr_t)w;
  FAST_SLOT_PUSH(b, s, p);
}
#endif

HAK_NOINLINE void free_suspect(void *p) {
  hak_bin_t *b = bin_of_block(p);
  if (freed_already(b, p)) {
    report_bad("free", "double free", p);
    return;
  }
  /* User data that happened to equal the mark: an ordinary free. */
  ((uintptr_t *)p)[1] = HAK_FREE_MARK(p);
  if (bin_room(b)) bin_push(b, p);
  else free_slow(p);
}
#endif

#if HAK_SECURE
/* malloc(0): a block of no access, or (the regions full or refused) an
 * ordinary block for 0 bytes. */
void *zero_size_block(void) {
  void *p = zero_size_alloc();
  return p ? p : alloc_class_n(size_class_of(HAK_TAIL), 0);
}

/* What a free or realloc (fn) of p does not accept: a zero-size block
 * freed already, or a pointer into one. */
_Noreturn static void zero_size_reject(const char *fn, const void *p, zs_state_t st) {
  secure_reject(fn, st == ZS_FREE ? (fn[0] == 'r' ? "freed block" : "double free") : "invalid pointer", p);
}

void zero_size_check(const char *fn, const void *p) {
  zs_state_t st = zero_size_state(p);
  if (st != ZS_LIVE) zero_size_reject(fn, p, st);
}
#endif

void *alloc_large_n(size_t n, size_t align, bool zero) {
#if HAK_SECURE
  /* The word goes before the block, the repeat after n.
   * Blocks aligned to 2 MiB or more (a list of their own) go without. */
  if (align >= HAK_SEG_SIZE) return large_alloc(n, align, zero);
  if (n > (size_t)PTRDIFF_MAX) return NULL;
  canary_key_ensure();
  void *p = large_alloc(n + HAK_TAIL, align, zero);
  if (p) canary_seal_large(p, large_usable(p), n);
  return p;
#else
  return large_alloc(n, align, zero);
#endif
}

HAK_NOINLINE void *alloc_large_slow(size_t n) {
#if HAK_SECURE
  if (n == 0) return zero_size_block();
#endif
  void *p = alloc_large_n(n, HAK_MIN_ALIGN, false);
  if (HAK_UNLIKELY(!p)) errno = ENOMEM;
  purge_tick();
  return p;
}

HAK_NOINLINE void free_full(void *p, hak_fast_bin_t *b) {
  unsigned off = fast_bin_off(b);
  if (HAK_UNLIKELY(off - HAK_BIN_BYTES >= HAK_NCLASSES * HAK_BIN_BYTES)) {
    free_slow(p);
    return;
  }
  unsigned cls = class_of_bin_off(off);
#if HAK_CHECKS
  /* As free_slow: the block may go straight back to its page (a class cache
   * of cap 0), where the fast path's check cannot see it. */
  if (HAK_UNLIKELY(((uintptr_t *)p)[1] == HAK_FREE_MARK(p)) && freed_already(bin_of(&hak_tls, cls), p)) {
    report_bad("free", "double free", p);
    return;
  }
#endif
  if (HAK_UNLIKELY(hak_config.zero_on_free)) zero_on_free_wipe(p, hak_class_size[cls]);
#if HAK_CHECKS
  ((uintptr_t *)p)[1] = HAK_FREE_MARK(p);
#endif
  heap_flush_free(&hak_tls, cls, p);
  purge_tick_flush();
}

/* Everything the fast path refused: a full cache, a large block, a thread
 * without a heap, a pointer that is not ours (or not known yet). The
 * registry is the ground truth here, not the slice map. */
HAK_NOINLINE void free_slow(void *p) {
  /* One read of the slice map for both questions (ours? a first-class
   * heap's page?): its loads are atomic, so the compiler does not merge a
   * second lookup with the first, and the checks' calls in between kept it
   * from doing so anyway. */
  unsigned v = slice_map_entry(p);
  if (HAK_LIKELY(v != 0)) {
    unsigned cls = segment_of(p)->slice_cls[slice_index(p)];
    if (cls == HAK_CLASS_NONE) {
#if HAK_CHECKS
      if (HAK_UNLIKELY(freed_page_block(p))) {
        report_bad("free", "double free", p);
        return;
      }
#endif
#if HAK_SECURE
      /* A live large or huge block: its canary, then marked freed. Anything
       * else is for large_free to report. */
      size_t u = large_live_usable(p);
      if (u) {
        if (HAK_UNLIKELY(!canary_intact_large(p, u))) secure_reject_large("free", p, u);
        canary_mark_free(p, u);
      }
#endif
      heap_huge_forget(p); /* if a first-class heap had it */
      large_free(p);
      purge_tick_free();
      return;
    }
#if HAK_WORD_CHECKS
    /* Not a block start (interior, header): never written, never cached.
     * (A full cache sends a fifth of a cross-thread consumer's frees here.)
     * (Secure build: secure_free_check below tests the block start against the
     * page before it reads anything, as on the fast path.) */
    if (HAK_UNLIKELY(!block_is_start_of_class(p, cls))) {
      report_invalid("free", p);
      return;
    }
#endif
#if HAK_SECURE
    /* Checked and marked free in one pass (the wipe leaves the next block's word). */
    size_t bsize = secure_free_check(p, &hak_block_check[cls + 1]);
    if (HAK_UNLIKELY(hak_config.zero_on_free)) zero_on_free_wipe(p, bsize);
#endif
    /* A block of a first-class heap: its slice map entry is a sentinel
     * without slots, so it always comes here, and goes back to its heap. */
    if (HAK_UNLIKELY(v == HAK_UHEAP_MAP_V * HAK_SLICE_MAP_SCALE)) { /* uheap_class_block */
      if (uheap_free(p)) {
        purge_tick();
        return;
      }
    }
#if HAK_SECURE /* checked and marked above */
#elif HAK_CHECKS
    /* The block may go straight back to its page (a class cache of cap 0),
     * where the fast path's check cannot see it: stamp and check here too. */
    if (HAK_UNLIKELY(((uintptr_t *)p)[1] == HAK_FREE_MARK(p)) && freed_already(bin_of(&hak_tls, cls), p)) {
      report_bad("free", "double free", p);
      return;
    }
    if (HAK_UNLIKELY(hak_config.zero_on_free)) zero_on_free_wipe(p, hak_class_size[cls]);
    ((uintptr_t *)p)[1] = HAK_FREE_MARK(p);
#else
    if (HAK_UNLIKELY(hak_config.zero_on_free)) zero_on_free_wipe(p, hak_class_size[cls]);
#endif
    heap_flush_free(&hak_tls, cls, p);
    purge_tick_flush();
    return;
  }
  if (!p) return;
#if HAK_SECURE
  zs_state_t zs = zero_size_free(p);
  if (zs == ZS_LIVE) return;
  if (zs != ZS_NOT_OURS) zero_size_reject("free", p, zs);
#endif
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
HAK_NOINLINE void secure_free_fast(void *p, size_t bsize) { secure_free_fast_inline(p, bsize); }

HAK_NOINLINE void free_secure_paged(void *p, unsigned off) {
  secure_free_check(p, block_check_at(off));
  hak_bin_t *b = bin_of_block(p); /* free_block saw room in it */
  bin_push(b, p);
}

void secure_reject(const char *fn, const char *problem, const void *p) {
  report_bad(fn, problem, p); /* aborts in this build */
  abort();
}

/* What the word says: m 0, a double free; an m out of range or a low byte
 * that is not the key's (word_code), a write before the block (or past the
 * end of the slot before it); else the repeat after the request changed. */
_Noreturn static void secure_reject_word(const char *fn, const void *p, size_t bsize) {
  uint64_t m = canary_code(p);
  if (m == 0) secure_reject(fn, fn[0] == 'r' ? "freed block" : "double free", p);
  if (m - 16 > bsize - 16) secure_reject(fn, "heap underflow before block (or overflow of the block before it)", p);
  secure_reject(fn, "heap overflow after block", p);
}

void secure_reject_block(const char *fn, const void *p) {
  hak_page_t *pg = page_of(p);
  size_t bsize = pg->bsize;
  uintptr_t off = (uintptr_t)p - (uintptr_t)pg->start;
  if (off >= (uintptr_t)(pg->bump - pg->start) || off % bsize != 0 ||
      (off == 0 && bsize <= HAK_GUARD_BLOCK_MAX)) /* the page's guard block */
    secure_reject(fn, "invalid pointer (not a block)", p);
  secure_reject_word(fn, p, bsize);
}

void secure_reject_large(const char *fn, const void *p, size_t usable) { secure_reject_word(fn, p, usable); }

/* The size p was asked for, once p passed the checks of a free (a pointer
 * that is not a live block of ours stops the process here). */
static size_t secure_request(const char *fn, const void *p) {
  unsigned cls = segment_of(p)->slice_cls[slice_index(p)];
  if (cls != HAK_CLASS_NONE) {
    return secure_check_request(fn, (void *)p, &hak_block_check[cls + 1]);
  }
  size_t u = large_live_usable(p);
  if (!u) secure_reject(fn, "invalid pointer", p);
  if (!canary_intact_large(p, u)) secure_reject_large(fn, p, u);
  return canary_request(p, u);
}

void hak_sized_free_check(void *p, size_t n) {
  if (!p || !registry_has(p)) return;
  if (n != secure_request("delete", p)) secure_reject("delete", "size does not match the block", p);
}
#endif

/* Secure build: the size asked for (see secure_request). */
size_t usable_ours(const void *p) {
#if HAK_SECURE
  return secure_request("malloc_usable_size", p);
#else
  unsigned cls = segment_of(p)->slice_cls[slice_index(p)];
  if (cls != HAK_CLASS_NONE) return hak_class_size[cls];
  return large_usable(p);
#endif
}
