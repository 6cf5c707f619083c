/* lock.c — who holds the locks for a fork, and the observe build's list of
 * process-wide locks, for the acquisition counts in the statistics report
 * (see lock.h). */
#include "os/lock.h"

_Atomic(uintptr_t) hak_fork_holder;

#if HAK_OBSERVE
_Atomic(hak_lock_t *) hak_lock_list;

/* Called by the holder of l, so `listed` needs no CAS of its own: no other
 * thread can be enlisting l at the same time. */
void hak_lock_enlist(hak_lock_t *l) {
  atomic_store_explicit(&l->listed, 1, memory_order_relaxed);
  hak_lock_t *top = atomic_load_explicit(&hak_lock_list, memory_order_relaxed);
  do {
    l->list_next = top;
  } while (!atomic_compare_exchange_weak_explicit(&hak_lock_list, &top, l, memory_order_release,
                                                  memory_order_relaxed));
}
#endif
