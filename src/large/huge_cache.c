/* huge_cache.c — freed huge mappings kept for reuse, with no lock.
 *
 * Why: a fresh huge mapping costs an mmap, later an munmap (a TLB shootdown
 * on every core the process ran on), and page faults that zero whole pages
 * (2 MiB ones where transparent huge pages apply). A program that churns big
 * buffers should pay that once, not per block; and with a process-wide lock
 * per huge malloc and free (as before) every thread doing so met there.
 *
 * The protocol
 *   SLOTS atomic words. A word is 0 (empty) or an entry: the mapping's
 *   address (2 MiB aligned, so its low 21 bits are free) | its size in 64 KiB
 *   units << 1 | 1 if its pages are resident (not purged since it was
 *   freed). The word describes the entry completely, so nobody reads a
 *   cached mapping's memory unless they own it.
 *   - put (free): the freeing thread writes the header (freed_ms[0]) while
 *     the mapping is still its own, then CASes an empty word 0 -> entry
 *     (release). No empty word: it CASes the word of the oldest-looking
 *     entry straight to its own entry and unmaps the one it displaced.
 *   - take (malloc): scan the words for the best fit, CAS that word
 *     entry -> 0 (acquire). The winner owns the mapping; a loser rescans
 *     (a few times, then maps fresh). ABA is harmless: a word that went
 *     away and came back with the same value describes the same mapping,
 *     cached again, so taking it is still right.
 *   - purge (the purge deadline), trim (malloc_trim, out of address space):
 *     claim an entry with the same CAS, purge or unmap it, and (purge) put
 *     it back like a free; if no word is empty by then, it is unmapped.
 *   stamp[i] (coarse ms the entry in slot i was freed) is a hint only, for
 *   choosing the oldest entry and for the purge's first look; it is written
 *   after the CAS and may be stale for a moment. Decisions that matter (is
 *   it due for purge?) read freed_ms[0] from the header of a claimed entry.
 *   cached_bytes counts entries in the words and those claimed for purge; it
 *   may run ahead of the words for a moment, never lose an entry.
 *   Nobody ever waits for anybody:
 *   - preempted thread: it owns at most the one mapping it claimed (or is
 *     about to publish); others find that entry missing and map a fresh one
 *     meanwhile, or unmap their own if the cache looks full.
 *   - fork: every word is consistent at any instant (single CASes). A
 *     mapping claimed by another thread at that moment is lost to the child
 *     (address space only: its pages are the parent's copy-on-write ones).
 *   - thread exit: nothing is per thread; the cache does not care.
 *
 * The budget follows demand: HAKMEM_HUGE_CACHE bytes at least (0: no
 * cache), and up to twice the recent peak of live huge bytes (halved at
 * each purge run, raised again by the next allocation), at most 16 times
 * the floor. A program holding N bytes of big buffers keeps at most about
 * 2N more mapped while it is busy; the entries' pages go back after the
 * purge delay (all but the header page), so an idle program keeps address
 * space only. Twice, not once: freed sizes differ from the sizes asked next,
 * and with a cache just the size of the live set the misfits pushed out the
 * useful entries (large_mt, blocks 64 KiB-4 MiB, mapped fresh ~10x as
 * often). */
#include "large/huge_cache.h"
#include "os/os.h"
#include "policy/config.h"

#define SLOTS 64
#define W_RESIDENT ((uintptr_t)1)
#define UNIT_SHIFT 16 /* 64 KiB */
#define UNITS_MAX (((uintptr_t)1 << 20) - 1)
#define W_FLAGS (((uintptr_t)HAK_SEG_SIZE) - 1)

static _Atomic(uintptr_t) slot[SLOTS];
static _Atomic(uint32_t) stamp[SLOTS];
static _Atomic(size_t) cached_bytes;
static _Atomic(size_t) demand;

_Static_assert((UNITS_MAX << 1 | W_RESIDENT) <= W_FLAGS, "entry flags fit below the 2 MiB alignment");

HAK_INLINE hak_segment_t *w_seg(uintptr_t w) { return (hak_segment_t *)(w & ~W_FLAGS); }
HAK_INLINE size_t w_size(uintptr_t w) { return ((w & W_FLAGS) >> 1) << UNIT_SHIFT; }

static size_t budget(void) {
  size_t floor = hak_config.huge_cache;
  size_t want = 2 * atomic_load_explicit(&demand, memory_order_relaxed);
  size_t most = floor > SIZE_MAX / 16 ? SIZE_MAX : floor * 16;
  return want < floor ? floor : want > most ? most : want;
}

void huge_cache_note_live(size_t live) {
  size_t d = atomic_load_explicit(&demand, memory_order_relaxed);
  while (live > d && !atomic_compare_exchange_weak_explicit(&demand, &d, live, memory_order_relaxed,
                                                            memory_order_relaxed)) {
  }
}

size_t huge_cache_bytes(void) { return atomic_load_explicit(&cached_bytes, memory_order_relaxed); }

hak_segment_t *huge_cache_take(size_t map, size_t most, bool *resident) {
  if (!atomic_load_explicit(&cached_bytes, memory_order_relaxed)) return NULL;
  for (int tries = 0; tries < 4; tries++) {
    int best = -1;
    uintptr_t bw = 0;
    for (int i = 0; i < SLOTS; i++) {
      uintptr_t w = atomic_load_explicit(&slot[i], memory_order_relaxed);
      if (!w) continue;
      size_t sz = w_size(w);
      if (sz < map || sz > most) continue;
      /* Smallest first; of equal sizes a resident one (no page faults). */
      if (best < 0 || sz < w_size(bw) || (sz == w_size(bw) && (w & W_RESIDENT) > (bw & W_RESIDENT))) {
        best = i;
        bw = w;
      }
    }
    if (best < 0) return NULL;
    if (atomic_compare_exchange_strong_explicit(&slot[best], &bw, 0, memory_order_acquire, memory_order_relaxed)) {
      atomic_fetch_sub_explicit(&cached_bytes, w_size(bw), memory_order_relaxed);
      *resident = (bw & W_RESIDENT) != 0;
      return w_seg(bw);
    }
  }
  return NULL;
}

/* The slot whose entry looks oldest (not `skip`), -1 if all are empty. */
static int oldest_slot(int skip, uintptr_t *w_out) {
  int o = -1;
  uint32_t now = os_now_ms(), oage = 0;
  for (int i = 0; i < SLOTS; i++) {
    uintptr_t w = atomic_load_explicit(&slot[i], memory_order_relaxed);
    if (!w || i == skip) continue;
    uint32_t age = now - atomic_load_explicit(&stamp[i], memory_order_relaxed);
    if (o < 0 || age > oage) {
      o = i;
      oage = age;
      *w_out = w;
    }
  }
  return o;
}

/* Publish entry w (freed at `freed`) in an empty slot, starting at `from`;
 * with `displace`, into the oldest entry's slot when none is empty (that
 * entry is unmapped). The slot, or -1 (the caller still owns the mapping). */
static int publish(uintptr_t w, uint32_t freed, int from, bool displace) {
  for (int tries = 0; tries < 4; tries++) {
    for (int k = 0; k < SLOTS; k++) {
      int i = (from + k) % SLOTS;
      uintptr_t empty = 0;
      if (!atomic_load_explicit(&slot[i], memory_order_relaxed) &&
          atomic_compare_exchange_strong_explicit(&slot[i], &empty, w, memory_order_release, memory_order_relaxed)) {
        atomic_store_explicit(&stamp[i], freed, memory_order_relaxed);
        return i;
      }
    }
    if (!displace) return -1;
    uintptr_t old = 0;
    int o = oldest_slot(-1, &old);
    if (o < 0) continue; /* emptied meanwhile: look for the empty word again */
    if (atomic_compare_exchange_strong_explicit(&slot[o], &old, w, memory_order_acq_rel, memory_order_relaxed)) {
      atomic_store_explicit(&stamp[o], freed, memory_order_relaxed);
      atomic_fetch_sub_explicit(&cached_bytes, w_size(old), memory_order_relaxed);
      huge_unmap(w_seg(old));
      return o;
    }
  }
  return -1;
}

bool huge_cache_put(hak_segment_t *s) {
  size_t map = s->map_size, most = budget();
  if (map > most || (map >> UNIT_SHIFT) > UNITS_MAX) return false;
  uint32_t now = os_now_ms();
  s->freed_ms[0] = now;
  uintptr_t w = (uintptr_t)s | (map >> UNIT_SHIFT) << 1 | W_RESIDENT;
  atomic_fetch_add_explicit(&cached_bytes, map, memory_order_relaxed);
  int at = publish(w, now, (int)(((uintptr_t)s >> HAK_SEG_SHIFT) % SLOTS), true);
  if (at < 0) {
    atomic_fetch_sub_explicit(&cached_bytes, map, memory_order_relaxed);
    return false;
  }
  /* Over budget: the oldest entries go (never the one just freed: it is the
   * likeliest to be asked for again). */
  for (int n = 0; n < SLOTS && atomic_load_explicit(&cached_bytes, memory_order_relaxed) > most; n++) {
    uintptr_t old = 0;
    int o = oldest_slot(at, &old);
    if (o < 0) break;
    if (atomic_compare_exchange_strong_explicit(&slot[o], &old, 0, memory_order_acquire, memory_order_relaxed)) {
      atomic_fetch_sub_explicit(&cached_bytes, w_size(old), memory_order_relaxed);
      huge_unmap(w_seg(old));
    }
  }
  return true;
}

uint32_t huge_cache_purge_aged(uint32_t now, uint32_t min_age, bool *any) {
  uint32_t delay = hak_config.purge_delay_ms, youngest_left = UINT32_MAX;
  size_t ps = os_page_size();
  /* Demand decays: a burst long past stops sizing the cache. */
  atomic_store_explicit(&demand, atomic_load_explicit(&demand, memory_order_relaxed) / 2, memory_order_relaxed);
  for (int i = 0; i < SLOTS; i++) {
    uintptr_t w = atomic_load_explicit(&slot[i], memory_order_relaxed);
    if (!(w & W_RESIDENT)) continue; /* empty, or purged already */
    uint32_t age = now - atomic_load_explicit(&stamp[i], memory_order_relaxed);
    if (age >= min_age) {
      if (!atomic_compare_exchange_strong_explicit(&slot[i], &w, 0, memory_order_acquire, memory_order_relaxed))
        continue; /* taken meanwhile: in use again */
      hak_segment_t *s = w_seg(w);
      uint32_t freed = s->freed_ms[0];
      age = now - freed; /* the stamp was a hint; the header is the truth */
      if (age >= min_age) {
        os_purge((uint8_t *)s + ps, w_size(w) - ps);
        w &= ~W_RESIDENT;
        *any = true;
      }
      if (publish(w, freed, i, false) < 0) {
        atomic_fetch_sub_explicit(&cached_bytes, w_size(w), memory_order_relaxed);
        huge_unmap(s);
        continue;
      }
      if (!(w & W_RESIDENT)) continue;
    }
    if (age < delay && delay - age < youngest_left) youngest_left = delay - age;
  }
  return youngest_left == UINT32_MAX ? 0 : (now + youngest_left) | 1;
}

bool huge_cache_trim(void) {
  bool any = false;
  for (int i = 0; i < SLOTS; i++) {
    if (!atomic_load_explicit(&slot[i], memory_order_relaxed)) continue;
    uintptr_t w = atomic_exchange_explicit(&slot[i], 0, memory_order_acquire);
    if (!w) continue;
    atomic_fetch_sub_explicit(&cached_bytes, w_size(w), memory_order_relaxed);
    huge_unmap(w_seg(w));
    any = true;
  }
  return any;
}
