/* zero_size.c — the secure build's blocks of size zero (malloc(0)): unique
 * pointers into address space that is never readable or writable, as
 * OpenBSD's malloc hands out, so that any read or write of such a block
 * faults at once, and the fault handler (guard/fault.c) names it.
 *
 * Slots of 16 bytes (every pointer malloc returns is 16-aligned) in
 * regions of PROT_NONE address space (MAP_NORESERVE: no memory, no commit
 * charge); region i spans 1 MiB << i (up to ZS_REGIONS of them, 2 GiB in
 * all), mapped when the ones before are full. Which slots are handed out
 * is a bitmap beside each region (its own ordinary mapping, touched only
 * where slots are used: 8 KiB per 64 Ki slots). A zero-size block costs no
 * memory beyond its bit; a free clears the bit, and a second free of the
 * same pointer finds it clear (double free), as does a free of a slot never
 * handed out.
 *
 * Lock-free protocol:
 *  - a region is published by one CAS of its entry in regions[] from NULL;
 *    a thread that loses unmaps its own and uses the winner's. Regions are
 *    never unmapped, so a pointer loaded once stays valid (the fault
 *    handler reads them with plain atomic loads, async-signal-safe);
 *  - a slot is taken by fetch_or of its bit (the old word says whether this
 *    thread set it: a race for one bit has one winner, the loser looks
 *    further) and given back by fetch_and (the old word says whether it was
 *    set: if not, a double or invalid free);
 *  - `live` counts a region's slots handed out, only as a hint that it is
 *    full (taken after the bit is set, dropped after it is cleared): a
 *    thread preempted in between makes others skip or scan a region once
 *    more, never hand out a slot twice. `hint` is where the last take
 *    found room, also only a hint.
 * Nothing is held across calls: fork, thread exit and preemption leave no
 * lock behind and no slot half taken. */
#include "guard/zero_size.h"
#include "os/os.h"

#include <sys/mman.h>

#if HAK_SECURE

#define ZS_SLOT 16u
#define ZS_REGIONS 12 /* 1 MiB << 11: 2 GiB of address space at most */

typedef struct {
  uint8_t *base;
  size_t slots;
  _Atomic(size_t) live, hint; /* hints (see above) */
  _Atomic(uint64_t) bits[];   /* slots / 64 words */
} zs_region_t;

static _Atomic(zs_region_t *) regions[ZS_REGIONS];

static size_t region_bytes(unsigned i) { return (size_t)1 << (20 + i); }

static zs_region_t *region_add(unsigned i) {
  size_t bytes = region_bytes(i), slots = bytes / ZS_SLOT;
  void *base = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return NULL;
  size_t ps = os_page_size();
  /* whole OS pages: os_unmap below (a lost race) takes the same length */
  size_t meta = (sizeof(zs_region_t) + slots / 64 * sizeof(uint64_t) + ps - 1) & ~(ps - 1);
  zs_region_t *r = os_map(meta); /* zero: no slot taken */
  if (!r) {
    munmap(base, bytes);
    return NULL;
  }
  r->base = base;
  r->slots = slots;
  zs_region_t *expect = NULL;
  if (!atomic_compare_exchange_strong(&regions[i], &expect, r)) {
    munmap(base, bytes);
    os_unmap(r, meta);
    return expect;
  }
  return r;
}

static void *region_take(zs_region_t *r) {
  size_t words = r->slots / 64, start = atomic_load_explicit(&r->hint, memory_order_relaxed);
  for (size_t k = 0; k < words; k++) {
    size_t w = (start + k) % words;
    uint64_t v = atomic_load_explicit(&r->bits[w], memory_order_relaxed);
    while (~v) {
      uint64_t bit = (uint64_t)1 << __builtin_ctzll(~v);
      v = atomic_fetch_or_explicit(&r->bits[w], bit, memory_order_relaxed);
      if (!(v & bit)) {
        atomic_fetch_add_explicit(&r->live, 1, memory_order_relaxed);
        atomic_store_explicit(&r->hint, w, memory_order_relaxed);
        return r->base + (w * 64 + (size_t)__builtin_ctzll(bit)) * ZS_SLOT;
      }
      v |= bit;
    }
  }
  return NULL;
}

void *zero_size_alloc(void) {
  for (unsigned i = 0; i < ZS_REGIONS; i++) {
    zs_region_t *r = atomic_load_explicit(&regions[i], memory_order_acquire);
    if (!r && !(r = region_add(i))) return NULL;
    if (atomic_load_explicit(&r->live, memory_order_relaxed) >= r->slots) continue;
    void *p = region_take(r);
    if (p) return p;
  }
  return NULL;
}

/* The region holding p, or NULL. Async-signal-safe (atomic loads only). */
static zs_region_t *region_of(const void *p) {
  for (unsigned i = 0; i < ZS_REGIONS; i++) {
    zs_region_t *r = atomic_load_explicit(&regions[i], memory_order_acquire);
    if (!r) break;
    if ((uintptr_t)p - (uintptr_t)r->base < region_bytes(i)) return r;
  }
  return NULL;
}

bool zero_size_owns(const void *p) { return region_of(p) != NULL; }

/* p's region and slot: ZS_LIVE if p is a slot's start (live or not),
 * else ZS_NOT_OURS or ZS_INVALID. */
static zs_state_t slot_of(const void *p, zs_region_t **rp, size_t *slot) {
  zs_region_t *r = region_of(p);
  if (!r) return ZS_NOT_OURS;
  size_t off = (size_t)((const uint8_t *)p - r->base);
  if (off % ZS_SLOT) return ZS_INVALID;
  *rp = r;
  *slot = off / ZS_SLOT;
  return ZS_LIVE;
}

zs_state_t zero_size_state(const void *p) {
  zs_region_t *r;
  size_t slot;
  zs_state_t st = slot_of(p, &r, &slot);
  if (st != ZS_LIVE) return st;
  uint64_t v = atomic_load_explicit(&r->bits[slot / 64], memory_order_relaxed);
  return v >> (slot % 64) & 1 ? ZS_LIVE : ZS_FREE;
}

zs_state_t zero_size_free(const void *p) {
  zs_region_t *r;
  size_t slot;
  zs_state_t st = slot_of(p, &r, &slot);
  if (st != ZS_LIVE) return st;
  uint64_t bit = (uint64_t)1 << (slot % 64);
  if (!(atomic_fetch_and_explicit(&r->bits[slot / 64], ~bit, memory_order_relaxed) & bit)) return ZS_FREE;
  atomic_fetch_sub_explicit(&r->live, 1, memory_order_relaxed);
  return ZS_LIVE;
}

#endif
