/* config.h — every tunable, read once at start-up into one snapshot.
 * Nothing on a fast path reads the environment; cold paths read this struct.
 * The options themselves (names, defaults per profile, ranges, which may
 * change at run time) are defined once, in the table in policy/options.c. */
#ifndef HAK_CONFIG_H
#define HAK_CONFIG_H

#include "hak_internal.h"

enum { HAK_PROFILE_SPEED = 0, HAK_PROFILE_BALANCED = 1, HAK_PROFILE_LEAN = 2 };
enum { HAK_STATS_OFF = 0, HAK_STATS_TEXT = 1, HAK_STATS_JSON = 2 };
/* HAKMEM_THP: system leaves segments to the kernel's own setting; dense
 * advises only segments reserved for small-class pages (os/hugepage.c). */
enum { HAK_THP_SYSTEM = 0, HAK_THP_NEVER = 1, HAK_THP_AUTO = 2, HAK_THP_ALWAYS = 3, HAK_THP_DENSE = 4 };

typedef struct hak_config {
  int      profile;        /* HAKMEM_PROFILE=speed|balanced|lean */
  int      stats_at_exit;  /* HAKMEM_STATS: HAK_STATS_OFF, _TEXT or _JSON report at exit */
  int      verbose;        /* HAKMEM_VERBOSE: print the effective options at start-up */
  int      thp;            /* HAKMEM_THP: HAK_THP_* */
  int      huge_pages;     /* HAKMEM_HUGE_PAGES: segments on explicit 2 MiB pages */
  uint32_t tcache_bytes;   /* HAKMEM_TCACHE_BYTES: bytes one class cache aims to hold */
  uint32_t tcache_max;     /* HAKMEM_TCACHE_MAX: most blocks one class cache holds */
  size_t   tcache_budget;  /* HAKMEM_TCACHE_BUDGET: bytes all class caches of a thread hold together */
  bool     tcache_learn;   /* HAKMEM_TCACHE_LEARN: periodic step that shrinks idle class caches */
  uint32_t segment_cache;  /* HAKMEM_SEGMENT_CACHE: empty segments kept mapped */
  size_t   dirty_max;      /* HAKMEM_DIRTY_MAX: free but resident bytes kept before purging */
  uint32_t purge_delay_ms; /* HAKMEM_PURGE_DELAY_MS: how long freed memory stays resident */
  size_t   huge_cache;     /* HAKMEM_HUGE_CACHE: bytes of freed huge mappings kept for reuse */
  int      background_purge; /* HAKMEM_BACKGROUND_PURGE: a thread returns idle memory on time */
  bool     zero_on_free;   /* HAKMEM_ZERO_ON_FREE: wipe freed blocks, check them at reuse (caches off) */
  bool     fault_handler;  /* HAKMEM_FAULT_HANDLER: secure build names faults in its guard pages */
  bool     loaded;         /* config_load has run: the fields above are the environment's */
  /* Derived: per-class cache capacity, the snapshot a thread reads at each
   * refill (hak_option_set may lower it at run time) ... */
  uint16_t tcache_cap[HAK_NCLASSES + 1];
  /* ... and the slots a heap reserves per class, fixed at start-up: a cache
   * may shrink below and grow back up to this, never beyond. */
  uint16_t tcache_slots[HAK_NCLASSES + 1];
  /* ... and a class cache's capacity in a new thread (heap/tcache.c grows it
   * from there, up to tcache_cap). */
  uint16_t tcache_start[HAK_NCLASSES + 1];
} hak_config_t;

extern hak_config_t hak_config HAK_HIDDEN;

/* Reads the environment (once, at start-up). */
void config_load(void) HAK_HIDDEN;
/* Per-class capacities for these cache settings into caps[]. */
void config_derive_caps(uint32_t tcache_bytes, uint32_t tcache_max, uint16_t *caps) HAK_HIDDEN;

/* policy/options.c: the option table behind config_load and hak_option_*. */
void options_load(hak_config_t *c) HAK_HIDDEN;       /* environment -> c, warnings on stderr */
void options_print(int fd) HAK_HIDDEN;               /* the effective options, one per line */
int  option_get(const char *name, long long *value) HAK_HIDDEN;
int  option_set(const char *name, long long value) HAK_HIDDEN;

#endif
