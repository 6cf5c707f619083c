/* purge.c — gives free slices' memory back to the OS: the dirty budget's
 * sweeps (seg_purge_policy, run by a thread that frees pages into its own
 * shard), the purge deadline's work (segment_purge_aged, from the purger),
 * malloc_trim's (segment_trim), and a destroyed first-class heap's pages
 * purged at once (segment_pages_free_purged). The policy itself is described
 * at the top of segment.c; the books it reads are in shard.h.
 *
 * Locks: a sweep only tries each shard's lock (a busy shard is passed
 * over); the deadline and trim take each shard's lock in turn, never two at
 * once. No madvise runs under any lock: the slices to purge leave the free
 * masks under the shard's lock, which is dropped for the system calls and
 * taken again to put them back (purge_shard, whose comment has the protocol:
 * preemption, fork, thread exit).
 *
 * Dense segments (HAKMEM_THP=dense: one huge page each) are purged only by
 * trim and by the deadline once the program stops cutting pages: a purge
 * of part of one splits its huge page. Their slices are not in the dirty
 * books (shard.h, seg_dirty_add), so the sweeps neither see nor chase them.
 *
 * The budget (dirty_budget). Free dirty slices are purged only beyond a
 * budget: HAKMEM_DIRTY_MAX, doubled while purged memory keeps being cut
 * again (seg_purge_policy), and, in the speed profile, never less than a
 * quarter of the recent peak of slices in pages: a busy program keeps free
 * memory in proportion to its footprint (bench_sizemix 4 300000 1000, 21
 * alternating runs each: madvise calls per run, median, 108-130 -> 0, peak
 * RSS +5%, half of mimalloc's; CPU within the noise, 0.99), a small one
 * keeps HAKMEM_DIRTY_MAX, and one that frees its pages has its budget fall
 * with them within a few delays. Idle memory goes back by the deadline as
 * before (all of it once the program stops cutting pages), and
 * malloc_trim returns everything. */
#include "segment/shard.h"
#include "segment/page_cache.h"
#include "os/os.h"
#include "policy/config.h"
#include "stats/stats.h"

#define BUDGET_SHIFT_MAX 3

/* The free dirty slices of s idle for at least min_age ms. Slice 0's blocks
 * start after the 8 KiB header; where a page is bigger (16 or 64 KiB pages
 * on aarch64) the header shares slice 0's first page with them, madvise
 * cannot drop them apart from it, and slice 0 is never purged: it stays
 * counted as dirty while free, so the books never claim memory went back
 * that did not. */
static uint32_t purge_mask(const hak_segment_t *s, uint32_t now, uint32_t min_age) {
  uint32_t d = s->dirty_mask & s->free_mask, todo = 0;
  if (SLICE0_START & (os_page_size() - 1)) d &= ~1u;
  for (; d; d &= d - 1) {
    unsigned i = (unsigned)__builtin_ctz(d);
    if (now - s->freed_ms[i] >= min_age) todo |= 1u << i;
  }
  return todo;
}

/* madvise the slices of `todo` in s, one call per run. No lock held. */
static void purge_runs(hak_segment_t *s, uint32_t todo) {
  for (uint32_t left = todo; left;) {
    unsigned a = (unsigned)__builtin_ctz(left), b = a;
    while (b + 1 < HAK_SLICES && (left >> (b + 1)) & 1u) b++;
    uint8_t *from = (uint8_t *)s + (size_t)a * HAK_SLICE_SIZE + (a == 0 ? SLICE0_START : 0);
    uint8_t *to = (uint8_t *)s + (size_t)(b + 1) * HAK_SLICE_SIZE;
    os_purge(from, (size_t)(to - from));
    left &= ~((b == 31 ? ALL_SLICES : ((1u << (b + 1)) - 1)) & ~((1u << a) - 1));
  }
}

/* sh locked: slices of s leave its free mask (a purger's batch, or the
 * parent's batch in a forked child coming back) or return to it. Out of the
 * mask they are like a cut page's: no page is cut there, no page freed next
 * to them empties the segment, so it is not unmapped under the madvise. The
 * books (free, dirty) keep counting them meanwhile. */
static void slices_out(seg_shard_t *sh, hak_segment_t *s, uint32_t m) {
  if (s->free_mask == ALL_FREE) SUB(hak_seg_books.empty, 1);
  s->free_mask &= ~m;
  seg_rec_masks(sh, s);
  if (s->free_mask == 0) seg_list_remove(sh, s);
}
static void slices_back(seg_shard_t *sh, hak_segment_t *s, uint32_t m) {
  if (s->free_mask == 0) seg_list_push(sh, s);
  s->free_mask |= m;
  seg_rec_masks(sh, s); /* and the masks purge_shard changed meanwhile */
  if (s->free_mask == ALL_FREE && ADD(hak_seg_books.empty, 1) + 1 > hak_config.segment_cache) seg_unmap_if_safe(sh, s);
}

void seg_purge_restore(seg_shard_t *sh) {
  for (unsigned i = 0; i < sh->out.n; i++) slices_back(sh, sh->out.seg[i], sh->out.mask[i]);
  sh->out.n = 0;
}

/* sh locked at entry and at return, NOT in between: the free dirty slices
 * of sh's segments idle for min_age ms are purged in batches of up to
 * PURGE_BATCH segments. Each batch is taken out of the free masks and
 * recorded in sh->out under the lock; the lock is dropped for the madvise
 * calls and taken again to put the slices back clean, stamped with the
 * time of their purge (0 in a stamp means never touched). While a batch is
 * out, the shard's lock is free for its thread and for stealers; another
 * purger passes the shard over (one batch per shard: what a fork must
 * restore stays one record). A purger preempted between its two critical
 * sections holds only those slices out of use: a page that would have been
 * cut there is cut elsewhere, or from a new segment. Fork: the prepare
 * handler takes the shard lock, so the purger waits for it to put the
 * batch back; the child, which has no purger, puts the record's slices
 * back still counted dirty (segment_atfork_child). Thread exit: no thread
 * exits between the two sections (no cancellation point in between).
 * Returns bytes purged; *busy is set when another purger's batch was out. */
static size_t purge_shard(seg_shard_t *sh, uint32_t now, uint32_t min_age, bool dense, bool *busy) {
  size_t bytes = 0;
  for (unsigned round = 0; round < HAK_SEG_SIZE / HAK_SLICE_SIZE; round++) {
    if (sh->out.n) {
      if (busy) *busy = true;
      break;
    }
    seg_purge_out_t *o = &sh->out;
    for (unsigned l = 0; l <= (unsigned)dense; l++)
      for (hak_segment_t *s = l ? sh->dense_head : sh->head; s && o->n < PURGE_BATCH; s = s->next) {
        if (!(s->dirty_mask & s->free_mask)) continue;
        uint32_t m = purge_mask(s, now, min_age);
        if (!m) continue;
        o->seg[o->n] = s;
        o->mask[o->n++] = m;
      }
    unsigned n = o->n;
    if (!n) break;
    hak_segment_t *seg[PURGE_BATCH];
    uint32_t mask[PURGE_BATCH];
    for (unsigned i = 0; i < n; i++) {
      seg[i] = o->seg[i];
      mask[i] = o->mask[i];
      slices_out(sh, seg[i], mask[i]);
    }
    shard_unlock(sh);
    for (unsigned i = 0; i < n; i++) purge_runs(seg[i], mask[i]);
    shard_lock(sh);
    for (unsigned i = 0; i < n; i++) {
      hak_segment_t *s = seg[i];
      uint32_t m = mask[i];
      seg_dirty_sub(sh, s, m);
      s->dirty_mask &= ~m;
      s->whole_mask &= ~m;
      for (uint32_t k = m; k; k &= k - 1) s->freed_ms[__builtin_ctz(k)] = now | 1;
      bytes += mask_bytes(m);
    }
    o->n = 0;
    for (unsigned i = 0; i < n; i++) slices_back(sh, seg[i], mask[i]); /* may unmap: last */
    if (n < PURGE_BATCH) break;
  }
  return bytes;
}

/* The dirty budget: HAKMEM_DIRTY_MAX, doubled `shift` times by the
 * adaptation below, and in the speed profile at least a quarter of the
 * program's recent peak of slices in pages (cut from segments and not free:
 * held by heaps, page caches, the stash; the peak halves every purge delay
 * after it was last reached). A small program (bench_prodcons: 4.5 MiB)
 * keeps HAKMEM_DIRTY_MAX; one whose pages empty has its budget fall with
 * them within a few delays. But a program with tens of MiB in pages that
 * frees and cuts pages by the thousand per second keeps what it is about to
 * cut again: bench_sizemix 4 300000 1000 holds 150-260 MiB of slices in
 * pages (its large blocks are touched at both ends only: ~60 MiB resident)
 * and 20-90 MiB of free dirty slices; with a budget of 8 MiB (16-64
 * adapted) its sweeps, and the deadline while it kept cutting, purged 20-70
 * MiB per 0.1-0.2 s run in 70-650 madvise calls, and a third of it was cut
 * again within 50 ms. The peak, not the footprint of the moment: as its
 * threads finish, the footprint falls and sweeps purged 20-40 MiB more
 * just before the exit. While the program is busy, free dirty memory stays
 * within a quarter of that peak; once it stops cutting pages the deadline
 * returns all aged memory, as before. */
static size_t dirty_budget(unsigned shift, uint32_t now) {
  size_t b = hak_config.dirty_max << shift;
  if (hak_config.profile != HAK_PROFILE_SPEED) return b;
  /* Free: the shards' folded free slices (adding up their exact counts here
   * read every shard's books line per call), the page caches', and the pages
   * waiting on the returned stacks (pushed without a lock, so not folded:
   * their per-shard counts are read, on each shard's first line; counted as
   * in pages, a secure build's freed pages, which wait there, kept the
   * budget up after the program's pages emptied: test_dirty_budget). */
  size_t total = LOAD(hak_seg_books.total), free = LOAD(hak_seg_books.free) + seg_returned_bytes() + page_cache_bytes();
  size_t fp = total > free ? total - free : 0;
  uint32_t delay = hak_config.purge_delay_ms + 1, halvings = (now - LOAD(hak_seg_books.peak_ms)) / delay;
  size_t peak = halvings >= 32 ? 0 : LOAD(hak_seg_books.peak) >> halvings;
  if (fp >= peak) {
    peak = fp;
    atomic_store_explicit(&hak_seg_books.peak, fp, memory_order_relaxed);
    atomic_store_explicit(&hak_seg_books.peak_ms, now, memory_order_relaxed);
  }
  return peak / 4 > b ? peak / 4 : b;
}

/* Memory freed less than delay/8 ago is never purged: a producer/consumer
 * program reuses it within milliseconds, and purging it would only trade a
 * madvise now for page faults next. Far over budget, sweeps come more often
 * and take younger memory, oldest first. One sweep at a time process-wide
 * (a CAS on last_sweep_ms claims it), without a shard lock held on entry:
 * each shard, the caller's `home` first, is swept only if a try gets its
 * lock (a busy shard is passed over), and its lock is dropped around the
 * madvise calls (purge_shard). */
void seg_purge_policy(seg_shard_t *home) {
  unsigned shift = LOAD(hak_seg_books.budget_shift);
  if (LOAD(hak_seg_books.dirty) <= hak_config.dirty_max << shift) return;
  uint32_t now = os_now_ms(), delay = hak_config.purge_delay_ms, floor_age = delay / 8;
  uint32_t last = LOAD(hak_seg_books.last_sweep_ms);
  if (now - last < floor_age) return; /* no sweep sooner, pressed or not */
  size_t max = dirty_budget(shift, now);
  if (LOAD(hak_seg_books.dirty) <= max) return;
  bool pressed = LOAD(hak_seg_books.dirty) > 2 * max;
  if (now - last < (pressed ? floor_age : delay / 2)) return;
  if (!atomic_compare_exchange_strong_explicit(&hak_seg_books.last_sweep_ms, &last, now, memory_order_relaxed, memory_order_relaxed))
    return;
  /* A program that cuts pages again out of what the last sweeps purged (more
   * than half of it, within a delay) pays a madvise and then page faults for
   * nothing: the budget doubles, up to 8x in the speed profile. One that
   * does not halves it again. Memory idle for a whole delay still goes back
   * by the deadline (segment_purge_aged), beyond the budget while the program
   * keeps cutting pages and all of it once it stops. */
  size_t refault_all = SEG_SUM(refault);
  size_t refault = refault_all - atomic_exchange_explicit(&hak_seg_books.refault_seen, refault_all, memory_order_relaxed);
  unsigned cap = hak_config.profile == HAK_PROFILE_SPEED ? BUDGET_SHIFT_MAX : 1;
  shift = LOAD(hak_seg_books.budget_shift);
  if (refault > LOAD(hak_seg_books.last_sweep) / 2 && refault && shift < cap) shift++;
  else if (refault < LOAD(hak_seg_books.last_sweep) / 8 && shift) shift--;
  atomic_store_explicit(&hak_seg_books.budget_shift, shift, memory_order_relaxed);
  max = dirty_budget(shift, now);
  if (LOAD(hak_seg_books.dirty) <= max) return;
  size_t before = LOAD(hak_seg_books.dirty);
  for (uint32_t age = delay;; age /= 2) {
    if (age < floor_age) age = floor_age;
    for (unsigned i = 0; i < HAK_SEG_SHARDS && LOAD(hak_seg_books.dirty) > max; i++) {
      seg_shard_t *sh = i == 0 ? home : &hak_seg_shards[i];
      if ((i && sh == home) || !LOAD(sh->free_slices) || !hak_trylock(&sh->lock)) continue;
      purge_shard(sh, now, age, false, NULL);
      shard_unlock(sh);
    }
    if (!pressed || age == floor_age || LOAD(hak_seg_books.dirty) <= max) break;
  }
  size_t after = LOAD(hak_seg_books.dirty);
  atomic_store_explicit(&hak_seg_books.last_sweep, before > after ? before - after : 0, memory_order_relaxed);
}

/* A destroyed first-class heap's pages (heap/user_heap.c), when there are
 * more of them than the dirty budget: their memory is purged now, outside
 * any lock (detached, they are in no free mask yet: nobody else can take
 * them), in runs of slices per segment, one madvise per run, then they go
 * back clean, each under its own shard's lock (a cold path: one
 * acquisition per page). The program is done with all of that memory at
 * once, and the purge delay would keep it resident until the next slow path. */
#define PURGE_SEGS 32
void segment_pages_free_purged(hak_page_t *list) {
  for (hak_page_t *pg = list; pg; pg = pg->next) segment_page_detach(pg);
  bool header_shared = (SLICE0_START & (os_page_size() - 1)) != 0; /* slice 0 cannot be purged */
  while (list) {
    hak_segment_t *seg[PURGE_SEGS];
    uint32_t runs[PURGE_SEGS];
    unsigned n = 0;
    hak_page_t *chunk = list, *last = NULL, *pg = list;
    for (; pg; last = pg, pg = pg->next) { /* the pages of up to PURGE_SEGS segments */
      hak_segment_t *s = segment_of(pg);
      unsigned i = 0;
      while (i < n && seg[i] != s) i++;
      if (i == n) {
        if (n == PURGE_SEGS) break;
        seg[n] = s;
        runs[n++] = 0;
      }
      unsigned k = pg->slice_count, f = pg->first_slice;
      runs[i] |= (k == 32 ? ALL_SLICES : ((1u << k) - 1)) << f;
    }
    last->next = NULL;
    list = pg;
    for (unsigned i = 0; i < n; i++) {
      if (header_shared) runs[i] &= ~1u;
      for (uint32_t left = runs[i]; left;) {
        unsigned a = (unsigned)__builtin_ctz(left), b = a;
        while (b + 1 < HAK_SLICES && (left >> (b + 1)) & 1u) b++;
        uint8_t *from = (uint8_t *)seg[i] + (size_t)a * HAK_SLICE_SIZE + (a == 0 ? SLICE0_START : 0);
        os_purge(from, (size_t)((uint8_t *)seg[i] + (size_t)(b + 1) * HAK_SLICE_SIZE - from));
        left &= ~((b == 31 ? ALL_SLICES : ((1u << (b + 1)) - 1)) & ~((1u << a) - 1));
      }
    }
    uint32_t now = os_now_ms();
    for (hak_page_t *p = chunk, *next; p; p = next) {
      next = p->next;
      unsigned i = 0;
      while (seg[i] != segment_of(p)) i++;
      seg_shard_t *sh = &hak_seg_shards[seg[i]->shard];
      shard_lock(sh);
      HAK_STAT_INC(HAK_EV_PAGE_RETIRE);
      seg_page_free_locked(sh, p, now, runs[i]);
      shard_unlock(sh);
    }
  }
}

/* The purge deadline's work for segments: every free slice idle for min_age
 * ms (the purge delay) goes back, except, while the program keeps cutting
 * pages, up to the dirty budget of it (see below). Returns when the next remaining dirty
 * slice will be due, 0 if none is left; *any is set if something was purged. */
uint32_t segment_purge_aged(uint32_t now, uint32_t min_age, bool *any) {
  uint32_t delay = hak_config.purge_delay_ms, youngest_left = UINT32_MAX;
  /* A program that cut pages worth an eighth of the (adapted)
   * HAKMEM_DIRTY_MAX since the last look is not idle: its free slices only
   * looked idle (on a loaded machine a thread may wait a whole delay for a
   * CPU; sizemix purged and re-faulted 130-250 MB in 2.4M operations), and
   * purging them traded a madvise for page faults. Such a program keeps up
   * to the dirty budget (dirty_budget: with its share of the footprint) of
   * aged memory, looked at again in half a delay; the rest, and all of it
   * once the program stops cutting pages, goes back. The test is not an
   * eighth of the budget: with its share of the footprint, a busy program
   * would look idle. */
  size_t cut_all = SEG_SUM(cut);
  size_t keep = 0, cut = cut_all - atomic_exchange_explicit(&hak_seg_books.cut_seen, cut_all, memory_order_relaxed);
  unsigned shift = LOAD(hak_seg_books.budget_shift);
  if (min_age && cut >= (hak_config.dirty_max << shift) / 8) keep = dirty_budget(shift, now);
  for (unsigned i = 0; i < HAK_SEG_SHARDS; i++) {
    seg_shard_t *sh = &hak_seg_shards[i];
    if (!LOAD(sh->free_slices) && !atomic_load_explicit(&sh->returned, memory_order_relaxed)) continue;
    bool busy = false;
    /* The deadline only tries a shard's lock (its thread may be cutting a
     * page: no wait, no yield); a busy shard is looked at again soon. A
     * purge of everything (min_age 0) waits for it. */
    if (!min_age) shard_lock(sh);
    else if (!hak_trylock(&sh->lock)) {
      if (delay / 8 + 1 < youngest_left) youngest_left = delay / 8 + 1;
      continue;
    }
    seg_drain_returned(sh);
    if ((LOAD(hak_seg_books.dirty) > keep || !keep) && purge_shard(sh, now, min_age, !keep, &busy)) *any = true;
    /* another purger's batch was out: this shard is looked at again soon */
    if (busy && delay / 8 + 1 < youngest_left) youngest_left = delay / 8 + 1;
    for (unsigned l = 0; l < 2; l++)
      for (hak_segment_t *s = l ? sh->dense_head : sh->head; s; s = s->next)
        for (uint32_t d = s->dirty_mask & s->free_mask; d; d &= d - 1) {
          uint32_t age = now - s->freed_ms[__builtin_ctz(d)];
          /* kept aged memory is looked at again in half a delay */
          uint32_t left = age < delay ? delay - age : keep ? delay / 2 + 1 : 1;
          if (left < youngest_left) youngest_left = left;
        }
    shard_unlock(sh);
  }
  return youngest_left == UINT32_MAX ? 0 : (now + youngest_left) | 1;
}

bool segment_trim(void) {
  bool any = false;
  for (unsigned i = 0; i < HAK_SEG_SHARDS; i++) {
    seg_shard_t *sh = &hak_seg_shards[i];
    if (!LOAD(sh->free_slices) && !atomic_load_explicit(&sh->returned, memory_order_relaxed)) continue;
    shard_lock(sh);
    seg_drain_returned(sh);
    for (unsigned l = 0; l < 2; l++)
      for (hak_segment_t *s = l ? sh->dense_head : sh->head, *next; s; s = next) {
        next = s->next;
        if (s->free_mask == ALL_FREE && seg_unmap_if_safe(sh, s)) any = true;
      }
    if (purge_shard(sh, os_now_ms(), 0, true, NULL)) any = true;
    shard_unlock(sh);
  }
  return any;
}
