/* collect.h — process-wide collection: remote frees waiting in heaps whose
 * owner does not come to collect them (protocol in collect.c). */
#ifndef HAK_COLLECT_H
#define HAK_COLLECT_H

#include "hak_internal.h"

enum {
  COLLECT_DUE = 0,  /* heaps whose frees have waited a purge delay (the deadline) */
  COLLECT_NOW = 1,  /* every heap whose owner is not on a slow path right now */
  COLLECT_FORCE = 2 /* every heap, waiting briefly for busy owners; abandoned pages too */
};

/* Collect the remote frees of heaps as `mode` says, retiring the pages that
 * become empty. Returns when heaps left waiting will be due (coarse ms), 0 if
 * none. Call with no allocator lock held. */
uint32_t heap_collect_idle(uint32_t now, int mode) HAK_HIDDEN;

/* Collect other heaps' waiting remote frees, each only if its lock is
 * free, and take a page of class cls one of them can spare (fenced, off
 * its lists: the caller adopts it), or NULL; the caller holds self's lock
 * (collect.c). `carve`: the caller is about to carve new blocks of a class
 * of one-slice pages (heap_page_give). */
hak_page_t *heap_collect_peers(hak_heap_t *self, unsigned cls, bool carve) HAK_HIDDEN;
/* A refill of self about to carve a class of one-slice pages: the page
 * heap_collect_peers takes for it, adopted and made the class's current
 * page, or NULL; self's lock held. */
hak_page_t *heap_peer_page_first(hak_heap_t *self, unsigned cls) HAK_HIDDEN;

/* remote_push: h's remote-page stack was empty and now holds a page. */
void collect_note_signal(hak_heap_t *h) HAK_HIDDEN;

void collect_atfork_prepare(void) HAK_HIDDEN;
void collect_atfork_parent(void) HAK_HIDDEN;
void collect_atfork_child(void) HAK_HIDDEN;

#endif
