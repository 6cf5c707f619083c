/* test_calloc_zero - calloc does not write memory that is already zero.
 *
 * 100 x calloc(1 MiB) and 100 x calloc(256 KiB), one byte touched in each,
 * must add little resident memory (glibc adds about 1 MiB: the touched
 * pages): fresh memory from the OS reads zero and is not memset. On HAKMEM
 * (glibc reuses its heap there and adds 14 MiB) the same holds after the
 * blocks are freed and malloc_trim purged them. Callocs over memory that was
 * written and freed must read zero, whether it was reused at once or after
 * the purge delay (a purged cached mapping keeps its first page).
 *
 * Small classes: calloc zeroes blocks up to 128 bytes with 16-byte stores
 * rounded up to the request's last 16-byte word (front/zero.h). Every size up
 * to 1 KiB and each count/size split of it: a block written whole (its
 * usable size) and freed reads zero when calloc hands it out again, and the
 * blocks on either side, written whole, keep every byte. */
#include "hak_test.h"

#include <malloc.h>
#include <time.h>

#define RUN 8 /* blocks of one size, side by side on their page */

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

/* Blocks of n bytes: RUN of them written whole with 0x5a, the middle one
 * freed and calloc'd again as count x (n / count) (it comes back from the
 * thread's cache, where it went last), then each checked. */
static void small_round(size_t n, size_t count)
{
    unsigned char *run[RUN];
    size_t usable[RUN];
    for (int i = 0; i < RUN; i++) {
        run[i] = malloc(n);
        CHECK(run[i] != NULL, "malloc(%zu) failed", n);
        usable[i] = malloc_usable_size(run[i]);
        memset(run[i], 0x5a, usable[i]);
    }
    int mid = RUN / 2;
    free(run[mid]);
    size_t each = count ? n / count : 0;
    unsigned char *z = calloc(count, each);
    CHECK(z != NULL, "calloc(%zu, %zu) failed", count, each);
    size_t bad = ht_first_nonzero(z, count * each);
    CHECK(bad == (size_t)-1, "calloc(%zu, %zu) over a written block: non-zero byte at %zu", count, each, bad);
    for (int i = 0; i < RUN; i++) {
        if (i == mid)
            continue;
        for (size_t k = 0; k < usable[i]; k++)
            CHECK(run[i][k] == 0x5a, "calloc(%zu, %zu) wrote byte %zu of a neighbouring block of %zu bytes", count, each, k, n);
        free(run[i]);
    }
    memset(z, 0xa5, malloc_usable_size(z));
    free(z);
}

int main(void)
{
    hak_test_require_hakmem("test_calloc_zero");
    for (size_t n = 0; n <= 1024; n++) {
        small_round(n, 1);
        if (n % 3 == 0)
            small_round(n, 3);
    }
    small_round(0, 0);
    printf("small classes: every size to 1 KiB zeroed, neighbours intact\n");
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
