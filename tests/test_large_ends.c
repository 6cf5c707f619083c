/* test_large_ends - a freed large block's run goes to a block whose end falls
 * where one of its blocks ended before (large/page_stash.c, `ends`).
 *
 * A large block is a run of slices written from its start; a program that
 * writes only a block's first and last bytes (bench_sizemix) touches the
 * run's first OS page and the page of the last byte. Each reuse of a run
 * by a block of another size put the last byte on a page nobody had
 * touched: a fault, and 4 KiB more resident, for about a third of
 * bench_sizemix's large mallocs. The stash now prefers, among the runs of
 * the right size, one a block has ended on that page of.
 *
 *  1. Eight blocks of five slices whose last bytes fall on eight different
 *     4 KiB pages are written at both ends and freed (into the stash). Then
 *     blocks of the same eight sizes, in another order, must each find their
 *     last byte's page resident (mincore) before they write it. Before, the
 *     stash handed out the first run of five slices it found, whatever its
 *     blocks' ends: 2 of 8 right.
 *  2. A block may start up to a page into its run, so that its last byte
 *     moves up to the next page (large.c, end_place). A seven-slice block is
 *     written at both ends and freed; a block whose last byte would fall 96
 *     bytes short of the page the first one ended on must start 96 bytes
 *     further in, its last byte on that resident page, its first still on
 *     the run's first page. Before, it started where the first did.
 *
 * Linked with libhakmem.a (single-threaded). Skipped when the kernel backs
 * the runs with huge pages (an untouched page is resident already).
 *
 * usage: test_large_ends   (run without the background purger)
 */
#include "hak_test.h"
#include "hak_internal.h"

#include <sys/mman.h>

#define N 8
#define PAGE 4096

static int resident(const void *p)
{
    unsigned char v = 0;
    void *pg = (void *)((uintptr_t)p & ~(uintptr_t)(PAGE - 1));
    CHECK(mincore(pg, PAGE, &v) == 0, "mincore: %s", strerror(errno));
    return v & 1;
}

int main(void)
{
    hak_test_name = "test_large_ends";
    free(malloc(1)); /* the library is up */
    size_t size[N];
    unsigned char *p[N];
    for (int i = 0; i < N; i++) {
        /* Five slices each (above 256 KiB, below five slices less a guard
         * page and a head), last bytes 4 KiB apart. */
        size[i] = 5 * HAK_SLICE_SIZE - 2 * PAGE - (size_t)i * PAGE - 100;
        CHECK(size[i] > 256 * 1024, "size %zu is not a large block", size[i]);
        p[i] = malloc(size[i]);
        CHECK(p[i] != NULL, "malloc(%zu)", size[i]);
        p[i][0] = 1;
        p[i][size[i] - 1] = 1;
    }
    /* Huge pages make every page of a run resident: nothing to tell. */
    if (resident(p[0] + size[0] / 2)) {
        printf("test_large_ends: SKIP (the runs are backed by huge pages)\n");
        return 0;
    }
    for (int i = 0; i < N; i++) free(p[i]);

    static const int order[N] = {3, 6, 0, 5, 2, 7, 1, 4};
    int hits = 0;
    unsigned char *q[N];
    for (int k = 0; k < N; k++) {
        int i = order[k];
        q[k] = malloc(size[i]);
        CHECK(q[k] != NULL, "malloc(%zu)", size[i]);
        int r = resident(q[k] + size[i] - 1);
        hits += r;
        q[k][0] = 2;
        q[k][size[i] - 1] = 2;
    }
    CHECK(hits == N,
          "%d of %d large blocks found their last byte's page resident: the stash handed their runs to blocks "
          "ending elsewhere",
          hits, N);
    for (int k = 0; k < N; k++) free(q[k]);
    printf("test_large_ends: %d of %d reused runs had the last byte's page resident\n", hits, N);

    /* 2. Seven slices: no run of part 1 (five) is a candidate. */
    size_t s1 = 7 * HAK_SLICE_SIZE - 2 * PAGE - 100;
    unsigned char *p1 = malloc(s1);
    CHECK(p1 != NULL, "malloc(%zu)", s1);
    p1[0] = 1;
    p1[s1 - 1] = 1;
    uintptr_t end_page = ((uintptr_t)p1 + s1 - 1) & ~(uintptr_t)(PAGE - 1);
    free(p1);
    /* Where a block of s2 from p1 would end: 96 bytes before end_page. */
    size_t s2 = (size_t)(end_page - 96 - (uintptr_t)p1) + 1;
    unsigned char *p2 = malloc(s2);
    CHECK(p2 != NULL, "malloc(%zu)", s2);
    CHECK(((uintptr_t)p2 & 15) == 0, "block %p not 16-byte aligned", (void *)p2);
    CHECK(((uintptr_t)p2 & ~(uintptr_t)(PAGE - 1)) == ((uintptr_t)p1 & ~(uintptr_t)(PAGE - 1)),
          "block %p does not start on the first page of the run at %p", (void *)p2, (void *)p1);
    CHECK(resident(p2 + s2 - 1),
          "a block of %zu bytes at %p (the run of a freed %zu-byte block at %p) ends on a page no block ended on: "
          "it could have started %zu bytes later and ended on the resident one",
          s2, (void *)p2, s1, (void *)p1, (size_t)96);
    p2[0] = 2;
    p2[s2 - 1] = 2;
    printf("test_large_ends: a %zu-byte block in a %zu-byte block's run starts %td bytes later, ending on its page\n",
           s2, s1, p2 - p1);
    free(p2);
    return 0;
}
