/* config.c — the snapshot of every tunable and what is derived from it (the
 * per-class cache capacities). The options and their parsing live in
 * options.c. */
#include "policy/config.h"
#include "heap/size_class.h"

#include <string.h>
#include <unistd.h>

/* Smallest class cache: at 4, mid-size classes refilled and flushed two
 * blocks at a time and their pages churned (mid_mt 20% slower, no leaner).
 * 16 against 8: mixed_wide +12.7% (A/B, p=0.002), mid_mt +9.5%, same RSS,
 * now that a realloc's moved-from blocks no longer land in the caches. */
#define HAK_TCACHE_MIN 16
/* A new thread's class caches start with this many bytes each (blocks of
 * classes above it start with none); the rest is earned by refills and
 * flushes, within the thread's budget (heap/tcache.c). */
#define HAK_TCACHE_START_BYTES 512

/* The speed profile's values until config_load runs (the caches stay off
 * until then: tcache_cap is all zero). */
hak_config_t hak_config = {
  .profile = HAK_PROFILE_SPEED,
  .tcache_bytes = 128 * 1024,
  .tcache_max = 128,
  .tcache_budget = (size_t)32 << 20,
  .tcache_learn = false,
  .segment_cache = 16,
  .dirty_max = (size_t)8 << 20,
  .purge_delay_ms = 100,
  .huge_cache = (size_t)64 << 20,
};

/* A class cache holds about tcache_bytes, at least HAK_TCACHE_MIN blocks (so
 * refill and flush move batches) and at most tcache_max; 0 disables the
 * caches. The speed profile's 128 KiB (32 KiB before 2026-11-26) gives the
 * classes up to 1 KiB 128 blocks and those of 1-8 KiB 128 KiB of blocks:
 * bench_sizemix (a quarter of its blocks of 129 B-1 KiB, a tenth of
 * 1-8 KiB, a fifth of the frees handed to another thread) flushed a third
 * less and used 3-5% less CPU in the standard build, the fast build's
 * within the noise (test_tcache_mid: cold events of such a mix). The
 * caps are maxima: a thread's caches start at HAK_TCACHE_START_BYTES and
 * grow only by cold events, within the thread's budget. */
void config_derive_caps(uint32_t tcache_bytes, uint32_t tcache_max, uint16_t *caps) {
  for (unsigned k = 0; k < HAK_NCLASSES; k++) {
    uint32_t cap = tcache_bytes / hak_class_size[k];
    if (cap < HAK_TCACHE_MIN) cap = HAK_TCACHE_MIN;
    if (cap > tcache_max) cap = tcache_max;
    caps[k] = (uint16_t)cap;
  }
  caps[HAK_CLASS_NONE] = 0;
}

void config_load(void) {
  hak_config_t c = hak_config;
  options_load(&c);
  config_derive_caps(c.tcache_bytes, c.tcache_max, c.tcache_cap);
  /* Zero-on-free works on the slow paths: no block may wait in a cache. */
  if (c.zero_on_free) memset(c.tcache_cap, 0, sizeof c.tcache_cap);
  for (unsigned k = 0; k <= HAK_NCLASSES; k++) {
    c.tcache_slots[k] = c.tcache_cap[k];
    uint32_t start = k < HAK_NCLASSES ? HAK_TCACHE_START_BYTES / hak_class_size[k] : 0;
    c.tcache_start[k] = (uint16_t)(start < c.tcache_cap[k] ? start : c.tcache_cap[k]);
  }
  c.loaded = true;
  hak_config = c;
  if (c.verbose) options_print(STDERR_FILENO);
}
