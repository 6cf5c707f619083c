/* lock.h — a small spin-then-yield lock for cold paths (segment manager,
 * abandoned pages, heap pool). Unlike a pthread mutex it needs no
 * initialisation, so it works before constructors and is trivially reset in
 * a forked child. */
#ifndef HAK_LOCK_H
#define HAK_LOCK_H

#include "hak_internal.h"
#include <sched.h>

typedef struct { _Atomic(int) v; } hak_lock_t;
#define HAK_LOCK_INIT {0}

HAK_INLINE void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

HAK_INLINE void hak_lock(hak_lock_t *l) {
  for (unsigned spins = 0;; spins++) {
    if (atomic_load_explicit(&l->v, memory_order_relaxed) == 0 &&
        !atomic_exchange_explicit(&l->v, 1, memory_order_acquire))
      return;
    if (spins < 64) cpu_relax();
    else sched_yield();
  }
}

HAK_INLINE void hak_unlock(hak_lock_t *l) { atomic_store_explicit(&l->v, 0, memory_order_release); }
HAK_INLINE void hak_lock_reset(hak_lock_t *l) { atomic_store_explicit(&l->v, 0, memory_order_relaxed); }

#endif
