/* options.c — every HAKMEM option, defined once in the table below: its
 * environment variable, its default in each profile, its range and unit,
 * whether it may change while the program runs, and what it means. From the
 * table come the start-up parsing (with one warning line per malformed or
 * out-of-range value), HAKMEM_VERBOSE's listing, and hak_option_get/set.
 * docs/options.md and the README's table list the same options; a test
 * (tests/test_options_doc.py) checks them against HAKMEM_VERBOSE's listing.
 *
 * Run-time changes are plain stores of one field, read by cold paths only
 * (page retire, purge sweeps, huge-cache decisions, cache refills); a refill
 * that reads a cache capacity while it changes sees the old or the new
 * value, both valid. Caches may shrink at run time and grow back up to their
 * start-up size (a heap's slots are reserved then), not beyond.
 *
 * set_lock (process-wide) serialises hak_option_set and nothing else: no
 * allocation path takes it. Under it one field is stored, or for the cache
 * sizes the caps of every class are derived and stored (one pass over the
 * classes): bounded, no system call. A holder preempted delays only another
 * hak_option_set. */
#include "policy/config.h"
#include "os/lock.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

enum opt_kind { OPT_SIZE, OPT_COUNT, OPT_ENUM, OPT_FLAG };

typedef struct option_def {
  const char *env;            /* environment variable */
  unsigned char kind;         /* enum opt_kind */
  bool runtime;               /* hak_option_set may change it */
  long long def[3];           /* default per profile: speed, balanced, lean */
  long long lo, hi;           /* accepted range (values outside are clamped, with a warning) */
  const char *unit;           /* bytes, ms, blocks, segments, or the choices of an enum */
  const char *const *choices; /* OPT_ENUM: names by value */
  size_t offset, width;       /* field of hak_config_t */
  const char *desc;
} option_def_t;

#define FIELD(f) offsetof(hak_config_t, f), sizeof(((hak_config_t *)0)->f)
#define KiB(x) ((long long)(x) << 10)
#define MiB(x) ((long long)(x) << 20)

static const char *const profile_names[] = {"speed", "balanced", "lean", NULL};
static const char *const stats_names[] = {"off", "text", "json", NULL};
static const char *const thp_names[] = {"system", "never", "auto", "always", "dense", NULL};

static const option_def_t options[] = {
  {"HAKMEM_PROFILE", OPT_ENUM, false, {0, 0, 0}, 0, 2, "speed|balanced|lean", profile_names, FIELD(profile),
   "preset of the other defaults: speed, balanced or lean (smaller caches, memory returned sooner)"},
  {"HAKMEM_STATS", OPT_ENUM, true, {0, 0, 0}, 0, 2, "off|text|json", stats_names, FIELD(stats_at_exit),
   "report at exit on stderr: 1 (or text) the counters as text, json the hak_stats_json document"},
  {"HAKMEM_VERBOSE", OPT_COUNT, false, {0, 0, 0}, 0, 2, "level", NULL, FIELD(verbose),
   "1: print the effective value of every option on stderr at start-up; 2: with what each one means"},
  {"HAKMEM_TCACHE_BYTES", OPT_SIZE, true, {KiB(128), KiB(16), KiB(4)}, 0, MiB(16), "bytes", NULL, FIELD(tcache_bytes),
   "bytes one per-thread size-class cache aims to hold; at run time only up to the start-up value"},
  {"HAKMEM_TCACHE_MAX", OPT_COUNT, true, {128, 96, 32}, 0, 1024, "blocks", NULL, FIELD(tcache_max),
   "most blocks one class cache holds (0 disables the caches); at run time only up to the start-up value"},
  {"HAKMEM_TCACHE_BUDGET", OPT_SIZE, true, {MiB(32), MiB(2), KiB(256)}, 0, (long long)1 << 30, "bytes", NULL, FIELD(tcache_budget),
   "bytes all class caches of one thread hold together, at most (lowered at run time, caches shrink at their next refill or flush)"},
  {"HAKMEM_TCACHE_LEARN", OPT_FLAG, true, {0, 0, 0}, 0, 1, "0|1", NULL, FIELD(tcache_learn),
   "1: the periodic step on each thread's cold path, which always shrinks the caches of classes the thread stopped using, also grows those of classes that refill often"},
  {"HAKMEM_SEGMENT_CACHE", OPT_COUNT, true, {16, 8, 0}, 0, 1024, "segments", NULL, FIELD(segment_cache),
   "empty 2 MiB segments kept mapped for reuse (their memory is still purged on the dirty policy)"},
  {"HAKMEM_DIRTY_MAX", OPT_SIZE, true, {MiB(8), MiB(4), MiB(1)}, 0, (long long)1 << 40, "bytes", NULL, FIELD(dirty_max),
   "freed but still resident memory kept before purging (madvise); in the speed profile at least a quarter of the recent peak of memory in pages"},
  {"HAKMEM_PURGE_DELAY_MS", OPT_COUNT, true, {100, 50, 10}, 0, 60000, "ms", NULL, FIELD(purge_delay_ms),
   "how long freed memory stays resident before it may be purged"},
  {"HAKMEM_HUGE_CACHE", OPT_SIZE, true, {MiB(64), MiB(16), 0}, 0, (long long)1 << 40, "bytes", NULL, FIELD(huge_cache),
   "floor of the bytes of freed huge mappings (blocks above 960 KiB) kept mapped for reuse: the cache follows demand up to twice the recent peak of live huge bytes, at most 16x this; 0: none; purged after the purge delay"},
  {"HAKMEM_THP", OPT_ENUM, false, {0, 0, 0}, 0, 4, "system|never|auto|always|dense", thp_names, FIELD(thp),
   "transparent huge pages for segments: system (kernel setting), never (MADV_NOHUGEPAGE), auto (MADV_HUGEPAGE once a segment is 3/4 in use), always (MADV_HUGEPAGE on every segment), dense (MADV_HUGEPAGE, before their first write, on segments kept for pages of blocks up to 8 KiB, once the program holds 12 MiB of such pages that fill; the others get no advice)"},
  {"HAKMEM_HUGE_PAGES", OPT_FLAG, false, {0, 0, 0}, 0, 1, "0|1", NULL, FIELD(huge_pages),
   "1: map segments on explicit 2 MiB pages (MAP_HUGETLB), falling back silently to normal pages"},
  {"HAKMEM_BACKGROUND_PURGE", OPT_FLAG, false, {0, 1, 1}, 0, 1, "0|1", NULL, FIELD(background_purge),
   "1: a background thread returns memory idle for the purge delay even if the program makes no further call "
   "(it sleeps while nothing is pending; a forked child starts its own); 0: the first slow path after the delay "
   "does it. Keep 0 in programs that must stay single-threaded"},
  {"HAKMEM_ZERO_ON_FREE", OPT_FLAG, false, {0, 0, 0}, 0, 1, "0|1", NULL, FIELD(zero_on_free),
   "1: free wipes a small block and malloc checks it is still wiped when it hands it out again, reporting a "
   "write after free (the secure build aborts); turns the thread caches off, so every call takes the slow path"},
  {"HAKMEM_FAULT_HANDLER", OPT_FLAG, false, {1, 1, 1}, 0, 1, "0|1", NULL, FIELD(fault_handler),
   "secure build: 1 installs a SIGSEGV/SIGBUS handler at start-up that names a fault in a guard page or a "
   "zero-size block (one line, then abort) and passes every other fault on to the handler it replaced; "
   "0: none (such faults end the process with a plain SIGSEGV). Other builds: no effect"},
};
#define NOPTIONS (sizeof options / sizeof options[0])

static hak_lock_t set_lock = HAK_LOCK_NAMED("options");

/* ---- values in and out of hak_config_t ---------------------------------- */

static long long field_get(const hak_config_t *c, const option_def_t *o) {
  const uint8_t *f = (const uint8_t *)c + o->offset;
  switch (o->width) {
    case 1: return *(const uint8_t *)f;
    case 2: return *(const uint16_t *)f;
    case 4: return *(const uint32_t *)f; /* int fields hold values >= 0 */
    default: return (long long)*(const uint64_t *)f;
  }
}

/* Relaxed atomic stores: cold paths read these fields without a lock. */
static void field_set(hak_config_t *c, const option_def_t *o, long long v) {
  uint8_t *f = (uint8_t *)c + o->offset;
  switch (o->width) {
    case 1: __atomic_store_n((uint8_t *)f, (uint8_t)v, __ATOMIC_RELAXED); break;
    case 2: __atomic_store_n((uint16_t *)f, (uint16_t)v, __ATOMIC_RELAXED); break;
    case 4: __atomic_store_n((uint32_t *)f, (uint32_t)v, __ATOMIC_RELAXED); break;
    default: __atomic_store_n((uint64_t *)f, (uint64_t)v, __ATOMIC_RELAXED); break;
  }
}

/* ---- writing without malloc or stdio streams ------------------------------ */

static void put(int fd, const char *s) {
  size_t n = strlen(s);
  while (n) {
    ssize_t w = write(fd, s, n);
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

/* "8M", "32K", "1000" for sizes; the choice's name for enums. */
static void format_value(const option_def_t *o, long long v, char *buf, size_t len) {
  if (o->kind == OPT_ENUM && v >= 0 && v <= o->hi) {
    snprintf(buf, len, "%s", o->choices[v]);
  } else if (o->kind == OPT_SIZE && v != 0 && (v & ((1LL << 30) - 1)) == 0) {
    snprintf(buf, len, "%lldG", v >> 30);
  } else if (o->kind == OPT_SIZE && v != 0 && (v & ((1LL << 20) - 1)) == 0) {
    snprintf(buf, len, "%lldM", v >> 20);
  } else if (o->kind == OPT_SIZE && v != 0 && (v & ((1LL << 10) - 1)) == 0) {
    snprintf(buf, len, "%lldK", v >> 10);
  } else {
    snprintf(buf, len, "%lld", v);
  }
}

static void warn(const option_def_t *o, const char *value, const char *why, long long used) {
  char v[32], line[320];
  format_value(o, used, v, sizeof v);
  snprintf(line, sizeof line, "hakmem: %s=%.40s %s; using %s\n", o->env, value, why, v);
  put(STDERR_FILENO, line);
}

/* ---- parsing --------------------------------------------------------------- */

/* "123", "64k", "8M", "1g" (optionally followed by b/B); false on anything else. */
static bool parse_number(const char *s, bool suffixes, long long *out) {
  if (!s || !*s) return false;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s || *s == '-' || errno == ERANGE) return false;
  unsigned shift = 0;
  if (suffixes) {
    switch (*end) {
      case 'k': case 'K': shift = 10; end++; break;
      case 'm': case 'M': shift = 20; end++; break;
      case 'g': case 'G': shift = 30; end++; break;
      default: break;
    }
    if (*end == 'b' || *end == 'B') end++;
  }
  if (*end) return false;
  if (v > (unsigned long long)LLONG_MAX >> shift) v = (unsigned long long)LLONG_MAX >> shift;
  *out = (long long)(v << shift);
  return true;
}

static bool parse_choice(const option_def_t *o, const char *s, long long *out) {
  if (!s || !*s) return false;
  static const char *const off[] = {"0", "no", "off", "false"}, *const on[] = {"1", "yes", "on", "true"};
  if (o->kind == OPT_ENUM)
    for (long long i = 0; o->choices[i]; i++)
      if (strcasecmp(s, o->choices[i]) == 0) { *out = i; return true; }
  /* Flags, and the off/on spellings of HAKMEM_STATS (1 = text). */
  if (o->kind == OPT_FLAG || o->choices == stats_names) {
    for (int i = 0; i < 4; i++) {
      if (strcasecmp(s, off[i]) == 0) { *out = 0; return true; }
      if (strcasecmp(s, on[i]) == 0) { *out = 1; return true; }
    }
  }
  return false;
}

static const char *expected_form(const option_def_t *o) {
  switch (o->kind) {
    case OPT_SIZE: return "is not a size (a number with an optional k, M or G suffix)";
    case OPT_COUNT: return "is not a number";
    case OPT_FLAG: return "is not 0 or 1";
    default: return "is not one of the choices";
  }
}

static void load_one(hak_config_t *c, const option_def_t *o, int profile) {
  long long def = o->def[profile], v;
  const char *s = getenv(o->env);
  if (!s) {
    field_set(c, o, def);
    return;
  }
  bool ok = o->kind == OPT_SIZE || o->kind == OPT_COUNT ? parse_number(s, o->kind == OPT_SIZE, &v)
                                                         : parse_choice(o, s, &v);
  if (!ok) {
    char why[96];
    if (o->kind == OPT_ENUM) snprintf(why, sizeof why, "is not one of %s", o->unit);
    else snprintf(why, sizeof why, "%s", expected_form(o));
    warn(o, s, why, def);
    v = def;
  } else if (v < o->lo || v > o->hi) {
    long long clamped = v < o->lo ? o->lo : o->hi;
    char why[96], bound[32];
    format_value(o, clamped, bound, sizeof bound);
    snprintf(why, sizeof why, "is out of range (%s %s)", v < o->lo ? "at least" : "at most", bound);
    warn(o, s, why, clamped);
    v = clamped;
  }
  field_set(c, o, v);
}

void options_load(hak_config_t *c) {
  /* The profile first: it sets every other default. */
  load_one(c, &options[0], 0);
  int profile = c->profile;
  for (size_t i = 1; i < NOPTIONS; i++) load_one(c, &options[i], profile);
}

/* ---- listing ---------------------------------------------------------------- */

void options_print(int fd) {
  char line[512], val[32], def[32], lo[32], hi[32];
  snprintf(line, sizeof line, "hakmem: %u options (profile %s; * = settable at run time):\n", (unsigned)NOPTIONS,
           profile_names[hak_config.profile]);
  put(fd, line);
  for (size_t i = 0; i < NOPTIONS; i++) {
    const option_def_t *o = &options[i];
    format_value(o, field_get(&hak_config, o), val, sizeof val);
    format_value(o, o->def[hak_config.profile], def, sizeof def);
    format_value(o, o->lo, lo, sizeof lo);
    format_value(o, o->hi, hi, sizeof hi);
    if (o->kind == OPT_ENUM || o->kind == OPT_FLAG)
      snprintf(line, sizeof line, "hakmem:   %-22s %-8s %s default %s, %s\n", o->env, val, o->runtime ? "*" : " ",
               def, o->unit);
    else
      snprintf(line, sizeof line, "hakmem:   %-22s %-8s %s default %s, %s..%s %s\n", o->env, val,
               o->runtime ? "*" : " ", def, lo, hi, o->unit);
    put(fd, line);
    if (hak_config.verbose >= 2) {
      snprintf(line, sizeof line, "hakmem:       %s\n", o->desc);
      put(fd, line);
    }
  }
}

/* ---- hak_option_get / hak_option_set ---------------------------------------- */

/* "HAKMEM_DIRTY_MAX", "dirty_max", any case. */
static const option_def_t *find(const char *name) {
  if (!name) return NULL;
  if (strncasecmp(name, "HAKMEM_", 7) == 0) name += 7;
  for (size_t i = 0; i < NOPTIONS; i++)
    if (strcasecmp(name, options[i].env + 7) == 0) return &options[i];
  return NULL;
}

int option_get(const char *name, long long *value) {
  const option_def_t *o = find(name);
  if (!o) return ENOENT;
  if (!value) return EINVAL;
  *value = field_get(&hak_config, o);
  return 0;
}

/* Cache sizes: a new per-class capacity table, refused if any class would
 * need more slots than its heap reserved at start-up. */
static int set_cache(const option_def_t *o, long long v) {
  uint32_t bytes = hak_config.tcache_bytes, max = hak_config.tcache_max;
  if (o->offset == offsetof(hak_config_t, tcache_bytes)) bytes = (uint32_t)v;
  else max = (uint32_t)v;
  uint16_t caps[HAK_NCLASSES + 1];
  config_derive_caps(bytes, max, caps);
  for (unsigned k = 0; k < HAK_NCLASSES; k++)
    if (caps[k] > hak_config.tcache_slots[k]) return ERANGE;
  field_set(&hak_config, o, v);
  for (unsigned k = 0; k < HAK_NCLASSES; k++) __atomic_store_n(&hak_config.tcache_cap[k], caps[k], __ATOMIC_RELAXED);
  return 0;
}

int option_set(const char *name, long long value) {
  const option_def_t *o = find(name);
  if (!o) return ENOENT;
  if (!o->runtime) return EPERM;
  if (value < o->lo || value > o->hi) return ERANGE;
  int rc = 0;
  hak_lock(&set_lock);
  if (o->offset == offsetof(hak_config_t, tcache_bytes) || o->offset == offsetof(hak_config_t, tcache_max))
    rc = set_cache(o, value);
  else
    field_set(&hak_config, o, value);
  hak_unlock(&set_lock);
  return rc;
}
