/* init.c — start-up (policy snapshot, thread-exit key, fork handlers) and the
 * exit-time statistics report. Every step here may itself allocate; those
 * nested allocations are served by the shared heap while the state is
 * "running". */
#include "front/init.h"
#include "front/front.h"
#include "front/heap_huge.h"
#include "guard/fault.h"
#include "heap/collect.h"
#include "heap/heap.h"
#include "heap/user_heap.h"
#include "large/large.h"
#include "os/lock.h"
#include "policy/config.h"
#include "policy/purger.h"
#include "remote/remote.h"
#include "segment/segment.h"
#include "stats/stats.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Atomic(int) hak_init_state;

/* The forking thread holds every lock from here to parent/child, and may
 * still allocate in between (os/lock.h, "Fork"). Nested runs by the forking
 * thread do nothing but count: a child that took start-up over (below) may
 * have registered the handlers a second time. */
static unsigned fork_depth; /* touched by the fork holder only */

static void atfork_prepare(void) {
  if (hak_lock_fork_mine()) {
    fork_depth++;
    return;
  }
  hak_fork_begin();
  heap_huge_atfork_prepare(); /* first: taken before the large-block locks */
  uheap_atfork_prepare(); /* a heap's lock is taken before the segment lock */
  collect_atfork_prepare();
  heap_atfork_prepare();
  remote_atfork_prepare();
  large_atfork_prepare();
  segment_atfork_prepare();
}

static void atfork_parent(void) {
  if (fork_depth) {
    fork_depth--;
    return;
  }
  segment_atfork_parent();
  large_atfork_parent();
  remote_atfork_parent();
  heap_atfork_parent();
  collect_atfork_parent();
  uheap_atfork_parent();
  heap_huge_atfork_parent();
  hak_fork_end();
}

static void atfork_child(void) {
  if (fork_depth) {
    fork_depth--;
    return;
  }
  hak_fork_end();
  /* First: heap locks left held by threads that are gone are released (or
   * their heaps set aside) before the heap repair takes them. */
  collect_atfork_child();
  segment_atfork_child();
  large_atfork_child();
  remote_atfork_child();
  heap_atfork_child();
  uheap_atfork_child();
  heap_huge_atfork_child();
  purger_atfork_child();
}

/* Steps of start-up already done: a child that takes start-up over from a
 * thread of its parent repeats only the missing ones. */
static bool key_made, atfork_registered;
#if HAK_SECURE
static bool seeded;
#endif

bool hak_init(void) {
  /* Running is recorded as minus the pid of the process running start-up: a
   * fork while another thread is inside hak_init leaves the child with a
   * running state and nobody to finish it, so the child's first caller
   * takes over and runs start-up again (every step may be repeated). */
  int me = -(int)getpid();
  int expect = 0;
  while (!atomic_compare_exchange_strong(&hak_init_state, &expect, me)) {
    if (expect == 2) return true;
    /* Running here: a recursive call, or another thread (the caller uses
     * the shared heap meanwhile). */
    if (expect == me) return false;
  }
  config_load();
  fault_handler_install(); /* secure build */
#if HAK_SECURE
  if (!seeded) {
    /* A raw system call: start-up can run inside a sanitizer's own start-up
     * (AddressSanitizer's dlsym allocates), before its interceptors work. */
    struct timespec ts;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
    hak_free_key ^= ((uintptr_t)&expect * 0x9e3779b97f4a7c15u) ^ ((uintptr_t)ts.tv_nsec << 17) ^ (uintptr_t)ts.tv_sec;
    seeded = true;
  }
#endif
#if HAK_WORD_CHECKS
  slice_map_checks_init(); /* before any bin has room: free() reads it then */
#endif
  if (!key_made) {
    thread_key_init();
    key_made = true;
  }
  if (!atfork_registered) {
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    atfork_registered = true;
  }
  atomic_store_explicit(&hak_init_state, 2, memory_order_release);
  return true;
}

__attribute__((constructor(101))) static void hak_constructor(void) {
  if (!hak_init_done()) hak_init();
}

__attribute__((destructor)) static void hak_destructor(void) {
  if (hak_config.stats_at_exit) stats_print(STDERR_FILENO);
}
