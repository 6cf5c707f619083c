/* test_calloc_zero - calloc does not write memory that is already zero.
 *
 * 100 x calloc(1 MiB) and 100 x calloc(256 KiB), one byte touched in each,
 * must add little resident memory (glibc adds about 0.4 MiB: the touched
 * pages): fresh memory from the OS reads zero and is not memset. Then the
 * blocks are freed, and callocs of the same sizes after malloc_trim (which
 * purges) read zero and stay small as well; callocs over memory that was
 * written and freed without a purge in between must still read zero. */
#include "hak_test.h"

#include <malloc.h>

#define N 100
#define GROWTH_MAX ((size_t)16 << 20) /* of the 125 MiB asked for */

static void *blocks[N];

static size_t calloc_round(size_t size, const char *what)
{
    size_t before = ht_rss_bytes();
    for (int i = 0; i < N; i++) {
        blocks[i] = calloc(1, size);
        CHECK(blocks[i] != NULL, "calloc(1, %zu) failed", size);
        ((volatile char *)blocks[i])[size / 2] = 1;
    }
    size_t grown = ht_rss_bytes() - before;
    for (int i = 0; i < N; i++) {
        ((char *)blocks[i])[size / 2] = 0;
        size_t bad = ht_first_nonzero(blocks[i], size);
        CHECK(bad == (size_t)-1, "%s: calloc(1, %zu) block %d has a non-zero byte at %zu", what, size, i, bad);
    }
    printf("%s: %d x calloc(%zu KiB): RSS +%zu KiB\n", what, N, size >> 10, grown >> 10);
    return grown;
}

static void free_all(void)
{
    for (int i = 0; i < N; i++)
        free(blocks[i]);
}

int main(void)
{
    hak_test_require_hakmem("test_calloc_zero");
    size_t sizes[2] = {(size_t)1 << 20, (size_t)256 << 10};
    for (int k = 0; k < 2; k++) {
        size_t g = calloc_round(sizes[k], "fresh");
        CHECK(g < GROWTH_MAX / 2, "calloc of fresh memory grew RSS by %zu KiB", g >> 10);
        free_all();
        malloc_trim(0);
        g = calloc_round(sizes[k], "after free and malloc_trim");
        CHECK(g < GROWTH_MAX / 2, "calloc of purged memory grew RSS by %zu KiB", g >> 10);
        /* Dirty memory reused without a purge must be cleared. */
        for (int i = 0; i < N; i++)
            memset(blocks[i], 0xa5, sizes[k]);
        free_all();
        calloc_round(sizes[k], "over written and freed memory");
        free_all();
    }
    printf("test_calloc_zero: OK\n");
    return 0;
}
