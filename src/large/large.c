/* large.c — blocks above 256 KiB.
 *
 * Up to 15 slices (960 KiB) a large block is a page of its own inside a
 * segment: no system call, and its slices return to the segment (and its
 * purge policy) on free; at least two such blocks share a segment. A
 * realloc resizes its run in place where it can (segment/large_run.c: over
 * the free slices after it, or giving its tail slices back). Bigger
 * blocks get a mapping of their own, sized in 64 KiB units (as glibc maps
 * its big blocks by the page: a 1 MiB block costs 1 MiB + 64 KiB of address
 * space, not a 2 MiB segment, and a 2.1 MiB one 2.1 MiB + 64 KiB, not
 * 4 MiB), aligned to 2 MiB, whose first 64 bytes
 * mimic a segment header, so free() routes them with the same registry
 * test; freed mappings wait in the huge cache (huge_cache.c: lock-free,
 * sized by demand). Alignments of
 * 2 MiB and more cannot keep the header in the pointer's chunk: those blocks
 * are found by address in a hash table (overaligned.c, striped locks)
 * asked only on the foreign-pointer path, and only for 2 MiB-aligned
 * pointers.
 *
 * No process-wide lock is taken per large block: pages come from the
 * thread's page cache and the lock-free page exchange (segment/page_cache.c),
 * huge mappings from the lock-free huge cache, and the live counts are
 * atomics. No system call under a lock of the over-aligned table: the
 * mapping, its guard and its unmap are made outside.
 *
 * A cached mapping keeps its address range, not its memory: once idle for
 * purge_delay_ms its pages (all but the header page) go back with madvise,
 * so the cache saves system calls without holding resident memory. */
#include "large/large.h"
#include "large/huge_cache.h"
#include "large/overaligned.h"
#include "large/page_stash.h"
#include "guard/guard.h"
#include "guard/registry.h"
#include "guard/unmapped.h"
#include "os/os.h"
#include "policy/config.h"
#include "policy/purger.h"
#include "segment/segment.h"
#include "heap/canary.h"
#include "heap/heap.h"
#include "heap/user_heap.h"
#include "stats/stats.h"

#include <string.h>

#define HUGE_MIN_OFFSET 64
#define STASH_MIN_SLICES 2
/* Secure build: every large, huge and over-aligned block is followed by one
 * OS page of no access (os_guard), so a linear overflow past its usable size
 * faults at once. Huge mappings keep theirs while cached. mremap takes one
 * mapping whole, and the guard splits it: a resize or move opens the guard
 * first (the two parts merge again), remaps, then closes the page that ends
 * the new mapping (huge_guard_open/close). */
#if HAK_SECURE
#define GUARD_BYTES os_page_size()
#else
#define GUARD_BYTES ((size_t)0)
#endif
/* Secure build: blocks start at least HAK_HEAD bytes into their run or past
 * the huge header, room for the keyed head word (heap/canary.h) that shows
 * an underflow. */

static _Atomic(size_t) huge_live_blocks, huge_live_bytes;

static void live_add(size_t blocks, size_t bytes) {
  atomic_fetch_add_explicit(&huge_live_blocks, blocks, memory_order_relaxed);
  size_t now = atomic_fetch_add_explicit(&huge_live_bytes, bytes, memory_order_relaxed) + bytes;
  huge_cache_note_live(now);
}
static void live_sub(size_t blocks, size_t bytes) {
  atomic_fetch_sub_explicit(&huge_live_blocks, blocks, memory_order_relaxed);
  atomic_fetch_sub_explicit(&huge_live_bytes, bytes, memory_order_relaxed);
}

/* ---- huge mappings ------------------------------------------------------ */

/* Out of address space (os_reclaim): the huge cache and the empty segments
 * go back to the OS, so the request that failed can be retried. */
static bool large_reclaim(void) {
  bool a = large_trim();
  bool b = segment_trim();
  return a || b;
}

/* Slices of a huge mapping the slice map marks as ours: those of its first
 * 2 MiB (where its header and block start are) that it covers. */
static size_t huge_marked(size_t map) {
  size_t n = map >> HAK_SLICE_SHIFT;
  return n < HAK_SLICES ? n : HAK_SLICES;
}

/* The purge deadline's work for the huge cache. */
uint32_t large_purge_aged(uint32_t now, uint32_t min_age, bool *any) {
  uint32_t a = huge_cache_purge_aged(now, min_age, any), b = page_stash_purge_aged(now, min_age, any);
  return !a ? b : !b ? a : (int32_t)(a - b) < 0 ? a : b;
}

void huge_unmap(hak_segment_t *s) {
  slice_map_set(s, huge_marked(s->map_size), 0);
  s->magic = 0;
  unmapped_note(s, s->map_size);
  os_unmap(s, s->map_size);
}

/* A fresh huge mapping with its leaf of the slice map, or NULL (then nothing
 * of it stays). */
static hak_segment_t *huge_map(size_t map) {
  hak_segment_t *s = os_map_aligned(map, HAK_SEG_SIZE, true);
  if (s && !slice_map_reserve(s, HAK_SEG_SIZE)) {
    os_unmap(s, map);
    s = NULL;
  }
  return s;
}

static void *huge_alloc(size_t size, size_t align, bool zero) {
  size_t off = align_up(HUGE_MIN_OFFSET + HAK_HEAD, align), guard = GUARD_BYTES;
  size_t need = off + size + (size == 0) + guard; /* the pointer stays inside the mapping */
  if (need < size || need > (SIZE_MAX >> 1)) return NULL;
  /* 64 KiB units (the slice map marks whole slices, so no other mapping
   * may share the last one; and a multiple of any page size): a 1 MiB block
   * costs 1 MiB + 64 KiB of address space, not 2 MiB. Above 2 MiB too: in
   * whole 2 MiB units a 2.1 MiB block got 4 MiB, whose tail its later,
   * bigger users faulted in, and a cached mapping stays resident as far as
   * its biggest user wrote. A ring of 64 live blocks of 4 KiB-4 MiB, every
   * page written (peak 15 live blocks of 2-4 MiB), kept 16 mappings of
   * 4 MiB: peak RSS 134 MiB, 33.8k faults (tcmalloc 92 MiB, 23.7k). In
   * 64 KiB units 122 MiB, 30.8k faults, 0.92x the CPU; large_mt (64 KiB-
   * 4 MiB) 0.88x the CPU, 0.56x the faults, for ~107 mmap and ~66 munmap per
   * run instead of ~94 and ~40. (When the cache had 16 slots bounded by
   * bytes, 64 KiB units there made large_mt miss it ~15x as often; the
   * demand-sized 64-slot cache, which hands out a mapping up to twice the
   * size asked, does not.) */
  size_t map = align_up(need, HAK_SLICE_SIZE);
  /* A cached mapping up to twice the size (or any up to 2 MiB: sizes there
   * are in 64 KiB units and would rarely match): its pages are resident
   * already, which beats mapping and faulting in fresh ones. */
  size_t most = map <= HAK_SEG_SIZE / 2 ? HAK_SEG_SIZE : 2 * map;
  bool resident = false;
  hak_segment_t *s = huge_cache_take(map, most, &resident);
  bool fresh = s == NULL, purged = s && !resident;
  if (!s) {
    s = huge_map(map);
    if (!s && large_reclaim()) s = huge_map(map); /* out of address space: without the caches */
    if (!s) return NULL;
    s->map_size = map;
    slice_map_set(s, huge_marked(map), HAK_CLASS_NONE + 1);
    /* a cached mapping keeps its guard (its size never changes: no mremap) */
    if (guard) os_guard((uint8_t *)s + map - guard, guard, true);
  }
  s->kind = HAK_SEG_HUGE;
  memset(s->slice_cls, HAK_CLASS_NONE, sizeof s->slice_cls);
  s->huge_size = s->map_size - off - guard;
  s->magic = HAK_SEG_MAGIC;
  live_add(1, s->map_size);
  uint8_t *p = (uint8_t *)s + off;
  if (zero && !fresh) {
    /* A cached mapping purged since reads zero beyond its first page,
     * which holds the header and is never purged. */
    uint8_t *first_page_end = (uint8_t *)s + os_page_size();
    size_t head = p < first_page_end ? (size_t)(first_page_end - p) : 0;
    if (purged && size > head) size = head;
    memset(p, 0, size);
  }
  HAK_STAT_INC(HAK_EV_HUGE_ALLOC);
  return p;
}

static void huge_free(hak_segment_t *s, void *p) {
  if (s->magic != HAK_SEG_MAGIC || s->huge_size == 0 ||
      (uint8_t *)p != (uint8_t *)s + (s->map_size - s->huge_size - GUARD_BYTES)) {
    report_invalid("free", p);
    return;
  }
  s->huge_size = 0; /* marks it free: a second free is reported, not obeyed */
  HAK_STAT_INC(HAK_EV_HUGE_FREE);
  live_sub(1, s->map_size);
  if (!huge_cache_put(s)) {
    huge_unmap(s);
    return;
  }
  os_set_reclaim(large_reclaim);
  purge_arm((os_now_ms() + hak_config.purge_delay_ms) | 1);
}

/* ---- over-aligned blocks (alignment >= 2 MiB) --------------------------- */

#define OVERALIGNED_MAGIC 0x4f56414c49474e44ull

static void *overaligned_alloc(size_t size, size_t align, bool zero) {
  (void)zero; /* fresh mappings are zero */
  size_t ps = os_page_size(), guard = GUARD_BYTES;
  size_t map = size + align + ps + guard;
  if (map < size || size > (SIZE_MAX >> 2) || align > (SIZE_MAX >> 2)) return NULL;
  map = align_up(map, ps);
  uint8_t *base = os_map(map);
  if (!base && large_reclaim()) base = os_map(map);
  if (!base) return NULL;
  if (guard) os_guard(base + map - guard, guard, true);
  uint8_t *p = (uint8_t *)align_up((uintptr_t)base + ps, align);
  overaligned_t *o = (overaligned_t *)(p - sizeof(overaligned_t));
  o->magic = OVERALIGNED_MAGIC;
  o->base = base;
  o->map = map;
  o->usable = (size_t)(base + map - guard - p);
  overaligned_insert(o);
  live_add(1, map);
  HAK_STAT_INC(HAK_EV_HUGE_ALLOC);
  return p;
}

bool overaligned_free(void *p) {
  overaligned_t *hit = overaligned_take(p);
  if (!hit) return false;
  live_sub(1, hit->map);
  HAK_STAT_INC(HAK_EV_HUGE_FREE);
  unmapped_note(hit->base, hit->map);
  os_unmap(hit->base, hit->map);
  return true;
}

/* ---- where a block's end falls ----------------------------------------------
 *
 * A large block is written from its start, and a program that writes only
 * its first and last bytes (bench_sizemix) touches its run's first OS page
 * and its last byte's page. Each page record keeps the 4 KiB pages of its
 * run's last slice where a block's last byte has been (`ends`), and the stash
 * hands a run to a block that ends on one of them (page_stash.c). A block
 * may also start up to a 4 KiB page into its run (its first byte still on
 * the run's first page), so its last byte can fall on the next page up: two
 * pages to match instead of one. */
#define END_PAGE 4096

/* Where the block's last byte (`last` bytes into the run, its first `lead`
 * bytes in) falls if the block starts as far up as it must for that byte to
 * reach the next 4 KiB page, keeping the first byte on the run's first page,
 * the alignment, and the end before `room`; SIZE_MAX if it cannot (which
 * page_end_bit maps to no page). large_alloc asks it for the stash's hint
 * before it has a run, end_place again with the run it got: the run's size
 * and start decide. */
static size_t end_moved_up(size_t lead, size_t last, size_t align, size_t room) {
  size_t o = align_up(END_PAGE - (last & (END_PAGE - 1)), align);
  return lead + o < END_PAGE && last + o < room ? last + o : SIZE_MAX;
}

/* pg, a run for a block of `bytes` from b: how far to move b up so its last
 * byte falls on a page where one ended before (0: it falls there already,
 * or cannot), and that page noted in pg->ends. */
static size_t end_place(hak_page_t *pg, uint8_t *b, size_t bytes, size_t align, size_t guard) {
  size_t base = (size_t)pg->first_slice << HAK_SLICE_SHIFT, room = ((size_t)pg->slice_count << HAK_SLICE_SHIFT) - guard;
  size_t lead = (size_t)(b - (uint8_t *)segment_of(pg)) - base, last = lead + bytes - 1, o = 0;
  uint16_t bit = page_end_bit(pg->slice_count, last);
  if (!(pg->ends & bit)) {
    size_t moved = end_moved_up(lead, last, align, room);
    uint16_t up = page_end_bit(pg->slice_count, moved);
    if (pg->ends & up) o = moved - last, bit = up;
  }
  pg->ends |= bit;
  return o;
}

/* ---- the public face ------------------------------------------------------ */

void *large_alloc(size_t size, size_t align, bool zero) {
  if (align < HAK_MIN_ALIGN) align = HAK_MIN_ALIGN;
  if (align >= HAK_SEG_SIZE) return overaligned_alloc(size, align, zero);
  /* Runs start on a slice boundary: an alignment up to a slice costs
   * nothing (the secure build's head: the alignment, at least HAK_HEAD). */
  size_t slack = !HAK_HEAD ? (align > HAK_SLICE_SIZE ? align - HAK_SLICE_SIZE : 0) : align > HAK_HEAD ? align : HAK_HEAD;
  size_t room = (size_t)HAK_LARGE_MAX_SLICES * HAK_SLICE_SIZE;
  size_t guard = GUARD_BYTES;
  if (size + slack + 1 + guard > room || size > room) return huge_alloc(size, align, zero);
  /* The aligned block may start `slack` bytes in and needs at least one byte
   * after that, or the pointer would sit at the run's end (even in the next
   * segment's chunk). */
  size_t span = size + slack + (size == 0) + guard;
  unsigned n = (unsigned)((span + HAK_SLICE_SIZE - 1) >> HAK_SLICE_SHIFT);
  /* The thread's page cache under its heap's lock: a collector may flush it
   * (heap/collect.c). */
  /* Pages of up to two slices fit the thread's page cache, which keeps them
   * local: the stash is for bigger ones, which overflowed it to the segment
   * lock. */
  /* The block starts align_up(HAK_HEAD, align) into its run (runs start on
   * a slice boundary; a larger alignment only makes the hint inexact), or
   * up to a 4 KiB page later (end_moved_up). */
  size_t lead = align <= HAK_SLICE_SIZE ? align_up(HAK_HEAD, align) : 0, last = lead + size + (size == 0) - 1;
  hak_page_t *pg = n > STASH_MIN_SLICES
                       ? page_stash_take(n, last, end_moved_up(lead, last, align, ((size_t)n << HAK_SLICE_SHIFT) - guard))
                       : NULL;
  if (!pg) {
    hak_heap_t *h = hak_tls.state == HAK_THREAD_LIVE ? hak_tls.heap : NULL;
    if (h) heap_lock(h);
    pg = page_cache_alloc(h ? &h->pcache : NULL, n, HAK_CLASS_NONE);
    if (h) heap_unlock(h);
    if (!pg) return NULL; /* the segments already tried os_reclaim */
  }
  bool known_zero = pg->known_zero;
  uint8_t *b = (uint8_t *)align_up((uintptr_t)pg->start + HAK_HEAD, align);
  b += end_place(pg, b, size + (size == 0), align, guard);
  pg->start = b;
  pg->bsize = (uint32_t)(pg->end - guard - b);
  pg->used = 1;
#if HAK_SECURE
  segment_large_guard(pg);
#endif
  if (zero && !known_zero) memset(b, 0, size);
  HAK_STAT_INC(HAK_EV_LARGE_ALLOC);
  return b;
}

void large_free(void *p) {
  hak_segment_t *s = segment_of(p);
  if (s->kind == HAK_SEG_HUGE) {
    huge_free(s, p);
    return;
  }
  hak_page_t *pg = s->slice_page[slice_index(p)];
  if (!pg || pg->state != HAK_PAGE_LARGE || pg->start != (uint8_t *)p) {
    report_invalid("free", p);
    return;
  }
  /* Ordinary large pages have no owner; a first-class heap's have it. */
  if (HAK_UNLIKELY(atomic_load_explicit(&pg->owner, memory_order_acquire) != NULL) && uheap_free_large(pg)) return;
  HAK_STAT_INC(HAK_EV_LARGE_FREE);
  if (pg->slice_count > STASH_MIN_SLICES && page_stash_put(pg)) {
    os_set_reclaim(large_reclaim); /* stashed pages keep segments mapped */
    return;
  }
  hak_heap_t *h = hak_tls.state == HAK_THREAD_LIVE ? hak_tls.heap : NULL;
  if (h) heap_lock(h);
  page_cache_free(h ? &h->pcache : NULL, pg);
  if (h) heap_unlock(h);
}

size_t large_usable(const void *p) {
  hak_segment_t *s = segment_of(p);
  if (s->kind == HAK_SEG_HUGE) return s->huge_size;
  hak_page_t *pg = s->slice_page[slice_index(p)];
  return pg && pg->state == HAK_PAGE_LARGE ? pg->bsize : 0;
}

size_t large_live_usable(const void *p) {
  hak_segment_t *s = segment_of(p);
  if (s->kind == HAK_SEG_HUGE)
    return s->magic == HAK_SEG_MAGIC && s->huge_size != 0 &&
           (const uint8_t *)p == (const uint8_t *)s + (s->map_size - s->huge_size - GUARD_BYTES) ? s->huge_size : 0;
  hak_page_t *pg = s->slice_page[slice_index(p)];
  return pg && pg->state == HAK_PAGE_LARGE && pg->start == (const uint8_t *)p ? pg->bsize : 0;
}

/* Secure build: the guard at the end of huge mapping s (map bytes) opened,
 * so that the whole mapping is one again for mremap, or closed. While it is
 * open the block's owner is inside realloc: the window is its own. */
static void huge_guard_set(hak_segment_t *s, size_t map, bool closed) {
  size_t guard = GUARD_BYTES;
  if (guard) os_guard((uint8_t *)s + map - guard, guard, closed);
}

/* Resize a huge mapping in place with mremap; false if the kernel cannot.
 * Growth goes in 2 MiB units, so a buffer growing by small steps costs one
 * mremap per 2 MiB; shrinking gives back all but the last 64 KiB unit. The
 * slices leaving the mapping stop being ours before the kernel can hand
 * them to anyone else. Secure build: the guard moves to the new end. */
static bool huge_remap(hak_segment_t *s, size_t size) {
  size_t guard = GUARD_BYTES, off = s->map_size - s->huge_size - guard;
  if (off + size + guard < size || off + size + guard > (SIZE_MAX >> 1)) return false;
  size_t need = off + size + guard;
  size_t map = align_up(need, need > s->map_size ? HAK_SEG_SIZE : HAK_SLICE_SIZE);
  if (map == s->map_size) return true;
  size_t was = huge_marked(s->map_size), now = huge_marked(map);
  if (now < was) slice_map_set((uint8_t *)s + (now << HAK_SLICE_SHIFT), was - now, 0);
  huge_guard_set(s, s->map_size, false);
  if (!os_remap_inplace(s, s->map_size, map)) {
    huge_guard_set(s, s->map_size, true);
    if (now < was) slice_map_set((uint8_t *)s + (now << HAK_SLICE_SHIFT), was - now, HAK_CLASS_NONE + 1);
    return false;
  }
  huge_guard_set(s, map, true);
  if (now > was) slice_map_set((uint8_t *)s + (was << HAK_SLICE_SHIFT), now - was, HAK_CLASS_NONE + 1);
  if (map > s->map_size) live_add(0, map - s->map_size);
  else live_sub(0, s->map_size - map);
  s->map_size = map;
  s->huge_size = map - off - guard;
  return true;
}

/* A large page's run resized for a block of `size` bytes at its start:
 * grown over the free slices after it or shrunk (segment_large_resize);
 * false if it would not stay a large page, or the slices are not free. A
 * first-class heap's page (it has an owner) keeps its size: its heap counts
 * its slices. */
static bool large_run_resize(hak_segment_t *s, void *p, size_t size) {
  hak_page_t *pg = s->slice_page[slice_index(p)];
  if (!pg || pg->state != HAK_PAGE_LARGE || pg->start != (uint8_t *)p ||
      atomic_load_explicit(&pg->owner, memory_order_relaxed) != NULL)
    return false;
  size_t guard = GUARD_BYTES, room = (size_t)HAK_LARGE_MAX_SLICES * HAK_SLICE_SIZE;
  size_t lead = (size_t)(pg->start - ((uint8_t *)s + ((size_t)pg->first_slice << HAK_SLICE_SHIFT)));
  if (size > room || lead + size + guard > room) return false;
  unsigned n = (unsigned)((lead + size + guard + HAK_SLICE_SIZE - 1) >> HAK_SLICE_SHIFT);
  if (!segment_large_resize(pg, n)) return false;
  pg->bsize = (uint32_t)(pg->end - guard - pg->start);
  return true;
}

bool large_resize_inplace(void *p, size_t size) {
  hak_segment_t *s = segment_of(p);
  size_t usable = large_usable(p);
  bool huge = s->kind == HAK_SEG_HUGE;
  if (size <= usable) {
    if (size >= usable / 2) return true;             /* fits without much waste: stay */
    /* Much smaller: a large page gives its tail slices back if it stays
     * large (a move above 32 KiB would take a large page too), else the
     * block moves to a smaller home; a huge block still huge gives its
     * tail back. */
    if (!huge) return size > HAK_CLASS_ZERO_MAX && large_run_resize(s, p, size);
    if (size <= (size_t)HAK_LARGE_MAX_SLICES * HAK_SLICE_SIZE) return false;
    huge_remap(s, size);
    return true;
  }
  /* Grow in place: over the free slices after the run, or if the kernel can. */
  return huge ? huge_remap(s, size) : large_run_resize(s, p, size);
}

/* Grow a huge block by moving its pages to a new, bigger aligned mapping
 * (mremap): no copy and no page faults, where malloc + memcpy + free would
 * touch every byte twice. The old range stops being ours before the kernel
 * can hand it to anyone else. */
void *large_realloc_move(void *p, size_t size) {
  hak_segment_t *s = segment_of(p);
  if (s->kind != HAK_SEG_HUGE || size <= s->huge_size) return NULL;
  size_t guard = GUARD_BYTES, off = s->map_size - s->huge_size - guard, old = s->map_size;
  if (off + size + guard < size || off + size + guard > (SIZE_MAX >> 1)) return NULL;
  size_t map = align_up(off + size + guard, HAK_SEG_SIZE);
  /* The destination: a cached mapping if one fits (the move replaces its
   * pages; it is still ours in the slice map), else a fresh one. */
  bool resident;
  hak_segment_t *t = huge_cache_take(map, 2 * map, &resident);
  bool fresh = t == NULL;
  if (t) map = t->map_size;
  else if (!(t = huge_map(map))) return NULL;
  slice_map_set(s, huge_marked(old), 0);
  huge_guard_set(s, old, false); /* (a cached t's guard goes with its pages) */
  if (!os_remap_to(s, old, t, map)) {
    huge_guard_set(s, old, true);
    slice_map_set(s, huge_marked(old), HAK_CLASS_NONE + 1);
    if (fresh) os_unmap(t, map);
    else if (!huge_cache_put(t)) huge_unmap(t);
    return NULL;
  }
  unmapped_note(s, old);
  huge_guard_set(t, map, true);
  t->map_size = map; /* the header moved with the pages */
  t->huge_size = map - off - guard;
  if (fresh) slice_map_set(t, huge_marked(map), HAK_CLASS_NONE + 1);
  live_add(0, map - old);
  return (uint8_t *)t + off;
}

bool large_trim(void) {
  bool a = huge_cache_trim();
  /* Stashed pages go back to their segments, which are trimmed again: the
   * purger trims segments before this (their pages were not free then). */
  bool b = page_stash_trim();
  if (b) segment_trim();
  return a || b;
}

void large_counts(size_t *blocks, size_t *bytes) {
  *blocks = atomic_load_explicit(&huge_live_blocks, memory_order_relaxed);
  *bytes = atomic_load_explicit(&huge_live_bytes, memory_order_relaxed);
}

void large_atfork_prepare(void) { overaligned_atfork_prepare(); }
void large_atfork_parent(void) { overaligned_atfork_parent(); }
void large_atfork_child(void) { overaligned_atfork_child(); }
