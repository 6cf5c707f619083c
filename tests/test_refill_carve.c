/* test_refill_carve - a refill takes a page's freed blocks before it carves
 * new ones (heap/heap.c, heap_take): while any block of the page is free, no
 * fresh block is carved (written, made resident). A carve hands out at most
 * 4 KiB of new blocks (8 KiB in classes of 256 B and more; at least 4),
 * however many the refill asks for.
 *
 * Linked with libhakmem.a, to call the refill (heap_take) and the flush
 * (heap_return_blocks) of the thread's own heap directly.  For several
 * classes: take blocks, give a few back to their page, refill for more than
 * the page has free (those, and in the secure build the extra blocks its
 * shuffled carve left there): the refill must hand out exactly the free
 * blocks, and the page's uncarved end must not move.  A second refill, with
 * nothing free, carves: at most max(4096 / size, 4) blocks (8192 / size
 * for blocks of 256 B and more).  And across
 * pages: while another page of the class has freed blocks, the current
 * page's uncarved end does not move (other_page_first).
 *
 * usage: test_refill_carve
 */
#include "hak_test.h"
#include "heap/heap.h"
#include "heap/size_class.h"
#include "segment/free_list.h"

#define TAKE 4
#define BACK 3
#define MORE 40 /* the second refill asks for more than the page has free */

/* Across pages too: while another page of the class has freed blocks, the
 * current page is not carved. The class's first page is carved to its end,
 * a second one begun, and all blocks of the first but one (so that it stays
 * in use) go back: a refill must take those and leave the second's
 * uncarved end where it was. */
#define OTHER_SIZE 512
#define OTHER_MAX  1024 /* more than a page of 512 B blocks */
static void other_page_first(hak_heap_t *h)
{
    unsigned cls = size_class_of(OTHER_SIZE);
    static void *held[OTHER_MAX];
    unsigned n = 0;
    hak_page_t *first = NULL, *second = NULL;
    while (!second) {
        CHECK(n < OTHER_MAX - 64, "%u blocks of %d B taken and still one page", n, OTHER_SIZE);
        unsigned k = heap_take(h, cls, held + n, 64, NULL, true);
        CHECK(k > 0, "refill of %d B blocks gave none", OTHER_SIZE);
        for (unsigned i = n; i < n + k; i++) {
            hak_page_t *p = page_of(held[i]);
            if (!first) first = p;
            else if (p != first && !second) second = p;
        }
        n += k;
    }
    CHECK(h->avail[cls].head == second && second->bump < second->end,
          "the second page is not the class's current, partly carved page");
    void *back[OTHER_MAX], *keep[OTHER_MAX];
    unsigned nback = 0, nkeep = 0, kept_one = 0;
    for (unsigned i = 0; i < n; i++) {
        if (page_of(held[i]) == first && kept_one++) back[nback++] = held[i];
        else keep[nkeep++] = held[i];
    }
    CHECK(nback > 4, "only %u blocks of the first page to give back", nback);
    heap_return_blocks(h, back, nback);
    uint8_t *bump = second->bump;
    void *spare[64]; /* the secure build's carve leaves extra blocks free on the page */
    unsigned nspare = 0;
    for (void *x = second->free; x && nspare < 64; x = block_next(second, x))
        spare[nspare++] = x;
    void *got[16];
    unsigned m = heap_take(h, cls, got, 16, NULL, true);
    CHECK(m > 0, "refill gave nothing");
    for (unsigned i = 0; i < m; i++) {
        unsigned j = 0;
        while (j < nspare && spare[j] != got[i])
            j++;
        CHECK(page_of(got[i]) == first || j < nspare, "with %u blocks free on another page, a refill gave a new "
              "block of the current page (carved %td bytes of it)", nback, second->bump - bump);
    }
    CHECK(second->bump == bump, "the refill carved %td bytes while another page had freed blocks",
          second->bump - bump);
    heap_return_blocks(h, got, m);
    for (unsigned i = 0; i < nkeep;) { /* one page's run at a time, like a flush */
        unsigned j = i + 1;
        while (j < nkeep && page_of(keep[j]) == page_of(keep[i]))
            j++;
        heap_return_blocks(h, keep + i, j - i);
        i = j;
    }
}

int main(void)
{
    hak_test_name = "test_refill_carve";
    free(malloc(16)); /* the thread's heap exists from here on */
    CHECK(hak_tls.state == HAK_THREAD_LIVE, "no thread heap");
    hak_heap_t *h = hak_tls.heap;
    static const size_t sizes[] = {48, 256, 1000, 3000};
    for (unsigned s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        unsigned cls = size_class_of(sizes[s]);
        void *a[TAKE], *b[MORE], *c[MORE];
        unsigned n = heap_take(h, cls, a, TAKE, NULL, true);
        CHECK(n == TAKE, "class of %zu B: the first refill gave %u blocks, not %u", sizes[s], n, TAKE);
        hak_page_t *p = page_of(a[TAKE - 1]);
        unsigned kept = 0; /* the blocks of a's last page go back, BACK of them */
        for (unsigned i = 0; i < TAKE && kept < BACK; i++)
            if (page_of(a[i]) == p) {
                void *t = a[kept];
                a[kept] = a[i];
                a[i] = t;
                kept++;
            }
        CHECK(kept == BACK, "class of %zu B: only %u blocks on one page", sizes[s], kept);
        heap_return_blocks(h, a, BACK);
        CHECK(h->avail[cls].head == p, "class of %zu B: the page is not the class's current page", sizes[s]);
        uint8_t *bump = p->bump;
        CHECK(bump < p->end, "class of %zu B: the page is carved to its end", sizes[s]);
        void *freed[MORE]; /* the page's free list: ours, and in the secure build carved extras */
        unsigned nfree = 0;
        for (void *x = p->free; x && nfree < MORE; x = block_next(p, x))
            freed[nfree++] = x;
        CHECK(nfree >= BACK && nfree < MORE, "class of %zu B: %u blocks free on the page", sizes[s], nfree);
        n = heap_take(h, cls, b, MORE, NULL, true);
        CHECK(n == nfree, "class of %zu B: with %u blocks free on the page a refill of %u gave %u (carved %td bytes)",
              sizes[s], nfree, MORE, n, p->bump - bump);
        CHECK(p->bump == bump, "class of %zu B: the refill carved %td bytes while freed blocks were there", sizes[s],
              p->bump - bump);
        for (unsigned i = 0; i < n; i++) {
            unsigned j = 0;
            while (j < nfree && freed[j] != b[i])
                j++;
            CHECK(j < nfree, "class of %zu B: the refill gave a block that was not free", sizes[s]);
        }
        unsigned m = heap_take(h, cls, c, MORE, NULL, true); /* nothing free now: carves */
        CHECK(m >= 1 && p->bump > bump, "class of %zu B: with nothing free the refill did not carve (%u blocks)",
              sizes[s], m);
        /* carve.h: CARVE_BYTES, CARVE_BYTES_BIG from CARVE_BIG_MIN, CARVE_MIN */
        size_t bsize = hak_class_size[cls], bytes = bsize >= 256 ? 8192 : 4096;
        size_t step = bytes / bsize > 4 ? bytes / bsize : 4;
        CHECK(m <= step && (size_t)(p->bump - bump) <= step * bsize,
              "class of %zu B: a refill for %u with nothing free carved %u blocks (%td bytes), more than %zu",
              sizes[s], MORE, m, p->bump - bump, step);
        heap_return_blocks(h, c, m);
        heap_return_blocks(h, b, n);
        heap_return_blocks(h, a + BACK, TAKE - BACK);
    }
    other_page_first(h);
    printf("test_refill_carve: OK: 4 classes; a refill for %u blocks with %u or more (fewer than %u) free on the "
           "page took those and carved nothing; with none free it carved at most 4 KiB (or 4 blocks); freed blocks of another page went before a carve\n",
           MORE, BACK, MORE);
    return 0;
}
