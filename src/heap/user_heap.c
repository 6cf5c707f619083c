/* user_heap.c — first-class heaps: a program's own heaps (hak_heap_new),
 * used from any thread, destroyed at once (every block freed, arena style)
 * or deleted (the heap goes, its live blocks stay valid as the process's).
 *
 * A first-class heap is a struct hak_heap (heap.h) that belongs to no
 * thread: its page lists per class (avail, full) as in a thread heap, plus a
 * list of its large pages (user_large); blocks too big for a page of slices
 * are recorded in front/heap_huge.c's table instead. No thread's cache ever
 * holds its blocks (its owner's cache is the heap's own, dropped whole by
 * destroy), which is what lets destroy drop whole pages without looking at
 * a single block:
 *  - its class pages carry the large sentinel in the slice map
 *    (HAK_UHEAP_MAP_V): free()'s fast path meets a bin without slots and goes to
 *    free_slow, which sees a class in the segment's slice_cls under a
 *    sentinel entry and calls uheap_free; the fast path costs what it did;
 *  - its large pages have owner == the heap (ordinary large pages have
 *    none): large_free hands them to uheap_free_large;
 *  - a realloc that moves a heap block frees it with free() (front/api.c);
 *  - pages are taken from the page exchange or the segments, never adopted
 *    from exited threads (blocks of those may sit in thread caches), and
 *    never handed to a thread's page cache.
 *
 * Locking. Every change to a heap's pages, from any thread, is made under
 * the heap's lock (h->lock, heap_lock: a spin lock that yields after 64
 * spins): allocations by threads other than the heap's owner take it once
 * per call, the owner once per refill of its cache (below), and each free()
 * of one of its blocks once. That is the cost of using a heap from any
 * thread: one atomic exchange and one release store per call, and threads
 * that share a heap take turns. Lock order: uheap_lock (the list of heaps)
 * before h->lock, h->lock before the segment lock, the page exchange
 * (lock-free) and the abandoned stacks (lock-free); no two heap locks are
 * ever held together, and no thread heap's lock is taken under one.
 *
 * uheap_lock (process-wide) covers the list of live heaps and the pool of
 * records: taken by hak_heap_new (twice: pool pop, list push; a record is
 * mapped between them, without it), and by destroy and delete (begin:
 * a walk of the list to check that the heap is live; finish: unlink, push
 * on the pool). Never on an allocation or free path; no system call under
 * it; its work is O(1) but for begin_teardown's walk, linear in the live
 * first-class heaps.
 *
 * Owner cache: the creating thread allocates from blocks reserved for it,
 * without the lock (protocol in heap/user_heap_oc.c; uheap_alloc refills it
 * under the lock, destroy and delete take it away first).
 *
 * Heap records are mapped once and never unmapped: after destroy or delete
 * a record goes to a pool and a later hak_heap_new reuses it, so a stale
 * pointer to a heap (a free racing a destroy, a second destroy) always
 * reads a heap record, whose state word (user_state: LIVE, DYING, GONE)
 * says it is not live.
 *
 * free() of a block. free_slow reads the page's owner; if it is a
 * first-class heap it takes that heap's lock and checks again under it that
 * the page still belongs to the heap (delete and destroy change the owner
 * under the same lock). Then the block goes on its page's free list
 * (used--); a page left empty goes back to its segment unless it is the
 * class's only page. A free that meets a heap marked for teardown whose
 * pages are still there (the teardown waits for the lock) is an ordinary
 * one: hak_heap_delete may run while other threads free its blocks.
 *  - After hak_heap_delete the page's slice map entry is the class's again
 *    and its owner is NULL (abandoned): uheap_free returns false and the
 *    block is freed as any block of the process.
 *  - After hak_heap_destroy the page was given back: its slices read as free
 *    (slice_cls NONE), and free() reports an invalid pointer, unless the
 *    slices were already reused by another page, which no allocator can
 *    tell from a valid free (as in mimalloc, it is the program's bug).
 *    A free that finds the page detached under the lock is reported, never
 *    freed into.
 *  - Builds with checks stamp freed blocks (the free key) and look for a
 *    block carrying the key on its page's free list: a double free is
 *    reported and ignored; a pointer past what the page has carved is an
 *    invalid pointer.
 *
 * Destroy: under uheap_lock the heap is checked to be live and marked
 * DYING (a second destroy or delete is reported); then under h->lock every
 * page goes back to the segments in one batch (segment_pages_free: one
 * acquisition of the segment lock), counted as returned with its `used`
 * figure: work per page, none per block. The segments purge the slices on
 * their usual policy (HAKMEM_PURGE_DELAY_MS; hak_collect now). Delete: the
 * empty pages go back the same way; the others are fenced (their remote bit
 * set, as for an abandoned page), get their class's slice map entry back
 * and are abandoned: the next thread that frees into one or refills the
 * class adopts it. Then the record goes to the pool.
 *
 * Thread exit: nothing; a heap belongs to no thread (its owner cache is
 * the creating thread's only by token). A thread preempted
 * while it holds h->lock delays only the users of that heap (and a fork);
 * one preempted between reading the owner and taking the lock rechecks
 * under it. Fork: the prepare handler takes uheap_lock and then every
 * heap's lock (live and dying), before the segment lock; the parent and
 * the child release them, so the child's heaps are consistent and usable
 * (a heap the parent was destroying stays dying in the child, its
 * remaining pages lost to it: memory only). */
#include "heap/canary.h"
#include "heap/user_heap.h"
#include "heap/heap.h"
#include "heap/size_class.h"
#include "guard/guard.h"
#include "os/lock.h"
#include "os/os.h"
#include "policy/config.h"
#include "remote/remote.h"
#include "segment/free_list.h"
#include "segment/list_check.h"
#include "segment/page_cache.h"
#include "segment/segment.h"
#include "stats/stats.h"

#include <string.h>

static hak_lock_t uheap_lock = HAK_LOCK_NAMED("user_heaps");
static hak_heap_t *uheap_list; /* live and dying heaps, through live_next/live_prev */
static hak_heap_t *uheap_pool; /* records for reuse, through pool_next */

/* ---- pages (their lists: heap.h) ------------------------------------------ */

HAK_INLINE uint8_t *page_base(const hak_page_t *p) {
  return (uint8_t *)segment_of(p) + (size_t)p->first_slice * HAK_SLICE_SIZE;
}

/* ---- heaps ------------------------------------------------------------------ */

hak_heap_t *uheap_new(void) {
  hak_lock(&uheap_lock);
  hak_heap_t *h = uheap_pool;
  if (h) uheap_pool = h->pool_next;
  hak_unlock(&uheap_lock);
  if (!h) {
    h = os_map(align_up(HAK_UHEAP_OC_OFFSET + sizeof(hak_uheap_oc_t), os_page_size()));
    if (!h) return NULL;
  }
  /* A pooled record's lists are empty: destroy and delete leave them so. */
  h->pool_next = NULL;
  h->kept_pages = 0;
  /* A segment shard of its own draw (kept through the record's reuse): its
   * pages come from that shard's segments, not from one all heaps share. */
  if (!h->pcache.shard) h->pcache.shard = segment_shard_pick();
  atomic_store_explicit(&h->user_state, HAK_UHEAP_LIVE, memory_order_release);
  /* The creating thread owns the cache (its lists are empty: teardown
   * left them so). */
  if (uheap_owner_cache_ok()) atomic_store_explicit(&uheap_oc(h)->owner, uheap_self(), memory_order_relaxed);
  hak_lock(&uheap_lock);
  h->live_prev = NULL;
  h->live_next = uheap_list;
  if (uheap_list) uheap_list->live_prev = h;
  uheap_list = h;
  hak_unlock(&uheap_lock);
  return h;
}

bool uheap_live(hak_heap_t *h) {
  return atomic_load_explicit(&h->user_state, memory_order_relaxed) == HAK_UHEAP_LIVE;
}

/* Live and ours -> DYING, under uheap_lock; false (reported) otherwise. */
static bool begin_teardown(hak_heap_t *h, const char *fn) {
  hak_lock(&uheap_lock);
  hak_heap_t *x = uheap_list;
  while (x && x != h) x = x->live_next;
  bool ok = x && atomic_load_explicit(&h->user_state, memory_order_relaxed) == HAK_UHEAP_LIVE;
  if (ok) atomic_store_explicit(&h->user_state, HAK_UHEAP_DYING, memory_order_relaxed);
  hak_unlock(&uheap_lock);
  if (!ok) report_bad(fn, "not a live heap (destroyed or deleted already?)", h);
  return ok;
}

/* DYING -> GONE, off the list, into the pool. */
void uheap_finish(hak_heap_t *h) {
  hak_lock(&uheap_lock);
  if (h->live_prev) h->live_prev->live_next = h->live_next; else uheap_list = h->live_next;
  if (h->live_next) h->live_next->live_prev = h->live_prev;
  h->live_next = h->live_prev = NULL;
  atomic_store_explicit(&h->user_state, HAK_UHEAP_GONE, memory_order_release);
  h->pool_next = uheap_pool;
  uheap_pool = h;
  hak_unlock(&uheap_lock);
}

/* ---- allocation ------------------------------------------------------------- */

/* A page for class cls, owned by h and marked in the slice map so that its
 * blocks never enter a thread's cache. h->lock held. */
static hak_page_t *page_new(hak_heap_t *h, unsigned cls) {
  hak_page_t *pg = page_cache_alloc_in(NULL, h->pcache.shard, class_slices(cls), cls);
  if (!pg) return NULL;
  atomic_store_explicit(&pg->owner, h, memory_order_release);
  /* No block of the page is out yet: no free() can read the old entry. */
  slice_map_set(page_base(pg), pg->slice_count, HAK_UHEAP_MAP_V);
  pg->state = HAK_PAGE_AVAIL;
  list_push_head(&h->avail[cls], pg);
  return pg;
}

/* One block of class cls from h's pages, or NULL (the OS refused a page).
 * h->lock held, h live. */
static void *take_block(hak_heap_t *h, unsigned cls) {
  hak_page_t *pg = h->avail[cls].head;
  if (HAK_UNLIKELY(!pg)) pg = page_new(h, cls);
  if (HAK_UNLIKELY(!pg)) return NULL;
  void *b = pg->free;
  if (b) {
    pg->free = block_next(pg, b);
    LIST_CHECK_NEXT("heap page free list (take)", pg, pg->free);
  } else {
#if HAK_SECURE
    canary_guard_page(pg); /* heap/canary.h */
    canary_carved(pg->bump, 1, pg->bsize);
#endif
    b = pg->bump;
    page_bump_set(pg, (uint8_t *)b + pg->bsize); /* read by other threads' free checks (page_bump) */
  }
  pg->used++;
  if (!page_has_free(pg)) {
    list_remove(&h->avail[cls], pg);
    list_push_head(&h->full[cls], pg);
    pg->state = HAK_PAGE_FULL;
  }
  HAK_CSTAT_INC(cls, HAK_CS_TAKEN);
  return b;
}

#if HAK_UHEAP_OWNER_CACHE
/* Blocks one refill of the owner's cache reserves: 8 KiB of the class, at
 * least 1 and at most 128 blocks (the lock is then 1/128 of a 32 B
 * allocation's cost, and a class pins at most one refill's blocks). */
HAK_INLINE unsigned refill_count(unsigned cls) {
  unsigned n = (unsigned)(8192 / hak_class_size[cls]);
  return n < 1 ? 1 : n > 128 ? 128 : n;
}
#endif

#if HAK_UHEAP_OWNER_CACHE
/* Up to want blocks of class cls from h's pages, linked through their
 * first word in address order of each run, into *list; returns how many
 * (fewer only when the OS refuses a page). h->lock held, h live. */
static unsigned take_run(hak_heap_t *h, unsigned cls, unsigned want, void **list, hak_page_t **fresh) {
  void **tail = list;
  unsigned got = 0;
  while (got < want) {
    hak_page_t *pg = h->avail[cls].head;
    if (HAK_UNLIKELY(!pg)) {
      /* A heap that has filled a page of the class gets its next page
       * resident in one go if it is not (uheap_alloc, after the lock). */
      bool busy_class = h->full[cls].head != NULL;
      pg = page_new(h, cls);
      if (pg && busy_class && pg->known_zero) *fresh = pg;
    }
    if (HAK_UNLIKELY(!pg)) break;
    unsigned before = got;
    for (void *b = pg->free; b && got < want; b = pg->free) {
      pg->free = block_next(pg, b);
      LIST_CHECK_NEXT("heap page free list (take)", pg, pg->free);
      *tail = b;
      tail = (void **)b;
      got++;
    }
    if (got < want && pg->bump < pg->end) {
      size_t left = (size_t)(pg->end - pg->bump) / pg->bsize;
      unsigned k = left < want - got ? (unsigned)left : want - got;
      uint8_t *b = pg->bump;
      for (unsigned i = 0; i < k; i++, b += pg->bsize) {
        *tail = b;
        tail = (void **)b;
      }
      page_bump_set(pg, b);
      got += k;
    }
    pg->used += got - before;
    if (!page_has_free(pg)) {
      list_remove(&h->avail[cls], pg);
      list_push_head(&h->full[cls], pg);
      pg->state = HAK_PAGE_FULL;
    }
  }
  *tail = NULL;
#if HAK_CHECKS
  for (void *b = *list; b; b = *(void **)b) ((uintptr_t *)b)[1] = HAK_UHEAP_RESERVED(b); /* freeing one: a double free */
#endif
  HAK_CSTAT_ADD(cls, HAK_CS_TAKEN, got);
  return got;
}
#endif

void *uheap_alloc(hak_heap_t *h, unsigned cls) {
  void *b = uheap_cached(h, cls);
  if (b) return b;
#if HAK_UHEAP_OWNER_CACHE
  /* The owner refills its cache: busy through the refill (a revoker waits
   * for it; it holds no lock while it does). */
  hak_uheap_oc_t *oc = uheap_oc(h);
  hak_page_t *fresh = NULL;
  bool owner = false;
  if (atomic_load_explicit(&oc->owner, memory_order_relaxed) == uheap_self()) {
    atomic_store_explicit(&oc->busy, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    owner = atomic_load_explicit(&oc->owner, memory_order_relaxed) == uheap_self();
    if (!owner) atomic_store_explicit(&oc->busy, 0, memory_order_release);
  }
#endif
  heap_lock(h);
  if (HAK_LIKELY(atomic_load_explicit(&h->user_state, memory_order_relaxed) == HAK_UHEAP_LIVE)) {
#if HAK_UHEAP_OWNER_CACHE
    if (owner && !oc->list[cls]) {
      /* One for the caller, the rest for the cache, in address order. */
      void *list;
      if (take_run(h, cls, refill_count(cls), &list, &fresh)) {
        b = list;
        oc->list[cls] = *(void **)b;
      }
    } else
#endif
    b = take_block(h, cls);
  }
  heap_unlock(h);
#if HAK_UHEAP_OWNER_CACHE
  /* Outside the lock (other threads' frees do not wait for the kernel);
   * the page stays h's: the blocks just reserved keep it from emptying,
   * and a destroy or delete waits for busy. */
  if (fresh) os_populate(page_base(fresh), (size_t)fresh->slice_count * HAK_SLICE_SIZE);
  if (owner) atomic_store_explicit(&oc->busy, 0, memory_order_release);
#endif
  return b;
}

void *uheap_alloc_large(hak_heap_t *h, size_t size, size_t align, bool zero) {
  if (align < HAK_MIN_ALIGN) align = HAK_MIN_ALIGN;
  /* Secure build: a guard page after the block, as large.c's (a cached
   * large page may come with one already). */
  size_t guard = HAK_SECURE ? os_page_size() : 0;
  /* ... and its head before it (heap/canary.h): the block starts
   * max(align, HAK_HEAD) into the run */
  size_t lead = HAK_HEAD ? (align > HAK_HEAD ? align : HAK_HEAD) : 0;
  unsigned n = (unsigned)((size + (size == 0) + guard + lead + HAK_SLICE_SIZE - 1) >> HAK_SLICE_SHIFT);
  heap_lock(h);
  hak_page_t *pg = NULL;
  if (atomic_load_explicit(&h->user_state, memory_order_relaxed) == HAK_UHEAP_LIVE) {
    pg = page_cache_alloc_in(NULL, h->pcache.shard, n, HAK_CLASS_NONE);
    if (pg) {
      uint8_t *b = (uint8_t *)align_up((uintptr_t)pg->start + HAK_HEAD, align);
      pg->start = b;
      pg->bsize = (uint32_t)(pg->end - guard - b);
      pg->used = 1;
#if HAK_SECURE
      segment_large_guard(pg);
#endif
      if (zero && !pg->known_zero) memset(b, 0, size);
      /* Set before the block is out: large_free tells heap pages by it. */
      atomic_store_explicit(&pg->owner, h, memory_order_release);
      list_push_head(&h->user_large, pg);
    }
  }
  heap_unlock(h);
  if (pg) HAK_STAT_INC(HAK_EV_LARGE_ALLOC);
  return pg ? pg->start : NULL;
}

hak_heap_t *uheap_of(const void *p) {
  hak_segment_t *s = segment_of(p);
  if (s->kind != HAK_SEG_SMALL) return NULL;
  hak_page_t *pg = __atomic_load_n(&s->slice_page[slice_index(p)], __ATOMIC_ACQUIRE);
  hak_heap_t *h = pg ? atomic_load_explicit(&pg->owner, memory_order_acquire) : NULL;
  return h && atomic_load_explicit(&h->user_state, memory_order_relaxed) != HAK_UHEAP_NONE ? h : NULL;
}

/* ---- free ------------------------------------------------------------------- */

#if HAK_WORD_CHECKS
static bool on_free_list(const hak_page_t *pg, const void *p) {
  for (void *b = pg->free; b; b = block_next(pg, b))
    if (b == p) return true;
  return false;
}
#endif

/* The page emptied: back to its segment, unless it is the class's only page
 * with room (the next malloc would fetch it again). h->lock held. */
static void page_emptied(hak_heap_t *h, hak_page_t *pg) {
  hak_page_list_t *l = &h->avail[pg->cls];
  if (l->head == pg && pg->next == NULL) return;
  list_remove(l, pg);
  segment_page_free(pg);
}

static void block_return(hak_heap_t *h, hak_page_t *pg, void *p);

bool uheap_free(void *p) {
  hak_segment_t *s = segment_of(p);
  hak_page_t *pg = __atomic_load_n(&s->slice_page[slice_index(p)], __ATOMIC_ACQUIRE);
  if (!pg) return false;
  hak_heap_t *h = atomic_load_explicit(&pg->owner, memory_order_acquire);
  /* A thread heap's record says NONE forever, a first-class heap's never. */
  if (!h || atomic_load_explicit(&h->user_state, memory_order_relaxed) == HAK_UHEAP_NONE) return false;
  heap_lock(h);
  /* Under the lock the owner says it all: delete and destroy change it
   * (abandon, detach) under this lock, before the slice map or the page
   * record can change. A heap being torn down that has not taken the lock
   * yet still has its pages: the block goes back as usual (delete then
   * hands the page over with the right count; destroy drops it anyway). */
  if (atomic_load_explicit(&pg->owner, memory_order_relaxed) != h) {
    heap_unlock(h);
    /* Deleted meanwhile (the page is the process's now): an ordinary free.
     * Otherwise destroyed meanwhile: the program's bug, reported. */
    if (!uheap_class_block(p)) return false;
    report_bad("free", "block of a destroyed heap", p);
    return true;
  }
  const char *bad = NULL;
  if ((uint8_t *)p >= pg->bump || (uint8_t *)p < pg->start) bad = "invalid pointer";
#if HAK_WORD_CHECKS /* the secure build checked p's word (heap/canary.h) */
  else if (((uintptr_t *)p)[1] == HAK_FREE_MARK(p) && on_free_list(pg, p)) bad = "double free";
#if HAK_UHEAP_OWNER_CACHE
  /* in the owner's cache (which only the owner may walk): the stamp says it */
  else if (((uintptr_t *)p)[1] == HAK_UHEAP_RESERVED(p)) bad = "double free";
#endif
#endif
  if (bad) {
    heap_unlock(h);
    report_bad("free", bad, p);
    return true;
  }
#if HAK_WORD_CHECKS /* the secure build marked p's word */
  ((uintptr_t *)p)[1] = HAK_FREE_MARK(p);
#endif
  HAK_CSTAT_INC(pg->cls, HAK_CS_RETURNED);
  block_return(h, pg, p);
  heap_unlock(h);
  return true;
}

/* p back on its page pg of h. h->lock held. */
static void block_return(hak_heap_t *h, hak_page_t *pg, void *p) {
  unsigned cls = pg->cls;
  LIST_CHECK_BLOCK("heap page free list (return)", pg, p);
  block_set_next(pg, p, pg->free);
  page_free_prepended(pg, p, p); /* free_tail: for thread heaps that adopt pg */
  pg->used--;
  if (pg->state == HAK_PAGE_FULL) { /* behind the current page */
    list_remove(&h->full[cls], pg);
    hak_page_list_t *l = &h->avail[cls];
    if (l->head) {
      pg->prev = l->head;
      pg->next = l->head->next;
      if (pg->next) pg->next->prev = pg; else l->tail = pg;
      l->head->next = pg;
    } else {
      list_push_head(l, pg);
    }
    pg->state = HAK_PAGE_AVAIL;
  }
  if (pg->used == 0) page_emptied(h, pg);
}

bool uheap_free_large(hak_page_t *pg) {
  hak_heap_t *h = atomic_load_explicit(&pg->owner, memory_order_acquire);
  if (!h || atomic_load_explicit(&h->user_state, memory_order_relaxed) == HAK_UHEAP_NONE) return false;
  heap_lock(h);
  bool mine = atomic_load_explicit(&pg->owner, memory_order_relaxed) == h;
  if (mine) {
    list_remove(&h->user_large, pg);
    atomic_store_explicit(&pg->owner, NULL, memory_order_relaxed);
    segment_page_free(pg);
  }
  heap_unlock(h);
  if (mine) HAK_STAT_INC(HAK_EV_LARGE_FREE);
  return mine;
}

/* ---- destroy and delete ----------------------------------------------------- */

/* The lists emptied (their pages have been dealt with). */
static void lists_clear(hak_heap_t *h) {
  for (unsigned c = 0; c < HAK_NCLASSES; c++) h->avail[c] = h->full[c] = (hak_page_list_t){0};
  h->user_large = (hak_page_list_t){0};
}

/* The owner's cache emptied: its blocks dropped with their pages
 * (destroy), or back on their pages (delete: they must not count as used
 * when the pages become the process's). h->lock held, the cache revoked. */
static void cache_clear(hak_heap_t *h, bool give_back) {
  hak_uheap_oc_t *oc = uheap_oc(h);
  for (unsigned c = 0; c < HAK_NCLASSES; c++) {
    for (void *b = give_back ? oc->list[c] : NULL, *next; b; b = next) {
      next = *(void **)b;
      hak_page_t *pg = segment_of(b)->slice_page[slice_index(b)];
#if HAK_WORD_CHECKS
      ((uintptr_t *)b)[1] = HAK_FREE_MARK(b);
#endif
      block_return(h, pg, b);
      HAK_CSTAT_INC(c, HAK_CS_RETURNED);
    }
    oc->list[c] = NULL;
  }
}

bool uheap_destroy(hak_heap_t *h) {
  if (!begin_teardown(h, "hak_heap_destroy")) return false;
  uheap_revoke(h);
  heap_lock(h);
  cache_clear(h, false);
  hak_page_t *chain = NULL;
  size_t slices = 0;
  HEAP_FOR_EACH_PAGE(h, list, pg) {
    HAK_CSTAT_ADD(pg->cls, HAK_CS_RETURNED, pg->used);
    pg->next = chain;
    chain = pg;
    slices += pg->slice_count;
  }
  for (hak_page_t *pg = h->user_large.head, *next; pg; pg = next) {
    next = pg->next;
    HAK_STAT_INC(HAK_EV_LARGE_FREE);
    pg->next = chain;
    chain = pg;
    slices += pg->slice_count;
  }
  lists_clear(h);
  /* Detached (owner NULL, slices free in the slice map) and returned under
   * one acquisition of the segment lock; purged at once when they are more
   * than the dirty budget (the purge delay would keep them resident until
   * some later slow path), else left to the segments' purge policy, warm
   * for the next heap. */
  if (chain && (size_t)slices * HAK_SLICE_SIZE > hak_config.dirty_max) segment_pages_free_purged(chain);
  else if (chain) segment_pages_free(h->pcache.shard, chain);
  heap_unlock(h);
  return true;
}

bool uheap_delete(hak_heap_t *h) {
  if (!begin_teardown(h, "hak_heap_delete")) return false;
  uheap_revoke(h);
  heap_lock(h);
  cache_clear(h, true);
  hak_page_t *empty = NULL;
  HEAP_FOR_EACH_PAGE(h, list, pg) {
    pg->next = pg->prev = NULL;
    if (pg->used == 0) {
      pg->next = empty;
      empty = pg;
      continue;
    }
    /* Fenced first: a block freed through a thread's cache from the
     * moment the entry below is the class's may reach the page as a
     * remote free, which then piles up silently for the adopter. */
    remote_fence(pg);
    slice_map_set(page_base(pg), pg->slice_count, pg->cls + 1u);
    abandon_page(pg);
  }
  /* Large blocks become ordinary large blocks. */
  for (hak_page_t *pg = h->user_large.head, *next; pg; pg = next) {
    next = pg->next;
    pg->next = pg->prev = NULL;
    atomic_store_explicit(&pg->owner, NULL, memory_order_release);
  }
  lists_clear(h);
  if (empty) segment_pages_free(h->pcache.shard, empty);
  heap_unlock(h);
  return true;
}

/* ---- fork ------------------------------------------------------------------- */

void uheap_atfork_prepare(void) {
  hak_lock_fork(&uheap_lock);
  for (hak_heap_t *h = uheap_list; h; h = h->live_next) heap_lock(h);
}
void uheap_atfork_parent(void) {
  for (hak_heap_t *h = uheap_list; h; h = h->live_next) heap_unlock(h);
  hak_unlock_fork(&uheap_lock);
}
void uheap_atfork_child(void) {
  bool oc_on = uheap_owner_cache_atfork_child();
  for (hak_heap_t *h = uheap_list; h; h = h->live_next) {
    uheap_oc_child(h, oc_on);
    heap_unlock(h);
  }
  hak_lock_reset(&uheap_lock);
}
