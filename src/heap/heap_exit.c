/* heap_exit.c — the end of a thread heap's life: parking it with its pages
 * when its thread exits (heap_park) and giving a parked heap's pages up when
 * no thread takes it (heap_unpark), tearing down the heap of a thread that
 * vanished (heap_destroy: empty pages back to their segments, the rest
 * abandoned for adoption), releasing what a dying heap still waited for
 * (heap_reap), and repairing a live heap in a forked child
 * (heap_repair_after_fork). The page side of a living heap (refill, flush,
 * remote collection, retiring empty pages) is heap.c's; this file only
 * calls into it (heap_collect_remote_held, heap_page_collect). Runs under
 * h->lock, as heap.c.
 *
 * Parking. An exiting thread, its caches and pending lists flushed
 * (thread.c), keeps its pages with a few blocks out on its heap's lists,
 * owner unchanged (its empty pages go to the exchange, as at heap_destroy;
 * those mostly handed out are abandoned: "Mostly handed out" below), and
 * the heap goes back to the pool (heap/pool.c), whose free stack hands the
 * most recently parked heap to the next thread start (a thread whose first
 * call frees a block: the heap that owns it, if parked near the top), and
 * that thread goes on with the pages. Tearing down at every exit abandoned each page with blocks out
 * (bench_thread_churn: ~32 a thread, the 8 blocks a thread leaves to main
 * and main's cached frees keep every class's page in use) onto the
 * process-wide stacks, and the next thread adopted them back one by one, a
 * few atomic operations on shared lines each: adopt_page was the
 * allocator's most sampled function there. A parked heap is to the other
 * threads what an idle thread's heap is (collect.c): remote frees into its
 * pages signal it as before (it is never unmapped), the purge deadline's
 * collector takes them in, gives its kept empty pages back, and peers about
 * to cut a page may take its pages (collect.c, "Pages to a peer"). No signal
 * needs waiting for: the heap stays the pages' owner, so a signal on its way
 * lands on its stack and the next look (the next thread's refill, a
 * collector) takes it. A parked heap that no thread took for a collector
 * pass (its activity count unchanged), or any at a forced pass (malloc_trim,
 * hak_collect), gives its pages up as heap_destroy would, under its lock
 * (heap_unpark): retired if empty, else abandoned; a page whose bit was
 * already set has a signal on its way to the heap and stays until a later
 * look takes it. The thread start that pops the heap meanwhile waits for
 * that lock before it touches the lists (thread.c, thread_heap_init).
 * Fork: the child gives up the parked heaps' pages as the other heaps' of
 * threads it does not have (heap/pool.c).
 *
 * Mostly handed out. A page with more than 1/PARK_OUT_SHARE of its blocks
 * out at the exit is not parked but abandoned, as heap_unpark would (its
 * bit fenced: clear, the page is released; already set, a signal is on its
 * way to h and the page stays parked like the others). Such a page has
 * little room for the next thread, and its blocks are in the hands of some
 * thread that will free them: abandoned, it goes to the first thread that
 * frees into it (remote.c, adoption), as at every exit before parking.
 * bench_larson is that pattern: each new thread of a lineage frees the
 * blocks its predecessor allocated (of the pages parked there, 96% had
 * more than 1/8 of their blocks out, 67% more than 7/8); parked whole,
 * those pages stayed with a heap
 * the pool often handed to the other lineage's new thread (whichever heap
 * the first free pointed at), so every such free was remote and the room
 * sat on the wrong heap: larson -16.5% throughput, CPU +6%. In
 * bench_thread_churn, whose gain parking is, 99.9% of the pages parked had
 * less than 1/8 of their blocks out (the 8 a thread leaves to main and
 * main's cached frees, ~11 a page). Keeping pages up to 1/2 out lost larson
 * as much as parking them all (-18.9%, p=0.004, 61 runs); up to 1/4 and
 * 1/8 measured even with tearing down (throughput -1% / +4%, CPU 1.00 /
 * 0.995, n.s.), and 1/4 is the one kept: under load (7-8) ~11% of
 * bench_thread_churn's pages have more than 1/8 out, and 1/8 lost half its
 * fault gain there (~700 minor faults a run against ~450 at 1/4, ~1000
 * tearing down, /usr/bin/time; commit ddc3966).
 * The same fence decides as everywhere a heap gives a page up: only a page
 * whose bit was clear leaves (no signal can be on its way to h, and every
 * later free into it is silent until an adopter takes the list); a
 * thread's frees after its exit (TLS destructors that run after ours,
 * thread.c) are remote frees like any other's, into a parked page (a
 * signal on h's stack) or an abandoned one (silent). */
#include "heap/heap.h"
#include "remote/remote.h"
#include "segment/segment.h"
#include "os/os.h"
#include "policy/config.h"
#include "policy/purger.h"

#include <sched.h>

/* heap_park keeps a page with blocks out only if at most 1/PARK_OUT_SHARE
 * of them are out ("Mostly handed out" above). */
#define PARK_OUT_SHARE 4

/* How long a dying heap waits for signals in flight (remote.c): spins, then
 * yields, then gives up and leaves the rest to heap_reap. */
#define DESTROY_SPINS  64
#define DESTROY_YIELDS 256

/* A page of a heap that is going away: back to its segment if empty, else
 * abandoned with its queued bit kept set (remote frees pile up silently
 * until a live heap adopts it). Its signal, if it had one, has arrived or
 * is known lost, so no thread will push it onto this heap's stack again. */
static void page_release(hak_page_t *p) {
  p->next = p->prev = NULL;
  remote_take(p, true);
  if (p->used == 0) {
    atomic_store_explicit(&p->remote, 0, memory_order_relaxed);
    page_cache_free(NULL, p); /* to the exchange: the next thread takes it */
  } else {
    abandon_page(p);
  }
}

static void page_unlist(hak_heap_t *h, hak_page_t *p) {
  list_remove(p->state == HAK_PAGE_FULL ? &h->full[p->cls] : &h->avail[p->cls], p);
}

/* Dying heap: every page popped from the stack is one whose signal was
 * awaited (its bit was set when the heap fenced it); it can go now. */
static void release_arrived(hak_heap_t *h) {
  hak_page_t *q = atomic_exchange_explicit(&h->remote_pages, NULL, memory_order_acquire);
  while (q) {
    hak_page_t *next = q->qnext;
    page_unlist(h, q);
    page_release(q);
    h->awaiting--;
    q = next;
  }
}

static void release_all(hak_heap_t *h) {
  atomic_store_explicit(&h->remote_pages, NULL, memory_order_relaxed);
  HEAP_FOR_EACH_PAGE(h, list, p) page_release(p);
  for (unsigned c = 0; c < HAK_NCLASSES; c++) h->avail[c] = h->full[c] = (hak_page_list_t){0};
  h->awaiting = 0;
  h->kept_pages = 0;
  /* Only after fork can a heap still hold a page cache here, and its thread
   * (gone) may have been changing it outside any busy mark (large blocks):
   * those pages are lost to the child rather than trusted. */
  h->pcache = (hak_page_cache_t){0};
}

bool heap_destroy(hak_heap_t *h) {
  heap_lock(h);
  busy_begin(h);
  heap_collect_remote_held(h);
  /* Fence every page. One whose bit was clear can go at once: from now on
   * every remote free into it is silent. One whose bit was already set has
   * a signal on our stack or on its way: it stays on our lists until the
   * signal is popped, so the sender, who reads page->owner only after
   * setting the bit, still finds this heap. */
  h->awaiting = 0;
  HEAP_FOR_EACH_PAGE(h, list, p) {
    if (remote_fence(p)) {
      h->awaiting++;
    } else {
      list_remove(list, p);
      page_release(p);
    }
  }
  /* Bounded: a sender preempted between its two steps may take long, and one
   * that vanished in a fork never comes. What is still awaited after this is
   * left to heap_reap; h is not reused until then. */
  for (unsigned i = 0; h->awaiting && i < DESTROY_SPINS + DESTROY_YIELDS; i++) {
    release_arrived(h);
    if (!h->awaiting) break;
    if (i < DESTROY_SPINS) cpu_relax();
    else sched_yield();
  }
  page_cache_flush(&h->pcache);
  h->kept_pages = 0; /* its kept pages are released or awaited: none is reused by h */
  busy_end(h);
  bool done = h->awaiting == 0;
  heap_unlock(h);
  return done;
}

/* Thread exit ("Parking" above; which pages stay: "Mostly handed out"). */
void heap_park(hak_heap_t *h) {
  hak_page_t *empty = NULL; /* to the exchange at once (page_cache_park): any thread takes them */
  heap_lock(h);
  busy_begin(h);
  heap_collect_remote_held(h);
  HEAP_FOR_EACH_PAGE(h, list, p) {
    if (p->used == 0 && remote_idle(p)) {
      page_unkeep(h, p);
      list_remove(list, p);
      p->prev = NULL;
      p->next = empty;
      empty = p;
    } else if (p->used > p->capacity / PARK_OUT_SHARE && !remote_fence(p)) {
      /* mostly handed out: abandoned, as heap_unpark does (a page whose bit
       * was already set has a signal on its way to h: it stays parked) */
      page_unkeep(h, p);
      list_remove(list, p);
      page_release(p);
    }
  }
  page_cache_park(&h->pcache, empty);
  bool pages = heap_has_pages(h);
  busy_end(h);
  heap_unlock(h);
  /* If no thread takes the heap meanwhile, a collector gives its pages up
   * (collect.c, heap_collect_idle). */
  if (pages) purge_arm((os_now_ms() + 2 * hak_config.purge_delay_ms) | 1);
}

/* A collector, h->lock held, h parked and untouched since its last pass. */
void heap_unpark(hak_heap_t *h) {
  busy_begin(h);
  heap_collect_remote_held(h);
  HEAP_FOR_EACH_PAGE(h, list, p) {
    /* A page whose bit was set has a signal on its way to h: it stays, and
     * the look that pops it (the next owner, a collector) takes it in. */
    if (remote_fence(p)) continue;
    page_unkeep(h, p);
    list_remove(list, p);
    page_release(p);
  }
  busy_end(h);
}

bool heap_reap(hak_heap_t *h, bool lost) {
  heap_lock(h); /* a collector may be looking (it leaves dying heaps alone) */
  busy_begin(h); /* a fork now leaves h alone in the child (heap/pool.c) */
  if (lost) release_all(h);
  else release_arrived(h);
  bool done = h->awaiting == 0;
  busy_end(h);
  heap_unlock(h);
  return done;
}

void heap_repair_after_fork(hak_heap_t *h) {
  heap_collect_remote_held(h);
  /* A page still queued now was never pushed: its sender was another thread,
   * caught between its two steps, and does not exist in this process. */
  HEAP_FOR_EACH_PAGE(h, list, p) /* collecting may move or retire p */
    if (atomic_load_explicit(&p->remote, memory_order_relaxed) & HAK_REMOTE_QUEUED) heap_page_collect(h, p);
}
