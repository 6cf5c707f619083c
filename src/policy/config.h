/* config.h — every tunable, read once at start-up into one snapshot.
 * Nothing on a fast path reads the environment; cold paths read this struct. */
#ifndef HAK_CONFIG_H
#define HAK_CONFIG_H

#include "hak_internal.h"

enum { HAK_PROFILE_SPEED = 0, HAK_PROFILE_BALANCED = 1, HAK_PROFILE_LEAN = 2 };

typedef struct hak_config {
  int      profile;        /* HAKMEM_PROFILE=speed|balanced|lean */
  bool     stats_at_exit;  /* HAKMEM_STATS=1 */
  uint32_t tcache_bytes;   /* HAKMEM_TCACHE_BYTES: bytes one class cache aims to hold */
  uint32_t tcache_max;     /* HAKMEM_TCACHE_MAX: most blocks one class cache holds */
  uint32_t segment_cache;  /* HAKMEM_SEGMENT_CACHE: empty segments kept mapped */
  size_t   dirty_max;      /* HAKMEM_DIRTY_MAX: free but resident bytes kept before purging */
  uint32_t purge_delay_ms; /* HAKMEM_PURGE_DELAY_MS: how long freed memory stays resident */
  size_t   huge_cache;     /* HAKMEM_HUGE_CACHE: bytes of freed huge mappings kept for reuse */
  uint16_t tcache_cap[HAK_NCLASSES + 1]; /* derived: per-class cache capacity */
} hak_config_t;

extern hak_config_t hak_config HAK_HIDDEN;

void config_load(void) HAK_HIDDEN;

#endif
