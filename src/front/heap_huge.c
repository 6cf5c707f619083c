/* heap_huge.c — the blocks of first-class heaps too big for a page of
 * slices (above 960 KiB, or aligned above 64 KiB): ordinary huge or
 * over-aligned blocks of the process, recorded in one table of (block,
 * heap) so that hak_heap_destroy frees them with the heap and
 * hak_heap_delete hands them over.
 *
 * The table: open addressing with linear probing and backward-shift
 * deletion, mapped from the OS (never through malloc), doubled at half
 * full, under one lock (huge_lock). `live` counts its entries: free() and
 * realloc() look at the table only when it is non-zero (a relaxed load on
 * their paths for huge and over-aligned blocks, never on the fast path).
 *
 * Lock order: huge_lock before the large-block and segment locks (destroy
 * frees the blocks under it); it is never taken under another allocator
 * lock. Fork: the prepare handler takes it first and the child resets it.
 * A thread preempted while holding it delays only frees of huge blocks
 * while heaps hold some, and heap teardown. Thread exit: nothing. */
#include "front/heap_huge.h"
#include "front/front.h"
#include "guard/registry.h"
#include "large/large.h"
#include "os/lock.h"
#include "os/os.h"

static hak_lock_t huge_lock = HAK_LOCK_NAMED("heap_huge");
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

/* Room for one more entry; false when the OS refuses memory. */
static bool reserve(void) {
  size_t n = atomic_load_explicit(&live, memory_order_relaxed);
  if (cap && 2 * (n + 1) <= cap) return true;
  size_t nc = cap ? 2 * cap : 64;
  entry_t *nt = os_map(nc * sizeof(entry_t));
  if (!nt) return false;
  for (size_t i = 0; i < cap; i++)
    if (table[i].block) put(nt, nc, table[i].block, table[i].heap);
  if (table) os_unmap(table, cap * sizeof(entry_t));
  table = nt;
  cap = nc;
  return true;
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
  hak_lock(&huge_lock);
  bool ok = reserve();
  if (ok) {
    put(table, cap, p, h);
    atomic_fetch_add_explicit(&live, 1, memory_order_relaxed);
  }
  hak_unlock(&huge_lock);
  if (!ok) {
    large_free_any(p);
    return NULL;
  }
  return p;
}

HAK_INLINE bool any_live(void) { return atomic_load_explicit(&live, memory_order_relaxed) != 0; }

void heap_huge_forget(const void *p) {
  if (HAK_LIKELY(!any_live())) return;
  hak_lock(&huge_lock);
  size_t i = find(p);
  if (i != SIZE_MAX) remove_at(i);
  hak_unlock(&huge_lock);
}

hak_heap_t *heap_huge_owner(const void *p) {
  if (HAK_LIKELY(!any_live())) return NULL;
  hak_lock(&huge_lock);
  size_t i = find(p);
  hak_heap_t *h = i != SIZE_MAX ? table[i].heap : NULL;
  hak_unlock(&huge_lock);
  return h;
}

size_t heap_huge_release(hak_heap_t *h, bool free_them) {
  size_t n = 0;
  if (!any_live()) return 0;
  hak_lock(&huge_lock);
  for (size_t i = 0; i < cap;) {
    if (table[i].block && table[i].heap == h) {
      void *p = table[i].block;
      remove_at(i); /* an entry from further on may move into i: look again */
      if (free_them) large_free_any(p);
      n++;
    } else {
      i++;
    }
  }
  hak_unlock(&huge_lock);
  return n;
}

void heap_huge_atfork_prepare(void) { hak_lock_fork(&huge_lock); }
void heap_huge_atfork_parent(void) { hak_unlock_fork(&huge_lock); }
void heap_huge_atfork_child(void) { hak_lock_reset(&huge_lock); }
