/* collect.c — process-wide collection: blocks that other threads freed into
 * pages of a heap whose owner does not come back for them (an idle thread, a
 * thread blocked in a read), collected so the pages can empty, retire and be
 * purged. Used by the purge deadline (the background purger or any thread's
 * slow path), by hak_collect and by malloc_trim from any thread, and by a
 * refill about to cut a new page (heap_collect_peers: it holds its own
 * heap's lock and tries the others', so it never waits for an owner).
 *
 * Protocol
 *   Only the holder of h->lock touches h's page lists and its pages' local
 *   state. The owner takes the lock on each of its slow paths (refill, flush,
 *   thread exit; never on the fast path, which touches only its TLS caches);
 *   a collector takes it only with heap_trylock, so it never waits for a busy
 *   owner: a heap whose lock is taken is left for its owner (who is on a slow
 *   path right now) or for the next deadline. While a collector holds it,
 *   the owner's next slow path waits (spin, then yield) for one heap's
 *   collection: bounded.
 *   The remote side is unchanged (remote/remote.c): pages signal the heap
 *   through its remote_pages stack. The pusher that puts the first page on an
 *   empty stack stamps h->remote_since and arms the purge deadline one delay
 *   later; if the owner has not emptied the stack by then, the collector
 *   empties it as the owner would (heap_collect_remote_held), and the pages
 *   that become empty retire stamped `remote_since`: memory its owner left
 *   untouched for a whole delay is due at once, so an idle owner's memory goes
 *   back within one delay of the frees, not two.
 *   Heaps are never unmapped, so walking the all-heaps list needs no lock,
 *   and collectors need no lock among themselves either: each touches a heap
 *   only under that heap's lock, got with a try. Several may walk at once
 *   (the purge deadline's winner, malloc_trim, hak_collect, refills about to
 *   cut a page); they share nothing but the `collectors` word below (and a
 *   refill not even that: its own heap's `collecting` flag).
 * fork (claim, no lock): `collectors` counts the collectors inside a pass
 *   that hold no heap of their own (heap_collect_idle: the purge deadline,
 *   malloc_trim, hak_collect), and its top bit says a fork is being prepared.
 *   Such a collector enters with one fetch-add and backs off at once
 *   (undoing it) if it finds the bit. A refill's pass (heap_collect_peers,
 *   under its own heap's lock) enters by setting that heap's `collecting`
 *   flag instead (an exchange: a full barrier, on a line of its own record
 *   that it has just written taking its lock), then reads the bit; it
 *   clears the flag on leaving, or at once if it found the bit. Neither kind
 *   ever waits: its pass is only skipped (the purge deadline is armed again
 *   one delay later; a refill cuts its page without a look at its peers).
 *   The prepare handler sets the bit, then waits until the count is 0 and
 *   every heap's flag is 0, walking the all-heaps list (every heap that can
 *   run heap_collect_peers is on it: thread heaps from their creation, the
 *   shared heap always; first-class heaps never refill through it). The
 *   bit's RMW and each enterer's exchange are sequentially consistent, so
 *   either the enterer reads the bit and backs off, or the handler's later
 *   read of the flag (or count) sees it entered and waits; a heap pushed
 *   onto the list after the walk passed its head enters only after the bit
 *   was set, and backs off. The handler is the only waiter: collectors
 *   finish a pass without waiting for anything that fork holds, since the
 *   collect handler runs before the segment and heap handlers take their
 *   locks, so no collector is inside a heap at the fork; the parent clears
 *   the bit, the child zeroes the word (the flags are all 0 already). A
 *   collector preempted inside a pass delays only a fork (and the owner's
 *   next slow path, as above). One process-wide counter for every pass was
 *   two atomic adds on one line per refill that looked at a peer with a
 *   hint set (2-4 per 1000 operations on bench_stress, bench_oversub and
 *   bench_sizemix: uprobe counts: commit 711d715): with many cores, every
 *   refill about to cut a page would take that line from the last one.
 *   In the child, a heap whose lock is held belonged to a thread
 *   that was inside its slow path and is gone: if it was marked busy (its
 *   lists may be half-changed, remote.c) it is marked unreachable and never
 *   collected there; otherwise its lock is released (the thread held it
 *   outside a change, e.g. around its page cache for a large block, which
 *   the child's repair discards anyway). This runs first among the child
 *   handlers, since the repair of vanished threads' heaps takes their locks.
 * thread exit: heap_park and heap_destroy (a vanished thread's heap) run
 *   under h->lock. A heap still awaiting signals after heap_destroy
 *   (h->awaiting, remote.c) is left alone: its stack is heap_reap's, which
 *   runs under h->lock too. A parked heap (heap_exit.c, "Parking") is
 *   collected as an idle owner's; one that no thread took since the last
 *   pass (its activity unchanged), or any at a forced pass, gives its pages
 *   up (heap_unpark, under the lock held here: a thread that pops it from
 *   the pool meanwhile waits for the lock before it touches them). A pass
 *   that leaves a parked heap with pages arms the deadline again.
 * A preempted collector delays only the owner's next slow path, and other
 *   collectors (trylock fails, they move on).
 * Idle owners' pages: a heap keeps the empty page of a class it refilled
 *   at least twice (and a few more of one slice each, within bounds), for
 *   its next refill (heap.c, page_maybe_retire), and arms
 *   the deadline. Each collector pass compares the heap's activity count
 *   (refills and flushes, counted under h->lock) with the count it saw on
 *   the previous pass: unchanged means the owner has not been on a slow path
 *   since, and the kept pages (used == 0, remote word 0: no block of them is
 *   out, in any cache or on the way back) leave the heap's lists for their
 *   segments, under h->lock like any change to them (heap_release_idle).
 *   An owner that comes back just takes a page again on its next refill; it
 *   cannot meet the collector half-way, since both hold h->lock, and it never
 *   holds a pointer to a page across slow paths (its TLS caches hold blocks,
 *   and a page with a block out is never taken). An owner preempted on a
 *   slow path holds h->lock: the collector's try fails and it moves on. A
 *   dying heap (awaiting) is left to heap_reap. What it cannot reach: the
 *   blocks in an idle owner's TLS caches (only the owner touches them; a few
 *   hundred bytes per class for a thread that used the class little).
 * Page caches: the empty pages a heap keeps for reuse (segment/page_cache.c)
 *   are its owner's, touched under h->lock (large blocks take it too); a
 *   collector that gets the lock flushes them to the exchange, and purge_run
 *   sends the exchange back to the segments, so idle memory cannot hide there.
 * What it does not reach: blocks sitting in other threads' TLS caches (only
 *   their owner can touch them; at most a cache's worth per class and
 *   thread), and, outside malloc_trim/hak_collect(true), abandoned pages of
 *   exited threads (their frees are rare: a flush adopts such a page). */
#include "heap/collect.h"
#include "heap/heap.h"
#include "heap/pool.h"
#include "os/lock.h"
#include "os/os.h"
#include "policy/config.h"
#include "policy/purger.h"
#include "remote/remote.h"
#include "segment/segment.h"

#include <sched.h>

#define COLLECT_FORK 0x80000000u
/* On a line of its own: pool.c's free and dying stacks (thread start and
 * exit CASes) sat beside it. */
static struct { _Alignas(64) _Atomic(uint32_t) n; } collectors_line; /* sizeof: 64 */
#define collectors collectors_line.n

static bool collect_enter(void) {
  if (!(atomic_fetch_add(&collectors, 1) & COLLECT_FORK)) return true;
  atomic_fetch_sub(&collectors, 1);
  return false;
}
static void collect_leave(void) { atomic_fetch_sub(&collectors, 1); }

/* heap_collect_peers' entry and exit, self->lock held ("fork" above). */
static bool collect_enter_own(hak_heap_t *self) {
  atomic_exchange(&self->collecting, 1);
  if (!(atomic_load(&collectors) & COLLECT_FORK)) return true;
  atomic_store_explicit(&self->collecting, 0, memory_order_release);
  return false;
}
static void collect_leave_own(hak_heap_t *self) {
  atomic_store_explicit(&self->collecting, 0, memory_order_release);
}

void collect_note_signal(hak_heap_t *h) {
  uint32_t now = os_now_ms();
  atomic_store_explicit(&h->remote_since, now, memory_order_relaxed);
  purge_arm((now + hak_config.purge_delay_ms) | 1);
}

static uint32_t earlier(uint32_t a, uint32_t b) {
  if (!a) return b;
  if (!b) return a;
  return (int32_t)(a - b) < 0 ? a : b;
}

static bool collect_one(hak_heap_t *h, uint32_t stamp, bool wait) {
  bool got = heap_trylock(h);
  for (int tries = 0; !got && wait && tries < 64; tries++) {
    sched_yield();
    got = heap_trylock(h);
  }
  if (!got) return false;
  if (h->awaiting) { /* dying: its stack holds awaited signals (heap_reap's) */
    heap_unlock(h);
    return true;
  }
  h->retire_stamp = stamp;
  heap_collect_remote_held(h);
  h->retire_stamp = 0;
  heap_unlock(h);
  return true;
}

/* The coarse time of the last due pass over the heaps, | 1 (0: none yet). */
static _Atomic(uint32_t) last_due_pass;

uint32_t heap_collect_idle(uint32_t now, int mode) {
  uint32_t delay = hak_config.purge_delay_ms, next = 0;
  /* At most one due pass per tick of the coarse clock: each visits every
   * heap. With HAKMEM_PURGE_DELAY_MS=0 every part re-arms the deadline at
   * `now` (a parked heap with pages, an idle heap's kept page, a retired
   * page), so the next slow path found it due at once and walked every heap
   * again, back to back: test_mt_stress with 256 threads 4x the CPU time of
   * the default delay, with 1024 minutes instead of 20 s (heap_unpark and
   * heap_release_idle most of the samples). Forced and immediate passes
   * (malloc_trim, hak_collect) always walk. */
  if (mode == COLLECT_DUE) {
    if (atomic_exchange_explicit(&last_due_pass, now | 1, memory_order_relaxed) == (now | 1))
      return (now + 1) | 1; /* walked in this tick: the next one */
  }
  if (!collect_enter()) return (now + delay) | 1; /* a fork is being prepared: later */
  for (hak_heap_t *h = heap_all_first(); h; h = h->all_next) {
    if (h->unreachable) continue;
    /* Empty pages the heap keeps for reuse go to the exchange, and from
     * there (purge_run) to their segments, where the purge policy sees them. */
    if (heap_trylock(h)) {
      if (!h->awaiting) {
        /* A parked heap (heap_exit.c, "Parking") that no thread took since
         * the last pass, or any at a forced pass: its pages go to the others. */
        bool unpark = pool_parked(h) &&
                      (mode == COLLECT_FORCE ||
                       atomic_load_explicit(&h->activity, memory_order_relaxed) == h->activity_seen);
        if (unpark) heap_unpark(h);
        if (h->pcache.n) page_cache_flush(&h->pcache);
        bool parked = !unpark && pool_parked(h) && heap_has_pages(h); /* a look next pass */
        if (heap_release_idle(h, now | 1) || parked) next = earlier(next, (now + delay) | 1);
      }
      heap_unlock(h);
    }
    if (!atomic_load_explicit(&h->remote_pages, memory_order_acquire)) continue;
    uint32_t since = atomic_load_explicit(&h->remote_since, memory_order_relaxed);
    if (mode == COLLECT_DUE && (int32_t)(now - since) < (int32_t)delay) {
      next = earlier(next, (since + delay) | 1); /* the owner may still come */
      continue;
    }
    uint32_t stamp = (mode == COLLECT_DUE ? since : now) | 1; /* nonzero: pages go to their segment */
    if (!collect_one(h, stamp, mode == COLLECT_FORCE) && mode == COLLECT_DUE)
      next = earlier(next, (now + delay) | 1); /* busy: its owner is at it, look again later */
  }
  collect_leave();
  if (mode == COLLECT_FORCE) remote_collect_abandoned();
  return next;
}

/* A refill about to cut a new page: first the remote frees that wait in
 * other heaps, for an owner that is not running (preempted, blocked on a
 * queue), so that the pages they empty go back to their segments and the
 * new page is cut from that warm memory rather than from untouched slices;
 * an emptied page of several slices goes to the stash instead
 * (large/page_stash.c), where the caller, or any thread, takes it for its
 * class with its block boundaries (h->retire_stash, heap.c).
 * On two cores, bench_xmalloc's producers took turns being descheduled
 * with their consumed batches uncollected, and the running one cut fresh
 * slices for its next ones (see collect_one). Each heap only with a try of
 * its lock; the caller holds self's lock (a try never waits, so no order
 * between heap locks is needed). At most PEERS_PER_CUT heaps per call, from
 * where the caller's last call stopped (self->peer_cursor, a field of its
 * own record): the cost of a page cut does not grow with the number of
 * threads, and every heap is visited in turn. The list of every heap only
 * grows at its head and its records are never unmapped, so the cursor and
 * each all_next stay valid.
 *
 * Pages to a peer. Then, in the same pass, a page of the class the caller
 * is about to cut, with freed blocks its owner can spare (below,
 * heap_page_give: an empty one it keeps, or one behind its current page),
 * moves to the caller, which adopts it as an abandoned page (heap.c,
 * heap_page_adopted). With 8-16 threads per core most heaps' owners are
 * descheduled at any moment, and their spare pages (a few hundred KiB in
 * each class at every cut, bench_oversub 16 200000 400) sat resident while
 * the running threads carved fresh ones. The hand-over:
 *   - the page leaves the owner's lists under the owner's lock, got with a
 *     try (as a collection); a page of its pending list, which the owner
 *     pops without that lock, is never given;
 *   - its remote word goes from 0 to the queued bit with a CAS, as a dying
 *     heap fences its pages (remote.c): a word that is not 0 means frees
 *     queued on the owner's stack or a signal on its way there, and the page
 *     stays. After the CAS every remote free into it is silent;
 *   - the caller becomes the owner still under the old owner's lock
 *     (heap_page_give), then, under its own, takes the remote word
 *     (heap_page_adopted): frees pushed silently in between come with it,
 *     and the next one signals the new owner;
 *   - blocks of the page in the old owner's caches are used, as they were;
 *     its flush (under its lock, so after the hand-over) finds the new
 *     owner and sends them back remotely, as any thread's. Were the owner
 *     stored only at the adoption, a flush between the two steps took the
 *     page for its own and pushed onto its local free list while the
 *     caller took the remote frees into it: lost blocks, a page retired
 *     with blocks out, a block handed out twice (test_page_give).
 * A caller preempted between the two steps holds a fenced page nobody else
 * can reach (frees into it pile up silently): like an abandoned page, only
 * until it runs again. fork: the hand-over runs inside the caller's entry
 * (collect_enter_own), as a collection; a page the caller holds between the two steps when another
 * thread forks is lost to the child (memory only), as a taker's chain of
 * abandoned pages (remote.c). The owner's hint (hak_heap.spare, one byte per
 * class, set under its lock when a page may have become spare, cleared by a
 * look under the lock that found none) spares the caller the lock of a
 * heap with nothing to give. The walk stops at the first page given, and the caller's next cut starts at
 * that heap: an idle owner's spare pages go one per cut, however many heaps
 * lie between (test_collect partial, with 40 idle heaps).
 *
 * A refill about to carve (carve: the class's pages are of one slice, its
 * blocks up to 8 KiB, and none of the caller's pages holds a freed block;
 * about one such refill in four: heap.c, PEER_LOOK) looks too, at
 * PEERS_PER_CARVE heaps, and may also take a peer's current
 * page, with blocks out, if that peer's owner is away: it has not been on a
 * slow path (refill, flush: hak_heap.activity, which the owner counts under
 * its lock) since the previous look by any carving thread (hak_heap.give_seen,
 * written by the lookers). Both words are relaxed atomics read without the
 * peer's lock, and a third hint, hak_heap.loose (set when blocks come back
 * onto the peer's pages of the class, cleared by a look under its lock that
 * found none), leaves the lock of a peer with nothing freed untouched. The
 * hand-over is the one above, under the peer's lock: only the verdict is a
 * hint. A wrong one (an owner running on its caches alone, or stopped right
 * after its last slow path) costs that owner a page: its next refill takes
 * another one or looks in turn; it holds no pointer to a page between its
 * slow paths but its pending list's, whose page is never given. With four
 * threads on two cores (bench_sizemix), two of them descheduled at any
 * moment, the pages the running ones carve grew while the others' current
 * pages held the blocks handed back to them; the pages behind those were
 * few, and the cut path never looked while a page had uncarved room. */
#define PEERS_PER_CUT 16
#define PEERS_PER_CARVE 4
hak_page_t *heap_collect_peers(hak_heap_t *self, unsigned cls, bool carve) {
  /* Entered (collect_enter_own: self's flag) only before the first lock
   * tried: a look that finds no hint set, as most carves do, writes nothing. */
  bool entered = false;
  /* The clock is read only once a heap has frees waiting: the first pages
   * are cut during start-up too, where under a sanitizer's runtime
   * clock_gettime may not be callable yet (test_asan_preload). */
  uint32_t now = 0;
  hak_page_t *got = NULL;
  hak_heap_t *start = self->peer_cursor ? self->peer_cursor : heap_all_first(), *h = start;
  unsigned peers = carve ? PEERS_PER_CARVE : PEERS_PER_CUT;
  for (unsigned k = 0; k < peers && h; k++) {
    /* A heap with neither frees waiting nor (by its hint) a page to spare,
     * nor for a carve an away owner with freed blocks of the class, is
     * passed over without touching its lock, a line its owner writes at
     * every refill and flush. */
    bool away = false;
    if (carve && h != self && atomic_load_explicit(&h->loose[cls], memory_order_relaxed)) {
      uint32_t a = atomic_load_explicit(&h->activity, memory_order_relaxed);
      away = a == atomic_load_explicit(&h->give_seen, memory_order_relaxed);
      if (!away) atomic_store_explicit(&h->give_seen, a, memory_order_relaxed);
    }
    if (h != self && !h->unreachable && h != heap_shared() &&
        (atomic_load_explicit(&h->remote_pages, memory_order_relaxed) ||
         atomic_load_explicit(&h->spare[cls], memory_order_relaxed) || away) &&
        (entered || (entered = collect_enter_own(self))) && heap_trylock(h)) {
      if (!h->awaiting) { /* dying: its stack holds awaited signals (heap_reap's) */
        if (atomic_load_explicit(&h->remote_pages, memory_order_relaxed)) {
          if (!now) now = os_now_ms() | 1;
          h->retire_stamp = now;
          h->retire_stash = true; /* emptied pages of several slices: to the stash (heap.c) */
          heap_collect_remote_held(h);
          h->retire_stamp = 0;
          h->retire_stash = false;
        }
        got = heap_page_give(h, cls, self, away);
      }
      heap_unlock(h);
    }
    if (got) break; /* the next cut starts at the heap that had a page to spare */
    h = h->all_next ? h->all_next : heap_all_first(); /* the end wraps to the newest */
    if (h == start) break;                            /* fewer heaps than PEERS_PER_CUT: all seen */
  }
  self->peer_cursor = h;
  if (entered) collect_leave_own(self);
  return got;
}

hak_page_t *heap_peer_page_first(hak_heap_t *self, unsigned cls) {
  hak_page_t *g = heap_collect_peers(self, cls, true);
  if (!g) return NULL;
  heap_page_adopted(self, g);
  if (g->state == HAK_PAGE_AVAIL && g != self->avail[cls].head) {
    list_remove(&self->avail[cls], g);
    list_push_head(&self->avail[cls], g);
  }
  return g;
}

void collect_atfork_prepare(void) {
  atomic_fetch_or(&collectors, COLLECT_FORK);
  for (unsigned spins = 0; atomic_load(&collectors) != COLLECT_FORK; spins++) {
    if (spins < 64) cpu_relax();
    else sched_yield();
  }
  for (hak_heap_t *h = heap_all_first(); h; h = h->all_next)
    for (unsigned spins = 0; atomic_load(&h->collecting); spins++) {
      if (spins < 64) cpu_relax();
      else sched_yield();
    }
}
void collect_atfork_parent(void) { atomic_fetch_and(&collectors, ~COLLECT_FORK); }

void collect_atfork_child(void) {
  atomic_store(&collectors, 0);
  hak_heap_t *own = hak_tls.heap;
  for (hak_heap_t *h = heap_all_first(); h; h = h->all_next)
    if (h != own && atomic_load_explicit(&h->lock, memory_order_relaxed)) {
      /* Held by a thread that is gone: if it was not marked busy, the lists
       * are whole (the child's repair uses them too), else leave them. */
      if (atomic_load_explicit(&h->busy, memory_order_relaxed)) h->unreachable = true;
      else atomic_store_explicit(&h->lock, 0, memory_order_relaxed);
    }
}

/* Collector side, o->lock held ("Pages to a peer" above): a page
 * of class cls whose freed blocks o can spare, off o's lists, fenced (its
 * remote word moved from 0 to the queued bit) and owned by `to` from now
 * on, or NULL. An empty page at any place in the list; one with blocks out
 * only behind o's current page (or that one too, when o's owner is `away`
 * and the caller about to carve: collect.c) and not the page of o's pending
 * list, which o's owner pops without its lock and gives back under it
 * (heap_return_pending). At most GIVE_SCAN pages are looked at; a walk to
 * the end that saw no page with freed blocks clears o's `loose` hint.
 * The owner changes here, under o's lock, not when `to` adopts the page
 * after that lock is released: o's owner frees the page's blocks that sit
 * in its caches under that lock (heap_return_blocks), and a page whose
 * owner still said o went onto the local free list as o's, while `to` took
 * its remote frees into the same list, both writing the list head and the
 * used count (test_page_give; test_mt_stress under UBSan, 2 runs in 112:
 * a live block read as a free-list link, a live block whose page had
 * retired). From the store on, o's frees of its blocks go to the page's
 * remote list, silently (the queued bit), and `to` takes them on adoption. */
#define GIVE_SCAN 8
hak_page_t *heap_page_give(hak_heap_t *o, unsigned cls, hak_heap_t *to, bool away) {
  hak_page_list_t *l = &o->avail[cls];
  /* The last block of the class's latest pending list, maybe long gone:
   * compared with each page's range, never read (its segment may be gone). */
  const uint8_t *pend = o->pend_tail[cls];
  unsigned seen = 0;
  bool loose = false;
  if (!away && !atomic_load_explicit(&o->spare[cls], memory_order_relaxed)) return NULL;
  for (hak_page_t *p = l->head; p; p = p->next) {
    if (seen++ == GIVE_SCAN) return NULL; /* more may lie further: the hints stay */
    loose |= p->free != NULL;
    if (p->used != 0 && ((p == l->head && !away) || !p->free || (pend >= p->start && pend < p->end))) continue;
    uintptr_t idle = 0;
    if (!atomic_compare_exchange_strong_explicit(&p->remote, &idle, HAK_REMOTE_QUEUED, memory_order_acq_rel,
                                                 memory_order_relaxed))
      continue; /* frees on their way to o, or o's signal */
    page_unkeep(o, p);
    list_remove(l, p);
    atomic_store_explicit(&p->owner, to, memory_order_release);
    return p;
  }
  atomic_store_explicit(&o->spare[cls], 0, memory_order_relaxed);
  if (!loose || away) atomic_store_explicit(&o->loose[cls], 0, memory_order_relaxed); /* away: until blocks come back */
  return NULL;
}

bool heap_release_idle(hak_heap_t *h, uint32_t stamp) {
  bool idle = atomic_load_explicit(&h->activity, memory_order_relaxed) == h->activity_seen, kept = false;
  h->activity_seen = atomic_load_explicit(&h->activity, memory_order_relaxed); /* only the lock holder writes it */
  for (unsigned c = 0; c < HAK_NCLASSES; c++) {
    for (hak_page_t *p = h->avail[c].head, *next; p; p = next) {
      next = p->next;
      if (p->used != 0 || !remote_idle(p)) continue;
      if (!idle) {
        kept = true;
        continue;
      }
      page_unkeep(h, p);
      list_remove(&h->avail[c], p);
      segment_page_free_at(p, stamp);
    }
  }
  return kept;
}
