/* seg_map.c — segments come from the OS and go back to it (segment.c cuts
 * pages from them): mapped and initialised by segment_map, put on their
 * shard's list by segment_publish, detached by seg_unmap_if_safe, unmapped
 * by seg_unmap_doomed.
 *
 * No mmap or munmap under a shard lock: they take the process's memory-map
 * lock, behind which a thread may wait for milliseconds while page faults
 * are served, and a shard lock held meanwhile stalled every stealer of
 * that shard (sizemix: waits of up to 7 ms, 25-35 ms per 4x1.5M run).
 *  - Map: a thread that found no run anywhere maps a segment with no lock
 *    held and fills in its header (segment_map: nobody can reach it yet),
 *    then takes its shard lock, searches once more (slices freed meanwhile
 *    are used first), and publishes the segment on the list (segment_publish);
 *    it cuts its page there if the search found none. Two threads of one
 *    shard may map at once: the second segment stays on the list, empty,
 *    and goes like any empty one beyond the cache.
 *  - Unmap: an empty segment beyond the cache leaves the books, the list and
 *    the slice map under the lock (seg_unmap, after seg_unmap_safe) and is
 *    queued on sh->doomed; shard_unlock (shard.h), through which every
 *    release of a shard lock goes, takes the queue before it releases the
 *    lock and munmaps after. A segment on the queue is reachable from
 *    nowhere else (not listed, not in the slice map, no page of it in use).
 *  - Preemption halfway: a mapper preempted before it publishes holds only
 *    its own segment (its shard's others cut elsewhere or map theirs); an
 *    unmapper preempted after its unlock holds only address space.
 *  - fork: the prepare handler takes every shard lock, so no queue is
 *    non-empty in the child; a segment being mapped or unmapped by another
 *    thread at the fork is address space lost to the child (mapped, never
 *    listed: what it holds is that thread's, which the child lacks).
 *  - Thread exit: both windows are inside one call; nothing outlives it.
 */
#include "segment/segment.h"
#include "segment/shard.h"
#include "segment/free_list.h"
#include "guard/registry.h"
#include "guard/unmapped.h"
#include "heap/size_class.h"
#include "os/os.h"
#include "os/vg_quiet.h"
#include "stats/stats.h"

#include <string.h>

#if HAK_SECURE
/* Secure build: the header is followed by a guard, OS pages of no access up
 * one OS page of no access, then readable pages up to where slice 0's blocks
 * start (aligned to HAK_SEG_HDR_SIZE, as the aligned allocations expect):
 * with 4 KiB pages the header is one page, the guard takes 4-8 KiB and blocks
 * start at 16 KiB (8 KiB in the other builds). Where the pages are so big
 * that nothing of slice 0 would be left (64 KiB pages: header 0-64, guard
 * 64-128 KiB), slice 0 and the slices the guard covers are never free:
 * all_free lacks them. Computed once, at the first segment (a race between
 * two shards' first segments writes the same values). */
size_t hak_seg_slice0_start = HAK_SEG_HDR_SIZE;
uint32_t hak_seg_all_free = ALL_SLICES;
static size_t guard_from;

static void guard_geometry(void) {
  if (__atomic_load_n(&guard_from, __ATOMIC_ACQUIRE)) return;
  size_t ps = os_page_size();
  size_t from = align_up(sizeof(struct hak_segment), ps);
  /* Blocks start at least a word after the guard: C++'s delete[] reads the
   * array cookie 8 bytes before the pointer it is given, and delete[] of a
   * `new` object at the first block must reach the free's check (a report),
   * not fault in the guard. The readable gap is never written: no RSS. */
  size_t to = align_up(from + ps + 2 * sizeof(void *), HAK_SEG_HDR_SIZE);
  if (to >= HAK_SLICE_SIZE) { /* no room left in slice 0 */
    to = align_up(to, HAK_SLICE_SIZE);
    hak_seg_all_free = ALL_SLICES << (to >> HAK_SLICE_SHIFT);
  }
  hak_seg_slice0_start = to;
  __atomic_store_n(&guard_from, from, __ATOMIC_RELEASE); /* last: the others are set */
}
#endif

/* A new segment for shard `shard`, mapped and initialised with no lock held
 * (nothing else can reach it yet); segment_publish puts it on the shard's
 * list, under the lock. */
hak_segment_t *segment_map(unsigned shard, bool dense) {
  hak_segment_t *s = os_map_segment(dense);
  if (!s) return NULL;
  if (!slice_map_reserve(s, HAK_SEG_SIZE)) { /* out of address space: nothing of it stays */
    os_unmap(s, HAK_SEG_SIZE);
    return NULL;
  }
  HAK_VG_METADATA(s, sizeof *s);
  s->magic = HAK_SEG_MAGIC;
  s->kind = HAK_SEG_SMALL;
  memset(s->slice_cls, HAK_CLASS_NONE, sizeof s->slice_cls);
  s->map_size = HAK_SEG_SIZE;
#if HAK_SECURE
  guard_geometry();
  free_list_keys_init(s);
  /* hugetlb segments refuse (one 2 MiB page): they go without */
  os_guard((uint8_t *)s + guard_from, os_page_size(), true);
#endif
  s->free_mask = ALL_FREE;
  s->dirty_mask = s->whole_mask = 0;
  s->shard = (uint8_t)shard;
  s->dense = dense;
  slice_map_set(s, HAK_SLICES, HAK_CLASS_NONE + 1);
  HAK_STAT_INC(HAK_EV_SEGMENT_MAP);
  return s;
}

/* sh locked: a segment from segment_map joins its shard's books and list. */
void segment_publish(seg_shard_t *sh, hak_segment_t *s) {
  ADD(hak_seg_books.total, mask_bytes(ALL_FREE));
  STORE_ADD(sh->free_bytes, mask_bytes(ALL_FREE));
  seg_free_fold(sh);
  STORE_ADD(sh->free_slices, (unsigned)pop32(ALL_FREE));
  seg_rec_add(sh, s);
  seg_list_push(sh, s);
  ADD(hak_seg_books.empty, 1);
  if (s->dense) ADD(sh->dense_segs, 1);
}

_Atomic(unsigned) hak_abandoned_takers;

/* No abandoned-stack entry points into s and no taker is at work: nothing
 * can read its page records after it is gone. The entries are checked first:
 * a taker clears an entry's flag only after announcing itself. */
static bool seg_unmap_safe(hak_segment_t *s) {
  for (unsigned i = 0; i < HAK_SLICES; i++)
    if (atomic_load(&s->pages[i].alisted)) return false;
  return atomic_load(&hak_abandoned_takers) == 0;
}

/* sh locked: s leaves the books, the list and the slice map, and waits on
 * sh->doomed for the munmap that shard_unlock makes after the unlock. */
static void seg_unmap(seg_shard_t *sh, hak_segment_t *s) {
  seg_list_remove(sh, s);
  seg_rec_remove(sh, s);
  SUB(hak_seg_books.empty, 1);
  if (s->dense) SUB(sh->dense_segs, 1);
  seg_dirty_sub(sh, s, s->dirty_mask);
  STORE_SUB(sh->free_bytes, mask_bytes(ALL_FREE));
  seg_free_fold(sh);
  SUB(hak_seg_books.total, mask_bytes(ALL_FREE));
  STORE_SUB(sh->free_slices, (unsigned)pop32(ALL_FREE));
  slice_map_set(s, HAK_SLICES, 0);
  s->magic = 0;
  s->next = sh->doomed;
  sh->doomed = s;
}

/* No lock held: segments that seg_unmap detached go back to the OS. */
void seg_unmap_doomed(hak_segment_t *s) {
  for (hak_segment_t *next; s; s = next) {
    next = s->next;
    HAK_VG_METADATA_GONE(s, sizeof *s);
    unmapped_note(s, HAK_SEG_SIZE);
    os_unmap(s, HAK_SEG_SIZE);
    HAK_STAT_INC(HAK_EV_SEGMENT_UNMAP);
  }
}

void segment_unmap_fresh(hak_segment_t *s) {
  slice_map_set(s, HAK_SLICES, 0);
  s->magic = 0;
  s->next = NULL;
  seg_unmap_doomed(s);
}

bool seg_unmap_if_safe(seg_shard_t *sh, hak_segment_t *s) {
  if (!seg_unmap_safe(s)) return false;
  seg_unmap(sh, s);
  return true;
}

