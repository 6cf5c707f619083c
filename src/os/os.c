/* os.c — mmap/munmap/madvise wrappers with accounting. Alignment is obtained
 * by asking first for the aligned spot right below the previous aligned
 * mapping (where the kernel, which fills the address space top-down, would
 * look anyway; it takes the hint when the spot is free, and for a 2 MiB
 * mapping its own choice is often aligned too), and over-mapping then
 * trimming only when that fails. */
#include "os/os.h"
#include "stats/stats.h"

#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <errno.h>
#include <stdlib.h>

_Atomic(size_t) hak_mapped_bytes;
_Atomic(size_t) hak_mapped_peak;

void os_account_map(size_t n) {
  size_t now = atomic_fetch_add_explicit(&hak_mapped_bytes, n, memory_order_relaxed) + n;
  size_t peak = atomic_load_explicit(&hak_mapped_peak, memory_order_relaxed);
  while (now > peak &&
         !atomic_compare_exchange_weak_explicit(&hak_mapped_peak, &peak, now, memory_order_relaxed, memory_order_relaxed)) {
  }
}

/* Threads may race to fill the cache; they store the same value, atomically. */
static size_t kernel_page_size(void) {
  static _Atomic(size_t) cached;
  size_t ps = atomic_load_explicit(&cached, memory_order_relaxed);
  if (HAK_UNLIKELY(ps == 0)) {
    long v = sysconf(_SC_PAGESIZE);
    ps = v > 0 ? (size_t)v : 4096;
    atomic_store_explicit(&cached, ps, memory_order_relaxed);
  }
  return ps;
}

/* HAK_TEST_PAGE_SIZE (a test build, -DHAKMEM_TEST_PAGE_SIZE=65536) makes
 * HAKMEM believe the page is that big, as on a 64 KiB-page aarch64 kernel:
 * every mapping it gets starts on such a page, and any munmap, madvise or
 * mremap that the real kernel would refuse there aborts with a message. */
#ifdef HAK_TEST_PAGE_SIZE
_Static_assert((HAK_TEST_PAGE_SIZE & (HAK_TEST_PAGE_SIZE - 1)) == 0, "a page size is a power of two");
size_t os_page_size(void) { return HAK_TEST_PAGE_SIZE; }

static void need_page_aligned(const char *call, const void *p, size_t size) {
  if (((uintptr_t)p | size) & (HAK_TEST_PAGE_SIZE - 1)) {
    static const char msg[] = "hakmem: a system call on memory not aligned to the (simulated) page size\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    (void)call;
    abort();
  }
}
#else
size_t os_page_size(void) { return kernel_page_size(); }
#define need_page_aligned(call, p, size) ((void)0)
#endif

uint32_t os_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint32_t)((uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u);
}

static void *raw_map_at(void *hint, size_t size) {
  int saved = errno;
#ifdef HAK_TEST_PAGE_SIZE
  /* Start on a simulated page: over-map by what the kernel's pages lack. */
  size_t extra = HAK_TEST_PAGE_SIZE > kernel_page_size() ? HAK_TEST_PAGE_SIZE - kernel_page_size() : 0;
  uint8_t *q = mmap(hint, size + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  void *p = q;
  if (q != MAP_FAILED && extra) {
    uint8_t *a = (uint8_t *)align_up((uintptr_t)q, HAK_TEST_PAGE_SIZE);
    if (a > q) munmap(q, (size_t)(a - q));
    if (q + extra > a) munmap(a + size, (size_t)(q + extra - a));
    p = a;
  }
#else
  void *p = mmap(hint, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
#endif
  HAK_OS_STAT_INC(HAK_EV_MMAP);
  if (p == MAP_FAILED) HAK_OS_STAT_INC(HAK_EV_MMAP_FAIL);
  errno = saved;
  return p == MAP_FAILED ? NULL : p;
}

static void *raw_map(size_t size) { return raw_map_at(NULL, size); }

static void raw_unmap(void *p, size_t size) {
  need_page_aligned("munmap", p, size);
  int saved = errno;
  int rc = munmap(p, size);
  HAK_OS_STAT_INC(HAK_EV_MUNMAP);
  if (rc != 0) HAK_OS_STAT_INC(HAK_EV_MUNMAP_FAIL);
  errno = saved;
}

/* Small mappings are heap records; big ones, blocks of their own. */
void *os_map(size_t size) {
  void *p = raw_map(size);
  if (p) {
    os_account_map(size);
    os_name(p, size, size >= HAK_SEG_SIZE ? "hakmem-huge" : "hakmem-meta");
  }
  return p;
}

/* Start of the last aligned mapping: the next one is asked for below it. */
static _Atomic(uintptr_t) aligned_below;

void *os_map_aligned_unaccounted(size_t size, size_t align, bool try_plain) {
  size_t span = align_up(size, align);
  if (span < size) return NULL;
  if (try_plain) {
    uintptr_t below = atomic_load_explicit(&aligned_below, memory_order_relaxed);
    void *hint = below > span ? (void *)(below - span) : NULL;
    void *p = raw_map_at(hint, size);
    if (!p) return NULL;
    if (((uintptr_t)p & (align - 1)) == 0) {
      atomic_store_explicit(&aligned_below, (uintptr_t)p, memory_order_relaxed);
      return p;
    }
    raw_unmap(p, size);
  }
  size_t over = size + align;
  if (over < size) return NULL;
  uint8_t *q = raw_map(over);
  if (!q) return NULL;
  uint8_t *a = (uint8_t *)align_up((uintptr_t)q, align);
  if (a > q) raw_unmap(q, (size_t)(a - q));
  size_t tail = (size_t)((q + over) - (a + size));
  if (tail) raw_unmap(a + size, tail);
  atomic_store_explicit(&aligned_below, (uintptr_t)a, memory_order_relaxed);
  return a;
}

void *os_map_aligned_unnamed(size_t size, size_t align, bool try_plain) {
  void *p = os_map_aligned_unaccounted(size, align, try_plain);
  if (p) os_account_map(size);
  return p;
}

/* Outside segments (os_map_segment), aligned mappings are huge blocks. */
void *os_map_aligned(size_t size, size_t align, bool try_plain) {
  void *p = os_map_aligned_unnamed(size, align, try_plain);
  if (p) os_name(p, size, "hakmem-huge");
  return p;
}

void os_unmap(void *p, size_t size) {
  raw_unmap(p, size);
  atomic_fetch_sub_explicit(&hak_mapped_bytes, size, memory_order_relaxed);
}

void os_unmap_unaccounted(void *p, size_t size) { raw_unmap(p, size); }

void os_purge(void *p, size_t size) {
  need_page_aligned("madvise", p, size);
  int saved = errno;
  int rc = madvise(p, size, MADV_DONTNEED);
  errno = saved;
  HAK_OS_STAT_INC(HAK_EV_MADVISE);
  if (rc != 0) HAK_OS_STAT_INC(HAK_EV_MADVISE_FAIL);
  HAK_STAT_ADD(HAK_EV_PURGE_BYTES, size);
}

/* MADV_POPULATE_WRITE (Linux 5.14): one system call makes a range resident
 * and writable, where touching it would take a page fault per OS page.
 * Older kernels refuse it (EINVAL): asked no more. */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
static _Atomic(bool) populate_refused;

void os_populate(void *p, size_t size) {
  if (atomic_load_explicit(&populate_refused, memory_order_relaxed)) return;
  need_page_aligned("madvise", p, size);
  int saved = errno;
  int rc = madvise(p, size, MADV_POPULATE_WRITE);
  if (rc != 0 && errno == EINVAL) atomic_store_explicit(&populate_refused, true, memory_order_relaxed);
  errno = saved;
  HAK_OS_STAT_INC(HAK_EV_MADVISE);
  if (rc != 0) HAK_OS_STAT_INC(HAK_EV_MADVISE_FAIL);
}

/* mincore reports one byte per page of the kernel's size, which is not
 * os_page_size() in the simulated-page test builds (HAK_TEST_PAGE_SIZE:
 * 64 KiB on a 4 KiB kernel): counted in those, the first k bytes of the
 * vector stood for k pages of 64 KiB, and a range of more than 16 of them
 * would have overrun v. */
size_t os_resident(const void *p, size_t size) {
  need_page_aligned("mincore", p, size);
  unsigned char v[256];
  size_t ps = kernel_page_size(), n = 0;
  int saved = errno;
  for (size_t off = 0; off < size;) {
    size_t len = size - off < sizeof v * ps ? size - off : sizeof v * ps;
    if (mincore((void *)((const uint8_t *)p + off), len, v) != 0) break;
    for (size_t i = 0; i < len / ps; i++) n += v[i] & 1;
    off += len;
  }
  errno = saved;
  return n * ps;
}

bool os_guard(void *p, size_t size, bool guard) {
  need_page_aligned("mprotect", p, size);
  int saved = errno;
  int rc = mprotect(p, size, guard ? PROT_NONE : PROT_READ | PROT_WRITE);
  errno = saved;
  return rc == 0;
}

/* ThreadSanitizer does not intercept mremap: the range a move or a shrink
 * leaves keeps, in TSan's shadow, the accesses of the blocks that lived
 * there, and a later mapping at that address which does not come from an
 * intercepted mmap (the destination of the next os_remap_to, an in-place
 * growth) would be reported as racing with them (make test-tsan,
 * test_huge_cache_tsan). Under TSan the vacated range goes through the
 * intercepted mmap and munmap, which reset its shadow: MAP_FIXED_NOREPLACE,
 * so a mapping another thread made there meanwhile (whose own mmap reset
 * it) is left alone; and a mapping never grows in place (os_remap_inplace
 * refuses: the caller moves it instead), which would take a vacated range
 * before its reset. Other builds: nothing. */
static void tsan_forget(void *p, size_t n) {
#if defined(__SANITIZE_THREAD__) && defined(MAP_FIXED_NOREPLACE)
  if (!n) return;
  void *q = mmap(p, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (q == p) munmap(q, n);
  else if (q != MAP_FAILED) munmap(q, n); /* an old kernel took it as a hint */
#else
  (void)p, (void)n;
#endif
}

bool os_remap_inplace(void *p, size_t old_size, size_t new_size) {
  need_page_aligned("mremap", p, old_size);
  need_page_aligned("mremap", p, new_size);
#ifdef __SANITIZE_THREAD__
  if (new_size > old_size) return false;
#endif
  int saved = errno;
  void *q = mremap(p, old_size, new_size, 0);
  HAK_OS_STAT_INC(HAK_EV_MREMAP);
  if (q == MAP_FAILED) HAK_OS_STAT_INC(HAK_EV_MREMAP_FAIL);
  errno = saved;
  if (q == MAP_FAILED) return false;
  if (new_size > old_size) os_account_map(new_size - old_size);
  else {
    atomic_fetch_sub_explicit(&hak_mapped_bytes, old_size - new_size, memory_order_relaxed);
    tsan_forget((uint8_t *)p + new_size, old_size - new_size);
  }
  return true;
}

/* Move a mapping's pages to dest, a mapping of new_size the caller made and
 * this replaces, without copying them. On failure nothing changed. */
bool os_remap_to(void *p, size_t old_size, void *dest, size_t new_size) {
  need_page_aligned("mremap", p, old_size);
  need_page_aligned("mremap", dest, new_size);
  int saved = errno;
  void *q = mremap(p, old_size, new_size, MREMAP_MAYMOVE | MREMAP_FIXED, dest);
  HAK_OS_STAT_INC(HAK_EV_MREMAP);
  if (q == MAP_FAILED) HAK_OS_STAT_INC(HAK_EV_MREMAP_FAIL);
  errno = saved;
  if (q == MAP_FAILED) return false;
  atomic_fetch_sub_explicit(&hak_mapped_bytes, old_size, memory_order_relaxed); /* dest was counted */
  tsan_forget(p, old_size);
  return true;
}

static bool (*_Atomic reclaim_fn)(void);

void os_set_reclaim(bool (*fn)(void)) { atomic_store_explicit(&reclaim_fn, fn, memory_order_relaxed); }

bool os_reclaim(void) {
  bool (*fn)(void) = atomic_load_explicit(&reclaim_fn, memory_order_relaxed);
  bool any = os_reserve_release();
  return (fn && fn()) || any;
}
