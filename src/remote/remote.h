/* remote.h — frees from threads that do not own the page, and pages whose
 * owner thread has exited. */
#ifndef HAK_REMOTE_H
#define HAK_REMOTE_H

#include "hak_internal.h"

/* Push the chain first..last (n blocks, linked through their first word) onto
 * the page's remote list with one CAS, then make sure the owner will look. */
void remote_push(hak_page_t *page, void *first, void *last, unsigned n) HAK_HIDDEN;
/* Owner side: take the page's whole remote list; returns its length, *out its head. */
unsigned remote_take(hak_page_t *page, void **out_head, void **out_tail) HAK_HIDDEN;
/* Stop a page from signalling its owner (waits out a signal in flight). */
void remote_fence(hak_page_t *page) HAK_HIDDEN;

void  abandon_page(hak_page_t *page) HAK_HIDDEN;
hak_page_t *adopt_page(unsigned cls) HAK_HIDDEN;

void remote_atfork_prepare(void) HAK_HIDDEN;
void remote_atfork_parent(void) HAK_HIDDEN;
void remote_atfork_child(void) HAK_HIDDEN;

#endif
