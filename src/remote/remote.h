/* remote.h — frees from threads that do not own the page, and pages whose
 * owner thread has exited. */
#ifndef HAK_REMOTE_H
#define HAK_REMOTE_H

#include "hak_internal.h"

/* The page's remote word (remote.c, opening comment): bit 0 "queued"; bits
 * 4-20 the offset of the list's first block in its segment, 0 for an empty
 * list (a segment opens with its header, never a block; blocks are 16-byte
 * aligned); bits 21-37 the offset of its last block, in 16-byte units (set
 * by the push onto an empty list, kept by the later ones, which push at the
 * head); bits 38-63 the number of blocks on the list. */
#define HAK_REMOTE_QUEUED ((uintptr_t)1)
#define HAK_REMOTE_OFF_MASK ((uintptr_t)HAK_SEG_MASK & ~(uintptr_t)15)
#define HAK_REMOTE_TAIL_SHIFT (HAK_SEG_SHIFT - 4)
#define HAK_REMOTE_TAIL_MASK (HAK_REMOTE_OFF_MASK << HAK_REMOTE_TAIL_SHIFT)
#define HAK_REMOTE_COUNT_SHIFT (2 * HAK_SEG_SHIFT - 4)
_Static_assert(64 - HAK_REMOTE_COUNT_SHIFT >= 20, "a page's block count fits above the offsets");

/* The word for a list of `count` blocks from `first` to `last` (queued bit clear). */
HAK_INLINE uintptr_t remote_word(const void *first, const void *last, uintptr_t count) {
  return ((uintptr_t)first & HAK_REMOTE_OFF_MASK) | ((uintptr_t)last & HAK_REMOTE_OFF_MASK) << HAK_REMOTE_TAIL_SHIFT |
         count << HAK_REMOTE_COUNT_SHIFT;
}
/* The first block of the list in word v of page's remote word, or NULL. */
HAK_INLINE void *remote_head(const hak_page_t *page, uintptr_t v) {
  uintptr_t off = v & HAK_REMOTE_OFF_MASK;
  return off ? (void *)((uintptr_t)segment_of(page) + off) : NULL;
}
/* Its last block (v's list not empty). */
HAK_INLINE void *remote_tail(const hak_page_t *page, uintptr_t v) {
  return (void *)((uintptr_t)segment_of(page) + ((v & HAK_REMOTE_TAIL_MASK) >> HAK_REMOTE_TAIL_SHIFT));
}
HAK_INLINE unsigned remote_count(uintptr_t v) { return (unsigned)(v >> HAK_REMOTE_COUNT_SHIFT); }
/* The word after pushing the chain first..last of n blocks onto the list of
 * word old (queued bit clear): the chain's last block becomes the list's
 * last only if the list was empty. */
HAK_INLINE uintptr_t remote_word_push(const hak_page_t *page, uintptr_t old, void *first, void *last, unsigned n) {
  return remote_word(first, (old & HAK_REMOTE_OFF_MASK) ? remote_tail(page, old) : last, remote_count(old) + (uintptr_t)n);
}

/* Push the chain first..last (n blocks, linked through their first word) onto
 * the page's remote list with one CAS; the pusher that sets the queued bit
 * also puts the page on its owner's remote-page stack. Counts nothing: the
 * callers count the blocks and batches (heap_return_blocks once a flush). */
void remote_push(hak_page_t *page, void *first, void *last, unsigned n) HAK_HIDDEN;
/* A test's hook inside remote_push, at each step where a preempted pusher
 * leaves the others a window (remote.c, opening comment): its chain linked
 * to the list it read, CAS not yet done (LINKED, every try); the queued bit
 * set by it, owner not yet read (QUEUED); owner h read, page not yet on h's
 * stack (OWNER); page on the stack, h's signal time not yet stamped
 * (SIGNALLED). Only in a test's own copy of remote.c built with
 * HAK_TEST_HOOKS (tests/sanitize/test_remote_stall.c, which defines the
 * hook); no build of the library has it. */
enum { HAK_PUSH_LINKED, HAK_PUSH_QUEUED, HAK_PUSH_OWNER, HAK_PUSH_SIGNALLED };
#ifdef HAK_TEST_HOOKS
void hak_test_push_step(hak_page_t *page, hak_heap_t *h, int step);
#define REMOTE_TEST_STEP(page, h, step) hak_test_push_step(page, h, step)
#else
#define REMOTE_TEST_STEP(page, h, step) ((void)0)
#endif
/* Owner side: take the page's whole remote list, leaving the queued bit as
 * `keep_queued` says, onto the page's local free list (used counts them
 * back); returns how many blocks came. */
unsigned remote_take(hak_page_t *page, bool keep_queued) HAK_HIDDEN;
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
