/* heap.c — a heap's pages: taking blocks from them (refill), giving blocks
 * back (flush), collecting remote frees, retiring empty pages, and tearing the
 * heap down when its thread exits. Only the owning thread runs these on its
 * heap (the shared heap runs them under its lock). */
#include "heap/heap.h"
#include "heap/size_class.h"
#include "remote/remote.h"
#include "segment/segment.h"
#include "stats/stats.h"
#include "os/lock.h"

static void list_push_head(hak_page_list_t *l, hak_page_t *p) {
  p->prev = NULL;
  p->next = l->head;
  if (l->head) l->head->prev = p; else l->tail = p;
  l->head = p;
}

static void list_push_tail(hak_page_list_t *l, hak_page_t *p) {
  p->next = NULL;
  p->prev = l->tail;
  if (l->tail) l->tail->next = p; else l->head = p;
  l->tail = p;
}

static void list_remove(hak_page_list_t *l, hak_page_t *p) {
  if (p->prev) p->prev->next = p->next; else l->head = p->next;
  if (p->next) p->next->prev = p->prev; else l->tail = p->prev;
  p->next = p->prev = NULL;
}

HAK_INLINE bool page_has_free(const hak_page_t *p) { return p->free != NULL || p->bump < p->end; }

static void page_to_full(hak_heap_t *h, hak_page_t *p) {
  list_remove(&h->avail[p->cls], p);
  list_push_head(&h->full[p->cls], p);
  p->state = HAK_PAGE_FULL;
}

/* A full page that got blocks back goes behind the current page, so the
 * current page keeps being carved while this one waits its turn. */
static void page_to_avail(hak_heap_t *h, hak_page_t *p) {
  list_remove(&h->full[p->cls], p);
  hak_page_list_t *l = &h->avail[p->cls];
  if (l->head) {
    p->prev = l->head;
    p->next = l->head->next;
    if (p->next) p->next->prev = p; else l->tail = p;
    l->head->next = p;
  } else {
    list_push_head(l, p);
  }
  p->state = HAK_PAGE_AVAIL;
}

/* An empty page goes back to its segment, unless it is the class's only page
 * in a heap that allocates from the class (then the next refill would just
 * fetch it again), or it is queued for its remote frees (then it is retired
 * when popped). A heap that only adopted the page by freeing into it, like a
 * main thread reaping its workers' blocks, gives it back. */
static void page_maybe_retire(hak_heap_t *h, hak_page_t *p) {
  if (!remote_idle(p)) return;
  hak_page_list_t *l = &h->avail[p->cls];
  if (l->head == p && p->next == NULL && h->allocates[p->cls]) return;
  list_remove(l, p);
  page_cache_free(&h->pcache, p);
}

static unsigned page_take(hak_page_t *p, void **out, unsigned max) {
  unsigned n = 0;
  void *b = p->free;
  while (b && n < max) {
    out[n++] = b;
    b = *(void **)b;
  }
  p->free = b;
  if (n < max && p->bump < p->end) {
    size_t left = (size_t)(p->end - p->bump) / p->bsize;
    unsigned k = max - n < left ? max - n : (unsigned)left;
    /* Stored in reverse so the cache pops them in address order. */
    for (unsigned i = 0; i < k; i++) out[n + k - 1 - i] = p->bump + (size_t)i * p->bsize;
    p->bump += (size_t)k * p->bsize;
    n += k;
  }
  p->used += n;
  return n;
}

static void splice_remote(hak_page_t *p, bool keep_queued) {
  void *head, *tail;
  unsigned n = remote_take(p, keep_queued, &head, &tail);
  if (!n) return;
  *(void **)tail = p->free;
  p->free = head;
  p->used -= n;
}

void heap_page_adopted(hak_heap_t *h, hak_page_t *p) {
  /* Owner first: the take below clears the queued bit, and the next remote
   * free signals whoever owner says. */
  atomic_store_explicit(&p->owner, h, memory_order_release);
  splice_remote(p, false);
  if (page_has_free(p)) {
    p->state = HAK_PAGE_AVAIL;
    list_push_tail(&h->avail[p->cls], p);
  } else {
    p->state = HAK_PAGE_FULL;
    list_push_head(&h->full[p->cls], p);
  }
}

void heap_page_collect(hak_heap_t *h, hak_page_t *p) {
  splice_remote(p, false);
  if (p->state == HAK_PAGE_FULL && page_has_free(p)) page_to_avail(h, p);
  if (p->used == 0 && p->state == HAK_PAGE_AVAIL) page_maybe_retire(h, p);
}

void heap_collect_remote(hak_heap_t *h) {
  hak_page_t *p = atomic_exchange_explicit(&h->remote_pages, NULL, memory_order_acquire);
  while (p) {
    hak_page_t *next = p->qnext; /* read first: once taken, p may be pushed again */
    heap_page_collect(h, p);
    p = next;
  }
}

static hak_page_t *heap_page_new(hak_heap_t *h, unsigned cls) {
  /* Pages of exited threads first: their memory is already resident. */
  for (int tries = 0; tries < 4; tries++) {
    hak_page_t *p = adopt_page(cls);
    if (!p) break;
    heap_page_adopted(h, p);
    if (h->avail[cls].head) return h->avail[cls].head;
  }
  hak_page_t *p = page_cache_alloc(&h->pcache, class_slices(cls), cls);
  if (!p) return NULL;
  atomic_store_explicit(&p->owner, h, memory_order_release);
  p->state = HAK_PAGE_AVAIL;
  list_push_head(&h->avail[cls], p);
  return p;
}

unsigned heap_take(hak_heap_t *h, unsigned cls, void **out, unsigned max) {
  h->allocates[cls] = 1;
  if (atomic_load_explicit(&h->remote_pages, memory_order_relaxed)) heap_collect_remote(h);
  unsigned n = 0;
  while (n < max) {
    hak_page_t *p = h->avail[cls].head;
    if (!p) {
      if (n) break; /* have some: do not grow the heap for the rest */
      p = heap_page_new(h, cls);
      if (!p) break;
    }
    n += page_take(p, out + n, max - n);
    if (!page_has_free(p)) page_to_full(h, p);
  }
  HAK_CSTAT_INC(cls, HAK_CS_REFILL);
  HAK_CSTAT_ADD(cls, HAK_CS_TAKEN, n);
  HAK_STAT_INC(HAK_EV_REFILL);
  return n;
}

void heap_return_blocks(hak_heap_t *h, void **blocks, unsigned n) {
  /* Callers pass the blocks of one class (one cache, or one block). */
  if (n) HAK_CSTAT_ADD(segment_of(blocks[0])->slice_cls[slice_index(blocks[0])], HAK_CS_RETURNED, n);
  unsigned i = 0;
  while (i < n) {
    void *b = blocks[i];
    hak_page_t *p = page_of(b);
    hak_heap_t *owner = atomic_load_explicit(&p->owner, memory_order_acquire);
    /* A page whose thread has exited: take it over rather than feed it remote
     * frees nobody collects, so it can empty and go back to its segment. */
    if (HAK_UNLIKELY(owner == NULL) && adopt_this_page(p)) {
      heap_page_adopted(h, p);
      owner = h;
    }
    if (owner == h) {
      *(void **)b = p->free;
      p->free = b;
      p->used--;
      if (p->state == HAK_PAGE_FULL) page_to_avail(h, p);
      if (p->used == 0) page_maybe_retire(h, p);
      i++;
      continue;
    }
    /* Not ours: chain the run of blocks from the same page, one CAS for all. */
    void *first = b, *last = b;
    unsigned k = 1;
    for (i++; i < n && page_of(blocks[i]) == p; i++, k++) {
      *(void **)last = blocks[i];
      last = blocks[i];
    }
    remote_push(p, first, last, k);
  }
  HAK_STAT_INC(HAK_EV_FLUSH);
}

void heap_destroy(hak_heap_t *h) {
  heap_collect_remote(h);
  /* Fence every page. A page whose bit was already set has a signal on our
   * stack or on its way; wait for each of them, after which no thread will
   * touch h->remote_pages again. */
  unsigned pending = 0;
  for (unsigned c = 0; c < HAK_NCLASSES; c++) {
    for (hak_page_t *p = h->avail[c].head; p; p = p->next) pending += remote_fence(p);
    for (hak_page_t *p = h->full[c].head; p; p = p->next) pending += remote_fence(p);
  }
  while (pending) {
    hak_page_t *q = atomic_exchange_explicit(&h->remote_pages, NULL, memory_order_acquire);
    for (; q; q = q->qnext) pending--;
    if (pending) cpu_relax();
  }
  for (unsigned c = 0; c < HAK_NCLASSES; c++) {
    hak_page_list_t *lists[2] = {&h->avail[c], &h->full[c]};
    for (int k = 0; k < 2; k++) {
      hak_page_t *p = lists[k]->head;
      while (p) {
        hak_page_t *next = p->next;
        p->next = p->prev = NULL;
        splice_remote(p, true); /* abandoned pages stay fenced until adopted */
        if (p->used == 0) {
          atomic_store_explicit(&p->remote, 0, memory_order_relaxed);
          page_cache_free(NULL, p); /* to the exchange: the next thread takes it */
        } else {
          abandon_page(p);
        }
        p = next;
      }
      lists[k]->head = lists[k]->tail = NULL;
    }
  }
  page_cache_flush(&h->pcache);
}
