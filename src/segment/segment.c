/* segment.c — maps 2 MiB segments, carves pages (runs of 64 KiB slices) out of
 * them and takes them back.
 *
 * Policy lives here too: a freed page leaves its slices "dirty" (resident)
 * and stamped with the time. Once the dirty bytes of all segments pass
 * hak_config.dirty_max, a sweep (at most one per half delay) purges the
 * slices that have stayed free for purge_delay_ms; slices that keep being
 * reused are never purged, so churn costs no madvise and no page faults.
 * New pages prefer dirty slices, letting the others age. Far over budget
 * (twice), sweeps come more often and take younger memory, but never
 * memory freed in the last delay/8. Empty segments beyond
 * hak_config.segment_cache are unmapped. */
#include "segment/segment.h"
#include "segment/page_cache.h"
#include "segment/free_list.h"
#include "guard/registry.h"
#include "guard/unmapped.h"
#include "heap/size_class.h"
#include "os/lock.h"
#include "os/os.h"
#include "os/random.h"
#include "policy/config.h"
#include "policy/purger.h"
#include "stats/stats.h"

#include <string.h>

#define ALL_SLICES 0xffffffffu

static hak_lock_t seg_lock = HAK_LOCK_NAMED("segment");
static hak_segment_t *seg_head, *seg_tail;  /* segments with at least one free slice */
static size_t seg_empty;                     /* of those, entirely free */
static size_t dirty_bytes;                   /* free slices holding touched memory */
static size_t free_slice_bytes;
static uint32_t last_sweep_ms;

static void list_push(hak_segment_t *s) {
  s->next = NULL;
  s->prev = seg_tail;
  if (seg_tail) seg_tail->next = s; else seg_head = s;
  seg_tail = s;
}

static void list_remove(hak_segment_t *s) {
  if (s->prev) s->prev->next = s->next; else seg_head = s->next;
  if (s->next) s->next->prev = s->prev; else seg_tail = s->prev;
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
 * all_free lacks them. Computed once, at the first segment (under seg_lock). */
static size_t slice0_start = HAK_SEG_HDR_SIZE, guard_from;
static uint32_t all_free = ALL_SLICES;

static void guard_geometry(void) {
  if (guard_from) return;
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
  guard_from = from;
}
#define SLICE0_START slice0_start
#define ALL_FREE all_free
#else
#define SLICE0_START HAK_SEG_HDR_SIZE
#define ALL_FREE ALL_SLICES
#endif

static size_t slice_usable(unsigned i) { return i == 0 ? HAK_SLICE_SIZE - SLICE0_START : HAK_SLICE_SIZE; }

static size_t mask_bytes(uint32_t m) {
  size_t b = (size_t)__builtin_popcount(m & ~1u) * HAK_SLICE_SIZE;
  if (m & 1u) b += slice_usable(0);
  return b;
}

static hak_segment_t *segment_map(void) {
  hak_segment_t *s = os_map_segment();
  if (!s) return NULL;
  if (!slice_map_reserve(s, HAK_SEG_SIZE)) { /* out of address space: nothing of it stays */
    os_unmap(s, HAK_SEG_SIZE);
    return NULL;
  }
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
  s->dirty_mask = 0;
  slice_map_set(s, HAK_SLICES, HAK_CLASS_NONE + 1);
  HAK_STAT_INC(HAK_EV_SEGMENT_MAP);
  free_slice_bytes += mask_bytes(ALL_FREE);
  list_push(s);
  seg_empty++;
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

static void segment_unmap(hak_segment_t *s) {
  list_remove(s);
  seg_empty--;
  dirty_bytes -= mask_bytes(s->dirty_mask);
  free_slice_bytes -= mask_bytes(ALL_FREE);
  slice_map_set(s, HAK_SLICES, 0);
  s->magic = 0;
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
static void purge_segment(hak_segment_t *s, uint32_t now, uint32_t min_age) {
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
  dirty_bytes -= mask_bytes(todo);
  s->dirty_mask &= ~todo;
}

static void purge_sweep(uint32_t now, uint32_t min_age) {
  for (hak_segment_t *s = seg_head; s; s = s->next)
    if (s->dirty_mask & s->free_mask) purge_segment(s, now, min_age);
}

/* Memory freed less than delay/8 ago is never purged: a producer/consumer
 * program reuses it within milliseconds, and purging it would only trade a
 * madvise now for page faults next. Far over budget, sweeps come more often
 * and take younger memory, oldest first. */
static void purge_policy(void) {
  if (dirty_bytes <= hak_config.dirty_max) return;
  uint32_t now = os_now_ms(), delay = hak_config.purge_delay_ms, floor_age = delay / 8;
  bool pressed = dirty_bytes > 2 * hak_config.dirty_max;
  if (now - last_sweep_ms < (pressed ? floor_age : delay / 2)) return;
  last_sweep_ms = now;
  for (uint32_t age = delay;; age /= 2) {
    if (age < floor_age) age = floor_age;
    purge_sweep(now, age);
    if (!pressed || age == floor_age || dirty_bytes <= hak_config.dirty_max) break;
  }
}

static void page_init(hak_segment_t *s, unsigned first, unsigned n, unsigned cls) {
  hak_page_t *pg = &s->pages[first];
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

static hak_page_t *page_alloc_locked(unsigned n, unsigned cls, bool may_map);

static hak_page_t *page_alloc_once(unsigned n, unsigned cls, bool may_map) {
  hak_lock(&seg_lock);
  hak_page_t *pg = page_alloc_locked(n, cls, may_map);
  hak_unlock(&seg_lock);
  if (pg) HAK_STAT_INC(HAK_EV_PAGE_ALLOC);
  return pg;
}

unsigned segment_pages_alloc(unsigned n, unsigned cls, hak_page_t **out, unsigned k) {
  unsigned got = 0;
  hak_lock(&seg_lock);
  while (got < k && (out[got] = page_alloc_locked(n, cls, false)) != NULL) got++;
  hak_unlock(&seg_lock);
  HAK_STAT_ADD(HAK_EV_PAGE_ALLOC, got);
  return got;
}

static hak_page_t *page_alloc_locked(unsigned n, unsigned cls, bool may_map) {
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
    for (s = seg_head; s && first < 0; s = s->next) {
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
    if (!s)
      for (s = seg_head; s; s = s->next)
        if ((first = find_run(s->free_mask & ~s->dirty_mask, 0, n, slice0_ok)) >= 0) break;
  } else {
    /* A large block: warm slices first, it will be written from its start. */
    for (s = seg_head; s; s = s->next)
      if ((s->dirty_mask & s->free_mask) && (first = find_run(s->free_mask & s->dirty_mask, 0, n, slice0_ok)) >= 0) break;
  }
  if (!s)
    for (s = seg_head; s; s = s->next)
      if ((first = find_run(s->free_mask, s->dirty_mask, n, slice0_ok)) >= 0) break;
  if (!s && !may_map) return NULL;
  if (!s) {
    s = segment_map();
    if (!s) return NULL;
    first = find_run(s->free_mask, 0, n, slice0_ok);
  } else if (s->free_mask == ALL_FREE) {
    HAK_STAT_INC(HAK_EV_SEGMENT_REUSE);
  }
  uint32_t run = (n == 32 ? ALL_SLICES : ((1u << n) - 1)) << first;
  /* A free slice that is not dirty was never touched, or purged since. */
  bool zero = (s->dirty_mask & run) == 0;
  if (s->free_mask == ALL_FREE) seg_empty--;
  s->free_mask &= ~run;
  os_segment_in_use(s, HAK_SLICES - (unsigned)__builtin_popcount(s->free_mask)); /* HAKMEM_THP=auto */
  free_slice_bytes -= mask_bytes(run);
  dirty_bytes -= mask_bytes(s->dirty_mask & run);
  s->dirty_mask &= ~run;
  if (s->free_mask == 0) list_remove(s);
  page_init(s, (unsigned)first, n, cls);
  s->pages[first].known_zero = zero;
  return &s->pages[first];
}

/* Out of address space, the caches above (freed huge mappings) are given
 * back and the search is made once more, without the lock held meanwhile. */
hak_page_t *segment_page_alloc_ex(unsigned n, unsigned cls, bool may_map) {
  hak_page_t *pg = page_alloc_once(n, cls, may_map);
  if (!pg && may_map && os_reclaim()) pg = page_alloc_once(n, cls, may_map);
  return pg;
}

hak_page_t *segment_page_alloc(unsigned n, unsigned cls) { return segment_page_alloc_ex(n, cls, true); }

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

static void page_free_locked(hak_page_t *pg, uint32_t now, uint32_t clean);

void segment_page_free(hak_page_t *pg) { segment_page_free_at(pg, os_now_ms()); }

void segment_page_free_at(hak_page_t *pg, uint32_t now) {
  segment_page_detach(pg);
  hak_lock(&seg_lock);
  page_free_locked(pg, now, 0);
  purge_policy();
  hak_unlock(&seg_lock);
  /* Due once idle for the delay, even if nothing is freed after it. */
  purge_arm((now + hak_config.purge_delay_ms) | 1);
}

void segment_pages_free(hak_page_t *list) {
  for (hak_page_t *pg = list; pg; pg = pg->next) segment_page_detach(pg);
  uint32_t now = os_now_ms();
  hak_lock(&seg_lock);
  for (hak_page_t *pg = list, *next; pg; pg = next) {
    next = pg->next;
    page_free_locked(pg, now, 0);
  }
  purge_policy();
  hak_unlock(&seg_lock);
  purge_arm((now + hak_config.purge_delay_ms) | 1);
}

/* A destroyed first-class heap's pages (heap/user_heap.c), when there are
 * more of them than the dirty budget: their memory is purged now, outside
 * the lock (detached, they are in no free mask yet: nobody else can take
 * them), in runs of slices per segment, one madvise per run, then they go
 * back clean. The program is done with all of that memory at once, and the
 * purge delay would keep it resident until the next slow path. */
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
    hak_lock(&seg_lock);
    for (hak_page_t *p = chunk, *next; p; p = next) {
      next = p->next;
      unsigned i = 0;
      while (seg[i] != segment_of(p)) i++;
      page_free_locked(p, now, runs[i]);
    }
    hak_unlock(&seg_lock);
  }
}

#if HAK_SECURE
static uint8_t *large_guard_at(hak_segment_t *s, unsigned first, unsigned n) {
  return (uint8_t *)s + ((size_t)(first + n) << HAK_SLICE_SHIFT) - os_page_size();
}

void segment_large_guard(hak_page_t *pg) {
  hak_segment_t *s = segment_of(pg);
  uint32_t bit = 1u << pg->first_slice;
  if (atomic_load_explicit(&s->guard_mask, memory_order_relaxed) & bit) return;
  if (os_guard(large_guard_at(s, pg->first_slice, pg->slice_count), os_page_size(), true))
    atomic_fetch_or_explicit(&s->guard_mask, bit, memory_order_relaxed);
}
#endif

static void page_free_locked(hak_page_t *pg, uint32_t now, uint32_t clean) {
  hak_segment_t *s = segment_of(pg);
  unsigned first = pg->first_slice, n = pg->slice_count;
#if HAK_SECURE
  if (atomic_fetch_and_explicit(&s->guard_mask, ~(1u << first), memory_order_relaxed) & (1u << first))
    os_guard(large_guard_at(s, first, n), os_page_size(), false);
#endif
  uint32_t run = (n == 32 ? ALL_SLICES : ((1u << n) - 1)) << first;
  if (s->free_mask == 0) list_push(s);
  s->free_mask |= run;
  free_slice_bytes += mask_bytes(run);
  for (unsigned i = first; i < first + n; i++) {
    s->freed_ms[i] = now;
    s->last_cls[i] = (uint8_t)pg->cls;
  }
  s->dirty_mask |= run & ~clean;
  dirty_bytes += mask_bytes(run & ~clean);
  HAK_STAT_INC(HAK_EV_PAGE_RETIRE);
  if (s->free_mask == ALL_FREE) {
    seg_empty++;
    if (seg_empty > hak_config.segment_cache && segment_unmap_safe(s)) segment_unmap(s);
  }
}

/* The purge deadline's work for segments: every free slice idle for min_age
 * ms (the purge delay) goes back, whatever the dirty budget (memory nobody
 * took in a whole delay is not churn). Returns when the next remaining dirty
 * slice will be due, 0 if none is left; *any is set if something was purged. */
uint32_t segment_purge_aged(uint32_t now, uint32_t min_age, bool *any) {
  uint32_t delay = hak_config.purge_delay_ms, youngest_left = UINT32_MAX;
  hak_lock(&seg_lock);
  size_t before = dirty_bytes;
  purge_sweep(now, min_age);
  if (dirty_bytes != before) *any = true;
  for (hak_segment_t *s = seg_head; s; s = s->next)
    for (uint32_t d = s->dirty_mask & s->free_mask; d; d &= d - 1) {
      uint32_t age = now - s->freed_ms[__builtin_ctz(d)];
      uint32_t left = age < delay ? delay - age : 1;
      if (left < youngest_left) youngest_left = left;
    }
  hak_unlock(&seg_lock);
  return youngest_left == UINT32_MAX ? 0 : (now + youngest_left) | 1;
}

bool segment_trim(void) {
  bool any = false;
  hak_lock(&seg_lock);
  for (hak_segment_t *s = seg_head, *next; s; s = next) {
    next = s->next;
    if (s->free_mask == ALL_FREE && segment_unmap_safe(s)) { segment_unmap(s); any = true; }
  }
  if (dirty_bytes) { purge_sweep(os_now_ms(), 0); any = true; }
  hak_unlock(&seg_lock);
  return any;
}

size_t segment_free_bytes(void) { return free_slice_bytes + page_cache_bytes(); }
size_t segment_dirty_bytes(void) { return dirty_bytes; }

void segment_atfork_prepare(void) { hak_lock_fork(&seg_lock); }
void segment_atfork_parent(void) { hak_unlock_fork(&seg_lock); }
void segment_atfork_child(void) {
  hak_lock_reset(&seg_lock);
#if HAK_SECURE
  os_random_atfork_child(); /* new segments of the child get keys the parent cannot guess */
#endif
}
