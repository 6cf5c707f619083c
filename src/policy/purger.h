/* purger.h — when freed memory goes back to the OS without a later free to
 * trigger it: one process-wide purge deadline, checked on the slow paths and
 * slept on by the optional background purger thread (see purger.c).
 *
 * The lower parts (segments, the huge cache, remote frees) only arm the
 * deadline when they leave something that will be due; purger.c does the
 * purging, calling back into them. */
#ifndef HAK_PURGER_H
#define HAK_PURGER_H

#include "hak_internal.h"

/* Coarse ms (os_now_ms) at which something becomes due; 0: nothing pending. */
extern _Atomic(uint32_t) hak_purge_deadline HAK_HIDDEN;

/* Something becomes due at `due` (coarse ms): bring the deadline forward to
 * it if none is set or the set one is later. Lock-free; callable under any
 * lock. Wakes the background purger if it sleeps with nothing pending. */
void purge_arm(uint32_t due) HAK_HIDDEN;

/* Slow-path hook (refill, flush, large blocks): nothing to do while no
 * deadline is set; otherwise a coarse clock read, and the purge itself only
 * once the deadline has passed. Call with no allocator lock held. */
void purge_tick_slow(uint32_t deadline, bool may_start) HAK_HIDDEN;
/* The background purger is wanted and not started yet. */
extern bool hak_purger_wanted HAK_HIDDEN;
/* The look every tick starts with: a relaxed load of the deadline, and on
 * paths that may start the background purger (allocations) of whether it is
 * wanted. The slow side runs with a deadline set, or to start the purger.
 * Busy ticks (refills, flushes) go to purge_tick_slow_busy, which skips the
 * clock read for the next PURGE_SKIP of them once two looks of the thread
 * read the same coarse clock value (purger.c). */
void purge_tick_slow_busy(uint32_t deadline, bool may_start) HAK_HIDDEN;
HAK_INLINE void purge_tick_at(bool may_start, bool busy) {
  uint32_t d = atomic_load_explicit(&hak_purge_deadline, memory_order_relaxed);
  if (HAK_UNLIKELY(d != 0 || (may_start && __atomic_load_n(&hak_purger_wanted, __ATOMIC_RELAXED)))) {
    if (busy)
      purge_tick_slow_busy(d, may_start);
    else
      purge_tick_slow(d, may_start);
  }
}
/* On allocation paths: also starts the background purger, at the first one
 * after start-up (it sleeps until something is pending). */
HAK_INLINE void purge_tick(void) { purge_tick_at(true, false); }
/* On free paths: never starts the thread. glibc frees under its own locks
 * (pthread_join frees a dead thread's TLS vector holding the stack-cache
 * lock, which pthread_create takes): a thread started there deadlocks. */
HAK_INLINE void purge_tick_free(void) { purge_tick_at(false, false); }
/* On refills (may start the thread) and flushes (may not), which a busy
 * thread makes by the hundred thousand per second. */
HAK_INLINE void purge_tick_refill(void) { purge_tick_at(true, true); }
HAK_INLINE void purge_tick_flush(void) { purge_tick_at(false, true); }

/* Collect and purge. mode COLLECT_DUE (heap/collect.h): what the deadline
 * found due; COLLECT_NOW: collect every heap it can without waiting and purge
 * all free memory, keeping the mappings; COLLECT_FORCE: malloc_trim, also
 * unmapping cached segments and huge mappings. True if anything went back. */
bool purge_run(int mode) HAK_HIDDEN;

void purger_atfork_child(void) HAK_HIDDEN;
void purger_stop(void) HAK_HIDDEN;  /* library teardown: the thread exits, nothing waits for it */

#endif
