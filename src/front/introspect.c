/* introspect.c — the public introspection and control calls: options at run
 * time (the table is in policy/options.c), statistics from code (gathered in
 * stats/stats.c) and glibc's malloc_info. They make sure start-up has run,
 * so a program linked with libhakmem.a may call them first thing. */
#include "front/init.h"
#include "policy/config.h"
#include "stats/stats.h"
#include "hakmem.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>

static void ensure_init(void) {
  if (!hak_init_done()) hak_init();
}

HAK_EXPORT int hak_option_get(const char *name, long long *value) {
  ensure_init();
  return option_get(name, value);
}

HAK_EXPORT int hak_option_set(const char *name, long long value) {
  ensure_init();
  return option_set(name, value);
}

/* The caller's struct may be older (smaller) than ours: write only what it
 * has room for, and say how much that was. */
HAK_EXPORT int hak_stats_get(hak_stats_t *st) {
  if (!st || st->size < offsetof(hak_stats_t, memory)) {
    errno = EINVAL;
    return -1;
  }
  ensure_init();
  hak_stats_t all;
  stats_gather(&all, true);
  size_t n = st->size < sizeof all ? st->size : sizeof all;
  all.size = (uint32_t)n;
  memcpy(st, &all, n);
  return 0;
}

HAK_EXPORT size_t hak_stats_json(char *buf, size_t len) {
  ensure_init();
  return stats_json(buf, len);
}

HAK_EXPORT void hak_stats_reset(void) {
  ensure_init();
  stats_reset();
}

/* glibc's XML (malloc/malloc.c, __malloc_info), one heap: segments are the
 * arena, free slices its free memory, huge blocks the mmapped chunks. No
 * per-size free lists exist here (free blocks sit in thread caches and page
 * lists, not counted by size), so <sizes> is empty. */
HAK_EXPORT int malloc_info(int options, FILE *fp) {
  if (options != 0) return EINVAL;
  if (!fp) return EINVAL;
  ensure_init();
  hak_stats_t st;
  stats_gather(&st, false);
  size_t arena = st.memory.mapped - st.memory.huge_bytes, free_count = st.memory.free_slices / HAK_SLICE_SIZE;
  fprintf(fp,
          "<malloc version=\"1\">\n"
          "<heap nr=\"0\">\n<sizes>\n</sizes>\n"
          "<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
          "<total type=\"rest\" count=\"%zu\" size=\"%llu\"/>\n"
          "<system type=\"current\" size=\"%zu\"/>\n"
          "<system type=\"max\" size=\"%llu\"/>\n"
          "<aspace type=\"total\" size=\"%zu\"/>\n"
          "<aspace type=\"mprotect\" size=\"%zu\"/>\n"
          "</heap>\n"
          "<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
          "<total type=\"rest\" count=\"%zu\" size=\"%llu\"/>\n"
          "<total type=\"mmap\" count=\"%llu\" size=\"%llu\"/>\n"
          "<system type=\"current\" size=\"%llu\"/>\n"
          "<system type=\"max\" size=\"%llu\"/>\n"
          "<aspace type=\"total\" size=\"%llu\"/>\n"
          "<aspace type=\"mprotect\" size=\"%llu\"/>\n"
          "</malloc>\n",
          free_count, (unsigned long long)st.memory.free_slices, arena, (unsigned long long)st.memory.mapped_peak,
          arena, arena, free_count, (unsigned long long)st.memory.free_slices,
          (unsigned long long)st.memory.huge_blocks, (unsigned long long)st.memory.huge_bytes,
          (unsigned long long)st.memory.mapped, (unsigned long long)st.memory.mapped_peak,
          (unsigned long long)st.memory.mapped, (unsigned long long)st.memory.mapped);
  return 0;
}
