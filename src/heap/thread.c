/* thread.c — a thread's heap over its life: created on the thread's first
 * allocation, its caches refilled and flushed, parked with its pages at
 * thread exit (heap/heap_exit.c, "Parking") for the next thread. Also
 * the shared heap, which serves allocations no thread heap can (during
 * start-up recursion, and from TLS destructors that run after ours).
 *
 * shared_lock (process-wide) is taken per allocation from the shared heap,
 * which has no thread cache: start-up recursion, and threads past their
 * exit (TLS destructors that run after ours). No thread with a live heap
 * takes it. Under it heap_take runs on the shared heap (under that heap's
 * own lock too): a class's page lists, and when they are empty a new page
 * (heap_page_new), which may map a segment: the one system call that can
 * run under it, at most once per page that the shared heap cuts, as under
 * any heap's lock in a refill (the shard locks are released by then:
 * segment/shard.h). Left so: those callers are rare after start-up, and a
 * wait for it is bounded by one refill. */
#include "heap/heap.h"
#include "heap/pool.h"
#include "heap/size_class.h"
#include "front/init.h"
#include "remote/remote.h"
#include "os/lock.h"
#include "os/os.h"
#include "os/vg_quiet.h"
#include "policy/config.h"
#include "stats/stats.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

void *const hak_no_slots[2] = {NULL, HAK_SLOT_FULL};
/* Initialised (.tdata, not .tbss): a new thread's bins must already send
 * free to its miss, which a zero `ptr` would not (heap.h: hak_bin_t). */
__thread hak_tls_t hak_tls = {.bins = {[0 ... HAK_NCLASSES + 1] = {NULL, (void **)&hak_no_slots[1]}}};

static hak_lock_t shared_lock = HAK_LOCK_NAMED("shared_heap");
static hak_heap_t shared_heap;

static pthread_key_t exit_key;

/* Every heap ever mapped, for process-wide collection and the pool's fork
 * repair: pushed once when mapped, never removed (heaps are recycled, never
 * unmapped). */
static _Atomic(hak_heap_t *) all_heaps = &shared_heap;

hak_heap_t *heap_all_first(void) { return atomic_load_explicit(&all_heaps, memory_order_acquire); }
hak_heap_t *heap_shared(void) { return &shared_heap; }

void heap_all_push(hak_heap_t *h) {
  hak_heap_t *head = atomic_load_explicit(&all_heaps, memory_order_relaxed);
  do {
    h->all_next = head;
  } while (!atomic_compare_exchange_weak_explicit(&all_heaps, &head, h, memory_order_release, memory_order_relaxed));
}

static void thread_exit(void *arg) {
  (void)arg;
  hak_tls_t *t = &hak_tls;
  if (t->state != HAK_THREAD_LIVE) return;
  hak_heap_t *h = t->heap;
  tcache_publish(t);
  HAK_VG_ENTER(); /* the flush writes free blocks */
  heap_flush_all(t);
  /* From here on this thread allocates from the shared heap and frees
   * remotely: other TLS destructors may still run after this one. */
  for (unsigned v = 0; v < HAK_NCLASSES + 2; v++) t->bins[v] = HAK_BIN_NONE;
  t->state = HAK_THREAD_DEAD;
  t->heap = NULL;
  HAK_STAT_OWN(NULL); /* before h goes back: another thread may take it */
  heap_park(h);
  pool_retire(h, true);
  HAK_VG_LEAVE();
  HAK_STAT_INC(HAK_EV_THREAD_EXIT);
}

/* Without its exit key a heap would never be torn down, and exit_key (0)
 * would name another library's key: threads then use the shared heap. */
static bool exit_key_ok;

static void borrow_init(void); /* (below, with borrowing) */

void thread_key_init(void) {
  borrow_init();
  pool_init();
  exit_key_ok = pthread_key_create(&exit_key, thread_exit) == 0;
}

bool thread_heap_init(hak_tls_t *t, hak_heap_t *hint) {
  if (t->state != HAK_THREAD_NEW) return t->state == HAK_THREAD_LIVE;
  if (!hak_init_done() && !hak_init()) return false;
  if (HAK_UNLIKELY(!exit_key_ok)) return false;
  hak_heap_t *h = pool_take((int)syscall(SYS_gettid), hint);
  if (!h) return false;
  heap_lock(h); /* a collector may look at a recycled heap */
  /* A recycled heap starts afresh: the arrays cleared whole (memset; tcache_init). */
  for (unsigned c = 0; c < HAK_NCLASSES; c++) h->batch[c] = 4;
  memset(h->allocates, 0, sizeof h->allocates);
  memset(h->drain, 0, sizeof h->drain);
  memset(h->refill_run, 0, sizeof h->refill_run);
  for (unsigned c = 0; c < HAK_NCLASSES; c++) atomic_store_explicit(&h->dry[c], 0, memory_order_relaxed);
  /* Empty after a thread exit; a heap of a thread that vanished in a fork
   * may come back with lists whose blocks are lost to the child (as its
   * cached blocks are: remote.c, "Fork"). */
  memset(&h->pend[1], 0, HAK_NCLASSES * sizeof h->pend[1]);
  /* Caps start small; heap/tcache.c grows them as classes are used, and
   * lays out the slot areas by cap. */
  tcache_init(t, h);
  heap_unlock(h);
  t->heap = h;
  HAK_STAT_OWN(&h->stats);
  t->state = HAK_THREAD_LIVE;
  /* May allocate (for high key numbers); the heap is live, so that works. */
  pthread_setspecific(exit_key, h);
  HAK_STAT_INC(HAK_EV_THREAD_INIT);
  return true;
}

void *shared_alloc(unsigned cls) {
  void *p = NULL;
  hak_lock(&shared_lock);
  unsigned n = heap_take(&shared_heap, cls, &p, 1, NULL, true);
  hak_unlock(&shared_lock);
  HAK_STAT_INC(HAK_EV_SHARED_ALLOC);
  return n ? p : NULL;
}

/* Borrowing. A class with no free block left (its cache, its pending list
 * and its pages' free lists all empty) carves new blocks or cuts a new page,
 * and keeps them: a class's share of the blocks a thread has out swings, and
 * each class grows to the most it ever had out, never giving memory to its
 * neighbours. A producer whose blocks all come back through remote frees in
 * allocation order (bench_prodcons) held ~0.6 MiB above its blocks in flight
 * that way: a model of its 32 classes and 4096-block ring carved 2814 KiB for
 * 2212 KiB out. So before it grows, a class takes one block of the pending
 * list of one of the next classes (freed blocks the thread is handing out
 * again: a lender is a class in steady reuse, not one growing itself), the
 * nearest first, up to BORROW_SPAN classes and at most twice its own size
 * (above 1 KiB, only the next two classes: borrow_fits),
 * and hands it out as it is: free() finds a block's class from its address,
 * as for any block.
 *  - The span: two classes (12-25% larger) left the classes of 512-1024 B
 *    growing by 30-60 KiB each over a bench_prodcons run; up to twice the
 *    size, that is up to 8 classes above 256 B (bench_prodcons 1 3000000
 *    peak RSS, medians of 15 alternating runs: 4.80 MB with two, 4.73 with
 *    twice the size, 4.69 with 16 classes up to 4 times the size, which a
 *    long-lived block taken from a neighbour would waste).
 *  - Any block of a lender serves a malloc: every block lies at a multiple
 *    of 16 B. Aligned requests (front/api.c: a class whose size is a
 *    multiple of the alignment) do not borrow (hak_tls.aligned). Borrowing
 *    used to take only blocks aligned as the class's own, for both, and the
 *    pending lists of the 576, 704, 832 and 960 B classes seldom start at a
 *    multiple of 128, 256 or 512 B: the classes of 512, 640, 768 and 896 B
 *    borrowed little (4.80 MB with two classes at 16 B against 4.86).
 *  - Only a class refilled BORROW_RUN times since its last flush (a class
 *    the thread allocates and others free): a thread that frees its own
 *    blocks (bench_larson) went to the slow path for block after block of
 *    its classes as they grew, +8% instructions, and it gains nothing.
 *  - dry: once a refill found no free block on the class's pages, the next
 *    ones borrow without the heap's lock or a cold event, until blocks of
 *    the class come back to the pages or remote frees wait (heap.h).
 *  - One block at a time: a fixed batch into the cache (4, 8 or up to the
 *    refill's size) kept the lenders short and gave back most of the gain
 *    (bench_prodcons peak RSS, medians of 11: 4.70 MB one, 4.79 four, 4.84
 *    eight, 4.96 the refill's). But a class that keeps growing (bench_stress:
 *    a thread's classes of 8-128 B requests, more allocated than freed while
 *    it runs) went to the refill for every malloc, ~100 K of its ~126 K
 *    refills per run at ~170 instructions each (the lender scan, the purge
 *    tick). So the borrow names its lender in the class's pending-list
 *    record (hak_pend_t.lend), and the class's next misses, its own pending
 *    list empty, pop the lender's list as they would their own (front/
 *    malloc.c, alloc_lent: no refill, no lock, the one-ahead prefetch), for
 *    as long as the class stays dry, no remote frees wait and it does not
 *    flush. Half of a long list taken into the cache at once (ec0d03b) cut
 *    the refills as well, but walked the list there, link after link, each
 *    a cache miss waiting on the previous one, worst on two CPUs (90% of
 *    the walk's samples on that load; 0.7% of all bench_stress samples
 *    unpinned, 0.1% pinned to one CPU); popped one per malloc, each miss
 *    overlaps the program's work (bench_prodcons 1 3000000 cpu 0.97, peak
 *    RSS lower; see the commit). The borrowing class's cache never holds a
 *    lender's block: aligned requests (which do not borrow) and the double-
 *    free search need no case of their own. The dry path skips the purge
 *    tick (no lock, no cold event: the next refill or flush looks).
 * Not in the secure build (a block records its requested size in its
 * class's layout) nor with HAKMEM_ZERO_ON_FREE (which checks blocks by their
 * class's size). */
#define BORROW_SPAN 16
#define BORROW_RUN 4
/* Whether class l may lend to class cls (l > cls). Above 1 KiB only the next
 * two classes, as before: with the wider span bench_sizemix's classes of 1-256
 * KiB lent and carved more (minor faults +5.8%, IQR 1.026-1.093, bench.py
 * --ab, 21 runs; 0.96 and 1.01 with this bound), for no gain in prodcons. */
static bool borrow_fits_slow(unsigned cls, unsigned l) {
  return l <= cls + BORROW_SPAN && l < HAK_NCLASSES && hak_class_size[l] <= 2 * (size_t)hak_class_size[cls] &&
         (l <= cls + 2 || hak_class_size[l] <= HAK_SMALL_TAB_MAX);
}
/* The lenders of class cls are the classes cls+1 .. borrow_end[cls]-1 (each
 * condition above, once false, stays false as l grows), worked out once
 * (thread_key_init): the refills of bench_sizemix evaluated the conditions
 * for every class looked at, 0.7% of the run's instructions. */
static uint8_t borrow_end[HAK_NCLASSES];
_Static_assert(HAK_NCLASSES <= UINT8_MAX, "borrow_end holds a class");
static void borrow_init(void) {
  for (unsigned c = 0; c < HAK_NCLASSES; c++) {
    unsigned l = c + 1;
    while (borrow_fits_slow(c, l)) l++;
    borrow_end[c] = (uint8_t)l;
  }
}
#if !HAK_SECURE
HAK_INLINE bool borrow_fits(unsigned cls, unsigned l) { return l < borrow_end[cls]; }
#endif

static unsigned borrow_lender(hak_tls_t *t, unsigned cls) {
#if HAK_SECURE
  (void)t, (void)cls;
  return 0;
#else
  if (t->heap->refill_run[cls] < BORROW_RUN || t->aligned || HAK_UNLIKELY(hak_config.zero_on_free)) return 0;
  for (unsigned l = cls + 1; borrow_fits(cls, l); l++)
    if (pend_of(t, l)->head) return l;
  return 0;
#endif
}

/* The first block of the lender's pending list, for the malloc at hand;
 * the class's later misses pop the same list (front/malloc.c, alloc_lent)
 * while the class stays dry. NULL if the list is empty. */
static void *borrow_block(hak_tls_t *t, unsigned cls, unsigned lender) {
  hak_pend_t *q = pend_of(t, lender);
  if (!q->head) return NULL;
  void *p;
  PEND_POP(q, p);
  pend_of(t, cls)->lend = lender + 1;
  return p;
}

void *heap_refill_alloc(hak_tls_t *t, unsigned cls, bool *cold) {
  *cold = true;
  if (HAK_UNLIKELY(t->state != HAK_THREAD_LIVE) && !thread_heap_init(t, NULL)) return shared_alloc(cls);
  hak_bin_t *b = bin_of(t, cls);
  if (b->top) return bin_pop(b);
  bin_open(t, cls);
  void *p;
  hak_heap_t *h = t->heap;
  /* The class found its pages without a free block last time, and nothing
   * came back to them since, nor waits in remote frees: borrow at once. */
  if (atomic_load_explicit(&h->dry[cls], memory_order_relaxed) &&
      !atomic_load_explicit(&h->remote_pages, memory_order_relaxed)) {
    unsigned lender = borrow_lender(t, cls);
    if (lender && (p = borrow_block(t, cls, lender))) {
      *cold = false;
      return p;
    }
  }
  h->drain[cls] |= 1;
  if (h->refill_run[cls] < UINT8_MAX) h->refill_run[cls]++;
  tcache_cold_event(t, cls, true);
  uint32_t cap = heap_area(h, cls)->cap;
  if (HAK_UNLIKELY(cap == 0)) return heap_take(h, cls, &p, 1, NULL, true) ? p : NULL;
  /* Slow start: a thread that needs few blocks of a class carves (and at
   * exit writes to) few; one that keeps refilling gets half a cache each time. */
  unsigned half = cap / 2 ? cap / 2 : 1;
  unsigned want = h->batch[cls] < half ? h->batch[cls] : half;
  if (h->batch[cls] < half) h->batch[cls] = (uint16_t)(2 * h->batch[cls] < half ? 2 * h->batch[cls] : half);
  hak_pend_t *q = pend_of(t, cls);
  unsigned lender = borrow_lender(t, cls);
  void **slots = heap_area(h, cls)->slots;
  unsigned n = heap_take(h, cls, slots, want, q, lender == 0);
  if (!n && !q->head && lender) {
    atomic_store_explicit(&h->dry[cls], 1, memory_order_relaxed);
    if ((p = borrow_block(t, cls, lender))) {
      tcache_seen(t, cls);
      return p;
    }
    n = heap_take(h, cls, slots, want, q, true);
  }
  if (!n) {
    if (!q->head) return NULL;
    void *p;
    PEND_POP(q, p); /* a page's free list came, not walked */
    tcache_seen(t, cls);
    return p;
  }
  /* bin_set_count and tcache_seen, from what is at hand (open above) */
  b->ptr = slots + n - 1;
  b->top = slots[(int)n - 2]; /* the NULL below the area when n == 1 */
  tcache_seen_as(h, cls, n - 1, n > 1 ? b->top : q->head);
  return slots[n - 1];
}

/* Drain. A class this thread only frees, and only other threads' blocks
 * of (a consumer), gains nothing from caching them: it never allocates
 * them again, and every block parked here is one its owner cannot reuse,
 * so the owner carves more (bench_prodcons: ~0.8 MiB more resident). Such a
 * class (no refill since its last flush, which sent only others' blocks)
 * keeps a small cap (tcache.c, tcache_drain_event) and flushes its whole
 * cache, so each run still goes back with one CAS per page. */
void heap_flush_free(hak_tls_t *t, unsigned cls, void *p) {
  /* A thread whose first call frees: the heap that owns the block, if it
   * is parked and near the top of the pool (heap/pool.c, free_pop_hinted). */
  if (HAK_UNLIKELY(t->state != HAK_THREAD_LIVE) &&
      !thread_heap_init(t, t->state == HAK_THREAD_NEW
                               ? atomic_load_explicit(&page_of(p)->owner, memory_order_relaxed)
                               : NULL)) {
    /* No heap of our own (exited, or start-up): hand the block to its page's owner. */
    remote_push(page_of(p), p, p, 1);
    HAK_CSTAT_ADD(cls, HAK_CS_RETURNED, 1);
    HAK_STAT_INC(HAK_EV_REMOTE_FREE);
    HAK_STAT_INC(HAK_EV_REMOTE_BATCH);
    return;
  }
  hak_bin_t *b = bin_of(t, cls);
  hak_heap_t *h = t->heap;
  /* A class with a pending list allocates from it (no refill counted). */
  bool drain = h->drain[cls] == 2 && !pend_of(t, cls)->head;
  /* The count, not bin_room: a stale FULL word below the cap (an area
   * moved or laid out again, tcache.c) only sends a free here, to be
   * pushed over. */
  bin_open(t, cls);
  hak_area_t *a = heap_area(h, cls);
  void **slots = a->slots;
  uint32_t count = (uint32_t)(b->ptr - slots);
  if (count >= a->cap) {
    if (drain) tcache_drain_event(t, cls);
    else tcache_cold_event(t, cls, false);
    /* The events may have changed all three: another class's growth
     * moves the areas above its own (tcache.c, slots_widen). */
    slots = a->slots;
    count = (uint32_t)(b->ptr - slots);
  }
  uint32_t cap = a->cap;
  if (count < cap) { /* the heap was just created, or the cap grew */
    bin_push(b, p);
    tcache_seen(t, cls);
    return;
  }
  if (HAK_UNLIKELY(cap == 0)) {
    h->drain[cls] = heap_return_blocks(h, &p, 1) ? 2 : 0;
    return;
  }
  h->refill_run[cls] = 0;
  pend_of(t, cls)->lend = 0;
  /* Flush the older half: the newer blocks are the ones still warm in cache. */
  unsigned k = drain ? count : count - cap / 2;
  h->drain[cls] = heap_return_blocks(h, slots, k) == k ? 2 : 0;
  if (count > k) memmove(slots, slots + k, (size_t)(count - k) * sizeof(void *)); /* (a drain keeps none) */
  count -= k;
  slots[count] = p;
  b->ptr = slots + count + 1;
  b->top = p;
  /* tcache_seen, from what is at hand (the flush is counted in heap_return_blocks) */
  tcache_seen_as(h, cls, count + 1, p);
}

void heap_flush_all(hak_tls_t *t) {
  if (t->state != HAK_THREAD_LIVE) return;
  for (unsigned c = 0; c < HAK_NCLASSES; c++) {
    if (pend_of(t, c)->head) heap_return_pending(t->heap, pend_of(t, c));
    uint32_t n = bin_count(t, c);
    if (!n) continue;
    heap_return_blocks(t->heap, bin_slots(t, c), n);
    bin_set_count(t, c, 0);
  }
  heap_collect_remote(t->heap);
}

/* fork: the shared heap's lock is taken for the fork and the child resets
 * it. The child then repairs what the threads that do not exist in it left
 * behind (remote.c, "Fork"): the pool gives the heaps of those threads back
 * (heap/pool.c: their pages abandoned for the child's threads to adopt, only
 * the blocks in their caches lost, unless they were caught half-changed),
 * dying heaps stop waiting for signals that can no longer come, and the
 * surviving thread's heap and the shared heap collect the pages whose
 * signal was lost. */
void heap_atfork_prepare(void) { hak_lock_fork(&shared_lock); }
void heap_atfork_parent(void) { hak_unlock_fork(&shared_lock); }
void heap_atfork_child(void) {
  hak_lock_reset(&shared_lock);
  hak_heap_t *mine = hak_tls.state == HAK_THREAD_LIVE ? hak_tls.heap : NULL;
  pool_atfork_child(mine);
  if (mine) heap_repair_after_fork(mine);
  heap_repair_after_fork(&shared_heap);
}
