/* heap.c — a living heap's pages: taking blocks from them (refill), giving
 * blocks back (flush), collecting remote frees and retiring empty pages.
 * Parking the heap when its thread exits (or tearing it down), and repairing
 * it after fork, are in heap_exit.c, which calls into this file, never the
 * reverse; taking blocks from one page (its free list, a carve, a carve
 * again) is carve.h, compiled into this file. Only the owning thread runs these on its heap
 * (the shared heap runs them under its lock), holding h->lock; the one
 * exception is a collector that got h->lock by a try while the owner stayed
 * away (heap/collect.c).
 * HAKMEM_DEBUG_LISTS (segment/list_check.h) checks the page free lists and
 * pending lists here at each pop, push and splice, and walks a list detached,
 * given back or left on a page that empties against the page's counts. */
#include "heap/heap.h"
#include "heap/canary.h"
#include "heap/carve.h"
#include "heap/collect.h"
#include "heap/size_class.h"
#include "large/page_stash.h"
#include "policy/config.h"
#include "remote/remote.h"
#include "segment/free_list.h"
#include "segment/list_check.h"
#include "segment/segment.h"
#include "stats/stats.h"
#include "os/lock.h"
#include "os/os.h"
#include "policy/purger.h"


static void page_to_full(hak_heap_t *h, hak_page_t *p) {
  list_remove(&h->avail[p->cls], p);
  list_push_head(&h->full[p->cls], p);
  p->state = HAK_PAGE_FULL;
}

/* h->lock held: class cls may now have a page that a peer could take
 * (heap_page_give); a hint, only ever cleared under the lock too. */
HAK_INLINE void spare_mark(hak_heap_t *h, unsigned cls) {
  if (!atomic_load_explicit(&h->spare[cls], memory_order_relaxed))
    atomic_store_explicit(&h->spare[cls], 1, memory_order_relaxed);
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
    spare_mark(h, p->cls);
  } else {
    list_push_head(l, p);
  }
  p->state = HAK_PAGE_AVAIL;
}

/* An empty page goes back to its segment, unless the heap keeps coming back
 * to its class (then the next refill would just fetch it again), or it is
 * queued for its remote frees (then it is retired when popped). A heap that
 * only adopted the page by freeing into it, like a main thread reaping its
 * workers' blocks, gives it back; so does one that refilled the class only
 * once: a thread that touched a class in passing keeps no page of it (64
 * such threads each held ~480 KiB of empty pages, bench_thread_mem).
 *
 * A class that keeps coming back keeps more empty pages of one slice (its
 * blocks up to 8 KiB) than its last one: up to 4 per class and 32 per heap
 * (256 KiB and 2 MiB; 2 and 8 outside the speed profile). A producer whose
 * blocks all come back between two bursts (its consumer ran while it
 * waited: a loaded machine, one CPU for both) saw every page but its current
 * ones emptied, retired and cut again at the next burst, reset to its start
 * and handed out through caches keyed by class, so pages wandered between
 * classes and slices, and each slice ended up resident as far as any class
 * had carved it (bench_prodcons 1 3000000 on one CPU: ~13 pages retired and
 * cut again per ring, 1.4 MiB more resident in segments than with a CPU
 * each). A kept page keeps its carved blocks on its free list, so the next
 * burst reuses the memory this one touched. Pages of several slices are not
 * kept beyond the last one: one per class of 8-64 KiB blocks held ~10 MiB
 * more in bench_prodcons 2 150000 16 64K. The scan for the class's other
 * empty pages is bounded (KEEP_SCAN): past it the page goes. */
#define KEEP_AFTER_TAKES 2
#define KEEP_SCAN 16
HAK_INLINE unsigned keep_class_pages(void) { return hak_config.profile == HAK_PROFILE_SPEED ? 4 : 2; }
HAK_INLINE unsigned keep_heap_pages(void) { return hak_config.profile == HAK_PROFILE_SPEED ? 32 : 8; }

/* Whether p, just emptied, may stay in l, its class's list: as the class's
 * only page, or within the bounds above (then counted). */
static bool keep_empty_page(hak_heap_t *h, const hak_page_list_t *l, hak_page_t *p) {
  if (l->head == p && p->next == NULL) return true;
  if (p->slice_count != 1 || h->kept_pages + 1 > keep_heap_pages()) return false;
  unsigned empty = 1, seen = 0;
  for (const hak_page_t *q = l->head; q; q = q->next) {
    if (++seen > KEEP_SCAN) return false;
    if (q != p && q->used == 0) empty++;
  }
  if (empty > keep_class_pages()) return false;
  p->kept = 1;
  h->kept_pages++;
  return true;
}

static void page_maybe_retire(hak_heap_t *h, hak_page_t *p) {
  if (!remote_idle(p)) return;
  LIST_CHECK_PAGE("free list of an empty page", p); /* every carved block back */
  hak_page_list_t *l = &h->avail[p->cls];
  /* HAKMEM_ZERO_ON_FREE keeps it anyway: its freed blocks are checked when
   * they are handed out again, not wiped by a fresh carve. */
  if (p->kept) return; /* kept already (emptied again by a collect) */
  if ((h->allocates[p->cls] >= KEEP_AFTER_TAKES || hak_config.zero_on_free) && keep_empty_page(h, l, p)) {
    /* Kept for the next refill: if the owner goes idle instead, the
     * purge deadline's collector gives it back (heap_release_idle). */
    if (!h->retire_stamp && !atomic_load_explicit(&hak_purge_deadline, memory_order_relaxed))
      purge_arm((os_now_ms() + 2 * hak_config.purge_delay_ms) | 1);
    spare_mark(h, p->cls);
    return;
  }
  list_remove(l, p);
  /* A page of several slices that a refill's collector empties (another
   * thread's, about to cut a page: retire_stash) goes to the stash
   * (large/page_stash.c), where that refill, or the next one of the class
   * by any thread, takes it with its block boundaries, so the OS pages its
   * blocks touched are touched again; sent to its segment, its slices were
   * cut again as another class or a large page, and faulted in new memory
   * (bench_sizemix 4 1500000 1000: collectors retired ~2,200 pages of 32-64
   * KiB blocks per run, owners ~1,500). Not the owner's own retirements:
   * its page cache keeps them for it, and stashed too they held 15 MB more
   * at the peak of bench_prodcons 2 150000 16 64K (105 vs 88 MB, medians of
   * 21 runs), pages of one class waiting while others were cut. Nor those
   * of a collector at the purge deadline (retire_stamp without
   * retire_stash): the owner left them for a whole delay, and they are due
   * to their segments at once. */
  if (p->slice_count > 1 && h->retire_stash && page_stash_put(p)) return;
  /* A collector (retire_stamp set) sends the page to its segment: the
   * page cache is its owner's alone. */
  if (h->retire_stamp) segment_page_free_at(p, h->retire_stamp);
  else page_cache_free(&h->pcache, p);
}

/* Blocks on p's local free list, without walking it: every block carved is
 * handed out (used, wherever it is now: a cache, a pending list, a remote
 * list not yet taken), on the free list, or (secure build) the page's
 * guard block. */
static unsigned page_free_count(const hak_page_t *p) {
  unsigned carved = (unsigned)((size_t)(p->bump - p->start) / p->bsize);
#if HAK_SECURE
  if (p->bsize <= HAK_GUARD_BLOCK_MAX && carved) carved--; /* canary_guard_page */
#endif
  return carved - p->used;
}

/* The lazy refill: p's whole free list becomes the thread's pending list
 * (heap.h), counted as used, and no link is read here. Walking it into the
 * cache read the links back to back, each a cache miss whose address the
 * one before gives (lists of pages adopted from exited threads and of
 * remote frees are in no address order): 91-93% of heap_take's samples
 * were that one load on bench_stress and bench_sizemix. */
static void page_detach(hak_heap_t *h, hak_page_t *p, hak_pend_t *q) {
  unsigned k = page_free_count(p);
  LIST_CHECK_CHAIN("page free list (detach)", p, p->free, k, p->free ? p->free_tail : NULL, true);
  q->head = p->free;
  h->pend_tail[p->cls] = p->free_tail;
  q->n = k;
  p->free = NULL;
  p->used += k;
}

void heap_return_pending(hak_heap_t *h, hak_pend_t *q) {
  void *head = q->head;
  unsigned n = q->n;
  if (!head) return;
  q->head = NULL;
  q->n = 0;
  hak_page_t *p = page_of(head);
  HAK_CSTAT_ADD(p->cls, HAK_CS_RETURNED, n);
  heap_lock(h);
  busy_begin(h);
  heap_active(h);
  /* In front of what the page got back since (own flushes, remote frees). */
  void *tail = h->pend_tail[p->cls];
  LIST_CHECK(atomic_load_explicit(&p->owner, memory_order_relaxed) == h, "pending list (return)",
             "page not the heap's", p, head);
  LIST_CHECK_CHAIN("pending list (return)", p, head, n, tail, true);
  if (p->free) block_set_next(p, tail, p->free);
  page_free_prepended(p, head, tail);
  class_wet(h, p->cls);
  p->used -= n;
  if (p->state == HAK_PAGE_FULL) page_to_avail(h, p);
  if (p->used == 0) page_maybe_retire(h, p);
  busy_end(h);
  heap_unlock(h);
}

void heap_page_adopted(hak_heap_t *h, hak_page_t *p) {
  /* Owner first: the take below clears the queued bit, and the next remote
   * free signals whoever owner says. */
  atomic_store_explicit(&p->owner, h, memory_order_release);
  p->kept = 0; /* counted by the heap that left it */
  remote_take(p, false);
  class_wet(h, p->cls);
  if (page_has_free(p)) {
    p->state = HAK_PAGE_AVAIL;
    list_push_tail(&h->avail[p->cls], p);
    if (h->avail[p->cls].head != p) spare_mark(h, p->cls);
  } else {
    p->state = HAK_PAGE_FULL;
    list_push_head(&h->full[p->cls], p);
  }
}

void heap_page_collect(hak_heap_t *h, hak_page_t *p) {
  /* A collector counts into another thread's heap while that owner reads
   * and resets the counter without the lock (tcache.c, learner_step): relaxed
   * atomics, and an increment lost to a reset only delays a heuristic. */
  uint16_t n = __atomic_load_n(&h->collects[p->cls], __ATOMIC_RELAXED);
  if (n < UINT16_MAX) __atomic_store_n(&h->collects[p->cls], (uint16_t)(n + 1), __ATOMIC_RELAXED);
  remote_take(p, false);
  class_wet(h, p->cls);
  if (p->state == HAK_PAGE_FULL && page_has_free(p)) page_to_avail(h, p);
  if (p->used == 0 && p->state == HAK_PAGE_AVAIL) page_maybe_retire(h, p);
}

void heap_collect_remote(hak_heap_t *h) {
  heap_lock(h);
  busy_begin(h);
  heap_collect_remote_held(h);
  busy_end(h);
  heap_unlock(h);
}

/* h->lock held (by the owner, or a collector). */
void heap_collect_remote_held(hak_heap_t *h) {
  hak_page_t *p = atomic_exchange_explicit(&h->remote_pages, NULL, memory_order_acquire);
  while (p) {
    hak_page_t *next = p->qnext; /* read first: once taken, p may be pushed again */
    heap_page_collect(h, p);
    p = next;
  }
}

static hak_page_t *heap_page_new(hak_heap_t *h, unsigned cls) {
  unsigned n = class_slices(cls);
  /* Pages of exited threads first: their memory is already resident. */
  for (int tries = 0; tries < 4; tries++) {
    hak_page_t *p = adopt_page(cls);
    if (!p) break;
    heap_page_adopted(h, p);
    if (h->avail[cls].head) return h->avail[cls].head;
  }
  hak_page_t *p = heap_collect_peers(h, cls, n == 1);
  if (p) {
    heap_page_adopted(h, p);
    if (h->avail[cls].head) return h->avail[cls].head;
  }
  p = n > 1 ? page_stash_take_class(cls) : NULL;
  if (!p) p = page_cache_alloc(&h->pcache, n, cls);
  if (!p) return NULL;
  /* HAKMEM_THP=dense: a new page while one of the class is full is the
   * evidence that this thread's pages of the class fill (segment.c). */
  if (HAK_UNLIKELY(hak_config.thp == HAK_THP_DENSE) && h->full[cls].head) segment_note_full(h->pcache.shard, cls);
  atomic_store_explicit(&p->owner, h, memory_order_release);
  p->state = HAK_PAGE_AVAIL;
  list_push_head(&h->avail[cls], p);
  return p;
}

/* Whether this refill of cls, about to carve, looks at peers first
 * (heap_peer_page_first): the 1st, 5th, 9th... take of the class by the
 * heap (h->allocates, counted just before), not every one. A look reads
 * hint words of up to four peers' records, lines their owners write at
 * every refill and flush; and with every carve looking, a peer counted as
 * away (no slow path since the last look by any carving thread) was often
 * only running from its caches between two looks close together, and its
 * current page moved to the looker. This gate and CARVE_BYTES_BIG
 * (carve.h) together, against neither, whole-process CPU time of paired
 * runs: bench_stress 32 10 8 0.993 in the fast build (400 pairs, lower in
 * 240, sign test p < 0.001) and 0.993 in the standard one (300 pairs, p =
 * 0.002); bench_xmalloc 2 2 1500 0.96 (31 pairs, p = 0.03). Never looking
 * on a carve gave stress 0.986 but raised bench_oversub 16 200000 400's
 * peak RSS by ~9% (31 pairs, p = 0.07), which the looks were added for
 * (e3f9b01); one in four kept it within the noise. */
#define PEER_LOOK(h, cls) (((h)->allocates[cls] & 3) == 1)

/* How recent (in the heap's cold events: refills and flushes of all its
 * classes) a flush must be for heap_take to walk what it linked. */
#define HOT_TICKS 32

unsigned heap_take(hak_heap_t *h, unsigned cls, void **out, unsigned max, hak_pend_t *pend, bool grow) {
  heap_lock(h);
  busy_begin(h);
  heap_active(h);
  /* Saturating, but for its low two bits, which go on counting (PEER_LOOK). */
  h->allocates[cls] = h->allocates[cls] < UINT8_MAX ? h->allocates[cls] + 1 : UINT8_MAX - 3;
  if (atomic_load_explicit(&h->remote_pages, memory_order_relaxed)) heap_collect_remote_held(h);
  /* Freed blocks before new ones: a refill that finds some takes only
   * those, and carves (writes, makes resident) fresh blocks only when no
   * block of the class is free. Topping up with carved blocks made a class's
   * pages grow whenever a refill came before the blocks in flight were back:
   * a producer whose blocks all come back through remote frees kept twice
   * what it had out (bench_prodcons with a 128-entry ring: 640 KiB carved
   * for 250 KiB out). */
  unsigned n = 0;
  hak_page_t *fresh = NULL; /* a page just cut or taken: carved without another look */
  while (n < max) {
    hak_page_t *p = h->avail[cls].head;
    if (!p) {
      if (n || !grow) break; /* have some: do not grow the heap for the rest */
      p = fresh = heap_page_new(h, cls);
      if (!p) break;
    }
#if !HAK_SECURE
    /* A page carved again (carve.h) goes on being carved while nothing has
     * come back to it. */
    bool recarving = !n && grow && page_recarving(p = recarve_pick(h, cls, p)) && !p->free;
#else
    const bool recarving = false;
#endif
    /* The same across pages: a current page with nothing freed on it goes
     * behind the next one when that one has freed blocks, rather than carve
     * while they wait (pages kept empty, page_maybe_retire, are all free). */
    if (!recarving && !p->free && p->next && p->next->free) {
      list_remove(&h->avail[cls], p);
      list_push_tail(&h->avail[cls], p);
      continue;
    }
    page_unkeep(h, p);
    hak_page_t *g; /* about to carve: an away peer's page with freed blocks first (collect.c) */
    if (!n && grow && !recarving && !p->free && p->bump < p->end && p != fresh && class_slices(cls) == 1 &&
        PEER_LOOK(h, cls) && (g = heap_peer_page_first(h, cls))) {
      fresh = g; /* carved without another look, as a page just cut */
      continue;
    }
    if (pend && p->free && p->free == p->hot_head && p->hot_n && h->tick - p->hot_tick <= HOT_TICKS &&
        heap_area(h, cls)->cap > n) {
      /* Hot: the head of the list is blocks this thread's flushes linked
       * there last (heap_return_blocks), at most HOT_TICKS cold events of
       * the heap ago (a thread given a recycled heap starts its tick again,
       * and a list left longer may have gone cold). Their lines are in this
       * core's cache, so walking them into the cache costs a few
       * instructions a block, where a pending list costs a call to
       * alloc_bin_slow for each malloc. A program that builds batches of
       * small blocks larger than its caches and frees them (1000 strings of
       * 2-65 bytes: ~250 blocks of each of 4 classes, caches of 128) sends
       * half of each class through a flush and a refill every batch; with
       * the walk, 0.990 of the CPU time (201 paired runs, sign test p =
       * 0.001). All of the hot blocks, up to the cache's cap rather than
       * max (out is the empty cache when pend is given): the pending list
       * took them all at once, and a walk of half a cache left the rest for
       * a second refill, the blocks it walked still cached when the frees
       * came (one flush more a batch). */
      /* room >= 1 (the test above): the do-while below stores one block
       * before it looks, and with no room that store landed below out. The
       * refill (thread.c) always has room (n < want <= cap / 2); a caller
       * of a class whose cache is off (cap 0) takes the lazy path below. */
      unsigned room = heap_area(h, cls)->cap - n, want = room < p->hot_n ? room : p->hot_n;
      /* Stored from the top down, so that malloc (which pops the top)
       * hands the blocks out in the list's order, the last freed first, as
       * the pending list's pops would. */
      void **e = out + n, **o = e + want, *b = p->free;
      hak_fl_walk_t w = fl_walk(p);
      do { /* page_take's walk, without its carve and its zero-on-free cut (no cache then) */
        *--o = b;
        b = fl_next(&w, b);
        LIST_CHECK_NEXT("page free list (refill)", p, b);
      } while (b && o > e);
      unsigned got = (unsigned)(out + n + want - o);
      if (o > e) memmove(e, o, got * sizeof(void *)); /* the list was shorter than its hint */
      p->free = b;
      p->used += got;
      LIST_CHECK_PAGE("page free list (refill)", p); /* what the walk left: carved - used blocks */
      n += got;
      p->hot_n = b ? (uint8_t)(p->hot_n - got) : 0;
      p->hot_head = b;
      if (!page_has_free(p)) page_to_full(h, p);
      break;
    }
    if (pend && p->free) {
      /* Lazy: the list goes to the thread whole (page_detach), beside
       * what a carve of the page before may have given. Lists that are
       * only the remote frees just taken too: they used to be walked into
       * the cache, each link a cache miss on a block another core had just
       * written, one after the other (heap_take was 28% of bench_prodcons
       * 1 10000000's samples, 5.5% of bench_sizemix's, nearly all on that
       * load); popped one per malloc, each miss overlaps the program's own
       * work. (Lazy at first, 0ec5b6d, such lists cost a producer 8-10%
       * more CPU time, with three times the remote collects; measured
       * again once remote_take had stopped walking what it takes, the
       * collects stay as they are and the producer uses a quarter less:
       * bench_prodcons 1 10000000, 41k collects either way.) */
      page_detach(h, p, pend);
      if (!page_has_free(p)) page_to_full(h, p);
      break;
    }
#if !HAK_SECURE
    if (recarving) n += page_carve_again(p, out + n, max - n);
    else
#endif
      n += page_take(p, out + n, max - n, n == 0 && grow);
    if (!page_has_free(p)) page_to_full(h, p);
    else if (n || !grow) break; /* what is left on p is uncarved */
  }
  busy_end(h);
  heap_unlock(h);
  /* (events.refill is the sum of the classes' refills: stats.c) */
  HAK_STAT_MINE(m);
  HAK_CSTAT_ADD_IN(m, cls, HAK_CS_REFILL, 1);
  HAK_CSTAT_ADD_IN(m, cls, HAK_CS_TAKEN, n + (pend ? pend->n : 0));
  return n;
}

/* The page of block b, which follows prev, a block of page p: p itself when
 * the two lie in the same 64 KiB slice (a slice belongs to one page), found
 * without reading the segment's slice table; else page_of. A flush's blocks
 * mostly run on within a page (freed in the order they were handed out):
 * one xor and a shift per block where page_of took a mask, an index and a
 * load. */
HAK_INLINE hak_page_t *page_of_after(const void *b, const void *prev, hak_page_t *p) {
  return (((uintptr_t)b ^ (uintptr_t)prev) >> HAK_SLICE_SHIFT) == 0 ? p : page_of(b);
}

/* Returns how many of the blocks were other heaps'. */
unsigned heap_return_blocks(hak_heap_t *h, void **blocks, unsigned n) {
  /* Callers pass the blocks of one class (one cache, or one block). */
  unsigned i = 0, remote = 0;
  hak_page_t *next = n ? page_of(blocks[0]) : NULL;
#if HAK_STATS
  /* Counted once at the end, the class from the first page's record (the
   * line of its owner, read below anyway; stable while we hold its blocks,
   * and read now: once they are back the page may retire). */
  unsigned cls = n ? next->cls : 0, batches = 0;
#endif
  heap_lock(h);
  busy_begin(h);
  heap_active(h);
  while (i < n) {
    /* The run of blocks from one page: one update of the page record (ours)
     * or one CAS (another heap's) for all of them. */
    hak_page_t *p = next;
    void *b = blocks[i];
    hak_heap_t *owner = atomic_load_explicit(&p->owner, memory_order_acquire);
    /* A page whose thread has exited: take it over rather than feed it remote
     * frees nobody collects, so it can empty and go back to its segment. */
    if (HAK_UNLIKELY(owner == NULL) && adopt_this_page(p)) {
      heap_page_adopted(h, p);
      owner = h;
    }
    unsigned k = 1;
    if (owner == h) {
      /* Onto the free list in the order single pushes would give: the run's
       * last block on top. */
      void *last = b, *old = p->free;
      LIST_CHECK_BLOCK("page free list (flush)", p, b);
      block_set_next(p, b, old);
      for (i++; i < n && (next = page_of_after(blocks[i], b, p)) == p; i++, k++) {
        LIST_CHECK_BLOCK("page free list (flush)", p, blocks[i]);
        block_set_next(p, blocks[i], b);
        b = blocks[i];
      }
      page_free_prepended(p, b, last);
      /* The run just linked is hot (this call wrote every block's link),
       * and so is the hot run below it, if the list still starts there. */
      unsigned hot = k + (old && old == p->hot_head ? p->hot_n : 0);
      p->hot_n = (uint8_t)(hot < UINT8_MAX ? hot : UINT8_MAX);
      p->hot_head = b;
      p->hot_tick = h->tick;
      class_wet(h, p->cls);
      p->used -= k;
      if (p->state == HAK_PAGE_FULL) page_to_avail(h, p);
      if (p->used == 0) page_maybe_retire(h, p);
    } else {
      /* Chained as the owner's branch above, each block linked to the one
       * before it (the run's last block first), so that the lists the owner
       * takes stay in one address order. A push goes in front of the page's
       * remote list: with a run chained in free order the page's list read
       * run k in ascending order, then jumped back to the start of run k-1
       * (every ~60 blocks on bench_xmalloc, whose blocks come back in the
       * order they were handed out). Chained backwards, run k ends next to
       * where run k-1 starts: the whole list descends, one block at a time,
       * and the owner's pops of it as a pending list (heap_take) read lines
       * the hardware prefetcher has seen coming: on bench_xmalloc with
       * producers and consumers on two CPUs the jumps fell from 3-5% of the
       * pops to 0.2%, alloc_bin_slow from 15% of the CPU samples to 10%. */
      void *last = b;
      LIST_CHECK_BLOCK("remote list (flush)", p, b);
      for (i++; i < n && (next = page_of_after(blocks[i], b, p)) == p; i++, k++) {
        LIST_CHECK_BLOCK("remote list (flush)", p, blocks[i]);
        block_set_next(p, blocks[i], b);
        b = blocks[i];
      }
      remote_push(p, b, last, k);
      remote += k;
#if HAK_STATS
      batches++;
#endif
    }
  }
  busy_end(h);
  heap_unlock(h);
#if HAK_STATS
  /* One flush of the class (events.flush is the classes' sum: stats.c), its
   * blocks, and the remote frees of the whole flush at once (remote_push
   * counts none). */
  HAK_STAT_MINE(m);
  if (n) {
    HAK_CSTAT_ADD_IN(m, cls, HAK_CS_FLUSH, 1);
    HAK_CSTAT_ADD_IN(m, cls, HAK_CS_RETURNED, n);
  }
  if (remote) {
    HAK_STAT_ADD_IN(m, HAK_EV_REMOTE_FREE, remote);
    HAK_STAT_ADD_IN(m, HAK_EV_REMOTE_BATCH, batches);
  }
#endif
  return remote;
}

size_t heap_thread_kept_bytes(void) {
  if (hak_tls.state != HAK_THREAD_LIVE) return 0;
  hak_heap_t *h = hak_tls.heap;
  size_t n = 0;
  heap_lock(h);
  for (unsigned c = 0; c < HAK_NCLASSES; c++)
    for (hak_page_t *p = h->avail[c].head; p; p = p->next)
      if (p->used == 0) n += (size_t)p->slice_count * HAK_SLICE_SIZE;
  heap_unlock(h);
  return n;
}

bool heap_block_on_page(hak_heap_t *h, void *p) {
  hak_page_t *pg = page_of(p);
  if (!h) return false;
  /* Under h->lock: a peer may take the page meanwhile (heap_page_give). */
  bool found = false;
  heap_lock(h);
  if (atomic_load_explicit(&pg->owner, memory_order_relaxed) == h)
    for (void *b = pg->free; b && !found; b = block_next(pg, b)) found = b == p;
  heap_unlock(h);
  return found;
}
