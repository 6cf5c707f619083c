/* block_check.h — is a pointer the start of a block of a live page? (builds
 * with checks: standard, observe)
 *
 * free()'s fast path gets the class from the slice map, which knows only the
 * slice: an interior pointer (p + 32), or one into a segment header (a stale
 * huge pointer whose range a segment now uses), would be cached as a block
 * and handed to the next malloc. So the push is preceded by an exact test in
 * a few instructions and no memory beyond one table entry: a page of a
 * one-slice class starts at the slice, and no page holds slice 0, the
 * header's (segment/shard.h, ALL_FREE: a pointer into a header finds no
 * class in the slice map; the secure build keeps its own layout there, and
 * tests for slice 0), so p is a block start exactly when its offset in the
 * slice is k * size with
 * k < blocks per slice (a read-only table indexed like the bins; no
 * per-thread copy, so the TLS block, which dlopen must fit in glibc's static
 * reserve, does not grow; free() reads the test's two fields from a copy
 * in the slice map window's header, addressed from the register its lookup
 * leaves, guard/registry.h). Divisibility and the bound are one 32-bit
 * multiplication and one comparison with the entry in memory: with
 * mul = 2^32 / size + 1 and e = mul * size - 2^32 (0 < e <= size), the low
 * 32 bits of off * mul are k * e < 2^16 when off = k * size, and at least
 * 2^16 when size does not divide off (off < 2^16, size <= 8 KiB), so
 * off * mul mod 2^32 < fast_lim * e (fast_bound) is exactly "a block start
 * of the slice" (test_block_check tries every offset of every class).
 * Elsewhere (page-relative offsets of pages of several slices) the test is
 * the rotation: for size = 2^s * o (o odd), rotate_right(off * o^-1 mod
 * 2^64, s) equals off / size when size divides off, and is larger than any
 * block index otherwise. In the standard build free() of a block in the
 * window takes block_slice_ok_map instead, one test for one-slice classes
 * and for classes whose pages span several slices (a per-slice word in the
 * window, phase and bound, set as the page is carved), then
 * free_checked block_carved_start (the page record's bump and start), then
 * the full test; the secure build (and its slice 0) takes the full test on
 * the slow path (block_is_live_start: the page record, its start, what has
 * been carved). */
#ifndef HAK_BLOCK_CHECK_H
#define HAK_BLOCK_CHECK_H

#include "hak_internal.h"
#include "guard/registry.h"

typedef struct __attribute__((aligned(32))) hak_block_check {
  uint64_t inv;       /* inverse of the size's odd part, mod 2^64 */
  uint16_t fast_lim;  /* blocks per slice (one-slice classes); 0: always the full test */
  uint16_t shift;     /* the size's power of two */
  uint32_t size;      /* the class size (the secure build's fast paths read it here,
                       * from the entry they already hold, not from the page record) */
  uint32_t mul;        /* the fast test's multiplier, 2^32 / size + 1 */
  uint32_t fast_bound; /* fast_lim * (mul * size - 2^32); 0: always the full test */
} hak_block_check_t;

/* Indexed like the TLS bins: by the slice map's value (class + 1). */
extern const hak_block_check_t hak_block_check[HAK_NCLASSES + 2] HAK_HIDDEN;

HAK_INLINE uint64_t block_index(uint64_t off, const hak_block_check_t *c) {
  uint64_t x = off * c->inv;
  return (x >> c->shift) | (x << ((64 - c->shift) & 63));
}

_Static_assert(sizeof(hak_block_check_t) == 32, "indexed by twice the slice map's bin offsets");

/* The entry for a slice-map bin offset (bin index * 16, guard/registry.h). */
HAK_INLINE const hak_block_check_t *block_check_at(unsigned bin_offset) {
  return (const hak_block_check_t *)((const char *)hak_block_check + 2 * (size_t)bin_offset);
}

/* The fast path's test, with the fields of p's class's entry: true
 * when p may be pushed without the full test. */
HAK_INLINE bool block_fast_test(const void *p, uint32_t mul, uint32_t fast_bound) {
  uintptr_t a = (uintptr_t)p;
  uint32_t off = (uint32_t)(a & (HAK_SLICE_SIZE - 1));
#if HAK_SECURE /* slice 0 keeps the header's layout: its blocks take the paged check */
  return off * mul < fast_bound && (a & (HAK_SEG_MASK & ~(HAK_SLICE_SIZE - 1))) != 0;
#elif HAK_WORD_CHECKS /* slice 0 is never a page's (segment/shard.h, ALL_FREE) */
  return off * mul < fast_bound;
#else
  return off * mul < fast_bound && (a & HAK_SEG_MASK) >= HAK_SEG_HDR_SIZE;
#endif
}
HAK_INLINE bool block_fast_ok(const void *p, const hak_block_check_t *c) {
  return block_fast_test(p, c->mul, c->fast_bound);
}
#if HAK_WORD_CHECKS
/* block_fast_ok with the entry's copy in the window's header (w: the
 * window or header p's lookup read, off: p's bin offset; guard/
 * registry.h): free()'s test in the standard build. On x86_64 the
 * multiplication and the comparison take their operands from memory at
 * w + off + displacement (asm: in C, GCC forms w + off once, one lea or
 * register copy more per free). */
HAK_INLINE bool block_fast_ok_map(const void *p, const hak_slice_window_t *w, uintptr_t off) {
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
  uint32_t x = (uint32_t)((uintptr_t)p & (HAK_SLICE_SIZE - 1));
  bool below;
  __asm__("imull %c[mul](%[w],%[off]), %[x]\n\tcmpl %c[bound](%[w],%[off]), %[x]"
          : [x] "+r"(x), "=@ccb"(below)
          : [w] "r"(w), [off] "r"(off), [mul] "i"(offsetof(hak_slice_window_t, check[0].mul)),
            [bound] "i"(offsetof(hak_slice_window_t, check[0].bound)), "m"(w->check));
  return below;
#else
  const hak_fast_check_t *e = (const hak_fast_check_t *)((const char *)w->check + off);
  return block_fast_test(p, e->mul, e->bound);
#endif
}

/* free()'s test in the standard build for p in the window (its slice's
 * index i < HAK_WIN_ENTRIES, off its slice map entry): with x = p's
 * offset in its slice, x * mul64 + slice_term[i] >= 2^64 - HAK_SLICE_SPAN
 * (mod 2^64; registry.h). For a slice of a one-slice class that is
 * block_fast_ok's test (phase 0, the bound of all the slice's blocks);
 * for a slice of a page of several slices, a multiple of the size from
 * the page's start at one of its carved blocks (registry.c, slice_term and
 * slice_map_mid_carved, have the arithmetic: exact as in
 * block_carved_start, x + phase < 2^20). Every slice where neither holds
 * reads term 0, which fails at every offset: large and free slices, pages
 * not carved yet, memory not ours; a stale term is still a bound (it grows
 * with the bump, and goes to 0 before the slice changes hands). A
 * sentinel's bin (large, not ours) has no slots, whatever the test says
 * (its mul64 is 0). So p, past this, is a block start below its page's
 * bump, or of a one-slice page: the cache takes it. One test for both
 * kinds of slices, so no branch on which kind p's is (registry.h). The
 * x86_64 form reads mul64 and the term from memory and compares with an
 * immediate: five instructions with the branch, one more than the 32-bit
 * slice test (block_fast_ok_map), which the blocks outside the window
 * keep; one word of the window per slice, so one line. */
HAK_INLINE bool block_slice_ok_map(const void *p, const hak_slice_window_t *w, uintptr_t i, uintptr_t off) {
  uint64_t x = (uint16_t)(uintptr_t)p;
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
  bool ok;
  __asm__("imulq %c[m](%[w],%[off]), %[x]\n\t"
          "addq %c[term](%[w],%[i],8), %[x]\n\t"
          "cmpq %[top], %[x]"
          : [x] "+r"(x), "=@ccae"(ok)
          : [w] "r"(w), [i] "r"(i), [off] "r"(off), [term] "i"(offsetof(hak_slice_window_t, slice_term)),
            [top] "i"(-(int64_t)HAK_SLICE_SPAN), [m] "i"(offsetof(hak_slice_window_t, check[0].mul64)), "m"(*w));
  return ok;
#else
  uint64_t m = ((const hak_fast_check_t *)((const char *)w->check + off))->mul64;
  return x * m + __atomic_load_n(&w->slice_term[i], __ATOMIC_RELAXED) >= (uint64_t)0 - HAK_SLICE_SPAN;
#endif
}

/* free_checked's test (the standard build's free of a block that failed
 * block_fast_ok_map: every block of a class whose pages span several
 * slices), before the full one: p lies below pg's bump (carved: a stale
 * bump is still a bound, page_bump) at a multiple of the size from its
 * start. pg is the record of p's slice, so p >= pg->start (a page starts
 * at its first slice, HAK_PAGE_LEAD 0, and no page holds slice 0) and
 * x = p - start < 2^20 (16 slices at most); m = mul64 of p's bin offset
 * in the window's check copy, floor(2^64 / size) + 1 (2^64 / size for a
 * power of two), e = m * size mod 2^64 < size. For x = k * size + r:
 * x * m = k * e + r * m (mod 2^64); r = 0 gives k * e <= x < 2^20 < 2^46
 * <= m (size <= 256 KiB); r >= 1 gives at least m, with no wrap, since
 * (size - 1) * m + 2^20 < 2^64 - 2^64 / size + size + 2^20 < 2^64. So
 * x * m < m is exactly "size divides x": one multiplication and one
 * comparison with the same operand in memory, where the rotation of
 * block_index needs the shift in %cl (test_block_check tries every offset
 * of every class's page). Not a bound on the block index: the bump is that.
 * A block freed by another thread past the bump as its reader saw it (its
 * owner carving meanwhile) fails here and takes the full test
 * (block_live_page). */
HAK_INLINE bool block_carved_start(const void *p, const hak_page_t *pg, const hak_slice_window_t *w, uintptr_t off) {
  const uint8_t *b = (const uint8_t *)p;
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
  /* The bump compared in memory (page_bump's relaxed load is the same one
   * aligned 8-byte read; GCC loads an atomic into a register first), and m
   * from memory at w + off for both its uses (in C, GCC loads it into a
   * register and copies x twice: three instructions more). */
  bool below;
  __asm__("cmpq %[bump], %[b]" : "=@ccb"(below) : [b] "r"(b), [bump] "m"(pg->bump));
  if (!below) return false;
  uint64_t x = (uint64_t)b;
  __asm__("subq %[start], %[x]\n\timulq %c[m](%[w],%[off]), %[x]\n\tcmpq %c[m](%[w],%[off]), %[x]"
          : [x] "+r"(x), "=@ccb"(below)
          : [start] "m"(pg->start), [w] "r"(w), [off] "r"(off),
            [m] "i"(offsetof(hak_slice_window_t, check[0].mul64)), "m"(w->check));
  return below;
#else
  if (b >= page_bump(pg)) return false;
  uint64_t x = (uint64_t)(b - pg->start), m = ((const hak_fast_check_t *)((const char *)w->check + off))->mul64;
  return x * m < m;
#endif
}
#endif

/* The full test: p lies in a registered small segment, on a live page of a
 * size class, at a block boundary, in the part of the page already carved
 * (when the page is the calling thread's; otherwise before the page's end). */
bool block_is_live_start(const void *p) HAK_HIDDEN;
/* The same for p whose slice map entry names a size class (free()'s fast
 * path found p's bin through it; free_checked): such an entry is only ever
 * set for the slices of a class page of a small segment (segment.c,
 * page_init; a first-class heap's pages have a slotless sentinel's entry until the heap
 * hands them over), and it goes back to the large-run or zero entry before
 * the slices are reused or unmapped, so the registry and the segment's magic
 * and kind are not read again: the slice's page record decides.
 * me = the calling thread's heap (hak_tls.heap). Returns p's page record
 * (its class in *cls), or NULL. The blocks
 * below the page's bump have been carved, by whichever heap: a start among
 * them is a live block's (bump is read relaxed, page_bump: a stale value is
 * still a bound, since bump only grows while a block of the page is out).
 * Past the bump, only a page of another heap may be freed into (its owner
 * may carve on meanwhile: bounded by the page's end), never one of the
 * caller's own, whose bump is exact (test_bad_free, uncarved-big). So the
 * owner, on the record's line that remote frees write (`remote`), is read
 * only for blocks past the bump. */
HAK_INLINE hak_page_t *block_live_page_of(hak_page_t *pg, const void *p, const hak_heap_t *me, unsigned *cls) {
  if (!pg) return NULL;
  unsigned c = pg->cls;
  const uint8_t *b = (const uint8_t *)p, *start = pg->start;
  if (c >= HAK_NCLASSES || b < start || block_index((uint64_t)(b - start), &hak_block_check[c + 1]) >= pg->capacity)
    return NULL;
  *cls = c;
  if (HAK_LIKELY(b < page_bump(pg))) return pg;
  hak_heap_t *owner = atomic_load_explicit(&pg->owner, memory_order_relaxed);
  return !(owner != NULL && owner == me) && b < pg->end ? pg : NULL;
}
/* The record of p's slice, as the slice map's class entry says it is a
 * page's (block_live_page). */
HAK_INLINE hak_page_t *block_slice_page(const void *p) {
  return __atomic_load_n(&segment_of(p)->slice_page[slice_index(p)], __ATOMIC_ACQUIRE);
}
HAK_INLINE hak_page_t *block_live_page(const void *p, const hak_heap_t *me, unsigned *cls) {
  return block_live_page_of(block_slice_page(p), p, me, cls);
}

/* p (registered) lies in a slice of a page of class cls (the segment's
 * slice_cls): the fast test where it is exact, else the full one. The slow
 * paths' test (free_slow, realloc), so that a one-slice class costs them
 * what it costs free() with room in the cache; neither reads the page
 * record then, which another thread may be writing. A class of pages of
 * several slices (the standard build): first free_checked's test against
 * the slice's page record (block_carved_start: below its bump, at a
 * multiple of the size from its start; about 8 instructions where the
 * full test, which looks the registry and the segment's magic up again,
 * took about 52 a call: bench_realloc N 256 64K reallocs 9-32 KiB
 * buffers), then the full one. */
HAK_INLINE bool block_is_start_of_class(const void *p, unsigned cls) {
  if (block_fast_ok(p, &hak_block_check[cls + 1])) return true;
#if HAK_WORD_CHECKS
  hak_page_t *pg = block_slice_page(p);
  if (HAK_LIKELY(pg != NULL) &&
      block_carved_start(p, pg, __atomic_load_n(&hak_slice_window.w, __ATOMIC_ACQUIRE),
                         (uintptr_t)(cls + 1) * HAK_SLICE_MAP_SCALE))
    return true;
#endif
  return block_is_live_start(p);
}

#endif
