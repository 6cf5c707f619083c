/* test_collect - frees that other threads made into an idle owner's pages
 * come back to the OS.
 *
 * main allocates 200 MiB of 64 B blocks and writes them; a worker thread
 * frees them all (remote frees into main's pages) and then waits. Resident
 * memory must fall back to within 30 MiB of the start:
 *   trim-worker  after malloc_trim(0) called by the worker (main is idle);
 *   trim-main    after malloc_trim(0) called by main (the worker is idle);
 *   collect      after hak_collect(true) called by the worker;
 *   idle         with no call at all: the background purger
 *                (HAKMEM_BACKGROUND_PURGE=1) must collect. Checked within one
 *                purge delay of the last free plus 2 s of slack: collecting
 *                3.3 million remote frees takes CPU time, and a loaded
 *                machine gives the purger little; the time taken is printed.
 *   reuse        the worker then allocates 200 MiB of 64 B blocks itself
 *                while main stays idle (no purge deadline meanwhile: a
 *                delay of 60 s): its refills must collect main's pages and
 *                cut their memory again, so RSS may rise by 30 MiB at most
 *                (it rose by 200 MiB when only the owner or the deadline
 *                collected: memory of a preempted or blocked owner).
 *   reuse-many   the same with 40 more idle threads, each with a heap of its
 *                own, made after main's: a refill visits a bounded number of
 *                other heaps per page it cuts, going on where it stopped, so
 *                main's heap (the oldest, last in the list) is still reached.
 *   partial      as reuse-many, but the worker frees all of main's blocks
 *                but every 256th, so that none of main's pages empties, and
 *                allocates as many as it freed: its refills must take main's
 *                pages with their freed blocks (a heap's spare pages go to a
 *                peer about to cut a page), so RSS may rise by 30 MiB at
 *                most (it rose by 200 MiB when the pages stayed with their
 *                idle owner, which alone could carve them).
 *   stress       4 threads allocate, write, hand blocks to each other through
 *                a shared table and check and free what they receive, while
 *                a fifth calls hak_collect(false) and malloc_trim(0) in a
 *                loop: collection of busy heaps, contents checked.
 * While it waits, main reads its RSS with raw system calls only, so it makes
 * no allocation (which would let it collect its own heap).
 * On glibc (HAKMEM_TEST_PLAIN=1) the figures are printed, not checked.
 */
#include "hak_test.h"

#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <time.h>

#define MiB ((size_t)1024 * 1024)
#define NBLK (200 * MiB / 64)
#define KEEP_EVERY 256

static void **g_blk;
static const char *g_mode;
static atomic_int g_phase; /* 1: worker may free; 2: worker freed (and trimmed); 3: worker may exit */
static unsigned g_delay_ms = 100;
static double g_freed_at;
static size_t g_reused_rss;

/* RSS from /proc/self/statm without allocating. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0) {
        ssize_t w = write(1, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
        (void)w;
    }
}

static void pause_ms(unsigned ms)
{
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static void *worker(void *arg)
{
    (void)arg;
    while (atomic_load(&g_phase) < 1)
        pause_ms(1);
    /* partial: every KEEP_EVERY-th block stays out, so main's pages keep one each */
    size_t keep = strcmp(g_mode, "partial") == 0 ? KEEP_EVERY : 0;
    for (size_t i = 0; i < NBLK; i++)
        if (!keep || i % keep)
            free(g_blk[i]);
    g_freed_at = ht_now_ms();
    if (keep || strncmp(g_mode, "reuse", 5) == 0) {
        for (size_t i = 0; i < NBLK; i++) {
            if (keep && i % keep == 0)
                continue;
            g_blk[i] = malloc(ht_hide(64));
            CHECK(g_blk[i] != NULL, "malloc(64) failed");
            memset(g_blk[i], (int)(i | 2), 64);
        }
        g_reused_rss = ht_rss_bytes_raw();
        for (size_t i = 0; i < NBLK; i++)
            if (!keep || i % keep)
                free(g_blk[i]);
    }
    if (strcmp(g_mode, "trim-worker") == 0)
        malloc_trim(0);
    if (strcmp(g_mode, "collect") == 0) {
        int (*collect)(_Bool) = (int (*)(_Bool))dlsym(RTLD_DEFAULT, "hak_collect");
        if (hak_test_owns)
            CHECK(collect != NULL, "hak_collect is not exported");
        if (collect)
            collect(1);
        else
            malloc_trim(0);
    }
    atomic_store(&g_phase, 2);
    while (atomic_load(&g_phase) < 3)
        pause_ms(1);
    return NULL;
}

/* ---- stress ---------------------------------------------------------------- */

#define NSLOT 4096
static _Atomic(uint64_t *) g_slot[NSLOT];
static atomic_int g_stop;
static atomic_ulong g_checked;

static void *stress_worker(void *arg)
{
    ht_rng r = { (uint64_t)(uintptr_t)arg * 7919 + 1 };
    unsigned long checked = 0;
    while (!atomic_load(&g_stop)) {
        for (int k = 0; k < 1000; k++) {
            size_t n = 16 + ht_below(&r, 2000);
            uint64_t *p = malloc(n);
            CHECK(p != NULL, "malloc(%zu) failed", n);
            p[0] = n;
            p[1] = ht_mix64((uint64_t)(uintptr_t)p ^ n);
            uint64_t *old = atomic_exchange(&g_slot[ht_below(&r, NSLOT)], p);
            if (old) {
                CHECK(old[1] == ht_mix64((uint64_t)(uintptr_t)old ^ old[0]), "block %p corrupted", (void *)old);
                free(old);
                checked++;
            }
        }
    }
    atomic_fetch_add(&g_checked, checked);
    return NULL;
}

static void *stress_collector(void *arg)
{
    (void)arg;
    int (*collect)(_Bool) = (int (*)(_Bool))dlsym(RTLD_DEFAULT, "hak_collect");
    unsigned calls = 0;
    while (!atomic_load(&g_stop)) {
        if (collect && (calls & 1))
            collect(0);
        else
            malloc_trim(0);
        calls++;
        pause_ms(1);
    }
    return (void *)(uintptr_t)calls;
}

static int run_stress(void)
{
    pthread_t w[4], c;
    for (int i = 0; i < 4; i++)
        CHECK(pthread_create(&w[i], NULL, stress_worker, (void *)(uintptr_t)(i + 1)) == 0, "pthread_create");
    CHECK(pthread_create(&c, NULL, stress_collector, NULL) == 0, "pthread_create");
    pause_ms(1500);
    atomic_store(&g_stop, 1);
    for (int i = 0; i < 4; i++)
        pthread_join(w[i], NULL);
    void *calls;
    pthread_join(c, &calls);
    for (int i = 0; i < NSLOT; i++)
        free(atomic_load(&g_slot[i]));
    say("test_collect: OK (stress): %lu blocks checked after a cross-thread handoff, %lu collections meanwhile\n",
        (unsigned long)atomic_load(&g_checked), (unsigned long)(uintptr_t)calls);
    return 0;
}

#define IDLE_THREADS 40
static void *idle_thread(void *arg)
{
    (void)arg;
    free(malloc(ht_hide(16))); /* a heap of its own */
    while (atomic_load(&g_phase) < 3)
        pause_ms(5);
    return NULL;
}

int main(int argc, char **argv)
{
    hak_test_require_hakmem("test_collect");
    CHECK(argc == 2, "usage: test_collect trim-worker|trim-main|collect|idle|reuse|reuse-many|partial|stress");
    g_mode = argv[1];
    if (strcmp(g_mode, "stress") == 0)
        return run_stress();
    int idle = strcmp(g_mode, "idle") == 0;
    int partial = strcmp(g_mode, "partial") == 0;
    int many = partial || strcmp(g_mode, "reuse-many") == 0;
    int reuse = many || strcmp(g_mode, "reuse") == 0;
    CHECK(idle || reuse || !strcmp(g_mode, "trim-worker") || !strcmp(g_mode, "trim-main") || !strcmp(g_mode, "collect"),
          "unknown mode %s", g_mode);
    const char *d = getenv("HAKMEM_PURGE_DELAY_MS");
    if (d && *d)
        g_delay_ms = (unsigned)atoi(d);
    g_blk = mmap(NULL, NBLK * sizeof(void *), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(g_blk != MAP_FAILED, "mmap of the pointer array");
    memset(g_blk, 0, NBLK * sizeof(void *));
    pthread_t t;
    CHECK(pthread_create(&t, NULL, worker, NULL) == 0, "pthread_create");
    pthread_t idle_t[IDLE_THREADS];
    for (int i = 0; many && i < IDLE_THREADS; i++)
        CHECK(pthread_create(&idle_t[i], NULL, idle_thread, NULL) == 0, "pthread_create");
    pause_ms(20);

    size_t base = ht_rss_bytes_raw();
    for (size_t i = 0; i < NBLK; i++) {
        g_blk[i] = malloc(ht_hide(64));
        CHECK(g_blk[i] != NULL, "malloc(64) failed");
        memset(g_blk[i], (int)(i | 1), 64);
    }
    size_t full = ht_rss_bytes_raw();
    CHECK(full >= base + 150 * MiB, "RSS rose only from %.1f to %.1f MiB", (double)base / MiB, (double)full / MiB);
    atomic_store(&g_phase, 1);
    while (atomic_load(&g_phase) < 2)
        pause_ms(1);
    if (strcmp(g_mode, "trim-main") == 0)
        malloc_trim(0);
    if (reuse) {
        say("test_collect: %s: RSS %.1f -> %.1f MiB (main's blocks), %.1f MiB with the worker's as many\n",
            g_mode, (double)base / MiB, (double)full / MiB, (double)g_reused_rss / MiB);
        CHECK(!hak_test_owns || g_reused_rss <= full + 30 * MiB,
              "reuse: the worker's blocks added %.1f MiB; allowed 30 MiB", (double)(g_reused_rss - full) / MiB);
        atomic_store(&g_phase, 3);
        CHECK(pthread_join(t, NULL) == 0, "pthread_join");
        for (int i = 0; many && i < IDLE_THREADS; i++)
            CHECK(pthread_join(idle_t[i], NULL) == 0, "pthread_join");
        for (size_t i = 0; partial && i < NBLK; i += KEEP_EVERY)
            free(g_blk[i]);
        say("test_collect: OK (%s)%s\n", g_mode, hak_test_owns ? "" : " [plain]");
        return 0;
    }

    size_t limit = base + 30 * MiB, rss = ht_rss_bytes_raw();
    double waited = 0;
    if (idle) {
        double deadline = g_delay_ms + 2000.0;
        while ((rss = ht_rss_bytes_raw()) > limit && (waited = ht_now_ms() - g_freed_at) < deadline)
            pause_ms(5);
        waited = ht_now_ms() - g_freed_at;
    }
    say("test_collect: %s: RSS %.1f -> %.1f -> %.1f MiB%s (%.0f ms after the last free; purge delay %u ms)\n",
        g_mode, (double)base / MiB, (double)full / MiB, (double)rss / MiB,
        idle ? " with no call" : " after the call", waited, g_delay_ms);
    CHECK(!hak_test_owns || rss <= limit,
          "%s: RSS %.1f MiB is %.1f MiB above the start (%.1f MiB); allowed 30 MiB", g_mode, (double)rss / MiB,
          (double)(rss - base) / MiB, (double)base / MiB);
    atomic_store(&g_phase, 3);
    CHECK(pthread_join(t, NULL) == 0, "pthread_join");
    say("test_collect: OK (%s)%s\n", g_mode, hak_test_owns ? "" : " [plain]");
    return 0;
}
