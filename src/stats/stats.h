/* stats.h — event and per-class counters. Every counter sits on a cold path
 * (refill, flush, OS calls ...) except the observe-only fast-path hit counts;
 * the fast build compiles all of them out. */
#ifndef HAK_STATS_H
#define HAK_STATS_H

#include "hak_internal.h"

enum hak_stat_event {
  HAK_EV_MMAP, HAK_EV_MUNMAP, HAK_EV_MADVISE, HAK_EV_MREMAP,
  HAK_EV_SEGMENT_MAP, HAK_EV_SEGMENT_UNMAP, HAK_EV_SEGMENT_REUSE,
  HAK_EV_PAGE_ALLOC, HAK_EV_PAGE_RETIRE, HAK_EV_PURGE_BYTES,
  HAK_EV_REFILL, HAK_EV_FLUSH, HAK_EV_REMOTE_FREE, HAK_EV_REMOTE_BATCH,
  HAK_EV_REMOTE_COLLECT, HAK_EV_ABANDON, HAK_EV_ADOPT,
  HAK_EV_LARGE_ALLOC, HAK_EV_LARGE_FREE, HAK_EV_HUGE_ALLOC, HAK_EV_HUGE_FREE,
  HAK_EV_FOREIGN_FREE, HAK_EV_FOREIGN_REALLOC, HAK_EV_FOREIGN_SIZE,
  HAK_EV_THREAD_INIT, HAK_EV_THREAD_EXIT, HAK_EV_SHARED_ALLOC,
  HAK_EV__COUNT
};

enum hak_class_stat { HAK_CS_REFILL, HAK_CS_FLUSH, HAK_CS_ALLOC_FAST, HAK_CS_FREE_FAST, HAK_CS__COUNT };

typedef struct hak_stats {
  _Atomic(uint64_t) ev[HAK_EV__COUNT];
  _Atomic(uint64_t) cls[HAK_NCLASSES][HAK_CS__COUNT];
} hak_stats_t;

extern hak_stats_t hak_stats HAK_HIDDEN;
/* Bytes currently mapped from the OS, and the peak; kept in every build
 * because mallinfo2() and the purge policy read them. */
extern _Atomic(size_t) hak_mapped_bytes HAK_HIDDEN;
extern _Atomic(size_t) hak_mapped_peak HAK_HIDDEN;

#if HAK_STATS
#define HAK_STAT_ADD(e, n) atomic_fetch_add_explicit(&hak_stats.ev[(e)], (uint64_t)(n), memory_order_relaxed)
#define HAK_CSTAT_INC(c, e) atomic_fetch_add_explicit(&hak_stats.cls[(c)][(e)], 1, memory_order_relaxed)
#else
#define HAK_STAT_ADD(e, n) ((void)0)
#define HAK_CSTAT_INC(c, e) ((void)0)
#endif
#define HAK_STAT_INC(e) HAK_STAT_ADD(e, 1)

#if HAK_OBSERVE
#define HAK_OBSERVE_INC(c, e) HAK_CSTAT_INC(c, e)
#else
#define HAK_OBSERVE_INC(c, e) ((void)0)
#endif

void stats_print(int fd) HAK_HIDDEN;

#endif
