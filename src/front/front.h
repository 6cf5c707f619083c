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
 * word of a block with a per-process key and malloc() wipes it, so a block
 * freed twice arrives with the key still there; the free path then looks for
 * it in the thread's cache, and a confirmed double free is reported and
 * ignored instead of handing one block to two owners. User data equal to the
 * key costs only that look-up. */
extern uintptr_t hak_free_key HAK_HIDDEN;
/* A free whose block carries the key: report it if it is a double free,
 * finish it otherwise. Called as a tail call, so the fast path stays a leaf. */
void free_suspect(void *p) HAK_HIDDEN;
/* A free the fast block-start test did not clear (slice 0, a class with
 * pages of several slices, or not a block start): the full test, then a
 * report or the ordinary free. Also a tail call. */
void free_checked(void *p) HAK_HIDDEN;
#define HAK_MARK_ALLOCATED(p) (((uintptr_t *)(p))[1] = 0)
/* (the mark itself: HAK_FREE_MARK, hak_internal.h) */
#else
#define HAK_MARK_ALLOCATED(p) ((void)0)
#endif
void *alloc_large_slow(size_t n) HAK_HIDDEN;

#ifndef HAK_SECURE
#define HAK_SECURE 0
#endif
#if HAK_SECURE
/* Secure build (libhakmem-secure.so): free() and realloc() act only on the
 * start of a block its page has handed out, and a block still carrying the
 * free key (stamped by free, wiped by malloc; the key is per process) is
 * freed twice. Either ends the process with one line on stderr. */
_Noreturn void secure_reject(const char *fn, const char *problem, const void *p) HAK_HIDDEN HAK_COLD;
HAK_INLINE void secure_check(const char *fn, void *p) {
  hak_page_t *pg = page_of(p);
  uintptr_t off = (uintptr_t)p - (uintptr_t)pg->start; /* below start: huge */
  if (HAK_UNLIKELY(off >= (uintptr_t)(pg->bump - pg->start) || off % pg->bsize != 0))
    secure_reject(fn, "invalid pointer (not a block)", p);
  if (HAK_UNLIKELY(((uintptr_t *)p)[1] == HAK_FREE_MARK(p)))
    secure_reject(fn, fn[0] == 'r' ? "freed block" : "double free", p);
}
/* C++ sized delete: the size must be one that gives this block. */
void hak_sized_free_check(void *p, size_t n) HAK_HIDDEN;
#endif

/* The fast paths reach the thread's bins through the thread pointer's
 * segment register where the compiler can (x86_64, initial-exec TLS): the
 * bin is then addressed as %fs:offset(bin) with the TLS block's offset from
 * the GOT, one instruction fewer on each of malloc and free than forming
 * the TLS address first. Elsewhere (aarch64, the dynamic-TLS build, C++,
 * sanitizers, which do not see that address space) a plain pointer. Only
 * the bin's fields live in TLS: b->slots points at ordinary memory. */
#if defined(__x86_64__) && defined(__SEG_FS) && !defined(__cplusplus) && !HAK_DYNAMIC_TLS && \
    !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
typedef hak_bin_t __seg_fs hak_fast_bin_t;
_Static_assert(offsetof(hak_tls_t, bins) == 0, "the bins open the TLS block");
HAK_INLINE hak_fast_bin_t *fast_bin_at(unsigned off) {
  uintptr_t a = off;
  __asm__("addq hak_tls@gottpoff(%%rip), %0" : "+r"(a)); /* + the TLS block's offset */
  return (hak_fast_bin_t *)a;
}
HAK_INLINE unsigned fast_bin_off(hak_fast_bin_t *b) { return (unsigned)((uintptr_t)b - (uintptr_t)fast_bin_at(0)); }
#else
typedef hak_bin_t hak_fast_bin_t;
HAK_INLINE hak_fast_bin_t *fast_bin_at(unsigned off) { return (hak_bin_t *)((char *)hak_tls.bins + off); }
HAK_INLINE unsigned fast_bin_off(hak_fast_bin_t *b) { return (unsigned)((char *)b - (char *)hak_tls.bins); }
#endif

/* malloc's miss: refill the thread's bin b (its class follows from b). */
void *alloc_bin_slow(hak_fast_bin_t *b) HAK_HIDDEN;

/* Pop from the bin at offset off (bin_off_of_class). */
HAK_INLINE void *alloc_bin(unsigned off) {
  hak_fast_bin_t *b = fast_bin_at(off);
  if (HAK_LIKELY(b->count != 0)) {
    HAK_OBSERVE_INC(class_of_bin_off(off), HAK_CS_ALLOC_FAST);
    void *p = b->slots[--b->count];
    HAK_MARK_ALLOCATED(p);
    return p;
  }
  return alloc_bin_slow(b); /* the class follows from b: off stays out of a register */
}

HAK_INLINE void *alloc_class(unsigned cls) { return alloc_bin(bin_off_of_class(cls)); }

HAK_INLINE void *alloc_small_or_large(size_t n) {
  if (HAK_LIKELY(n <= HAK_SMALL_TAB_MAX)) return alloc_bin(hak_small_bin_tab[(n + 15) >> 4]);
  if (HAK_LIKELY(n <= HAK_MID_MAX)) return alloc_class(size_class_mid(n));
  return alloc_large_slow(n);
}

_Static_assert(sizeof(hak_bin_t) == HAK_SLICE_MAP_SCALE && HAK_SLICE_MAP_SCALE == HAK_BIN_BYTES,
               "slice map entries and the small-size table are bin offsets");

/* The bin of p's class, from the slice map (a cap-0 sentinel for pointers
 * that are not small blocks of ours). */
HAK_INLINE hak_bin_t *bin_of_block(const void *p) {
  return (hak_bin_t *)((char *)hak_tls.bins + slice_map_bin_offset(p));
}

/* One lookup tells the block's class (or that it is not a small block of
 * ours: then the bin is a cap-0 sentinel and the push is refused). */
HAK_INLINE void free_block(void *p) {
  unsigned off = slice_map_bin_offset(p);
  hak_fast_bin_t *b = fast_bin_at(off);
  if (HAK_LIKELY(b->count < b->cap)) {
    HAK_OBSERVE_INC(class_of_bin_off(off), HAK_CS_FREE_FAST);
#if HAK_CHECKS
    /* Only block starts enter the cache: an interior pointer or one into a
     * segment header would go to the next malloc (guard/block_check.h). */
    if (HAK_UNLIKELY(!block_fast_ok(p, block_check_at(off)))) {
      free_checked(p);
      return;
    }
#endif
#if HAK_SECURE
    secure_check("free", p);
    ((uintptr_t *)p)[1] = HAK_FREE_MARK(p);
#elif HAK_CHECKS
    if (HAK_UNLIKELY(((uintptr_t *)p)[1] == hak_free_key)) {
      free_suspect(p);
      return;
    }
    ((uintptr_t *)p)[1] = hak_free_key;
#endif
    b->slots[b->count++] = p;
    return;
  }
  free_slow(p);
}

/* Usable bytes of a block HAKMEM owns (registry already checked). */
size_t usable_ours(const void *p) HAK_HIDDEN;

#endif
