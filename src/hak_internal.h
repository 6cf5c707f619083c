/* hak_internal.h — constants, types and helpers shared by every part of HAKMEM.
 *
 * Geometry: memory comes from the OS in 2 MiB segments aligned to 2 MiB, each
 * cut into 32 slices of 64 KiB. A page is a run of slices holding blocks of one
 * size class (or one large block). The segment header (first 8 KiB of slice 0)
 * holds the per-slice class byte map that free() reads, and the page records.
 */
#ifndef HAK_INTERNAL_H
#define HAK_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifndef HAK_STATS
#define HAK_STATS 1
#endif
#ifndef HAK_OBSERVE
#define HAK_OBSERVE 0
#endif
#ifndef HAK_CHECKS
#define HAK_CHECKS 1
#endif
#ifndef HAK_SECURE
#define HAK_SECURE 0
#endif

/* The standard build's own block checks (HAK_CHECKS without HAK_SECURE):
 * an exact block-start test before a block is freed or resized, and a mark
 * in a freed block's second word. The secure build does both with the
 * tail canary instead (heap/canary.h), so it has neither. */
#define HAK_WORD_CHECKS (HAK_CHECKS && !HAK_SECURE)

/* Builds with checks mark a freed block in its second word (front/front.h;
 * malloc wipes it). The secure build, which stops at a match without looking
 * further, mixes in the block's address: a mark copied with the contents of
 * one block into another (realloc, memcpy of stale memory) is then not that
 * block's mark, and not taken for a double free. The standard build's mark
 * is the address of the slice map's window (guard/registry.h,
 * hak_word_mark): free() holds it in a register after its lookup, so it
 * compares and stores it without loading a key (one instruction fewer). */
extern uintptr_t hak_free_key __attribute__((visibility("hidden")));
#if HAK_SECURE
#define HAK_FREE_MARK(p) (hak_free_key ^ (uintptr_t)(p))
#elif HAK_WORD_CHECKS
#define HAK_FREE_MARK(p) ((void)(p), hak_word_mark())
#else
#define HAK_FREE_MARK(p) hak_free_key
#endif

#define HAK_LIKELY(x)   __builtin_expect(!!(x), 1)
#define HAK_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define HAK_INLINE      static inline __attribute__((always_inline))
#define HAK_NOINLINE    __attribute__((noinline))
#define HAK_COLD        __attribute__((cold, noinline))
#define HAK_HIDDEN      __attribute__((visibility("hidden")))
#define HAK_EXPORT      __attribute__((visibility("default")))

#define HAK_SEG_SHIFT    21
#define HAK_SEG_SIZE     ((size_t)1 << HAK_SEG_SHIFT)
#define HAK_SEG_MASK     (HAK_SEG_SIZE - 1)
#define HAK_SLICE_SHIFT  16
#define HAK_SLICE_SIZE   ((size_t)1 << HAK_SLICE_SHIFT)
#define HAK_SLICES       32               /* slices per segment */
#define HAK_SEG_HDR_SIZE ((size_t)8192)   /* slice 0 loses this much to the header */

#define HAK_NCLASSES     96               /* 16 B .. 256 KiB */
#define HAK_CLASS_NONE   HAK_NCLASSES     /* large/huge/free slices: bin with cap 0 */
#define HAK_SMALL_TAB_MAX 1024            /* sizes served by the lookup table */
/* Largest size served by a size class. The secure build stops at 32 KiB:
 * above it a block is a large page of its own, with a guard page after it
 * (test_secure_hardening guard-large), which a class block cannot have. */
#if HAK_SECURE
#define HAK_MID_MAX      ((size_t)32768)
#else
#define HAK_MID_MAX      ((size_t)262144)
#endif
/* Secure build: a page of a class whose pages span several slices starts
 * this far into its first slice, so its first block has room for the word
 * before it (heap/canary.h), on the block's own cache line; its blocks are
 * then aligned to 16 only, and aligned requests take the classes up to
 * HAK_ALIGN_CLASS_MAX (one-slice pages, blocks at multiples of their size
 * from the slice) or a large page. */
#if HAK_SECURE
#define HAK_PAGE_LEAD        ((size_t)16)
#define HAK_ALIGN_CLASS_MAX  ((size_t)8192)
#else
#define HAK_PAGE_LEAD        ((size_t)0)
#define HAK_ALIGN_CLASS_MAX  HAK_MID_MAX
#endif
/* A calloc or a moving realloc for more than this takes a large page even
 * where a class would serve: a large page knows when its memory is fresh
 * from the OS, so calloc skips the memset (test_calloc_zero: 100 callocs of
 * 256 KiB through the classes grew RSS by 25 MiB), and it grows in place,
 * where a buffer realloc'd through the classes (12.5% apart) would move at
 * every class step. */
#define HAK_CLASS_ZERO_MAX ((size_t)32768)
#define HAK_MIN_ALIGN    16               /* alignof(max_align_t) */
/* A large block lives in slices 1..31; up to 15 slices, so that at least two
 * share a segment: bigger ones get a mapping of their own. */
#define HAK_LARGE_MAX_SLICES 15

typedef struct hak_heap hak_heap_t;
typedef struct hak_segment hak_segment_t;

/* Which list of its heap a page sits on. */
enum { HAK_PAGE_FREE = 0, HAK_PAGE_AVAIL, HAK_PAGE_FULL, HAK_PAGE_ABANDONED, HAK_PAGE_LARGE };

/* One page record (at most 128 bytes), indexed by first slice in the segment header.
 * Fields above `owner` are touched only by the owning heap (or under the
 * shard lock for large pages); the atomics are shared with other threads. */
typedef struct hak_page {
  void     *free;          /* local free list of blocks (owner only) */
  uint8_t  *bump;          /* next never-used block: pages are carved lazily (page_bump_set) */
  uint8_t  *end;           /* end of the block area */
  uint8_t  *start;         /* first block; for a large page, the block itself */
  uint32_t  used;          /* blocks handed out: in user hands or in any cache */
  uint32_t  capacity;      /* blocks the page can hold */
  uint32_t  bsize;         /* block size (class size; large: usable bytes) */
  uint16_t  cls;           /* size class, HAK_CLASS_NONE for large */
  uint8_t   slice_count;   /* slices this page spans */
  uint8_t   state;         /* HAK_PAGE_* */
  struct hak_page *next;   /* heap list / abandoned list */
  struct hak_page *prev;
  _Atomic(hak_heap_t *) owner;    /* NULL when abandoned */
  /* Blocks freed by other threads (MPSC stack): its first block's offset in
   * the segment and its length, with bit 0 set while the page is queued on
   * its owner's remote-page stack (layout in remote/remote.h). */
  _Atomic(uintptr_t)    remote;
  uint32_t  first_slice;
  /* 1 while abandoned and not yet claimed: an adopter claims the page by
   * clearing it with a CAS (remote/remote.c; state is the owner's, and a new
   * owner writes it without any lock). */
  _Atomic(uint8_t) on_abandoned;
  /* Fresh from its segment with every byte known to read zero (its slices
   * untouched or purged since): calloc of a large block skips the memset. */
  uint8_t   known_zero;
  /* An empty page its heap keeps beyond the first of its class, counted in
   * the heap's kept_pages (heap/heap.c, page_maybe_retire). Owner only;
   * cleared by page_init and on adoption. */
  uint8_t   kept;
  /* 1 after heap/heap.c's page_recarve set bump back to start on a page
   * carved to its end once: every block it carves again is resident memory
   * (owner only; cleared by page_init). */
  uint8_t   recarve;
  struct hak_page *qnext;  /* link in the owner's remote-page stack */
  /* The last block of the local free list while it is not empty, kept by
   * every change of the list (owner only): a pending list (heap/heap.h)
   * goes back onto its page without a walk. */
  void     *free_tail;
  /* Abandoned-stack entry: link, and 1 while an entry for this record is on
   * a stack or held by a taker. An entry can outlive the page's abandonment
   * (stale), so page_init keeps these two and segments are not unmapped
   * while one is set. */
  struct hak_page *anext;
  _Atomic(uint8_t) alisted;
  /* Blocks at the head of the local free list that the owner's flushes
   * linked there last (heap/heap.c, heap_return_blocks), valid while the
   * list's head is still hot_head: a refill walks those into the cache
   * (heap_take) instead of handing the list over as a pending list. Owner
   * only; a hint: a stale value costs time, never a block. */
  uint8_t   hot_n;
  /* Large page: the 4 KiB pages of its run's last slice where a block's
   * last byte has been (bit d: d pages before the run's last one), so the
   * page stash can hand the run to a block whose end falls on a page
   * already resident (large/page_stash.c). Cleared by page_init, kept by
   * segment_page_reinit (the run is the same), cleared when the run's end
   * moves (segment/large_run.c). Its holder's alone. */
  uint16_t  ends;
  uint32_t  hot_tick;      /* with hot_n: the owner's tick (cold events) at that flush */
  void     *hot_head;      /* with hot_n */
} hak_page_t;

_Static_assert(sizeof(hak_page_t) <= 128, "page records stay small");

enum { HAK_SEG_SMALL = 1, HAK_SEG_HUGE = 2 };
#define HAK_SEG_MAGIC 0x48414b4du /* "HAKM" */

/* The first 64 bytes are common to small segments and huge mappings: free()
 * reads slice_cls[] without knowing which kind it has. */
struct hak_segment {
  uint32_t  magic;
  uint8_t   kind;
  uint8_t   _r[2];                   /* os/hugepage.c: advised, options applied */
  uint8_t   dense;                   /* small segment for dense class pages only (HAKMEM_THP=dense) */
  uint8_t   slice_cls[HAK_SLICES];   /* class of the page owning each slice */
  size_t    map_size;                /* bytes mapped for this segment/huge block */
  size_t    huge_size;               /* huge: usable bytes after the user pointer */
  /* ---- small segments only below this line ---- */
  uint32_t  free_mask;               /* bit i: slice i belongs to no page */
  uint32_t  dirty_mask;              /* bit i: free slice i holds touched memory */
  uint32_t  whole_mask;              /* bit i: ... all of it (a class page carved to its end) */
  uint32_t  rec;                     /* its record in its shard's index (segment/seg_index.c) */
  hak_segment_t *next, *prev;        /* list of segments with free slices */
  uint32_t  freed_ms[HAK_SLICES];     /* coarse ms when each free slice was freed */
  uint8_t   last_cls[HAK_SLICES];     /* class of the page a free slice last held */
  hak_page_t *slice_page[HAK_SLICES]; /* page record owning each slice */
  /* secure build; with them the header is 4 KiB exactly (one OS page before
   * its guard page: segment.c) */
  uintptr_t   list_key;               /* free-list key (segment/free_list.h) */
  _Atomic(uint32_t) guard_mask;       /* bit i: slice i ends in a large-block guard (segment.c) */
  uint8_t   shard;                    /* the segment shard whose list it is on (segment.c) */
  hak_page_t  pages[HAK_SLICES];      /* records, indexed by first slice */
};

_Static_assert(offsetof(struct hak_segment, free_mask) == 56, "huge header fits in 64 bytes");
_Static_assert(sizeof(struct hak_segment) <= HAK_SEG_HDR_SIZE, "segment header fits its reserve");

HAK_INLINE hak_segment_t *segment_of(const void *p) {
  return (hak_segment_t *)((uintptr_t)p & ~(uintptr_t)HAK_SEG_MASK);
}
HAK_INLINE unsigned slice_index(const void *p) {
  return (unsigned)(((uintptr_t)p >> HAK_SLICE_SHIFT) & (HAK_SLICES - 1));
}
HAK_INLINE hak_page_t *page_of(const void *p) {
  return segment_of(p)->slice_page[slice_index(p)];
}
/* A page's bump is written by its owner, carving under its heap lock, and
 * read without a lock by a freeing thread that found itself the owner
 * (guard/block_check.c). The page may have changed hands since that look (a
 * peer took it: heap_page_give) and be carved by its new owner meanwhile, so
 * the two sides are relaxed atomics (plain moves on x86-64 and aarch64). A
 * stale value is still a bound for the block being freed: bump only grows
 * while a block of the page is out. */
HAK_INLINE uint8_t *page_bump(const hak_page_t *p) { return __atomic_load_n(&p->bump, __ATOMIC_RELAXED); }
HAK_INLINE void page_bump_set(hak_page_t *p, uint8_t *b) { __atomic_store_n(&p->bump, b, __ATOMIC_RELAXED); }
HAK_INLINE size_t align_up(size_t n, size_t a) { return (n + a - 1) & ~(a - 1); }

#endif /* HAK_INTERNAL_H */
