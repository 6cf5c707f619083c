/* lock.h — a small spin-then-yield lock for cold paths (segment manager,
 * abandoned pages, heap pool). Unlike a pthread mutex it needs no
 * initialisation, so it works before constructors and is trivially reset in
 * a forked child.
 *
 * Every process-wide lock is defined with its name:
 *   static hak_lock_t seg_lock = HAK_LOCK_NAMED("segment");
 * The observe build counts each lock's acquisitions (how often threads meet
 * on shared state: the figure that predicts behaviour on many cores) and the
 * HAKMEM_STATS=1 report prints one `lock <name> <acquisitions>` line per lock.
 * A lock joins the report's list on its first acquisition, with one CAS onto
 * a push-only list (never unlinked, so a fork or a preempted pusher leaves it
 * consistent: a lock is either linked or is linked by its next acquisition).
 * Fast and standard builds keep the lock a bare int: the name is dropped. */
#ifndef HAK_LOCK_H
#define HAK_LOCK_H

#include "hak_internal.h"
#include <sched.h>

#if HAK_OBSERVE
typedef struct hak_lock {
  _Atomic(int)         v;
  _Atomic(int)         listed;        /* on hak_lock_list */
  _Atomic(uint64_t)    acquisitions;
  const char          *name;
  struct hak_lock     *list_next;
} hak_lock_t;
#define HAK_LOCK_NAMED(n) {0, 0, 0, (n), NULL}
/* Locks acquired at least once, newest first (observe build only). */
extern _Atomic(hak_lock_t *) hak_lock_list HAK_HIDDEN;
void hak_lock_enlist(hak_lock_t *l) HAK_HIDDEN;
#else
typedef struct { _Atomic(int) v; } hak_lock_t;
#define HAK_LOCK_NAMED(n) {0}
#endif
/* Unnamed: still counted (as "unnamed"); prefer HAK_LOCK_NAMED. */
#define HAK_LOCK_INIT HAK_LOCK_NAMED(NULL)

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
      break;
    if (spins < 64) cpu_relax();
    else sched_yield();
  }
#if HAK_OBSERVE
  atomic_fetch_add_explicit(&l->acquisitions, 1, memory_order_relaxed);
  if (HAK_UNLIKELY(!atomic_load_explicit(&l->listed, memory_order_relaxed))) hak_lock_enlist(l);
#endif
}

HAK_INLINE void hak_unlock(hak_lock_t *l) { atomic_store_explicit(&l->v, 0, memory_order_release); }
HAK_INLINE void hak_lock_reset(hak_lock_t *l) { atomic_store_explicit(&l->v, 0, memory_order_relaxed); }

#endif
