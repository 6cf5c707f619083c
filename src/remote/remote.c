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
 * unseen, and a page is never on the stack twice. The links inside the
 * blocks are written and read through segment/free_list.h (encoded and
 * checked in the secure build); the page->remote word itself stays plain.
 * With HAKMEM_DEBUG_LISTS (segment/list_check.h) a pushed chain and a taken
 * list are walked: their blocks, length and last block must match the word.
 *
 * The word carries the list's length and its last block with its head
 * (layout in remote.h: the first and last blocks' offsets in their segment,
 * 0 for none, and the block count). A pusher links its chain's last block to
 * the old first block and swaps in its own first block with the count raised
 * by its chain's length, in the same CAS; the push onto an empty list also
 * puts its chain's last block in the word as the list's last, which later
 * pushes (at the head) keep. So list, count and last block only ever change
 * together, and the owner's exchange takes all at once: it knows how many
 * blocks came, where the list starts and where it ends, without reading any
 * of them (it writes only the last block's link, to join the list to a local
 * free list that is not empty, or notes that block as the local list's last,
 * page->free_tail, when it was empty; it used to walk the list to find it,
 * reading every block another thread had just written). A pusher preempted before
 * its CAS has changed nothing; one preempted after it is done with the
 * list. No ABA: only the owner removes, and it removes everything.
 *
 * The bit also keeps a page alive: while it is set a signal may be in flight,
 * so the owner retires a page only when the word is 0 (no block pending, no
 * signal on its way) and no block is out (used == 0), after which no thread
 * can reach the page through a block any more.
 *
 * Thread exit. The heap is parked with its pages, owner unchanged (heap/
 * heap_exit.c, "Parking"): signals to it land on its stack as before, and
 * nothing waits. Its pages are given up later, when no thread took the heap
 * for a collector pass (heap_unpark), as here: a page whose bit was clear is
 * released, one whose bit was set stays until its signal is taken. A page
 * mostly handed out is given up so at the exit itself (heap_park, "Mostly
 * handed out"), under the same fence: released if its bit was clear, kept
 * parked if it was set.
 *
 * A vanished thread's heap (heap/pool.c), torn down (heap_destroy). The dying
 * heap sets the bit on all its pages.
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
 * blocks in the vanished threads' caches are lost to the child either way.
 *
 * Abandoned pages, without a lock. Abandoning a page stores owner = NULL,
 * then on_abandoned = 1, then pushes an entry for it (link page->anext) on
 * its class's stack with one CAS, unless the record's alisted flag says an
 * entry is already out. A page is claimed, by exactly one thread, with a CAS
 * of on_abandoned from 1 to 0: by a thread freeing a block into it
 * (adopt_this_page, which leaves the entry behind, stale) or by a refill
 * (adopt_page). adopt_page takes the whole stack with one exchange, walks it
 * oldest first, and for each entry clears alisted and then tries the claim;
 * stale entries are dropped, and the entries after the one claimed go back
 * with one CAS. A page claimed from a stale entry of another class is still
 * adopted (heap_page_adopted files it under its own class). Taking the whole
 * stack means no taker reads the link of an entry another thread holds: no
 * ABA. Clearing alisted before the claim means a page abandoned again while
 * its old entry is being taken is either claimed by that taker or pushed
 * anew: none is lost from the stacks. A stale entry can outlive its page, so
 * page_init keeps anext and alisted, and a segment is not unmapped while an
 * entry points into it or a taker is at work (hak_abandoned_takers, counted
 * around the take: an unmap is skipped, never waited for).
 *  - A preempted taker holds its chain: the stack looks empty meanwhile, and
 *    refills cut new pages instead; a page in the chain is still claimed by
 *    a thread freeing into it. Segments stay mapped until it is done.
 *  - Thread exit, unparking: abandoning is the last thing a dying or parked
 *    heap does with a page.
 *  - Fork: the stacks are consistent at every instant (single CASes). A taker
 *    that vanished held its chain privately: in the child those pages are on
 *    no stack (adopted only by a thread freeing into them) and their segments
 *    stay mapped; the takers count is reset. */
#include "remote/remote.h"
#include "heap/collect.h"
#include "heap/heap.h"
#include "os/lock.h"
#include "segment/free_list.h"
#include "segment/list_check.h"
#include "segment/segment.h"
#include "stats/stats.h"

/* Abandoned pages, per class of the page when abandoned: lock-free stacks
 * linked through page->anext (see the opening comment). */
static _Atomic(hak_page_t *) abandoned[HAK_NCLASSES];

void remote_push(hak_page_t *page, void *first, void *last, unsigned n) {
  uintptr_t old = atomic_load_explicit(&page->remote, memory_order_relaxed);
  LIST_CHECK_CHAIN("remote list (push)", page, first, n, last, false);
  do {
    block_set_next(page, last, remote_head(page, old));
    REMOTE_TEST_STEP(page, NULL, HAK_PUSH_LINKED);
  } while (!atomic_compare_exchange_weak_explicit(&page->remote, &old,
                                                  remote_word_push(page, old, first, last, n) | HAK_REMOTE_QUEUED,
                                                  memory_order_acq_rel, memory_order_relaxed));
  if (old & HAK_REMOTE_QUEUED) return;
  /* Ours to signal. The page cannot be retired until its owner pops it. */
  REMOTE_TEST_STEP(page, NULL, HAK_PUSH_QUEUED);
  hak_heap_t *h = atomic_load_explicit(&page->owner, memory_order_acquire);
  REMOTE_TEST_STEP(page, h, HAK_PUSH_OWNER);
  hak_page_t *top = atomic_load_explicit(&h->remote_pages, memory_order_relaxed);
  do {
    page->qnext = top;
  } while (!atomic_compare_exchange_weak_explicit(&h->remote_pages, &top, page, memory_order_release,
                                                  memory_order_relaxed));
  REMOTE_TEST_STEP(page, h, HAK_PUSH_SIGNALLED);
  /* The first page on an empty stack: if the owner does not come for it
   * within a purge delay, a collector will (heap/collect.c). */
  if (!top) collect_note_signal(h);
}

unsigned remote_take(hak_page_t *page, bool keep_queued) {
  uintptr_t v = atomic_exchange_explicit(&page->remote, keep_queued ? HAK_REMOTE_QUEUED : 0, memory_order_acq_rel);
  unsigned n = remote_count(v);
  if (!n) return 0;
  void *head = remote_head(page, v);
  /* The count and the last block came with the list: no walk. (The walk to
   * the last block, to end the list on a local list that was not empty,
   * read every block another thread had just written, a cache miss each:
   * 5% of bench_sizemix's time, beside the refill's own walk of the same
   * blocks.) */
  void *tail = remote_tail(page, v);
  LIST_CHECK_CHAIN("remote list (take)", page, head, n, tail, true);
  if (page->free) block_set_next(page, tail, page->free);
  page_free_prepended(page, head, tail);
  page->used -= n;
  HAK_STAT_INC(HAK_EV_REMOTE_COLLECT);
  return n;
}

bool remote_fence(hak_page_t *page) {
  return atomic_fetch_or_explicit(&page->remote, HAK_REMOTE_QUEUED, memory_order_acq_rel) & HAK_REMOTE_QUEUED;
}

static void push_chain(unsigned c, hak_page_t *first, hak_page_t *last) {
  hak_page_t *top = atomic_load_explicit(&abandoned[c], memory_order_relaxed);
  do {
    last->anext = top;
  } while (!atomic_compare_exchange_weak_explicit(&abandoned[c], &top, first, memory_order_release,
                                                  memory_order_relaxed));
}

void abandon_page(hak_page_t *page) {
  /* The class is read before the page is published: once on_abandoned is
   * set, a thread freeing into the page may adopt it, empty it and retire
   * it, and a page cut there writes the record (page_init) while this
   * thread would still be reading it (make test-tsan, test_hak_threads). */
  unsigned cls = page->cls;
  page->state = HAK_PAGE_ABANDONED;
  atomic_store_explicit(&page->owner, NULL, memory_order_release);
  atomic_store(&page->on_abandoned, 1);
  /* One entry per record at most: if one is still there (stale, or held by
   * a taker that has not yet cleared its flag), it will find the page. */
  if (!atomic_exchange(&page->alisted, 1)) push_chain(cls, page, page);
  HAK_STAT_INC(HAK_EV_ABANDON);
}

hak_page_t *adopt_page(unsigned cls) {
  if (!atomic_load_explicit(&abandoned[cls], memory_order_relaxed)) return NULL; /* no write to an empty stack */
  atomic_fetch_add(&hak_abandoned_takers, 1);
  hak_page_t *chain = atomic_exchange_explicit(&abandoned[cls], NULL, memory_order_acquire);
  /* Reverse: the stack is newest first, and the oldest pages are the
   * likeliest to have had their blocks freed since. */
  hak_page_t *old = NULL;
  while (chain) {
    hak_page_t *next = chain->anext;
    chain->anext = old;
    old = chain;
    chain = next;
  }
  hak_page_t *got = NULL;
  while (old && !got) {
    hak_page_t *p = old;
    old = p->anext;
    atomic_store(&p->alisted, 0);                   /* entry gone ... */
    uint8_t one = 1;
    if (atomic_compare_exchange_strong(&p->on_abandoned, &one, 0)) got = p; /* ... then claim */
    /* else stale: claimed by a freeing thread (adopt_this_page) meanwhile */
  }
  if (old) { /* the rest back, newest on top again */
    hak_page_t *first = NULL, *last = old;
    while (old) {
      hak_page_t *next = old->anext;
      old->anext = first;
      first = old;
      old = next;
    }
    push_chain(cls, first, last);
  }
  atomic_fetch_sub(&hak_abandoned_takers, 1);
  if (got) {
    got->state = HAK_PAGE_FREE; /* the adopter sets its own list state */
    HAK_STAT_INC(HAK_EV_ADOPT);
  }
  return got;
}

bool adopt_this_page(hak_page_t *p) {
  uint8_t one = 1;
  if (!atomic_compare_exchange_strong(&p->on_abandoned, &one, 0)) return false;
  p->state = HAK_PAGE_FREE;
  HAK_STAT_INC(HAK_EV_ADOPT);
  return true;
}

/* Process-wide trim: claim the abandoned pages one by one (adopt_page, the
 * ordinary claim), take in the remote frees piled up on each, retire those
 * whose blocks have all come back (no block is out, so no thread can push to
 * them any more) and abandon the others again. */
bool remote_collect_abandoned(void) {
  bool any = false;
  for (unsigned c = 0; c < HAK_NCLASSES; c++) {
    hak_page_t *keep = NULL, *p;
    while ((p = adopt_page(c)) != NULL) {
      remote_take(p, true);
      if (p->used == 0) {
        atomic_store_explicit(&p->remote, 0, memory_order_relaxed);
        segment_page_free(p);
        any = true;
      } else {
        p->next = keep; /* claimed: ours until abandoned again */
        keep = p;
      }
    }
    while (keep) {
      hak_page_t *next = keep->next;
      keep->next = NULL;
      abandon_page(keep);
      keep = next;
    }
  }
  return any;
}

/* Nothing to lock: every change is one CAS. A taker that vanished in the fork
 * held its chain privately: those pages are off the stacks in the child
 * (still adopted by a thread freeing into them), and its count is dropped. */
void remote_atfork_prepare(void) {}
void remote_atfork_parent(void) {}
void remote_atfork_child(void) { atomic_store(&hak_abandoned_takers, 0); }
