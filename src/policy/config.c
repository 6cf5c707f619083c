/* config.c — HAKMEM_* environment variables and the three profiles. */
#include "policy/config.h"
#include "heap/size_class.h"

#include <stdlib.h>
#include <string.h>

#define HAK_TCACHE_HARD_MAX 1024
/* Smallest class cache: at 4, mid-size classes refilled and flushed two
 * blocks at a time and their pages churned (mid_mt 20% slower, no leaner).
 * 16 against 8: mixed_wide +12.7% (A/B, p=0.002), mid_mt +9.5%, same RSS,
 * now that a realloc's moved-from blocks no longer land in the caches. */
#define HAK_TCACHE_MIN 16

hak_config_t hak_config = {
  .profile = HAK_PROFILE_SPEED,
  .tcache_bytes = 32 * 1024,
  .tcache_max = 128,
  .segment_cache = 16,
  .dirty_max = (size_t)8 << 20,
  .purge_delay_ms = 100,
  .huge_cache = (size_t)64 << 20,
};

/* Parses "123", "64k", "8M", "1g"; returns false on anything else. */
static bool parse_size(const char *s, size_t *out) {
  if (!s || !*s) return false;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) return false;
  switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    default: break;
  }
  if (*end == 'b' || *end == 'B') end++;
  if (*end) return false;
  *out = (size_t)v;
  return true;
}

static void env_size(const char *name, size_t lo, size_t hi, size_t *dst) {
  size_t v;
  if (parse_size(getenv(name), &v)) *dst = v < lo ? lo : v > hi ? hi : v;
}

static bool env_flag(const char *name) {
  const char *s = getenv(name);
  return s && *s && strcmp(s, "0") != 0 && strcmp(s, "no") != 0 && strcmp(s, "off") != 0;
}

static void apply_profile(hak_config_t *c, const char *p) {
  if (!p) return;
  if (strcmp(p, "balanced") == 0) {
    c->profile = HAK_PROFILE_BALANCED;
    c->tcache_bytes = 16 * 1024; c->tcache_max = 96; c->segment_cache = 8; c->dirty_max = (size_t)4 << 20; c->purge_delay_ms = 50; c->huge_cache = (size_t)16 << 20;
  } else if (strcmp(p, "lean") == 0) {
    c->profile = HAK_PROFILE_LEAN;
    c->tcache_bytes = 4 * 1024; c->tcache_max = 32; c->segment_cache = 0; c->dirty_max = (size_t)1 << 20; c->purge_delay_ms = 10; c->huge_cache = 0;
  }
}

void config_load(void) {
  hak_config_t c = hak_config;
  apply_profile(&c, getenv("HAKMEM_PROFILE"));
  c.stats_at_exit = env_flag("HAKMEM_STATS");
  size_t v;
  v = c.tcache_bytes; env_size("HAKMEM_TCACHE_BYTES", 0, (size_t)1 << 24, &v); c.tcache_bytes = (uint32_t)v;
  v = c.tcache_max; env_size("HAKMEM_TCACHE_MAX", 0, HAK_TCACHE_HARD_MAX, &v); c.tcache_max = (uint32_t)v;
  v = c.segment_cache; env_size("HAKMEM_SEGMENT_CACHE", 0, 1024, &v); c.segment_cache = (uint32_t)v;
  env_size("HAKMEM_DIRTY_MAX", 0, (size_t)1 << 40, &c.dirty_max);
  v = c.purge_delay_ms; env_size("HAKMEM_PURGE_DELAY_MS", 0, 60000, &v); c.purge_delay_ms = (uint32_t)v;
  env_size("HAKMEM_HUGE_CACHE", 0, (size_t)1 << 40, &c.huge_cache);

  /* A class cache holds about tcache_bytes, at least HAK_TCACHE_MIN blocks
   * (so refill and flush move batches) and at most tcache_max; 0 disables
   * the caches. */
  for (unsigned k = 0; k < HAK_NCLASSES; k++) {
    uint32_t cap = c.tcache_bytes / hak_class_size[k];
    if (cap < HAK_TCACHE_MIN) cap = HAK_TCACHE_MIN;
    if (cap > c.tcache_max) cap = c.tcache_max;
    c.tcache_cap[k] = (uint16_t)cap;
  }
  c.tcache_cap[HAK_CLASS_NONE] = 0;
  hak_config = c;
}
