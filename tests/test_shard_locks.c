/* test_shard_locks - the segment shards' locks on the cold paths
 * (segment/segment.c, segment/seg_map.c): no system call that maps or unmaps
 * a segment runs under a shard lock, and no wait for another shard's lock is
 * unbounded.
 *
 * Linked with libhakmem.a: it takes a shard lock itself, and it interposes
 * mmap, munmap, mprotect and madvise (the library's calls resolve to this
 * program's).
 *  1. os: single-threaded (no background purger), 50 MiB of 320 KiB blocks (large pages)
 *     are allocated (segments mapped, in runs), freed and trimmed with a
 *     segment cache of 0 (segments unmapped). Every mmap or munmap of a
 *     segment or more must find every shard lock free. Before, both ran
 *     under the caller's shard lock. With HAKMEM_THP=auto (test
 *     test_shard_locks_thp) the same of the segments' madvise(MADV_HUGEPAGE),
 *     which ran under the lock of the page cut that made a segment dense.
 *     Secure build: before the trim, pages of other sizes are cut over the
 *     slices where the freed large pages left their guards (large_run.c),
 *     which opens them: every mprotect must find every shard lock free too.
 *     Before, the guards opened in page_init, under the cutter's lock.
 *  2. bounded: main's shard keeps free slices (one block of four kept, the
 *     rest freed and trimmed); a holder thread takes main's shard lock and
 *     keeps it for HOLD_S seconds; a new thread, whose shard is empty,
 *     allocates 320 KiB blocks. It must be done within DONE_S seconds (its
 *     wait for the busy shard is bounded, then it maps a segment). Before,
 *     it waited for the lock as long as it was held.
 *  3. still stealing: the same with the lock held for a moment only (1 ms):
 *     the new thread's first block must come from main's shard's free
 *     slices, not a new segment, in at least one of TRIES attempts.
 *  4. huge: a first-class heap takes NHUGE huge blocks
 *     and is destroyed. No mmap, munmap, mprotect or madvise may run while
 *     the process-wide lock of front/heap_huge.c's table is held. Before,
 *     the table was mapped bigger (and the old one unmapped) under it, and
 *     destroy freed the blocks under it.
 *
 * usage: test_shard_locks
 */
#include "hak_test.h"
#include "hakmem.h"
#include "segment/segment.h"
#include "segment/shard.h"
#include "front/heap_huge.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#define BLK (320 * 1024) /* a large page of 5 slices */
#define NBLK 160      /* 50 MiB */
#define HOLD_S 10
#define DONE_S 5
#define TRIES 5

static atomic_int watching, seg_calls, under_lock;

/* The interposers run inside TSan's own start-up too (its symbolizer maps
 * memory before the runtime can take an event): not instrumented. */
#ifdef __SANITIZE_THREAD__
#define NO_TSAN __attribute__((no_sanitize_thread, noinline))
#else
#define NO_TSAN
#endif

/* Any of the calls below while the first-class heaps' huge-block table's
 * process-wide lock is held (part 4). */
static atomic_int huge_calls, huge_under_lock;
NO_TSAN static void note_huge(void)
{
    if (atomic_load(&watching) != 2) return;
    atomic_fetch_add(&huge_calls, 1);
    if (atomic_load_explicit(&heap_huge_lock.v, memory_order_relaxed)) atomic_fetch_add(&huge_under_lock, 1);
}

NO_TSAN static void note_call(size_t len)
{
    note_huge();
    if (!atomic_load(&watching) || len < HAK_SEG_SIZE) return;
    atomic_fetch_add(&seg_calls, 1);
    for (unsigned i = 0; i < HAK_SEG_SHARDS; i++)
        if (atomic_load_explicit(&hak_seg_shards[i].lock.v, memory_order_relaxed)) {
            atomic_fetch_add(&under_lock, 1);
            return;
        }
}

/* The calls themselves. Under ThreadSanitizer (make test-tsan: the hak_ API,
 * HAK_TEST_HAK_API) through the next definition, TSan's interceptor, which
 * resets its shadow of a range mapped or unmapped (a raw system call would
 * leave a reused segment's old accesses in the shadow: false reports, as
 * mremap's in os.c); in the other builds HAKMEM is this program's malloc,
 * and dlsym may allocate, so the system calls are made directly. */
#ifdef __SANITIZE_THREAD__
static void *(*next_mmap)(void *, size_t, int, int, int, off_t);
static int (*next_munmap)(void *, size_t);
static int (*next_mprotect)(void *, size_t, int);
static int (*next_madvise)(void *, size_t, int);
__attribute__((constructor)) static void find_next(void)
{
    next_mmap = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
    next_munmap = (int (*)(void *, size_t))dlsym(RTLD_NEXT, "munmap");
    next_mprotect = (int (*)(void *, size_t, int))dlsym(RTLD_NEXT, "mprotect");
    next_madvise = (int (*)(void *, size_t, int))dlsym(RTLD_NEXT, "madvise");
    if (!next_mmap || !next_munmap || !next_mprotect || !next_madvise) abort();
}
/* (before the constructor: TSan's own start-up, directly) */
#define SYS_CALL(name, ...) (next_##name ? (long)next_##name(__VA_ARGS__) : syscall(SYS_##name, __VA_ARGS__))
#else
#define SYS_CALL(name, ...) syscall(SYS_##name, __VA_ARGS__)
#endif

NO_TSAN void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    note_call(len);
    return (void *)SYS_CALL(mmap, addr, len, prot, flags, fd, off);
}

NO_TSAN int munmap(void *addr, size_t len)
{
    note_call(len);
    return (int)SYS_CALL(munmap, addr, len);
}

/* guard pages (secure build): any mprotect */
static atomic_int prot_calls, prot_opens, prot_under_lock;
NO_TSAN int mprotect(void *addr, size_t len, int prot)
{
    note_huge();
    if (atomic_load(&watching)) {
        atomic_fetch_add(&prot_calls, 1);
        if (prot != PROT_NONE) atomic_fetch_add(&prot_opens, 1);
        for (unsigned i = 0; i < HAK_SEG_SHARDS; i++)
            if (atomic_load_explicit(&hak_seg_shards[i].lock.v, memory_order_relaxed)) {
                atomic_fetch_add(&prot_under_lock, 1);
                break;
            }
    }
    return (int)SYS_CALL(mprotect, addr, len, prot);
}

/* transparent-huge-page advice on a segment (HAKMEM_THP=auto, always, never) */
static atomic_int thp_calls;
NO_TSAN int madvise(void *addr, size_t len, int advice)
{
    note_huge();
    if (advice == MADV_HUGEPAGE || advice == MADV_NOHUGEPAGE) {
        if (atomic_load(&watching) && len >= HAK_SEG_SIZE) atomic_fetch_add(&thp_calls, 1);
        note_call(len);
    }
    return (int)SYS_CALL(madvise, addr, len, advice);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void *blk[NBLK];

static void phase_os(void)
{
    CHECK(hak_option_set("HAKMEM_SEGMENT_CACHE", 0) == 0, "setting the segment cache");
    atomic_store(&watching, 1);
    for (int i = 0; i < NBLK; i++) {
        blk[i] = malloc(BLK);
        CHECK(blk[i] != NULL, "malloc");
        memset(blk[i], 0x5a, 4096);
    }
    for (int i = 0; i < NBLK; i++) free(blk[i]);
    /* the slices of the freed large pages, cut again for pages of other
     * sizes: 7-slice large pages and 8 KiB blocks' class pages */
    for (int i = 0; i < NBLK / 2; i++) {
        blk[i] = malloc(BLK * 7 / 5);
        CHECK(blk[i] != NULL, "malloc");
        memset(blk[i], 0x5b, 4096);
    }
    enum { NSMALL = 4096 };
    static void *small[NSMALL];
    for (int i = 0; i < NSMALL; i++) {
        small[i] = malloc(8192);
        CHECK(small[i] != NULL, "malloc");
        memset(small[i], 0x5c, 8192);
    }
    for (int i = 0; i < NSMALL; i++) free(small[i]);
    for (int i = 0; i < NBLK / 2; i++) free(blk[i]);
    malloc_trim(0);
    atomic_store(&watching, 0);
    printf("test_shard_locks: os: %d segment mmap/munmap/madvise calls (%d huge-page advice), %d under a shard lock\n",
           atomic_load(&seg_calls), atomic_load(&thp_calls), atomic_load(&under_lock));
    printf("test_shard_locks: os: %d mprotect calls (%d opening guards), %d under a shard lock\n",
           atomic_load(&prot_calls), atomic_load(&prot_opens), atomic_load(&prot_under_lock));
    CHECK(!HAK_SECURE || atomic_load(&prot_opens) > 0, "secure build: no guard was opened");
    CHECK(atomic_load(&prot_under_lock) == 0, "%d mprotect calls under a shard lock", atomic_load(&prot_under_lock));
    CHECK(atomic_load(&seg_calls) > 0, "no segment was mapped or unmapped");
    const char *thp = getenv("HAKMEM_THP");
    CHECK(!thp || strcmp(thp, "auto") || atomic_load(&thp_calls) > 0, "HAKMEM_THP=auto advised no segment");
    CHECK(atomic_load(&under_lock) == 0, "%d segment mmap/munmap/madvise calls under a shard lock",
          atomic_load(&under_lock));
}

/* A first-class heap's huge blocks: the table that records them grows
 * (mapped 64 -> 128 -> 256 entries), and destroy frees them (unmapped, or
 * cached and purged). None of those system calls may run while the table's
 * lock (process-wide) is held. Then MT_HEAPS threads at once, a heap each:
 * the table grows while others add to it (a bigger table is mapped with
 * the lock dropped), every block must still be found as its heap's, and
 * the heaps are destroyed at once. */
#define NHUGE 100
#define MT_HEAPS 4
#define MT_HUGE 60
static void *mt_blk[MT_HEAPS][MT_HUGE];
static hak_heap_t *mt_heap[MT_HEAPS];
static pthread_barrier_t mt_bar;

static void *huge_worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    hak_heap_t *h = mt_heap[t] = hak_heap_new();
    CHECK(h != NULL, "hak_heap_new");
    for (int i = 0; i < MT_HUGE; i++) {
        mt_blk[t][i] = hak_heap_malloc(h, (size_t)1100000 + (size_t)t * 65536);
        CHECK(mt_blk[t][i] != NULL, "hak_heap_malloc");
        memset(mt_blk[t][i], t + 1, 64);
    }
    pthread_barrier_wait(&mt_bar); /* all allocated */
    pthread_barrier_wait(&mt_bar); /* checked */
    hak_heap_destroy(h);
    return NULL;
}

static void phase_huge(void)
{
    hak_stats_t st0 = HAK_STATS_INIT, st1 = HAK_STATS_INIT, stm = HAK_STATS_INIT;
    hak_stats_get(&st0);
    hak_heap_t *h = hak_heap_new();
    CHECK(h != NULL, "hak_heap_new");
    atomic_store(&watching, 2);
    for (int i = 0; i < NHUGE; i++) {
        void *p = hak_heap_malloc(h, (size_t)3 << 20);
        CHECK(p != NULL, "hak_heap_malloc");
        memset(p, 0x5d, 4096);
    }
    hak_heap_destroy(h);
    atomic_store(&watching, 0);
    printf("test_shard_locks: huge: %d mmap/munmap/mprotect/madvise calls, %d under the huge-block table's lock\n",
           atomic_load(&huge_calls), atomic_load(&huge_under_lock));
    CHECK(atomic_load(&huge_calls) > 0, "no system call seen");
    CHECK(atomic_load(&huge_under_lock) == 0, "%d system calls under the huge-block table's lock",
          atomic_load(&huge_under_lock));

    pthread_t th[MT_HEAPS];
    CHECK(pthread_barrier_init(&mt_bar, NULL, MT_HEAPS + 1) == 0, "pthread_barrier_init");
    for (int t = 0; t < MT_HEAPS; t++)
        CHECK(pthread_create(&th[t], NULL, huge_worker, (void *)(intptr_t)t) == 0, "pthread_create");
    pthread_barrier_wait(&mt_bar);
    hak_stats_get(&stm);
    for (int t = 0; t < MT_HEAPS; t++)
        for (int i = 0; i < MT_HUGE; i++) {
            CHECK(heap_huge_owner(mt_blk[t][i]) == mt_heap[t], "heap %d's huge block %d not on the table as its own",
                  t, i);
            CHECK(((unsigned char *)mt_blk[t][i])[63] == t + 1, "heap %d's huge block %d changed", t, i);
        }
    pthread_barrier_wait(&mt_bar);
    for (int t = 0; t < MT_HEAPS; t++) pthread_join(th[t], NULL);
    pthread_barrier_destroy(&mt_bar);
    for (int t = 0; t < MT_HEAPS; t++)
        CHECK(heap_huge_owner(mt_blk[t][0]) == NULL, "heap %d's block still on the table after destroy", t);
    hak_stats_get(&st1);
    printf("test_shard_locks: huge: %d heaps x %d blocks at once, destroyed; huge blocks %llu -> %llu -> %llu\n",
           MT_HEAPS, MT_HUGE, (unsigned long long)st0.memory.huge_blocks, (unsigned long long)stm.memory.huge_blocks,
           (unsigned long long)st1.memory.huge_blocks);
    CHECK(stm.memory.huge_blocks >= st0.memory.huge_blocks + MT_HEAPS * MT_HUGE, "the heaps' huge blocks not counted");
    CHECK(st1.memory.huge_blocks <= st0.memory.huge_blocks, "destroy left huge blocks");
}

/* Main's shard: free slices in its segments, none dirty (trimmed), the
 * segments kept by one block in four. */
static unsigned home;
static void keep_free_slices(void)
{
    CHECK(hak_option_set("HAKMEM_SEGMENT_CACHE", 16) == 0, "setting the segment cache");
    for (int i = 0; i < NBLK / 2; i++) {
        blk[i] = malloc(BLK);
        CHECK(blk[i] != NULL, "malloc");
    }
    home = segment_of(blk[0])->shard;
    for (int i = 0; i < NBLK / 2; i++)
        if (i % 4) free(blk[i]);
    malloc_trim(0);
    CHECK(atomic_load(&hak_seg_shards[home].free_slices) >= 16, "main's shard has %u free slices",
          (unsigned)atomic_load(&hak_seg_shards[home].free_slices));
}

static atomic_int held, taker_done;
static double hold_s;

static void *holder(void *arg)
{
    (void)arg;
    seg_shard_t *sh = &hak_seg_shards[home];
    shard_lock(sh);
    atomic_store(&held, 1);
    double t0 = now_s();
    while (!atomic_load(&taker_done) && now_s() - t0 < hold_s) usleep(hold_s < 0.01 ? 100 : 10000);
    hak_unlock(&sh->lock); /* nothing queued for unmapping: it only held the lock */
    return NULL;
}

static double taken_s;
static unsigned first_shard;
static void *taker(void *arg)
{
    (void)arg;
    double t0 = now_s();
    free(malloc(16)); /* a heap, and so a shard, of its own: large pages are cut from it */
    void *p[16];
    for (int i = 0; i < 16; i++) {
        p[i] = malloc(BLK);
        CHECK(p[i] != NULL, "malloc");
        memset(p[i], 0x33, 64);
    }
    taken_s = now_s() - t0;
    first_shard = segment_of(p[0])->shard;
    atomic_store(&taker_done, 1);
    for (int i = 0; i < 16; i++) free(p[i]);
    return NULL;
}

/* One holder, one taker; returns the taker's time. */
static double hold_and_take(double hold)
{
    hold_s = hold;
    atomic_store(&held, 0);
    atomic_store(&taker_done, 0);
    pthread_t h, t;
    CHECK(pthread_create(&h, NULL, holder, NULL) == 0, "pthread_create");
    while (!atomic_load(&held)) usleep(100);
    CHECK(pthread_create(&t, NULL, taker, NULL) == 0, "pthread_create");
    pthread_join(t, NULL);
    pthread_join(h, NULL);
    return taken_s;
}

int main(void)
{
    hak_test_name = "test_shard_locks";
    free(malloc(16)); /* main's heap, and so its shard */
    phase_os();

    keep_free_slices();
    double t = hold_and_take(HOLD_S);
    printf("test_shard_locks: bounded: 16 blocks in %.3f s with main's shard lock held (up to %d s)\n", t, HOLD_S);
    CHECK(t < DONE_S, "the taker waited %.3f s for a shard lock held by another thread", t);

    int stole = 0;
    for (int i = 0; i < TRIES && !stole; i++) {
        malloc_trim(0); /* the last taker's pages back into the segments */
        hold_and_take(0.001);
        stole = first_shard == home;
        printf("test_shard_locks: stealing: attempt %d, the first block came from shard %u (main's: %u)\n", i + 1,
               first_shard, home);
    }
    CHECK(stole, "a shard lock held for a moment made the taker map a segment in all %d attempts", TRIES);
    for (int i = 0; i < NBLK / 2; i += 4) free(blk[i]);
    phase_huge();
    printf("test_shard_locks: OK\n");
    return 0;
}
