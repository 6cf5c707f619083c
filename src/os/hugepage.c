/* hugepage.c — how segments meet the kernel beyond plain mmap: explicit
 * 2 MiB pages (HAKMEM_HUGE_PAGES=1), transparent huge pages (HAKMEM_THP),
 * and names for HAKMEM's mappings in /proc/PID/maps (PR_SET_VMA_ANON_NAME).
 *
 * HAKMEM_HUGE_PAGES=1 maps each segment with MAP_HUGETLB (2 MiB pages from
 * the kernel's hugetlb pool, vm.nr_hugepages); when the pool is empty or the
 * kernel refuses, the segment gets normal pages instead, silently, and
 * os.hugetlb_fallback counts it. A hugetlb segment is resident whole and is
 * never purged in part (the kernel refuses MADV_DONTNEED on less than a huge
 * page): its memory goes back when the segment is unmapped.
 *
 * HAKMEM_THP: "always" advises MADV_HUGEPAGE on every segment when it is
 * mapped, "never" MADV_NOHUGEPAGE, "auto" MADV_HUGEPAGE once 3/4 of a
 * segment's slices hold pages (a sparse segment would otherwise become
 * resident whole at its first touch); "system" (the default) leaves the
 * kernel's setting alone. Each segment is advised at most once (a flag in
 * its header); always and never before its first byte is written: the first
 * fault in a 2 MiB range decides whether it gets a huge page (a 4 KiB page
 * there gives the range a page table, and later faults take 4 KiB pages
 * too), so advice after the header's write left "always" with no huge page
 * at all (bench_sizemix 4 300000 1000: thp_fault_alloc unchanged; 142 huge
 * pages once advised first), and let a system set to "always" give "never"'s
 * segments one.
 *
 * HAKMEM_THP=dense: MADV_HUGEPAGE, before the header's write, only on
 * segments that segment.c keeps for one-slice pages of classes up to 8 KiB
 * (os_map_segment(true): s->dense), whose blocks cover their OS pages; large
 * runs and pages of bigger classes, which a program may touch sparsely
 * (bench_sizemix writes a block's first and last byte only), stay in other
 * segments, with no advice (under THP=always those made sizemix's RSS 4x).
 * One fault then maps 2 MiB instead of 4 KiB: the kernel's per-fault work
 * (memcg charge, LRU, page table; zeroing is a small part) once per 512
 * pages. A shard's dense pages go there only once the program holds 12 MiB
 * of them, 2 MiB in that shard, whose pages of a class fill (segment.c): a
 * small program never pays a 2 MiB page's granularity. The dirty budget's
 * sweeps never purge a dense segment's slices (a 64 KiB madvise would split
 * the huge page, and the next faults there take 4 KiB pages again) and they
 * stay out of the dirty books; the purge deadline purges them once the
 * program stops cutting pages, malloc_trim always (purge.c).
 * bench_sizemix 4 300000 1000, fast build, dense against system, paired:
 * minor faults -19% (16.3k -> 13.6k), system time -15%, CPU 0.96, peak RSS
 * +5-9 MB, throughput within the noise; off by default. */
#include "os/os.h"
#include "policy/config.h"
#include "stats/stats.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#endif
#ifndef PR_SET_VMA_ANON_NAME
#define PR_SET_VMA_ANON_NAME 0
#endif
#ifndef MAP_HUGETLB
#define MAP_HUGETLB 0x40000
#endif
#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << MAP_HUGE_SHIFT)
#endif
#ifndef MADV_HUGEPAGE
#define MADV_HUGEPAGE 14
#endif
#ifndef MADV_NOHUGEPAGE
#define MADV_NOHUGEPAGE 15
#endif

#define THP_DENSE_SLICES (HAK_SLICES * 3 / 4)

/* Set once the kernel said it cannot name mappings (EINVAL: no
 * CONFIG_ANON_VMA_NAME, or a kernel older than 5.17): stop asking. */
static _Atomic(int) names_refused;

void os_name(void *p, size_t size, const char *name) {
  if (atomic_load_explicit(&names_refused, memory_order_relaxed)) return;
  int saved = errno;
  int rc = prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)p, (unsigned long)size, (unsigned long)name);
  HAK_OS_STAT_INC(HAK_EV_NAME);
  if (rc != 0) {
    HAK_OS_STAT_INC(HAK_EV_NAME_FAIL);
    if (errno == EINVAL) atomic_store_explicit(&names_refused, 1, memory_order_relaxed);
  }
  errno = saved;
}

static void thp_advise(void *p, size_t size, int advice) {
  int saved = errno;
  int rc = madvise(p, size, advice);
  HAK_OS_STAT_INC(HAK_EV_THP_ADVISE);
  if (rc != 0) HAK_OS_STAT_INC(HAK_EV_MADVISE_FAIL);
  errno = saved;
}

void *os_map_segment(bool dense) {
  hak_segment_t *s = NULL;
  if (hak_config.huge_pages) {
    int saved = errno;
    void *p = mmap(NULL, HAK_SEG_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_HUGE_2MB,
                   -1, 0);
    errno = saved;
    HAK_OS_STAT_INC(HAK_EV_MMAP);
    if (p != MAP_FAILED && ((uintptr_t)p & HAK_SEG_MASK) == 0) {
      HAK_OS_STAT_INC(HAK_EV_HUGETLB);
      os_account_map(HAK_SEG_SIZE);
      s = p;
      s->_r[0] = 1; /* huge already: no THP advice */
      s->_r[1] = hak_config.loaded;
      os_name(s, HAK_SEG_SIZE, "hakmem-segment");
      return s;
    }
    if (p != MAP_FAILED) munmap(p, HAK_SEG_SIZE); /* cannot happen: hugetlb mappings are aligned */
    HAK_OS_STAT_INC(HAK_EV_HUGETLB_FALLBACK);
  }
  s = os_reserve_segment();
  if (!s) return NULL;
  os_account_map(HAK_SEG_SIZE);
  os_name(s, HAK_SEG_SIZE, "hakmem-segment");
  /* The advice first, then the header's first write (see the top). */
  bool advised = hak_config.thp == HAK_THP_ALWAYS || hak_config.thp == HAK_THP_NEVER || dense;
  if (advised) thp_advise(s, HAK_SEG_SIZE, hak_config.thp == HAK_THP_NEVER ? MADV_NOHUGEPAGE : MADV_HUGEPAGE);
  s->_r[1] = hak_config.loaded; /* else the options reach it at its next page */
  if (advised) s->_r[0] = 1;
  return s;
}

/* Called at every page cut from a segment, under its shard's lock. A
 * segment mapped before the options were read (an allocation during
 * start-up, e.g. by a sanitizer's runtime) got neither advice nor hugetlb
 * accounting when mapped (_r[1] is 0): it gets them here, at its next page,
 * like any other (then under the lock: once per such segment, and before
 * the page is written). _r[0]: advised. HAKMEM_THP=auto's advice for a
 * segment that became dense is not given here: it is returned (marked
 * given; 0 if none is due) and the caller gives it with os_segment_advise
 * once the lock is released (shard.h, shard_unlock): madvise takes the
 * process's memory-map lock for writing. */
int os_segment_in_use(void *seg, unsigned used_slices) {
  hak_segment_t *s = seg;
  if (HAK_UNLIKELY(!s->_r[1] && hak_config.loaded)) {
    s->_r[1] = 1;
    if (hak_config.huge_pages) HAK_OS_STAT_INC(HAK_EV_HUGETLB_FALLBACK); /* has normal pages */
    if (!s->_r[0] && (hak_config.thp == HAK_THP_ALWAYS || hak_config.thp == HAK_THP_NEVER)) {
      /* once per such segment, before the page's first write (which
       * would give the range a 4 KiB page table): here, under the lock */
      thp_advise(s, HAK_SEG_SIZE, hak_config.thp == HAK_THP_ALWAYS ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
      s->_r[0] = 1;
    }
  }
  if (hak_config.thp != HAK_THP_AUTO || s->_r[0] || used_slices < THP_DENSE_SLICES) return 0;
  s->_r[0] = 1;
  return MADV_HUGEPAGE;
}

void os_segment_advise(void *seg, int advice) { thp_advise(seg, HAK_SEG_SIZE, advice); }
