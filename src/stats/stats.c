/* stats.c — the counters' storage, and the one place they are read:
 * stats_gather() fills the public hak_stats_t, from which hak_stats_get,
 * hak_stats_json, malloc_info, mallinfo2 and both exit reports
 * (HAKMEM_STATS=1 text, =json) are all made, so they cannot disagree.
 *
 * Nothing here allocates: figures of the process come from /proc through
 * read(2) into stack buffers, text goes out through write(2). Reading the
 * counters takes no lock (relaxed loads: a report taken while other threads
 * run is a consistent-enough snapshot, each counter exact on its own). A
 * counter is hak_stats's plus every heap's (stats.h, hak_stat_mine): heaps
 * are never unmapped, and their list is only pushed to.
 * hak_stats_reset does not clear counters that other threads are adding to;
 * it records a baseline that later reads subtract. */
#include "stats/stats.h"
#include "heap/heap.h"
#include "heap/size_class.h"
#include "large/large.h"
#include "os/lock.h"
#include "policy/config.h"
#include "segment/segment.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

hak_counters_t hak_stats;
#if HAK_STATS
__thread hak_counters_t *hak_stat_mine;
#endif
static hak_counters_t baseline; /* the counters at the last hak_stats_reset */

#define PUB(f) (unsigned short)offsetof(hak_stats_t, f)

/* Every scalar of hak_stats_t: its group, name and the build groups that
 * fill it. JSON, the text report and the docs follow this order. */
const stats_field_t stats_fields[] = {
  {"memory", "mapped", PUB(memory.mapped), HAK_STATS_HAVE_MEMORY},
  {"memory", "mapped_peak", PUB(memory.mapped_peak), HAK_STATS_HAVE_MEMORY},
  {"memory", "committed", PUB(memory.committed), HAK_STATS_HAVE_MEMORY},
  {"memory", "in_use", PUB(memory.in_use), HAK_STATS_HAVE_MEMORY},
  {"memory", "free_slices", PUB(memory.free_slices), HAK_STATS_HAVE_MEMORY},
  {"memory", "free_resident", PUB(memory.free_resident), HAK_STATS_HAVE_MEMORY},
  {"memory", "huge_blocks", PUB(memory.huge_blocks), HAK_STATS_HAVE_MEMORY},
  {"memory", "huge_bytes", PUB(memory.huge_bytes), HAK_STATS_HAVE_MEMORY},
  {"memory", "process_resident", PUB(memory.process_resident), HAK_STATS_HAVE_MEMORY},
  {"memory", "process_resident_peak", PUB(memory.process_resident_peak), HAK_STATS_HAVE_MEMORY},
  {"blocks", "small_allocated", PUB(blocks.small_allocated), HAK_STATS_HAVE_EVENTS},
  {"blocks", "small_freed", PUB(blocks.small_freed), HAK_STATS_HAVE_EVENTS},
  {"blocks", "small_live", PUB(blocks.small_live), HAK_STATS_HAVE_EVENTS},
  {"blocks", "small_bytes_allocated", PUB(blocks.small_bytes_allocated), HAK_STATS_HAVE_EVENTS},
  {"blocks", "small_bytes_freed", PUB(blocks.small_bytes_freed), HAK_STATS_HAVE_EVENTS},
  {"blocks", "small_bytes_live", PUB(blocks.small_bytes_live), HAK_STATS_HAVE_EVENTS},
  {"blocks", "large_allocated", PUB(blocks.large_allocated), HAK_STATS_HAVE_EVENTS},
  {"blocks", "large_freed", PUB(blocks.large_freed), HAK_STATS_HAVE_EVENTS},
  {"blocks", "huge_allocated", PUB(blocks.huge_allocated), HAK_STATS_HAVE_EVENTS},
  {"blocks", "huge_freed", PUB(blocks.huge_freed), HAK_STATS_HAVE_EVENTS},
  {"os", "mmap", PUB(os.mmap), HAK_STATS_HAVE_OS},
  {"os", "mmap_failed", PUB(os.mmap_failed), HAK_STATS_HAVE_OS},
  {"os", "munmap", PUB(os.munmap), HAK_STATS_HAVE_OS},
  {"os", "munmap_failed", PUB(os.munmap_failed), HAK_STATS_HAVE_OS},
  {"os", "madvise", PUB(os.madvise), HAK_STATS_HAVE_OS},
  {"os", "madvise_failed", PUB(os.madvise_failed), HAK_STATS_HAVE_OS},
  {"os", "mremap", PUB(os.mremap), HAK_STATS_HAVE_OS},
  {"os", "mremap_failed", PUB(os.mremap_failed), HAK_STATS_HAVE_OS},
  {"os", "name", PUB(os.name), HAK_STATS_HAVE_OS},
  {"os", "name_failed", PUB(os.name_failed), HAK_STATS_HAVE_OS},
  {"os", "thp_advise", PUB(os.thp_advise), HAK_STATS_HAVE_OS},
  {"os", "hugetlb", PUB(os.hugetlb), HAK_STATS_HAVE_OS},
  {"os", "hugetlb_fallback", PUB(os.hugetlb_fallback), HAK_STATS_HAVE_OS},
  {"events", "segment_map", PUB(events.segment_map), HAK_STATS_HAVE_EVENTS},
  {"events", "segment_unmap", PUB(events.segment_unmap), HAK_STATS_HAVE_EVENTS},
  {"events", "segment_reuse", PUB(events.segment_reuse), HAK_STATS_HAVE_EVENTS},
  {"events", "page_alloc", PUB(events.page_alloc), HAK_STATS_HAVE_EVENTS},
  {"events", "page_retire", PUB(events.page_retire), HAK_STATS_HAVE_EVENTS},
  {"events", "purge_bytes", PUB(events.purge_bytes), HAK_STATS_HAVE_EVENTS},
  {"events", "refill", PUB(events.refill), HAK_STATS_HAVE_EVENTS},
  {"events", "flush", PUB(events.flush), HAK_STATS_HAVE_EVENTS},
  {"events", "remote_free_blocks", PUB(events.remote_free_blocks), HAK_STATS_HAVE_EVENTS},
  {"events", "remote_free_batches", PUB(events.remote_free_batches), HAK_STATS_HAVE_EVENTS},
  {"events", "remote_collect", PUB(events.remote_collect), HAK_STATS_HAVE_EVENTS},
  {"events", "page_abandon", PUB(events.page_abandon), HAK_STATS_HAVE_EVENTS},
  {"events", "page_adopt", PUB(events.page_adopt), HAK_STATS_HAVE_EVENTS},
  {"events", "foreign_free", PUB(events.foreign_free), HAK_STATS_HAVE_EVENTS},
  {"events", "foreign_realloc", PUB(events.foreign_realloc), HAK_STATS_HAVE_EVENTS},
  {"events", "foreign_usable_size", PUB(events.foreign_usable_size), HAK_STATS_HAVE_EVENTS},
  {"events", "thread_init", PUB(events.thread_init), HAK_STATS_HAVE_EVENTS},
  {"events", "thread_exit", PUB(events.thread_exit), HAK_STATS_HAVE_EVENTS},
  {"events", "shared_heap_alloc", PUB(events.shared_heap_alloc), HAK_STATS_HAVE_EVENTS},
};
const unsigned stats_nfields = sizeof stats_fields / sizeof stats_fields[0];

/* Where each internal event lands in hak_stats_t. A new event without a
 * place here fails the assertion below. */
static const unsigned short event_field[] = {
  [HAK_EV_MMAP] = PUB(os.mmap), [HAK_EV_MUNMAP] = PUB(os.munmap),
  [HAK_EV_MADVISE] = PUB(os.madvise), [HAK_EV_MREMAP] = PUB(os.mremap),
  [HAK_EV_SEGMENT_MAP] = PUB(events.segment_map), [HAK_EV_SEGMENT_UNMAP] = PUB(events.segment_unmap),
  [HAK_EV_SEGMENT_REUSE] = PUB(events.segment_reuse), [HAK_EV_PAGE_ALLOC] = PUB(events.page_alloc),
  [HAK_EV_PAGE_RETIRE] = PUB(events.page_retire), [HAK_EV_PURGE_BYTES] = PUB(events.purge_bytes),
  [HAK_EV_REMOTE_FREE] = PUB(events.remote_free_blocks), [HAK_EV_REMOTE_BATCH] = PUB(events.remote_free_batches),
  [HAK_EV_REMOTE_COLLECT] = PUB(events.remote_collect), [HAK_EV_ABANDON] = PUB(events.page_abandon),
  [HAK_EV_ADOPT] = PUB(events.page_adopt),
  [HAK_EV_LARGE_ALLOC] = PUB(blocks.large_allocated), [HAK_EV_LARGE_FREE] = PUB(blocks.large_freed),
  [HAK_EV_HUGE_ALLOC] = PUB(blocks.huge_allocated), [HAK_EV_HUGE_FREE] = PUB(blocks.huge_freed),
  [HAK_EV_FOREIGN_FREE] = PUB(events.foreign_free), [HAK_EV_FOREIGN_REALLOC] = PUB(events.foreign_realloc),
  [HAK_EV_FOREIGN_SIZE] = PUB(events.foreign_usable_size), [HAK_EV_THREAD_INIT] = PUB(events.thread_init),
  [HAK_EV_THREAD_EXIT] = PUB(events.thread_exit), [HAK_EV_SHARED_ALLOC] = PUB(events.shared_heap_alloc),
  [HAK_EV_MMAP_FAIL] = PUB(os.mmap_failed), [HAK_EV_MUNMAP_FAIL] = PUB(os.munmap_failed),
  [HAK_EV_MADVISE_FAIL] = PUB(os.madvise_failed), [HAK_EV_MREMAP_FAIL] = PUB(os.mremap_failed),
  [HAK_EV_NAME] = PUB(os.name), [HAK_EV_NAME_FAIL] = PUB(os.name_failed),
  [HAK_EV_THP_ADVISE] = PUB(os.thp_advise), [HAK_EV_HUGETLB] = PUB(os.hugetlb),
  [HAK_EV_HUGETLB_FALLBACK] = PUB(os.hugetlb_fallback),
};
_Static_assert(sizeof event_field / sizeof event_field[0] == HAK_EV__COUNT, "every event has a field in hak_stats_t");
_Static_assert(HAK_STATS_CLASSES == HAK_NCLASSES, "one row per size class");

static bool event_is_os(unsigned e) {
  return event_field[e] >= PUB(os) && event_field[e] < PUB(os) + sizeof(((hak_stats_t *)0)->os);
}

/* ---- the process's figures from /proc, without stdio --------------------- */

static size_t read_file(const char *path, char *buf, size_t len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  size_t n = 0;
  ssize_t r;
  while (n + 1 < len && (r = read(fd, buf + n, len - 1 - n)) > 0) n += (size_t)r;
  close(fd);
  buf[n] = 0;
  return n;
}

static uint64_t status_kb(const char *text, const char *key) {
  const char *p = strstr(text, key);
  if (!p) return 0;
  p += strlen(key);
  while (*p == ' ' || *p == '\t') p++;
  uint64_t v = 0;
  while (*p >= '0' && *p <= '9') v = v * 10 + (uint64_t)(*p++ - '0');
  return v;
}

/* ---- gathering -------------------------------------------------------------- */

HAK_INLINE uint64_t load(const _Atomic(uint64_t) *c) { return atomic_load_explicit(c, memory_order_relaxed); }
HAK_INLINE uint64_t *field_at(hak_stats_t *st, unsigned off) { return (uint64_t *)((uint8_t *)st + off); }

/* n counters from offset off of hak_counters_t, summed over hak_stats and
 * every heap's own (stats.h, hak_stat_mine), into out. */
static void counters_total(size_t off, unsigned n, uint64_t *out) {
  const _Atomic(uint64_t) *g = (const _Atomic(uint64_t) *)((const char *)&hak_stats + off);
  for (unsigned i = 0; i < n; i++) out[i] = load(&g[i]);
#if HAK_STATS
  for (const hak_heap_t *h = heap_all_first(); h; h = h->all_next) {
    const _Atomic(uint64_t) *c = (const _Atomic(uint64_t) *)((const char *)&h->stats + off);
    for (unsigned i = 0; i < n; i++) out[i] += load(&c[i]);
  }
#endif
}

void stats_gather(hak_stats_t *st, bool process) {
  memset(st, 0, sizeof *st);
  st->version = HAK_STATS_VERSION;
  st->size = sizeof *st;
  st->build = HAK_OBSERVE ? 2 : HAK_STATS ? 1 : 0;
  st->valid = HAK_STATS_HAVE_MEMORY | HAK_STATS_HAVE_OS | (HAK_STATS ? HAK_STATS_HAVE_EVENTS : 0) |
              (HAK_OBSERVE ? HAK_STATS_HAVE_HITS : 0);

  size_t mapped = atomic_load_explicit(&hak_mapped_bytes, memory_order_relaxed);
  size_t free_bytes = segment_free_bytes(), dirty = segment_dirty_bytes(), huge_blocks, huge_bytes;
  large_counts(&huge_blocks, &huge_bytes);
  if (free_bytes > mapped) free_bytes = mapped;
  if (dirty > free_bytes) dirty = free_bytes;
  st->memory.mapped = mapped;
  st->memory.mapped_peak = atomic_load_explicit(&hak_mapped_peak, memory_order_relaxed);
  st->memory.committed = mapped - (free_bytes - dirty);
  st->memory.in_use = mapped - free_bytes;
  st->memory.free_slices = free_bytes;
  st->memory.free_resident = dirty;
  st->memory.huge_blocks = huge_blocks;
  st->memory.huge_bytes = huge_bytes;
  char buf[4096];
  if (process && read_file("/proc/self/status", buf, sizeof buf)) {
    st->memory.process_resident = status_kb(buf, "VmRSS:") << 10;
    st->memory.process_resident_peak = status_kb(buf, "VmHWM:") << 10;
  }

  uint64_t ev[HAK_EV__COUNT];
  counters_total(offsetof(hak_counters_t, ev), HAK_EV__COUNT, ev);
  for (unsigned e = 0; e < HAK_EV__COUNT; e++)
    if (HAK_STATS || event_is_os(e)) *field_at(st, event_field[e]) = ev[e] - load(&baseline.ev[e]);

  for (unsigned k = 0; k < HAK_NCLASSES; k++) {
    hak_stats_class_t *row = &st->classes[k];
    row->block_size = hak_class_size[k];
#if HAK_STATS
    uint64_t c[HAK_CS__COUNT];
    counters_total(offsetof(hak_counters_t, cls[k]), HAK_CS__COUNT, c);
    const _Atomic(uint64_t) *b = baseline.cls[k];
    row->refills = c[HAK_CS_REFILL] - load(&b[HAK_CS_REFILL]);
    row->flushes = c[HAK_CS_FLUSH] - load(&b[HAK_CS_FLUSH]);
    row->blocks_taken = c[HAK_CS_TAKEN] - load(&b[HAK_CS_TAKEN]);
    row->blocks_returned = c[HAK_CS_RETURNED] - load(&b[HAK_CS_RETURNED]);
    row->blocks_live = c[HAK_CS_TAKEN] - c[HAK_CS_RETURNED];
    if ((int64_t)row->blocks_live < 0) row->blocks_live = 0; /* counters read a moment apart */
    row->cache_alloc_hits = c[HAK_CS_ALLOC_FAST] - load(&b[HAK_CS_ALLOC_FAST]);
    row->cache_free_hits = c[HAK_CS_FREE_FAST] - load(&b[HAK_CS_FREE_FAST]);
    st->events.refill += row->refills; /* counted once, per class (heap_take, */
    st->events.flush += row->flushes;  /* heap_return_blocks) */
    st->blocks.small_allocated += row->blocks_taken;
    st->blocks.small_freed += row->blocks_returned;
    st->blocks.small_live += row->blocks_live;
    st->blocks.small_bytes_allocated += row->blocks_taken * row->block_size;
    st->blocks.small_bytes_freed += row->blocks_returned * row->block_size;
    st->blocks.small_bytes_live += row->blocks_live * row->block_size;
#endif
  }
}

void stats_reset(void) {
  uint64_t ev[HAK_EV__COUNT], c[HAK_CS__COUNT];
  counters_total(offsetof(hak_counters_t, ev), HAK_EV__COUNT, ev);
  for (unsigned e = 0; e < HAK_EV__COUNT; e++) atomic_store_explicit(&baseline.ev[e], ev[e], memory_order_relaxed);
  for (unsigned k = 0; k < HAK_NCLASSES; k++) {
    counters_total(offsetof(hak_counters_t, cls[k]), HAK_CS__COUNT, c);
    for (unsigned j = 0; j < HAK_CS__COUNT; j++) atomic_store_explicit(&baseline.cls[k][j], c[j], memory_order_relaxed);
  }
  atomic_store_explicit(&hak_mapped_peak, atomic_load_explicit(&hak_mapped_bytes, memory_order_relaxed),
                        memory_order_relaxed);
  /* "5" resets the process's peak resident size (VmHWM) to its current value. */
  int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t w = write(fd, "5", 1);
    (void)w;
    close(fd);
  }
}

/* ---- the text report ------------------------------------------------------- */

static void put(int fd, const char *s) {
  size_t n = strlen(s);
  while (n) {
    ssize_t w = write(fd, s, n);
    if (w <= 0) return;
    s += w; n -= (size_t)w;
  }
}

_Atomic(uint32_t) hak_cap_max[HAK_NCLASSES];
_Atomic(uint32_t) hak_cap_last[HAK_NCLASSES];

void stats_print_text(int fd) {
  hak_stats_t st;
  stats_gather(&st, true);
  char line[256];
  put(fd, "HAKMEM statistics\n");
  if (!(st.valid & HAK_STATS_HAVE_EVENTS)) put(fd, "  (fast build: event counters compiled out)\n");
  snprintf(line, sizeof line, "  mapped now %llu KiB, peak %llu KiB; resident now %llu KiB, peak %llu KiB\n",
           (unsigned long long)st.memory.mapped >> 10, (unsigned long long)st.memory.mapped_peak >> 10,
           (unsigned long long)st.memory.process_resident >> 10, (unsigned long long)st.memory.process_resident_peak >> 10);
  put(fd, line);
  snprintf(line, sizeof line, "  free slices %llu KiB, of which resident (not yet purged) %llu KiB\n",
           (unsigned long long)st.memory.free_slices >> 10, (unsigned long long)st.memory.free_resident >> 10);
  put(fd, line);
  for (unsigned i = 0; i < stats_nfields; i++) {
    const stats_field_t *f = &stats_fields[i];
    uint64_t v = *field_at(&st, f->offset);
    if (!(st.valid & f->valid) || f->valid == HAK_STATS_HAVE_MEMORY || !v) continue;
    snprintf(line, sizeof line, "  %-22s %llu\n", f->name, (unsigned long long)v);
    put(fd, line);
  }
  if (st.valid & HAK_STATS_HAVE_EVENTS) {
    /* cap_max, cap_last: the class cache sizes heap/tcache.c chose. */
    put(fd, "  class    size      refill       flush        taken     returned         live   alloc_fast    free_fast  cap_max cap_last\n");
    for (int k = 0; k < HAK_NCLASSES; k++) {
      const hak_stats_class_t *r = &st.classes[k];
      if (!(r->refills | r->flushes | r->blocks_taken | r->blocks_returned | r->blocks_live | r->cache_alloc_hits |
            r->cache_free_hits))
        continue;
      snprintf(line, sizeof line, "  %5d %7llu %11llu %11llu %12llu %12llu %12llu %12llu %12llu %8u %8u\n", k,
               (unsigned long long)r->block_size, (unsigned long long)r->refills, (unsigned long long)r->flushes,
               (unsigned long long)r->blocks_taken, (unsigned long long)r->blocks_returned,
               (unsigned long long)r->blocks_live, (unsigned long long)r->cache_alloc_hits,
               (unsigned long long)r->cache_free_hits,
               atomic_load_explicit(&hak_cap_max[k], memory_order_relaxed),
               atomic_load_explicit(&hak_cap_last[k], memory_order_relaxed));
      put(fd, line);
    }
  }
#if HAK_OBSERVE
  /* Process-wide lock acquisitions, one `lock <name> <count>` line each
   * (a fixed form that scripts parse; a lock never taken is not listed),
   * after a `locks counted` line that says this build counts them (so that
   * a run that took none is told from a build that does not count). */
  put(fd, "locks counted\n");
  for (hak_lock_t *l = atomic_load_explicit(&hak_lock_list, memory_order_acquire); l; l = l->list_next) {
    snprintf(line, sizeof line, "lock %s %llu\n", l->name ? l->name : "unnamed",
             (unsigned long long)atomic_load_explicit(&l->acquisitions, memory_order_relaxed));
    put(fd, line);
  }
#endif
}

void stats_print(int fd) {
  if (hak_config.stats_at_exit == HAK_STATS_JSON) stats_print_json(fd);
  else stats_print_text(fd);
}
