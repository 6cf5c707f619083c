/* remote.h — frees from threads that do not own the page, and pages whose
 * owner thread has exited. */
#ifndef HAK_REMOTE_H
#define HAK_REMOTE_H

#include "hak_internal.h"

#define HAK_REMOTE_QUEUED ((uintptr_t)1)

/* Push the chain first..last (n blocks, linked through their first word) onto
 * the page's remote list with one CAS; the pusher that sets the queued bit
 * also puts the page on its owner's remote-page stack. */
void remote_push(hak_page_t *page, void *first, void *last, unsigned n) HAK_HIDDEN;
/* Owner side: take the page's whole remote list, leaving the queued bit as
 * `keep_queued` says; returns the block count, the chain in *head..*tail. */
unsigned remote_take(hak_page_t *page, bool keep_queued, void **head, void **tail) HAK_HIDDEN;
/* Set the queued bit so no one signals the owner any more; true if it was
 * already set (a signal is on the owner's stack or on its way there). */
bool remote_fence(hak_page_t *page) HAK_HIDDEN;
/* No remote block pending and no signal in flight: the page may be retired. */
HAK_INLINE bool remote_idle(hak_page_t *page) {
  return atomic_load_explicit(&page->remote, memory_order_acquire) == 0;
}

void  abandon_page(hak_page_t *page) HAK_HIDDEN;
/* The oldest abandoned page of a class, off the list (the caller adopts it). */
hak_page_t *adopt_page(unsigned cls) HAK_HIDDEN;
/* Take this page off the abandoned list if it is still there. */
bool adopt_this_page(hak_page_t *page) HAK_HIDDEN;

/* Collect abandoned pages' remote frees; retire the empty ones. */
bool remote_collect_abandoned(void) HAK_HIDDEN;

void remote_atfork_prepare(void) HAK_HIDDEN;
void remote_atfork_parent(void) HAK_HIDDEN;
void remote_atfork_child(void) HAK_HIDDEN;

#endif
