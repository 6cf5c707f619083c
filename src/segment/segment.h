/* segment.h — segments and the pages cut from them, in shards: a thread
 * takes its pages from its own shard's segments under that shard's lock (no
 * process-wide lock), and gives back pages of other shards through a
 * lock-free stack (protocol in segment.c). */
#ifndef HAK_SEGMENT_H
#define HAK_SEGMENT_H

#include "hak_internal.h"

/* A heap (thread or first-class) draws one of shards 1..63 for its life with
 * segment_shard_pick (round robin); a caller without a heap draws one per
 * call. Shard 0 is never drawn and holds no segment. */
#define HAK_SEG_SHARDS 64
unsigned segment_shard_pick(void) HAK_HIDDEN;
/* A heap of `shard` cut a page of class cls while holding a full one: its
 * pages of the class fill (HAKMEM_THP=dense's evidence of density). */
void segment_note_full(unsigned shard, unsigned cls) HAK_HIDDEN;

/* A page of `slices` slices for class cls (HAK_CLASS_NONE: one large block of
 * up to slices*64 KiB), from the shard's segments, else another shard's, else
 * a new segment of the shard. Returns NULL when the OS refuses memory. */
hak_page_t *segment_page_alloc(unsigned shard, unsigned slices, unsigned cls) HAK_HIDDEN;
/* The same; with may_map false, NULL rather than map a new segment. */
hak_page_t *segment_page_alloc_ex(unsigned shard, unsigned slices, unsigned cls, bool may_map) HAK_HIDDEN;
/* Take a page off the slice map (its slices read as free to free()) without
 * giving it back to its segment: it waits in a page cache. */
void segment_page_detach(hak_page_t *page) HAK_HIDDEN;
/* Reuse a detached page for class cls (HAK_CLASS_NONE: a large block). */
void segment_page_reinit(hak_page_t *page, unsigned cls) HAK_HIDDEN;
/* A large page (HAK_CLASS_NONE) set aside holding no block, its slices still
 * its own (the page stash): stale frees of its block are reported as for a
 * free slice. unpark: the same page again for a large block. A parked page
 * goes back to its segment through segment_page_free(_at) or
 * segment_pages_free, which detach it. */
void segment_page_park(hak_page_t *page) HAK_HIDDEN;
void segment_page_unpark(hak_page_t *page) HAK_HIDDEN;
/* Up to k pages of n slices for class cls under one acquisition of the
 * shard's lock, from its segments already mapped; returns how many. */
unsigned segment_pages_alloc(unsigned shard, unsigned slices, unsigned cls, hak_page_t **out, unsigned k) HAK_HIDDEN;
/* Pages linked through next back to their segments, by a thread of `shard`:
 * those of its shard under one acquisition of its lock (may purge or unmap),
 * the others onto their shards' returned stacks. */
void segment_pages_free(unsigned shard, hak_page_t *list) HAK_HIDDEN;
/* Pages of any shards, their memory purged now (a destroyed first-class
 * heap's pages), each back under its shard's lock. */
void segment_pages_free_purged(hak_page_t *list) HAK_HIDDEN;
/* A page back to its segment from any thread, without a lock: onto its
 * shard's returned stack, taken by the shard's next page allocation or the
 * purge deadline. */
void segment_page_free(hak_page_t *page) HAK_HIDDEN;
/* The same, its slices stamped as freed at coarse time `freed_ms` (the purge
 * delay counts from there). */
void segment_page_free_at(hak_page_t *page, uint32_t freed_ms) HAK_HIDDEN;
/* Purge free slices idle for min_age ms (the purge delay; 0: all); returns
 * when the next one is due (coarse ms), 0 if none is left. */
uint32_t segment_purge_aged(uint32_t now, uint32_t min_age, bool *any) HAK_HIDDEN;
/* Purge every free slice and unmap every empty segment; true if anything went back. */
bool segment_trim(void) HAK_HIDDEN;
/* Bytes in free slices of live segments (for mallinfo2). */
size_t segment_free_bytes(void) HAK_HIDDEN;
/* Of those, bytes still resident (freed but not yet purged). */
size_t segment_dirty_bytes(void) HAK_HIDDEN;

#if HAK_SECURE
/* Secure build: the last OS page of a large page's run of slices becomes a
 * guard (no access), unless it is one already. It stays after the page is
 * freed (in a page cache, or its slices back in their segment), for the
 * next large page that ends there, and goes when a page is cut over it
 * (large_run.c). */
void segment_large_guard(hak_page_t *page) HAK_HIDDEN;
#endif
/* Large page pg (live, held by the caller: its realloc) resized in place to
 * n slices: grown over the free slices right after its run, if they are
 * free in its segment (else false, nothing changed), or shrunk, the tail
 * going back to the segment. Its slice_count and end follow (the caller
 * sets bsize); secure build: the guard is at the new end. */
bool segment_large_resize(hak_page_t *pg, unsigned n) HAK_HIDDEN;
/* Parked large pages (segment_page_park) the caller holds, claimed from the
 * page stash (large/page_stash.c), no lock: pg cut to its first n slices,
 * the rest a parked page of its own (returned, its record at slice
 * first + n); and hi, whose run starts where lo's ends, joined to lo (hi's
 * record is then unused). The slice map reads "large" for all of them
 * either way; only slice_page and the records change. */
hak_page_t *segment_large_split(hak_page_t *pg, unsigned n) HAK_HIDDEN;
void segment_large_merge(hak_page_t *lo, hak_page_t *hi) HAK_HIDDEN;

/* Threads taking entries off the abandoned stacks (remote/remote.c): while
 * one is, it may read any page record it found there, so no segment is
 * unmapped (skipped, never waited for). */
extern _Atomic(unsigned) hak_abandoned_takers HAK_HIDDEN;

void segment_atfork_prepare(void) HAK_HIDDEN;
void segment_atfork_parent(void) HAK_HIDDEN;
void segment_atfork_child(void) HAK_HIDDEN;

#endif
