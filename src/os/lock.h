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
 * Fast and standard builds keep the lock a bare int: the name is dropped.
 *
 * Fork. The prepare handler takes every process-wide lock (hak_lock_fork)
 * and the parent handler releases them (hak_unlock_fork); the child resets
 * them. Prepare handlers run in reverse order of registration, so those of a
 * library that registered before HAKMEM run after HAKMEM's, while every lock
 * is held, and may allocate. The thread that forks therefore goes through
 * its own fork-held locks: a lock taken for fork holds the value 2, and
 * hak_fork_holder names the forking thread from its prepare handler to its
 * parent/child handler; while it is 2 no other thread is inside, so the
 * holder enters and leaves without touching it (hak_unlock leaves a 2
 * alone). Other threads wait, as for any held lock; a second thread forking
 * at the same time waits in hak_fork_begin, holding no lock of HAKMEM's. */
#ifndef HAK_LOCK_H
#define HAK_LOCK_H

#include "hak_internal.h"
#include <pthread.h>
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

/* The forking thread (pthread_self, which a forked child's thread keeps),
 * between HAKMEM's prepare and parent/child handlers. No TLS of its own:
 * the static TLS block HAKMEM needs stays as small as it was. */
#define HAK_LOCK_FORK 2
extern _Atomic(uintptr_t) hak_fork_holder HAK_HIDDEN;
HAK_INLINE bool hak_lock_fork_mine(void) {
  return atomic_load_explicit(&hak_fork_holder, memory_order_relaxed) == (uintptr_t)pthread_self();
}

/* Taken, or passed through by the thread forking while it is fork-held. */
HAK_INLINE bool hak_trylock(hak_lock_t *l) {
  int v = atomic_load_explicit(&l->v, memory_order_relaxed);
  if (v == 0 && atomic_compare_exchange_strong_explicit(&l->v, &v, 1, memory_order_acquire, memory_order_relaxed))
    return true;
  return v == HAK_LOCK_FORK && hak_lock_fork_mine();
}

/* A lock that is not process-wide (one shard's, taken by the threads of that
 * shard): the same spin-then-yield and fork rules, never counted. */
HAK_INLINE void hak_lock_local(hak_lock_t *l) {
  for (unsigned spins = 0;; spins++) {
    int v = atomic_load_explicit(&l->v, memory_order_relaxed);
    if (v == 0 && atomic_compare_exchange_weak_explicit(&l->v, &v, 1, memory_order_acquire, memory_order_relaxed))
      return;
    if (v == HAK_LOCK_FORK && hak_lock_fork_mine()) return; /* held for our own fork */
    if (spins < 64) cpu_relax();
    else sched_yield();
  }
}

HAK_INLINE void hak_lock(hak_lock_t *l) {
  for (unsigned spins = 0;; spins++) {
    int v = atomic_load_explicit(&l->v, memory_order_relaxed);
    if (v == 0 && atomic_compare_exchange_weak_explicit(&l->v, &v, 1, memory_order_acquire, memory_order_relaxed))
      break;
    if (v == HAK_LOCK_FORK && hak_lock_fork_mine()) return; /* held for our own fork */
    if (spins < 64) cpu_relax();
    else sched_yield();
  }
#if HAK_OBSERVE
  atomic_fetch_add_explicit(&l->acquisitions, 1, memory_order_relaxed);
  if (HAK_UNLIKELY(!atomic_load_explicit(&l->listed, memory_order_relaxed))) hak_lock_enlist(l);
#endif
}

HAK_INLINE void hak_unlock(hak_lock_t *l) {
  if (atomic_load_explicit(&l->v, memory_order_relaxed) == HAK_LOCK_FORK) return; /* the holder passing through */
  atomic_store_explicit(&l->v, 0, memory_order_release);
}
HAK_INLINE void hak_lock_reset(hak_lock_t *l) { atomic_store_explicit(&l->v, 0, memory_order_relaxed); }

/* fork: prepare, parent. Only between hak_fork_begin and hak_fork_end. */
HAK_INLINE void hak_lock_fork(hak_lock_t *l) {
  for (unsigned spins = 0;; spins++) {
    int v = 0;
    if (atomic_compare_exchange_weak_explicit(&l->v, &v, HAK_LOCK_FORK, memory_order_acquire, memory_order_relaxed))
      return;
    if (spins < 64) cpu_relax();
    else sched_yield();
  }
}
HAK_INLINE void hak_unlock_fork(hak_lock_t *l) { atomic_store_explicit(&l->v, 0, memory_order_release); }
/* glibc runs prepare handlers without a lock of its own, so two threads may
 * fork at once: the second waits here until the first is through. */
HAK_INLINE void hak_fork_begin(void) {
  for (unsigned spins = 0;; spins++) {
    uintptr_t none = 0;
    if (atomic_compare_exchange_weak_explicit(&hak_fork_holder, &none, (uintptr_t)pthread_self(), memory_order_acquire,
                                              memory_order_relaxed))
      return;
    if (spins < 64) cpu_relax();
    else sched_yield();
  }
}
HAK_INLINE void hak_fork_end(void) { atomic_store_explicit(&hak_fork_holder, 0, memory_order_release); }

#endif
