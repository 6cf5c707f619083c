/* seg_index.c — each shard's index of its segments (shard.h, seg_rec_t):
 * one record per segment mapped for the shard, in one array, copying what
 * the page search reads of a segment's header (its masks, its dense flag,
 * its free slices' last classes), linked as the headers' list is; and the
 * search itself (seg_search_locked, with the tiers of the choice).
 *
 * Why. The search for a page (segment.c, page_alloc_locked) took the first
 * segment of the list with a run of each tier's kind, reading every header
 * of the list on the way: each header is the first cache line of its own
 * 2 MiB-aligned mapping, so every step was a cache miss and a TLB miss.
 * bench_prodcons 2 150000 16 64K walked lists of ~50 segments, ~60k times
 * per run: the walk was 10-15% of its CPU time (perf), 24% of its
 * instructions and 82% of its last-level data-read misses (cachegrind);
 * in bench_sizemix 4 300000 1000, 0.65% of the CPU time and 18% of the
 * last-level misses. The records are 128 bytes each (the search reads the
 * first 64), in an array of a few OS pages: the search touches one header,
 * the one it cuts from.
 *
 * The same choice. The records are linked in the order of the headers'
 * list (by record index: seg_list_push and seg_list_remove link and unlink
 * both), so the search walks the same segments in the same order. It stops
 * earlier than the walk did only where no segment further on can give a
 * better tier: per shard, counts of the records that may be in tier 0 for a
 * class (warm_cls: bit c % 64 set when a warm free slice last held class
 * c), of those with a free slice resident whole (tier 1) and of those with
 * an untouched free slice (tier 2). Where only tier 0 can still win, it
 * reads warm_cls alone, and last_cls only where the class's bit is set.
 * tests/test_seg_index.c compares its choice with the walk of the headers.
 *
 * Keeping it. Everything runs under the shard's lock. The header stays the
 * truth; every change of a header's masks (segment.c's cut and free,
 * purge.c's batches out and back, large_run.c's grow through the cut's
 * claim) is followed by seg_rec_masks before the lock goes and before the
 * segment may be unmapped; seg_page_free_locked copies last_cls. A record
 * is added when a segment is published and removed when it is detached for
 * its unmap (the last record moves into its slot, and that segment's header
 * learns its new index). Fork: the prepare handler holds every shard lock,
 * so the child's copy matches its headers; the child's restore of a
 * purger's batch (seg_purge_restore) goes through purge.c's slices_back,
 * which keeps it.
 *
 * Memory. The first SEG_RECS_INLINE records are in the shard itself (a
 * program whose threads hold a few segments each maps nothing more, and a
 * caller without a heap, which draws a shard per call, spreads segments
 * over many shards). Past them the array is mapped (no system call under
 * a shard lock: the lock is dropped, the array mapped, the lock taken again
 * and the array swapped in if it is still needed; the old one is unmapped
 * after a release), 4 KiB (32 records, 64 MiB of segments) rounded up to
 * whole OS pages, then doubled when full. */
#include "segment/shard.h"
#include "os/os.h"

#include <string.h>

seg_index_t hak_seg_index[HAK_SEG_SHARDS];

#define RECS_FIRST (4096 / sizeof(seg_rec_t))

/* The masks, the warm classes (warm_cls) and the shard's counts of them.
 * A warm slice's last class changes only while it is in a page (not
 * warm), so warm_cls changes only with the warm set: where slices only
 * joined it (a page freed), their classes are added; where some left (a
 * cut, a purge), it is made again from the slices left. */
void seg_rec_masks(seg_shard_t *sh, const hak_segment_t *s) {
  seg_index_t *ix = seg_ix(sh);
  seg_rec_t *r = seg_rec(sh, s);
  uint32_t was = r->free & r->dirty, warm = s->free_mask & s->dirty_mask;
  uint64_t w = r->warm_cls;
  int whole = (r->whole & r->free) != 0, clean = (r->free & ~r->dirty) != 0;
  r->free = s->free_mask;
  r->dirty = s->dirty_mask;
  r->whole = s->whole_mask;
  if ((was & warm) != was) w = 0, was = 0;
  for (uint32_t m = warm & ~was; m; m &= m - 1) w |= 1ull << (r->last_cls[__builtin_ctz(m)] & 63);
  for (uint64_t d = w ^ r->warm_cls; d; d &= d - 1) {
    unsigned c = (unsigned)__builtin_ctzll(d);
    if (w >> c & 1) ix->warm_cnt[c]++;
    else ix->warm_cnt[c]--;
  }
  r->warm_cls = w;
  ix->whole_cnt += (uint32_t)(((r->whole & r->free) != 0) - whole);
  ix->clean_cnt += (uint32_t)(((r->free & ~r->dirty) != 0) - clean);
}

void seg_rec_add(seg_shard_t *sh, hak_segment_t *s) {
  seg_index_t *ix = seg_ix(sh);
  uint32_t i = ix->nrecs++;
  seg_rec_t *r = &ix->recs[i];
  s->rec = i;
  r->seg = s;
  r->dense = s->dense;
  r->next = r->prev = 0;
  r->free = r->dirty = r->whole = 0;
  r->warm_cls = 0;
  memcpy(r->last_cls, s->last_cls, sizeof r->last_cls);
  seg_rec_masks(sh, s);
}

void seg_rec_push(seg_shard_t *sh, hak_segment_t *s) {
  seg_index_t *ix = seg_ix(sh);
  seg_rec_t *r = seg_rec(sh, s);
  uint32_t me = s->rec + 1, *tail = &ix->rtail[r->dense];
  r->next = 0;
  r->prev = *tail;
  if (*tail) ix->recs[*tail - 1].next = me;
  else ix->rhead[r->dense] = me;
  *tail = me;
}

void seg_rec_unlink(seg_shard_t *sh, hak_segment_t *s) {
  seg_index_t *ix = seg_ix(sh);
  seg_rec_t *r = seg_rec(sh, s);
  if (r->prev) ix->recs[r->prev - 1].next = r->next;
  else ix->rhead[r->dense] = r->next;
  if (r->next) ix->recs[r->next - 1].prev = r->prev;
  else ix->rtail[r->dense] = r->prev;
  r->next = r->prev = 0;
}

/* s is off the list (seg_unmap unlinks it first); the last record moves into
 * its slot, with the links that point at it. */
void seg_rec_remove(seg_shard_t *sh, hak_segment_t *s) {
  seg_index_t *ix = seg_ix(sh);
  uint32_t i = s->rec, last = --ix->nrecs;
  seg_rec_t *r = &ix->recs[i];
  for (uint64_t d = r->warm_cls; d; d &= d - 1) ix->warm_cnt[__builtin_ctzll(d)]--;
  ix->whole_cnt -= (r->whole & r->free) != 0;
  ix->clean_cnt -= (r->free & ~r->dirty) != 0;
  if (i == last) return;
  *r = ix->recs[last];
  r->seg->rec = i;
  if (r->prev) ix->recs[r->prev - 1].next = i + 1;
  else if (ix->rhead[r->dense] == last + 1) ix->rhead[r->dense] = i + 1;
  if (r->next) ix->recs[r->next - 1].prev = i + 1;
  else if (ix->rtail[r->dense] == last + 1) ix->rtail[r->dense] = i + 1;
}

bool seg_lock_with_room(seg_shard_t *sh, bool room) {
  seg_index_t *ix = seg_ix(sh);
  shard_lock(sh);
  if (!ix->recs) ix->recs = ix->first_recs, ix->caprecs = SEG_RECS_INLINE;
  while (room && ix->nrecs == ix->caprecs) {
    size_t cap = ix->caprecs < RECS_FIRST ? RECS_FIRST : 2 * (size_t)ix->caprecs;
    cap = align_up(cap * sizeof(seg_rec_t), os_page_size()) / sizeof(seg_rec_t); /* whole OS pages */
    shard_unlock(sh);
    seg_rec_t *a = os_map(cap * sizeof *a), *old = NULL;
    size_t old_cap = 0;
    shard_lock(sh);
    if (!a) return false;
    if (cap > ix->caprecs) { /* else another thread grew it meanwhile */
      if (ix->nrecs) memcpy(a, ix->recs, ix->nrecs * sizeof *a);
      old = ix->recs, old_cap = ix->caprecs;
      ix->recs = a, ix->caprecs = (uint32_t)cap;
    } else {
      old = a, old_cap = cap;
    }
    if (old && old != ix->first_recs) {
      shard_unlock(sh);
      os_unmap(old, old_cap * sizeof *old);
      shard_lock(sh);
    }
  }
  return true;
}

/* warm_only: only slices that are resident already (the tiers before the
 * untouched ones); -1 if there are none.
 *
 * The tiers, best first, each taking the first segment of the shard's list
 * that has a run of its kind:
 *   class page: 1 a warm slice that held this class (same block offsets, so
 *     nothing new becomes resident); 2 warm slices of another class resident
 *     whole (their page was carved to the end, its blocks no bigger than an
 *     OS page: new block boundaries touch nothing new); 3 untouched slices;
 *     4 any free run. A warm slice of another class comes last: its new
 *     block boundaries would touch pages the old ones did not, and over time
 *     make every page of the heap resident.
 *   large page: 1 warm slices (it will be written from its start); 2 any.
 * One walk of the list finds the best tier's candidate (stopping at a tier
 * 1 hit), through the shard's index: its records are linked as the headers
 * are, and no header is read but the one cut from (each is a cache line of
 * its own 2 MiB-aligned mapping: a walk of the headers cost a cache miss
 * and a TLB miss per segment). One walk per tier made this search 4% of
 * sizemix's CPU time. */
enum { TIERS = 4 };
int seg_search_locked(seg_shard_t *sh, unsigned n, unsigned cls, bool warm_only, bool dense, hak_segment_t **out) {
  seg_index_t *ix = seg_ix(sh);
  const seg_rec_t *recs = ix->recs, *seg[TIERS] = {NULL, NULL, NULL, NULL};
  uint32_t head = ix->rhead[dense];
  bool slice0_ok = n == 1 && cls != HAK_CLASS_NONE;
  int at[TIERS] = {-1, -1, -1, -1};
  if (cls != HAK_CLASS_NONE) {
    uint32_t run = n >= 32 ? ALL_SLICES : (1u << n) - 1;
    uint64_t bit = 1ull << (cls & 63);
    /* Whether a segment of the list may be in tier 0 (one of its warm
     * slices held a class with cls's bit), tier 1, or tier 2. The walk
     * stops once no segment further on can give a better tier than the
     * best found; where only tier 0 can, it reads warm_cls alone. */
    bool may0 = ix->warm_cnt[cls & 63] != 0, may1 = dense || ix->whole_cnt != 0, may2 = ix->clean_cnt != 0;
    if (!may0 && !may1 && warm_only) return -1;
    for (uint32_t l = head; l;) {
      const seg_rec_t *t = &recs[l - 1];
      uint32_t fm = t->free, dm = t->dirty, warm = fm & dm;
      l = t->next;
      if (t->warm_cls & bit) /* else no warm slice of it held this class */
        for (uint32_t m = warm & (slice0_ok ? ALL_SLICES : ~1u); m; m &= m - 1) {
          unsigned i = (unsigned)__builtin_ctz(m);
          if (t->last_cls[i] == cls && i + n <= HAK_SLICES && ((fm >> i) & run) == run) {
            seg[0] = t;
            at[0] = (int)i;
            break;
          }
        }
      if (seg[0]) break;
      /* A dense segment in use is resident whole (one huge page): any free
       * slice of it is warm, and taken before an untouched segment. */
      if (!seg[1] && t->dense && fm != ALL_FREE && (at[1] = find_run(fm, 0, n, slice0_ok)) >= 0) seg[1] = t;
      if (!seg[1] && (t->whole & fm) && (at[1] = find_run(fm & t->whole, 0, n, slice0_ok)) >= 0) seg[1] = t;
      if (!warm_only) {
        if (!seg[2] && (at[2] = find_run(fm & ~dm, 0, n, slice0_ok)) >= 0) seg[2] = t;
        if (!seg[3] && (at[3] = find_run(fm, dm, n, slice0_ok)) >= 0) seg[3] = t;
      }
      /* Below tier 0, the best found stands when tier 1 is found, or
       * cannot be and either only warm slices count, or tier 2 is found,
       * or cannot be and tier 3 is. */
      if (seg[1] || (!may1 && (warm_only || seg[2] || (!may2 && seg[3])))) {
        if (!may0) break;
        while (l && !(recs[l - 1].warm_cls & bit)) l = recs[l - 1].next;
      }
    }
  } else {
#if HAK_SECURE
    /* A large block: first a run that ends where a freed large page left
     * its guard and holds no other (large_run.c): no system call at all.
     * Only a segment with a run of n at all has its header read. */
    for (uint32_t l = head; l && !seg[0]; l = recs[l - 1].next)
      if (find_run(recs[l - 1].free, 0, n, false) >= 0 && (at[0] = seg_find_guarded_run(recs[l - 1].seg, n)) >= 0)
        seg[0] = &recs[l - 1];
#endif
    for (uint32_t l = head; l && !seg[0] && !seg[1]; l = recs[l - 1].next) {
      const seg_rec_t *t = &recs[l - 1];
      uint32_t fm = t->free, dm = t->dirty;
      if ((dm & fm) && (at[1] = find_run(fm & dm, 0, n, slice0_ok)) >= 0) seg[1] = t;
      else if (!warm_only && !seg[3] && (at[3] = find_run(fm, dm, n, slice0_ok)) >= 0) seg[3] = t;
    }
  }
  for (unsigned k = 0; k < TIERS; k++)
    if (seg[k]) {
      *out = seg[k]->seg;
      return at[k];
    }
  return -1;
}
