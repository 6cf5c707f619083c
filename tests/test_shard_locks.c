/* test_shard_locks - the segment shards' locks on the cold paths
 * (segment/segment.c, segment/seg_map.c): no system call that maps or unmaps
 * a segment runs under a shard lock, and no wait for another shard's lock is
 * unbounded.
 *
 * Linked with libhakmem.a: it takes a shard lock itself, and it interposes
 * mmap and munmap (the library's calls resolve to this program's).
 *  1. os: single-threaded (no background purger), 50 MiB of 320 KiB blocks (large pages)
 *     are allocated (segments mapped, in runs), freed and trimmed with a
 *     segment cache of 0 (segments unmapped). Every mmap or munmap of a
 *     segment or more must find every shard lock free. Before, both ran
 *     under the caller's shard lock. With HAKMEM_THP=auto (test
 *     test_shard_locks_thp) the same of the segments' madvise(MADV_HUGEPAGE),
 *     which ran under the lock of the page cut that made a segment dense.
 *  2. bounded: main's shard keeps free slices (one block of four kept, the
 *     rest freed and trimmed); a holder thread takes main's shard lock and
 *     keeps it for HOLD_S seconds; a new thread, whose shard is empty,
 *     allocates 320 KiB blocks. It must be done within DONE_S seconds (its
 *     wait for the busy shard is bounded, then it maps a segment). Before,
 *     it waited for the lock as long as it was held.
 *  3. still stealing: the same with the lock held for a moment only (1 ms):
 *     the new thread's first block must come from main's shard's free
 *     slices, not a new segment, in at least one of TRIES attempts.
 *
 * usage: test_shard_locks
 */
#include "hak_test.h"
#include "hakmem.h"
#include "segment/segment.h"
#include "segment/shard.h"

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

static void note_call(size_t len)
{
    if (!atomic_load(&watching) || len < HAK_SEG_SIZE) return;
    atomic_fetch_add(&seg_calls, 1);
    for (unsigned i = 0; i < HAK_SEG_SHARDS; i++)
        if (atomic_load_explicit(&hak_seg_shards[i].lock.v, memory_order_relaxed)) {
            atomic_fetch_add(&under_lock, 1);
            return;
        }
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    note_call(len);
    return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

int munmap(void *addr, size_t len)
{
    note_call(len);
    return (int)syscall(SYS_munmap, addr, len);
}

/* transparent-huge-page advice on a segment (HAKMEM_THP=auto, always, never) */
static atomic_int thp_calls;
int madvise(void *addr, size_t len, int advice)
{
    if (advice == MADV_HUGEPAGE || advice == MADV_NOHUGEPAGE) {
        if (atomic_load(&watching) && len >= HAK_SEG_SIZE) atomic_fetch_add(&thp_calls, 1);
        note_call(len);
    }
    return (int)syscall(SYS_madvise, addr, len, advice);
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
    malloc_trim(0);
    atomic_store(&watching, 0);
    printf("test_shard_locks: os: %d segment mmap/munmap/madvise calls (%d huge-page advice), %d under a shard lock\n",
           atomic_load(&seg_calls), atomic_load(&thp_calls), atomic_load(&under_lock));
    CHECK(atomic_load(&seg_calls) > 0, "no segment was mapped or unmapped");
    const char *thp = getenv("HAKMEM_THP");
    CHECK(!thp || strcmp(thp, "auto") || atomic_load(&thp_calls) > 0, "HAKMEM_THP=auto advised no segment");
    CHECK(atomic_load(&under_lock) == 0, "%d segment mmap/munmap/madvise calls under a shard lock",
          atomic_load(&under_lock));
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
    printf("test_shard_locks: OK\n");
    return 0;
}
