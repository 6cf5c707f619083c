/* purger.c — freed memory goes back after HAKMEM_PURGE_DELAY_MS even when the
 * program goes idle: the purge deadline, its slow-path check, and the
 * optional background purger thread (HAKMEM_BACKGROUND_PURGE).
 *
 * This file drives the lower parts (segments, the huge cache, and through
 * heap_collect_idle the heaps); it sits above them, and only front/ calls it.
 *
 * The deadline (lock-free protocol)
 *   hak_purge_deadline is one 32-bit coarse-ms time (os_now_ms), 0 when
 *   nothing is pending. A part that leaves memory that will become due
 *   (a retired page's slices, a cached huge mapping, remote frees waiting in
 *   an idle heap) calls purge_arm(due), which moves the word to `due` if it is
 *   0 or later (CAS loop, any context, under any lock). Whoever finds the
 *   deadline passed, a slow path (purge_tick) or the thread, claims it with a
 *   CAS d -> 0; only the winner purges, and the parts re-arm for what they
 *   still hold (each returns its next due time). Memory dirtied during a
 *   purge arms again by itself, since the word is 0 by then, so nothing is
 *   ever left without a deadline. A claimant preempted between its CAS and the
 *   purge only delays that purge; the purge takes the parts' usual locks.
 *
 * The thread
 *   Started by the first allocation slow path after start-up (never from
 *   inside start-up, never with an allocator lock held, never from free:
 *   glibc calls free holding its own locks, pthread_join its stack-cache
 *   lock, which pthread_create takes: test_purger_join), detached, with
 *   every signal blocked. It sleeps on the deadline word with a futex: without
 *   a timeout while the word is 0 (an idle process gets no wake-ups at all),
 *   with one until the deadline otherwise. purge_arm wakes it when it moves
 *   the word while the thread waits; `waiting` and the word are written and
 *   read with sequentially consistent operations on both sides (Dekker), and
 *   the futex compares the word atomically, so no wake-up is lost.
 *   fork: the child has no thread. atfork_child forgets the old one, and the
 *   child starts its own at its first allocation slow path.
 *   The word itself stays valid in the child.
 *   exit: nothing waits for the thread. The library destructor sets `stop`
 *   and wakes it; it returns at its next look. If the process ends while it
 *   purges, exit_group ends it mid-madvise, which leaves nothing visible. It
 *   touches only HAKMEM's static data and mappings, which stay until the
 *   process ends (a dlclose'd library must be linked -z nodelete).
 *   A program that must stay single-threaded (unshare(CLONE_NEWUSER), some
 *   sandboxes) keeps HAKMEM_BACKGROUND_PURGE=0, the `speed` default; the
 *   slow-path check then does the same work, only later if the program
 *   stops calling malloc and free altogether. */

#include "policy/purger.h"
#include "front/init.h"
#include "heap/collect.h"
#include "heap/heap.h"
#include "large/large.h"
#include "os/lock.h"
#include "os/os.h"
#include "policy/config.h"
#include "segment/page_cache.h"
#include "segment/segment.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Atomic(uint32_t) hak_purge_deadline;

enum { PURGER_NONE = 0, PURGER_RUNNING = 1, PURGER_FAILED = 2 };
static _Atomic(int) purger_state;
static _Atomic(int) purger_waiting;
static _Atomic(int) purger_stopping;

static void futex_wait(_Atomic(uint32_t) *w, uint32_t expect, uint32_t timeout_ms) {
  struct timespec ts = {(time_t)(timeout_ms / 1000), (long)(timeout_ms % 1000) * 1000000L};
  syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, expect, timeout_ms ? &ts : NULL, NULL, 0);
}

static void futex_wake(_Atomic(uint32_t) *w, int n) {
  syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

void purge_arm(uint32_t due) {
  if (!due) due = 1;
  uint32_t cur = atomic_load_explicit(&hak_purge_deadline, memory_order_relaxed);
  do {
    if (cur != 0 && (int32_t)(due - cur) >= 0) return; /* one at or before it is set */
  } while (!atomic_compare_exchange_weak_explicit(&hak_purge_deadline, &cur, due, memory_order_seq_cst,
                                                  memory_order_relaxed));
  if (atomic_load_explicit(&purger_waiting, memory_order_seq_cst)) {
    int saved = errno;
    futex_wake(&hak_purge_deadline, 1);
    errno = saved;
  }
}

bool purge_run(int mode) {
  uint32_t now = os_now_ms();
  uint32_t next = heap_collect_idle(now, mode);
  bool any = page_cache_trim();
  if (mode == COLLECT_FORCE) {
    any |= segment_trim();
    any |= large_trim();
  } else {
    uint32_t age = mode == COLLECT_NOW ? 0 : hak_config.purge_delay_ms;
    uint32_t s = segment_purge_aged(now, age, &any), l = large_purge_aged(now, age, &any);
    if (s && (!next || (int32_t)(s - next) < 0)) next = s;
    if (l && (!next || (int32_t)(l - next) < 0)) next = l;
  }
  if (next) purge_arm(next);
  return any;
}

/* The deadline passed: claim it and purge. False if not due, or another
 * caller claimed it first. */
static bool purge_if_due(uint32_t d) {
  uint32_t now = os_now_ms();
  if ((int32_t)(now - d) < 0) return false;
  if (!atomic_compare_exchange_strong_explicit(&hak_purge_deadline, &d, 0, memory_order_acq_rel, memory_order_relaxed))
    return false;
  purge_run(COLLECT_DUE);
  return true;
}

static void *purger_main(void *arg) {
  (void)arg;
  int saved = errno;
  while (!atomic_load_explicit(&purger_stopping, memory_order_acquire)) {
    uint32_t d = atomic_load_explicit(&hak_purge_deadline, memory_order_acquire);
    uint32_t wait_ms = 0;
    if (d) {
      if (purge_if_due(d)) continue;
      int32_t left = (int32_t)(d - os_now_ms());
      if (left <= 0) continue; /* claimed by another caller meanwhile */
      /* The coarse clock lags the futex's precise one by up to a tick. */
      wait_ms = (uint32_t)left + 4;
    }
    atomic_store_explicit(&purger_waiting, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&hak_purge_deadline, memory_order_seq_cst) == d &&
        !atomic_load_explicit(&purger_stopping, memory_order_acquire))
      futex_wait(&hak_purge_deadline, d, wait_ms);
    atomic_store_explicit(&purger_waiting, 0, memory_order_relaxed);
  }
  errno = saved;
  return NULL;
}

static void purger_start(void) {
  int expect = PURGER_NONE;
  if (!atomic_compare_exchange_strong(&purger_state, &expect, PURGER_RUNNING)) return;
  int saved = errno;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread inherits: no signal lands there */
  pthread_t t;
  int rc = pthread_create(&t, &attr, purger_main, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  if (rc != 0) atomic_store(&purger_state, PURGER_FAILED); /* the slow paths do it all */
  else pthread_setname_np(t, "hakmem-purge");
  errno = saved;
}

bool hak_purger_wanted = true; /* until the first look after start-up says otherwise */

/* The common case: a deadline is set and not yet due. Refills and flushes
 * come by the million per second, and while anything is pending (a kept
 * empty page arms it, so a busy program nearly always has a deadline) each
 * one looks at the clock. The look is one read of the coarse clock, the
 * deadline's own (os_now_ms: CLOCK_MONOTONIC_COARSE, which the vDSO answers
 * from memory without reading the TSC), so the deadline is seen at the first
 * slow path after it passed. It used to be rate-limited by the TSC (a look
 * at most once per 2^20 cycles), but rdtsc alone costs ~40 ns in a VM
 * against ~13 ns for the coarse clock: purge_tick_slow was 1.8% of
 * bench_sizemix's samples, 84% of them on the rdtsc. */
void purge_tick_slow(uint32_t d, bool may_start) {
  bool start = may_start && __atomic_load_n(&hak_purger_wanted, __ATOMIC_RELAXED);
  if (!start && (int32_t)(os_now_ms() - d) < 0) return; /* not due yet */
  /* Not from inside a fork (another library's prepare handler allocating
   * while this thread holds every allocator lock): no thread start there. */
  if (hak_lock_fork_mine()) return;
  if (start && hak_init_done()) {
    if (hak_config.background_purge && atomic_load_explicit(&purger_state, memory_order_relaxed) == PURGER_NONE &&
        !atomic_load_explicit(&purger_stopping, memory_order_relaxed))
      purger_start();
    __atomic_store_n(&hak_purger_wanted, false, __ATOMIC_RELAXED);
  }
  if (d) purge_if_due(d);
}

/* Refills and flushes (purge_tick_refill, purge_tick_flush) are most of the
 * slow paths: bench_sizemix 4 300000 1000 made ~41k looks at the clock per
 * run, each ~40 instructions of purge_tick_slow, os_now_ms and clock_gettime
 * (~2% of the library's instructions), nearly all within the same coarse
 * tick (4 ms) as the thread's look before. A thread whose look reads the
 * value its previous look read (two refills or flushes within one coarse
 * tick: it is busy) skips the next PURGE_SKIP of them; any other slow path
 * (large blocks, first-class heaps) still looks every time, and so does the
 * background purger. A thread that goes from busy to nearly idle sees a
 * passed deadline at most PURGE_SKIP of its refills and flushes late; one
 * that makes fewer than two per coarse tick looks at every one. The counts
 * live in the thread's heap record (owner only); a thread without one looks
 * every time. */
#define PURGE_SKIP 7
void purge_tick_slow_busy(uint32_t d, bool may_start) {
  hak_heap_t *h = hak_tls.state == HAK_THREAD_LIVE ? hak_tls.heap : NULL;
  if (!h || (may_start && __atomic_load_n(&hak_purger_wanted, __ATOMIC_RELAXED))) {
    purge_tick_slow(d, may_start);
    return;
  }
  if (h->purge_skip) {
    h->purge_skip--;
    return;
  }
  uint32_t now = os_now_ms();
  if (now == h->purge_seen) h->purge_skip = PURGE_SKIP;
  h->purge_seen = now;
  if ((int32_t)(now - d) < 0 || hak_lock_fork_mine()) return;
  if (d) purge_if_due(d);
}

void purger_atfork_child(void) {
  atomic_store_explicit(&purger_state, PURGER_NONE, memory_order_relaxed);
  __atomic_store_n(&hak_purger_wanted, true, __ATOMIC_RELAXED);
  atomic_store_explicit(&purger_waiting, 0, memory_order_relaxed);
}

__attribute__((destructor)) static void purger_fini(void) { purger_stop(); }

void purger_stop(void) {
  atomic_store_explicit(&purger_stopping, 1, memory_order_release);
  if (atomic_load_explicit(&purger_state, memory_order_relaxed) == PURGER_RUNNING) {
    int saved = errno;
    futex_wake(&hak_purge_deadline, INT_MAX);
    errno = saved;
  }
}
