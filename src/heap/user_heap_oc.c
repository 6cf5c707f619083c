/* user_heap_oc.c — the owner's cache of first-class heaps: whether it is on
 * (membarrier), and taking it away from its owner (uheap_revoke). The cache
 * itself is popped in user_heap.h (uheap_cached) and refilled and cleared
 * in user_heap.c.
 *
 * Owner cache. The thread that created a heap owns it (oc->owner, its
 * token: the address of its TLS block, user_heap.h) and allocates from a
 * cache of its own: per class, a list of blocks reserved for it under the
 * lock (counted in their pages' `used`, as blocks in a thread's cache are),
 * up to 8 KiB of the class per refill (refill_count). Its hak_heap_malloc
 * pops a block with no lock and no atomic read-modify-write:
 *     busy = 1 (relaxed store); compiler barrier;
 *     if owner == me: pop list[cls] (one load, one store);
 *     busy = 0 (release store)
 * A miss refills under the lock with busy still set. Only the owner ever
 * touches list[]; frees never do (every free takes the lock and puts the
 * block on its page), so the lock and the cache never meet over a block.
 * Taking the cache away (uheap_revoke, at destroy and delete, before the
 * lock is taken): owner = NULL; if the owner is another thread, a private
 * expedited membarrier (a full barrier on every CPU running one of our
 * threads: the owner's side pays no fence, this side pays one system call);
 * then wait until busy is 0. Either the owner's second read of owner comes
 * after the barrier and sees NULL (it takes the lock and finds the heap not
 * live), or its busy = 1 came before it and the revoker waits for the pop
 * or refill to end; the release of busy then hands list[] over, and the
 * revoker, under the lock, drops the lists (destroy: their blocks go with
 * their pages) or puts each block back on its page (delete: the pages must
 * count only blocks the program holds when they become the process's). An
 * owner waiting for h->lock with busy set is fine: the revoker holds no lock
 * while it waits. Without membarrier (an old kernel, a seccomp filter) no
 * heap gets an owner and every allocation takes the lock. The secure and
 * valgrind builds have no owner cache (user_heap.h).
 *  - A thread preempted in the middle of a pop delays only a revoker of its
 *    heap; one preempted after reading owner != NULL but before busy = 1
 *    reads owner again after it. A stale owner of a destroyed heap whose
 *    record was reused sets busy for a moment, sees another owner and takes
 *    the lock (the program's use of a dead heap, as before).
 *  - Thread exit: nothing. The cache stays with the heap; a later thread
 *    whose TLS block lands at the same address inherits it, consistently
 *    (the dead thread was in no operation); destroy and delete clear it.
 *  - Fork: a pop is one store to list[], so the child sees a consistent
 *    list whatever the owner was doing; a refill is under h->lock, which
 *    the prepare handler holds. busy may be caught at 1: the child handler
 *    clears it, registers membarrier again and keeps only the forking
 *    thread as an owner (uheap_oc_child).
 *  - Builds with checks stamp reserved blocks (HAK_UHEAP_RESERVED): a free
 *    of one (a block freed twice, the first time before a refill took it)
 *    is reported as a double free. */
#include "heap/user_heap.h"
#include "os/lock.h"

#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

/* 1: the owner's cache is on (private expedited membarrier registered),
 * 2: off (the kernel or a seccomp filter refuses membarrier), 0: not asked. */
#if HAK_UHEAP_OWNER_CACHE
static _Atomic(int) oc_state;
#endif

bool uheap_owner_cache_ok(void) {
#if HAK_UHEAP_OWNER_CACHE
  int st = atomic_load_explicit(&oc_state, memory_order_relaxed);
  if (HAK_UNLIKELY(st == 0)) { /* two threads may both ask: registering twice is harmless */
    st = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 ? 1 : 2;
    atomic_store_explicit(&oc_state, st, memory_order_relaxed);
  }
  return st == 1;
#else
  return false;
#endif
}

/* After this, no thread is in h's cache or will enter it: owner cleared,
 * then (if the owner is another thread) a barrier on every CPU running one
 * of our threads, then a wait for the owner to leave. No lock held: the
 * owner may be waiting for h->lock while busy. */
void uheap_revoke(hak_heap_t *h) {
  hak_uheap_oc_t *oc = uheap_oc(h);
  void *o = atomic_load_explicit(&oc->owner, memory_order_relaxed);
  if (!o) return;
  atomic_store_explicit(&oc->owner, NULL, memory_order_relaxed);
  if (o != uheap_self()) {
    /* cannot fail once registered (uheap_owner_cache_ok) */
    syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
    for (unsigned spins = 0; atomic_load_explicit(&oc->busy, memory_order_acquire); spins++) {
      if (spins < 64) cpu_relax();
      else sched_yield();
    }
  }
}

/* The registration is the process's memory's, and the child has a copy it
 * may not carry over: asked again. */
bool uheap_owner_cache_atfork_child(void) {
#if HAK_UHEAP_OWNER_CACHE
  if (atomic_load_explicit(&oc_state, memory_order_relaxed) != 1) return false;
  int st = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 ? 1 : 2;
  atomic_store_explicit(&oc_state, st, memory_order_relaxed);
  return st == 1;
#else
  return false;
#endif
}

/* An owner that was in its cache is not in the child: it left the lists
 * consistent (a pop is one store, a refill holds h->lock, which the
 * prepare handler took), but busy stays set. An owner other than the
 * forking thread is gone: a thread of the child whose TLS block lands at
 * its address must not inherit the cache while another destroys the heap
 * without a working barrier, so the cache goes ownerless (its blocks stay
 * reserved until destroy drops them or delete gives them back). */
void uheap_oc_child(hak_heap_t *h, bool oc_on) {
  hak_uheap_oc_t *oc = uheap_oc(h);
  atomic_store_explicit(&oc->busy, 0, memory_order_relaxed);
  if (!oc_on || atomic_load_explicit(&oc->owner, memory_order_relaxed) != uheap_self())
    atomic_store_explicit(&oc->owner, NULL, memory_order_relaxed);
}
