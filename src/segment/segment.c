/* segment.c — maps 2 MiB segments, carves pages (runs of 64 KiB slices) out of
 * them and takes them back.
 *
 * Shards. Segments belong to one of HAK_SEG_SHARDS shards, each with its own
 * lock and list of segments that have free slices. A heap draws its shard
 * once (round robin, segment_shard_pick) and keeps it for its life, through
 * the heap pool's recycling too, so up to HAK_SEG_SHARDS - 1 threads never
 * meet on a shard lock: it is taken by the heap's own thread (under its heap
 * lock), and otherwise only by the purge deadline's work, malloc_trim, a fork,
 * and, with a try that never waits, by threads stealing free slices or
 * sweeping for the dirty budget (which drops it around its madvise calls:
 * purge.c). First-class heaps draw a shard of their
 * own too; a caller without a heap (a thread past its exit) draws one per
 * call. Shard 0 is never drawn (0 means "not drawn yet"): no shard lock is
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
 * unmap runs under a process-wide lock. */
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
  s->next = NULL;
  s->prev = sh->tail;
  if (sh->tail) sh->tail->next = s; else sh->head = s;
  sh->tail = s;
}

void seg_list_remove(seg_shard_t *sh, hak_segment_t *s) {
  if (s->prev) s->prev->next = s->next; else sh->head = s->next;
  if (s->next) s->next->prev = s->prev; else sh->tail = s->prev;
  s->next = s->prev = NULL;
}

#if HAK_SECURE
/* Secure build: the header is followed by a guard, OS pages of no access up
 * one OS page of no access, then readable pages up to where slice 0's blocks
 * start (aligned to HAK_SEG_HDR_SIZE, as the aligned allocations expect):
 * with 4 KiB pages the header is one page, the guard takes 4-8 KiB and blocks
 * start at 16 KiB (8 KiB in the other builds). Where the pages are so big
 * that nothing of slice 0 would be left (64 KiB pages: header 0-64, guard
 * 64-128 KiB), slice 0 and the slices the guard covers are never free:
 * all_free lacks them. Computed once, at the first segment (a race between
 * two shards' first segments writes the same values). */
size_t hak_seg_slice0_start = HAK_SEG_HDR_SIZE;
uint32_t hak_seg_all_free = ALL_SLICES;
static size_t guard_from;

static void guard_geometry(void) {
  if (__atomic_load_n(&guard_from, __ATOMIC_ACQUIRE)) return;
  size_t ps = os_page_size();
  size_t from = align_up(sizeof(struct hak_segment), ps);
  /* Blocks start at least a word after the guard: C++'s delete[] reads the
   * array cookie 8 bytes before the pointer it is given, and delete[] of a
   * `new` object at the first block must reach the free's check (a report),
   * not fault in the guard. The readable gap is never written: no RSS. */
  size_t to = align_up(from + ps + 2 * sizeof(void *), HAK_SEG_HDR_SIZE);
  if (to >= HAK_SLICE_SIZE) { /* no room left in slice 0 */
    to = align_up(to, HAK_SLICE_SIZE);
    hak_seg_all_free = ALL_SLICES << (to >> HAK_SLICE_SHIFT);
  }
  hak_seg_slice0_start = to;
  __atomic_store_n(&guard_from, from, __ATOMIC_RELEASE); /* last: the others are set */
}
#endif

static hak_segment_t *segment_map(seg_shard_t *sh) {
  hak_segment_t *s = os_map_segment();
  if (!s) return NULL;
  if (!slice_map_reserve(s, HAK_SEG_SIZE)) { /* out of address space: nothing of it stays */
    os_unmap(s, HAK_SEG_SIZE);
    return NULL;
  }
  HAK_VG_METADATA(s, sizeof *s);
  s->magic = HAK_SEG_MAGIC;
  s->kind = HAK_SEG_SMALL;
  memset(s->slice_cls, HAK_CLASS_NONE, sizeof s->slice_cls);
  s->map_size = HAK_SEG_SIZE;
#if HAK_SECURE
  guard_geometry();
  free_list_keys_init(s);
  /* hugetlb segments refuse (one 2 MiB page): they go without */
  os_guard((uint8_t *)s + guard_from, os_page_size(), true);
#endif
  s->free_mask = ALL_FREE;
  s->dirty_mask = s->whole_mask = 0;
  s->shard = (uint8_t)(sh - hak_seg_shards);
  slice_map_set(s, HAK_SLICES, HAK_CLASS_NONE + 1);
  HAK_STAT_INC(HAK_EV_SEGMENT_MAP);
  ADD(hak_seg_books.free, mask_bytes(ALL_FREE));
  ADD(sh->free_slices, (unsigned)pop32(ALL_FREE));
  seg_list_push(sh, s);
  ADD(hak_seg_books.empty, 1);
  return s;
}

_Atomic(unsigned) hak_abandoned_takers;

/* No abandoned-stack entry points into s and no taker is at work: nothing
 * can read its page records after it is gone. The entries are checked first:
 * a taker clears an entry's flag only after announcing itself. */
static bool seg_unmap_safe(hak_segment_t *s) {
  for (unsigned i = 0; i < HAK_SLICES; i++)
    if (atomic_load(&s->pages[i].alisted)) return false;
  return atomic_load(&hak_abandoned_takers) == 0;
}

static void seg_unmap(seg_shard_t *sh, hak_segment_t *s) {
  seg_list_remove(sh, s);
  SUB(hak_seg_books.empty, 1);
  SUB(hak_seg_books.dirty, mask_bytes(s->dirty_mask));
  SUB(sh->dirty_slices, pop32(s->dirty_mask));
  SUB(hak_seg_books.free, mask_bytes(ALL_FREE));
  SUB(sh->free_slices, (unsigned)pop32(ALL_FREE));
  slice_map_set(s, HAK_SLICES, 0);
  s->magic = 0;
  HAK_VG_METADATA_GONE(s, sizeof *s);
  unmapped_note(s, HAK_SEG_SIZE);
  os_unmap(s, HAK_SEG_SIZE);
  HAK_STAT_INC(HAK_EV_SEGMENT_UNMAP);
}

bool seg_unmap_if_safe(seg_shard_t *sh, hak_segment_t *s) {
  if (!seg_unmap_safe(s)) return false;
  seg_unmap(sh, s);
  return true;
}

/* Lowest start index of a run of n free slices in mask, or -1. Slice 0 is
 * smaller than the others, so only single-slice pages of small classes use it. */
static int find_run(uint32_t mask, uint32_t dirty, unsigned n, bool slice0_ok) {
  if (!slice0_ok) mask &= ~1u;
  if (n == 1 && (mask & dirty)) return __builtin_ctz(mask & dirty); /* warm memory first */
  uint32_t m = mask;
  for (unsigned i = 1; i < n && m; i++) m &= mask >> i;
  return m ? __builtin_ctz(m) : -1;
}

static void page_init(hak_segment_t *s, unsigned first, unsigned n, unsigned cls) {
  hak_page_t *pg = &s->pages[first];
#if HAK_SECURE
  seg_guards_open(s, first, n, cls);
#endif
  uint8_t *base = (uint8_t *)s + (size_t)first * HAK_SLICE_SIZE;
  uint8_t *start = first == 0 ? (uint8_t *)s + SLICE0_START : base;
  uint8_t *end = base + (size_t)n * HAK_SLICE_SIZE;
#if !HAK_SECURE
  /* A one-slice class in slice 0 starts at the first multiple of its size
   * past the header, so that its blocks, like those of every other slice,
   * lie at multiples of the size from the slice's start: the standard
   * build's free tests that in a few instructions (guard/block_check.h),
   * and slice 0 no longer takes the full test (6-13% of bench_sizemix's
   * frees did). Powers of two start where they did; other sizes lose at most
   * one block of the page. */
  if (first == 0 && n == 1 && cls != HAK_CLASS_NONE) {
    size_t b = hak_class_size[cls];
    start = (uint8_t *)s + (SLICE0_START + b - 1) / b * b;
  }
#endif
  memset(pg, 0, offsetof(hak_page_t, anext)); /* a stale abandoned entry may point here */
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
  for (unsigned i = first; i < first + n; i++) s->slice_page[i] = pg;
  /* Published last: a block of this page can reach free() only after the
   * page is handed out, which orders these stores before that read. */
  for (unsigned i = first; i < first + n; i++) s->slice_cls[i] = (uint8_t)cls;
  slice_map_set(base, n, cls + 1);
}

void seg_drain_returned(seg_shard_t *sh) {
  if (!atomic_load_explicit(&sh->returned, memory_order_relaxed)) return; /* no write to an empty stack */
  hak_page_t *pg = atomic_exchange_explicit(&sh->returned, NULL, memory_order_acquire);
  for (hak_page_t *next; pg; pg = next) {
    next = pg->next;
    SUB(hak_seg_books.returned, (size_t)pg->slice_count * HAK_SLICE_SIZE);
    seg_page_free_locked(sh, pg, pg->used, 0);
  }
}

static hak_page_t *page_alloc_locked(seg_shard_t *sh, unsigned n, unsigned cls, bool may_map, bool warm_only);

/* Another shard's free slices, before a segment is mapped. With `wait` (out
 * of address space, or a first pass found a candidate shard busy) every
 * candidate shard's lock is waited for; otherwise a shard whose lock is held
 * is passed over and *busy set. The caller holds no shard lock, and a shard
 * lock's holder never waits for another, so the wait is a plain lock wait
 * (and a short one: no shard lock is held across a madvise, purge.c). */
static hak_page_t *page_steal(unsigned home, unsigned n, unsigned cls, bool wait, bool *busy) {
  for (unsigned k = 1; k < HAK_SEG_SHARDS; k++) {
    seg_shard_t *sh = &hak_seg_shards[(home + k) % HAK_SEG_SHARDS];
    if (LOAD(sh->free_slices) < n && !atomic_load_explicit(&sh->returned, memory_order_relaxed)) continue;
    if (wait) shard_lock(sh);
    else if (!hak_trylock(&sh->lock)) {
      *busy = true;
      continue;
    }
    seg_drain_returned(sh);
    hak_page_t *pg = page_alloc_locked(sh, n, cls, false, false);
    hak_unlock(&sh->lock);
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
static hak_page_t *page_steal_warm(unsigned home, unsigned n, unsigned cls) {
  for (unsigned k = 1; k < HAK_SEG_SHARDS; k++) {
    seg_shard_t *sh = &hak_seg_shards[(home + k) % HAK_SEG_SHARDS];
    if (LOAD(sh->dirty_slices) < n && !atomic_load_explicit(&sh->returned, memory_order_relaxed)) continue;
    if (!hak_trylock(&sh->lock)) continue;
    seg_drain_returned(sh);
    hak_page_t *pg = page_alloc_locked(sh, n, cls, false, true);
    hak_unlock(&sh->lock);
    if (pg) return pg;
  }
  return NULL;
}

static hak_page_t *page_alloc_once(unsigned shard, unsigned n, unsigned cls, bool may_map, bool wait) {
  seg_shard_t *sh = &hak_seg_shards[shard];
  shard_lock(sh);
  seg_drain_returned(sh);
  hak_page_t *pg = page_alloc_locked(sh, n, cls, false, true);
  /* No warm slice here: another shard's first if any shard has some (the
   * global count above this shard's own). */
  if (!pg && LOAD(hak_seg_books.dirty) > (size_t)LOAD(sh->dirty_slices) * HAK_SLICE_SIZE) {
    hak_unlock(&sh->lock);
    pg = page_steal_warm(shard, n, cls);
    if (pg) goto done;
    shard_lock(sh);
  }
  if (!pg) pg = page_alloc_locked(sh, n, cls, false, false);
  hak_unlock(&sh->lock);
  bool busy = false;
  if (!pg) pg = page_steal(shard, n, cls, wait, &busy);
  /* A shard that may have the slices was busy (other threads stealing from
   * it at once, say): its lock is waited for rather than a segment mapped. */
  if (!pg && may_map && busy) pg = page_steal(shard, n, cls, true, &busy);
  if (!pg && may_map) {
    shard_lock(sh);
    pg = page_alloc_locked(sh, n, cls, true, false);
    hak_unlock(&sh->lock);
  }
done:
  if (pg) HAK_STAT_INC(HAK_EV_PAGE_ALLOC);
  return pg;
}

unsigned segment_pages_alloc(unsigned shard, unsigned n, unsigned cls, hak_page_t **out, unsigned k) {
  seg_shard_t *sh = &hak_seg_shards[shard];
  unsigned got = 0;
  shard_lock(sh);
  seg_drain_returned(sh);
  while (got < k && (out[got] = page_alloc_locked(sh, n, cls, false, false)) != NULL) got++;
  hak_unlock(&sh->lock);
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
  if (back) ADD(hak_seg_books.refault, back);
  ADD(hak_seg_books.cut, (size_t)n << HAK_SLICE_SHIFT);
  if (s->free_mask == ALL_FREE) SUB(hak_seg_books.empty, 1);
  s->free_mask &= ~run;
  os_segment_in_use(s, HAK_SLICES - pop32(s->free_mask)); /* HAKMEM_THP=auto */
  SUB(hak_seg_books.free, mask_bytes(run));
  SUB(sh->free_slices, n);
  SUB(hak_seg_books.dirty, mask_bytes(s->dirty_mask & run));
  SUB(sh->dirty_slices, pop32(s->dirty_mask & run));
  s->dirty_mask &= ~run;
  s->whole_mask &= ~run;
  if (s->free_mask == 0) seg_list_remove(sh, s);
  return zero;
}

/* warm_only: only slices that are resident already (the tiers before the
 * untouched ones); NULL if there are none.
 *
 * The tiers, best first, each taking the first segment of the shard's list
 * that has a run of its kind:
 *   class page: 1 a warm slice that held this class (same block offsets, so
 *     nothing new becomes resident); 2 warm slices of another class resident
 *     whole (their page was carved to the end: new block boundaries touch
 *     nothing new); 3 untouched slices; 4 any free run. A warm slice of
 *     another class comes last: its new block boundaries would touch pages
 *     the old ones did not, and over time make every page of the heap
 *     resident.
 *   large page: 1 warm slices (it will be written from its start); 2 any.
 * One walk of the list finds the best tier's candidate (stopping at a tier
 * 1 hit): each segment's header is a cache line of its own 2 MiB-aligned
 * mapping, so a walk costs a cache miss and a TLB miss per segment, and one
 * walk per tier made this search 4% of sizemix's CPU time. */
enum { TIERS = 4 };
static hak_page_t *page_alloc_locked(seg_shard_t *sh, unsigned n, unsigned cls, bool may_map, bool warm_only) {
  bool slice0_ok = n == 1 && cls != HAK_CLASS_NONE;
  hak_segment_t *s = NULL, *seg[TIERS] = {NULL, NULL, NULL, NULL};
  int first = -1, at[TIERS] = {-1, -1, -1, -1};
  if (cls != HAK_CLASS_NONE) {
    uint32_t run = n >= 32 ? ALL_SLICES : (1u << n) - 1;
    for (hak_segment_t *t = sh->head; t; t = t->next) {
      uint32_t fm = t->free_mask, dm = t->dirty_mask, warm = fm & dm;
      for (uint32_t m = warm & (slice0_ok ? ALL_SLICES : ~1u); m; m &= m - 1) {
        unsigned i = (unsigned)__builtin_ctz(m);
        if (t->last_cls[i] == cls && i + n <= HAK_SLICES && ((fm >> i) & run) == run) {
          seg[0] = t;
          at[0] = (int)i;
          break;
        }
      }
      if (seg[0]) break;
      if (!seg[1] && (t->whole_mask & fm) && (at[1] = find_run(fm & t->whole_mask, 0, n, slice0_ok)) >= 0) seg[1] = t;
      if (warm_only) continue;
      if (!seg[2] && (at[2] = find_run(fm & ~dm, 0, n, slice0_ok)) >= 0) seg[2] = t;
      if (!seg[3] && (at[3] = find_run(fm, dm, n, slice0_ok)) >= 0) seg[3] = t;
    }
  } else {
#if HAK_SECURE
    /* A large block: first a run that ends where a freed large page left
     * its guard and holds no other (large_run.c): no system call at all. */
    for (hak_segment_t *t = sh->head; t && !seg[0]; t = t->next)
      if ((at[0] = seg_find_guarded_run(t, n)) >= 0) seg[0] = t;
#endif
    for (hak_segment_t *t = sh->head; t && !seg[0] && !seg[1]; t = t->next) {
      uint32_t fm = t->free_mask, dm = t->dirty_mask;
      if ((dm & fm) && (at[1] = find_run(fm & dm, 0, n, slice0_ok)) >= 0) seg[1] = t;
      else if (!warm_only && !seg[3] && (at[3] = find_run(fm, dm, n, slice0_ok)) >= 0) seg[3] = t;
    }
  }
  for (unsigned k = 0; k < TIERS && !s; k++)
    if (seg[k]) s = seg[k], first = at[k];
  if (!s && (warm_only || !may_map)) return NULL;
  if (!s) {
    s = segment_map(sh);
    if (!s) return NULL;
    first = find_run(s->free_mask, 0, n, slice0_ok);
  } else if (s->free_mask == ALL_FREE) {
    HAK_STAT_INC(HAK_EV_SEGMENT_REUSE);
  }
  bool zero = seg_run_claim_locked(sh, s, (unsigned)first, n);
  page_init(s, (unsigned)first, n, cls);
  s->pages[first].known_zero = zero;
  return &s->pages[first];
}

/* Out of address space, the caches above (freed huge mappings) are given
 * back and the search is made once more, waiting for every shard's lock this
 * time, without any lock held meanwhile. */
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
  page_init(segment_of(pg), pg->first_slice, pg->slice_count, cls);
  pg->known_zero = zero;
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
  ADD(hak_seg_books.returned, (size_t)pg->slice_count * HAK_SLICE_SIZE);
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
    hak_unlock(&sh->lock);
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
  ADD(hak_seg_books.free, mask_bytes(run));
  ADD(sh->free_slices, n);
  for (unsigned i = first; i < first + n; i++) {
    s->freed_ms[i] = now;
    s->last_cls[i] = (uint8_t)pg->cls;
  }
  s->dirty_mask |= run & ~clean;
  if (pg->cls != HAK_CLASS_NONE && pg->bump == pg->end) s->whole_mask |= run & ~clean;
  else s->whole_mask &= ~run;
  ADD(hak_seg_books.dirty, mask_bytes(run & ~clean));
  ADD(sh->dirty_slices, pop32(run & ~clean));
  if (s->free_mask == ALL_FREE) {
    if (ADD(hak_seg_books.empty, 1) + 1 > hak_config.segment_cache) seg_unmap_if_safe(sh, s);
  }
}

size_t segment_free_bytes(void) { return LOAD(hak_seg_books.free) + LOAD(hak_seg_books.returned) + page_cache_bytes(); }
size_t segment_dirty_bytes(void) { return LOAD(hak_seg_books.dirty); }

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
