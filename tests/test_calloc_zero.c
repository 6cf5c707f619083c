/* test_calloc_zero - calloc does not write memory that is already zero.
 *
 * 100 x calloc(1 MiB) and 100 x calloc(256 KiB), one byte touched in each,
 * must add little resident memory (glibc adds about 1 MiB: the touched
 * pages): fresh memory from the OS reads zero and is not memset. On HAKMEM
 * (glibc reuses its heap there and adds 14 MiB) the same holds after the
 * blocks are freed and malloc_trim purged them. Callocs over memory that was
 * written and freed must read zero, whether it was reused at once or after
 * the purge delay (a purged cached mapping keeps its first page). */
#include "hak_test.h"

#include <malloc.h>
#include <time.h>

#define N 100
#define GROWTH_MAX ((size_t)16 << 20) /* of the 125 MiB asked for */

static void *blocks[N];

static long calloc_round(size_t size, const char *what)
{
    long before = (long)ht_rss_bytes();
    for (int i = 0; i < N; i++) {
        blocks[i] = calloc(1, size);
        CHECK(blocks[i] != NULL, "calloc(1, %zu) failed", size);
        ((volatile char *)blocks[i])[size / 2] = 1;
    }
    long grown = (long)ht_rss_bytes() - before;
    for (int i = 0; i < N; i++) {
        ((char *)blocks[i])[size / 2] = 0;
        size_t bad = ht_first_nonzero(blocks[i], size);
        CHECK(bad == (size_t)-1, "%s: calloc(1, %zu) block %d has a non-zero byte at %zu", what, size, i, bad);
    }
    printf("%s: %d x calloc(%zu KiB): RSS %+ld KiB\n", what, N, size >> 10, grown / 1024);
    return grown;
}

static void free_all(size_t size, int scribble)
{
    for (int i = 0; i < N; i++) {
        if (scribble)
            memset(blocks[i], 0xa5, size);
        free(blocks[i]);
    }
}

int main(void)
{
    hak_test_require_hakmem("test_calloc_zero");
    /* Smaller first: glibc serves both from fresh mappings in that order. */
    size_t sizes[2] = {(size_t)256 << 10, (size_t)1 << 20};
    const long limit = (long)GROWTH_MAX / 2;
    for (int k = 0; k < 2; k++) {
        size_t size = sizes[k];
        long g = calloc_round(size, "fresh");
        CHECK(g < limit, "calloc of fresh memory grew RSS by %ld KiB", g / 1024);
        free_all(size, 0);
        malloc_trim(0);
        g = calloc_round(size, "after free and malloc_trim");
        CHECK(g < limit || !hak_test_owns, "calloc of purged memory grew RSS by %ld KiB", g / 1024);
        free_all(size, 1);
        calloc_round(size, "over written and freed memory"); /* reads zero */
        free_all(size, 1);
        struct timespec idle = {0, 300 * 1000 * 1000}; /* past the purge delay */
        nanosleep(&idle, NULL);
        calloc_round(size, "over written, freed, idle"); /* reads zero */
        free_all(size, 0);
    }
    printf("test_calloc_zero: OK\n");
    return 0;
}
