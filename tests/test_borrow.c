/* test_borrow - a class with no free block, refilled BORROW_RUN times since
 * its last flush (a class the thread allocates and others free), takes one
 * freed block of the next classes' pending lists before it grows
 * (heap/thread.c, "Borrowing"):
 *   - borrow:  the 144 B class allocated without frees while the 160 B class
 *              has a pending list: a malloc hands out a block of that list
 *              (its usable size 160 B), after at least BORROW_RUN refills,
 *              and the class's own blocks all come from one page;
 *   - grow:    with no pending list in the next two classes, mallocs get
 *              blocks of their own class, as before;
 *   - align:   a block is borrowed only if it is aligned as the class's own
 *              blocks are (aligned_alloc takes a class whose size is a
 *              multiple of the alignment): for the 1024 B class, whose next
 *              class's pending list starts with a block not at a multiple of
 *              1024, aligned_alloc(1024) and malloc(1000) get blocks of
 *              their own class, all aligned.
 * The secure build does not borrow (its blocks record their requested size
 * in their class's layout): the test says so and ends.
 * Linked with libhakmem.a, to build pending lists and to read pages.
 *
 * usage: test_borrow
 */
#include "hak_test.h"
#include "heap/heap.h"
#include "heap/size_class.h"
#include "segment/free_list.h"

#include <malloc.h>

#define K 8   /* blocks on a lender's pending list */
#define N 2000 /* mallocs of the borrowing class, at most */
#define BORROW_RUN_MIN 4 /* thread.c: refills without a flush before a class borrows */

#if !HAK_SECURE
/* A pending list of class l, up to K blocks, from a page the thread carves
 * now (one block stays out, so that the page does not empty and retire; it
 * goes to *out); returns the list's length. */
static unsigned make_pending(hak_heap_t *h, unsigned l, void **out) {
    void *blk[K + 1];
    unsigned n = heap_take(h, l, blk, K + 1, NULL, true);
    CHECK(n > 1, "%u blocks of %u B", n, hak_class_size[l]);
    *out = blk[--n];
    heap_return_blocks(h, blk, n);
    hak_pend_t *q = pend_of(&hak_tls, l);
    unsigned m = heap_take(h, l, blk, K, q, true);
    CHECK(m == 0 && q->head != NULL && q->n == n, "class of %u B: a refill with a pending list gave %u blocks, %u pending "
          "(not 0 and %u)", hak_class_size[l], m, q->n, n);
    return n;
}

static bool class_untouched(hak_heap_t *h, unsigned c) {
    return h->avail[c].head == NULL && h->full[c].head == NULL && bin_of(&hak_tls, c)->count == 0 &&
           pend_of(&hak_tls, c)->head == NULL;
}

#endif

int main(void) {
    hak_test_name = "test_borrow";
    free(malloc(16)); /* the thread's heap exists from here on */
    CHECK(hak_tls.state == HAK_THREAD_LIVE, "no thread heap");
#if HAK_SECURE
    printf("test_borrow: OK: the secure build does not borrow (nothing to check)\n");
    return 0;
#else
    hak_heap_t *h = hak_tls.heap;

    /* borrow: class c refills with nothing freed (a producer's class) */
    unsigned c = size_class_of(144), l = c + 1;
    CHECK(class_untouched(h, c) && class_untouched(h, l), "the classes of 144 and 160 B were used before the test");
    void *out1, *out2;
    unsigned n = make_pending(h, l, &out1);
    hak_pend_t *q = pend_of(&hak_tls, l);
    void *pending[K];
    unsigned np = 0;
    for (void *x = q->head; x && np < K; x = block_next(page_of(x), x)) pending[np++] = x;
    static void *mine[N];
    unsigned nmine = 0, got = N, refills = 0;
    for (unsigned i = 0; i < N && got == N; i++) {
        if (bin_of(&hak_tls, c)->count == 0) refills++;
        void *p = malloc(hak_class_size[c]);
        CHECK(p != NULL, "malloc(%u) failed", hak_class_size[c]);
        if (page_of(p)->cls == c) mine[nmine++] = p;
        else got = i;
        if (got == i) {
            unsigned j = 0;
            while (j < np && pending[j] != p) j++;
            CHECK(j < np, "malloc(%u) gave a block of class %u not on the pending list", hak_class_size[c], page_of(p)->cls);
            CHECK(malloc_usable_size(p) == hak_class_size[l], "usable size of the borrowed block %zu, not %u",
                  malloc_usable_size(p), hak_class_size[l]);
            memset(p, 0x5a, malloc_usable_size(p));
            free(p);
        }
    }
    CHECK(got < N, "%u mallocs of %u B (%u refills) with nothing freed never borrowed from the %u B class's pending list",
          N, hak_class_size[c], refills, hak_class_size[l]);
    CHECK(refills >= BORROW_RUN_MIN, "borrowed after %u refills", refills);
    CHECK(q->n < n, "the lender's pending list still has its %u blocks", q->n);
    hak_page_t *cp = page_of(mine[0]);
    for (unsigned i = 0; i < nmine; i++) CHECK(page_of(mine[i]) == cp, "a second page of the %u B class", hak_class_size[c]);
    for (unsigned i = 0; i < nmine; i++) free(mine[i]);

    /* grow: no lender */
    unsigned g = size_class_of(400);
    CHECK(class_untouched(h, g) && !pend_of(&hak_tls, g + 1)->head && !pend_of(&hak_tls, g + 2)->head,
          "the classes of 400 B and up were used before the test");
    for (unsigned i = 0; i < 200; i++) {
        mine[i] = malloc(hak_class_size[g]);
        CHECK(mine[i] && page_of(mine[i])->cls == g, "malloc(%u) with no lender gave a block of class %u, not %u",
              hak_class_size[g], mine[i] ? page_of(mine[i])->cls : 0, g);
    }
    for (unsigned i = 0; i < 200; i++) free(mine[i]);

    /* align */
    unsigned a = size_class_of(1024);
    CHECK(hak_class_size[a] == 1024 && class_untouched(h, a) && class_untouched(h, a + 1) && class_untouched(h, a + 2),
          "the classes of 1024 B and up were used before the test");
    make_pending(h, a + 1, &out2);
    q = pend_of(&hak_tls, a + 1);
    void *held[K];
    unsigned nheld = 0;
    while (q->head && ((uintptr_t)q->head & 1023) == 0) held[nheld++] = malloc(hak_class_size[a + 1]); /* pops the head */
    CHECK(q->head != NULL, "no block of %u B off a multiple of 1024 on the pending list", hak_class_size[a + 1]);
    for (unsigned i = 0; i < 200; i++) {
        mine[i] = i & 1 ? malloc(1000) : aligned_alloc(1024, 1024);
        CHECK(mine[i] && page_of(mine[i])->cls == a && ((uintptr_t)mine[i] & 1023) == 0,
              "with a misaligned lender, block %p of class %u (not %u)", mine[i], mine[i] ? page_of(mine[i])->cls : 0, a);
    }
    for (unsigned i = 0; i < 200; i++) free(mine[i]);
    for (unsigned i = 0; i < nheld; i++) free(held[i]);
    heap_return_blocks(h, &out1, 1);
    heap_return_blocks(h, &out2, 1);

    printf("test_borrow: OK: after %u refills with nothing freed the %u B class took a block of the %u B class's pending "
           "list, on one page of its own; without a lender it cut pages as before; a misaligned lender was left for the "
           "1024 B class\n", refills, hak_class_size[c], hak_class_size[l]);
    return 0;
#endif
}
