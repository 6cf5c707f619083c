/* api.c — the rest of the malloc family, built on the core in front.h:
 * calloc, realloc, the aligned allocators, usable size, and glibc's
 * introspection calls (malloc_trim, malloc_stats, mallinfo2). Semantics follow
 * glibc 2.36, including its errno values. */
#include "front/front.h"
#include "guard/guard.h"
#include "guard/zero_size.h"
#include "large/large.h"
#include "os/os.h"
#include "heap/collect.h"
#include "front/heap_huge.h"
#include "heap/user_heap.h"
#include "policy/config.h"
#include "policy/purger.h"
#include "segment/segment.h"
#include "hakmem.h"

#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "front/prefix.h"
#include "front/zero.h"
#include "front/valgrind.h"

/* Requests above PTRDIFF_MAX fail at once, as in glibc. */
#define HAK_MAX_REQUEST ((size_t)PTRDIFF_MAX)

static void *fail_enomem(void) {
  errno = ENOMEM;
  return NULL;
}

HAK_INLINE void *calloc_core(size_t count, size_t size) {
  size_t total;
  if (HAK_UNLIKELY(__builtin_mul_overflow(count, size, &total))) return fail_enomem();
#if HAK_SECURE
  if (HAK_UNLIKELY(total == 0)) return zero_size_block();
#endif
  if (HAK_LIKELY(total <= HAK_CLASS_ZERO_MAX - HAK_TAIL)) {
    void *p = alloc_class_n(size_class_of(total + HAK_TAIL), total);
    if (HAK_LIKELY(p != NULL)) zero_class_block(p, total);
    return p;
  }
  if (total > HAK_MAX_REQUEST) return fail_enomem();
  void *p = alloc_large_n(total, HAK_MIN_ALIGN, true);
  purge_tick();
  return p ? p : fail_enomem();
}

HAK_EXPORT void *calloc(size_t count, size_t size) {
  HAK_VG_RETURN_ALLOC(calloc_core(count, size), count * size, true);
}

static void *aligned_core(size_t align, size_t size) {
  if (align <= HAK_MIN_ALIGN) return alloc_small_or_large(size);
  if (size > HAK_MAX_REQUEST) return fail_enomem();
  /* Blocks of a class whose size is a multiple of align are align-aligned:
   * pages start on 64 KiB (slice 0: 8 KiB) boundaries. */
  if (size <= HAK_ALIGN_CLASS_MAX - HAK_TAIL && align <= HAK_SEG_HDR_SIZE) {
    size_t need = size + HAK_TAIL; /* secure build: room for the repeat and the next word */
    unsigned cls = size_class_of(need < align ? align : need);
    while (cls < HAK_NCLASSES && (hak_class_size[cls] & (align - 1))) cls++;
    if (cls < HAK_NCLASSES && hak_class_size[cls] <= HAK_ALIGN_CLASS_MAX) {
      /* Only the class's own blocks are aligned so: its refill may not
       * hand out a borrowed block (heap/thread.c, "Borrowing"). Restored,
       * not cleared: a signal handler's aligned_alloc may run inside ours. */
      uint8_t was = hak_tls.aligned;
      hak_tls.aligned = 1;
      void *p = alloc_class_n(cls, size);
      hak_tls.aligned = was;
      return p;
    }
  }
  void *p = alloc_large_n(size, align, false);
  return p ? p : fail_enomem();
}

/* glibc's memalign: alignment rounded up to a power of two. */
static void *memalign_glibc(size_t align, size_t size) {
  if (align <= HAK_MIN_ALIGN) return alloc_small_or_large(size);
  if (align > SIZE_MAX / 2 + 1) {
    errno = EINVAL;
    return NULL;
  }
  if (align & (align - 1)) align = (size_t)1 << (64 - __builtin_clzll((unsigned long long)align));
  return aligned_core(align, size);
}

HAK_EXPORT int posix_memalign(void **out, size_t align, size_t size) {
  if (align == 0 || (align % sizeof(void *)) != 0 || (align & (align - 1)) != 0) return EINVAL;
  int saved = errno;
  HAK_VG_ENTER();
  void *p = aligned_core(align, size);
  HAK_VG_LEAVE();
  errno = saved;
  if (!p) return ENOMEM;
  HAK_VG_ALLOCATED(p, size);
  *out = p;
  return 0;
}

HAK_EXPORT void *aligned_alloc(size_t align, size_t size) { HAK_VG_RETURN_ALLOC(memalign_glibc(align, size), size, false); }
HAK_EXPORT void *memalign(size_t align, size_t size) { HAK_VG_RETURN_ALLOC(memalign_glibc(align, size), size, false); }
HAK_EXPORT void *valloc(size_t size) { HAK_VG_RETURN_ALLOC(aligned_core(os_page_size(), size), size, false); }

HAK_EXPORT void *pvalloc(size_t size) {
  size_t ps = os_page_size();
  if (size > HAK_MAX_REQUEST) return fail_enomem();
  size_t rounded = size ? align_up(size, ps) : ps;
  HAK_VG_RETURN_ALLOC(aligned_core(ps, rounded), rounded, false);
}

HAK_INLINE size_t usable_size_core(void *p) {
  if (!p) return 0;
  if (registry_has(p)) return usable_ours(p);
  size_t u;
  if (overaligned_owns(p, &u)) return u;
#if HAK_SECURE
  if (zero_size_owns(p)) {
    zero_size_check("malloc_usable_size", p);
    return 0;
  }
#endif
  return foreign_usable_size(p);
}

HAK_EXPORT size_t malloc_usable_size(void *p) {
#if HAK_VALGRIND
  HAK_VG_ENTER();
  size_t u = usable_size_core(p);
  HAK_VG_LEAVE();
  if (registry_has(p) || overaligned_owns(p, NULL)) HAK_VG_USABLE(p, u);
  return u;
#else
  return usable_size_core(p);
#endif
}

/* The old block of a realloc that moved: a block of up to 1 KiB is freed as
 * free() frees it, into the thread's cache (whose cap and batched flush
 * bound it); a bigger one goes into the cache only while its class holds
 * fewer than REALLOC_KEEP(cls) blocks there, else straight back to its
 * page: a growing buffer leaves one block behind in every class it passes
 * through, and caching them all only holds memory (every one through
 * free_block: peak RSS of bench_realloc 2000000 256 64K 19.1 -> 37.6 MB;
 * up to 2 KiB 19.7 MB, up to 4 KiB 21.2). But the return to the page takes
 * the heap's lock, and the exchange that takes it waits until the copy's
 * stores (kilobytes, into cold lines) have left the store buffer: 16-18% of
 * bench_realloc's CPU samples sat on it. The next buffer to grow into the
 * class takes the cached block, whose lines the copy has just read, instead
 * of popping a cold one from its pending list. Two blocks per class up to
 * 8 KiB, one above (a block of 9-32 KiB holds a page of a few blocks from
 * emptying): bench_realloc 2000000 256 64K, 41 alternating runs,
 * throughput +6.9% (p 3e-5), CPU time 0.957, peak RSS 19.3 -> 19.5 MB; two
 * for every class gave the same time at 19.7 MB, four 23.8 MB. With the
 * blocks up to 1 KiB freed as free() does: CPU time 0.94 of that again
 * (31 runs), peak RSS the same. */
#define REALLOC_FREE_MAX 1024u
#define REALLOC_KEEP(cls) (hak_class_size[cls] <= 8192 ? 2u : 1u)
static void free_moved(void *p) {
  hak_tls_t *t = &hak_tls;
  if (t->state == HAK_THREAD_LIVE && registry_has(p)) {
    unsigned cls = segment_of(p)->slice_cls[slice_index(p)];
    if (cls != HAK_CLASS_NONE && !uheap_class_block(p)) { /* a heap's block: free() sends it home */
      if (hak_class_size[cls] <= REALLOC_FREE_MAX) {
        free_block(p);
        return;
      }
      /* realloc checked it; a later free of p is a double free */
      if (HAK_UNLIKELY(hak_config.zero_on_free)) zero_on_free_wipe(p, hak_class_size[cls]);
#if HAK_SECURE
      canary_mark_free(p, hak_class_size[cls]);
#elif HAK_CHECKS
      ((uintptr_t *)p)[1] = HAK_FREE_MARK(p);
#endif
      hak_bin_t *b = bin_of(t, cls);
      if (bin_count(t, cls) < REALLOC_KEEP(cls) && bin_room(b)) {
        HAK_OBSERVE_INC(cls, HAK_CS_FREE_FAST);
        bin_push(b, p);
        return;
      }
      heap_return_blocks(t->heap, &p, 1);
      return;
    }
  }
  free_block(p);
}

HAK_EXPORT void *realloc(void *p, size_t n) {
#if HAK_VALGRIND
  return vg_realloc(p, n);
#endif
  if (!p) return alloc_small_or_large(n);
  if (n == 0) { /* glibc frees and returns NULL */
    free_block(p);
    return NULL;
  }
  size_t old;
  void *q;
  if (registry_has(p)) {
    unsigned cls = segment_of(p)->slice_cls[slice_index(p)];
#if HAK_WORD_CHECKS /* secure: usable_ours checks the block start first */
    if (cls != HAK_CLASS_NONE && HAK_UNLIKELY(!block_is_start_of_class(p, cls))) {
      report_invalid("realloc", p); /* glibc aborts; the block stays as it is */
      errno = EINVAL;
      return NULL;
    }
#endif
    old = usable_ours(p); /* secure build: checked, and the size asked for */
    if (n > HAK_MAX_REQUEST) return fail_enomem();
    /* Stay in place while the block fits and is not more than twice too
     * big (the secure build's HAK_TAIL included, and resealed for n). */
    size_t room = cls != HAK_CLASS_NONE ? hak_class_size[cls] : 0, need = n + HAK_TAIL;
    if (cls != HAK_CLASS_NONE) {
      if (need <= room && (need > room / 2 || room <= 16 + HAK_TAIL)) {
#if HAK_SECURE
        canary_seal(p, room, n);
#endif
        return p;
      }
    } else if (!heap_huge_owner(p) && large_resize_inplace(p, need)) { /* a heap's block moves */
#if HAK_SECURE
      canary_seal_large(p, large_usable(p), n);
#endif
      return p;
    } else if ((q = large_realloc_move(p, need)) != NULL) {
#if HAK_SECURE
      canary_seal_large(q, large_usable(q), n);
#endif
      return q;
    }
#if HAK_SECURE
  } else if (zero_size_owns(p)) {
    zero_size_check("realloc", p);
    old = 0; /* a new block; free_moved gives the slot back */
#endif
  } else if (!overaligned_owns(p, &old)) {
    return foreign_realloc(p, n);
  }
  if (n > HAK_MAX_REQUEST) return fail_enomem();
  /* A buffer that moves to more than 32 KiB gets a large page, which grows
   * in place (large_resize_inplace) into the free slices after it; in the
   * classes above 32 KiB, 12.5% apart, it would move at every class step
   * (test_big_classes: 24 moves from 32 to 256 KiB in 1 KiB steps, 4 with
   * this; bench_realloc 2000000 256 64K, 8 alternating runs: CPU time
   * 1.37x and minor faults 1.35x without it). */
  q = n > HAK_CLASS_ZERO_MAX ? alloc_large_slow(n) : alloc_small_or_large(n);
  if (!q) return NULL; /* the old block is untouched */
  memcpy(q, p, old < n ? old : n);
  free_moved(p);
  return q;
}

HAK_EXPORT void *reallocarray(void *p, size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) return fail_enomem();
  return realloc(p, total);
}

/* Process-wide: this thread's caches go back to their pages, every heap's
 * remote frees are collected (heap/collect.c), and free memory is purged. */
HAK_EXPORT int hak_collect(bool force) {
  HAK_VG_ENTER(); /* flushing writes free blocks */
  heap_flush_all(&hak_tls);
  int r = purge_run(force ? COLLECT_FORCE : COLLECT_NOW);
  HAK_VG_LEAVE();
  return r;
}

HAK_EXPORT int malloc_trim(size_t pad) {
  (void)pad;
  return hak_collect(true);
}

/* From the same figures as hak_stats_get (docs/stats.md has the mapping). */
static struct mallinfo2 info_now(void) {
  hak_stats_t st;
  stats_gather(&st, false);
  struct mallinfo2 mi;
  memset(&mi, 0, sizeof mi);
  mi.arena = st.memory.mapped - st.memory.huge_bytes;
  mi.ordblks = st.memory.free_slices / HAK_SLICE_SIZE;
  mi.hblks = st.memory.huge_blocks;
  mi.hblkhd = st.memory.huge_bytes;
  mi.usmblks = st.memory.mapped_peak;
  mi.fordblks = st.memory.free_slices;
  mi.uordblks = st.memory.in_use;
  mi.keepcost = st.memory.free_resident;
  return mi;
}

HAK_EXPORT struct mallinfo2 mallinfo2(void) { return info_now(); }

HAK_EXPORT struct mallinfo mallinfo(void) {
  struct mallinfo2 m = info_now();
  struct mallinfo r;
  memset(&r, 0, sizeof r);
#define CLAMP(x) ((int)((x) > (size_t)0x7fffffff ? 0x7fffffff : (x)))
  r.arena = CLAMP(m.arena);
  r.hblks = CLAMP(m.hblks);
  r.hblkhd = CLAMP(m.hblkhd);
  r.usmblks = CLAMP(m.usmblks);
  r.fordblks = CLAMP(m.fordblks);
  r.uordblks = CLAMP(m.uordblks);
  r.ordblks = CLAMP(m.ordblks);
  r.keepcost = CLAMP(m.keepcost);
#undef CLAMP
  return r;
}

HAK_EXPORT void malloc_stats(void) {
  struct mallinfo2 m = info_now();
  char line[256];
  int n = snprintf(line, sizeof line,
                   "Arena 0:\nsystem bytes     = %10zu\nin use bytes     = %10zu\n"
                   "Total (incl. mmap):\nsystem bytes     = %10zu\nin use bytes     = %10zu\n"
                   "max mmap regions = %10zu\nmax mmap bytes   = %10zu\n",
                   m.arena, m.uordblks - m.hblkhd, m.arena + m.hblkhd, m.uordblks, m.hblks, m.hblkhd);
  if (n > 0) {
    ssize_t w = write(STDERR_FILENO, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
    (void)w;
  }
}

/* ---- the hak_ names ------------------------------------------------------ */

#if HAK_PREFIX_ONLY /* the entry points above already carry these names */
HAK_EXPORT size_t hak_usable_size(const void *p) { return malloc_usable_size((void *)p); }
#else
HAK_EXPORT void *hak_calloc(size_t c, size_t s) __attribute__((alias("calloc"), copy(calloc)));
HAK_EXPORT void *hak_realloc(void *p, size_t n) __attribute__((alias("realloc"), copy(realloc)));
HAK_EXPORT void *hak_reallocarray(void *p, size_t c, size_t s) __attribute__((alias("reallocarray"), copy(reallocarray)));
HAK_EXPORT void *hak_aligned_alloc(size_t a, size_t s) __attribute__((alias("aligned_alloc"), copy(aligned_alloc)));
HAK_EXPORT int hak_posix_memalign(void **o, size_t a, size_t s) __attribute__((alias("posix_memalign"), copy(posix_memalign)));
HAK_EXPORT size_t hak_usable_size(const void *p) __attribute__((alias("malloc_usable_size"), copy(malloc_usable_size)));
#endif

HAK_EXPORT void hak_stats_print(void) { stats_print_text(STDERR_FILENO); }
HAK_EXPORT int hak_trim(void) { return malloc_trim(0); }

HAK_EXPORT int hak_owns(const void *p) {
  if (!p) return 0;
#if HAK_SECURE
  if (zero_size_owns(p)) return 1;
#endif
  return registry_has(p) || overaligned_owns(p, NULL);
}
