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
 * sweeping for the dirty budget. First-class heaps draw a shard of their
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
 * Policy lives here too: a freed page leaves its slices "dirty" (resident)
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

#define ALL_SLICES 0xffffffffu

typedef struct seg_shard {
  hak_lock_t lock;                   /* not process-wide: not counted */
  hak_segment_t *head, *tail;        /* its segments with at least one free slice */
  _Atomic(hak_page_t *) returned;    /* pages freed by other threads (see above) */
  _Atomic(uint32_t) free_slices;     /* in its segments: a hint for stealers and sweeps */
  _Atomic(uint32_t) dirty_slices;    /* of those, the resident ones: a hint for warm steals */
} __attribute__((aligned(64))) seg_shard_t;

static seg_shard_t shards[HAK_SEG_SHARDS];

HAK_INLINE void shard_lock(seg_shard_t *sh) { hak_lock_local(&sh->lock); }
static _Atomic(unsigned) next_shard;
static _Atomic(size_t) seg_empty;        /* segments entirely free */
static _Atomic(size_t) dirty_bytes;      /* free slices holding touched memory */
static _Atomic(size_t) free_slice_bytes;
static _Atomic(size_t) returned_bytes;   /* pages waiting on returned stacks */
static _Atomic(uint32_t) last_sweep_ms;
/* The dirty budget's adaptation (see purge_policy): bytes of slices purged
 * less than a delay ago and cut into a page again since the last sweep, what
 * that sweep purged, and the budget's doubling count. */
static _Atomic(size_t) refault_bytes, last_sweep_bytes;
static _Atomic(unsigned) budget_shift;
/* Bytes of pages cut from segments since the purge deadline's last look:
 * whether the program is still cutting pages (segment_purge_aged). */
static _Atomic(size_t) cut_bytes;
#define BUDGET_SHIFT_MAX 3

#define ADD(v, n) atomic_fetch_add_explicit(&(v), (n), memory_order_relaxed)
#define SUB(v, n) atomic_fetch_sub_explicit(&(v), (n), memory_order_relaxed)
#define LOAD(v) atomic_load_explicit(&(v), memory_order_relaxed)

unsigned segment_shard_pick(void) { return 1 + ADD(next_shard, 1) % (HAK_SEG_SHARDS - 1); }

static void list_push(seg_shard_t *sh, hak_segment_t *s) {
  s->next = NULL;
  s->prev = sh->tail;
  if (sh->tail) sh->tail->next = s; else sh->head = s;
  sh->tail = s;
}

static void list_remove(seg_shard_t *sh, hak_segment_t *s) {
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
static size_t slice0_start = HAK_SEG_HDR_SIZE, guard_from;
static uint32_t all_free = ALL_SLICES;

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
    all_free = ALL_SLICES << (to >> HAK_SLICE_SHIFT);
  }
  slice0_start = to;
  __atomic_store_n(&guard_from, from, __ATOMIC_RELEASE); /* last: the others are set */
}
#define SLICE0_START slice0_start
#define ALL_FREE all_free
#else
#define SLICE0_START HAK_SEG_HDR_SIZE
#define ALL_FREE ALL_SLICES
#endif

static size_t slice_usable(unsigned i) { return i == 0 ? HAK_SLICE_SIZE - SLICE0_START : HAK_SLICE_SIZE; }

/* Bits set in a slice mask. __builtin_popcount without -mpopcnt (the
 * baseline x86_64 target) is a call into libgcc's table walk: 5% of the
 * instructions of a large-block churn (bench_prodcons 2 20000 16 64K). */
HAK_INLINE unsigned pop32(uint32_t m) {
  m = m - ((m >> 1) & 0x55555555u);
  m = (m & 0x33333333u) + ((m >> 2) & 0x33333333u);
  return (((m + (m >> 4)) & 0x0f0f0f0fu) * 0x01010101u) >> 24;
}

static size_t mask_bytes(uint32_t m) {
  size_t b = (size_t)pop32(m & ~1u) * HAK_SLICE_SIZE;
  if (m & 1u) b += slice_usable(0);
  return b;
}

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
  s->shard = (uint8_t)(sh - shards);
  slice_map_set(s, HAK_SLICES, HAK_CLASS_NONE + 1);
  HAK_STAT_INC(HAK_EV_SEGMENT_MAP);
  ADD(free_slice_bytes, mask_bytes(ALL_FREE));
  ADD(sh->free_slices, (unsigned)pop32(ALL_FREE));
  list_push(sh, s);
  ADD(seg_empty, 1);
  return s;
}

_Atomic(unsigned) hak_abandoned_takers;

/* No abandoned-stack entry points into s and no taker is at work: nothing
 * can read its page records after it is gone. The entries are checked first:
 * a taker clears an entry's flag only after announcing itself. */
static bool segment_unmap_safe(hak_segment_t *s) {
  for (unsigned i = 0; i < HAK_SLICES; i++)
    if (atomic_load(&s->pages[i].alisted)) return false;
  return atomic_load(&hak_abandoned_takers) == 0;
}

static void segment_unmap(seg_shard_t *sh, hak_segment_t *s) {
  list_remove(sh, s);
  SUB(seg_empty, 1);
  SUB(dirty_bytes, mask_bytes(s->dirty_mask));
  SUB(sh->dirty_slices, pop32(s->dirty_mask));
  SUB(free_slice_bytes, mask_bytes(ALL_FREE));
  SUB(sh->free_slices, (unsigned)pop32(ALL_FREE));
  slice_map_set(s, HAK_SLICES, 0);
  s->magic = 0;
  HAK_VG_METADATA_GONE(s, sizeof *s);
  unmapped_note(s, HAK_SEG_SIZE);
  os_unmap(s, HAK_SEG_SIZE);
  HAK_STAT_INC(HAK_EV_SEGMENT_UNMAP);
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

/* Purge the free dirty slices of s idle for at least min_age ms, in runs.
 * Slice 0's blocks start after the 8 KiB header; where a page is bigger
 * (16 or 64 KiB pages on aarch64) the header shares slice 0's first page
 * with them, madvise cannot drop them apart from it, and slice 0 is never
 * purged: it stays counted as dirty while free, so the books never claim
 * memory went back that did not. */
static size_t purge_segment(hak_segment_t *s, uint32_t now, uint32_t min_age) {
  uint32_t d = s->dirty_mask & s->free_mask, todo = 0;
  if (SLICE0_START & (os_page_size() - 1)) d &= ~1u;
  while (d) {
    unsigned i = (unsigned)__builtin_ctz(d);
    d &= d - 1;
    if (now - s->freed_ms[i] >= min_age) todo |= 1u << i;
  }
  uint32_t left = todo;
  while (left) {
    unsigned a = (unsigned)__builtin_ctz(left);
    unsigned b = a;
    while (b + 1 < HAK_SLICES && (left >> (b + 1)) & 1u) b++;
    uint8_t *from = (uint8_t *)s + (size_t)a * HAK_SLICE_SIZE + (a == 0 ? SLICE0_START : 0);
    uint8_t *to = (uint8_t *)s + (size_t)(b + 1) * HAK_SLICE_SIZE;
    os_purge(from, (size_t)(to - from));
    uint32_t run = (b == 31 ? ALL_SLICES : ((1u << (b + 1)) - 1)) & ~((1u << a) - 1);
    left &= ~run;
  }
  SUB(dirty_bytes, mask_bytes(todo));
  SUB(shards[s->shard].dirty_slices, pop32(todo));
  s->dirty_mask &= ~todo;
  s->whole_mask &= ~todo;
  /* A clean free slice's stamp is when it was purged (0: never touched). */
  for (uint32_t m = todo; m; m &= m - 1) s->freed_ms[__builtin_ctz(m)] = now | 1;
  return mask_bytes(todo);
}

/* sh locked: bytes purged. */
static size_t purge_sweep(seg_shard_t *sh, uint32_t now, uint32_t min_age) {
  size_t bytes = 0;
  for (hak_segment_t *s = sh->head; s; s = s->next)
    if (s->dirty_mask & s->free_mask) bytes += purge_segment(s, now, min_age);
  return bytes;
}

/* Memory freed less than delay/8 ago is never purged: a producer/consumer
 * program reuses it within milliseconds, and purging it would only trade a
 * madvise now for page faults next. Far over budget, sweeps come more often
 * and take younger memory, oldest first. One sweep at a time process-wide
 * (a CAS on last_sweep_ms claims it); `held` is the caller's locked shard,
 * the others are swept only if a try gets their lock. */
static void purge_policy(seg_shard_t *held) {
  size_t max = hak_config.dirty_max << LOAD(budget_shift);
  if (LOAD(dirty_bytes) <= max) return;
  uint32_t now = os_now_ms(), delay = hak_config.purge_delay_ms, floor_age = delay / 8;
  bool pressed = LOAD(dirty_bytes) > 2 * max;
  uint32_t last = LOAD(last_sweep_ms);
  if (now - last < (pressed ? floor_age : delay / 2)) return;
  if (!atomic_compare_exchange_strong_explicit(&last_sweep_ms, &last, now, memory_order_relaxed, memory_order_relaxed))
    return;
  /* A program that cuts pages again out of what the last sweeps purged (more
   * than half of it, within a delay) pays a madvise and then page faults for
   * nothing: the budget doubles, up to 8x in the speed profile. One that
   * does not halves it again. Memory idle for a whole delay still goes back
   * by the deadline (segment_purge_aged), beyond the budget while the program
   * keeps cutting pages and all of it once it stops. */
  size_t refault = atomic_exchange_explicit(&refault_bytes, 0, memory_order_relaxed);
  unsigned shift = LOAD(budget_shift), cap = hak_config.profile == HAK_PROFILE_SPEED ? BUDGET_SHIFT_MAX : 1;
  if (refault > LOAD(last_sweep_bytes) / 2 && refault && shift < cap) shift++;
  else if (refault < LOAD(last_sweep_bytes) / 8 && shift) shift--;
  atomic_store_explicit(&budget_shift, shift, memory_order_relaxed);
  max = hak_config.dirty_max << shift;
  if (LOAD(dirty_bytes) <= max) return;
  size_t before = LOAD(dirty_bytes);
  for (uint32_t age = delay;; age /= 2) {
    if (age < floor_age) age = floor_age;
    purge_sweep(held, now, age);
    for (unsigned i = 0; i < HAK_SEG_SHARDS && LOAD(dirty_bytes) > max; i++) {
      seg_shard_t *sh = &shards[i];
      if (sh == held || !LOAD(sh->free_slices) || !hak_trylock(&sh->lock)) continue;
      purge_sweep(sh, now, age);
      hak_unlock(&sh->lock);
    }
    if (!pressed || age == floor_age || LOAD(dirty_bytes) <= max) break;
  }
  size_t after = LOAD(dirty_bytes);
  atomic_store_explicit(&last_sweep_bytes, before > after ? before - after : 0, memory_order_relaxed);
}

#if HAK_SECURE
/* Large-block guards (segment_large_guard) outlive their pages: a freed
 * large page leaves its guard on the last OS page of its last slice (bit
 * of that slice in guard_mask), so a large page cut again with the same
 * end (the common case: a program that allocates and frees one size over
 * and over) finds it there, and costs no system call. A page cut over a
 * slice with a guard inside its run opens it first; a large page keeps
 * the one at its own end. Only the page's owner changes the bits of its
 * slices (under the shard lock, or holding the page), so the atomic AND is
 * enough. */
static uint8_t *slice_end_guard(hak_segment_t *s, unsigned slice) {
  return (uint8_t *)s + ((size_t)(slice + 1) << HAK_SLICE_SHIFT) - os_page_size();
}

static void guards_open(hak_segment_t *s, unsigned first, unsigned n, unsigned cls) {
  uint32_t run = (n == 32 ? ALL_SLICES : ((1u << n) - 1)) << first;
  if (cls == HAK_CLASS_NONE) run &= ~(1u << (first + n - 1));
  if (!(atomic_load_explicit(&s->guard_mask, memory_order_relaxed) & run)) return;
  uint32_t stale = atomic_fetch_and_explicit(&s->guard_mask, ~run, memory_order_relaxed) & run;
  for (; stale; stale &= stale - 1) os_guard(slice_end_guard(s, (unsigned)__builtin_ctz(stale)), os_page_size(), false);
}

/* Lowest start of a run of n free slices of s whose last slice keeps a
 * guard and no other slice of it does, or -1: a large page cut there
 * needs neither guards_open nor segment_large_guard. */
static int find_guarded_run(hak_segment_t *s, unsigned n) {
  uint32_t g = atomic_load_explicit(&s->guard_mask, memory_order_relaxed), free = s->free_mask & ~1u;
  uint32_t m = free & (g >> (n - 1)); /* starts whose run would end on a guard */
  for (unsigned i = 1; i < n && m; i++) m &= (free >> i) & ~(g >> (i - 1));
  return m ? __builtin_ctz(m) : -1;
}
#endif

static void page_init(hak_segment_t *s, unsigned first, unsigned n, unsigned cls) {
  hak_page_t *pg = &s->pages[first];
#if HAK_SECURE
  guards_open(s, first, n, cls);
#endif
  uint8_t *base = (uint8_t *)s + (size_t)first * HAK_SLICE_SIZE;
  uint8_t *start = first == 0 ? (uint8_t *)s + SLICE0_START : base;
  uint8_t *end = base + (size_t)n * HAK_SLICE_SIZE;
  memset(pg, 0, offsetof(hak_page_t, anext)); /* a stale abandoned entry may point here */
  pg->start = pg->bump = start;
  pg->end = end;
  pg->cls = (uint16_t)cls;
  pg->slice_count = (uint8_t)n;
  pg->first_slice = first;
  if (cls != HAK_CLASS_NONE) {
    pg->bsize = hak_class_size[cls];
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

static void page_free_locked(seg_shard_t *sh, hak_page_t *pg, uint32_t now, uint32_t clean);

/* sh locked: the pages other threads returned go back to their segments. */
static void drain_returned(seg_shard_t *sh) {
  if (!atomic_load_explicit(&sh->returned, memory_order_relaxed)) return; /* no write to an empty stack */
  hak_page_t *pg = atomic_exchange_explicit(&sh->returned, NULL, memory_order_acquire);
  for (hak_page_t *next; pg; pg = next) {
    next = pg->next;
    SUB(returned_bytes, (size_t)pg->slice_count * HAK_SLICE_SIZE);
    page_free_locked(sh, pg, pg->used, 0);
  }
}

static hak_page_t *page_alloc_locked(seg_shard_t *sh, unsigned n, unsigned cls, bool may_map, bool warm_only);

/* Another shard's free slices, before a segment is mapped. With `wait` (out
 * of address space, or a first pass found a candidate shard busy) every
 * candidate shard's lock is waited for; otherwise a shard whose lock is held
 * is passed over and *busy set. The caller holds no shard lock, and a shard
 * lock's holder never waits for another, so the wait is a plain lock wait. */
static hak_page_t *page_steal(unsigned home, unsigned n, unsigned cls, bool wait, bool *busy) {
  for (unsigned k = 1; k < HAK_SEG_SHARDS; k++) {
    seg_shard_t *sh = &shards[(home + k) % HAK_SEG_SHARDS];
    if (LOAD(sh->free_slices) < n && !atomic_load_explicit(&sh->returned, memory_order_relaxed)) continue;
    if (wait) shard_lock(sh);
    else if (!hak_trylock(&sh->lock)) {
      *busy = true;
      continue;
    }
    drain_returned(sh);
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
    seg_shard_t *sh = &shards[(home + k) % HAK_SEG_SHARDS];
    if (LOAD(sh->dirty_slices) < n && !atomic_load_explicit(&sh->returned, memory_order_relaxed)) continue;
    if (!hak_trylock(&sh->lock)) continue;
    drain_returned(sh);
    hak_page_t *pg = page_alloc_locked(sh, n, cls, false, true);
    hak_unlock(&sh->lock);
    if (pg) return pg;
  }
  return NULL;
}

static hak_page_t *page_alloc_once(unsigned shard, unsigned n, unsigned cls, bool may_map, bool wait) {
  seg_shard_t *sh = &shards[shard];
  shard_lock(sh);
  drain_returned(sh);
  hak_page_t *pg = page_alloc_locked(sh, n, cls, false, true);
  /* No warm slice here: another shard's first if any shard has some (the
   * global count above this shard's own). */
  if (!pg && LOAD(dirty_bytes) > (size_t)LOAD(sh->dirty_slices) * HAK_SLICE_SIZE) {
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
  seg_shard_t *sh = &shards[shard];
  unsigned got = 0;
  shard_lock(sh);
  drain_returned(sh);
  while (got < k && (out[got] = page_alloc_locked(sh, n, cls, false, false)) != NULL) got++;
  hak_unlock(&sh->lock);
  HAK_STAT_ADD(HAK_EV_PAGE_ALLOC, got);
  return got;
}

/* warm_only: only slices that are resident already (the passes before the
 * untouched ones); NULL if there are none. */
static hak_page_t *page_alloc_locked(seg_shard_t *sh, unsigned n, unsigned cls, bool may_map, bool warm_only) {
  bool slice0_ok = n == 1 && cls != HAK_CLASS_NONE;
  hak_segment_t *s;
  int first = -1;
  if (cls != HAK_CLASS_NONE) {
    /* A class page: first a warm slice that held this class (same block
     * offsets, so nothing new becomes resident), then an untouched one. A
     * warm slice of another class comes last: its new block boundaries
     * would touch pages the old ones did not, and over time make every
     * page of the heap resident. */
    uint32_t run = n >= 32 ? ALL_SLICES : (1u << n) - 1;
    for (s = sh->head; s && first < 0; s = s->next) {
      uint32_t m = s->free_mask & s->dirty_mask & (slice0_ok ? ALL_SLICES : ~1u);
      for (; m; m &= m - 1) {
        unsigned i = (unsigned)__builtin_ctz(m);
        if (s->last_cls[i] == cls && i + n <= HAK_SLICES && ((s->free_mask >> i) & run) == run) {
          first = (int)i;
          break;
        }
      }
      if (first >= 0) break;
    }
    /* Then a warm slice of another class that is resident whole (its page
     * was carved to the end): new block boundaries touch nothing new, and
     * an untouched slice would only add to the resident total. */
    if (!s)
      for (s = sh->head; s; s = s->next)
        if ((s->whole_mask & s->free_mask) && (first = find_run(s->free_mask & s->whole_mask, 0, n, slice0_ok)) >= 0) break;
    if (!s && warm_only) return NULL;
    if (!s)
      for (s = sh->head; s; s = s->next)
        if ((first = find_run(s->free_mask & ~s->dirty_mask, 0, n, slice0_ok)) >= 0) break;
  } else {
#if HAK_SECURE
    /* A large block: first a run that ends where a freed large page left
     * its guard and holds no other (guards_open): no system call at all. */
    for (s = sh->head; s; s = s->next)
      if ((first = find_guarded_run(s, n)) >= 0) break;
    if (!s)
#endif
    /* A large block: warm slices first, it will be written from its start. */
    for (s = sh->head; s; s = s->next)
      if ((s->dirty_mask & s->free_mask) && (first = find_run(s->free_mask & s->dirty_mask, 0, n, slice0_ok)) >= 0) break;
    if (!s && warm_only) return NULL;
  }
  if (!s)
    for (s = sh->head; s; s = s->next)
      if ((first = find_run(s->free_mask, s->dirty_mask, n, slice0_ok)) >= 0) break;
  if (!s && !may_map) return NULL;
  if (!s) {
    s = segment_map(sh);
    if (!s) return NULL;
    first = find_run(s->free_mask, 0, n, slice0_ok);
  } else if (s->free_mask == ALL_FREE) {
    HAK_STAT_INC(HAK_EV_SEGMENT_REUSE);
  }
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
  if (back) ADD(refault_bytes, back);
  ADD(cut_bytes, (size_t)n << HAK_SLICE_SHIFT);
  if (s->free_mask == ALL_FREE) SUB(seg_empty, 1);
  s->free_mask &= ~run;
  os_segment_in_use(s, HAK_SLICES - pop32(s->free_mask)); /* HAKMEM_THP=auto */
  SUB(free_slice_bytes, mask_bytes(run));
  SUB(sh->free_slices, n);
  SUB(dirty_bytes, mask_bytes(s->dirty_mask & run));
  SUB(sh->dirty_slices, pop32(s->dirty_mask & run));
  s->dirty_mask &= ~run;
  s->whole_mask &= ~run;
  if (s->free_mask == 0) list_remove(sh, s);
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
  seg_shard_t *sh = &shards[segment_of(pg)->shard];
  HAK_STAT_INC(HAK_EV_PAGE_RETIRE); /* counted now, not when the stack is drained */
  pg->used = now;
  ADD(returned_bytes, (size_t)pg->slice_count * HAK_SLICE_SIZE);
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
  seg_shard_t *sh = &shards[shard];
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
    page_free_locked(sh, pg, now, 0);
  }
  if (locked) {
    purge_policy(sh);
    hak_unlock(&sh->lock);
  }
  purge_arm((now + hak_config.purge_delay_ms) | 1);
}

/* A destroyed first-class heap's pages (heap/user_heap.c), when there are
 * more of them than the dirty budget: their memory is purged now, outside
 * any lock (detached, they are in no free mask yet: nobody else can take
 * them), in runs of slices per segment, one madvise per run, then they go
 * back clean, each under its own shard's lock (a cold path: one
 * acquisition per page). The program is done with all of that memory at
 * once, and the purge delay would keep it resident until the next slow path. */
#define PURGE_SEGS 32
void segment_pages_free_purged(hak_page_t *list) {
  for (hak_page_t *pg = list; pg; pg = pg->next) segment_page_detach(pg);
  bool header_shared = (SLICE0_START & (os_page_size() - 1)) != 0; /* slice 0 cannot be purged */
  while (list) {
    hak_segment_t *seg[PURGE_SEGS];
    uint32_t runs[PURGE_SEGS];
    unsigned n = 0;
    hak_page_t *chunk = list, *last = NULL, *pg = list;
    for (; pg; last = pg, pg = pg->next) { /* the pages of up to PURGE_SEGS segments */
      hak_segment_t *s = segment_of(pg);
      unsigned i = 0;
      while (i < n && seg[i] != s) i++;
      if (i == n) {
        if (n == PURGE_SEGS) break;
        seg[n] = s;
        runs[n++] = 0;
      }
      unsigned k = pg->slice_count, f = pg->first_slice;
      runs[i] |= (k == 32 ? ALL_SLICES : ((1u << k) - 1)) << f;
    }
    last->next = NULL;
    list = pg;
    for (unsigned i = 0; i < n; i++) {
      if (header_shared) runs[i] &= ~1u;
      for (uint32_t left = runs[i]; left;) {
        unsigned a = (unsigned)__builtin_ctz(left), b = a;
        while (b + 1 < HAK_SLICES && (left >> (b + 1)) & 1u) b++;
        uint8_t *from = (uint8_t *)seg[i] + (size_t)a * HAK_SLICE_SIZE + (a == 0 ? SLICE0_START : 0);
        os_purge(from, (size_t)((uint8_t *)seg[i] + (size_t)(b + 1) * HAK_SLICE_SIZE - from));
        left &= ~((b == 31 ? ALL_SLICES : ((1u << (b + 1)) - 1)) & ~((1u << a) - 1));
      }
    }
    uint32_t now = os_now_ms();
    for (hak_page_t *p = chunk, *next; p; p = next) {
      next = p->next;
      unsigned i = 0;
      while (seg[i] != segment_of(p)) i++;
      seg_shard_t *sh = &shards[seg[i]->shard];
      shard_lock(sh);
      HAK_STAT_INC(HAK_EV_PAGE_RETIRE);
      page_free_locked(sh, p, now, runs[i]);
      hak_unlock(&sh->lock);
    }
  }
}

#if HAK_SECURE
void segment_large_guard(hak_page_t *pg) {
  hak_segment_t *s = segment_of(pg);
  unsigned last = pg->first_slice + pg->slice_count - 1;
  uint32_t bit = 1u << last;
  if (atomic_load_explicit(&s->guard_mask, memory_order_relaxed) & bit) return;
  if (os_guard(slice_end_guard(s, last), os_page_size(), true))
    atomic_fetch_or_explicit(&s->guard_mask, bit, memory_order_relaxed);
}
#endif

static void page_free_locked(seg_shard_t *sh, hak_page_t *pg, uint32_t now, uint32_t clean) {
  hak_segment_t *s = segment_of(pg);
  unsigned first = pg->first_slice, n = pg->slice_count;
  uint32_t run = (n == 32 ? ALL_SLICES : ((1u << n) - 1)) << first;
  if (s->free_mask == 0) list_push(sh, s);
  s->free_mask |= run;
  ADD(free_slice_bytes, mask_bytes(run));
  ADD(sh->free_slices, n);
  for (unsigned i = first; i < first + n; i++) {
    s->freed_ms[i] = now;
    s->last_cls[i] = (uint8_t)pg->cls;
  }
  s->dirty_mask |= run & ~clean;
  if (pg->cls != HAK_CLASS_NONE && pg->bump == pg->end) s->whole_mask |= run & ~clean;
  else s->whole_mask &= ~run;
  ADD(dirty_bytes, mask_bytes(run & ~clean));
  ADD(sh->dirty_slices, pop32(run & ~clean));
  if (s->free_mask == ALL_FREE) {
    if (ADD(seg_empty, 1) + 1 > hak_config.segment_cache && segment_unmap_safe(s)) segment_unmap(sh, s);
  }
}

/* The purge deadline's work for segments: every free slice idle for min_age
 * ms (the purge delay) goes back, except, while the program keeps cutting
 * pages, up to the dirty budget of it (see below). Returns when the next remaining dirty
 * slice will be due, 0 if none is left; *any is set if something was purged. */
uint32_t segment_purge_aged(uint32_t now, uint32_t min_age, bool *any) {
  uint32_t delay = hak_config.purge_delay_ms, youngest_left = UINT32_MAX;
  /* A program that cut pages worth an eighth of the dirty budget since the
   * last look is not idle: its free slices only looked idle (on a loaded
   * machine a thread may wait a whole delay for a CPU; sizemix purged and
   * re-faulted 130-250 MB in 2.4M operations), and purging them traded a
   * madvise for page faults. Such a program keeps up to the (adapted) budget
   * of aged memory, looked at again in half a delay; the rest, and all of
   * it once the program stops cutting pages, goes back. */
  size_t keep = 0, cut = atomic_exchange_explicit(&cut_bytes, 0, memory_order_relaxed);
  size_t budget = hak_config.dirty_max << LOAD(budget_shift);
  if (min_age && cut >= budget / 8) keep = budget;
  for (unsigned i = 0; i < HAK_SEG_SHARDS; i++) {
    seg_shard_t *sh = &shards[i];
    if (!LOAD(sh->free_slices) && !atomic_load_explicit(&sh->returned, memory_order_relaxed)) continue;
    shard_lock(sh);
    drain_returned(sh);
    if (LOAD(dirty_bytes) > keep && purge_sweep(sh, now, min_age)) *any = true;
    for (hak_segment_t *s = sh->head; s; s = s->next)
      for (uint32_t d = s->dirty_mask & s->free_mask; d; d &= d - 1) {
        uint32_t age = now - s->freed_ms[__builtin_ctz(d)];
        /* kept aged memory is looked at again in half a delay */
        uint32_t left = age < delay ? delay - age : keep ? delay / 2 + 1 : 1;
        if (left < youngest_left) youngest_left = left;
      }
    hak_unlock(&sh->lock);
  }
  return youngest_left == UINT32_MAX ? 0 : (now + youngest_left) | 1;
}

bool segment_trim(void) {
  bool any = false;
  for (unsigned i = 0; i < HAK_SEG_SHARDS; i++) {
    seg_shard_t *sh = &shards[i];
    if (!LOAD(sh->free_slices) && !atomic_load_explicit(&sh->returned, memory_order_relaxed)) continue;
    shard_lock(sh);
    drain_returned(sh);
    for (hak_segment_t *s = sh->head, *next; s; s = next) {
      next = s->next;
      if (s->free_mask == ALL_FREE && segment_unmap_safe(s)) { segment_unmap(sh, s); any = true; }
    }
    for (hak_segment_t *s = sh->head; s; s = s->next)
      if (s->dirty_mask & s->free_mask) { purge_segment(s, os_now_ms(), 0); any = true; }
    hak_unlock(&sh->lock);
  }
  return any;
}

size_t segment_free_bytes(void) { return LOAD(free_slice_bytes) + LOAD(returned_bytes) + page_cache_bytes(); }
size_t segment_dirty_bytes(void) { return LOAD(dirty_bytes); }

void segment_atfork_prepare(void) {
  for (unsigned i = 0; i < HAK_SEG_SHARDS; i++) hak_lock_fork(&shards[i].lock);
}
void segment_atfork_parent(void) {
  for (unsigned i = HAK_SEG_SHARDS; i-- > 0;) hak_unlock_fork(&shards[i].lock);
}
void segment_atfork_child(void) {
  for (unsigned i = 0; i < HAK_SEG_SHARDS; i++) hak_lock_reset(&shards[i].lock);
#if HAK_SECURE
  os_random_atfork_child(); /* new segments of the child get keys the parent cannot guess */
#endif
}
