/* test_stash_split - a large block the page stash has no run of its size
 * for (n..n+n/4 slices) takes the resident slices of a longer stashed run,
 * or of stashed runs that follow each other in a segment, before it cuts
 * untouched slices (large/page_stash.c, take_longer and take_merged).
 *
 * Before, such a block cut a fresh run while the stash held resident runs
 * that did not fit: a ring of 64 live blocks of 4 KiB-4 MiB, every page
 * written, kept 21 MB of runs in the stash for a peak of 13 MB of live
 * blocks of 256-960 KiB, and cut 26 MB of large runs in all.
 *
 * Linked with libhakmem.a (single-threaded, no background purger: the
 * stash keeps its runs for the purge delay).
 *  1. A 15-slice block, every OS page written, is freed (stashed). A
 *     5-slice block must take the start of its run (same address, every
 *     page resident); a 10-slice block then the rest of it (the split
 *     left it stashed). Before, both were cut fresh elsewhere.
 *  2. Both freed (two stashed runs, side by side): a 15-slice block must
 *     take the two joined (the first one's address, every page resident).
 *     Before, it was cut fresh.
 *  3. Four threads put blocks of 256-956 KiB, each written whole with its
 *     own byte, into shared slots and free the blocks they displace (often
 *     another thread's) after checking their bytes: splits and joins race
 *     with puts and takes (of 20,000 mallocs, 1,000-1,250 take stashed
 *     runs this way, with 500-625 splits and 460-560 joins, counted in a
 *     probe build). No block may read another's
 *     bytes, and at the end every stashed entry has its key's bit and the
 *     entries' bytes are the stash's count.
 */
#include "hak_test.h"
#include "hak_internal.h"
#include "large/page_stash.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>

#define PAGE 4096

/* A block of n slices: room left for the secure build's head and guard. */
static size_t slices(unsigned n) { return (size_t)n * HAK_SLICE_SIZE - 2 * PAGE; }

static void write_all(unsigned char *p, size_t size)
{
    for (size_t i = 0; i < size; i += PAGE) p[i] = 1;
    p[size - 1] = 1;
}

static size_t resident_pages(const unsigned char *p, size_t size)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)(PAGE - 1), e = ((uintptr_t)p + size + PAGE - 1) & ~(uintptr_t)(PAGE - 1);
    static unsigned char v[(16 * HAK_SLICE_SIZE) / PAGE + 2];
    size_t n = (e - a) / PAGE, r = 0;
    CHECK(n <= sizeof v, "range of %zu pages", n);
    CHECK(mincore((void *)a, e - a, v) == 0, "mincore: %s", strerror(errno));
    for (size_t i = 0; i < n; i++) r += v[i] & 1;
    return r;
}

static void check_warm(const unsigned char *p, size_t size, const char *what)
{
    size_t pages = ((((uintptr_t)p + size + PAGE - 1) & ~(uintptr_t)(PAGE - 1)) - ((uintptr_t)p & ~(uintptr_t)(PAGE - 1))) / PAGE;
    size_t r = resident_pages(p, size);
    CHECK(r == pages, "%s: %zu of its %zu pages resident: it was cut from untouched slices", what, r, pages);
}

#define THREADS 4
#define ITERS 5000
#define RING 48
static _Atomic(uintptr_t) ring[RING];
static _Atomic(int) bad;

typedef struct { size_t n; unsigned char v; } head_t;

static int intact(const unsigned char *p)
{
    const head_t *h = (const head_t *)p;
    for (size_t i = sizeof *h; i < h->n; i += 509)
        if (p[i] != h->v) return 0;
    return p[h->n - 1] == h->v;
}

static void *churn(void *arg)
{
    uint64_t r = (uintptr_t)arg * 0x9E3779B97F4A7C15ull + 1;
    for (int it = 0; it < ITERS && !atomic_load(&bad); it++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        size_t n = 256 * 1024 + (size_t)(r % (700 * 1024));
        unsigned char v = (unsigned char)(r >> 40) | 1, *p = malloc(n);
        if (!p) {
            atomic_store(&bad, 1);
            break;
        }
        memset(p, v, n);
        *(head_t *)p = (head_t){n, v};
        uintptr_t old = atomic_exchange(&ring[(r >> 20) % RING], (uintptr_t)p);
        if (old && !intact((unsigned char *)old)) atomic_store(&bad, 2);
        free((void *)old);
    }
    return NULL;
}

int main(void)
{
    hak_test_name = "test_stash_split";
    free(malloc(1)); /* the library is up */
    size_t s15 = slices(15), s5 = slices(5), s10 = slices(10);
    CHECK(s5 > 256 * 1024 && s15 <= (size_t)HAK_LARGE_MAX_SLICES * HAK_SLICE_SIZE, "sizes");
    unsigned char *a = malloc(s15);
    CHECK(a != NULL, "malloc(%zu)", s15);
    write_all(a, s15);
    /* Huge pages make every page of a run resident: nothing to tell. */
    unsigned char *probe = malloc(s15);
    CHECK(probe != NULL, "malloc(%zu)", s15);
    if (resident_pages(probe + HAK_SLICE_SIZE, PAGE)) {
        printf("test_stash_split: SKIP (the runs are backed by huge pages)\n");
        return 0;
    }
    free(a);

    /* 1. The start of the 15-slice run, then its rest. */
    unsigned char *b = malloc(s5);
    CHECK(b != NULL, "malloc(%zu)", s5);
    CHECK(b == a, "a 5-slice block at %p, not at the start of the stashed 15-slice run at %p", (void *)b, (void *)a);
    check_warm(b, s5, "the 5-slice block");
    unsigned char *c = malloc(s10);
    CHECK(c != NULL, "malloc(%zu)", s10);
    CHECK(c >= a + 5 * HAK_SLICE_SIZE && c < a + 6 * HAK_SLICE_SIZE,
          "a 10-slice block at %p, not in the rest of the split run (slice 5 of the run at %p)", (void *)c, (void *)a);
    check_warm(c, s10, "the 10-slice block");
    write_all(b, s5);
    write_all(c, s10);

    /* 2. The two runs, side by side in the stash, joined. */
    free(b);
    free(c);
    unsigned char *d = malloc(s15);
    CHECK(d != NULL, "malloc(%zu)", s15);
    CHECK(d == a, "a 15-slice block at %p, not in the two stashed runs joined (at %p)", (void *)d, (void *)a);
    check_warm(d, s15, "the 15-slice block");
    write_all(d, s15);
    free(d);
    free(probe);

    /* 3. Splits and joins racing. */
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, churn, (void *)(i + 1)) == 0, "pthread_create");
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    CHECK(atomic_load(&bad) != 1, "malloc failed");
    CHECK(atomic_load(&bad) == 0, "a block read bytes that were not its own: two blocks shared slices");
    for (int i = 0; i < RING; i++) {
        unsigned char *p = (unsigned char *)atomic_load(&ring[i]);
        if (p) CHECK(intact(p), "block %p: bytes not its own", (void *)p);
        free(p);
    }
    size_t bytes = 0, unseen = page_stash_unseen(&bytes);
    CHECK(unseen == 0, "%zu stashed entries without their key's bit", unseen);
    CHECK(bytes == page_stash_bytes(), "stashed entries hold %zu bytes, the stash counts %zu", bytes, page_stash_bytes());
    printf("test_stash_split: a stashed run split and two joined, every page resident; %d threads churned\n", THREADS);
    return 0;
}
