/* front.h — the shared inline core of the entry points: one decision per call
 * (size -> class -> pop/push on the thread's cache), everything else behind a
 * call to the cold side. */
#ifndef HAK_FRONT_H
#define HAK_FRONT_H

#include "hak_internal.h"
#include "guard/block_check.h"
#include "guard/registry.h"
#include "heap/heap.h"
#include "heap/size_class.h"
#include "stats/stats.h"

#include <errno.h>

void  free_slow(void *p) HAK_HIDDEN;

#if HAK_CHECKS
/* Double-free guard (standard and observe builds): free() stamps the second
 * word of a block with a per-process mark (HAK_FREE_MARK: the slice map
 * window's address) and malloc() wipes it, so a block
 * freed twice arrives with the mark still there; the free path then looks
 * for it in the thread's cache, and a confirmed double free is reported and
 * ignored instead of handing one block to two owners. User data equal to the
 * mark costs only that look-up. */
/* A free whose block carries the mark: report it if it is a double free,
 * finish it otherwise. Called as a tail call, so the fast path stays a leaf. */
void free_suspect(void *p) HAK_HIDDEN;
/* A free the fast block-start test did not clear (a class with pages of
 * several slices, a segment header, not a block start, or not a small
 * block of ours at all), off its slice map entry: for a class, the full
 * test, then a report or the push (or free_slow when the bin is full);
 * anything else goes to free_slow. Also a tail call: the test comes before
 * the bin's room, so off is still in its register there, at no cost to
 * the path that passes. */
void free_checked(void *p, uintptr_t off) HAK_HIDDEN;
#endif
#ifndef HAK_SECURE
#define HAK_SECURE 0
#endif
/* The secure build marks blocks in the word before them instead
 * (heap/canary.h). */
#if HAK_WORD_CHECKS
#define HAK_MARK_ALLOCATED(p) (((uintptr_t *)(p))[1] = 0)
/* (the mark itself: HAK_FREE_MARK, hak_internal.h) */
#else
#define HAK_MARK_ALLOCATED(p) ((void)0)
#endif
void *alloc_large_slow(size_t n) HAK_HIDDEN;
#include "heap/canary.h"
#if HAK_SECURE
/* Secure build (libhakmem-secure.so): free() and realloc() act only on the
 * start of a block its page has handed out, intact: the word before it and
 * the repeat after the request (heap/canary.h). A freed block's word says
 * free until it is handed out again, so a second free is seen wherever the
 * block is. Any failure ends the process with one line on stderr. */
_Noreturn void secure_reject(const char *fn, const char *problem, const void *p) HAK_HIDDEN HAK_COLD;
/* What is wrong with a small block secure_check_core refused: one line, abort. */
_Noreturn void secure_reject_block(const char *fn, const void *p) HAK_HIDDEN HAK_COLD;
/* The same for a large or huge block of `usable` bytes. */
_Noreturn void secure_reject_large(const char *fn, const void *p, size_t usable) HAK_HIDDEN HAK_COLD;

/* p is a block start of its page (c: its class's divisibility test,
 * guard/block_check.h), not the page's guard block, handed out, its word
 * and repeat intact. Returns the block size. Whether the page has carved p
 * is left to the word: a block never carved holds no valid word (zero, or
 * stale data of another class or of a freed block), and p's word and
 * repeat stay inside the page. */
HAK_INLINE size_t secure_check_core(const char *fn, void *p, const hak_block_check_t *c, bool mark_free, size_t *request) {
  hak_page_t *pg = page_of(p);
  uintptr_t off = (uintptr_t)p - (uintptr_t)pg->start; /* below start: huge, no block index */
  size_t bsize = pg->bsize;
  if (HAK_UNLIKELY(block_index(off, c) >= pg->capacity)) secure_reject_block(fn, p);
  if (HAK_UNLIKELY(off == 0 && bsize <= HAK_GUARD_BLOCK_MAX)) secure_reject_block(fn, p); /* the guard */
  uint64_t k, m;
  if (HAK_UNLIKELY(!canary_word_ok(p, bsize, &k, &m))) secure_reject_block(fn, p);
  if (mark_free) __atomic_store_n(word_of(p), k, __ATOMIC_RELAXED); /* m 0: free */
  if (request) *request = m - 16;
  return bsize;
}
/* The size p was asked for, once it passed the checks (its gap is at hand:
 * canary_request would load the word and form the mix again). */
HAK_INLINE size_t secure_check_request(const char *fn, void *p, const hak_block_check_t *c) {
  size_t n;
  secure_check_core(fn, p, c, false, &n);
  return n;
}
/* The same, then the word marked free (a free). */
HAK_INLINE size_t secure_free_check(void *p, const hak_block_check_t *c) {
  return secure_check_core("free", p, c, true, NULL);
}
/* free()'s fast path, once p passed the slice-relative block-start test
 * (block_fast_ok: a one-slice class, not slice 0, so p's page starts at
 * p's slice and p is a block boundary inside it): the same word check as
 * secure_check_core (canary_word_ok) without the page record, bsize from
 * the class table.
 * The first block of the slice is the page's guard (canary.h). */
void secure_free_fast(void *p, size_t bsize) HAK_HIDDEN;
HAK_INLINE void secure_free_fast_inline(void *p, size_t bsize) {
  if (HAK_UNLIKELY(((uintptr_t)p & (HAK_SLICE_SIZE - 1)) == 0)) secure_reject_block("free", p);
  uint64_t k, m;
  if (HAK_UNLIKELY(!canary_word_ok(p, bsize, &k, &m))) secure_reject_block("free", p);
  __atomic_store_n(word_of(p), k, __ATOMIC_RELAXED); /* m 0: free */
}
/* The rest of the small blocks whose bin has room (slice 0, classes whose
 * pages span several slices, and pointers that are not block starts):
 * secure_free_check against the page record, then the cache. */
void free_secure_paged(void *p, unsigned off) HAK_HIDDEN;
/* C++ sized delete: the size must be the one the block was asked for. */
void hak_sized_free_check(void *p, size_t n) HAK_HIDDEN;
#endif

/* The fast paths reach the thread's bins through the thread pointer's
 * segment register where the compiler can (x86_64, initial-exec TLS): the
 * bin is then addressed as %fs:offset(bin) with the TLS block's offset from
 * the GOT, one instruction fewer on each of malloc and free than forming
 * the TLS address first. Elsewhere (aarch64, the dynamic-TLS build, C++,
 * sanitizers, which do not see that address space) a plain pointer. Only
 * the bin's fields live in TLS: b->ptr points at ordinary memory. */
#if defined(__x86_64__) && defined(__SEG_FS) && !defined(__cplusplus) && !HAK_DYNAMIC_TLS && \
    !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
typedef hak_bin_t __seg_fs hak_fast_bin_t;
_Static_assert(offsetof(hak_tls_t, bins) == 0, "the bins open the TLS block");
HAK_INLINE hak_fast_bin_t *fast_bin_at(uintptr_t off) {
  uintptr_t a = off;
  __asm__("addq hak_tls@gottpoff(%%rip), %0" : "+r"(a)); /* + the TLS block's offset */
  return (hak_fast_bin_t *)a;
}
HAK_INLINE unsigned fast_bin_off(hak_fast_bin_t *b) { return (unsigned)((uintptr_t)b - (uintptr_t)fast_bin_at(0)); }
/* b->ptr += d (a literal): one add to memory. From C, GCC keeps the old
 * ptr in a register and forms the new one apart, a load, an add and a
 * store, one instruction more on each fast path. The clobber keeps it
 * after the loads and stores around it; malloc and free are leaves. */
_Static_assert(offsetof(hak_bin_t, ptr) == 8, "ptr at 8(bin)");
#define FAST_PTR_STEP(b, d) \
  __asm__ volatile("addq %1, %%fs:8(%0)" : : "r"((uintptr_t)(b)), "n"(8 * (d)) : "memory")
#else
typedef hak_bin_t hak_fast_bin_t;
HAK_INLINE hak_fast_bin_t *fast_bin_at(uintptr_t off) { return (hak_bin_t *)((char *)hak_tls.bins + off); }
HAK_INLINE unsigned fast_bin_off(hak_fast_bin_t *b) { return (unsigned)((char *)b - (char *)hak_tls.bins); }
#define FAST_PTR_STEP(b, d) ((b)->ptr += (d))
#endif
/* free's push of p into slot s (= b->ptr, not the FULL word): the slot, the
 * cached top, one step up. */
#define FAST_SLOT_PUSH(b, s, p) \
  do {                          \
    *(s) = (p);                 \
    (b)->top = (p);             \
    FAST_PTR_STEP(b, 1);        \
  } while (0)

/* malloc's miss: refill the thread's bin b (its class follows from b). */
void *alloc_bin_slow(hak_fast_bin_t *b) HAK_HIDDEN;

/* Pop from the bin at offset off (bin_off_of_class): the block comes from
 * the bin itself; the load of the next top from the slot array is off the
 * returned block's path (heap.h: hak_bin_t). */
HAK_INLINE void *alloc_bin(unsigned off) {
  hak_fast_bin_t *b = fast_bin_at(off);
  void *p = b->top;
  if (HAK_LIKELY(p != NULL)) {
    HAK_OBSERVE_INC(class_of_bin_off(off), HAK_CS_ALLOC_FAST);
    b->top = b->ptr[-2];
    FAST_PTR_STEP(b, -1);
    HAK_MARK_ALLOCATED(p);
    return p;
  }
  return alloc_bin_slow(b); /* the class follows from b: off stays out of a register */
}

HAK_INLINE void *alloc_class(unsigned cls) { return alloc_bin(bin_off_of_class(cls)); }

#if HAK_SECURE
/* The secure build hands a block out for n bytes: its word records n
 * (heap/canary.h), so the class is the one for n + HAK_TAIL. */
void *alloc_bin_slow_n(hak_fast_bin_t *b, size_t n) HAK_HIDDEN;
HAK_INLINE void *alloc_bin_n(unsigned off, size_t n) {
  hak_fast_bin_t *b = fast_bin_at(off);
  void *p = b->top;
  if (HAK_LIKELY(p != NULL)) {
    b->top = b->ptr[-2];
    FAST_PTR_STEP(b, -1);
    canary_seal_free(p, block_check_at(off)->size, n);
    return p;
  }
  return alloc_bin_slow_n(b, n);
}
/* A block of class cls (at least n + HAK_TAIL bytes) for n bytes. */
HAK_INLINE void *alloc_class_n(unsigned cls, size_t n) { return alloc_bin_n(bin_off_of_class(cls), n); }
/* n - 1: a request for 0 bytes wraps around and takes the slow side, where
 * it gets a block of no access (guard/zero_size.c). */
HAK_INLINE void *alloc_small_or_large(size_t n) {
  if (HAK_LIKELY(n - 1 < HAK_SMALL_TAB_MAX - HAK_TAIL)) return alloc_bin_n(hak_small_bin_tab[(n + HAK_TAIL + 15) >> 4], n);
  if (HAK_LIKELY(n - 1 < HAK_MID_MAX - HAK_TAIL)) return alloc_class_n(size_class_mid(n + HAK_TAIL), n);
  return alloc_large_slow(n);
}
#else
HAK_INLINE void *alloc_class_n(unsigned cls, size_t n) { (void)n; return alloc_class(cls); }
HAK_INLINE void *alloc_small_or_large(size_t n) {
  if (HAK_LIKELY(n <= HAK_SMALL_TAB_MAX)) return alloc_bin(hak_small_bin_tab[(n + 15) >> 4]);
  if (HAK_LIKELY(n <= HAK_MID_MAX)) return alloc_class(size_class_mid(n));
  return alloc_large_slow(n);
}
#endif
#if HAK_SECURE
/* malloc(0) in the secure build (guard/zero_size.c), and the check that p,
 * in a zero-size region, is a live block of it (else one line and abort). */
void *zero_size_block(void) HAK_HIDDEN;
void zero_size_check(const char *fn, const void *p) HAK_HIDDEN;
#endif
/* A large or huge block for n bytes (secure build: sealed), or NULL. */
void *alloc_large_n(size_t n, size_t align, bool zero) HAK_HIDDEN;

_Static_assert(sizeof(hak_bin_t) == HAK_SLICE_MAP_SCALE && HAK_SLICE_MAP_SCALE == HAK_BIN_BYTES,
               "slice map entries and the small-size table are bin offsets");

#if !HAK_SECURE
/* free()'s miss: b (p's slice map entry's bin) has no room. A class's bin
 * (full, or of a thread without a heap): the flush, without free_slow's
 * lookups of the slice map and the segment (the class follows from b) and,
 * in the standard build, without its block-start test, which free_block
 * has passed; anything else (sentinels without slots: NULL, large, foreign, a
 * first-class heap's block) to free_slow. */
void free_full(void *p, hak_fast_bin_t *b) HAK_HIDDEN;
#endif

/* The bin of p's class, from the slice map (a sentinel without slots for
 * pointers that are not small blocks of ours). */
HAK_INLINE hak_bin_t *bin_of_block(const void *p) {
  return (hak_bin_t *)((char *)hak_tls.bins + slice_map_entry(p));
}

/* One lookup tells the block's class (or that it is not a small block of
 * ours: then the bin is a sentinel without slots and the push is refused). */
HAK_INLINE void free_block(void *p) {
  const hak_slice_window_t *w; /* the standard build's check copy (registry.h) */
  uintptr_t i;                  /* p's slice in the window (the standard build's mid test) */
  uintptr_t off = slice_map_lookup(p, &w, &i);
  (void)i;
#if HAK_WORD_CHECKS
  /* Only block starts enter the cache: an interior pointer or one into a
   * segment header would go to the next malloc (guard/block_check.h).
   * In the window, one test for every class (a per-slice word beside the
   * entries, registry.h); outside it, the one-slice test with the window
   * header's copy (GCC puts each in its branch of the lookup). Before the
   * room test: off is then free for the bin's address (no copy of it),
   * and pointers that are not small blocks of ours fail it too (their
   * slices' word is 0). */
  if (HAK_LIKELY(i < HAK_WIN_ENTRIES)) {
    if (HAK_UNLIKELY(!block_slice_ok_map(p, w, i, off))) goto checked;
  } else if (HAK_UNLIKELY(!block_fast_ok_map(p, w, off))) {
    goto checked;
  }
#endif
  hak_fast_bin_t *b = fast_bin_at(off);
  void **s = b->ptr;
  if (HAK_LIKELY(*s != HAK_SLOT_FULL)) {
    HAK_OBSERVE_INC(class_of_bin_off(off), HAK_CS_FREE_FAST);
#if HAK_SECURE
    /* The exact test on every free: block start, word and repeat. */
    const hak_block_check_t *c = block_check_at(off);
    if (HAK_UNLIKELY(!block_fast_ok(p, c))) {
      free_secure_paged(p, off);
      return;
    }
    /* Pushed first, checked after: the check is then a tail call to a
     * leaf with every scratch register to itself, and this path saves
     * none (a failed check aborts, so the push does not matter). */
    FAST_SLOT_PUSH(b, s, p);
    secure_free_fast(p, c->size);
    return;
#elif HAK_CHECKS
    /* The mark is w itself (hak_word_mark, guard/registry.h). */
    if (HAK_UNLIKELY(((uintptr_t *)p)[1] == (uintptr_t)w)) {
      free_suspect(p);
      return;
    }
    ((uintptr_t *)p)[1] = (uintptr_t)w;
#endif
    FAST_SLOT_PUSH(b, s, p);
    return;
  }
#if HAK_SECURE
  free_slow(p);
#else
  free_full(p, b);
#endif
#if HAK_WORD_CHECKS
  return;
checked:
  free_checked(p, off);
#endif
}

/* Usable bytes of a block HAKMEM owns (registry already checked); in the
 * secure build the size asked for, after the block's checks. */
size_t usable_ours(const void *p) HAK_HIDDEN;

/* HAKMEM_ZERO_ON_FREE (front/zero_on_free.c): with the option on, the
 * thread caches are off (policy/config.c), so every malloc and free of a
 * small block takes the slow path; there free wipes the block and malloc
 * checks it is still wiped. Not on the fast paths, whatever the option. */
void zero_on_free_wipe(void *p, size_t bsize) HAK_HIDDEN;
void zero_on_free_check(void *p, size_t bsize) HAK_HIDDEN;

#endif
