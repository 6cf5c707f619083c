/* page_cache.c — empty pages reused without a shard lock (see
 * page_cache.h): a small cache per thread heap, then the exchange.
 *
 * The exchange: one lock-free stack of empty pages per kind (a size class, or
 * a large page of n slices), linked through page->next, and one atomic count
 * of the slices it holds, kept under a bound (an over-full exchange sends the
 * page to its segment instead). A pusher links its page (or chain) above the
 * top it read and CASes the top. A taker never pops a single page: it
 * exchanges the whole stack for NULL, keeps the first page and pushes the rest
 * back as one chain. So no taker reads the link of a page another thread may
 * hold (no ABA, and no read of a page that went back to its segment), and no
 * thread ever waits for another:
 *  - a taker preempted while it holds a chain only makes the stack look empty
 *    meanwhile; others then cut a page from a segment (under their shard's
 *    lock) instead of waiting;
 *  - fork: a chain held privately by another thread at that moment is lost to
 *    the child (at most the exchange's bound, memory only); the stacks
 *    themselves are always consistent, being changed by single CASes;
 *  - thread exit: the heap's own cache goes to the exchange (page_cache_flush),
 *    never stranded with a dead thread.
 * Pages in a cache or the exchange are detached from the slice map (a free of
 * a stale pointer into them is reported, as for any free slice) and stay
 * resident; the bounds keep that small: 4 slices (256 KiB) per thread and 8
 * (512 KiB) in the exchange in the speed profile (2 and 4 otherwise): each
 * cached page keeps its segment from being unmapped when it empties, so
 * larger caches held tens of MiB after a burst of frees (test_release). And before a new segment is mapped the calling thread's cache and
 * the exchange go back to their segments, so caching never grows the
 * process. */
#include "segment/page_cache.h"
#include "segment/segment.h"
#include "os/os.h"
#include "policy/config.h"
#include "policy/purger.h"
#include "stats/stats.h"

#define KEYS (HAK_NCLASSES + HAK_SLICES + 1)

static _Atomic(hak_page_t *) exchange[KEYS];
static _Atomic(size_t) exchange_slices;

HAK_INLINE unsigned key_of(unsigned n, unsigned cls) { return cls < HAK_NCLASSES ? cls : HAK_NCLASSES + n; }

static unsigned local_max(void) {
  return hak_config.profile == HAK_PROFILE_SPEED ? 4 : 2;
}
static unsigned exchange_max(void) {
  return hak_config.profile == HAK_PROFILE_SPEED ? 8 : 4;
}

/* The segment shard of c's heap, drawn at its first use. A caller without a
 * heap (a thread past its exit) draws one per call: no shard, and so no
 * shard lock, is shared by all such callers. */
static unsigned shard_of(hak_page_cache_t *c) {
  if (!c) return segment_shard_pick();
  if (!c->shard) c->shard = segment_shard_pick();
  return c->shard;
}

static void push_chain(unsigned key, hak_page_t *first, hak_page_t *last) {
  hak_page_t *top = atomic_load_explicit(&exchange[key], memory_order_relaxed);
  do {
    last->next = top;
  } while (!atomic_compare_exchange_weak_explicit(&exchange[key], &top, first, memory_order_release,
                                                  memory_order_relaxed));
}

static hak_page_t *exchange_take(unsigned key) {
  if (!atomic_load_explicit(&exchange[key], memory_order_relaxed)) return NULL; /* no write to an empty stack */
  hak_page_t *pg = atomic_exchange_explicit(&exchange[key], NULL, memory_order_acquire);
  if (!pg) return NULL;
  hak_page_t *rest = pg->next;
  if (rest) {
    hak_page_t *tail = rest;
    while (tail->next) tail = tail->next;
    push_chain(key, rest, tail);
  }
  pg->next = NULL;
  atomic_fetch_sub_explicit(&exchange_slices, pg->slice_count, memory_order_relaxed);
  return pg;
}

/* Full: the page and its kind's whole stack go back to their segments, those
 * of the caller's shard under one acquisition of its lock, so a thread that
 * frees much more than others take (a consumer) pays one lock per stackful,
 * not per page. The shard (shard_of(c)) is drawn only then: for a caller
 * without a heap each draw is an atomic add on a process-wide line
 * (segment_shard_pick), and a thread's exit sent every empty page it parked
 * through here, each drawing one that the exchange, not full, never used. */
static void exchange_put(hak_page_t *pg, hak_page_cache_t *c) {
  size_t n = pg->slice_count;
  unsigned key = key_of(n, pg->cls);
  if (atomic_fetch_add_explicit(&exchange_slices, n, memory_order_relaxed) + n > exchange_max()) {
    size_t out = n;
    pg->next = atomic_exchange_explicit(&exchange[key], NULL, memory_order_acquire);
    for (hak_page_t *p = pg->next; p; p = p->next) out += p->slice_count;
    atomic_fetch_sub_explicit(&exchange_slices, out, memory_order_relaxed);
    segment_pages_free(shard_of(c), pg);
    return;
  }
  push_chain(key, pg, pg);
}

static void cache_put(hak_page_cache_t *c, hak_page_t *pg);

hak_page_t *page_cache_alloc(hak_page_cache_t *c, unsigned n, unsigned cls) {
  return page_cache_alloc_in(c, shard_of(c), n, cls);
}

hak_page_t *page_cache_alloc_in(hak_page_cache_t *c, unsigned shard, unsigned n, unsigned cls) {
  unsigned key = key_of(n, cls);
  hak_page_t *pg = NULL;
  if (c) /* newest first: the warmest */
    for (unsigned i = c->n; i-- > 0;)
      if (key_of(c->page[i]->slice_count, c->page[i]->cls) == key) {
        pg = c->page[i];
        for (; i + 1 < c->n; i++) c->page[i] = c->page[i + 1];
        c->n--;
        c->slices -= n;
        break;
      }
  if (!pg) pg = exchange_take(key);
  if (!pg && cls == HAK_CLASS_NONE && c) {
    /* Large blocks: a few at once, the rest into the thread's cache, so a
     * thread that takes much more than others free (a producer) pays one
     * acquisition of its shard lock per batch. */
    unsigned room = local_max() > c->slices ? (local_max() - c->slices) / n : 0;
    /* Slow start: the first miss of a size cuts one page, later ones in a
     * row 2, 4, ... (a thread that allocates one large block, like a
     * program's start-up buffer, keeps no spare ones). */
    if (c->miss_n != n) c->miss_n = (uint16_t)n, c->misses = 0;
    if (c->misses < 4) c->misses++;
    unsigned ramp = (1u << (c->misses - 1)) - 1;
    if (room > ramp) room = ramp;
    hak_page_t *batch[8];
    unsigned k = segment_pages_alloc(shard, n, cls, batch, 1 + (room < 7 ? room : 7));
    for (unsigned i = 1; i < k; i++) cache_put(c, batch[i]); /* unused: known_zero still holds */
    if (k) pg = batch[0];
    if (pg) return pg;
  }
  if (!pg) {
    /* Before the process grows, the cached pages go back to their segments,
     * where a page of any kind can be cut from them. */
    pg = segment_page_alloc_ex(shard, n, cls, false);
    if (pg) return pg;
    if (c) page_cache_flush(c);
    page_cache_trim();
    return segment_page_alloc(shard, n, cls);
  }
  segment_page_reinit(pg, cls);
  return pg;
}

void page_cache_free(hak_page_cache_t *c, hak_page_t *pg) {
  pg->known_zero = 0; /* it was used */
  cache_put(c, pg);
}

static void cache_put(hak_page_cache_t *c, hak_page_t *pg) {
  segment_page_detach(pg);
  /* Cached pages stay resident: the purge deadline sends them back to their
   * segments if the program goes idle (policy/purger.c). */
  purge_arm((os_now_ms() + hak_config.purge_delay_ms) | 1);
  unsigned n = pg->slice_count, max = local_max();
  if (!c || n > max) {
    exchange_put(pg, c);
    return;
  }
  while (c->n == HAK_PCACHE_SLOTS || c->slices + n > max) { /* oldest out */
    hak_page_t *old = c->page[0];
    for (unsigned i = 1; i < c->n; i++) c->page[i - 1] = c->page[i];
    c->n--;
    c->slices -= old->slice_count;
    exchange_put(old, c);
  }
  c->page[c->n++] = pg;
  c->slices += n;
}

void page_cache_flush(hak_page_cache_t *c) {
  for (unsigned i = 0; i < c->n; i++) exchange_put(c->page[i], c);
  c->n = c->slices = 0;
}

/* Thread exit (heap_exit.c, heap_park): the empty pages it leaves, and c's,
 * to the exchange with one addition to exchange_slices for them all. Those
 * that fit under the bound are pushed (one CAS each onto its kind's stack);
 * the rest go back to their segments in one call (one lock of c's shard,
 * or its segment's returned stack), and their slices off the count with one
 * subtraction. One or two atomic operations on the exchange's process-wide
 * count per exit instead of one or two per page, and no shard drawn unless
 * one is used: the exits of bench_thread_churn and bench_stress made 2-4 of
 * them per 1000 operations (uprobe counts: commit 14dcdc4). The stacks of
 * the overflowing kinds stay (exchange_put sends them along), so a thread
 * that frees into a full exchange still pays one lock per stackful. */
void page_cache_park(hak_page_cache_t *c, hak_page_t *chain) {
  size_t total = 0, out = 0;
  for (hak_page_t *p = chain; p; p = p->next) {
    p->known_zero = 0; /* it was used */
    segment_page_detach(p);
    total += p->slice_count;
  }
  if (chain) purge_arm((os_now_ms() + hak_config.purge_delay_ms) | 1); /* as cache_put */
  for (unsigned i = 0; i < c->n; i++) { /* detached already */
    c->page[i]->next = chain;
    chain = c->page[i];
    total += chain->slice_count;
  }
  c->n = c->slices = 0;
  if (!total) return;
  size_t before = atomic_fetch_add_explicit(&exchange_slices, total, memory_order_relaxed), max = exchange_max();
  size_t room = before < max ? max - before : 0;
  hak_page_t *back = NULL;
  for (hak_page_t *p = chain, *next; p; p = next) {
    next = p->next;
    if (p->slice_count <= room) {
      room -= p->slice_count;
      push_chain(key_of(p->slice_count, p->cls), p, p);
    } else {
      p->next = back;
      back = p;
      out += p->slice_count;
    }
  }
  if (back) {
    atomic_fetch_sub_explicit(&exchange_slices, out, memory_order_relaxed);
    segment_pages_free(shard_of(c), back);
  }
}

bool page_cache_trim(void) {
  bool any = false;
  for (unsigned k = 0; k < KEYS; k++) {
    if (!atomic_load_explicit(&exchange[k], memory_order_relaxed)) continue;
    hak_page_t *pg = atomic_exchange_explicit(&exchange[k], NULL, memory_order_acquire);
    while (pg) {
      hak_page_t *next = pg->next;
      atomic_fetch_sub_explicit(&exchange_slices, pg->slice_count, memory_order_relaxed);
      segment_page_free(pg);
      any = true;
      pg = next;
    }
  }
  return any;
}

size_t page_cache_bytes(void) {
  return atomic_load_explicit(&exchange_slices, memory_order_relaxed) * HAK_SLICE_SIZE;
}
