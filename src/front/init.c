/* init.c — start-up (policy snapshot, thread-exit key, fork handlers) and the
 * exit-time statistics report. Every step here may itself allocate; those
 * nested allocations are served by the shared heap while the state is
 * "running". */
#include "front/init.h"
#include "front/front.h"
#include "heap/heap.h"
#include "large/large.h"
#include "policy/config.h"
#include "remote/remote.h"
#include "segment/segment.h"
#include "stats/stats.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

_Atomic(int) hak_init_state;

static void atfork_prepare(void) {
  heap_atfork_prepare();
  remote_atfork_prepare();
  large_atfork_prepare();
  segment_atfork_prepare();
}

static void atfork_parent(void) {
  segment_atfork_parent();
  large_atfork_parent();
  remote_atfork_parent();
  heap_atfork_parent();
}

static void atfork_child(void) {
  segment_atfork_child();
  large_atfork_child();
  remote_atfork_child();
  heap_atfork_child();
}

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
#if HAK_CHECKS
  {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    hak_free_key ^= ((uintptr_t)&expect * 0x9e3779b97f4a7c15u) ^ ((uintptr_t)ts.tv_nsec << 17) ^ (uintptr_t)ts.tv_sec;
  }
#endif
  thread_key_init();
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
  atomic_store_explicit(&hak_init_state, 2, memory_order_release);
  return true;
}

__attribute__((constructor(101))) static void hak_constructor(void) {
  if (!hak_init_done()) hak_init();
}

__attribute__((destructor)) static void hak_destructor(void) {
  if (hak_config.stats_at_exit) stats_print(STDERR_FILENO);
}
