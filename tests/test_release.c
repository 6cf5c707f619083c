/* test_release - freed memory goes back to the OS.
 *
 * Rounds of: allocate ~256 MiB (small, mid and large blocks, written so they
 * are resident), free everything, and check resident memory falls back:
 *  (a) after malloc_trim(0): to at most the starting RSS + 24 MiB;
 *  (b) without malloc_trim, after 0.5 s of light allocation activity, one call
 *      of it per tick reaching a slow path (time for
 *      a purge policy to act): to at most the starting RSS + 64 MiB.
 * Both in the main thread and in a second thread (whose heap is its own).
 * glibc passes (a); it fails (b) - its fastbins and tcache pin the heap until
 * malloc_trim - so (b) is not a glibc rule but HAKMEM's own (SPEC, "what
 * works" 5: empty pages and segments go back to the OS on a policy): it is
 * checked only on HAKMEM, and just reported under HAKMEM_TEST_PLAIN=1.
 */
#include "hak_test.h"

#include <malloc.h>
#include <pthread.h>
#include <time.h>

#define MiB ((size_t)1024 * 1024)
#define NBLK 200000

static void *g_blk[NBLK];

static size_t fill_up(void)
{
    /* ~256 MiB: 150000 small (16..512 B, ~40 MiB), 45000 mid (1..8 KiB, ~200 MiB),
     * 40 large (256 KiB .. 1 MiB, ~25 MiB) */
    size_t total = 0;
    ht_rng r = { 42 };
    for (unsigned i = 0; i < NBLK; i++) {
        size_t n;
        if (i % 4 != 3)
            n = 16 + ht_below(&r, 497);
        else if (i % 5000 != 3)
            n = 1024 + ht_below(&r, 7 * 1024);
        else
            n = 256 * 1024 + ht_below(&r, 768 * 1024);
        g_blk[i] = malloc(n);
        CHECK(g_blk[i] != NULL, "malloc(%zu) failed", n);
        memset(g_blk[i], 0x3c, n);
        total += n;
    }
    return total;
}

static void free_all(void)
{
    /* in an interleaved order, so that nothing is freed in allocation order */
    for (unsigned i = 0; i < NBLK; i += 2)
        free(g_blk[i]);
    for (unsigned i = 1; i < NBLK; i += 2)
        free(g_blk[i]);
}

static void light_activity(double seconds)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        for (int i = 0; i < 100; i++) {
            void *p = malloc((size_t)(i % 10) * 100 + 16);
            CHECK(p != NULL, "malloc failed");
            free(p);
        }
        /* One call per tick that leaves the thread's cache: without a
         * background purger (HAKMEM_BACKGROUND_PURGE=0, the speed default)
         * HAKMEM runs its purge deadline on slow paths, and cache hits alone
         * never reach one. */
        void *big = malloc(512 * 1024); /* above the size classes (256 KiB): a large page */
        CHECK(big != NULL, "malloc failed");
        free(big);
        usleep(10000);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
}

static char g_report[512];

static void round_trip(const char *where)
{
    size_t base = ht_rss_bytes();
    size_t total = fill_up();
    size_t full = ht_rss_bytes();
    CHECK(full >= base + total / 2, "%s: RSS rose only from %.1f to %.1f MiB for %.1f MiB of written blocks",
          where, (double)base / MiB, (double)full / MiB, (double)total / MiB);
    /* (b) no trim: a purge policy must act by itself */
    free_all();
    light_activity(0.5);
    size_t untrimmed = ht_rss_bytes();
    CHECK(!hak_test_owns || untrimmed <= base + 64 * MiB,
          "%s: %.1f MiB written and freed; 0.5 s later resident memory is still %.1f MiB (started at %.1f): "
          "freed memory is not returned to the OS",
          where, (double)total / MiB, (double)untrimmed / MiB, (double)base / MiB);
    /* (a) the same again, with malloc_trim */
    fill_up();
    free_all();
    int r = malloc_trim(0);
    CHECK(r == 0 || r == 1, "malloc_trim(0) returned %d", r);
    size_t trimmed = ht_rss_bytes();
    CHECK(trimmed <= base + 24 * MiB,
          "%s: %.1f MiB written and freed; after malloc_trim(0) resident memory is still %.1f MiB (started "
          "at %.1f)",
          where, (double)total / MiB, (double)trimmed / MiB, (double)base / MiB);
    size_t len = strlen(g_report);
    snprintf(g_report + len, sizeof g_report - len, "%s%s: %.0f -> %.0f -> %.0f (no trim) / %.0f (trim) MiB",
             len ? "; " : "", where, (double)base / MiB, (double)full / MiB, (double)untrimmed / MiB,
             (double)trimmed / MiB);
}

static void *thread_round(void *arg)
{
    (void)arg;
    round_trip("second thread");
    return NULL;
}

int main(void)
{
    hak_test_require_hakmem("test_release");
    round_trip("main thread");
    pthread_t t;
    CHECK(pthread_create(&t, NULL, thread_round, NULL) == 0, "pthread_create failed");
    CHECK(pthread_join(t, NULL) == 0, "pthread_join failed");
    round_trip("main thread again");
    printf("test_release: OK: ~256 MiB allocated, written, freed; RSS %s%s\n", g_report,
           hak_test_owns ? "" : " [plain]");
    return 0;
}
