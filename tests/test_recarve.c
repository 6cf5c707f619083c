/* test_recarve - a page carved again (heap/carve.h, "Carving again"): a page
 * carved to its end whose blocks have all come back on its free list, here
 * through another thread's frees, is carved again from its start by the
 * next refill of its class, its list dropped unread, instead of going to the
 * thread as a pending list:
 *   - the refill's first block is the page's first block, and the blocks
 *     after it follow in address order, none from a pending list;
 *   - the page keeps no free list and counts exactly the blocks handed out;
 *   - a page with a block still out is not carved again: its freed blocks
 *     go out first (test_pending checks they still go pending).
 * Not in the secure build, whose carve shuffles the blocks of fresh pages
 * only. Linked with libhakmem.a, to reach the thread's pages.
 *
 * usage: test_recarve
 */
#include "hak_test.h"
#include "heap/heap.h"
#include "heap/size_class.h"

#include <pthread.h>

#define SIZE 64
#define N    4096 /* four pages of 64 B blocks: the middle ones carved to their end */

#if !HAK_SECURE
static void *blocks[N];

static void *free_all(void *arg) {
    (void)arg;
    for (unsigned i = 0; i < N; i++) free(blocks[i]);
    return NULL; /* flushed at exit: remote frees onto the main thread's pages */
}
#endif

int main(void) {
    hak_test_name = "test_recarve";
#if HAK_SECURE
    printf("test_recarve: OK: skipped (the secure build does not carve a page again)\n");
    return 0;
#else
    free(malloc(SIZE)); /* the thread's heap exists from here on */
    CHECK(hak_tls.state == HAK_THREAD_LIVE, "no thread heap");
    unsigned cls = size_class_of(SIZE);
    for (unsigned i = 0; i < N; i++) {
        blocks[i] = malloc(SIZE);
        CHECK(blocks[i] != NULL, "malloc(%d) failed", SIZE);
        memset(blocks[i], 0x5a, SIZE);
    }
    /* One block of a page carved to its end stays out: that page must not be
     * carved again. */
    hak_page_t *held_page = NULL;
    void *held = NULL;
    for (unsigned i = 0; i < N && !held_page; i++) {
        hak_page_t *p = page_of(blocks[i]);
        if (p->bump == p->end && p->capacity >= 256) {
            held_page = p;
            held = blocks[i];
            blocks[i] = malloc(SIZE); /* the thread frees another block instead */
        }
    }
    CHECK(held_page != NULL, "no page of %d B blocks carved to its end after %u mallocs", SIZE, N);
    heap_flush_all(&hak_tls); /* the cache's blocks back to their pages: the next malloc refills */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, free_all, NULL) == 0, "pthread_create");
    CHECK(pthread_join(t, NULL) == 0, "pthread_join");

    void *x = malloc(SIZE); /* collects the remote frees; a page empties and is carved again */
    hak_page_t *p = page_of(x);
    CHECK(p != held_page, "the page with a block out was carved again");
    CHECK(p->recarve && (uint8_t *)x == p->start, "the refill's first block is not the first of a page carved again "
          "(recarve %u, block at +%td)", p->recarve, (uint8_t *)x - p->start);
    CHECK(p->free == NULL, "the page carved again kept a free list");
    CHECK(pend_of(&hak_tls, cls)->head == NULL, "the refill left a pending list");
    unsigned cached = bin_count(&hak_tls, cls);
    CHECK(p->used == cached + 1, "the page counts %u blocks out, not %u (the cache's and x)", p->used, cached + 1);
    CHECK(p->bump == p->start + (size_t)(cached + 1) * p->bsize, "the page's bump is not past the blocks handed out");
    void *prev = x;
    for (unsigned i = 0; i < cached; i++) {
        void *y = malloc(SIZE);
        CHECK((uint8_t *)y == (uint8_t *)prev + p->bsize, "malloc %u after the refill: not the next block of the page "
              "carved again", i + 1);
        memset(y, 0x33, SIZE);
        prev = y;
    }
    /* Everything back: the page's blocks, and the held one. */
    for (uint8_t *b = p->start; b <= (uint8_t *)prev; b += p->bsize) free(b);
    free(held);
    malloc_trim(0);
    printf("test_recarve: OK: a page whose %u blocks all came back through another thread's frees was carved again "
           "from its start, in address order, its list dropped; a page with a block out was not\n",
           p->capacity);
    return 0;
#endif
}
