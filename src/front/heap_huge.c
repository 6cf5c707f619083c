/* heap_huge.c — the blocks of first-class heaps too big for a page of
 * slices (above 960 KiB, or aligned above 64 KiB): ordinary huge or
 * over-aligned blocks of the process, recorded in one table of (block,
 * heap) so that hak_heap_destroy frees them with the heap and
 * hak_heap_delete hands them over.
 *
 * The table: open addressing with linear probing and backward-shift
 * deletion, mapped from the OS (never through malloc), doubled at half
 * full, under one lock (heap_huge_lock). `live` counts its entries: free()
 * and realloc() look at the table only when it is non-zero (a relaxed load
 * on their paths for huge and over-aligned blocks, never on the fast path).
 *
 * heap_huge_lock (process-wide) is taken per huge or over-aligned block of a
 * first-class heap (alloc, and free/realloc while any heap holds one), per
 * hak_heap_destroy/delete, never on a path of the thread heaps. No system
 * call under it: a bigger table is mapped with the lock dropped and the old
 * one unmapped after the release (heap_huge_alloc; a thread that finds the
 * table grown meanwhile unmaps its own and looks again), and destroy frees
 * the heap's blocks (munmap, the huge cache's madvise) in batches taken off
 * the table under the lock and freed after it (heap_huge_release). Work
 * under it: a probe run of a table at most half full, a rehash into the
 * doubled table (amortised O(1) per entry), or one scan of the table per
 * RELEASE_BATCH blocks of a destroyed heap.
 *
 * Lock order: heap_huge_lock is a leaf; it is never taken under another
 * allocator lock, and nothing else is taken under it. Fork: the prepare
 * handler takes it first and the child resets it; a table mapped by a
 * thread that has the lock dropped at the fork is address space lost to
 * the child. A thread preempted while holding it delays only frees of huge
 * blocks while heaps hold some, and heap teardown. Thread exit: nothing. */
#include "front/heap_huge.h"
#include "front/front.h"
#include "guard/registry.h"
#include "large/large.h"
#include "os/lock.h"
#include "os/os.h"

hak_lock_t heap_huge_lock = HAK_LOCK_NAMED("heap_huge");
static _Atomic(size_t) live;

typedef struct { void *block; hak_heap_t *heap; } entry_t;
static entry_t *table;
static size_t cap; /* a power of two, or 0 */

/* A huge block (registered) or an over-aligned one (on large.c's list). */
static void large_free_any(void *p) {
  if (registry_has(p)) large_free(p);
  else overaligned_free(p);
}

HAK_INLINE size_t home(const void *p, size_t c) {
  uint64_t x = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull;
  return (size_t)(x >> 32) & (c - 1);
}

static void put(entry_t *t, size_t c, void *p, hak_heap_t *h) {
  size_t i = home(p, c);
  while (t[i].block) i = (i + 1) & (c - 1);
  t[i].block = p;
  t[i].heap = h;
}

HAK_INLINE bool has_room(void) {
  return cap && 2 * (atomic_load_explicit(&live, memory_order_relaxed) + 1) <= cap;
}

/* heap_huge_lock held, spare (spare_cap entries) mapped by the caller: the
 * table moves into it; returns the old one, to unmap after the release. */
static entry_t *grow_into(entry_t *spare, size_t spare_cap) {
  entry_t *old = table;
  for (size_t i = 0; i < cap; i++)
    if (table[i].block) put(spare, spare_cap, table[i].block, table[i].heap);
  table = spare;
  cap = spare_cap;
  return old;
}

static size_t find(const void *p) {
  if (!cap) return SIZE_MAX;
  for (size_t i = home(p, cap);; i = (i + 1) & (cap - 1)) {
    if (table[i].block == p) return i;
    if (!table[i].block) return SIZE_MAX;
  }
}

/* Backward shift: later entries of the probe run move up into the hole. */
static void remove_at(size_t i) {
  size_t j = i;
  for (;;) {
    table[i].block = NULL;
    for (;;) {
      j = (j + 1) & (cap - 1);
      if (!table[j].block) {
        atomic_fetch_sub_explicit(&live, 1, memory_order_relaxed);
        return;
      }
      size_t k = home(table[j].block, cap);
      /* j's entry may move to i if its home is not in (i, j] (cyclically) */
      if (i <= j ? (i < k && k <= j) : (i < k || k <= j)) continue;
      break;
    }
    table[i] = table[j];
    i = j;
  }
}

void *heap_huge_alloc(hak_heap_t *h, size_t n, size_t align, bool zero) {
  void *p = alloc_large_n(n, align, zero); /* secure build: sealed */
  if (!p) return NULL;
  entry_t *spare = NULL, *old = NULL;
  size_t spare_cap = 0, old_cap = 0;
  bool ok = true;
  hak_lock(&heap_huge_lock);
  while (!has_room()) {
    size_t want = cap ? 2 * cap : 64;
    if (spare && spare_cap == want) {
      old_cap = cap;
      old = grow_into(spare, spare_cap);
      spare = NULL;
      break; /* doubled from at most half full: room */
    }
    /* A table of the size due, mapped without the lock; one of the wrong
     * size (another thread grew the table meanwhile) goes back. */
    hak_unlock(&heap_huge_lock);
    if (spare) os_unmap(spare, spare_cap * sizeof(entry_t));
    spare = os_map(want * sizeof(entry_t));
    spare_cap = want;
    hak_lock(&heap_huge_lock);
    if (!spare) {
      ok = false;
      break;
    }
  }
  if (ok) {
    put(table, cap, p, h);
    atomic_fetch_add_explicit(&live, 1, memory_order_relaxed);
  }
  hak_unlock(&heap_huge_lock);
  if (old) os_unmap(old, old_cap * sizeof(entry_t));
  if (spare) os_unmap(spare, spare_cap * sizeof(entry_t));
  if (!ok) {
    large_free_any(p);
    return NULL;
  }
  return p;
}

HAK_INLINE bool any_live(void) { return atomic_load_explicit(&live, memory_order_relaxed) != 0; }

void heap_huge_forget(const void *p) {
  if (HAK_LIKELY(!any_live())) return;
  hak_lock(&heap_huge_lock);
  size_t i = find(p);
  if (i != SIZE_MAX) remove_at(i);
  hak_unlock(&heap_huge_lock);
}

hak_heap_t *heap_huge_owner(const void *p) {
  if (HAK_LIKELY(!any_live())) return NULL;
  hak_lock(&heap_huge_lock);
  size_t i = find(p);
  hak_heap_t *h = i != SIZE_MAX ? table[i].heap : NULL;
  hak_unlock(&heap_huge_lock);
  return h;
}

/* destroy: the blocks taken off the table under the lock RELEASE_BATCH at a
 * time, then freed without it (a free may munmap); a pass that takes fewer
 * has scanned the whole table, and no block of h is left on it (h is being
 * torn down: nothing adds to it). */
#define RELEASE_BATCH 64
size_t heap_huge_release(hak_heap_t *h, bool free_them) {
  size_t n = 0;
  void *batch[RELEASE_BATCH];
  while (any_live()) {
    unsigned k = 0;
    hak_lock(&heap_huge_lock);
    for (size_t i = 0; i < cap && k < RELEASE_BATCH;) {
      if (table[i].block && table[i].heap == h) {
        if (free_them) batch[k++] = table[i].block;
        remove_at(i); /* an entry from further on may move into i: look again */
        n++;
      } else {
        i++;
      }
    }
    hak_unlock(&heap_huge_lock);
    for (unsigned j = 0; j < k; j++) large_free_any(batch[j]);
    if (k < RELEASE_BATCH) break;
  }
  return n;
}

void heap_huge_atfork_prepare(void) { hak_lock_fork(&heap_huge_lock); }
void heap_huge_atfork_parent(void) { hak_unlock_fork(&heap_huge_lock); }
void heap_huge_atfork_child(void) { hak_lock_reset(&heap_huge_lock); }
