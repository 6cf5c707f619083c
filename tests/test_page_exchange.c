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
    ht_swap_t sw = {mailbox, SLOTS, RING, ops_per_thread, seed, make, check_free};
    unsigned forks = 0, trims = 0;
    ht_swap_generations(&sw, threads, gens, 6, 3, child_work, &trims, &forks);
    ht_swap_drain(mailbox, SLOTS, check_free);
    malloc_trim(0);
    printf("test_page_exchange: OK: %u threads x %u generations, %lu blocks checked and freed, %u trims during the run, %u forked children\n",
           threads, gens, (unsigned long)atomic_load(&checked), trims, forks);
    return 0;
}
