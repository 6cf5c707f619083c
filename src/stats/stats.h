/* stats.h — event and per-class counters. Every counter sits on a cold path
 * (refill, flush, OS calls ...) except the observe-only fast-path hit counts;
 * the fast build compiles all of them out but the OS calls'. stats.c reads
 * them for hak_stats_get, stats_json.c writes them as JSON and XML. */
#ifndef HAK_STATS_H
#define HAK_STATS_H

#include "hak_internal.h"
#include "hakmem.h"

enum hak_stat_event {
  HAK_EV_MMAP, HAK_EV_MUNMAP, HAK_EV_MADVISE, HAK_EV_MREMAP,
  HAK_EV_SEGMENT_MAP, HAK_EV_SEGMENT_UNMAP, HAK_EV_SEGMENT_REUSE,
  HAK_EV_PAGE_ALLOC, HAK_EV_PAGE_RETIRE, HAK_EV_PURGE_BYTES,
  /* (no REFILL, FLUSH: events.refill and .flush are the classes' sums) */
  HAK_EV_REMOTE_FREE, HAK_EV_REMOTE_BATCH,
  HAK_EV_REMOTE_COLLECT, HAK_EV_ABANDON, HAK_EV_ADOPT,
  HAK_EV_LARGE_ALLOC, HAK_EV_LARGE_FREE, HAK_EV_HUGE_ALLOC, HAK_EV_HUGE_FREE,
  HAK_EV_FOREIGN_FREE, HAK_EV_FOREIGN_REALLOC, HAK_EV_FOREIGN_SIZE,
  HAK_EV_THREAD_INIT, HAK_EV_THREAD_EXIT, HAK_EV_SHARED_ALLOC,
  /* Counted in every build (HAK_OS_STAT_*): system calls are cold. */
  HAK_EV_MMAP_FAIL, HAK_EV_MUNMAP_FAIL, HAK_EV_MADVISE_FAIL, HAK_EV_MREMAP_FAIL,
  HAK_EV_NAME, HAK_EV_NAME_FAIL, HAK_EV_THP_ADVISE, HAK_EV_HUGETLB, HAK_EV_HUGETLB_FALLBACK,
  HAK_EV__COUNT
};

/* TAKEN/RETURNED: blocks leaving and reaching their pages (refill, flush);
 * FLUSH: batches sent back to their pages (heap_return_blocks). */
enum hak_class_stat { HAK_CS_REFILL, HAK_CS_FLUSH, HAK_CS_ALLOC_FAST, HAK_CS_FREE_FAST,
                      HAK_CS_TAKEN, HAK_CS_RETURNED, HAK_CS__COUNT };

typedef struct hak_counters {
  _Atomic(uint64_t) ev[HAK_EV__COUNT];
  _Atomic(uint64_t) cls[HAK_NCLASSES][HAK_CS__COUNT];
} hak_counters_t;

/* The counters added to with atomic additions: OS calls, and the events of
 * a thread without a heap (start-up, after its exit). */
extern hak_counters_t hak_stats HAK_HIDDEN;
/* The calling thread's own counters, in its heap (NULL without one:
 * heap/thread.c sets it with the heap and clears it before the heap goes
 * back to the pool). Only that thread adds to them, so an addition is a
 * plain load and store: the refills, flushes and remote frees of threads
 * that hand blocks to each other all counted into hak_stats, whose lines
 * then bounced between their cores on every cold event (a locked add each,
 * up to three per refill). Heaps are recycled and never unmapped, so a
 * heap's counters outlive its thread: stats.c sums hak_stats and every
 * heap's. */
#if HAK_STATS
#if HAK_DYNAMIC_TLS
extern __thread hak_counters_t *hak_stat_mine HAK_HIDDEN;
#else
extern __thread hak_counters_t *hak_stat_mine HAK_HIDDEN __attribute__((tls_model("initial-exec")));
#endif
#define HAK_STAT_OWN(c) (hak_stat_mine = (c))
#else
#define HAK_STAT_OWN(c) ((void)0)
#endif
/* Bytes currently mapped from the OS, and the peak; kept in every build
 * because mallinfo2() and the purge policy read them. */
extern _Atomic(size_t) hak_mapped_bytes HAK_HIDDEN;
extern _Atomic(size_t) hak_mapped_peak HAK_HIDDEN;

/* Class cache caps heap/tcache.c chose: the largest any thread reached, and
 * the last a thread published (learner step, thread exit). Text report only. */
extern _Atomic(uint32_t) hak_cap_max[HAK_NCLASSES] HAK_HIDDEN;
extern _Atomic(uint32_t) hak_cap_last[HAK_NCLASSES] HAK_HIDDEN;

#if HAK_STATS
#define HAK_STAT_MAX(var, v) do { \
    uint32_t o_ = atomic_load_explicit(&(var), memory_order_relaxed); \
    while (o_ < (uint32_t)(v) && !atomic_compare_exchange_weak_explicit(&(var), &o_, (uint32_t)(v), \
                                                                     memory_order_relaxed, memory_order_relaxed)) {} \
  } while (0)
/* An addition to the counters m (the thread's own, hak_stat_mine, read once
 * by the caller for several additions: HAK_STAT_MINE), or with m NULL an
 * atomic one to hak_stats. */
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
/* An addition to a counter of the thread's own (one writer): one add to
 * memory, which readers see whole (an aligned 8-byte store); the relaxed
 * load and store took a load, an add and a store, and GCC formed the
 * counter's address in a register first (it folds no atomics into an
 * addressing mode): 4 instructions for 1. ThreadSanitizer builds keep the
 * atomics, which it sees. */
#define HAK_STAT_OWN_ADD(p, n) __asm__("addq %1, %0" : "+m"(*(uint64_t *)(p)) : "er"(n))
#else
#define HAK_STAT_OWN_ADD(p, n) \
  atomic_store_explicit((p), atomic_load_explicit((p), memory_order_relaxed) + (n), memory_order_relaxed)
#endif
#define HAK_STAT_BUMP_IN(m, field, n) do { \
    hak_counters_t *m_ = (m); \
    uint64_t n_ = (uint64_t)(n); \
    if (HAK_LIKELY(m_ != NULL)) \
      HAK_STAT_OWN_ADD(&m_->field, n_); \
    else \
      atomic_fetch_add_explicit(&hak_stats.field, n_, memory_order_relaxed); \
  } while (0)
#define HAK_STAT_BUMP(field, n) HAK_STAT_BUMP_IN(hak_stat_mine, field, n)
#define HAK_STAT_ADD(e, n) HAK_STAT_BUMP(ev[(e)], n)
#define HAK_CSTAT_INC(c, e) HAK_STAT_BUMP(cls[(c)][(e)], 1)
#define HAK_CSTAT_ADD(c, e, n) HAK_STAT_BUMP(cls[(c)][(e)], n)
/* Several additions in one place: the thread's counters read once. */
#define HAK_STAT_MINE(m) hak_counters_t *m = hak_stat_mine
#define HAK_STAT_ADD_IN(m, e, n) HAK_STAT_BUMP_IN(m, ev[(e)], n)
#define HAK_CSTAT_ADD_IN(m, c, e, n) HAK_STAT_BUMP_IN(m, cls[(c)][(e)], n)
#else
#define HAK_STAT_MINE(m) ((void)0)
#define HAK_STAT_ADD_IN(m, e, n) ((void)0)
#define HAK_CSTAT_ADD_IN(m, c, e, n) ((void)0)
#define HAK_STAT_MAX(var, v) ((void)0)
#define HAK_CSTAT_ADD(c, e, n) ((void)0)
#define HAK_STAT_ADD(e, n) ((void)0)
#define HAK_CSTAT_INC(c, e) ((void)0)
#endif
#define HAK_STAT_INC(e) HAK_STAT_ADD(e, 1)
/* OS calls are counted in every build, the fast one included: each costs a
 * system call already, and hak_stats_get reports them everywhere. */
#define HAK_OS_STAT_ADD(e, n) atomic_fetch_add_explicit(&hak_stats.ev[(e)], (uint64_t)(n), memory_order_relaxed)
#define HAK_OS_STAT_INC(e) HAK_OS_STAT_ADD(e, 1)

#if HAK_OBSERVE
#define HAK_OBSERVE_INC(c, e) HAK_CSTAT_INC(c, e)
#else
#define HAK_OBSERVE_INC(c, e) ((void)0)
#endif

/* One scalar of the public hak_stats_t: group, name, offset, and the
 * HAK_STATS_HAVE_* flag of the builds that fill it (stats.c). */
typedef struct stats_field {
  const char *group, *name;
  unsigned short offset;
  unsigned valid;
} stats_field_t;
extern const stats_field_t stats_fields[] HAK_HIDDEN;
extern const unsigned stats_nfields HAK_HIDDEN;

/* Every figure into *st (all of it: st->size is ignored); process: also the
 * process's resident figures, read from /proc. */
void stats_gather(hak_stats_t *st, bool process) HAK_HIDDEN;
/* Counters restart from now: later gathers subtract today's values. */
void stats_reset(void) HAK_HIDDEN;
/* The JSON document (stats_json.c), snprintf-style. */
size_t stats_json(char *buf, size_t len) HAK_HIDDEN;
void stats_print_json(int fd) HAK_HIDDEN;

/* The report at exit, in HAKMEM_STATS's format (text or JSON). */
void stats_print(int fd) HAK_HIDDEN;
/* The text report (hak_stats_print, HAKMEM_STATS=1). */
void stats_print_text(int fd) HAK_HIDDEN;

#endif
