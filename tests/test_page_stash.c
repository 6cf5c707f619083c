/* test_page_stash - pages of the classes above 8 KiB (several slices each)
 * that the collector of another thread's refill empties go to the page
 * stash (large/page_stash.c) with their block boundaries, and that refill,
 * or the next one of the class by any thread, takes them from there instead
 * of cutting a page from a segment (whose slices may have held another class
 * or a large block: new boundaries, new OS pages touched).
 *
 * Linked with libhakmem.a, to read what the stash holds.
 *  1. Owner: thread A fills N blocks of a 20 KiB class (several pages) and
 *     frees them: its emptied pages go to its own page cache and their
 *     segments, not to the stash.
 *  2. Collector: A fills N blocks of a 24 KiB class, of which B has no
 *     page, and hands them to B, which frees them (remote frees into A's
 *     pages) while A waits without collecting. B's refill of that class
 *     collects A's frees before it would cut a page (heap_collect_peers):
 *     the pages that empty are stashed, and B's blocks lie in them.
 *  3. malloc_trim(0) empties the stash.
 *  4. Over budget, the oldest out: with a 1 MiB dirty budget (large pages:
 *     4 MiB), 24 large blocks of 320 KiB are freed one by one, 10 ms apart;
 *     the stash drains itself (a quarter below its bound at once), and the
 *     pages it keeps must be the last ones freed.
 * Before, the collector's pages went straight to their segments: the stash
 * held none of them.
 *
 * usage: test_page_stash
 */
#include "hak_test.h"
#include "hakmem.h"
#include "heap/canary.h"
#include "heap/heap.h"
#include "heap/size_class.h"
#include "large/page_stash.h"

#include <pthread.h>

#define N 64

static size_t size, size2; /* 20 KiB and 24 KiB classes: B has no page of the second */
static void *blk[N], *got[N];
static hak_page_t *pages[N];
static unsigned n_pages;
static pthread_barrier_t bar;

static void note_pages(void)
{
    n_pages = 0;
    for (int i = 0; i < N; i++) {
        hak_page_t *pg = page_of(blk[i]);
        unsigned k = 0;
        while (k < n_pages && pages[k] != pg) k++;
        if (k == n_pages) pages[n_pages++] = pg;
    }
}

/* How many of got[] lie in the pages noted. */
static unsigned in_old_pages(void)
{
    unsigned n = 0;
    for (int i = 0; i < N; i++)
        for (unsigned k = 0; k < n_pages; k++)
            if (page_of(got[i]) == pages[k]) {
                n++;
                break;
            }
    return n;
}

static void fill(size_t sz)
{
    for (int i = 0; i < N; i++) {
        blk[i] = malloc(sz);
        CHECK(blk[i] != NULL, "malloc(%zu)", sz);
        memset(blk[i], 0xa5, 64);
    }
    note_pages();
}

static void *thread_a(void *arg)
{
    (void)arg;
    fill(size); /* 1 */
    for (int i = 0; i < N; i++) free(blk[i]);
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar); /* B looked at the stash */
    fill(size2);                /* 2 */
    pthread_barrier_wait(&bar); /* B frees them */
    pthread_barrier_wait(&bar); /* B is done */
    return NULL;
}

static void *thread_b(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&bar);
    size_t stashed = page_stash_bytes();
    printf("test_page_stash: owner: A emptied %u pages, %zu KiB stashed\n", n_pages, stashed >> 10);
    CHECK(stashed == 0, "A's own emptied pages were stashed (%zu KiB)", stashed >> 10);
    unsigned in;
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar); /* A filled its blocks again */
    for (int i = 0; i < N; i++) free(blk[i]);
    /* Blocks B's cache still holds come first: take them out of the way. */
    void *mine[N];
    unsigned own = 0;
    hak_bin_t *b = bin_of(&hak_tls, size_class_of(size2));
    while (b->top && own < N) mine[own++] = malloc(size2);
    size_t before = page_stash_bytes();
    got[0] = malloc(size2); /* a refill with no page of the class: collects A's frees first */
    CHECK(got[0] != NULL, "malloc(%zu)", size2);
    size_t after = page_stash_bytes();
    for (int i = 1; i < N; i++) {
        got[i] = malloc(size2);
        CHECK(got[i] != NULL, "malloc(%zu)", size2);
    }
    in = in_old_pages();
    printf("test_page_stash: collector: %zu KiB stashed before B's refill, %zu KiB after; B's %d blocks: %u in "
           "A's pages\n",
           before >> 10, after >> 10, N, in);
    CHECK(after > before, "the pages B's collection emptied were not stashed (%zu KiB)", after >> 10);
    CHECK(in >= N / 2, "B's blocks are not in A's emptied pages (%u of %d)", in, N);
    for (int i = 0; i < N; i++) free(got[i]);
    for (unsigned i = 0; i < own; i++) free(mine[i]);
    pthread_barrier_wait(&bar);
    return NULL;
}

/* 4 */
#define NL 24
static void oldest_out(void)
{
    CHECK(hak_option_set("HAKMEM_DIRTY_MAX", 1 << 20) == 0, "setting the dirty budget");
    void *b[NL];
    hak_page_t *pg[NL];
    for (int i = 0; i < NL; i++) {
        b[i] = malloc(320 * 1024);
        CHECK(b[i] != NULL, "malloc");
        pg[i] = page_of(b[i]);
    }
    size_t page_bytes = (size_t)pg[0]->slice_count * HAK_SLICE_SIZE;
    for (int i = 0; i < NL; i++) {
        free(b[i]);
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    size_t left = page_stash_bytes();
    CHECK(left > 0 && left <= (size_t)4 << 20, "%zu KiB stashed, over the bound or none", left >> 10);
    unsigned kept = 0, newest = 0;
    void *again[NL];
    while (page_stash_bytes() && kept < NL) {
        again[kept] = malloc(320 * 1024);
        CHECK(again[kept] != NULL, "malloc");
        hak_page_t *p = page_of(again[kept++]);
        for (int i = 0; i < NL; i++)
            if (pg[i] == p) {
                if (i >= NL - (int)(left / page_bytes)) newest++;
                break;
            }
    }
    printf("test_page_stash: over budget: %zu KiB kept of %d pages freed, %u taken again, %u of them among the newest\n",
           left >> 10, NL, kept, newest);
    CHECK(kept > 0 && newest == kept, "the stash kept older pages (%u of %u among the newest)", newest, kept);
    for (unsigned i = 0; i < kept; i++) free(again[i]);
}

int main(void)
{
    hak_test_name = "test_page_stash";
    /* Nothing given back by age while the test looks. */
    CHECK(hak_option_set("HAKMEM_PURGE_DELAY_MS", 60000) == 0, "setting the purge delay");
    size = hak_class_size[size_class_of(20 * 1024)] - HAK_TAIL;
    size2 = hak_class_size[size_class_of(24 * 1024)] - HAK_TAIL;
    CHECK(class_slices(size_class_of(size)) > 1, "a 20 KiB class page spans one slice");
    CHECK(size_class_of(size2) != size_class_of(size), "one class for 20 and 24 KiB");
    pthread_barrier_init(&bar, NULL, 2);
    pthread_t a, b;
    CHECK(pthread_create(&a, NULL, thread_a, NULL) == 0, "pthread_create");
    CHECK(pthread_create(&b, NULL, thread_b, NULL) == 0, "pthread_create");
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    malloc_trim(0);
    CHECK(page_stash_bytes() == 0, "malloc_trim left %zu bytes in the stash", page_stash_bytes());
    oldest_out();
    printf("test_page_stash: OK\n");
    return 0;
}
