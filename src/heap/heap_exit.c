/* heap_exit.c — the end of a thread heap's life: tearing it down when its
 * thread exits (heap_destroy: empty pages back to their segments, the rest
 * abandoned for adoption), releasing what a dying heap still waited for
 * (heap_reap), and repairing a live heap in a forked child
 * (heap_repair_after_fork). The page side of a living heap (refill, flush,
 * remote collection, retiring empty pages) is heap.c's; this file only
 * calls into it (heap_collect_remote_held, heap_page_collect). Runs under
 * h->lock, as heap.c. */
#include "heap/heap.h"
#include "remote/remote.h"
#include "segment/segment.h"
#include "os/os.h"

#include <sched.h>

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
