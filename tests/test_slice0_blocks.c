/* test_slice0_blocks - in slice 0 of a segment, the blocks of a one-slice
 * class lie at multiples of their size from the slice's start, as in every
 * other slice (segment/segment.c, page_init): the standard build's free
 * then tests a block start there with the fast path's few instructions
 * (guard/block_check.h) rather than the full test. Before, slice 0's page
 * started right after the 8 KiB header, at a multiple of the size only for
 * sizes dividing 8 KiB.
 *
 * Linked with libhakmem.a (the class sizes). For several sizes, blocks are
 * allocated until one lies in slice 0 of a segment (a new segment's slice 0
 * goes to the first one-slice page cut from it), then each block found
 * there is checked, written and freed (the fast build). The standard build
 * gives slice 0 to no page at all: there no block may lie in it. The secure
 * build keeps the header's layout in slice 0 (its guard follows the
 * header): skipped there.
 *
 * usage: test_slice0_blocks
 */
#include "hak_test.h"
#include "heap/canary.h"
#include "heap/size_class.h"

#define SEG ((uintptr_t)2 << 20)
#define SLICE ((uintptr_t)64 << 10)
#define MAXB 200000

int main(void)
{
    hak_test_name = "test_slice0_blocks";
#if HAK_SECURE
    printf("test_slice0_blocks: secure build: slice 0 keeps the header's layout (skipped)\n");
    return 0;
#elif HAK_CHECKS
    /* The standard build hands slice 0 to no page (segment/shard.h,
     * ALL_FREE): free()'s fast test has no header test, and a pointer into
     * a header must never find a class in the slice map. Blocks of several
     * sizes, 3 MiB of each (more than a segment): none in slice 0. */
    static void *keep[MAXB];
    static const size_t sizes[] = {16, 48, 100, 640, 3000, 5600};
    for (unsigned s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t bsize = hak_class_size[size_class_of(sizes[s])];
        size_t want = ((size_t)3 << 20) / bsize;
        if (want > MAXB) want = MAXB;
        uintptr_t segs[64];
        unsigned nseg = 0;
        for (unsigned n = 0; n < want; n++) {
            char *b = malloc(sizes[s]);
            CHECK(b != NULL, "malloc(%zu)", sizes[s]);
            keep[n] = b;
            uintptr_t off = (uintptr_t)b & (SEG - 1), seg = (uintptr_t)b - off;
            CHECK(off >= SLICE, "a %zu-byte block in slice 0 of its segment (offset %zu)", sizes[s], (size_t)off);
            unsigned i = 0;
            while (i < nseg && segs[i] != seg) i++;
            if (i == nseg && nseg < 64) segs[nseg++] = seg;
        }
        CHECK(nseg >= 2, "%zu blocks of %zu B in %u segment(s): want more than one", want, sizes[s], nseg);
        printf("test_slice0_blocks: %zu B (class %zu B): %zu blocks in %u segments, none in slice 0\n", sizes[s],
               bsize, want, nseg);
        for (unsigned i = 0; i < want; i++) free(keep[i]);
    }
    printf("test_slice0_blocks: OK\n");
    return 0;
#else
    static void *keep[MAXB];
    static const size_t sizes[] = {48, 100, 640, 3000, 5600};
    for (unsigned s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t bsize = hak_class_size[size_class_of(sizes[s])];
        unsigned n = 0, found = 0;
        while (n < MAXB && !found) {
            char *b = malloc(sizes[s]);
            CHECK(b != NULL, "malloc(%zu)", sizes[s]);
            keep[n++] = b;
            uintptr_t off = (uintptr_t)b & (SEG - 1);
            if (off < SLICE) {
                found++;
                CHECK(off >= 8192, "a %zu-byte block inside the segment header (offset %zu)", sizes[s], (size_t)off);
                CHECK(off % bsize == 0,
                      "a %zu-byte block (class %zu B) in slice 0 at offset %zu: not a multiple of the size", sizes[s],
                      bsize, (size_t)off);
                memset(b, 0x5a, sizes[s]);
            }
        }
        CHECK(found, "no %zu-byte block in slice 0 of a segment among %u", sizes[s], n);
        printf("test_slice0_blocks: %zu B (class %zu B): a block at a multiple of the size in slice 0 after %u blocks\n",
               sizes[s], bsize, n);
        for (unsigned i = 0; i < n; i++) free(keep[i]);
    }
    printf("test_slice0_blocks: OK\n");
    return 0;
#endif
}
