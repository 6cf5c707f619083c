/* init.h — process-wide start-up, run once, on the first allocation or from
 * the library constructor, whichever comes first. */
#ifndef HAK_INIT_H
#define HAK_INIT_H

#include "hak_internal.h"

/* 0 none, 2 done; while running, minus the pid of the process running it */
extern _Atomic(int) hak_init_state HAK_HIDDEN;

HAK_INLINE bool hak_init_done(void) {
  return atomic_load_explicit(&hak_init_state, memory_order_acquire) == 2;
}
/* Runs start-up; false while another caller (or this one, recursively) is
 * still inside it: such allocations go to the shared heap. */
bool hak_init(void) HAK_HIDDEN;
void thread_key_init(void) HAK_HIDDEN;

#endif
