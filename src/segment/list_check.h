/* list_check.h — HAKMEM_DEBUG_LISTS: integrity checks of the block lists
 * (segment/free_list.h: a page's local free list, its remote list, a
 * thread's pending list, the free lists of first-class heaps' pages), for
 * debugging
 * the concurrency of the cold paths.
 *
 * Built with -DHAKMEM_DEBUG_LISTS=ON (HAK_DEBUG_LISTS=1; on by default in
 * the UBSan build, `make test-ubsan`), every pop, push and splice of those
 * lists checks the blocks it links: each must lie on the list's own page,
 * carved already, at a block start of the page's class (a multiple of the
 * block size from the page's first block); and a list taken or handed on
 * whole (remote_take, page_detach, heap_return_pending, the retirement of
 * an empty page) is walked: its length must match the page's bookkeeping
 * (the remote word's count, carved - used, the pending count), its last
 * block the tail recorded (remote word, page->free_tail, pend_tail). A
 * failure prints one line, "hakmem: debug lists: <list>: <problem>: page
 * <page> class <cls> (<size> B, used <n> of <capacity>) block <block> ...",
 * and aborts. This is
 * how 38e0453's race (a page's free list written by two heaps at once: a
 * live block's header read as a link, blocks lost, a count off at detach)
 * was found, with temporary checks of this kind.
 *
 * Off (the default: standard, fast and secure builds), the macros expand to
 * nothing and the library compiles to the same code as without them. On,
 * the walks cost a pass over every list taken: for debug builds only. */
#ifndef HAK_LIST_CHECK_H
#define HAK_LIST_CHECK_H

#include "hak_internal.h"

#ifndef HAK_DEBUG_LISTS
#define HAK_DEBUG_LISTS 0
#endif

#if HAK_DEBUG_LISTS
/* b (not NULL) must be a carved block start of pg. */
void list_check_block(const char *list, const hak_page_t *pg, const void *b) HAK_HIDDEN;
/* The chain from head (NULL: empty) must hold n blocks of pg (LIST_ANY: any
 * number up to the page's capacity), tail its last one unless tail is NULL;
 * ends: its last link is NULL (a whole list), else the walk stops at the
 * n-th block (a chain about to be linked onto a list). */
void list_check_chain(const char *list, const hak_page_t *pg, const void *head, unsigned n,
                      const void *tail, bool ends) HAK_HIDDEN;
/* pg's local free list: carved - used blocks (the secure build's guard
 * block aside), ending at pg->free_tail. */
void list_check_page(const char *list, const hak_page_t *pg) HAK_HIDDEN;
/* Report and abort; fmt (printf, may be NULL) adds details to the line. */
_Noreturn void list_check_fail(const char *list, const char *problem, const hak_page_t *pg, const void *b,
                               const char *fmt, ...) HAK_HIDDEN HAK_COLD __attribute__((format(printf, 5, 6)));
#define LIST_ANY (~0u)
#define LIST_CHECK_BLOCK(list, pg, b) list_check_block((list), (pg), (b))
#define LIST_CHECK_NEXT(list, pg, b) do { if (b) list_check_block((list), (pg), (b)); } while (0)
#define LIST_CHECK_CHAIN(list, pg, head, n, tail, ends) list_check_chain((list), (pg), (head), (n), (tail), (ends))
#define LIST_CHECK_PAGE(list, pg) list_check_page((list), (pg))
#define LIST_CHECK(cond, list, problem, pg, b) \
  do { if (!(cond)) list_check_fail((list), (problem), (pg), (b), NULL); } while (0)
#else
#define LIST_CHECK_BLOCK(list, pg, b) ((void)0)
#define LIST_CHECK_NEXT(list, pg, b) ((void)0)
#define LIST_CHECK_CHAIN(list, pg, head, n, tail, ends) ((void)0)
#define LIST_CHECK_PAGE(list, pg) ((void)0)
#define LIST_CHECK(cond, list, problem, pg, b) ((void)0)
#endif

#endif
