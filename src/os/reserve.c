/* reserve.c — address space for segments, reserved several segments at a
 * time: a program that keeps mapping segments makes one mapping call (three
 * when the kernel's spot is not aligned: over-map and trim) per run of 8 to
 * 32 segments, where each segment took one to three.
 *
 * Why. mmap and munmap take the process's memory-map lock for writing. A
 * page fault that cannot do with the lock of its own mapping (the first
 * fault of a new mapping, a fault while a neighbour is being changed) takes
 * it for reading, and with more threads than cores the faulting thread is
 * often preempted while it holds it. The writer then waits for it, and every
 * fault and mapping call after the writer waits too. With 16 threads on 2
 * cores (bench_oversub 16 200000 400, a run of 0.1-0.2 s), threads spent up
 * to 2.4 s (median 0.3 s) blocked per run in segment mmaps and in faults
 * queued behind them, under 0.03 s with runs (sched_switch/sched_wakeup
 * trace: time from a switch out in state D to the wake-up).
 *
 * How. Runs of 8, 16, then 32 segments (64 MiB) at most, smaller when the
 * kernel refuses (short of address space: down to one segment). Nothing of
 * a run is counted as mapped (stats, mallinfo) until os_map_segment hands a
 * segment out, and untouched reserved memory is not resident. Out of
 * address space (os_reclaim), the unused rest of the run is unmapped first.
 *
 * Protocol (lock-free for takers). `next` is the address of the run's next
 * free segment (segment-aligned) with the number of segments left in its
 * low bits, 0 when none is left. A taker moves it on by one segment with a
 * CAS. ABA is harmless: the new value depends only on the old one, so a CAS
 * that succeeds on a word that came back (a run unmapped and another
 * reserved at the same place with as many left) hands out exactly the
 * segment that word names. A taker that finds none left claims `mapping`
 * (CAS 0 -> 1), looks once more (a run may have been published between its
 * look and its claim), maps a run, keeps its first segment, stores the rest
 * in `next` and clears `mapping`. Only the claimant stores a nonzero `next`,
 * and it was 0 at its last look, so no run is overwritten. The releaser
 * takes the whole rest with one exchange before it unmaps it: no segment is
 * both handed out and unmapped.
 *  - A thread preempted while it maps (or blocked behind the memory-map
 *    lock): the others wait for it a little (spins, then a few yields), then
 *    each maps one segment of its own, as without the reserve. Concurrent
 *    runs would only add writers to the lock's queue, and losers' unmaps.
 *  - A taker preempted between its load and its CAS holds nothing.
 *  - Thread exit: nothing is per thread.
 *  - fork: the child has the same mappings and the same word, consistent at
 *    every instant (single CASes). `mapping` is cleared in the child
 *    (os_reserve_atfork_child): its claimant may not exist there; a run it
 *    had mapped but not published is address space lost to the child. */
#include "os/os.h"
#include "os/lock.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/resource.h>

#define RUN_FIRST 8   /* segments: 16 MiB */
#define RUN_MAX   32  /* 64 MiB */
#define WAIT_SPINS  64
#define WAIT_YIELDS 16

static _Atomic(uintptr_t) next;
static _Atomic(int) mapping;        /* a thread is mapping a run */
static _Atomic(unsigned) run_size;  /* the next run's, 0 before the first */

/* Under an address-space limit (RLIMIT_AS, `ulimit -v`; RLIMIT_DATA,
 * `ulimit -d`, which counts private writable mappings since Linux 4.7) the
 * unused rest of a run is address space the program's own mappings (thread
 * stacks, a runtime's arenas, files) cannot have: with 40 MiB allowed, a
 * first run of 8 segments left a program's mmap calls 19 MiB (RLIMIT_AS) or
 * 22 MiB (RLIMIT_DATA) where glibc left it 37-40, and python3 raised
 * MemoryError after 3 MiB of bytearrays (glibc: 18). Runs of at most 1/32
 * of the lower limit (none beyond the segment taken below 64 MiB). Two
 * getrlimit calls per run, not per segment. */
static size_t limit_cap(int resource, size_t cap) {
  struct rlimit r;
  if (getrlimit(resource, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return cap;
  size_t k = (size_t)(r.rlim_cur / (32 * (rlim_t)HAK_SEG_SIZE));
  k = k < 1 ? 1 : k;
  return k < cap ? k : cap;
}
static size_t run_cap(void) {
  int saved = errno;
  size_t k = limit_cap(RLIMIT_DATA, limit_cap(RLIMIT_AS, RUN_MAX));
  errno = saved;
  return k;
}

static void *take(void) {
  uintptr_t w = atomic_load_explicit(&next, memory_order_acquire);
  while (w) {
    uintptr_t left = w & HAK_SEG_MASK, at = w & ~(uintptr_t)HAK_SEG_MASK;
    uintptr_t after = left > 1 ? (at + HAK_SEG_SIZE) | (left - 1) : 0;
    if (atomic_compare_exchange_weak_explicit(&next, &w, after, memory_order_acq_rel, memory_order_acquire))
      return (void *)at;
  }
  return NULL;
}

void *os_reserve_segment(void) {
  for (unsigned waits = 0;; waits++) {
    void *s = take();
    if (s) return s;
    int idle = 0;
    if (atomic_compare_exchange_strong_explicit(&mapping, &idle, 1, memory_order_acquire, memory_order_relaxed)) break;
    /* Another thread maps a run: wait for it, a little. It may be blocked
     * behind the memory-map lock; then one segment of our own, as before. */
    if (waits >= WAIT_SPINS + WAIT_YIELDS) return os_map_aligned_unaccounted(HAK_SEG_SIZE, HAK_SEG_SIZE, true);
    if (waits < WAIT_SPINS) cpu_relax();
    else sched_yield();
  }
  void *s = take(); /* a run published between our look and our claim */
  if (s) {
    atomic_store_explicit(&mapping, 0, memory_order_release);
    return s;
  }
  size_t k = atomic_load_explicit(&run_size, memory_order_relaxed);
  if (!k) k = RUN_FIRST;
  size_t cap = run_cap();
  if (k > cap) k = cap;
  uint8_t *p = NULL;
  for (; k && !(p = os_map_aligned_unaccounted(k * HAK_SEG_SIZE, HAK_SEG_SIZE, true)); k /= 2) {
  } /* short of address space: smaller runs, down to one segment */
  if (p) {
    atomic_store_explicit(&run_size, k * 2 <= RUN_MAX ? (unsigned)k * 2 : RUN_MAX, memory_order_relaxed);
    /* Only the mapper publishes, and the word was 0 when it became one. */
    if (k > 1) atomic_store_explicit(&next, (uintptr_t)(p + HAK_SEG_SIZE) | (k - 1), memory_order_release);
  }
  atomic_store_explicit(&mapping, 0, memory_order_release);
  return p;
}

bool os_reserve_release(void) {
  uintptr_t w = atomic_exchange_explicit(&next, 0, memory_order_acq_rel);
  if (!w) return false;
  os_unmap_unaccounted((void *)(w & ~(uintptr_t)HAK_SEG_MASK), (w & HAK_SEG_MASK) * HAK_SEG_SIZE);
  return true;
}

void os_reserve_atfork_child(void) { atomic_store_explicit(&mapping, 0, memory_order_relaxed); }
