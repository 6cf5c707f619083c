/* test_segment_shards - the sharded segments (segment/segment.c): each heap
 * cuts pages from its own shard, hands pages of other shards back through
 * their lock-free returned stacks, and steals free slices from other shards
 * before it maps a segment.
 *
 * usage: test_segment_shards [ROUNDS [SEED]]   (defaults 6 3)
 *
 * 1. Steal: main fills its shard with 40 MiB of 100 KiB blocks and frees
 *    them (its empty segments stay cached); then 8 new threads, each with a
 *    shard of its own, take 24 MiB between them. They must find main's free
 *    slices: the mapped bytes (mallinfo2's arena) may grow by at most two
 *    segments. Shards that could only map their own would map twelve.
 * 2. Returned stacks under stress: each round, 12 workers (more than the
 *    cores, so pushers and drainers are preempted mid-protocol) allocate
 *    class and large blocks, fill them with a pattern keyed by a header,
 *    and swap them through a shared mailbox: most blocks are freed by
 *    another thread, so most emptied pages belong to another shard. Workers
 *    exit and are replaced every round (heaps and their shards recycled);
 *    main calls malloc_trim(0), which drains every shard's stack while others
 *    push, and forks a child that allocates and trims (every shard lock and
 *    stack must be usable in the child; a watchdog kills one that hangs).
 * 3. More heaps than shards: 80 threads alive at once share the 63 shards
 *    of heaps, each freeing blocks of the others.
 * A block handed out twice shows as a changed pattern; a broken stack as a
 * crash or a hang. */
#include "hak_test.h"

#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#define SLOTS 256
#define MAXSZ (700 * 1024)

static _Atomic(unsigned char *) mailbox[SLOTS];
static uint64_t seed = 3;
static atomic_ulong checked;

static size_t pick_size(ht_rng *r)
{
    uint64_t k = ht_below(r, 10);
    if (k < 4) return 64 + (size_t)ht_below(r, 16 * 1024);          /* class pages */
    if (k < 9) return 40 * 1024 + (size_t)ht_below(r, 200 * 1024);  /* large, 1-4 slices */
    return 300 * 1024 + (size_t)ht_below(r, MAXSZ - 300 * 1024);    /* large, up to 11 slices */
}

static unsigned char *make(ht_rng *r)
{
    size_t n = pick_size(r);
    unsigned char *p = malloc(n);
    CHECK(p != NULL, "malloc(%zu)", n);
    ht_keyed_stamp(p, n, ht_next(r) | 1, 512, 256);
    return p;
}

static void check_free(unsigned char *p)
{
    ht_keyed_check_free(p, 64, MAXSZ, 512, 256);
    atomic_fetch_add_explicit(&checked, 1, memory_order_relaxed);
}

static void swap_ops(ht_rng *r, unsigned ops)
{
    for (unsigned i = 0; i < ops; i++) {
        unsigned char *old = atomic_exchange(&mailbox[ht_below(r, SLOTS)], make(r));
        if (old) check_free(old);
    }
}

static void *worker(void *arg)
{
    ht_rng r = {seed ^ ht_mix64((uintptr_t)arg)};
    swap_ops(&r, 600);
    return NULL;
}

/* Phase 3: every thread has its heap (and shard) before any starts. */
static pthread_barrier_t crowd_gate;
static void *crowd_worker(void *arg)
{
    free(malloc(64));
    pthread_barrier_wait(&crowd_gate);
    ht_rng r = {seed ^ ht_mix64((uintptr_t)arg)};
    swap_ops(&r, 40);
    return NULL;
}

/* Phase 1. */
#define STEAL_BLOCK (100 * 1024)
static void *taker(void *arg)
{
    void **keep = arg;
    for (int i = 0; i < 30; i++) {
        keep[i] = malloc(STEAL_BLOCK);
        CHECK(keep[i] != NULL, "malloc");
        memset(keep[i], 0x5a, STEAL_BLOCK);
    }
    return NULL;
}

static void steal_phase(void)
{
    enum { MAIN_BLOCKS = 400, TAKERS = 8 };
    static void *mine[MAIN_BLOCKS], *theirs[TAKERS][30];
    for (int i = 0; i < MAIN_BLOCKS; i++) {
        mine[i] = malloc(STEAL_BLOCK);
        CHECK(mine[i] != NULL, "malloc");
        memset(mine[i], 0xa5, 4096);
    }
    for (int i = 0; i < MAIN_BLOCKS; i++) free(mine[i]);
    size_t before = mallinfo2().arena;
    pthread_t t[TAKERS];
    for (int i = 0; i < TAKERS; i++) CHECK(pthread_create(&t[i], NULL, taker, theirs[i]) == 0, "pthread_create");
    for (int i = 0; i < TAKERS; i++) CHECK(pthread_join(t[i], NULL) == 0, "pthread_join");
    size_t after = mallinfo2().arena;
    CHECK(after <= before + ((size_t)4 << 20),
          "8 threads taking 24 MiB after main freed 40 MiB mapped %zu KiB more (at most 4096: other shards' free slices first)",
          (after - before) >> 10);
    for (int i = 0; i < TAKERS; i++)
        for (int k = 0; k < 30; k++) free(theirs[i][k]);
    printf("test_segment_shards: steal: mapped %+ld KiB while 8 new threads took 24 MiB\n",
           ((long)after - (long)before) / 1024);
}

static void child_work(void)
{
    ht_child_rounds(seed * 31, make, check_free, 48, 10, 0);
}

int main(int argc, char **argv)
{
    hak_test_name = "test_segment_shards";
    hak_test_require_hakmem(hak_test_name);
    unsigned rounds = argc > 1 ? (unsigned)atoi(argv[1]) : 6;
    if (argc > 2) seed = strtoull(argv[2], NULL, 10);

    steal_phase();

    enum { WORKERS = 12, CROWD = 80 };
    pthread_t t[CROWD];
    uintptr_t id = 1;
    unsigned forks = 0;
    for (unsigned g = 0; g < rounds; g++) {
        for (unsigned i = 0; i < WORKERS; i++)
            CHECK(pthread_create(&t[i], NULL, worker, (void *)id++) == 0, "pthread_create");
        for (unsigned i = 0; i < WORKERS; i++) {
            if (i % 4 == 1) malloc_trim(0);
            if (i == WORKERS / 2 && g % 2 == 0) {
                ht_fork_wait(child_work);
                forks++;
            }
            CHECK(pthread_join(t[i], NULL) == 0, "pthread_join");
        }
    }
    /* Phase 3: more heaps alive than shards. */
    CHECK(pthread_barrier_init(&crowd_gate, NULL, CROWD) == 0, "pthread_barrier_init");
    for (unsigned i = 0; i < CROWD; i++)
        CHECK(pthread_create(&t[i], NULL, crowd_worker, (void *)id++) == 0, "pthread_create");
    for (unsigned i = 0; i < CROWD; i++) CHECK(pthread_join(t[i], NULL) == 0, "pthread_join");
    ht_swap_drain(mailbox, SLOTS, check_free);
    malloc_trim(0);
    printf("test_segment_shards: OK: %u rounds of %u workers and %u at once, %lu blocks checked and freed, %u forked children\n",
           rounds, (unsigned)WORKERS, (unsigned)CROWD, (unsigned long)atomic_load(&checked), forks);
    return 0;
}
