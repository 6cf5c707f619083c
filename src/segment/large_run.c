/* large_run.c — the run of slices under a large page: the secure build's
 * guard page after it, and the run grown or shrunk in place (realloc).
 *
 * Guards (secure build) outlive their pages: a freed large page leaves its
 * guard on the last OS page of its last slice (bit of that slice in
 * guard_mask), so a large page cut again with the same end (the common case:
 * a program that allocates and frees one size over and over) finds it there,
 * and costs no system call. A page cut over a slice with a guard inside its
 * run opens it (seg_guards_open), by its cutter once the shard lock is
 * released and before the page is handed out (segment.c: no mprotect under
 * a shard lock); a large page keeps the one at its own end. Only the page's
 * owner changes the bits of its slices (holding the page: its run is out of
 * the free mask, and the search for a guarded run reads free slices' bits
 * only), so the atomic AND is enough.
 *
 * Resizing in place. A realloc that outgrows its large page (or the guard
 * that takes the run's last 4 KiB in the secure build) used to move the block
 * to a bigger run: a new page, a copy, a free. When the slices right after
 * the run are free in the segment it now takes them: under the segment's
 * shard lock they leave the free books (seg_run_claim_locked, the same
 * bookkeeping as a page cut there, so the free, dirty and refault counts stay
 * right) and join the page record (slice_page; the slice map already reads
 * "large" for free slices). Slices that are free but held in a page cache,
 * the exchange or the large stash are detached, not free in the segment, and
 * are not taken: those caches own them. The guard moves after the lock is
 * dropped: the slices are the caller's by then, and the block is the
 * caller's inside its realloc. Shrinking gives the tail slices back as a
 * page of their own, through the shard's returned stack (no lock, as any
 * page freed by another thread), and closes a guard at the new end; the old
 * end's guard stays with its slice, as a freed page's does.
 *
 * Splitting and joining parked runs (segment_large_split, _merge): the page
 * stash (large/page_stash.c) hands a block the start of a longer stashed
 * run, or runs stashed side by side joined, rather than cut fresh slices
 * (its take_miss has the why). The runs are parked (segment.c,
 * segment_page_park) and claimed from the stash, so the caller holds them
 * all and no lock is needed: their slices are out of the free mask, and
 * only slice_page and the records change (the slice map reads "large" for
 * every slice of them). Secure build: the guards stay on their slices; the
 * unpark of the run handed out opens those inside it, and large_alloc
 * closes one at its new end (segment_large_guard). */
#include "segment/segment.h"
#include "segment/shard.h"
#include "os/os.h"

#include <string.h>

#if HAK_SECURE
static uint8_t *slice_end_guard(hak_segment_t *s, unsigned slice) {
  return (uint8_t *)s + ((size_t)(slice + 1) << HAK_SLICE_SHIFT) - os_page_size();
}

void seg_guards_open(hak_segment_t *s, unsigned first, unsigned n, unsigned cls) {
  uint32_t run = (n == 32 ? ALL_SLICES : ((1u << n) - 1)) << first;
  if (cls == HAK_CLASS_NONE) run &= ~(1u << (first + n - 1));
  if (!(atomic_load_explicit(&s->guard_mask, memory_order_relaxed) & run)) return;
  uint32_t stale = atomic_fetch_and_explicit(&s->guard_mask, ~run, memory_order_relaxed) & run;
  for (; stale; stale &= stale - 1) os_guard(slice_end_guard(s, (unsigned)__builtin_ctz(stale)), os_page_size(), false);
}

int seg_find_guarded_run(hak_segment_t *s, unsigned n) {
  uint32_t g = atomic_load_explicit(&s->guard_mask, memory_order_relaxed), free = s->free_mask & ~1u;
  uint32_t m = free & (g >> (n - 1)); /* starts whose run would end on a guard */
  for (unsigned i = 1; i < n && m; i++) m &= (free >> i) & ~(g >> (i - 1));
  return m ? __builtin_ctz(m) : -1;
}

void segment_large_guard(hak_page_t *pg) {
  hak_segment_t *s = segment_of(pg);
  unsigned last = pg->first_slice + pg->slice_count - 1;
  uint32_t bit = 1u << last;
  if (atomic_load_explicit(&s->guard_mask, memory_order_relaxed) & bit) return;
  if (os_guard(slice_end_guard(s, last), os_page_size(), true))
    atomic_fetch_or_explicit(&s->guard_mask, bit, memory_order_relaxed);
}
#endif

/* The slices after pg's run up to n in all, if all are free in the segment. */
static bool run_grow(hak_page_t *pg, unsigned n) {
  hak_segment_t *s = segment_of(pg);
  unsigned first = pg->first_slice, old = pg->slice_count;
  seg_shard_t *sh = &hak_seg_shards[s->shard];
  uint32_t more = ((1u << (n - old)) - 1) << (first + old);
  shard_lock(sh);
  /* Pages other threads freed may be the slices wanted: back first. */
  seg_drain_returned(sh);
  bool ok = (s->free_mask & more) == more;
  if (ok) {
    seg_run_claim_locked(sh, s, first + old, n - old);
    for (unsigned i = first + old; i < first + n; i++) s->slice_page[i] = pg;
  }
  shard_unlock(sh);
  if (!ok) return false;
  pg->slice_count = (uint8_t)n;
  pg->end = (uint8_t *)s + ((size_t)(first + n) << HAK_SLICE_SHIFT);
  pg->ends = 0; /* relative to the run's end, which moved */
#if HAK_SECURE
  seg_guards_open(s, first, n, HAK_CLASS_NONE); /* the old end's, and any left in the slices taken */
  segment_large_guard(pg);
#endif
  return true;
}

/* pg's run cut to n slices; the rest back to the segment as a page of its
 * own, freed like any other (segment.c: returned stack). */
static void run_shrink(hak_page_t *pg, unsigned n) {
  hak_segment_t *s = segment_of(pg);
  unsigned first = pg->first_slice, old = pg->slice_count, j = first + n;
  pg->slice_count = (uint8_t)n;
  pg->end = (uint8_t *)s + ((size_t)j << HAK_SLICE_SHIFT);
  pg->ends = 0; /* relative to the run's end, which moved */
#if HAK_SECURE
  segment_large_guard(pg);
#endif
  hak_page_t *t = &s->pages[j];
  memset(t, 0, offsetof(hak_page_t, anext)); /* a stale abandoned entry may point here (page_init) */
  t->start = t->bump = (uint8_t *)s + ((size_t)j << HAK_SLICE_SHIFT);
  t->end = pg->end + ((size_t)(old - n) << HAK_SLICE_SHIFT);
  t->cls = HAK_CLASS_NONE;
  t->slice_count = (uint8_t)(old - n);
  t->first_slice = j;
  t->ends = 0;
  t->state = HAK_PAGE_LARGE;
  segment_page_free(t); /* detaches its slices from pg: slice_page, slice map */
}

bool segment_large_resize(hak_page_t *pg, unsigned n) {
  unsigned old = pg->slice_count;
  if (n == old) return true;
  if (n == 0 || pg->first_slice + n > HAK_SLICES) return false;
  if (n < old) {
    run_shrink(pg, n);
    return true;
  }
  return run_grow(pg, n);
}

hak_page_t *segment_large_split(hak_page_t *pg, unsigned n) {
  hak_segment_t *s = segment_of(pg);
  unsigned first = pg->first_slice, old = pg->slice_count, j = first + n;
  hak_page_t *t = &s->pages[j];
  memset(t, 0, offsetof(hak_page_t, anext)); /* a stale abandoned entry may point here (page_init) */
  t->start = t->bump = (uint8_t *)s + ((size_t)j << HAK_SLICE_SHIFT);
  t->end = (uint8_t *)s + ((size_t)(first + old) << HAK_SLICE_SHIFT);
  t->bsize = (uint32_t)(t->end - t->start);
  t->capacity = 1;
  t->cls = HAK_CLASS_NONE;
  t->slice_count = (uint8_t)(old - n);
  t->first_slice = j;
  t->ends = pg->ends; /* the run's end stays the tail's */
  t->state = HAK_PAGE_FREE; /* parked (segment.c, segment_page_park) */
  for (unsigned i = j; i < first + old; i++) s->slice_page[i] = t;
  pg->slice_count = (uint8_t)n;
  pg->end = t->start;
  pg->ends = 0; /* relative to the run's end, which moved */
  return t;
}

void segment_large_merge(hak_page_t *lo, hak_page_t *hi) {
  hak_segment_t *s = segment_of(lo);
  for (unsigned i = hi->first_slice; i < hi->first_slice + hi->slice_count; i++) s->slice_page[i] = lo;
  lo->slice_count = (uint8_t)(lo->slice_count + hi->slice_count);
  lo->end = hi->end;
  lo->ends = hi->ends; /* the merged run ends where hi's did */
}

