/* test_borrow - a class with no free block, refilled BORROW_RUN times since
 * its last flush (a class the thread allocates and others free), takes
 * freed blocks of a larger class's pending list (the nearest one, up to twice
 * its size) before it grows (heap/thread.c, "Borrowing"):
 *   - borrow:  the 144 B class allocated without frees while the 160 B class
 *              has a pending list: a malloc hands out a block of that list
 *              (its usable size 160 B), after at least BORROW_RUN refills,
 *              and the class's own blocks all come from one page;
 *   - far:     the 512 B class borrows from the 1024 B class (8 classes
 *              above, twice its size) when no class in between has a pending
 *              list, and never from the 1152 B class (more than twice);
 *   - grow:    with no pending list in any class up to twice the size,
 *              mallocs get blocks of their own class, as before; so do
 *              those of the 1408 B class with a pending list 3 classes up
 *              (1792 B): above 1 KiB a lender is at most two classes up;
 *   - align:   a malloc takes any block of a lender (all lie at multiples of
 *              16 B), but an aligned request never takes a borrowed block
 *              (aligned_alloc takes a class whose size is a multiple of the
 *              alignment; only the class's own blocks are aligned so): for
 *              the 384 B class, whose lender's (416 B) pending list starts
 *              with a block not at a multiple of 128, aligned_alloc(128, 384)
 *              gets blocks of its own class, all aligned, and malloc(384)
 *              gets the lender's block.
 *   - lend:    after its first borrow (one block of the 64 B class's list of
 *              40), the 32 B class's next mallocs take the list's next
 *              blocks, one each, none into its cache; once a block of the
 *              class is back on its page (no longer dry), a malloc takes
 *              the class's own block again and the lender is forgotten.
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
#define KB 40 /* blocks on a long one (lend) */
#define N 2000 /* mallocs of the borrowing class, at most */
#define BORROW_RUN_MIN 4 /* thread.c: refills without a flush before a class borrows */

#if !HAK_SECURE
/* A pending list of class l, up to K blocks, from a page the thread carves
 * now (one block stays out, so that the page does not empty and retire; it
 * goes to *out); returns the list's length. */
static unsigned make_pending_n(hak_heap_t *h, unsigned l, void **out, unsigned want) {
    void *blk[KB + 1];
    unsigned n = heap_take(h, l, blk, want + 1, NULL, true);
    CHECK(n > 1, "%u blocks of %u B", n, hak_class_size[l]);
    *out = blk[--n];
    heap_return_blocks(h, blk, n);
    /* As a list not linked by this thread's last flushes: those heap_take
     * walks into the cache (test_pending, "hot"). */
    page_of(blk[0])->hot_n = 0;
    hak_pend_t *q = pend_of(&hak_tls, l);
    unsigned m = heap_take(h, l, blk, want, q, true);
    CHECK(m == 0 && q->head != NULL && q->n == n, "class of %u B: a refill with a pending list gave %u blocks, %u pending "
          "(not 0 and %u)", hak_class_size[l], m, q->n, n);
    return n;
}

static unsigned make_pending(hak_heap_t *h, unsigned l, void **out) { return make_pending_n(h, l, out, K); }

static bool class_untouched(hak_heap_t *h, unsigned c) {
    return h->avail[c].head == NULL && h->full[c].head == NULL && bin_count(&hak_tls, c) == 0 &&
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
        if (bin_count(&hak_tls, c) == 0) refills++;
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

    /* far: the nearest lender is 8 classes up */
    unsigned f = size_class_of(512), fl = size_class_of(1024), fx = size_class_of(1152);
    CHECK(hak_class_size[f] == 512 && hak_class_size[fl] == 1024 && hak_class_size[fx] == 1152,
          "classes of 512, 1024 and 1152 B expected");
    for (unsigned x = f; x <= fx; x++)
        CHECK(class_untouched(h, x), "the class of %u B was used before the test", hak_class_size[x]);
    make_pending(h, fx, &out2); /* more than twice 512 B: never a lender of the 512 B class */
    unsigned nf = 0;
    for (; nf < 300; nf++) {
        mine[nf] = malloc(512);
        CHECK(mine[nf] && page_of(mine[nf])->cls == f, "malloc(512) with only a 1152 B lender gave a block of class %u",
              mine[nf] ? page_of(mine[nf])->cls : 0);
    }
    void *out3;
    make_pending(h, fl, &out3);
    hak_pend_t *fq = pend_of(&hak_tls, fl);
    unsigned fn = fq->n, fgot = 0;
    for (; nf < N && !fgot; nf++) {
        mine[nf] = malloc(512);
        CHECK(mine[nf] != NULL, "malloc(512) failed");
        if (page_of(mine[nf])->cls != f) {
            CHECK(page_of(mine[nf])->cls == fl, "malloc(512) borrowed a block of class %u, not the 1024 B one",
                  page_of(mine[nf])->cls);
            fgot = nf;
        }
    }
    CHECK(fgot && fq->n < fn, "%u mallocs of 512 B never borrowed from the 1024 B class's pending list", nf);
    for (unsigned i = 0; i < nf; i++) free(mine[i]);
    heap_return_pending(h, fq);
    heap_return_pending(h, pend_of(&hak_tls, fx));

    /* grow: no lender */
    unsigned g = size_class_of(1300);
    for (unsigned x = g; x < HAK_NCLASSES && hak_class_size[x] <= 2 * hak_class_size[g]; x++)
        CHECK(class_untouched(h, x), "the class of %u B was used before the test", hak_class_size[x]);
    void *out5;
    make_pending(h, g + 3, &out5); /* above 1 KiB, a lender is at most two classes up */
    for (unsigned i = 0; i < 200; i++) {
        mine[i] = malloc(hak_class_size[g]);
        CHECK(mine[i] && page_of(mine[i])->cls == g, "malloc(%u) with no lender in reach gave a block of class %u, not %u",
              hak_class_size[g], mine[i] ? page_of(mine[i])->cls : 0, g);
    }
    for (unsigned i = 0; i < 200; i++) free(mine[i]);
    heap_return_pending(h, pend_of(&hak_tls, g + 3));
    heap_return_blocks(h, &out5, 1);

    /* align: the 384 B class, its lender's pending list headed by a block off a multiple of 128 */
    unsigned a = size_class_of(384);
    CHECK(hak_class_size[a] == 384 && hak_class_size[a + 1] == 416 && class_untouched(h, a) && class_untouched(h, a + 1),
          "the classes of 384 and 416 B were used before the test");
    void *out4;
    make_pending(h, a + 1, &out4);
    q = pend_of(&hak_tls, a + 1);
    void *held[K];
    unsigned nheld = 0;
    while (q->head && ((uintptr_t)q->head & 127) == 0) held[nheld++] = malloc(hak_class_size[a + 1]); /* pops the head */
    CHECK(q->head != NULL, "no block of %u B off a multiple of 128 on the pending list", hak_class_size[a + 1]);
    void *odd = q->head;
    static void *plain[N];
    unsigned na = 0, agot = 0;
    for (; na < N / 2 && !agot; na++) {
        mine[na] = aligned_alloc(128, 384);
        CHECK(mine[na] && page_of(mine[na])->cls == a && ((uintptr_t)mine[na] & 127) == 0,
              "aligned_alloc(128, 384) with a misaligned lender: block %p of class %u (not %u)", mine[na],
              mine[na] ? page_of(mine[na])->cls : 0, a);
        plain[na] = malloc(384);
        CHECK(plain[na] != NULL, "malloc(384) failed");
        if (plain[na] == odd) agot = na + 1;
        else CHECK(page_of(plain[na])->cls == a, "malloc(384) borrowed block %p of class %u, not the pending list's head %p",
                   plain[na], page_of(plain[na])->cls, odd);
    }
    CHECK(agot, "%u mallocs of 384 B never borrowed the misaligned block %p of the %u B class's pending list", na, odd,
          hak_class_size[a + 1]);
    void **ab = bin_slots(&hak_tls, a); /* a borrowing class caches no lender block */
    for (unsigned i = 0; i < bin_count(&hak_tls, a); i++)
        CHECK(page_of(ab[i])->cls == a, "the 384 B class's cache holds %p of class %u", ab[i],
              page_of(ab[i])->cls);
    for (unsigned i = 0; i < na; i++) free(mine[i]), free(plain[i]);
    for (unsigned i = 0; i < nheld; i++) free(held[i]);
    heap_return_pending(h, q);
    heap_return_blocks(h, &out1, 1);
    heap_return_blocks(h, &out2, 1);
    heap_return_blocks(h, &out3, 1);
    heap_return_blocks(h, &out4, 1);

    /* lend: after a borrow, the class's misses pop the lender's list one
     * block each (nothing cached, no refill) while the class stays dry */
    unsigned bc = size_class_of(32), bl = size_class_of(64);
    CHECK(hak_class_size[bc] == 32 && hak_class_size[bl] == 64 && bl == bc + 2, "classes of 32, 48 and 64 B expected");
    for (unsigned x = bc; x <= bl; x++)
        CHECK(class_untouched(h, x), "the class of %u B was used before the test", hak_class_size[x]);
    void *out6;
    unsigned bn = make_pending_n(h, bl, &out6, KB);
    CHECK(bn >= 8, "a pending list of only %u blocks of 64 B", bn);
    hak_pend_t *bq = pend_of(&hak_tls, bl), *cq = pend_of(&hak_tls, bc);
    unsigned nb = 0, bgot = 0;
    for (; nb < N && !bgot; nb++) {
        mine[nb] = malloc(32);
        CHECK(mine[nb] != NULL, "malloc(32) failed");
        if (page_of(mine[nb])->cls != bc) bgot = nb + 1;
    }
    CHECK(bgot, "%u mallocs of 32 B never borrowed from the 64 B class's pending list of %u", nb, bn);
    CHECK(bn - bq->n == 1 && bin_count(&hak_tls, bc) == 0 && cq->head == NULL && cq->lend == bl + 1,
          "the first borrow took %u of %u blocks (1 expected), cached %u (0), lender index %u (%u)", bn - bq->n, bn,
          bin_count(&hak_tls, bc), cq->lend, bl + 1);
    unsigned lent = 0;
    for (; lent < 6 && bq->head; lent++) {
        void *head = bq->head;
        mine[nb] = malloc(32);
        CHECK(mine[nb++] == head && bin_count(&hak_tls, bc) == 0,
              "malloc(32) after a borrow: %p (class %u), not the 64 B list's next block %p; 32 B cache %u", mine[nb - 1],
              mine[nb - 1] ? page_of(mine[nb - 1])->cls : 0, head, bin_count(&hak_tls, bc));
    }
    CHECK(bn - bq->n == lent + 1, "the 64 B list gave %u blocks for %u borrowing mallocs", bn - bq->n, lent + 1);
    /* A block of the class back on its page (class_wet): the next miss
     * stops popping the lender's list and refills from the class's page. */
    CHECK(page_of(mine[0])->cls == bc, "the first malloc(32) borrowed");
    heap_return_blocks(h, &mine[0], 1);
    unsigned bleft = bq->n;
    mine[0] = malloc(32);
    CHECK(mine[0] && page_of(mine[0])->cls == bc && bq->n == bleft && cq->lend == 0,
          "malloc(32) after a 32 B block came back: %p of class %u, 64 B list %u -> %u, lender index %u", mine[0],
          mine[0] ? page_of(mine[0])->cls : 0, bleft, bq->n, cq->lend);
    for (unsigned i = 0; i < nb; i++) free(mine[i]);
    heap_return_pending(h, bq);
    heap_return_blocks(h, &out6, 1);

    printf("test_borrow: lend: after the first borrow %u mallocs of 32 B took the 64 B list's next blocks, uncached; "
           "a 32 B block back on its page ended it\n", lent);
    printf("test_borrow: OK: after %u refills with nothing freed the %u B class took a block of the %u B class's pending "
           "list, on one page of its own; the 512 B class borrowed from the 1024 B class (never the 1152 B one); "
           "without a lender it cut pages as before; malloc(384) took a misaligned lender's block (round %u), "
           "aligned_alloc(128, 384) never\n", refills, hak_class_size[c], hak_class_size[l], agot);
    return 0;
#endif
}
