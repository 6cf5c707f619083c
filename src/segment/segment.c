/* segment.c — maps 2 MiB segments, carves pages (runs of 64 KiB slices) out of
 * them and takes them back.
 *
 * Shards. Segments belong to one of HAK_SEG_SHARDS shards, each with its own
 * lock and list of segments that have free slices. A heap draws its shard
 * once (round robin, segment_shard_pick) and keeps it for its life, through
 * the heap pool's recycling too, so up to HAK_SEG_SHARDS - 1 threads never
 * meet on a shard lock: it is taken by the heap's own thread (under its heap
 * lock), and otherwise only by the purge deadline's work, malloc_trim, a fork,
 * by threads stealing free slices (a try, then a bounded wait: page_steal)
 * and, with a try that never waits, by sweeps for the dirty budget (which
 * drop it around their madvise calls: purge.c). First-class heaps draw a
 * shard of their own too; a caller without a heap (a thread past its exit)
 * draws one per call. Shard 0 is never drawn (0 means "not drawn yet"): no shard lock is
 * process-wide, and none is counted by the observe build.
 * Pages are cut from the caller's shard; when it has no free run, from
 * another shard's segments (steal, so a thread never maps a segment while
 * another holds free slices it could use: the process's footprint stays
 * that of one shared pool), and only then from a new segment.
 *
 * The returned stack (lock-free). A page freed by a thread of another shard
 * (or without one: the purger, a collector, malloc_trim) is not given back to
 * its segment by that thread: it goes onto the owning shard's `returned`
 * stack, linked through page->next, its freed time in page->used (a free
 * page's count is otherwise unused). A pusher links above the top it read and
 * CASes the top; the shard's lock holder takes the whole stack with one
 * exchange (never a single pop: no ABA) and frees the pages into their
 * segments before it searches them. So the freeing thread takes no lock:
 *  - a pusher preempted between its read and its CAS holds only its own page;
 *    the stack stays consistent and others go on;
 *  - fork: takers run under the shard lock, which the prepare handler holds,
 *    so no chain is held privately at the fork; the stacks, changed only by
 *    single CASes, are consistent in the child;
 *  - thread exit: nothing is owned by a thread: the shard stays with the heap
 *    in the pool, and pages waiting on a stack are taken by the shard's next
 *    thread, a stealer, or the purge deadline (segment_purge_aged drains every
 *    shard), at the latest purge_delay_ms after they were freed.
 * A page on a stack keeps its segment from emptying, so no segment is
 * unmapped under it.
 *
 * Mapping and unmapping (seg_map.c) run with no shard lock held.
 *
 * Policy (carried out in purge.c): a freed page leaves its slices "dirty" (resident)
 * and stamped with the time. Once the dirty bytes of all segments pass
 * hak_config.dirty_max, a sweep (at most one per half delay, process-wide)
 * purges the slices that have stayed free for purge_delay_ms: the freeing
 * thread's shard under the lock it holds, others' only where a try gets
 * their lock; slices that keep being reused are never purged, so churn costs
 * no madvise and no page faults. New pages prefer dirty slices, letting the
 * others age. Far over budget (twice), sweeps come more often and take
 * younger memory, but never memory freed in the last delay/8. Empty segments
 * beyond hak_config.segment_cache (process-wide) are unmapped. No purge or
 * unmap runs under a process-wide lock.
 *
 * Dense segments (HAKMEM_THP=dense, os/hugepage.c): a shard keeps them on a
 * list of their own (dense_head), searched only for one-slice pages of the
 * classes up to 8 KiB once the shard went dense (page_alloc_once), and
 * never for other pages; any free slice of a dense segment in use is warm
 * (its huge page is resident whole). */
#include "segment/segment.h"
#include "segment/shard.h"
#include "segment/page_cache.h"
#include "segment/free_list.h"
#include "guard/registry.h"
#include "guard/unmapped.h"
#include "heap/size_class.h"
#include "os/lock.h"
#include "os/os.h"
#include "os/random.h"
#include "os/vg_quiet.h"
#include "policy/config.h"
#include "policy/purger.h"
#include "stats/stats.h"

#include <string.h>

seg_shard_t hak_seg_shards[HAK_SEG_SHARDS];
seg_books_t hak_seg_books;
static _Atomic(unsigned) next_shard;

unsigned segment_shard_pick(void) { return 1 + ADD(next_shard, 1) % (HAK_SEG_SHARDS - 1); }

void seg_list_push(seg_shard_t *sh, hak_segment_t *s) {
  hak_segment_t **head = s->dense ? &sh->dense_head : &sh->head, **tail = s->dense ? &sh->dense_tail : &sh->tail;
  s->next = NULL;
  s->prev = *tail;
  if (*tail) (*tail)->next = s; else *head = s;
  *tail = s;
  seg_rec_push(sh, s);
}

void seg_list_remove(seg_shard_t *sh, hak_segment_t *s) {
  hak_segment_t **head = s->dense ? &sh->dense_head : &sh->head, **tail = s->dense ? &sh->dense_tail : &sh->tail;
  if (s->prev) s->prev->next = s->next; else *head = s->next;
  if (s->next) s->next->prev = s->prev; else *tail = s->prev;
  s->next = s->prev = NULL;
  seg_rec_unlink(sh, s);
}

/* HAKMEM_THP=dense (os/hugepage.c has the why). A shard's pages of dense
 * classes go to dense segments once it has one, or once it holds
 * DENSE_SHARD_SLICES of them, DENSE_SHARD_FULL of which were cut for a
 * heap whose pages of that class were full (heap.c: evidence that the
 * pages fill; 64 threads each holding one page per class, bench_thread_mem,
 * show none), and the process holds DENSE_ALL_SLICES: a small program
 * never pays a 2 MiB page's granularity. */
#define DENSE_MAX_SIZE 8192
#define DENSE_SHARD_SLICES 32
#define DENSE_SHARD_FULL 16
#define DENSE_ALL_SLICES 192
static _Atomic(uint32_t) dense_slices_all;
/* A class whose pages go to dense segments (HAKMEM_THP=dense). */
HAK_INLINE bool class_dense(unsigned cls) {
  return hak_config.thp == HAK_THP_DENSE && cls != HAK_CLASS_NONE && hak_class_size[cls] <= DENSE_MAX_SIZE;
}

void segment_note_full(unsigned shard, unsigned cls) {
  if (class_dense(cls) && shard && shard < HAK_SEG_SHARDS) ADD(hak_seg_shards[shard].dense_full, 1);
}

/* The record of the page of n slices from `first` for cls; page_init then
 * hands it the slices. */
static hak_page_t *page_record_init(hak_segment_t *s, unsigned first, unsigned n, unsigned cls) {
  hak_page_t *pg = &s->pages[first];
  uint8_t *base = (uint8_t *)s + (size_t)first * HAK_SLICE_SIZE;
  uint8_t *start = first == 0 ? (uint8_t *)s + SLICE0_START : base;
  uint8_t *end = base + (size_t)n * HAK_SLICE_SIZE;
#if !HAK_SECURE
  /* A one-slice class in slice 0 starts at the first multiple of its size
   * past the header, so that its blocks, like those of every other slice,
   * lie at multiples of the size from the slice's start. Powers of two
   * start where they did; other sizes lose at most one block of the page.
   * (The fast build: the standard build gives slice 0 to no page,
   * segment/shard.h, ALL_FREE, so that its free's block-start test needs
   * no test for the header, guard/block_check.h.) */
  if (first == 0 && n == 1 && cls != HAK_CLASS_NONE) {
    size_t b = hak_class_size[cls];
    start = (uint8_t *)s + (SLICE0_START + b - 1) / b * b;
  }
#endif
  memset(pg, 0, offsetof(hak_page_t, anext)); /* a stale abandoned entry may point here */
  pg->ends = 0;
  pg->start = pg->bump = start;
  pg->end = end;
  pg->cls = (uint16_t)cls;
  pg->slice_count = (uint8_t)n;
  pg->first_slice = first;
  if (cls != HAK_CLASS_NONE) {
    pg->bsize = hak_class_size[cls];
    if (n > 1) pg->start = pg->bump = start = start + HAK_PAGE_LEAD; /* secure: heap/canary.h */
    pg->capacity = (uint32_t)((size_t)(end - start) / pg->bsize);
    pg->end = start + (size_t)pg->capacity * pg->bsize;
  } else {
    pg->bsize = (uint32_t)(end - start);
    pg->capacity = 1;
    pg->state = HAK_PAGE_LARGE;
  }
  return pg;
}

static void page_init(hak_segment_t *s, unsigned first, unsigned n, unsigned cls) {
  hak_page_t *pg = page_record_init(s, first, n, cls);
  uint8_t *base = (uint8_t *)s + (size_t)first * HAK_SLICE_SIZE;
  for (unsigned i = first; i < first + n; i++) s->slice_page[i] = pg;
  /* Published last: a block of this page can reach free() only after the
   * page is handed out, which orders these stores before that read. */
  for (unsigned i = first; i < first + n; i++) s->slice_cls[i] = (uint8_t)cls;
  slice_map_set(base, n, cls + 1);
}

void seg_drain_returned(seg_shard_t *sh) {
  if (!atomic_load_explicit(&sh->returned, memory_order_relaxed)) return; /* no write to an empty stack */
  hak_page_t *pg = atomic_exchange_explicit(&sh->returned, NULL, memory_order_acquire);
  uint32_t slices = 0;
  for (hak_page_t *next; pg; pg = next) {
    next = pg->next;
    slices += pg->slice_count;
    seg_page_free_locked(sh, pg, pg->used, 0);
  }
  SUB(sh->returned_slices, slices); /* pushers add without the lock */
}

static hak_page_t *page_alloc_locked(seg_shard_t *sh, unsigned n, unsigned cls, bool warm_only, bool dense);
static hak_page_t *page_cut(seg_shard_t *sh, hak_segment_t *s, unsigned first, unsigned n, unsigned cls);

/* Waits for a lock of another shard are bounded: STEAL_SPINS pauses, then
 * yields until `ms` milliseconds have passed since *from (set at the first
 * yield of a pass, so a whole pass waits at most that long; the clock is
 * read once per yield); false if the lock is still held. Its holders hold
 * it for a search and a cut, with no system call (no madvise: purge.c; no
 * mmap or munmap: seg_map.c), so a wait past the spins means that the
 * holder was preempted.
 * The bound is time, not a count of yields: with the holder preempted on
 * the other core, a yield returns at once. */
#define STEAL_SPINS 64
#define STEAL_WAIT_MS 10      /* a busy shard, before a segment is mapped */
#define STEAL_WAIT_MS_OOM 1000 /* out of address space, before malloc fails */
static bool shard_lock_bounded(seg_shard_t *sh, uint32_t ms, uint32_t *from) {
  for (unsigned i = 0;; i++) {
    if (hak_trylock(&sh->lock)) return true;
    if (i < STEAL_SPINS) {
      cpu_relax();
      continue;
    }
    uint32_t now = os_now_ms() | 1;
    if (!*from) *from = now;
    else if (now - *from >= ms) return false;
    sched_yield();
  }
}

/* Another shard's free slices, before a segment is mapped. With `wait_ms`
 * (a first pass found a candidate shard busy, or out of address space)
 * each candidate shard's lock is waited for, up to wait_ms in all;
 * otherwise only tried. A shard whose lock was not had sets *busy. The
 * caller holds no shard lock, and a shard lock's holder never waits for
 * another.
 *
 * The fallback when a wait runs out is the caller's: a new segment (or,
 * out of address space, NULL). The wait is what makes a thread use another
 * shard's free slices rather than map a segment while that shard's lock is
 * briefly held (stealers meeting on it): giving up after 256 pauses, or
 * after 3 yields, sizemix's peak mapped bytes went from 365 MiB to 430-526.
 * With the holders out of system calls, waits past the spins are rare:
 * 0-4 per run of sizemix (4x1.5M) and oversub, up to 10 in stress, at
 * load 8, and none ran out in 16 runs. */
static hak_page_t *page_steal(unsigned home, unsigned n, unsigned cls, bool dense, uint32_t wait_ms, bool *busy) {
  uint32_t from = 0;
  for (unsigned k = 1; k < HAK_SEG_SHARDS; k++) {
    seg_shard_t *sh = &hak_seg_shards[(home + k) % HAK_SEG_SHARDS];
    if (LOAD(sh->free_slices) < n && !atomic_load_explicit(&sh->returned, memory_order_relaxed)) continue;
    if (!(wait_ms ? shard_lock_bounded(sh, wait_ms, &from) : hak_trylock(&sh->lock))) {
      *busy = true;
      continue;
    }
    seg_drain_returned(sh);
    hak_page_t *pg = page_alloc_locked(sh, n, cls, false, dense);
    shard_unlock(sh);
    if (pg) return pg;
  }
  return NULL;
}

/* Another shard's resident free slices, before the caller's own shard gives
 * an untouched one. Pages follow their blocks: in a producer/consumer
 * program the producers' in-flight memory swings from one to the other, and
 * a producer that cut untouched slices of its own shard while the other's
 * freed pages sat warm made the process resident for the sum of the two
 * peaks, not the peak of the sum (bench_xmalloc 2 2 300: 6 segments, every
 * slice touched, ~6 MB of them free at the peak). Only a try of each lock:
 * a busy shard is passed over, and the caller cuts from its own. */
static hak_page_t *page_steal_warm(unsigned home, unsigned n, unsigned cls, bool dense) {
  for (unsigned k = 1; k < HAK_SEG_SHARDS; k++) {
    seg_shard_t *sh = &hak_seg_shards[(home + k) % HAK_SEG_SHARDS];
    if (LOAD(sh->dirty_slices) < n && !atomic_load_explicit(&sh->returned, memory_order_relaxed)) continue;
    if (!hak_trylock(&sh->lock)) continue;
    seg_drain_returned(sh);
    hak_page_t *pg = page_alloc_locked(sh, n, cls, true, dense);
    shard_unlock(sh);
    if (pg) return pg;
  }
  return NULL;
}

/* Secure build: the guards that freed large pages left inside the run of a
 * page just cut (large_run.c) open after the shard lock is released: no
 * mprotect under a shard lock. The cutter does it before it hands the page
 * out, so no block of the page can be reached while a guard inside it is
 * closed; until then the run is the cutter's alone (out of the free mask,
 * the page not handed out), and the guard bits of its slices are changed
 * only by their page's owner (large_run.c). page_init writes the page
 * record and the slice map, none of the run's memory. */
HAK_INLINE void page_guards_open(hak_page_t *pg, unsigned cls) {
#if HAK_SECURE
  seg_guards_open(segment_of(pg), pg->first_slice, pg->slice_count, cls);
#else
  (void)pg, (void)cls;
#endif
}

static hak_page_t *page_alloc_once(unsigned shard, unsigned n, unsigned cls, bool may_map, bool wait) {
  seg_shard_t *sh = &hak_seg_shards[shard];
  /* A dense class's page goes to a dense segment once the shard has one, or
   * holds enough dense-class pages to fill one. */
  bool dense = class_dense(cls) &&
               (LOAD(sh->dense_segs) || (LOAD(sh->dense_slices) >= DENSE_SHARD_SLICES && LOAD(sh->dense_full) >= DENSE_SHARD_FULL &&
                                         LOAD(dense_slices_all) >= DENSE_ALL_SLICES));
  shard_lock(sh);
  seg_drain_returned(sh);
  hak_page_t *pg = page_alloc_locked(sh, n, cls, true, dense);
  /* No warm slice here: another shard's first if any shard has some (the
   * folded process-wide count above this shard's folded part: a shard's
   * count folds to or from 0 at once, seg_dirty_fold, so another shard with
   * any warm slice shows, and the test reads no other shard's line). */
  if (!pg && LOAD(hak_seg_books.dirty) > sh->dirty_folded) {
    shard_unlock(sh);
    pg = page_steal_warm(shard, n, cls, dense);
    if (pg) goto done;
    shard_lock(sh);
  }
  if (!pg) pg = page_alloc_locked(sh, n, cls, false, dense);
  shard_unlock(sh);
  bool busy = false;
  if (!pg) pg = page_steal(shard, n, cls, dense, wait ? STEAL_WAIT_MS_OOM : 0, &busy);
  /* A shard that may have the slices was busy (other threads stealing from
   * it at once, say): its lock is waited for, boundedly, rather than a
   * segment mapped at once. */
  if (!pg && may_map && busy) pg = page_steal(shard, n, cls, dense, STEAL_WAIT_MS, &busy);
  if (!pg && may_map) {
    /* Mapped without the lock, published under it. The search is made once
     * more first: slices may have come free meanwhile (the new segment then
     * stays on the list, empty, for the next cut). */
    hak_segment_t *fresh = segment_map(shard, dense);
    if (!seg_lock_with_room(sh, fresh != NULL)) { /* no memory for its record */
      shard_unlock(sh);
      segment_unmap_fresh(fresh);
      return NULL;
    }
    seg_drain_returned(sh);
    pg = page_alloc_locked(sh, n, cls, false, dense);
    if (fresh) {
      segment_publish(sh, fresh);
      int first = find_run(fresh->free_mask, 0, n, n == 1 && cls != HAK_CLASS_NONE);
      if (!pg && first >= 0) pg = page_cut(sh, fresh, (unsigned)first, n, cls);
    }
    shard_unlock(sh);
  }
done:
  if (pg) {
    page_guards_open(pg, cls);
    HAK_STAT_INC(HAK_EV_PAGE_ALLOC);
  }
  return pg;
}

unsigned segment_pages_alloc(unsigned shard, unsigned n, unsigned cls, hak_page_t **out, unsigned k) {
  seg_shard_t *sh = &hak_seg_shards[shard];
  unsigned got = 0;
  shard_lock(sh);
  seg_drain_returned(sh);
  while (got < k && (out[got] = page_alloc_locked(sh, n, cls, false, class_dense(cls) && LOAD(sh->dense_segs))) != NULL) got++;
  shard_unlock(sh);
  for (unsigned i = 0; i < got; i++) page_guards_open(out[i], cls);
  HAK_STAT_ADD(HAK_EV_PAGE_ALLOC, got);
  return got;
}

/* sh locked: slices first..first+n-1 of s, all free, leave the free books
 * (for a page cut there, or a large page grown over them); true if every
 * one reads zero (never touched, or purged since). */
bool seg_run_claim_locked(seg_shard_t *sh, hak_segment_t *s, unsigned first, unsigned n) {
  uint32_t run = (n == 32 ? ALL_SLICES : ((1u << n) - 1)) << first;
  /* A free slice that is not dirty was never touched, or purged since. */
  bool zero = (s->dirty_mask & run) == 0;
  /* The clock is read only for a slice purged before: a fresh segment's
   * first pages are cut during start-up too, where under a sanitizer's
   * runtime clock_gettime may not be callable yet. */
  size_t back = 0;
  uint32_t now = 0;
  for (uint32_t purged = run & ~s->dirty_mask; purged; purged &= purged - 1) {
    uint32_t t = s->freed_ms[__builtin_ctz(purged)];
    if (!t) continue;
    if (!now) now = os_now_ms() | 1;
    if (now - t < hak_config.purge_delay_ms) back += HAK_SLICE_SIZE;
  }
  if (back) STORE_ADD(sh->refault, back);
  STORE_ADD(sh->cut, (size_t)n << HAK_SLICE_SHIFT);
  if (s->free_mask == ALL_FREE) SUB(hak_seg_books.empty, 1);
  s->free_mask &= ~run;
  int advice = os_segment_in_use(s, HAK_SLICES - pop32(s->free_mask)); /* HAKMEM_THP=auto */
  if (HAK_UNLIKELY(advice)) {
    /* One claim per lock hold (a page cut, a large page grown): the slot
     * is free. Were it not, the advice would go now, under the lock. */
    if (sh->advise) os_segment_advise(s, advice);
    else sh->advise = s, sh->advice = advice;
  }
  STORE_SUB(sh->free_bytes, mask_bytes(run));
  seg_free_fold(sh);
  STORE_SUB(sh->free_slices, n);
  seg_dirty_sub(sh, s, s->dirty_mask & run);
  s->dirty_mask &= ~run;
  s->whole_mask &= ~run;
  seg_rec_masks(sh, s);
  if (s->free_mask == 0) seg_list_remove(sh, s);
  return zero;
}

/* sh locked: the page of n slices from `first` of s (all free), for cls. */
static hak_page_t *page_cut(seg_shard_t *sh, hak_segment_t *s, unsigned first, unsigned n, unsigned cls) {
  bool zero = seg_run_claim_locked(sh, s, first, n);
  if (class_dense(cls)) ADD(sh->dense_slices, n), ADD(dense_slices_all, n);
  page_init(s, first, n, cls);
  s->pages[first].known_zero = zero;
  return &s->pages[first];
}

/* sh locked: a page cut where the search of the shard's index (seg_index.c,
 * with the tiers of the choice) finds its run. */
static hak_page_t *page_alloc_locked(seg_shard_t *sh, unsigned n, unsigned cls, bool warm_only, bool dense) {
  hak_segment_t *s;
  int first = seg_search_locked(sh, n, cls, warm_only, dense, &s);
  if (first < 0) return NULL;
  if (s->free_mask == ALL_FREE) HAK_STAT_INC(HAK_EV_SEGMENT_REUSE);
  return page_cut(sh, s, (unsigned)first, n, cls);
}

/* Out of address space, the caches above (freed huge mappings) are given
 * back and the search is made once more, waiting for every shard's lock this
 * time (boundedly: page_steal), without any lock held meanwhile. */
hak_page_t *segment_page_alloc_ex(unsigned shard, unsigned n, unsigned cls, bool may_map) {
  hak_page_t *pg = page_alloc_once(shard, n, cls, may_map, false);
  if (!pg && may_map && os_reclaim()) pg = page_alloc_once(shard, n, cls, may_map, true);
  return pg;
}

hak_page_t *segment_page_alloc(unsigned shard, unsigned n, unsigned cls) {
  return segment_page_alloc_ex(shard, n, cls, true);
}

void segment_page_reinit(hak_page_t *pg, unsigned cls) {
  bool zero = pg->known_zero; /* a page cut but never used stays known zero */
  uint16_t ends = pg->ends;   /* the same run: the same pages are resident */
  page_guards_open(pg, cls); /* no shard lock held: the page is the caller's */
  page_init(segment_of(pg), pg->first_slice, pg->slice_count, cls);
  pg->known_zero = zero;
  pg->ends = ends;
}

/* A large page's slices read the same in the slice map (HAK_CLASS_NONE + 1)
 * and slice_cls (HAK_CLASS_NONE) whether the page holds a block or is free:
 * only slice_page and the record tell. Parked, the page keeps its slices
 * (slice_page still points at it) and only its record says it holds no
 * block: every reader that could meet a stale pointer into it (large_free,
 * large_usable, large_live_usable, large_run_resize, guard/fault.c) tests
 * state == HAK_PAGE_LARGE and the block start, and reports or ignores it as
 * it does for a free slice. The page stash parks large pages (a put and a
 * take cost a few stores, where detach and reinit wrote slice_page and the
 * slice map for every slice: ~400 instructions per large block of 5-16
 * slices); a parked page that leaves the stash for its segment is detached
 * then (segment_page_free_at). */
void segment_page_park(hak_page_t *pg) {
  pg->state = HAK_PAGE_FREE;
  atomic_store_explicit(&pg->owner, NULL, memory_order_relaxed);
}

void segment_page_unpark(hak_page_t *pg) {
  bool zero = pg->known_zero;
  uint16_t ends = pg->ends;
  page_guards_open(pg, HAK_CLASS_NONE);
  page_record_init(segment_of(pg), pg->first_slice, pg->slice_count, HAK_CLASS_NONE);
  pg->known_zero = zero;
  pg->ends = ends;
}

void segment_page_detach(hak_page_t *pg) {
  hak_segment_t *s = segment_of(pg);
  unsigned first = pg->first_slice, n = pg->slice_count;
  for (unsigned i = first; i < first + n; i++) {
    s->slice_cls[i] = HAK_CLASS_NONE;
    s->slice_page[i] = NULL;
  }
  slice_map_set((uint8_t *)s + (size_t)first * HAK_SLICE_SIZE, n, HAK_CLASS_NONE + 1);
  pg->state = HAK_PAGE_FREE;
  atomic_store_explicit(&pg->owner, NULL, memory_order_relaxed);
}

/* To the returned stack of the page's shard (see above): no lock. */
static void page_return(hak_page_t *pg, uint32_t now) {
  seg_shard_t *sh = &hak_seg_shards[segment_of(pg)->shard];
  HAK_STAT_INC(HAK_EV_PAGE_RETIRE); /* counted now, not when the stack is drained */
  pg->used = now;
  ADD(sh->returned_slices, pg->slice_count);
  hak_page_t *top = atomic_load_explicit(&sh->returned, memory_order_relaxed);
  do {
    pg->next = top;
  } while (!atomic_compare_exchange_weak_explicit(&sh->returned, &top, pg, memory_order_release,
                                                  memory_order_relaxed));
}

void segment_page_free(hak_page_t *pg) { segment_page_free_at(pg, os_now_ms()); }

void segment_page_free_at(hak_page_t *pg, uint32_t now) {
  segment_page_detach(pg);
  page_return(pg, now);
  /* Due once idle for the delay, even if nothing is freed after it: the
   * deadline's work drains the stack. */
  purge_arm((now + hak_config.purge_delay_ms) | 1);
}

void segment_pages_free(unsigned shard, hak_page_t *list) {
  for (hak_page_t *pg = list; pg; pg = pg->next) segment_page_detach(pg);
  uint32_t now = os_now_ms();
  seg_shard_t *sh = &hak_seg_shards[shard];
  bool locked = false;
  for (hak_page_t *pg = list, *next; pg; pg = next) {
    next = pg->next;
    if (segment_of(pg)->shard != shard) {
      page_return(pg, now);
      continue;
    }
    if (!locked) shard_lock(sh);
    locked = true;
    HAK_STAT_INC(HAK_EV_PAGE_RETIRE);
    seg_page_free_locked(sh, pg, now, 0);
  }
  if (locked) {
    shard_unlock(sh);
    seg_purge_policy(sh); /* after the unlock: a sweep madvises without it */
  }
  purge_arm((now + hak_config.purge_delay_ms) | 1);
}

void seg_page_free_locked(seg_shard_t *sh, hak_page_t *pg, uint32_t now, uint32_t clean) {
  hak_segment_t *s = segment_of(pg);
  unsigned first = pg->first_slice, n = pg->slice_count;
  uint32_t run = (n == 32 ? ALL_SLICES : ((1u << n) - 1)) << first;
  if (s->free_mask == 0) seg_list_push(sh, s);
  s->free_mask |= run;
  if (class_dense(pg->cls)) SUB(sh->dense_slices, n), SUB(dense_slices_all, n);
  STORE_ADD(sh->free_bytes, mask_bytes(run));
  seg_free_fold(sh);
  STORE_ADD(sh->free_slices, n);
  for (unsigned i = first; i < first + n; i++) {
    s->freed_ms[i] = now;
    s->last_cls[i] = (uint8_t)pg->cls;
  }
  s->dirty_mask |= run & ~clean;
  /* Whole: every OS page of the run is resident, which a page carved to its
   * end says only if its blocks are no bigger than an OS page. A block of
   * 8-256 KiB written at its ends (bench_prodcons, bench_sizemix) leaves
   * the OS pages between untouched: a page of another class cut there at
   * tier 2 (page_alloc_locked) faulted them in, and the freed page's own
   * class, which would have found its block boundaries again at tier 1,
   * cut untouched slices instead (bench_prodcons 2 N 16 64K: 1.4x the
   * minor faults, 14% more CPU). */
  if (pg->cls != HAK_CLASS_NONE && pg->bump == pg->end && pg->bsize <= os_page_size()) s->whole_mask |= run & ~clean;
  else s->whole_mask &= ~run;
  seg_dirty_add(sh, s, run & ~clean);
  seg_rec_t *r = seg_rec(sh, s);
  for (unsigned i = first; i < first + n; i++) r->last_cls[i] = (uint8_t)pg->cls;
  seg_rec_masks(sh, s);
  /* An empty dense segment is not kept: its huge page is resident whole,
   * and no sweep purges it. */
  if (s->free_mask == ALL_FREE) {
    if (ADD(hak_seg_books.empty, 1) + 1 > hak_config.segment_cache || s->dense) seg_unmap_if_safe(sh, s);
  }
}

size_t seg_books_sum(size_t offset) {
  size_t sum = 0;
  for (unsigned i = 0; i < HAK_SEG_SHARDS; i++)
    sum += atomic_load_explicit((_Atomic(size_t) *)((char *)&hak_seg_shards[i] + offset), memory_order_relaxed);
  return sum;
}

size_t seg_returned_bytes(void) {
  size_t returned = 0;
  for (unsigned i = 0; i < HAK_SEG_SHARDS; i++) returned += LOAD(hak_seg_shards[i].returned_slices);
  return returned * HAK_SLICE_SIZE;
}

size_t segment_free_bytes(void) { return SEG_SUM(free_bytes) + seg_returned_bytes() + page_cache_bytes(); }
size_t segment_dirty_bytes(void) { return SEG_SUM(dirty_bytes); }

void segment_atfork_prepare(void) {
  for (unsigned i = 0; i < HAK_SEG_SHARDS; i++) hak_lock_fork(&hak_seg_shards[i].lock);
}
void segment_atfork_parent(void) {
  for (unsigned i = HAK_SEG_SHARDS; i-- > 0;) hak_unlock_fork(&hak_seg_shards[i].lock);
}
void segment_atfork_child(void) {
  for (unsigned i = 0; i < HAK_SEG_SHARDS; i++) {
    hak_lock_reset(&hak_seg_shards[i].lock);
    seg_purge_restore(&hak_seg_shards[i]); /* a purger's batch: its thread is gone */
  }
  os_reserve_atfork_child();
#if HAK_SECURE
  os_random_atfork_child(); /* new segments of the child get keys the parent cannot guess */
#endif
}
