/* remote.c — cross-thread frees and abandoned pages.
 *
 * A block freed by a thread that does not own its page travels in a chain
 * (all blocks of one page from one cache flush) pushed with a single CAS onto
 * page->remote. The same CAS sets bit 0 of that word, "queued": the pusher
 * that finds it clear owes the owner one signal, pushing the page onto the
 * owner's remote_pages stack (a second CAS); later pushers add blocks
 * silently. The signaller reads page->owner only after its first CAS. The
 * owner pops the stack and takes page->remote whole with an exchange that
 * also clears the bit, so the next push signals again. No block waits
 * unseen, and a page is never on the stack twice.
 *
 * The bit also keeps a page alive: while it is set a signal may be in flight,
 * so the owner retires a page only when the word is 0 (no block pending, no
 * signal on its way) and no block is out (used == 0), after which no thread
 * can reach the page through a block any more.
 *
 * Thread exit (heap_destroy). The dying heap sets the bit on all its pages.
 * A page whose bit was clear is released at once (retired if empty, else
 * abandoned with the bit set: frees into it pile up silently until a live
 * heap adopts it and takes the list, clearing the bit). A page whose bit was
 * already set has a signal on the stack or on its way: it stays on the
 * heap's lists, owner unchanged (its signaller has yet to read the owner),
 * until the signal is popped. The wait is bounded (spins, then yields); what
 * has not arrived by then is left to heap_reap, and the heap goes on a dying
 * list instead of the pool, so a late signal lands on a heap nobody else
 * uses. Each later thread start or exit reaps dying heaps: pops their stacks,
 * releases the pages that arrived, and pools a heap once none is awaited.
 *
 * A preempted thread. A signaller stopped between its two CASes delays only
 * the release of that one page and the reuse of the dying heap; the owner
 * (and everyone else) goes on. One stopped inside the owner-side functions
 * cannot exist: only the owner runs them on its heap.
 *
 * Fork. Only the forking thread exists in the child, and other threads may
 * have been anywhere. Locks: the prepare handler takes every lock (os/lock.h
 * lets the forking thread through its own locks until parent/child), the
 * child resets them. Then (heap_atfork_child): a signaller caught between its
 * two CASes never completes, so the surviving thread's heap and the shared
 * heap collect every page still queued (heap_repair_after_fork); dying heaps
 * stop waiting and release everything (heap_reap with lost); heaps of the
 * vanished threads release their pages to the abandoned list for the child's
 * threads to adopt, unless their owner was caught changing them (the owner
 * marks its heap busy around every change to its page lists): such a heap is
 * left as it is, its pages kept by nobody (remote frees into them are pushed
 * onto a stack nobody pops: memory lost to the child, never corrupted). The
 * blocks in the vanished threads' caches are lost to the child either way. */
#include "remote/remote.h"
#include "heap/heap.h"
#include "os/lock.h"
#include "stats/stats.h"

/* Per class, oldest first: the oldest abandoned pages are the likeliest to
 * have had their blocks freed since. */
static hak_lock_t abandoned_lock = HAK_LOCK_NAMED("abandoned");
static struct { hak_page_t *head, *tail; } abandoned[HAK_NCLASSES];

void remote_push(hak_page_t *page, void *first, void *last, unsigned n) {
  uintptr_t old = atomic_load_explicit(&page->remote, memory_order_relaxed);
  do {
    *(void **)last = (void *)(old & ~HAK_REMOTE_QUEUED);
  } while (!atomic_compare_exchange_weak_explicit(&page->remote, &old, (uintptr_t)first | HAK_REMOTE_QUEUED,
                                                  memory_order_acq_rel, memory_order_relaxed));
  HAK_STAT_ADD(HAK_EV_REMOTE_FREE, n);
  HAK_STAT_INC(HAK_EV_REMOTE_BATCH);
  (void)n;
  if (old & HAK_REMOTE_QUEUED) return;
  /* Ours to signal. The page cannot be retired until its owner pops it. */
  hak_heap_t *h = atomic_load_explicit(&page->owner, memory_order_acquire);
  hak_page_t *top = atomic_load_explicit(&h->remote_pages, memory_order_relaxed);
  do {
    page->qnext = top;
  } while (!atomic_compare_exchange_weak_explicit(&h->remote_pages, &top, page, memory_order_release,
                                                  memory_order_relaxed));
}

unsigned remote_take(hak_page_t *page, bool keep_queued, void **out_head, void **out_tail) {
  uintptr_t v = atomic_exchange_explicit(&page->remote, keep_queued ? HAK_REMOTE_QUEUED : 0, memory_order_acq_rel);
  void *list = (void *)(v & ~HAK_REMOTE_QUEUED);
  unsigned n = 0;
  void *tail = NULL;
  for (void *b = list; b; b = *(void **)b) {
    tail = b;
    n++;
  }
  *out_head = list;
  *out_tail = tail;
  if (n) HAK_STAT_INC(HAK_EV_REMOTE_COLLECT);
  return n;
}

bool remote_fence(hak_page_t *page) {
  return atomic_fetch_or_explicit(&page->remote, HAK_REMOTE_QUEUED, memory_order_acq_rel) & HAK_REMOTE_QUEUED;
}

void abandon_page(hak_page_t *page) {
  atomic_store_explicit(&page->owner, NULL, memory_order_release);
  unsigned c = page->cls;
  hak_lock(&abandoned_lock);
  page->state = HAK_PAGE_ABANDONED;
  page->on_abandoned = 1;
  page->next = NULL;
  page->prev = abandoned[c].tail;
  /* head is written atomically: adopt_page peeks at it without the lock */
  if (abandoned[c].tail) abandoned[c].tail->next = page; else __atomic_store_n(&abandoned[c].head, page, __ATOMIC_RELAXED);
  abandoned[c].tail = page;
  hak_unlock(&abandoned_lock);
  HAK_STAT_INC(HAK_EV_ABANDON);
}

static void unlink_abandoned(hak_page_t *p) {
  unsigned c = p->cls;
  if (p->prev) p->prev->next = p->next; else __atomic_store_n(&abandoned[c].head, p->next, __ATOMIC_RELAXED);
  if (p->next) p->next->prev = p->prev; else abandoned[c].tail = p->prev;
  p->next = p->prev = NULL;
  p->on_abandoned = 0;
  p->state = HAK_PAGE_FREE; /* the adopter sets its own list state */
}

hak_page_t *adopt_page(unsigned cls) {
  if (!__atomic_load_n(&abandoned[cls].head, __ATOMIC_RELAXED)) return NULL; /* cheap peek */
  hak_lock(&abandoned_lock);
  hak_page_t *p = abandoned[cls].head;
  if (p) unlink_abandoned(p);
  hak_unlock(&abandoned_lock);
  if (p) HAK_STAT_INC(HAK_EV_ADOPT);
  return p;
}

bool adopt_this_page(hak_page_t *p) {
  bool ok = false;
  hak_lock(&abandoned_lock);
  if (p->on_abandoned) {
    unlink_abandoned(p);
    ok = true;
  }
  hak_unlock(&abandoned_lock);
  if (ok) HAK_STAT_INC(HAK_EV_ADOPT);
  return ok;
}

void remote_atfork_prepare(void) { hak_lock_fork(&abandoned_lock); }
void remote_atfork_parent(void) { hak_unlock_fork(&abandoned_lock); }
void remote_atfork_child(void) { hak_lock_reset(&abandoned_lock); }
