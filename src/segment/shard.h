/* shard.h — internal to src/segment: the shards' records with their books
 * (free, dirty, returned bytes, bytes cut) and the process-wide books (the
 * folded dirty figure, empty segments, the purge side's state) that
 * segment.c (mapping segments, cutting and freeing pages) and purge.c (the
 * dirty budget, the purge deadline, trim) share, with the slice-mask
 * arithmetic both use.
 *
 * Waits for a shard lock. page_steal's wait for another shard's lock is
 * bounded by time, then the stealer maps a segment of its own (segment.c).
 * The other waits spin, then yield, with no bound of their own: a thread's
 * own shard (page_alloc_once, segment_pages_free, segment_pages_free_purged,
 * large_run.c's run_grow, the stealer's take once it has the lock), and
 * malloc_trim's and the purge-everything pass's wait for each shard
 * (purge.c; the purge deadline only tries). They are bounded by the
 * holder's critical section, which is bounded:
 *  - no system call under a shard lock: segments are mapped with no lock
 *    (seg_map.c) and unmapped, and given their transparent-huge-page
 *    advice, by shard_unlock after the release; purges madvise with their
 *    slices out of the free mask and the lock dropped (purge.c); the secure
 *    build's guards inside a page's run open by its cutter after the
 *    release, before the page is handed out (segment.c, page_guards_open),
 *    and a large page's own guard closes outside the lock (large_run.c).
 *    Left: THP=always/never's advice for a segment mapped before the
 *    options were read (once per such segment, at start-up:
 *    os_segment_in_use).
 *  - bounded work: the returned stack taken with one exchange and its pages
 *    freed (each page is on one stack once), one pass over the shard's
 *    index (page_alloc_locked), and for trim and purge one pass over
 *    the shard's segments, each of 32 slices.
 * So a waiter waits longer only while a holder is preempted inside. */
#ifndef HAK_SEGMENT_SHARD_H
#define HAK_SEGMENT_SHARD_H

#include "segment/segment.h"
#include "os/lock.h"
#include "os/os.h"

#define ALL_SLICES 0xffffffffu

/* Slices out of their free masks while a purger madvises them without the
 * shard's lock (purge.c): at most one batch per shard, recorded so that a
 * forked child can put them back (segment_atfork_child). */
#define PURGE_BATCH 16
typedef struct seg_purge_out {
  unsigned n;                        /* 0: no batch out */
  hak_segment_t *seg[PURGE_BATCH];
  uint32_t mask[PURGE_BATCH];
} seg_purge_out_t;

/* The shard's index (seg_index.c): one record per segment of the shard,
 * in one array, with what the page search (segment.c, page_alloc_locked)
 * reads of a segment, so that the search reads these and not the headers
 * (each a cache line and a TLB entry of its own 2 MiB mapping). Under the
 * shard's lock, like the header fields it copies. */
typedef struct seg_rec {
  uint32_t free, dirty, whole;       /* the header's free_mask, dirty_mask, whole_mask */
  uint32_t dense;                    /* the header's */
  uint32_t next, prev;               /* the header's list links: record index + 1 (0: none) */
  /* bit c % 64: a warm free slice (free and dirty) last held class c: the
   * search's first tier reads last_cls only where its class's bit is set */
  uint64_t warm_cls;
  uint8_t last_cls[HAK_SLICES];      /* the header's */
  hak_segment_t *seg;                /* read for the one chosen: out of the first cache line */
} __attribute__((aligned(64))) seg_rec_t;
_Static_assert(offsetof(seg_rec_t, seg) == 64, "what the search reads of a record is one cache line");

/* A shard's index, under its lock, beside the shard records (which
 * stealers and sweeps read for every shard: kept small). */
#define SEG_RECS_INLINE 8             /* records here: 16 MiB of segments */
typedef struct seg_index {
  seg_rec_t *recs;                   /* nrecs of caprecs used */
  uint32_t nrecs, caprecs;
  uint32_t rhead[2], rtail[2];       /* head, tail (dense: [1]), as rec links */
  /* records with bit c of warm_cls set, with a free slice resident whole,
   * with an untouched free slice: where there are none, the search stops
   * early */
  uint32_t warm_cnt[64], whole_cnt, clean_cnt;
  seg_rec_t first_recs[SEG_RECS_INLINE]; /* recs until there are more (seg_index.c) */
} __attribute__((aligned(64))) seg_index_t;

typedef struct seg_shard {
  hak_lock_t lock;                   /* not process-wide: not counted */
  hak_segment_t *head, *tail;        /* its segments with at least one free slice */
  hak_segment_t *dense_head, *dense_tail; /* the same, of its dense segments (HAKMEM_THP=dense) */
  _Atomic(uint32_t) dense_segs;      /* its dense segments, listed or not */
  _Atomic(uint32_t) dense_slices;    /* slices of dense-class pages cut from its segments */
  _Atomic(uint32_t) dense_full;      /* dense-class pages cut for a heap holding a full one (ever) */
  /* Slices of the pages on `returned`: added by the pusher (no lock), taken
   * off by the drain; on the line of the stack the pusher's CAS writes. */
  _Atomic(uint32_t) returned_slices;
  _Atomic(hak_page_t *) returned;    /* pages freed by other threads (segment.c) */
  /* In its segments, and of those the resident ones: hints for stealers
   * (warm steals) and sweeps, read without the lock. Written only under
   * the lock (STORE_ADD/STORE_SUB below): segment_publish, seg_unmap,
   * seg_run_claim_locked, seg_page_free_locked, and seg_dirty_add/sub's
   * callers (those and purge.c's purge_shard, with the lock taken again
   * after its madvise), or in a forked child's handler, alone. */
  _Atomic(uint32_t) free_slices;
  _Atomic(uint32_t) dirty_slices;
  /* The shard's books (seg_books below), on the line of the two hints
   * above and under the same rule: bytes of its free slices, of those the
   * resident ones (and what of both was last folded into the process-wide
   * figures: seg_fold), bytes of pages cut from its segments and of
   * purged slices cut again within a delay (both only grow: their readers
   * keep what they last saw, seg_books.cut_seen and refault_seen). The purge
   * side and the statistics add up the shards. */
  _Atomic(size_t) free_bytes, dirty_bytes;
  size_t free_folded, dirty_folded;
  _Atomic(size_t) cut, refault;
  seg_purge_out_t out;               /* under the lock */
  hak_segment_t *doomed;             /* under the lock: unmapped by shard_unlock, after it (segment.c) */
  hak_segment_t *advise;             /* under the lock: madvised by shard_unlock, after it, with */
  int advice;                        /* this (os_segment_in_use; seg_run_claim_locked) */
} __attribute__((aligned(64))) seg_shard_t;

extern seg_shard_t hak_seg_shards[HAK_SEG_SHARDS] HAK_HIDDEN;
extern seg_index_t hak_seg_index[HAK_SEG_SHARDS] HAK_HIDDEN;
HAK_INLINE seg_index_t *seg_ix(const seg_shard_t *sh) { return &hak_seg_index[sh - hak_seg_shards]; }

/* Process-wide counters, relaxed: hints and statistics, read without a
 * lock. The per-page counts (free, dirty, returned bytes, bytes cut,
 * refaults) are the shards' (seg_shard_t), written under each shard's lock
 * with a load and a store, on a line of the shard's own: here, on one line
 * for the process, they took 5-6 locked adds per 1000 operations of
 * bench_stress and bench_thread_churn (uprobe counts: commit 14dcdc4), each a
 * line every other thread cutting or freeing a page took back. What is left
 * here is written on segment events (map, unmap, a segment becoming empty
 * or not) and by the purge side, plus `dirty`, folded. */
typedef struct seg_books {
  _Atomic(size_t) empty;        /* segments entirely free */
  /* Bytes of free slices holding touched memory, the shards' dirty_bytes as
   * folded (seg_fold): within DIRTY_FOLD of the sum per shard, and 0
   * for a shard only when it has none. For the purge policy's tests and
   * page_alloc_once's "any other shard has warm slices". */
  _Atomic(size_t) dirty;
  /* The shards' free_bytes as folded, the same way: for the dirty budget's
   * footprint (purge.c, dirty_budget), which seg_purge_policy computes on
   * many a page free; adding up the shards there read every shard's line. */
  _Atomic(size_t) free;
  _Atomic(size_t) total;        /* bytes of all slices (free or in pages) */
  /* The recent peak of slices in pages (total - free) and when it was last
   * reached: the dirty budget follows it (purge.c, dirty_budget). */
  _Atomic(size_t) peak;
  _Atomic(uint32_t) peak_ms;
  _Atomic(uint32_t) last_sweep_ms;
  /* The dirty budget's adaptation (purge.c, seg_purge_policy): the shards'
   * refault sum at the last sweep (what was cut again since is the
   * difference), what that sweep purged, and the budget's doubling count. */
  _Atomic(size_t) refault_seen, last_sweep;
  _Atomic(unsigned) budget_shift;
  /* The shards' cut sum at the purge deadline's last look: the bytes of
   * pages cut since say whether the program is still cutting pages
   * (segment_purge_aged). */
  _Atomic(size_t) cut_seen;
} seg_books_t;

/* Bytes of the pages on every shard's returned stack. */
size_t seg_returned_bytes(void) HAK_HIDDEN;
/* The shards' sums (cold: the purge side, statistics). */
size_t seg_books_sum(size_t offset) HAK_HIDDEN;
#define SEG_SUM(field) seg_books_sum(offsetof(seg_shard_t, field))

extern seg_books_t hak_seg_books HAK_HIDDEN;

#define ADD(v, n) atomic_fetch_add_explicit(&(v), (n), memory_order_relaxed)
#define SUB(v, n) atomic_fetch_sub_explicit(&(v), (n), memory_order_relaxed)
#define LOAD(v) atomic_load_explicit(&(v), memory_order_relaxed)
/* A counter only one lock's holder writes (a shard's, under its lock): a
 * relaxed load and store, not a locked add. Each locked add waited for the
 * store buffer to drain, two or three per page cut and per page free. */
#define STORE_ADD(v, n) atomic_store_explicit(&(v), LOAD(v) + (n), memory_order_relaxed)
#define STORE_SUB(v, n) atomic_store_explicit(&(v), LOAD(v) - (n), memory_order_relaxed)

HAK_INLINE void shard_lock(seg_shard_t *sh) { hak_lock_local(&sh->lock); }

/* Segments detached under the lock (seg_unmap_if_safe) are unmapped after
 * it is released: no munmap under a shard lock (segment.c, "Mapping and
 * unmapping"); nor the transparent-huge-page advice a page cut made due
 * (HAKMEM_THP=auto, or a segment mapped before the options were read). The
 * advised segment holds the page just cut, which its cutter has not handed
 * out yet, so it is still mapped when the advice goes. Every release of a
 * shard lock goes through here. */
void seg_unmap_doomed(hak_segment_t *list) HAK_HIDDEN;
HAK_INLINE void shard_unlock(seg_shard_t *sh) {
  hak_segment_t *doomed = sh->doomed, *advise = sh->advise;
  if (HAK_LIKELY(!doomed && !advise)) {
    hak_unlock(&sh->lock);
    return;
  }
  int advice = sh->advice;
  sh->doomed = NULL;
  sh->advise = NULL;
  hak_unlock(&sh->lock);
  if (advise) os_segment_advise(advise, advice);
  if (doomed) seg_unmap_doomed(doomed);
}

#if HAK_SECURE
/* Where slice 0's blocks start and which slices a free segment has: set by
 * the first segment's guard geometry (segment.c). */
extern size_t hak_seg_slice0_start HAK_HIDDEN;
extern uint32_t hak_seg_all_free HAK_HIDDEN;
#define SLICE0_START hak_seg_slice0_start
#define ALL_FREE hak_seg_all_free
#elif HAK_WORD_CHECKS
/* The standard build never hands slice 0 out: no page's slice-map entry
 * then covers a segment header, and free()'s fast block-start test needs
 * no test for the header (guard/block_check.h). Slice 0 is never free, as
 * the secure build's guarded slices. */
#define SLICE0_START HAK_SEG_HDR_SIZE
#define ALL_FREE (ALL_SLICES & ~1u)
#else
#define SLICE0_START HAK_SEG_HDR_SIZE
#define ALL_FREE ALL_SLICES
#endif

HAK_INLINE size_t slice_usable(unsigned i) { return i == 0 ? HAK_SLICE_SIZE - SLICE0_START : HAK_SLICE_SIZE; }

/* Bits set in a slice mask. __builtin_popcount without -mpopcnt (the
 * baseline x86_64 target) is a call into libgcc's table walk: 5% of the
 * instructions of a large-block churn (bench_prodcons 2 20000 16 64K). */
HAK_INLINE unsigned pop32(uint32_t m) {
  m = m - ((m >> 1) & 0x55555555u);
  m = (m & 0x33333333u) + ((m >> 2) & 0x33333333u);
  return (((m + (m >> 4)) & 0x0f0f0f0fu) * 0x01010101u) >> 24;
}

HAK_INLINE size_t mask_bytes(uint32_t m) {
  size_t b = (size_t)pop32(m & ~1u) * HAK_SLICE_SIZE;
  if (m & 1u) b += slice_usable(0);
  return b;
}

/* sh locked: slices of m in s become dirty (free and resident) in the books,
 * or leave them. A dense segment's (HAKMEM_THP=dense) stay out: they are
 * resident as long as its huge page is, the dirty budget's sweeps never
 * purge them (a 64 KiB madvise would split the huge page), and counted
 * they would make the sweeps purge the other segments' slices harder. */
/* sh locked: a count of sh (its dirty or free bytes, now d) into the
 * process-wide figure when it moved DIRTY_FOLD or more from what was folded
 * last (*folded), or to or from 0. A shard that cuts and frees pages in
 * turn moves it up and down within the band and writes nothing
 * process-wide. */
#define DIRTY_FOLD ((size_t)8 << HAK_SLICE_SHIFT)
HAK_INLINE void seg_fold(_Atomic(size_t) *global, size_t d, size_t *folded) {
  size_t f = *folded;
  if (d == f || ((d != 0) == (f != 0) && (d > f ? d - f : f - d) < DIRTY_FOLD)) return;
  if (d > f) atomic_fetch_add_explicit(global, d - f, memory_order_relaxed);
  else atomic_fetch_sub_explicit(global, f - d, memory_order_relaxed);
  *folded = d;
}
#define seg_dirty_fold(sh) seg_fold(&hak_seg_books.dirty, LOAD((sh)->dirty_bytes), &(sh)->dirty_folded)
#define seg_free_fold(sh) seg_fold(&hak_seg_books.free, LOAD((sh)->free_bytes), &(sh)->free_folded)
HAK_INLINE void seg_dirty_add(seg_shard_t *sh, const hak_segment_t *s, uint32_t m) {
  if (s->dense || !m) return;
  STORE_ADD(sh->dirty_bytes, mask_bytes(m));
  STORE_ADD(sh->dirty_slices, pop32(m));
  seg_dirty_fold(sh);
}
HAK_INLINE void seg_dirty_sub(seg_shard_t *sh, const hak_segment_t *s, uint32_t m) {
  if (s->dense || !m) return;
  STORE_SUB(sh->dirty_bytes, mask_bytes(m));
  STORE_SUB(sh->dirty_slices, pop32(m));
  seg_dirty_fold(sh);
}

/* Lowest start index of a run of n free slices in mask, or -1. Slice 0 is
 * smaller than the others, so only single-slice pages of small classes use it
 * (none in the standard build, whose masks never hold it: ALL_FREE). */
HAK_INLINE int find_run(uint32_t mask, uint32_t dirty, unsigned n, bool slice0_ok) {
  if (!slice0_ok) mask &= ~1u;
  if (n == 1 && (mask & dirty)) return __builtin_ctz(mask & dirty); /* warm memory first */
  uint32_t m = mask;
  for (unsigned i = 1; i < n && m; i++) m &= mask >> i;
  return m ? __builtin_ctz(m) : -1;
}

/* sh locked: the pages other threads returned go back to their segments. */
void seg_drain_returned(seg_shard_t *sh) HAK_HIDDEN;
/* sh locked: a detached page's slices back into its segment, stamped freed
 * at `now`; those in `clean` were purged already. May unmap the segment. */
void seg_page_free_locked(seg_shard_t *sh, hak_page_t *pg, uint32_t now, uint32_t clean) HAK_HIDDEN;
/* No lock held: a new segment for shard `shard`, not on its list yet, or
 * NULL (seg_map.c). */
hak_segment_t *segment_map(unsigned shard, bool dense) HAK_HIDDEN;
/* No lock held: a segment from segment_map that was not published goes
 * back to the OS. */
void segment_unmap_fresh(hak_segment_t *s) HAK_HIDDEN;
/* sh locked: a segment from segment_map joins sh's books, index and list. */
void segment_publish(seg_shard_t *sh, hak_segment_t *s) HAK_HIDDEN;
/* sh locked: an empty segment of sh detached if nothing can still read its
 * page records (its unmap follows at shard_unlock); true if it was. */
bool seg_unmap_if_safe(seg_shard_t *sh, hak_segment_t *s) HAK_HIDDEN;
/* sh locked: slices first..first+n-1 of s, all free, leave the free books
 * (a page cut there, or a large page grown over them: large_run.c); true if
 * every one reads zero (never touched, or purged since). */
bool seg_run_claim_locked(seg_shard_t *sh, hak_segment_t *s, unsigned first, unsigned n) HAK_HIDDEN;
#if HAK_SECURE
/* Large-block guards (large_run.c). A page of n slices from `first` for
 * class cls is cut: the guards inside its run open (a large page keeps the
 * one at its end). No shard lock held: the page is the caller's, not handed
 * out yet (segment.c, page_guards_open). */
void seg_guards_open(hak_segment_t *s, unsigned first, unsigned n, unsigned cls) HAK_HIDDEN;
/* sh locked: lowest start of a run of n free slices of s whose last slice
 * keeps a guard and no other slice of it does, or -1: a large page cut
 * there needs neither seg_guards_open nor segment_large_guard. */
int seg_find_guarded_run(hak_segment_t *s, unsigned n) HAK_HIDDEN;
#endif
/* No shard lock held: the dirty budget's sweep, if it is over budget
 * (purge.c); `home` (the caller's shard) is tried first. */
void seg_purge_policy(seg_shard_t *home) HAK_HIDDEN;
/* sh locked: a batch a purger had out goes back to the free masks, its
 * slices counted dirty still (a forked child, whose purger is gone). */
void seg_purge_restore(seg_shard_t *sh) HAK_HIDDEN;
/* sh locked: s's record (the index, above). Every change of the header's
 * masks is followed by seg_rec_masks, before the lock is released and
 * before s may be unmapped; seg_page_free_locked copies last_cls. */
HAK_INLINE seg_rec_t *seg_rec(seg_shard_t *sh, const hak_segment_t *s) { return &seg_ix(sh)->recs[s->rec]; }
void seg_rec_masks(seg_shard_t *sh, const hak_segment_t *s) HAK_HIDDEN;
/* sh locked: s's record joins its list at the tail, or leaves it (with
 * seg_list_push and seg_list_remove: the same order as the headers'). */
void seg_rec_push(seg_shard_t *sh, hak_segment_t *s) HAK_HIDDEN;
void seg_rec_unlink(seg_shard_t *sh, hak_segment_t *s) HAK_HIDDEN;
/* sh locked: s (from segment_map, room made by seg_lock_with_room) gets a
 * record; s leaves the index (its unmap: the last record moves into its
 * slot). */
void seg_rec_add(seg_shard_t *sh, hak_segment_t *s) HAK_HIDDEN;
void seg_rec_remove(seg_shard_t *sh, hak_segment_t *s) HAK_HIDDEN;
/* No lock held: sh's lock taken, with room for one more record in its index
 * if `room`; false if the OS refused the memory for it (the lock is taken
 * all the same). A bigger array is mapped with the lock dropped. */
bool seg_lock_with_room(seg_shard_t *sh, bool room) HAK_HIDDEN;
/* sh locked: where page_alloc_locked cuts a page of n slices for cls (the
 * tiers: segment.c) among the shard's (dense) segments, read from the
 * index: the slice, and the segment in *out; -1 if none. */
int seg_search_locked(seg_shard_t *sh, unsigned n, unsigned cls, bool warm_only, bool dense, hak_segment_t **out) HAK_HIDDEN;

/* sh locked: the list link that every take-out and put-back keeps: a
 * segment is on its shard's list iff its free mask is not 0 (segment.c). */
void seg_list_push(seg_shard_t *sh, hak_segment_t *s) HAK_HIDDEN;
void seg_list_remove(seg_shard_t *sh, hak_segment_t *s) HAK_HIDDEN;

#endif
