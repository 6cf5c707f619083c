/* carve.h — taking blocks from one page for a refill (heap.c's heap_take):
 * its free list first, else new blocks carved from its uncarved end (the
 * secure build shuffles them), and a page whose blocks have all come back
 * carved again from its start. Included by heap/heap.c only, which owns
 * the pages these run on (its opening comment gives the locking): the
 * functions are static, so the refill path compiles as one unit, as when
 * they were in heap.c. */
#ifndef HAK_CARVE_H
#define HAK_CARVE_H

#include "heap/heap.h"
#include "heap/canary.h"
#include "heap/size_class.h"
#include "policy/config.h"
#include "segment/free_list.h"
#include "segment/list_check.h"
#include "os/random.h"

#include <string.h>

#if HAK_SECURE
/* Secure build: the blocks carved from a page come out in random order, so
 * that neighbours in allocation order are not neighbours in memory (an
 * overflow cannot count on what follows a block). A carve of k blocks takes
 * at least CARVE_POOL (extra ones, while the page has them, when k is
 * smaller; fewer in classes above 256 B), shuffles them all and puts the extra ones on the page's free
 * list (empty whenever the page is carved), so even a refill of one block
 * has a choice. One pass: each new block's word is marked free (canary.h)
 * and the block goes to a uniformly random place among those before it
 * (Fisher-Yates inside out), two 32-bit draws per number of a generator
 * seeded from the thread's (os/random.h). */
#define CARVE_POOL 16
#define CARVE_POOL_BYTES 4096 /* ... or fewer, down to 2, for classes above 256 B */

static void page_carve(hak_page_t *p, void **out, unsigned k, size_t left) {
  void *pool[CARVE_POOL];
  size_t bsize = p->bsize;
  /* Each extra block is written (its word, its link): bigger classes take
   * fewer, or a thread's first block of each class would make a dozen OS
   * pages resident. */
  unsigned want = bsize * CARVE_POOL <= CARVE_POOL_BYTES ? CARVE_POOL : bsize * 2 >= CARVE_POOL_BYTES ? 2 : (unsigned)(CARVE_POOL_BYTES / bsize);
  unsigned e = k >= want ? 0 : (left - k < want - k ? (unsigned)(left - k) : want - k), w = k + e;
  void **a = e ? pool : out; /* w <= CARVE_POOL when there are extra ones */
  uint8_t *blk = p->bump;
  if (HAK_UNLIKELY(hak_config.zero_on_free)) memset(blk, 0, (size_t)w * bsize);
  canary_key_ensure();
  uint64_t key = hak_canary_key, s = os_random_next(), r = 0;
  for (unsigned i = 0; i < w; i++, blk += bsize) {
    __atomic_store_n(word_of(blk), canary_mix(blk, key), __ATOMIC_RELAXED); /* canary_mark_free */
    if (!(i & 1)) r = rng_split(&s);
    unsigned j = (unsigned)(((r & 0xffffffffu) * (i + 1)) >> 32); /* 0 .. i */
    r >>= 32;
    a[i] = a[j];
    a[j] = blk;
  }
  page_bump_set(p, blk);
  if (!e) return;
  memcpy(out, pool, k * sizeof *out);
  for (unsigned i = k; i < w; i++) {
    block_set_next(p, pool[i], p->free);
    page_free_prepended(p, pool[i], pool[i]);
  }
}
#else
/* Stored in reverse so the cache pops them in address order. Wiped for
 * HAKMEM_ZERO_ON_FREE (front/zero_on_free.c). */
HAK_INLINE void page_carve(hak_page_t *p, void **out, unsigned k, size_t left) {
  (void)left;
  for (unsigned i = 0; i < k; i++) out[k - 1 - i] = p->bump + (size_t)i * p->bsize;
  if (HAK_UNLIKELY(hak_config.zero_on_free)) memset(p->bump, 0, (size_t)k * p->bsize);
  page_bump_set(p, p->bump + (size_t)k * p->bsize);
#if HAK_WORD_CHECKS
  /* free() takes the page's carved blocks on its mid test (guard/
   * block_check.h, block_slice_ok_map). */
  if (p->slice_count > 1) slice_map_mid_carved(p->start, p->slice_count, p->bsize, (size_t)(p->bump - p->start));
#endif
}
#endif

#if !HAK_SECURE
/* b is a block start p has carved. */
static bool block_of_page(const hak_page_t *p, const void *b) {
  const uint8_t *x = b;
  return x >= p->start && x < p->bump && (size_t)(x - p->start) % p->bsize == 0;
}
#endif

/* A carve hands out at most 4 KiB (one OS page) of new blocks (at least
 * CARVE_MIN): each carved block is written once it goes out (the cache
 * hands them all out before the next refill), so the carve's size is the
 * step by which a class's resident memory grows, whatever the class needs.
 * A refill that carved half a cache (up to 16 KiB) overshot by about half
 * of that in each class: bench_prodcons, whose 32 classes creep up with the
 * ring's depth, held ~140 KiB more than its blocks in flight explain.
 * Classes of 256 B and more carve CARVE_BYTES_BIG (8 KiB): at 4 KiB their
 * refills got 16 or 8 blocks each, and bench_stress's threads, which keep
 * their 256 B and 512 B blocks until they exit, refilled those two classes
 * ~15k times a run of ~24k refills (HAKMEM_STATS=1), each one the heap's
 * lock, a cold event and a look at peers (about 18k refills with 8 KiB).
 * bench_prodcons 1 3000000 kept its peak RSS at 8 KiB (0.998 of before,
 * 41 pairs); at 16 KiB it rose 1.0% (p = 0.006). */
#define CARVE_BYTES     4096
#define CARVE_BYTES_BIG 8192
#define CARVE_BIG_MIN   256 /* block size from which a carve takes CARVE_BYTES_BIG */
#define CARVE_MIN       4

/* Up to max blocks of p: its freed blocks first; only when it has none, and
 * `carve` allows, new ones from its uncarved end (CARVE_BYTES' worth, or
 * CARVE_BYTES_BIG's). */
static unsigned page_take(hak_page_t *p, void **out, unsigned max, bool carve) {
  unsigned n = 0;
  void *b = p->free;
  hak_fl_walk_t w = fl_walk(p);
  while (b && n < max) {
    out[n++] = b;
    b = fl_next(&w, b);
#if !HAK_SECURE /* the secure build's block_next checks every link */
    /* HAKMEM_ZERO_ON_FREE looks for writes after free, which may have hit
     * the link: cut the list there rather than follow it (the blocks after
     * the cut are lost; the write is reported when the block goes out). */
    if (HAK_UNLIKELY(hak_config.zero_on_free) && b && !block_of_page(p, b)) b = NULL;
#endif
    LIST_CHECK_NEXT("page free list (refill)", p, b);
  }
  p->free = b;
#if HAK_SECURE
  /* The first block of a page of a small class is its guard: never handed
   * out, its last 8 bytes are the first real block's word (canary.h). */
  canary_guard_page(p);
#endif
  if (n == 0 && carve && p->bump < p->end) {
    size_t left = (size_t)(p->end - p->bump) / p->bsize;
    unsigned k = max - n < left ? max - n : (unsigned)left;
    size_t bytes = p->bsize >= CARVE_BIG_MIN ? CARVE_BYTES_BIG : CARVE_BYTES;
    unsigned step = bytes / p->bsize > CARVE_MIN ? (unsigned)(bytes / p->bsize) : CARVE_MIN;
    if (k > step) k = step;
    page_carve(p, out + n, k, left);
    n += k;
  }
  p->used += n;
  return n;
}

#if !HAK_SECURE
/* Carving again. A page whose blocks have all come back (used == 0) while
 * its free list still holds them (emptied by remote frees since the last
 * refill, or kept empty: page_maybe_retire) is carved again from its start
 * by the refill that takes it, its list dropped unread. The list's links
 * were written by the threads that freed the blocks: as a pending list
 * (page_detach) each is a cache miss on a line another core has just
 * written, and each address comes from the block before, so the misses
 * cannot overlap: with producers and consumers on two cores
 * (bench_xmalloc, producers pinned to one CPU, consumers to the other), 51%
 * of the CPU samples were the pending list's pop (alloc_bin_slow), 88% of
 * them on that load. A carve reads nothing; the program's first writes to
 * the blocks are stores, which do not wait for the line. And while another
 * of the class's first few pages can be carved again, a page with only
 * part of its blocks back waits for the rest rather than hand out its list.
 * Only pages carved to their end before (every block resident: the carve
 * makes nothing new resident, so it need not keep to CARVE_BYTES) and of
 * at least RECARVE_MIN_BLOCKS blocks (a short list is a few misses; carved
 * again half a cache at a time, bench_prodcons' classes of 768 B and 1 KiB
 * cut more pages: 69 instead of 64-65 on one CPU, peak RSS 5.0-5.1 MB
 * instead of 4.7-4.8, mimalloc's 5.0); not in the secure build (its
 * carve shuffles and guards a fresh page's blocks) nor with
 * HAKMEM_ZERO_ON_FREE (its blocks are checked when a list hands them out).
 * A page being carved again takes what comes back to it meanwhile first,
 * as any page: freed blocks before new ones. */
#define RECARVE_MIN_BLOCKS 256
#define RECARVE_SCAN 8

HAK_INLINE bool page_recarving(const hak_page_t *p) { return p->recarve && p->bump < p->end; }

static bool page_recarve(hak_heap_t *h, hak_page_t *p) {
  if (p->used || !p->free || p->bump != p->end || p->capacity < RECARVE_MIN_BLOCKS ||
      HAK_UNLIKELY(hak_config.zero_on_free))
    return false;
  LIST_CHECK_PAGE("free list of a page carved again", p);
  page_unkeep(h, p);
  p->free = NULL;
  p->recarve = 1;
  page_bump_set(p, p->start);
  return true;
}

/* Whether a page of cls can hold RECARVE_MIN_BLOCKS blocks at all (an upper
 * bound on its capacity: the first page of a segment holds less). */
HAK_INLINE bool class_recarves(unsigned cls) {
  return ((size_t)class_slices(cls) << HAK_SLICE_SHIFT) >= (size_t)RECARVE_MIN_BLOCKS * hak_class_size[cls];
}

/* The page a refill of cls that may carve takes from: the current one, p,
 * if it is being carved again or can be; else the first of the next
 * RECARVE_SCAN pages of the class that is so, moved to the front; else p.
 * Not for a class whose pages are too small to be carved again: the scan
 * read the records of pages that could not be, each a cache miss once a
 * class has many pages (bench_random_mixed 10000000 20000 1 16 32K, 2,400
 * pages: 5.6% of the CPU samples on the first of those loads). */
static hak_page_t *recarve_pick(hak_heap_t *h, unsigned cls, hak_page_t *p) {
  if (!class_recarves(cls)) return p;
  if (page_recarving(p) || page_recarve(h, p)) return p;
  unsigned seen = 0;
  for (hak_page_t *q = p->next; q && seen < RECARVE_SCAN; q = q->next, seen++) {
    if (page_recarving(q) || page_recarve(h, q)) {
      list_remove(&h->avail[cls], q);
      list_push_head(&h->avail[cls], q);
      return q;
    }
  }
  return p;
}

/* Up to max blocks carved again from p (page_recarving). */
static unsigned page_carve_again(hak_page_t *p, void **out, unsigned max) {
  size_t left = (size_t)(p->end - p->bump) / p->bsize;
  unsigned k = max < left ? max : (unsigned)left;
  page_carve(p, out, k, left);
  p->used += k;
  return k;
}
#endif

#endif /* HAK_CARVE_H */
