/* remote.c — cross-thread frees and abandoned pages.
 *
 * A block freed by a thread that does not own its page travels in a chain
 * (all blocks of one page from one cache flush) pushed with a single CAS onto
 * page->remote. The owner is told once per page, not once per block: the
 * pusher that moves page->qstate from IDLE to NOTIFYING pushes the page onto
 * its owner's remote_pages stack and then marks it QUEUED. The owner pops the
 * stack, waits out NOTIFYING, stores IDLE, then takes page->remote whole; a
 * block pushed after that take finds IDLE and signals again, so none is lost.
 *
 * A dying heap first moves every page to QUEUED (remote_fence): from then on no
 * thread touches its stack, so the heap can be recycled. Abandoned pages stay
 * QUEUED (remote frees pile up silently) until a live heap adopts them. */
#include "remote/remote.h"
#include "heap/heap.h"
#include "os/lock.h"
#include "stats/stats.h"

static hak_lock_t abandoned_lock = HAK_LOCK_INIT;
static hak_page_t *abandoned[HAK_NCLASSES];

void remote_push(hak_page_t *page, void *first, void *last, unsigned n) {
  void *head = atomic_load_explicit(&page->remote, memory_order_relaxed);
  do {
    *(void **)last = head;
  } while (!atomic_compare_exchange_weak_explicit(&page->remote, &head, first, memory_order_seq_cst,
                                                  memory_order_relaxed));
  HAK_STAT_ADD(HAK_EV_REMOTE_FREE, n);
  HAK_STAT_INC(HAK_EV_REMOTE_BATCH);
  (void)n;
  if (atomic_load_explicit(&page->qstate, memory_order_seq_cst) != HAK_Q_IDLE) return;
  uint32_t expect = HAK_Q_IDLE;
  if (!atomic_compare_exchange_strong_explicit(&page->qstate, &expect, HAK_Q_NOTIFYING, memory_order_acquire,
                                               memory_order_relaxed))
    return;
  hak_heap_t *h = atomic_load_explicit(&page->owner, memory_order_acquire);
  if (h) {
    hak_page_t *top = atomic_load_explicit(&h->remote_pages, memory_order_relaxed);
    do {
      page->qnext = top;
    } while (!atomic_compare_exchange_weak_explicit(&h->remote_pages, &top, page, memory_order_release,
                                                    memory_order_relaxed));
  }
  atomic_store_explicit(&page->qstate, HAK_Q_QUEUED, memory_order_release);
}

unsigned remote_take(hak_page_t *page, void **out_head, void **out_tail) {
  void *list = atomic_exchange_explicit(&page->remote, NULL, memory_order_seq_cst);
  unsigned n = 0;
  void *tail = NULL;
  for (void *b = list; b; b = *(void **)b) { tail = b; n++; }
  *out_head = list;
  *out_tail = tail;
  if (n) HAK_STAT_INC(HAK_EV_REMOTE_COLLECT);
  return n;
}

void remote_fence(hak_page_t *page) {
  for (;;) {
    uint32_t s = atomic_load_explicit(&page->qstate, memory_order_acquire);
    if (s == HAK_Q_QUEUED) return;
    if (s == HAK_Q_IDLE &&
        atomic_compare_exchange_weak_explicit(&page->qstate, &s, HAK_Q_QUEUED, memory_order_acq_rel,
                                              memory_order_relaxed))
      return;
    cpu_relax();
  }
}

void abandon_page(hak_page_t *page) {
  atomic_store_explicit(&page->owner, NULL, memory_order_release);
  page->state = HAK_PAGE_ABANDONED;
  hak_lock(&abandoned_lock);
  page->prev = NULL;
  page->next = abandoned[page->cls];
  abandoned[page->cls] = page;
  hak_unlock(&abandoned_lock);
  HAK_STAT_INC(HAK_EV_ABANDON);
}

hak_page_t *adopt_page(unsigned cls) {
  if (!__atomic_load_n(&abandoned[cls], __ATOMIC_RELAXED)) return NULL; /* cheap peek */
  hak_lock(&abandoned_lock);
  hak_page_t *p = abandoned[cls];
  if (p) abandoned[cls] = p->next;
  hak_unlock(&abandoned_lock);
  if (p) {
    p->next = p->prev = NULL;
    HAK_STAT_INC(HAK_EV_ADOPT);
  }
  return p;
}

void remote_atfork_prepare(void) { hak_lock(&abandoned_lock); }
void remote_atfork_parent(void) { hak_unlock(&abandoned_lock); }
void remote_atfork_child(void) { hak_lock_reset(&abandoned_lock); }
