/* page_stash.c — freed large pages (blocks of 33 KiB..960 KiB, a run of
 * slices in a segment) kept for reuse without the segment lock.
 *
 * Why: the page caches below (segment/page_cache.c) hold a few slices per
 * thread and 8 in the exchange, sized for class pages; a large page of up to
 * 15 slices overflows both and went back to its segment under the
 * process-wide segment lock, and the next large malloc cut one under it
 * again: one acquisition per large block (large_mt: ~190,000 per million
 * operations). The stash keeps up to HAKMEM_DIRTY_MAX bytes of such pages
 * (free but resident memory, which is what that budget bounds).
 *
 * The protocol: as the huge cache (huge_cache.c), SLOTS atomic words, 0 or
 * an entry: the page record's address | its slice count << 56 (user
 * addresses fit in 56 bits on x86_64 and aarch64; a record that does not
 * is never stashed). The entry describes the page completely.
 *   - put (free): the page is detached from the slice map first (a stale
 *     free of its block is reported, as for any free slice), then published
 *     with a CAS 0 -> entry (release) in an empty word; none empty, it goes
 *     to the page caches as before.
 *   - take (malloc of n slices): the smallest entry of n..n+n/4 slices,
 *     claimed with a CAS entry -> 0 (acquire); the winner re-initialises
 *     the page. A loser rescans a few times, then takes the usual path.
 *   - over budget (put), purge deadline, trim: entries are claimed the same
 *     way (oldest first by their stamp, a hint only) and given back to their
 *     segments in one batch, one acquisition of the segment lock per batch.
 *   A stashed page is not free in its segment, so its segment stays mapped
 *   (the budget bounds that too), and its record stays valid while stashed.
 *   Nobody waits: a preempted taker or putter owns at most its one page
 *   (others miss it and cut a page from a segment); after fork every word is
 *   consistent (a page claimed by another thread at that moment is lost to
 *   the child: memory only); nothing is per thread, so thread exit does
 *   nothing. */
#include "large/page_stash.h"
#include "os/os.h"
#include "policy/config.h"
#include "policy/purger.h"
#include "segment/segment.h"

#define SLOTS 32
#define N_SHIFT 56

static _Atomic(uintptr_t) slot[SLOTS];
static _Atomic(uint32_t) stamp[SLOTS];
static _Atomic(size_t) stashed_bytes;

HAK_INLINE hak_page_t *w_page(uintptr_t w) { return (hak_page_t *)(w & (((uintptr_t)1 << N_SHIFT) - 1)); }
HAK_INLINE unsigned w_slices(uintptr_t w) { return (unsigned)(w >> N_SHIFT); }
HAK_INLINE size_t w_bytes(uintptr_t w) { return (size_t)w_slices(w) << HAK_SLICE_SHIFT; }

size_t page_stash_bytes(void) { return atomic_load_explicit(&stashed_bytes, memory_order_relaxed); }

hak_page_t *page_stash_take(unsigned n) {
  if (!atomic_load_explicit(&stashed_bytes, memory_order_relaxed)) return NULL;
  unsigned most = n + n / 4;
  for (int tries = 0; tries < 4; tries++) {
    int best = -1;
    uintptr_t bw = 0;
    for (int i = 0; i < SLOTS; i++) {
      uintptr_t w = atomic_load_explicit(&slot[i], memory_order_relaxed);
      unsigned k = w_slices(w);
      if (!w || k < n || k > most || (best >= 0 && k >= w_slices(bw))) continue;
      best = i;
      bw = w;
      if (k == n) break;
    }
    if (best < 0) return NULL;
    if (atomic_compare_exchange_strong_explicit(&slot[best], &bw, 0, memory_order_acquire, memory_order_relaxed)) {
      atomic_fetch_sub_explicit(&stashed_bytes, w_bytes(bw), memory_order_relaxed);
      hak_page_t *pg = w_page(bw);
      segment_page_reinit(pg, HAK_CLASS_NONE);
      return pg;
    }
  }
  return NULL;
}

/* Claim entries and give them back to their segments: by_age, those
 * stamped at least min_age ago (one by one: cold); else the oldest until the
 * stash holds at most `keep` bytes (in one batch). Returns when the next
 * entry is due (0: none). */
static uint32_t drain(uint32_t now, uint32_t min_age, size_t keep, bool by_age, bool *any) {
  hak_page_t *list = NULL;
  uint32_t delay = hak_config.purge_delay_ms, youngest_left = UINT32_MAX;
  if (by_age) {
    for (int i = 0; i < SLOTS; i++) {
      uintptr_t w = atomic_load_explicit(&slot[i], memory_order_relaxed);
      if (!w) continue;
      uint32_t age = now - atomic_load_explicit(&stamp[i], memory_order_relaxed);
      if (age < min_age) {
        if (delay - age < youngest_left) youngest_left = delay - age;
        continue;
      }
      if (!atomic_compare_exchange_strong_explicit(&slot[i], &w, 0, memory_order_acquire, memory_order_relaxed))
        continue;
      atomic_fetch_sub_explicit(&stashed_bytes, w_bytes(w), memory_order_relaxed);
      /* Stamped with when it was freed, so its segment purges it at its
       * next sweep rather than a delay later. */
      segment_page_free_at(w_page(w), now - age);
      if (any) *any = true;
    }
  } else {
    for (int n = 0; n < SLOTS && atomic_load_explicit(&stashed_bytes, memory_order_relaxed) > keep; n++) {
      int o = -1;
      uintptr_t ow = 0;
      uint32_t oage = 0;
      for (int i = 0; i < SLOTS; i++) {
        uintptr_t w = atomic_load_explicit(&slot[i], memory_order_relaxed);
        uint32_t age = now - atomic_load_explicit(&stamp[i], memory_order_relaxed);
        if (w && (o < 0 || age > oage)) {
          o = i;
          ow = w;
          oage = age;
        }
      }
      if (o < 0) break;
      if (!atomic_compare_exchange_strong_explicit(&slot[o], &ow, 0, memory_order_acquire, memory_order_relaxed))
        continue;
      atomic_fetch_sub_explicit(&stashed_bytes, w_bytes(ow), memory_order_relaxed);
      w_page(ow)->next = list;
      list = w_page(ow);
    }
  }
  if (list) {
    segment_pages_free(0, list); /* shard 0 holds no segment: every page goes to its shard's returned stack */
    if (any) *any = true;
  }
  return youngest_left == UINT32_MAX ? 0 : (now + youngest_left) | 1;
}

bool page_stash_put(hak_page_t *pg) {
  size_t most = hak_config.dirty_max, bytes = (size_t)pg->slice_count << HAK_SLICE_SHIFT;
  if (bytes > most / 2 || ((uintptr_t)pg >> N_SHIFT) != 0) return false;
  pg->known_zero = 0; /* it was used */
  segment_page_detach(pg);
  uintptr_t w = (uintptr_t)pg | (uintptr_t)pg->slice_count << N_SHIFT;
  uint32_t now = os_now_ms();
  int from = (int)(((uintptr_t)pg >> 7) % SLOTS);
  /* Counted before it can be taken, so the count never runs below zero. */
  size_t total = atomic_fetch_add_explicit(&stashed_bytes, bytes, memory_order_relaxed) + bytes;
  for (int k = 0; k < SLOTS; k++) {
    int i = (from + k) % SLOTS;
    uintptr_t empty = 0;
    if (!atomic_load_explicit(&slot[i], memory_order_relaxed) &&
        atomic_compare_exchange_strong_explicit(&slot[i], &empty, w, memory_order_release, memory_order_relaxed)) {
      atomic_store_explicit(&stamp[i], now, memory_order_relaxed);
      /* Resident until reused or given back: due after the purge delay. */
      purge_arm((now + hak_config.purge_delay_ms) | 1);
      if (total > most) drain(now, 0, most - most / 4, false, NULL); /* oldest out, a quarter at once */
      return true;
    }
  }
  atomic_fetch_sub_explicit(&stashed_bytes, bytes, memory_order_relaxed);
  return false; /* full: the caller frees it the usual way (detached already: harmless) */
}

uint32_t page_stash_purge_aged(uint32_t now, uint32_t min_age, bool *any) {
  return drain(now, min_age, 0, true, any);
}

bool page_stash_trim(void) {
  bool any = false;
  drain(os_now_ms(), 0, 0, true, &any);
  return any;
}
