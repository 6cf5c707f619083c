/* test_whole_tier - which free slices a new class page is cut from
 * (segment/segment.c, page_alloc_locked). Free slices whose last page was
 * carved to its end count as resident whole, and a page of another class
 * may be cut there ahead of untouched slices: that is true only of blocks
 * no bigger than an OS page. A page of bigger blocks touches its OS pages
 * only at its blocks' edges (a program that writes a block's first and last
 * bytes, as bench_sizemix does): cut there, a page of small blocks faulted
 * most of its slice in anyway, and the big class, coming back, no longer
 * found its own block boundaries and cut untouched slices instead.
 *
 * Linked with libhakmem.a (it cuts and frees pages itself, single-threaded).
 *  1. A page of 20 KiB blocks (3 slices) carved to its end goes back to its
 *     segment; a page of 1 KiB blocks is cut next: it must not take the big
 *     page's slices. The big class's next page must start where the old one
 *     did (same block boundaries). Before, the 1 KiB page took the old first
 *     slice and the big class's page moved one slice up.
 *  2. A page of 900-byte blocks carved to its end goes back; a page of
 *     2000-byte blocks must be cut over it (its OS pages are all resident),
 *     not in an untouched slice.
 *
 * usage: test_whole_tier   (run without the background purger)
 */
#include "hak_test.h"
#include "heap/size_class.h"
#include "segment/segment.h"

static hak_page_t *cut(unsigned shard, unsigned cls, bool carved)
{
    hak_page_t *pg = segment_page_alloc(shard, class_slices(cls), cls);
    CHECK(pg != NULL, "no page of class %u", cls);
    if (carved) pg->bump = pg->end; /* every block carved once */
    return pg;
}

static void give_back(unsigned shard, hak_page_t *pg)
{
    pg->next = NULL;
    segment_pages_free(shard, pg);
}

int main(void)
{
    hak_test_name = "test_whole_tier";
    free(malloc(1));                       /* the library is up */
    /* A shard no heap draws. It has no segment: its pages are stolen from
     * the shard with free slices (the main heap's), and freed they go back
     * there through its returned stack, drained by the next cut. */
    unsigned shard = segment_shard_pick();

    unsigned big = size_class_of(20 * 1024), small = size_class_of(1024);
    CHECK(class_slices(big) > 1, "a 20 KiB class page spans one slice");
    hak_page_t *old = cut(shard, big, true);
    hak_segment_t *seg = segment_of(old);
    unsigned first = old->first_slice, n = old->slice_count;
    give_back(shard, old);

    hak_page_t *one = cut(shard, small, false);
    CHECK(segment_of(one) != seg || one->first_slice + 1 <= first || one->first_slice >= first + n,
          "a 1 KiB class page cut at slice %u, over the freed 20 KiB page's slices %u-%u (only its blocks' edges "
          "were touched)",
          one->first_slice, first, first + n - 1);
    hak_page_t *again = cut(shard, big, false);
    CHECK(segment_of(again) == seg && again->first_slice == first,
          "the 20 KiB class's next page starts at slice %u of %p, not where its freed page did (slice %u of %p)",
          again->first_slice, (void *)segment_of(again), first, (void *)seg);
    printf("test_whole_tier: 20 KiB class page back at slice %u, 1 KiB page at slice %u\n", first, one->first_slice);

    unsigned a = size_class_of(900), b = size_class_of(2000);
    CHECK(class_slices(a) == 1 && class_slices(b) == 1 && a != b && a != small, "classes of 900 and 2000 bytes");
    hak_page_t *p1 = cut(shard, a, true);
    hak_segment_t *s1 = segment_of(p1);
    unsigned f1 = p1->first_slice;
    give_back(shard, p1);
    hak_page_t *p2 = cut(shard, b, false);
    CHECK(segment_of(p2) == s1 && p2->first_slice == f1,
          "a 2000-byte class page cut at slice %u of %p, not over the freed whole page of 900-byte blocks "
          "(slice %u of %p)",
          p2->first_slice, (void *)segment_of(p2), f1, (void *)s1);
    printf("test_whole_tier: 2000-byte class page over the whole 900-byte one at slice %u\n", f1);

    give_back(shard, one);
    give_back(shard, again);
    give_back(shard, p2);
    printf("test_whole_tier: OK\n");
    return 0;
}
