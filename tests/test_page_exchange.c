/* test_page_exchange - the lock-free page cache and exchange (segment/
 * page_cache.c) under stress: empty pages and freed large blocks passed
 * between threads without the segment lock.
 *
 * usage: test_page_exchange [THREADS [GENERATIONS [OPS [SEED]]]]
 *        (defaults 8 12 2000 7)
 *
 * THREADS workers (more than the cores: takers and pushers get preempted
 * mid-protocol) allocate class blocks of 1..32 KiB and large blocks of
 * 33 KiB..600 KiB, fill their head and tail with a pattern keyed by a header {key, size},
 * and swap them through a shared mailbox table: the block taken out, most
 * often another thread's, is checked and freed, so pages empty in one thread
 * and are reused by another. Workers exit after OPS operations and are
 * replaced (their page caches go to the exchange) for GENERATIONS rounds;
 * meanwhile main calls malloc_trim(0) (which drains the exchange while others
 * push and take) and forks children that allocate, check and trim at once
 * (the exchange must be consistent in a child whatever the parent's threads
 * were doing). A corrupted stack shows as a block handed out twice (pattern
 * overwritten), a crash, or a child that hangs (watchdog).
 */
#include "hak_test.h"

#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

#define SLOTS 512
#define RING 16

static _Atomic(unsigned char *) mailbox[SLOTS];
static unsigned ops_per_thread = 2000;
static uint64_t seed = 7;
static atomic_ulong checked;

static size_t pick_size(ht_rng *r)
{
    uint64_t k = ht_below(r, 10);
    if (k < 4) return 1024 + (size_t)ht_below(r, 31 * 1024);     /* class pages */
    if (k < 9) return 33 * 1024 + (size_t)ht_below(r, 160 * 1024); /* large, 1-3 slices */
    return 200 * 1024 + (size_t)ht_below(r, 400 * 1024);          /* large, up to 10 slices */
}

static unsigned char *make(ht_rng *r)
{
    size_t n = pick_size(r);
    unsigned char *p = malloc(n);
    CHECK(p != NULL, "malloc(%zu)", n);
    /* head and tail: enough to see a block handed out twice, and cheap to write */
    ht_keyed_stamp(p, n, ht_next(r) | 1, 512, 256);
    return p;
}

static void check_free(unsigned char *p)
{
    ht_keyed_check_free(p, 1024, 600 * 1024, 512, 256);
    atomic_fetch_add_explicit(&checked, 1, memory_order_relaxed);
}

static void *worker(void *arg)
{
    ht_rng r = {seed ^ ht_mix64((uintptr_t)arg)};
    unsigned char *ring[RING] = {0};
    for (unsigned i = 0; i < ops_per_thread; i++) {
        unsigned char *p = make(&r);
        if (ht_below(&r, 4) == 0) { /* a few stay local: freed by their owner */
            unsigned k = (unsigned)ht_below(&r, RING);
            if (ring[k]) check_free(ring[k]);
            ring[k] = p;
            continue;
        }
        unsigned char *old = atomic_exchange(&mailbox[ht_below(&r, SLOTS)], p);
        if (old) check_free(old);
    }
    for (unsigned k = 0; k < RING; k++)
        if (ring[k]) check_free(ring[k]);
    return NULL;
}

static void child_work(void)
{
    ht_child_rounds(seed * 31, make, check_free, 64, 20, 0);
}

int main(int argc, char **argv)
{
    hak_test_name = "test_page_exchange";
    hak_test_require_hakmem(hak_test_name);
    unsigned threads = argc > 1 ? (unsigned)atoi(argv[1]) : 8;
    unsigned gens = argc > 2 ? (unsigned)atoi(argv[2]) : 12;
    if (argc > 3) ops_per_thread = (unsigned)atoi(argv[3]);
    if (argc > 4) seed = strtoull(argv[4], NULL, 10);
    CHECK(threads >= 1 && threads <= 64, "THREADS in 1..64");

    pthread_t *t = calloc(threads, sizeof *t);
    unsigned forks = 0, trims = 0;
    uintptr_t id = 1;
    for (unsigned i = 0; i < threads; i++)
        CHECK(pthread_create(&t[i], NULL, worker, (void *)id++) == 0, "pthread_create");
    for (unsigned g = 0; g < gens; g++) {
        for (unsigned i = 0; i < threads; i++) {
            CHECK(pthread_join(t[i], NULL) == 0, "pthread_join");
            CHECK(pthread_create(&t[i], NULL, worker, (void *)id++) == 0, "pthread_create");
            if ((i & 3) == 0) { malloc_trim(0); trims++; }
        }
        if (g % 6 == 3) {
            ht_fork_wait(child_work);
            forks++;
        }
    }
    for (unsigned i = 0; i < threads; i++) CHECK(pthread_join(t[i], NULL) == 0, "pthread_join");
    for (unsigned k = 0; k < SLOTS; k++) {
        unsigned char *p = atomic_exchange(&mailbox[k], NULL);
        if (p) check_free(p);
    }
    malloc_trim(0);
    free(t);
    printf("test_page_exchange: OK: %u threads x %u generations, %lu blocks checked and freed, %u trims during the run, %u forked children\n",
           threads, gens, (unsigned long)atomic_load(&checked), trims, forks);
    return 0;
}
