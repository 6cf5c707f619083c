/* page_stash.c — empty pages kept for reuse without a segment lock, by
 * their geometry: freed large pages (blocks above 256 KiB up to 960 KiB, a
 * run of slices in a segment), and pages of the classes whose pages span
 * several slices (blocks above 8 KiB) that a refill's collector emptied.
 *
 * Why: the page caches below (segment/page_cache.c) hold a few slices per
 * thread and 8 in the exchange, sized for one-slice class pages; a page of
 * up to 16 slices overflows both and went back to its segment under the
 * process-wide segment lock, and the next malloc of its kind cut one under
 * it again: one acquisition per large block (large_mt: ~190,000 per million
 * operations). And a page cut again there rarely has the geometry of the
 * one it replaces: its slices come back as another class or another size,
 * whose block boundaries (and a large block's end) fall on OS pages the old
 * ones did not touch, so each reuse faults in new memory. bench_sizemix
 * (4 threads, a fifth of the frees handed to the next thread) swings between
 * 20 and 170 live large blocks as threads are descheduled with their
 * mailboxes full: a stash bounded at 8 MiB missed 13% of the takes, cut
 * 4,500 large pages and 3,500 pages of 32-64 KiB blocks per 1.5M-iteration
 * run, and the last byte of the large blocks faulted on ~15,000 takes (a
 * page faults less the more often it is reused: 73% of first reuses, 12%
 * past the 64th). The stash keeps up to four dirty budgets
 * (HAKMEM_DIRTY_MAX), or the budget as the segments adapt it (purge.c) if
 * that is more, of large pages, and one budget of class pages: free but
 * resident memory, each page given back to its segment once unused for the
 * purge delay, so what it holds beyond the budget is transient.
 *
 * The protocol: two tables (large pages, class pages) of SLOTS atomic words,
 * 0 or an entry: the page record's address | its key << 56 (user addresses
 * fit in 56 bits on x86_64 and aarch64; a record that does not is never
 * stashed): a large page's slice count, a class page's class. The entry and
 * the record it points to describe the page completely; the record is the
 * claimer's alone.
 *   - put (a large block freed; a class page emptied and retired by the
 *     collector of a refill about to cut a page, heap/heap.c): a class page
 *     is detached from the slice map first, a large page parked (its record
 *     says free, its slices stay its own: segment.c, segment_page_park), so
 *     a stale free of its block is reported, as for any free slice; then it
 *     is published with a CAS 0 -> entry (release) in an empty word; none
 *     empty, it goes to the page caches or its segment as before. Entries
 *     that leave for their segments (drains, trim) are detached there.
 *   - take (malloc of n slices; a refill of a class about to cut a page): a
 *     large one takes the smallest entry of n..n+n/4 slices, first among
 *     those whose run had a block end on the OS page where the new block's
 *     last byte falls (ends_hint below), a class one an entry of its
 *     class, claimed with a CAS entry -> 0 (acquire); the winner
 *     re-initialises the page (a large one: only its record). A loser
 *     rescans a few times, then takes the usual path.
 *   - a large take with no entry of n..n+n/4 slices (take_miss): the
 *     shortest longer entry, or else the shortest window of entries whose
 *     runs follow each other in one segment (read from the entry words
 *     alone: the run after entry e starts at record w_page(e) + w_key(e)),
 *     reaching n slices; taken only if mincore finds its first n slices
 *     mostly resident (else the usual path cuts a run: the old choice).
 *     Each entry is claimed with the same CAS; the claimer joins the runs
 *     (segment_large_merge: slice_page and the record, which it holds),
 *     keeps the first n slices and stashes the rest as a page of its own
 *     (segment_large_split), like any put. A window entry gone meanwhile
 *     ends the join: what was joined is stashed again. Why: a ring of 64
 *     live blocks of 4 KiB-4 MiB, every page written (13 MB of 256-960 KiB
 *     blocks live at its peak), missed the n..n+n/4 fit 27 times a run and
 *     cut 26 MB of runs from fresh slices while the stash held ~21 MB of
 *     resident runs of other sizes; the segments had next to no resident
 *     free slices to cut instead (64-450 KB at exit). Taking the stashed
 *     runs: peak RSS 115 MiB instead of 122, 0.96x the CPU time. Without the
 *     residency test, programs that write their blocks at the ends only
 *     (bench_sizemix, large_mt: candidates 0-16% resident) lost the fit by
 *     ends below (splits and joins make runs whose blocks never ended
 *     there): large_mt missed 300-650 times a run instead of 20, with 12%
 *     more faults. A miss whose candidates failed the test makes later
 *     misses probe less often (cold_misses), so those programs pay ~30
 *     mincore calls a run.
 *   - ends_hint[i] (large table): the `ends` mask of entry i's page record
 *     (hak_internal.h), stored relaxed after the entry's CAS and read
 *     relaxed by takers before they claim, so a taker may see the mask of
 *     the slot's previous entry or none: only the choice among entries
 *     suffers (a fault at the block's end, as before), never correctness;
 *     the claimer then owns the record, whose mask is exact. A run's last
 *     byte moved with every reuse by a block of another size: in
 *     bench_sizemix (4 threads, 1% of blocks 256-512 KiB, first and last
 *     bytes written) about a third of the large mallocs faulted a new page
 *     there; with the hint 39% fewer (2,136 -> 1,304 faults sampled).
 *   - over budget (put), purge deadline, trim: entries are claimed the same
 *     way (oldest first by their stamp, a hint only; over budget, from one
 *     pass over the table: drain_over) and given back to their segments
 *     (over budget, in one batch onto their shards' returned stacks).
 *   - has[t][key] (a bit per slot: the slot may hold an entry of that key)
 *     lets a take read only the slots of the keys it accepts, not all SLOTS
 *     (a large malloc of bench_sizemix read ~60 slots, ~1,000 instructions
 *     and up to 16 lines other threads write, 4.5% of the run's
 *     instructions). A bit is a hint a take checks against the slot word;
 *     the word alone says what is stashed. A put sets the bit after its CAS
 *     publishes the entry; whoever claims an entry, or finds a bit whose slot
 *     holds no entry of its key (stale), clears the bit and then reads the
 *     slot again, setting the bit back if an entry of that key is there.
 *     All four are seq_cst, so no entry stays without its bit: if the
 *     clearer's read missed a put's CAS, that CAS, and the put's bit set
 *     after it, come after the clear. Between its CAS and its bit a put's
 *     entry is seen only by the full scans (drain_aged, drain_over): a
 *     preempted putter, or one that vanished in a fork, leaves an entry that
 *     takes miss until the purge deadline gives it back to its segment.
 *   A stashed page is not free in its segment, so its segment stays mapped
 *   (the budget bounds that too), and its record stays valid while stashed.
 *   Nobody waits: a preempted taker or putter owns at most its one page
 *   (others miss it and cut a page from a segment); after fork every word is
 *   consistent (a page claimed by another thread at that moment is lost to
 *   the child: memory only); nothing is per thread, so thread exit does
 *   nothing (a class page is stashed only once no block of it is out, in any
 *   cache or on the way back: page_maybe_retire's condition). */
#include "large/page_stash.h"
#include "os/os.h"
#include "policy/config.h"
#include "policy/purger.h"
#include "segment/segment.h"
#include "segment/shard.h"

#define SLOTS 128 /* per table */
#define N_SHIFT 56

enum { T_LARGE, T_CLASS, TABLES };

static _Atomic(uintptr_t) slot[TABLES][SLOTS];
static _Atomic(uint32_t) stamp[TABLES][SLOTS];
/* Large table: a copy of each entry's page's `ends` (hak_internal.h), read
 * by takers before they claim; a hint only (stored after the entry, so a
 * taker may see a previous entry's), the claimed record has the truth. */
static _Atomic(uint16_t) ends_hint[SLOTS];
static _Atomic(size_t) stashed_bytes[TABLES];
/* Keys are a large page's slice count or a class page's class: below
 * HAK_NCLASSES (page_stash_put stashes no other). */
#define KEYS HAK_NCLASSES
#define WORDS (SLOTS / 64)
_Static_assert(HAK_LARGE_MAX_SLICES < KEYS && SLOTS % 64 == 0, "stash keys and slot words");
static _Atomic(uint64_t) has[TABLES][KEYS][WORDS];

HAK_INLINE hak_page_t *w_page(uintptr_t w) { return (hak_page_t *)(w & (((uintptr_t)1 << N_SHIFT) - 1)); }
HAK_INLINE unsigned w_key(uintptr_t w) { return (unsigned)(w >> N_SHIFT); }
/* Read once the entry is claimed (the record is then the claimer's). */
HAK_INLINE size_t pg_bytes(const hak_page_t *pg) { return (size_t)pg->slice_count << HAK_SLICE_SHIFT; }

size_t page_stash_bytes(void) {
  return atomic_load_explicit(&stashed_bytes[T_LARGE], memory_order_relaxed) +
         atomic_load_explicit(&stashed_bytes[T_CLASS], memory_order_relaxed);
}

/* Table t's bound: class pages, the dirty budget; large pages, the dirty
 * budget as the segments adapt it (segment/purge.c), at least LARGE_BUDGETS
 * budgets. */
#define LARGE_BUDGETS 4
static size_t stash_max(unsigned t) {
  if (t == T_CLASS) return hak_config.dirty_max;
  size_t b = hak_config.dirty_max << atomic_load_explicit(&hak_seg_books.budget_shift, memory_order_relaxed);
  return t == T_LARGE && b < hak_config.dirty_max * LARGE_BUDGETS ? hak_config.dirty_max * LARGE_BUDGETS : b;
}

/* Slot i's entry of `key` was claimed, or has gone: its bit goes, and comes
 * back if an entry of that key is there by then (see has[] above). */
static void has_clear(unsigned t, unsigned key, int i) {
  uint64_t bit = (uint64_t)1 << (i % 64);
  atomic_fetch_and(&has[t][key][i / 64], ~bit);
  uintptr_t w = atomic_load(&slot[t][i]);
  if (w && w_key(w) == key) atomic_fetch_or(&has[t][key][i / 64], bit);
}

/* pg (claimed, parked) of at least k slices for a block of k: the rest
 * stashed again as a run of its own, if long enough for a take to ask for
 * it, then pg unparked. */
#define SPLIT_MIN 3 /* a shorter rest stays with the block: no take asks for it (large.c) */
static hak_page_t *take_split(hak_page_t *pg, unsigned k) {
  if (pg->slice_count - k >= SPLIT_MIN) {
    hak_page_t *rest = segment_large_split(pg, k);
    if (!page_stash_put(rest)) segment_page_free(rest);
  }
  segment_page_unpark(pg);
  return pg;
}

/* Whether the first k slices of the run at slice `at` of s are mostly
 * resident: only then does a block taking them save the faults a fresh
 * run would cost. (*probes)--: a bound on the mincore calls per miss. */
#define MISS_PROBES 4
static bool run_warm(hak_segment_t *s, unsigned at, unsigned k, unsigned *probes) {
  if (!*probes) return false;
  --*probes;
  size_t bytes = (size_t)k << HAK_SLICE_SHIFT;
  size_t r = os_resident((uint8_t *)s + ((size_t)at << HAK_SLICE_SHIFT), bytes);
  return r * 2 >= bytes;
}

/* No entry of k..k+k/4 slices: the shortest longer one, split. */
static hak_page_t *take_longer(unsigned k, unsigned *probes) {
  for (unsigned n = k + k / 4 + 1; n < HAK_SLICES; n++)
    for (int j = 0; j < WORDS; j++)
      for (uint64_t m = atomic_load_explicit(&has[T_LARGE][n][j], memory_order_relaxed); m; m &= m - 1) {
        int i = j * 64 + __builtin_ctzll(m);
        uintptr_t w = atomic_load_explicit(&slot[T_LARGE][i], memory_order_relaxed);
        if (!w || w_key(w) != n) {
          has_clear(T_LARGE, n, i); /* stale */
          continue;
        }
        hak_segment_t *s = segment_of(w_page(w));
        if (!run_warm(s, (unsigned)(w_page(w) - s->pages), k, probes)) {
          if (!*probes) return NULL;
          continue;
        }
        if (!atomic_compare_exchange_strong_explicit(&slot[T_LARGE][i], &w, 0, memory_order_acquire, memory_order_relaxed))
          continue;
        has_clear(T_LARGE, n, i);
        atomic_fetch_sub_explicit(&stashed_bytes[T_LARGE], pg_bytes(w_page(w)), memory_order_relaxed);
        return take_split(w_page(w), k);
      }
  return NULL;
}

/* No entry of k slices or more: stashed runs that follow each other in a
 * segment, joined into one of k or more, split. Which runs follow each
 * other is read from the entries alone (record | slice count: the record
 * at slice i of a segment is pages[i], so the run after entry e starts at
 * record w_page(e) + w_key(e)), with no read of a record or a segment
 * header it does not hold (a segment may be unmapped under an entry
 * another thread takes meanwhile). Of the windows of consecutive runs
 * that reach k slices, the shortest; its runs are claimed in turn (their
 * CAS), and if one has gone meanwhile the ones claimed are joined and
 * stashed again. */
typedef struct { uintptr_t w; int i; } merge_entry_t;

static hak_page_t *take_merged(unsigned k, unsigned *probes) {
  merge_entry_t e[SLOTS];
  int n = 0;
  for (int i = 0; i < SLOTS; i++) {
    uintptr_t w = atomic_load_explicit(&slot[T_LARGE][i], memory_order_relaxed);
    if (!w || w_key(w) >= k) continue; /* longer ones: take_longer */
    int j = n++;
    for (; j > 0 && w_page(e[j - 1].w) > w_page(w); j--) e[j] = e[j - 1]; /* by address */
    e[j] = (merge_entry_t){w, i};
  }
  int best = -1, best_len = 0;
  unsigned best_total = HAK_SLICES;
  for (int a = 0; a < n; a++) {
    unsigned total = w_key(e[a].w);
    int b = a;
    while (total < k && b + 1 < n && w_page(e[b + 1].w) == w_page(e[b].w) + w_key(e[b].w)) total += w_key(e[++b].w);
    if (total >= k && total < best_total) best = a, best_len = b - a + 1, best_total = total;
  }
  if (best < 0) return NULL;
  hak_page_t *pg = w_page(e[best].w);
  hak_segment_t *s = segment_of(pg);
  if (!run_warm(s, (unsigned)(pg - s->pages), k, probes)) return NULL;
  uintptr_t w = e[best].w;
  if (!atomic_compare_exchange_strong_explicit(&slot[T_LARGE][e[best].i], &w, 0, memory_order_acquire, memory_order_relaxed))
    return NULL;
  has_clear(T_LARGE, w_key(w), e[best].i);
  atomic_fetch_sub_explicit(&stashed_bytes[T_LARGE], pg_bytes(pg), memory_order_relaxed);
  for (int j = best + 1; j < best + best_len; j++) {
    w = e[j].w;
    if (!atomic_compare_exchange_strong_explicit(&slot[T_LARGE][e[j].i], &w, 0, memory_order_acquire, memory_order_relaxed))
      break;
    has_clear(T_LARGE, w_key(w), e[j].i);
    atomic_fetch_sub_explicit(&stashed_bytes[T_LARGE], pg_bytes(w_page(w)), memory_order_relaxed);
    segment_large_merge(pg, w_page(w));
  }
  if (pg->slice_count >= k) return take_split(pg, k);
  if (!page_stash_put(pg)) segment_page_free(pg);
  return NULL;
}

/* Misses in a row whose candidates were mostly not resident (at most
 * COLD_MAX), and a tick: after f of them only one miss in 2^f probes. A
 * program that writes its large blocks at their ends only (bench_sizemix,
 * large_mt: candidates 0-16% resident) pays a mincore call on few misses;
 * one that writes them whole passes every probe and keeps f at 0. Hints
 * only (relaxed). */
#define COLD_MAX 6
static _Atomic(unsigned) cold_misses, miss_tick;

static hak_page_t *take_miss(unsigned k) {
  unsigned f = atomic_load_explicit(&cold_misses, memory_order_relaxed);
  if (f && (atomic_fetch_add_explicit(&miss_tick, 1, memory_order_relaxed) & ((1u << f) - 1))) return NULL;
  unsigned probes = MISS_PROBES;
  hak_page_t *pg = take_longer(k, &probes);
  if (!pg) pg = take_merged(k, &probes);
  if (pg) {
    if (f) atomic_store_explicit(&cold_misses, 0, memory_order_relaxed);
  } else if (probes < MISS_PROBES && f < COLD_MAX) {
    atomic_store_explicit(&cold_misses, f + 1, memory_order_relaxed);
  }
  return pg;
}

/* Claim the best entry of table t for key k (large: the smallest of
 * k..k+k/4 slices whose run has had a block end on the page where this
 * one's last byte (`last` bytes into the run) falls, then those with one
 * on the page it falls on if moved up (`last2`), else the smallest; class:
 * class k). */
static hak_page_t *take(unsigned t, unsigned k, unsigned cls, size_t last, size_t last2) {
  if (!atomic_load_explicit(&stashed_bytes[t], memory_order_relaxed)) return NULL;
  unsigned most = t == T_LARGE ? k + k / 4 : k;
  /* Only a run of exactly k slices can have the bit: in a longer one the
   * block ends at least a slice before the run's last page. */
  uint16_t kbit = t == T_LARGE ? page_end_bit(k, last) : 0, kup = t == T_LARGE ? page_end_bit(k, last2) : 0;
  for (int tries = 0; tries < 4; tries++) {
    int best = -1;
    unsigned hit = 0;
    uintptr_t bw = 0;
    /* Keys in ascending order, slots in ascending order within a key: the
     * first of the best kind, as a scan of the whole table found it. An
     * entry of k slices beats all longer ones (those never hit), so a key
     * past k is read only when k has none. */
    for (unsigned n = k; n <= most && n < KEYS && best < 0; n++) {
      for (int j = 0; j < WORDS; j++) {
        for (uint64_t m = atomic_load_explicit(&has[t][n][j], memory_order_relaxed); m; m &= m - 1) {
          int i = j * 64 + __builtin_ctzll(m);
          uintptr_t w = atomic_load_explicit(&slot[t][i], memory_order_relaxed);
          if (!w || w_key(w) != n) {
            has_clear(t, n, i); /* stale */
            continue;
          }
          /* A large page the block ends on a resident page of (the bench that
           * writes a block's two ends: each reuse of a run with another size
           * faulted a new page at the end, ~1 in 3 large mallocs of
           * bench_sizemix 4 300000 1000) beats a smaller one that does not. */
          uint16_t e = n == k && (kbit | kup) ? atomic_load_explicit(&ends_hint[i], memory_order_relaxed) : 0;
          unsigned h = e & kbit ? 2 : e & kup ? 1 : 0; /* as it is, moved up (large.c, end_place), neither */
          if (best >= 0 && hit >= h) continue;
          best = i;
          bw = w;
          hit = h;
          if (h == 2 || !kbit) goto found;
        }
      }
    }
  found:
    if (best < 0) break;
    if (atomic_compare_exchange_strong_explicit(&slot[t][best], &bw, 0, memory_order_acquire, memory_order_relaxed)) {
      hak_page_t *pg = w_page(bw);
      has_clear(t, w_key(bw), best);
      atomic_fetch_sub_explicit(&stashed_bytes[t], pg_bytes(pg), memory_order_relaxed);
      if (t == T_LARGE) segment_page_unpark(pg); /* parked by its put: its slices are still its own */
      else segment_page_reinit(pg, cls);
      return pg;
    }
  }
  return t == T_LARGE ? take_miss(k) : NULL;
}

hak_page_t *page_stash_take(unsigned n, size_t last, size_t last2) {
  return take(T_LARGE, n, HAK_CLASS_NONE, last, last2);
}
hak_page_t *page_stash_take_class(unsigned cls) { return take(T_CLASS, cls, cls, 0, SIZE_MAX); }

/* Claim the entries stamped at least min_age ago and give them back to their
 * segments, one by one (cold). Returns when the next entry is due (0: none). */
static uint32_t drain_aged(uint32_t now, uint32_t min_age, bool *any) {
  uint32_t delay = hak_config.purge_delay_ms, youngest_left = UINT32_MAX;
  for (int t = 0; t < TABLES; t++)
    for (int i = 0; i < SLOTS; i++) {
      uintptr_t w = atomic_load_explicit(&slot[t][i], memory_order_relaxed);
      if (!w) continue;
      uint32_t age = now - atomic_load_explicit(&stamp[t][i], memory_order_relaxed);
      if (age < min_age) {
        if (delay - age < youngest_left) youngest_left = delay - age;
        continue;
      }
      if (!atomic_compare_exchange_strong_explicit(&slot[t][i], &w, 0, memory_order_acquire, memory_order_relaxed))
        continue;
      has_clear((unsigned)t, w_key(w), i);
      atomic_fetch_sub_explicit(&stashed_bytes[t], pg_bytes(w_page(w)), memory_order_relaxed);
      /* Stamped with when it was freed, so its segment purges it at its
       * next sweep rather than a delay later. */
      segment_page_free_at(w_page(w), now - age);
      if (any) *any = true;
    }
  return youngest_left == UINT32_MAX ? 0 : (now + youngest_left) | 1;
}

/* Claim table t's oldest entries until it holds at most `keep` bytes and
 * give them back to their segments in one batch. One pass reads the table
 * into a heap of its entries by age (oldest on top), and the claims pop it:
 * O(SLOTS + k log SLOTS) for k claims, where a scan per claim made it
 * O(SLOTS x k), up to 16,384 slot reads for one put. An entry claimed or
 * replaced by another thread since the pass fails its CAS and is passed
 * over; one put since then is the newest anyway. */
typedef struct { uint32_t age; int i; uintptr_t w; } drain_entry_t;

static void heap_down(drain_entry_t *h, int n, int at) {
  for (;;) {
    int big = at, l = 2 * at + 1, r = l + 1;
    if (l < n && h[l].age > h[big].age) big = l;
    if (r < n && h[r].age > h[big].age) big = r;
    if (big == at) return;
    drain_entry_t x = h[at];
    h[at] = h[big];
    h[big] = x;
    at = big;
  }
}

static void drain_over(unsigned t, uint32_t now, size_t keep) {
  drain_entry_t h[SLOTS];
  int n = 0;
  for (int i = 0; i < SLOTS; i++) {
    uintptr_t w = atomic_load_explicit(&slot[t][i], memory_order_relaxed);
    if (w) h[n++] = (drain_entry_t){now - atomic_load_explicit(&stamp[t][i], memory_order_relaxed), i, w};
  }
  for (int i = n / 2 - 1; i >= 0; i--) heap_down(h, n, i);
  hak_page_t *list = NULL;
  while (n && atomic_load_explicit(&stashed_bytes[t], memory_order_relaxed) > keep) {
    drain_entry_t e = h[0];
    h[0] = h[--n];
    heap_down(h, n, 0);
    if (!atomic_compare_exchange_strong_explicit(&slot[t][e.i], &e.w, 0, memory_order_acquire, memory_order_relaxed))
      continue;
    has_clear(t, w_key(e.w), e.i);
    atomic_fetch_sub_explicit(&stashed_bytes[t], pg_bytes(w_page(e.w)), memory_order_relaxed);
    w_page(e.w)->next = list;
    list = w_page(e.w);
  }
  if (list) segment_pages_free(0, list); /* shard 0 holds no segment: every page goes to its shard's returned stack */
}

bool page_stash_put(hak_page_t *pg) {
  unsigned t = pg->cls == HAK_CLASS_NONE ? T_LARGE : T_CLASS;
  size_t most = stash_max(t), bytes = pg_bytes(pg);
  unsigned key = t == T_LARGE ? pg->slice_count : pg->cls;
  if (bytes > most / 2 || ((uintptr_t)pg >> N_SHIFT) != 0 || key >= KEYS) return false;
  uintptr_t w = (uintptr_t)pg | (uintptr_t)key << N_SHIFT;
  uint16_t ends = pg->ends; /* read now: once published, the record is its claimer's */
  pg->known_zero = 0; /* it was used */
  if (t == T_LARGE) segment_page_park(pg);
  else segment_page_detach(pg);
  uint32_t now = os_now_ms();
  /* Where the search for an empty word starts: a hash of the record's
   * address. (pg >> 7) % SLOTS was the slice index plus a constant, so every
   * segment's pages of the same first slice began at the same word: in
   * bench_sizemix 4 300000 1000 a large put read 6-7 full words before an
   * empty one, with the hash 0.7-0.8. */
  int from = (int)(((uintptr_t)pg * 0x9E3779B97F4A7C15ull) >> (64 - 7));
  _Static_assert(SLOTS == 128, "from: 7 bits");
  /* Counted before it can be taken, so the count never runs below zero. */
  size_t total = atomic_fetch_add_explicit(&stashed_bytes[t], bytes, memory_order_relaxed) + bytes;
  for (int k = 0; k < SLOTS; k++) {
    int i = (from + k) % SLOTS;
    uintptr_t empty = 0;
    if (!atomic_load_explicit(&slot[t][i], memory_order_relaxed) &&
        atomic_compare_exchange_strong(&slot[t][i], &empty, w)) {
      atomic_store_explicit(&stamp[t][i], now, memory_order_relaxed);
      if (t == T_LARGE) atomic_store_explicit(&ends_hint[i], ends, memory_order_relaxed);
      atomic_fetch_or(&has[t][key][i / 64], (uint64_t)1 << (i % 64)); /* after the entry (see has[]) */
      /* Resident until reused or given back: due after the purge delay. */
      purge_arm((now + hak_config.purge_delay_ms) | 1);
      if (total > most) drain_over(t, now, most - most / 4); /* oldest out, a quarter at once */
      return true;
    }
  }
  atomic_fetch_sub_explicit(&stashed_bytes[t], bytes, memory_order_relaxed);
  return false; /* full: the caller frees it the usual way (parked or detached already: harmless) */
}

uint32_t page_stash_purge_aged(uint32_t now, uint32_t min_age, bool *any) { return drain_aged(now, min_age, any); }

bool page_stash_trim(void) {
  bool any = false;
  drain_aged(os_now_ms(), 0, &any);
  return any;
}

size_t page_stash_unseen(size_t *bytes) {
  size_t n = 0, b = 0;
  for (unsigned t = 0; t < TABLES; t++)
    for (int i = 0; i < SLOTS; i++) {
      uintptr_t w = atomic_load(&slot[t][i]);
      if (!w) continue;
      b += pg_bytes(w_page(w));
      if (!(atomic_load(&has[t][w_key(w)][i / 64]) & ((uint64_t)1 << (i % 64)))) n++;
    }
  if (bytes) *bytes = b;
  return n;
}
