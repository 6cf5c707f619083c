/* test_huge_cache - the lock-free huge cache (large/huge_cache.c) under
 * stress: huge blocks (above 960 KiB, a mapping each) freed by other
 * threads than their allocators, reused from the cache, resized in place,
 * purged and trimmed while others take and put entries.
 *
 * usage: test_huge_cache [THREADS [GENERATIONS [OPS [SEED]]]]
 *        (defaults 8 6 300 5)
 *
 * THREADS workers (more than the cores: takers and putters get preempted
 * between their scan and their CAS) allocate blocks of 1..3 MiB (some with
 * calloc, checked to read zero; some grown or shrunk with realloc), write a
 * keyed pattern at their head and tail, and swap them through a shared
 * mailbox: the block taken out, most often another thread's, is checked and
 * freed. Workers exit after OPS operations and are replaced for GENERATIONS
 * rounds; meanwhile main calls malloc_trim(0) (which unmaps every cached
 * entry while others take and put), and forks children that allocate, check
 * and trim at once (the cache must be consistent in a child whatever the
 * parent's threads were doing). Run with a 1 ms purge delay and the
 * background purger, purges claim entries concurrently too. An entry handed
 * out twice, or purged while in use, shows as a changed pattern (or a calloc
 * block that is not zero); a corrupted cache as a crash or a hung child
 * (watchdog).
 */
#include "hak_test.h"

#include <malloc.h>
#include <stdbool.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#define SLOTS 24
#define RING 2
#define MIN_SIZE (1000u * 1024)
#define MAX_SIZE (3u << 20)

static _Atomic(unsigned char *) mailbox[SLOTS];
static unsigned ops_per_thread = 300;
static uint64_t seed = 5;
static atomic_ulong checked;

/* Head and tail pages of every block carry its pattern. */
static void stamp(unsigned char *p, size_t n, uint64_t key) { ht_keyed_stamp(p, n, key, 4096, 4096); }

static unsigned char *make(ht_rng *r)
{
    size_t n = MIN_SIZE + (size_t)ht_below(r, MAX_SIZE - MIN_SIZE);
    bool zeroed = ht_below(r, 4) == 0;
    unsigned char *p = zeroed ? calloc(1, n) : malloc(n);
    CHECK(p != NULL, "malloc(%zu)", n);
    if (zeroed) {
        /* Where a reused entry's old contents would show: head, middle, tail. */
        for (size_t at = 0; at < n; at += n / 7 + 4093)
            CHECK(p[at] == 0, "calloc(%zu) block %p reads %u at offset %zu", n, (void *)p, p[at], at);
        CHECK(p[n - 1] == 0, "calloc(%zu) block %p not zero at its end", n, (void *)p);
    }
    stamp(p, n, ht_next(r) | 1);
    if (ht_below(r, 5) == 0) { /* resize: in place (mremap) or moved */
        size_t m = MIN_SIZE + (size_t)ht_below(r, MAX_SIZE - MIN_SIZE);
        unsigned char *q = realloc(p, m);
        CHECK(q != NULL, "realloc(%zu)", m);
        uint64_t key;
        memcpy(&key, q, 8);
        size_t keep = m < n ? m : n;
        size_t bad = ht_verify(q, key, 16, 4096);
        CHECK(bad == (size_t)-1, "realloc %zu -> %zu changed offset %zu", n, m, bad);
        if (keep == n) {
            bad = ht_verify(q, key, n - 4096, n);
            CHECK(bad == (size_t)-1, "realloc %zu -> %zu changed the tail at %zu", n, m, bad);
        }
        stamp(q, m, key);
        p = q;
    }
    return p;
}

static void check_free(unsigned char *p)
{
    ht_keyed_check_free(p, MIN_SIZE, MAX_SIZE, 4096, 4096);
    atomic_fetch_add_explicit(&checked, 1, memory_order_relaxed);
}

static void child_work(void)
{
    ht_child_rounds(seed * 31, make, check_free, 8, 10, 1);
}

int main(int argc, char **argv)
{
    hak_test_name = "test_huge_cache";
    hak_test_require_hakmem(hak_test_name);
    unsigned threads = argc > 1 ? (unsigned)atoi(argv[1]) : 8;
    unsigned gens = argc > 2 ? (unsigned)atoi(argv[2]) : 6;
    if (argc > 3) ops_per_thread = (unsigned)atoi(argv[3]);
    if (argc > 4) seed = strtoull(argv[4], NULL, 10);
    ht_swap_t sw = {mailbox, SLOTS, RING, ops_per_thread, seed, make, check_free};
    unsigned forks = 0, trims = 0;
    ht_swap_generations(&sw, threads, gens, 3, 1, child_work, &trims, &forks);
    ht_swap_drain(mailbox, SLOTS, check_free);
    malloc_trim(0);
    printf("test_huge_cache: OK: %u threads x %u generations, %lu huge blocks checked and freed, %u trims during the run, %u forked children\n",
           threads, gens, (unsigned long)atomic_load(&checked), trims, forks);
    return 0;
}
