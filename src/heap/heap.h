/* heap.h — the per-thread heap.
 *
 * The part the fast paths touch lives in TLS (hak_tls): per size class an
 * array cache of free blocks, popped by malloc and pushed by free, seen
 * through its top block and the address of its next slot (hak_bin_t). Everything
 * else (page lists, the remote-page stack) is in a hak_heap_t drawn from a
 * pool and recycled, never unmapped, because other threads may still signal
 * a heap shortly after its thread has exited. */
#ifndef HAK_HEAP_H
#define HAK_HEAP_H

#include "hak_internal.h"
#include "os/lock.h"
#include "segment/free_list.h"
#include "segment/list_check.h"
#include "segment/page_cache.h"
#include "stats/stats.h"

/* A class cache: a LIFO stack of free blocks in the heap record's slot
 * store (heap/tcache.c, "Slots"), seen from TLS through two words, so that
 * malloc returns a block held in the bin itself and never waits for a load
 * from the slot array (which, at an address that moves over the whole 4 KiB
 * range as the stack moves, can wait on the program's pending stores of a
 * memset: 4K aliasing; measured in the churn_fill work of 2026-11-27, 0.93 of the CPU time on
 * churn_fill as a prototype):
 * - `top` is the block malloc hands out next, a copy of ptr[-1]; NULL when
 *   the cache is empty (a NULL word sits below every slot area);
 * - `ptr` is &slots[count], where free stores the next block; the word at
 *   slots[cap] is HAK_SLOT_FULL, so free's room test is one compare of the
 *   word it is about to write.
 * malloc: p = top; if (!p) miss; ptr--; top = ptr[-1].
 * free:   if (*ptr == FULL) miss; *ptr++ = p; top = p.
 * count and cap are the cold side's: count = ptr - the area's base, both
 * base and cap in the heap record (h->area, bin_count and bin_cap below). A
 * bin without a slot area (no heap, a class not yet used, the two
 * sentinels below) points into hak_no_slots: top NULL, *ptr FULL.
 * (x86_64, front.h: malloc is 7 instructions from the bin's offset to ret,
 * as with {slots, count, cap}; free one fewer.) */
typedef struct hak_bin {
  void  *top;        /* ptr[-1]: the block the next malloc returns, NULL if none */
  void **ptr;        /* &slots[count]; *ptr == HAK_SLOT_FULL when count == cap */
} hak_bin_t;

/* The word at slots[cap]: never a block (blocks are 16-byte aligned). */
#define HAK_SLOT_FULL ((void *)1)
/* {NULL, FULL}: the area of a bin without one (&hak_no_slots[1]). */
extern void *const hak_no_slots[2] HAK_HIDDEN;
#define HAK_BIN_NONE ((hak_bin_t){NULL, (void **)&hak_no_slots[1]})

/* The bin operations the cold side shares with the fast paths (front.h has
 * its own, through the thread pointer). Valid for any bin, with or without
 * a heap. */
HAK_INLINE bool bin_room(const hak_bin_t *b) { return *b->ptr != HAK_SLOT_FULL; }
HAK_INLINE void bin_push(hak_bin_t *b, void *p) {
  *b->ptr++ = p;
  b->top = p;
}
/* b->top != NULL */
HAK_INLINE void *bin_pop(hak_bin_t *b) {
  void *p = b->top;
  b->top = (--b->ptr)[-1];
  return p;
}

enum { HAK_THREAD_NEW = 0, HAK_THREAD_LIVE = 1, HAK_THREAD_DEAD = 2 };

/* A class's pending list: a page's whole free list, handed to the thread
 * by a refill instead of being walked into the cache (heap_take). malloc's
 * miss pops one block of it per call before it refills (front/malloc.c), so
 * each link is read by the call that hands its block out, a cache miss
 * overlapped with the program's own work, instead of a cache-full of them
 * read back to back. The blocks stay linked as on their page (encoded in
 * the secure build) and all lie on one page, which counts them as used;
 * heap_return_pending gives the rest back (thread exit, malloc_trim, an
 * idle class shrunk). The lists live in the heap
 * record, not in TLS: the TLS block must stay small enough for dlopen of
 * the initial-exec library (test_dlopen: "cannot allocate memory in static
 * TLS block" with them beside the bins). */
typedef struct hak_pend {
  void    *head;     /* next block to hand out, NULL when empty */
  uint32_t n;        /* blocks left in the list */
  uint32_t lend;     /* 0, or the pend[] index of the list a dry class's misses pop once
                        this one is empty: its lender's (heap/thread.c, "Borrowing") */
} hak_pend_t;

/* bins[v] is indexed by the slice map's value v (see guard/registry.h):
 * v == 0 (not a small block of ours, or not known yet) and v ==
 * HAK_CLASS_NONE + 1 (large) are sentinels without slots (HAK_BIN_NONE), so
 * those pointers miss the cache and take the slow path without a branch of
 * their own. */
typedef struct hak_tls {
  hak_bin_t   bins[HAK_NCLASSES + 2];
  hak_heap_t *heap;
  uint32_t    state;
  /* Set while an aligned request (front/api.c) takes a block of its class:
   * a refill then does not borrow (thread.c, "Borrowing"). In the padding
   * after `state`: the TLS block keeps its size. */
  uint8_t     aligned;
} hak_tls_t;

HAK_INLINE hak_bin_t *bin_of(hak_tls_t *t, unsigned cls) { return &t->bins[cls + 1]; }

/* Pop the next block p of the non-empty pending list *q (a plain pointer,
 * or the thread-pointer-relative one of front/front.h, hence a macro). Its
 * link is read now (the secure build decodes and checks it), and the block
 * after it is prefetched: the next pop reads its link and the program writes
 * that block once it has it, while it works in between. The hint asks for
 * writing, but without -mprfchw GCC emits a read prefetch (prefetcht0); a
 * real prefetchw measured no better on sizemix or prodcons (stop 23), so the
 * portable builtin stays. */
#define PEND_POP(q, p)                                   \
  do {                                                   \
    (p) = (q)->head;                                     \
    void *pend_next_ = block_next(page_of(p), (p));      \
    LIST_CHECK_NEXT("pending list", page_of(p), pend_next_); \
    (q)->head = pend_next_;                              \
    (q)->n--;                                            \
    __builtin_prefetch(pend_next_, 1, 3);                \
  } while (0)

/* Initial-exec: one fixed offset from the thread pointer. The dynamic-TLS
 * build (HAKMEM_DYNAMIC_TLS, loadable with dlopen) takes the model of its
 * compiler flags instead. */
#if HAK_DYNAMIC_TLS
extern __thread hak_tls_t hak_tls HAK_HIDDEN;
#else
extern __thread hak_tls_t hak_tls HAK_HIDDEN __attribute__((tls_model("initial-exec")));
#endif

typedef struct hak_page_list { hak_page_t *head, *tail; } hak_page_list_t;

/* The owner's class caches as the cold side sees them (hak_bin_t, and
 * heap/tcache.c "Slots"): each area's base (slots[0]; NULL below it) and
 * cap (FULL at slots[cap]), both on one line for the flush. */
typedef struct hak_area {
  void   **slots;
  uint32_t cap;
  uint32_t spare_;
} hak_area_t;

struct hak_heap {
  hak_page_list_t avail[HAK_NCLASSES];  /* pages with blocks to hand out; head is current */
  hak_page_list_t full[HAK_NCLASSES];   /* pages with none; remote frees bring them back */
  _Atomic(hak_page_t *) remote_pages;   /* pages that received remote frees (MPSC stack) */
  hak_heap_t *pool_next;                /* first-class heaps (user_heap.c): record pool link */
  hak_heap_t *live_next, *live_prev;    /* first-class heaps: the live list */
  _Atomic(uint64_t) pool_word;          /* thread heaps: tid, state, generation (heap/pool.c) */
  _Atomic(hak_heap_t *) pool_link;      /* thread heaps: free or dying stack link (heap/pool.c) */
  _Atomic(uint32_t) busy;               /* owner is changing the page lists (see remote.c) */
  uint32_t    awaiting;                 /* dying: pages whose remote signal has not arrived */
  uint16_t    batch[HAK_NCLASSES];      /* next refill size per class (slow start) */
  uint8_t     allocates[HAK_NCLASSES];  /* refills of the class by this heap (saturating at 252-255; heap.c) */
  uint32_t    kept_pages;               /* empty one-slice pages kept beyond the last of a class (heap.c) */
  /* 1: a refill of the class found no free block on the heap's pages (and
   * borrowed instead, thread.c); 0 again once blocks of the class come back
   * to them (class_wet). Written under lock, also by collectors; read by the
   * owner without it, as a hint. */
  _Atomic(uint8_t) dry[HAK_NCLASSES];
  uint8_t     refill_run[HAK_NCLASSES]; /* refills of the class since its last flush (saturating; thread.c) */
  uint8_t     drain[HAK_NCLASSES];      /* bit 0: refilled since the last flush; bit 1: that flush
                                           sent only other threads' blocks (thread.c, "Drain") */
  void      **slot_store;               /* backing store of the bins' slots (heap/tcache.c, "Slots") */
  uint16_t    room[HAK_NCLASSES];       /* slots the class's area holds: >= its cap */
  hak_page_cache_t pcache;              /* empty pages (and freed large blocks) for reuse */
  /* Cache sizing (heap/tcache.c), all owner-only and on the cold side. */
  size_t      cap_bytes;                /* sum over classes of cap * class size: <= budget */
  uint32_t    tick;                     /* cold events (refills, flushes) of this thread */
  uint32_t    next_step;                /* tick of the learner's next step */
  uint32_t    last_use[HAK_NCLASSES];   /* tick of the class's last cold event */
  uint8_t     lru_prev[HAK_NCLASSES];   /* the classes in order of last_use, least recent */
  uint8_t     lru_next[HAK_NCLASSES];   /*   first (HAK_NCLASSES: none), so make_room */
  uint8_t     lru_first, lru_last;      /*   reads them from the oldest and stops at the */
                                        /*   first one too young; a class without a */
                                        /*   starting cap joins at its first cold */
                                        /*   event (heap/tcache.c) */
  uint16_t    refills[HAK_NCLASSES];    /* learner counters since its last step */
  uint16_t    flushes[HAK_NCLASSES];
  uint16_t    collects[HAK_NCLASSES];   /* pages of the class that brought remote frees */
  uint8_t     heat[HAK_NCLASSES];       /* cold events since the cap last changed */
  uint16_t    seen_count[HAK_NCLASSES]; /* the cache as last seen on the cold side: */
  void       *seen_top[HAK_NCLASSES];   /*   unchanged since means likely untouched */
  uint8_t     idle_steps[HAK_NCLASSES]; /* learner steps in a row without an event */
  void       *pend_tail[HAK_NCLASSES];  /* last block of the class's pending list (hak_pend_t) */
  /* The owner's pending lists (hak_pend_t), indexed as its TLS bins (the
   * two sentinels stay empty), so malloc's miss finds one at the bin's
   * offset; owner only, never read by a collector. */
  hak_pend_t  pend[HAK_NCLASSES + 2];
  /* Process-wide collection (heap/collect.c): the owner holds `lock` on its
   * slow paths (never on the fast path); another thread takes it only with a
   * try, to collect the remote frees of a heap whose owner stays away. */
  _Atomic(int) lock;
  _Atomic(uint32_t) remote_since;       /* coarse ms of the first signal since the stack was last empty */
  uint32_t    retire_stamp;             /* under lock: a collector is at work; freed time of the pages it retires */
  /* Refills and flushes, counted by the owner under lock (heap_active);
   * peers about to carve read it without the lock, as a hint
   * (collect.c, "Pages to a peer"). */
  _Atomic(uint32_t) activity;
  uint32_t    activity_seen;            /* under lock: `activity` at the last collector pass */
  bool        unreachable;              /* fork child: its lock was held by a thread that is gone */
  bool        retire_stash;             /* under lock: the collector is a refill (heap_collect_peers) */
  /* Owner only (policy/purger.c, purge_tick_busy): refills and flushes left
   * before the next look at the purge deadline's clock, and what it read. */
  uint8_t     purge_skip;
  /* Owner only, in the padding before purge_seen: flushes since the thread's
   * last refill of any class, up to HAK_FREE_RUN (heap/tcache.c, "Free runs"). */
  uint8_t     free_run;
  uint32_t    purge_seen;
  /* 1 while the owner, under its lock, is inside heap_collect_peers' pass
   * (heap/collect.c, "fork"): fork's prepare handler waits for it to be 0.
   * In the padding before all_next: no offset moves, and on the line of
   * `lock`, which the owner has just written. */
  _Atomic(uint32_t) collecting;
  hak_heap_t *all_next;                 /* every heap ever made (heaps are recycled, never unmapped) */
  hak_heap_t *peer_cursor;              /* under lock: where heap_collect_peers goes on (collect.c) */
  /* Written under lock, read without it as a hint by peers about to cut a
   * page (heap/collect.c, "Pages to a peer"): 1 when the class may have a
   * page to spare, 0 after a look under the lock found none. */
  _Atomic(uint8_t) spare[HAK_NCLASSES];
  /* A hint as spare: 1 once blocks of the class came back onto a page's free
   * list (class_wet), 0 after a look under the lock found no page with any
   * (heap_page_give, for a peer about to carve). */
  _Atomic(uint8_t) loose[HAK_NCLASSES];
  _Atomic(uint32_t) give_seen;          /* `activity` at a carving peer's last look (a hint, no lock) */
  /* First-class heaps (heap/user_heap.c): HAK_UHEAP_*, 0 for thread heaps
   * and the shared heap; their large blocks, linked through page next/prev. */
  _Atomic(uint8_t) user_state;
  hak_page_list_t user_large;
#if HAK_STATS
  /* Thread heaps: the event counters of the threads that had it, added to
   * by its thread only (hak_stat_mine, stats/stats.h). */
  hak_counters_t stats;
#endif
  /* Last in the record: fields inserted among the ones above have cost
   * xmalloc 13-20% before. (As a table after the slot areas instead, the
   * record's end, it cost a resident page more per thread: test_heap_record.) */
  hak_area_t  area[HAK_NCLASSES];
};

_Static_assert(sizeof(hak_pend_t) == sizeof(hak_bin_t), "pend[] is indexed by bin offsets");

HAK_INLINE hak_area_t *heap_area(hak_heap_t *h, unsigned c) { return &h->area[c]; }
HAK_INLINE void **area_slots(hak_heap_t *h, unsigned c) { return h->area[c].slots; }
HAK_INLINE void area_set_slots(hak_heap_t *h, unsigned c, void **s) { h->area[c].slots = s; }

/* The cold side's view of class c's cache of thread t, which has a heap.
 * A class's bin points into its area only from the class's first miss on
 * (bin_open): until then it is HAK_BIN_NONE, and the area's words (the
 * NULL below it, FULL at the cap) are not written, so that a thread that
 * uses a few classes touches the pages of their areas only, as before the
 * words existed (test_heap_record). */
HAK_INLINE bool bin_is_open(const hak_bin_t *b) { return b->ptr != (void **)&hak_no_slots[1]; }
HAK_INLINE void **bin_slots(hak_tls_t *t, unsigned c) { return area_slots(t->heap, c); }
HAK_INLINE uint32_t bin_count(hak_tls_t *t, unsigned c) {
  hak_bin_t *b = bin_of(t, c);
  return bin_is_open(b) ? (uint32_t)(b->ptr - area_slots(t->heap, c)) : 0;
}
HAK_INLINE uint32_t bin_cap(hak_tls_t *t, unsigned c) { return heap_area(t->heap, c)->cap; }
/* The area's words, and the bin pointed at it, empty. */
HAK_INLINE void bin_open(hak_tls_t *t, unsigned c) {
  hak_bin_t *b = bin_of(t, c);
  if (HAK_LIKELY(bin_is_open(b))) return;
  void **s = area_slots(t->heap, c);
  s[-1] = NULL;
  s[heap_area(t->heap, c)->cap] = HAK_SLOT_FULL;
  *b = (hak_bin_t){NULL, s};
}
/* The cache now holds its area's first n slots. */
HAK_INLINE void bin_set_count(hak_tls_t *t, unsigned c, uint32_t n) {
  bin_open(t, c);
  hak_bin_t *b = bin_of(t, c);
  b->ptr = area_slots(t->heap, c) + n;
  b->top = b->ptr[-1]; /* the NULL below the area when n == 0 */
}
/* The marker moves to the new cap (count <= cap, within the area's room). */
HAK_INLINE void bin_set_cap(hak_tls_t *t, unsigned c, uint32_t cap) {
  if (bin_is_open(bin_of(t, c))) {
    void **s = area_slots(t->heap, c);
    s[heap_area(t->heap, c)->cap] = NULL;
    s[cap] = HAK_SLOT_FULL;
  }
  heap_area(t->heap, c)->cap = cap;
}
/* The pending list of class cls of thread t (which has a heap). */
HAK_INLINE hak_pend_t *pend_of(hak_tls_t *t, unsigned cls) { return &t->heap->pend[cls + 1]; }

/* The calling thread's page cache, NULL if it has no live heap. */
HAK_INLINE hak_page_cache_t *thread_page_cache(void) {
  return hak_tls.state == HAK_THREAD_LIVE ? &hak_tls.heap->pcache : NULL;
}

/* The heap's own lock (protocol in heap/collect.c). Not a process-wide lock,
 * so the observe build does not count it: the owner takes it once per slow
 * path, and meets another thread there only while a collector works. */
HAK_INLINE void heap_lock(hak_heap_t *h) {
  for (unsigned spins = 0;; spins++) {
    if (atomic_load_explicit(&h->lock, memory_order_relaxed) == 0 &&
        !atomic_exchange_explicit(&h->lock, 1, memory_order_acquire))
      return;
    if (spins < 64) cpu_relax();
    else sched_yield();
  }
}
HAK_INLINE bool heap_trylock(hak_heap_t *h) {
  return atomic_load_explicit(&h->lock, memory_order_relaxed) == 0 &&
         !atomic_exchange_explicit(&h->lock, 1, memory_order_acquire);
}
HAK_INLINE void heap_unlock(hak_heap_t *h) { atomic_store_explicit(&h->lock, 0, memory_order_release); }

/* The owner marks its heap busy while it changes the page lists, so that a
 * forked child can tell a consistent heap of a vanished thread from one that
 * was caught half-changed (remote.c, "Fork"). The fence orders the mark
 * before the changes; the release store orders the changes before the clear.
 * (heap.c, heap_exit.c) */
HAK_INLINE void busy_begin(hak_heap_t *h) {
  atomic_store_explicit(&h->busy, 1, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
}
HAK_INLINE void busy_end(hak_heap_t *h) { atomic_store_explicit(&h->busy, 0, memory_order_release); }

/* A heap's page lists (avail, full, user_large): doubly linked through the
 * pages' next/prev (heap.c, heap_exit.c, user_heap.c). */
/* Every page on h's class lists, class by class, avail before full, with
 * `list` the list it is on. p's successor is read before the body runs, so
 * the body may unlink, release or move p (and `continue` goes on to it). */
#define HEAP_FOR_EACH_PAGE(h, list, p)                                                                        \
  for (unsigned list##_i = 0; list##_i < 2u * HAK_NCLASSES; list##_i++)                                       \
    for (hak_page_list_t *list = (list##_i & 1) ? &(h)->full[list##_i >> 1] : &(h)->avail[list##_i >> 1]; list; \
         list = NULL)                                                                                          \
      for (hak_page_t *p = list->head, *p##_next; p && (p##_next = p->next, true); p = p##_next)

static inline void list_push_head(hak_page_list_t *l, hak_page_t *p) {
  p->prev = NULL;
  p->next = l->head;
  if (l->head) l->head->prev = p; else l->tail = p;
  l->head = p;
}

static inline void list_push_tail(hak_page_list_t *l, hak_page_t *p) {
  p->next = NULL;
  p->prev = l->tail;
  if (l->tail) l->tail->next = p; else l->head = p;
  l->tail = p;
}

static inline void list_remove(hak_page_list_t *l, hak_page_t *p) {
  if (p->prev) p->prev->next = p->next; else l->head = p->next;
  if (p->next) p->next->prev = p->prev; else l->tail = p->prev;
  p->next = p->prev = NULL;
}

/* p leaves the kept empty pages (taken from, or given back). */
HAK_INLINE void page_unkeep(hak_heap_t *h, hak_page_t *p) {
  if (!p->kept) return;
  p->kept = 0;
  h->kept_pages--;
}

/* h->lock held: a refill or flush (see activity). A load and a store, not
 * an atomic add: only the lock holder writes it. */
HAK_INLINE void heap_active(hak_heap_t *h) {
  atomic_store_explicit(&h->activity, atomic_load_explicit(&h->activity, memory_order_relaxed) + 1,
                        memory_order_relaxed);
}

/* Blocks of class c came back to pages of h (see dry and loose). */
HAK_INLINE void class_wet(hak_heap_t *h, unsigned c) {
  if (atomic_load_explicit(&h->dry[c], memory_order_relaxed)) atomic_store_explicit(&h->dry[c], 0, memory_order_relaxed);
  if (!atomic_load_explicit(&h->loose[c], memory_order_relaxed)) atomic_store_explicit(&h->loose[c], 1, memory_order_relaxed);
}

HAK_INLINE bool page_has_free(const hak_page_t *p) { return p->free != NULL || p->bump < p->end; }

/* Blocks taken from pages of heap h, up to max, into out[]; returns how many
 * (0 only when the OS refuses memory). With `pend` (empty), a page's free
 * list goes there whole instead, and the call returns what it had with pend
 * filled; but a list whose head is the run this heap's last flush linked
 * there (heap.c, "Hot") is walked into out[] up to the class's cache cap,
 * not max: with `pend`, out must be the class's (empty) cache slots, as the
 * refill passes them (thread.c, heap_refill_alloc). */
unsigned heap_take(hak_heap_t *h, unsigned cls, void **out, unsigned max, hak_pend_t *pend, bool grow) HAK_HIDDEN;
/* A pending list's blocks back onto their page; q (h's owner's) is left empty. */
void heap_return_pending(hak_heap_t *h, hak_pend_t *q) HAK_HIDDEN;
/* Give blocks back to their pages: local pages directly, others remotely. */
unsigned heap_return_blocks(hak_heap_t *h, void **blocks, unsigned n) HAK_HIDDEN;
/* p sits on the local free list of its page, and h owns that page (a block
 * freed before: the double-free check of builds with checks). */
bool heap_block_on_page(hak_heap_t *h, void *p) HAK_HIDDEN;
/* Collector side (collect.c), h->lock held: the empty page a heap keeps per class for
 * its next refill goes back to its segment (freed at `stamp`) if the owner
 * has neither refilled nor flushed since the previous pass. True if such
 * pages were left because the owner was active: look again later. */
bool heap_release_idle(hak_heap_t *h, uint32_t stamp) HAK_HIDDEN;
/* Collector side (collect.c), o->lock held: a page of class cls with free blocks that
 * o can spare, off o's lists, fenced for adoption and owned by `to` (which
 * adopts it next: heap_page_adopted), or NULL. With `away` (o's owner has
 * not been on a slow path for a while: collect.c), o's current page too. */
hak_page_t *heap_page_give(hak_heap_t *o, unsigned cls, hak_heap_t *to, bool away) HAK_HIDDEN;
/* Bytes of empty pages on the calling thread's page lists (tests). */
size_t heap_thread_kept_bytes(void) HAK_HIDDEN;
/* Gather blocks other threads freed into pages of h. */
void heap_collect_remote(hak_heap_t *h) HAK_HIDDEN;
/* The same, with h->lock already held (by the owner or a collector). */
void heap_collect_remote_held(hak_heap_t *h) HAK_HIDDEN;
/* The owner-side half of a page receiving its remote frees. */
void heap_page_collect(hak_heap_t *h, hak_page_t *page) HAK_HIDDEN;
/* Adopt a page into h (from the abandoned list). */
void heap_page_adopted(hak_heap_t *h, hak_page_t *page) HAK_HIDDEN;
/* Tear down the heap of a thread that vanished (heap/pool.c; heap/heap_exit.c,
 * as those below): retire empty pages, abandon the rest. Waits a bounded time
 * for remote signals in flight; false if some have not arrived (their pages
 * are still on h's lists): h must then not be reused until heap_reap says so. */
bool heap_destroy(hak_heap_t *h) HAK_HIDDEN;
HAK_INLINE bool heap_has_pages(const hak_heap_t *h) {
  for (unsigned c = 0; c < HAK_NCLASSES; c++)
    if (h->avail[c].head || h->full[c].head) return true;
  return false;
}
/* Thread exit (heap_exit.c, "Parking"): h keeps its pages with a few blocks
 * out for the next thread the pool hands it to (those mostly handed out are
 * abandoned); its remote frees taken in, its page cache flushed. */
void heap_park(hak_heap_t *h) HAK_HIDDEN;
/* Collector side, h->lock held, h parked and not taken since (collect.c):
 * its pages given up as at heap_destroy (retired if empty, else abandoned),
 * but for those with a signal on its way to h, which stay. */
void heap_unpark(hak_heap_t *h) HAK_HIDDEN;
/* A dying heap: release the pages whose signals have arrived since; with
 * `lost`, all of them (after fork, when the senders no longer exist). True
 * when nothing is awaited any more and h may be reused. */
bool heap_reap(hak_heap_t *h, bool lost) HAK_HIDDEN;
/* After fork, in the child: a live heap whose pages may have lost signals
 * (their senders were other threads): collect every queued page. */
void heap_repair_after_fork(hak_heap_t *h) HAK_HIDDEN;

/* Cache sizing (heap/tcache.c): every class cap of a thread starts small and
 * grows on the class's cold events, all caps together within a byte budget. */
void tcache_init(hak_tls_t *t, hak_heap_t *h) HAK_HIDDEN;
/* A refill (count was 0) or flush (count was cap) of the class: may change caps. */
void tcache_cold_event(hak_tls_t *t, unsigned cls, bool refill) HAK_HIDDEN;
void tcache_drain_event(hak_tls_t *t, unsigned cls) HAK_HIDDEN;
/* What tells whether the fast paths have touched class c's cache: its top
 * block, or for an empty cache the pending list's head, which every pop
 * changes. */
HAK_INLINE void *tcache_mark_of(hak_tls_t *t, unsigned c) {
  hak_bin_t *b = bin_of(t, c);
  return b->top ? b->top : pend_of(t, c)->head;
}
/* Record the cache as count blocks under `mark` (tcache_mark_of's value):
 * for callers that have both at hand (the refill's and flush's ends). */
HAK_INLINE void tcache_seen_as(hak_heap_t *h, unsigned c, uint32_t count, void *mark) {
  h->seen_count[c] = (uint16_t)count;
  h->seen_top[c] = mark;
}
/* Remember the cache as it is now (after a refill or flush), to tell later
 * whether the fast paths have touched it since. */
HAK_INLINE void tcache_seen(hak_tls_t *t, unsigned c) {
  tcache_seen_as(t->heap, c, bin_count(t, c), tcache_mark_of(t, c));
}
/* Publish the thread's caps to the statistics (thread exit). */
void tcache_publish(hak_tls_t *t) HAK_HIDDEN;
/* Bytes of blocks in the calling thread's caches (tests and diagnosis). */
size_t heap_thread_cached_bytes(void) HAK_HIDDEN;

/* Thread side (heap/thread.c). */
bool  thread_heap_init(hak_tls_t *t, hak_heap_t *hint) HAK_HIDDEN;      /* false: use the shared heap */
/* *cold: false when the block came without a cold event (a dry class's
 * borrow, thread.c "Borrowing"): the caller then skips the purge tick. */
void *heap_refill_alloc(hak_tls_t *t, unsigned cls, bool *cold) HAK_HIDDEN;
void  heap_flush_free(hak_tls_t *t, unsigned cls, void *p) HAK_HIDDEN;
void  heap_flush_all(hak_tls_t *t) HAK_HIDDEN;
void *shared_alloc(unsigned cls) HAK_HIDDEN;          /* locked heap for dead/early threads */
hak_heap_t *heap_all_first(void) HAK_HIDDEN;          /* list of every heap, through all_next */
hak_heap_t *heap_shared(void) HAK_HIDDEN;
void  heap_atfork_prepare(void) HAK_HIDDEN;
void  heap_atfork_parent(void) HAK_HIDDEN;
void  heap_atfork_child(void) HAK_HIDDEN;

#endif
