/* stats.c — the counters' storage and their report (HAKMEM_STATS=1 at exit,
 * hak_stats_print() on demand). Printing avoids stdio so it is safe at exit
 * and inside a signal-free allocator path. */
#include "stats/stats.h"
#include "heap/size_class.h"
#include "segment/segment.h"
#include "os/lock.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

hak_stats_t hak_stats;

#if HAK_STATS
static const char *const ev_names[HAK_EV__COUNT] = {
  "mmap", "munmap", "madvise", "mremap",
  "segment_map", "segment_unmap", "segment_reuse",
  "page_alloc", "page_retire", "purge_bytes",
  "refill", "flush", "remote_free_blocks", "remote_free_batches",
  "remote_collect", "page_abandon", "page_adopt",
  "large_alloc", "large_free", "huge_alloc", "huge_free",
  "foreign_free", "foreign_realloc", "foreign_usable_size",
  "thread_init", "thread_exit", "shared_heap_alloc",
};
#endif

static void put(int fd, const char *s) {
  size_t n = strlen(s);
  while (n) {
    ssize_t w = write(fd, s, n);
    if (w <= 0) return;
    s += w; n -= (size_t)w;
  }
}

static size_t proc_status_kb(const char *key) {
  char buf[4096];
  FILE *f = fopen("/proc/self/status", "re");
  if (!f) return 0;
  size_t kb = 0, klen = strlen(key);
  while (fgets(buf, sizeof buf, f))
    if (strncmp(buf, key, klen) == 0) { sscanf(buf + klen, " %zu", &kb); break; }
  fclose(f);
  return kb;
}

void stats_print(int fd) {
  char line[256];
  put(fd, "HAKMEM statistics\n");
#if !HAK_STATS
  put(fd, "  (fast build: event counters compiled out)\n");
#endif
  snprintf(line, sizeof line, "  mapped now %zu KiB, peak %zu KiB; resident now %zu KiB, peak %zu KiB\n",
           atomic_load(&hak_mapped_bytes) >> 10, atomic_load(&hak_mapped_peak) >> 10,
           proc_status_kb("VmRSS:"), proc_status_kb("VmHWM:"));
  put(fd, line);
  snprintf(line, sizeof line, "  free slices %zu KiB, of which resident (not yet purged) %zu KiB\n",
           segment_free_bytes() >> 10, segment_dirty_bytes() >> 10);
  put(fd, line);
#if HAK_STATS
  for (int e = 0; e < HAK_EV__COUNT; e++) {
    uint64_t v = atomic_load_explicit(&hak_stats.ev[e], memory_order_relaxed);
    if (!v) continue;
    snprintf(line, sizeof line, "  %-22s %llu\n", ev_names[e], (unsigned long long)v);
    put(fd, line);
  }
  put(fd, "  class    size      refill       flush   alloc_fast    free_fast\n");
  for (int k = 0; k < HAK_NCLASSES; k++) {
    uint64_t v[HAK_CS__COUNT], any = 0;
    for (int j = 0; j < HAK_CS__COUNT; j++) any |= v[j] = atomic_load_explicit(&hak_stats.cls[k][j], memory_order_relaxed);
    if (!any) continue;
    snprintf(line, sizeof line, "  %5d %7u %11llu %11llu %12llu %12llu\n", k, hak_class_size[k],
             (unsigned long long)v[0], (unsigned long long)v[1], (unsigned long long)v[2], (unsigned long long)v[3]);
    put(fd, line);
  }
#endif
#if HAK_OBSERVE
  /* Process-wide lock acquisitions, one `lock <name> <count>` line each
   * (a fixed form that scripts parse; a lock never taken is not listed). */
  for (hak_lock_t *l = atomic_load_explicit(&hak_lock_list, memory_order_acquire); l; l = l->list_next) {
    snprintf(line, sizeof line, "lock %s %llu\n", l->name ? l->name : "unnamed",
             (unsigned long long)atomic_load_explicit(&l->acquisitions, memory_order_relaxed));
    put(fd, line);
  }
#endif
}
