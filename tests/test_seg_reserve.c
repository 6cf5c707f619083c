/* test_seg_reserve - segments are cut from address space reserved several at
 * a time (os/reserve.c).
 *
 *   test_seg_reserve count    main takes 48 blocks of 900 KiB (two to a fresh
 *                             segment, 24 segments): the mmap calls made meanwhile
 *                             must be at most a third of the segments (one
 *                             mapping, or three with trimming, per segment
 *                             before), and the mapped bytes must grow by the
 *                             segments handed out, not by the reserve
 *   test_seg_reserve stress   12 threads (more than the cores, so takers and
 *                             the mapper are preempted mid-protocol) take and
 *                             free blocks of 64 KiB-900 KiB and small ones,
 *                             each filled with a pattern keyed by the thread
 *                             and checked before it is freed; main calls
 *                             malloc_trim(0) (empty segments are unmapped
 *                             between reserved ones) and forks children that
 *                             allocate segments of their own while the
 *                             threads run (the child's reserve must work
 *                             whatever the parent's threads were doing; a
 *                             watchdog kills one that hangs)
 * A segment handed out twice shows as a changed pattern. */
#include "hak_test.h"
#include "hakmem.h"

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <sys/wait.h>

#define KIB 1024u
#define SEG ((size_t)2 << 20)

static void count_phase(void)
{
    enum { N = 48 };
    static void *b[N];
    hak_stats_t before = HAK_STATS_INIT, after = HAK_STATS_INIT;
    CHECK(hak_stats_get(&before) == 0, "hak_stats_get");
    for (int i = 0; i < N; i++) {
        b[i] = malloc(900 * KIB);
        CHECK(b[i] != NULL, "malloc(900 KiB)");
        ht_fill(b[i], (uint64_t)i + 1, 0, 64);
    }
    CHECK(hak_stats_get(&after) == 0, "hak_stats_get");
    uint64_t calls = after.os.mmap - before.os.mmap;
    uint64_t grown = after.memory.mapped - before.memory.mapped;
    uint64_t segs = grown / SEG;
    printf("test_seg_reserve: count: mapped +%llu KiB (%llu segments) with %llu mmap calls\n",
           (unsigned long long)(grown >> 10), (unsigned long long)segs, (unsigned long long)calls);
    CHECK(segs >= N / 2 - 2 && grown <= (uint64_t)(N / 2 + 2) * SEG,
          "48 blocks of 900 KiB: mapped grew by %llu KiB (expected about %zu segments of 2 MiB: only what is handed out counts)",
          (unsigned long long)(grown >> 10), (size_t)N / 2);
    CHECK(calls * 3 <= segs, "%llu mmap calls for %llu segments (at most a third)", (unsigned long long)calls,
          (unsigned long long)segs);
    for (int i = 0; i < N; i++) {
        CHECK(ht_verify(b[i], (uint64_t)i + 1, 0, 64) == (size_t)-1, "block %d changed", i);
        free(b[i]);
    }
}

#define THREADS 12
#define LIVE 24
static int rounds = 600;
static atomic_int running;

static size_t pick(ht_rng *r)
{
    uint64_t k = ht_below(r, 8);
    if (k < 2) return 16 + (size_t)ht_below(r, 2000);
    return 64 * KIB + (size_t)ht_below(r, 836 * KIB);
}

static void *worker(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    ht_rng r = {id * 7919 + 17};
    void *p[LIVE] = {0};
    size_t n[LIVE] = {0};
    uint64_t key[LIVE] = {0};
    for (int round = 0; round < rounds; round++) {
        for (int i = 0; i < LIVE; i++) {
            if (p[i] && ht_below(&r, 2) == 0) continue; /* half stay across rounds */
            if (p[i]) {
                size_t bad = ht_verify(p[i], key[i], 0, n[i] < 4096 ? n[i] : 4096);
                CHECK(bad == (size_t)-1, "thread %u: block of %zu B changed at %zu", (unsigned)id, n[i], bad);
                bad = ht_verify(p[i], key[i], n[i] - (n[i] < 256 ? n[i] : 256), n[i]);
                CHECK(bad == (size_t)-1, "thread %u: block of %zu B changed at its end (%zu)", (unsigned)id, n[i], bad);
                free(p[i]);
            }
            n[i] = pick(&r);
            key[i] = ht_next(&r) | 1;
            p[i] = malloc(n[i]);
            CHECK(p[i] != NULL, "malloc(%zu)", n[i]);
            ht_fill(p[i], key[i], 0, n[i] < 4096 ? n[i] : 4096);
            ht_fill(p[i], key[i], n[i] - (n[i] < 256 ? n[i] : 256), n[i]);
        }
    }
    for (int i = 0; i < LIVE; i++) {
        CHECK(ht_verify(p[i], key[i], 0, n[i] < 4096 ? n[i] : 4096) == (size_t)-1, "thread %u: block changed", (unsigned)id);
        free(p[i]);
    }
    atomic_fetch_sub(&running, 1);
    return NULL;
}

static void child_work(void)
{
    ht_rng r = {99};
    void *p[16];
    for (int i = 0; i < 16; i++) {
        p[i] = malloc(900 * KIB);
        if (!p[i]) _exit(3);
        ht_fill(p[i], (uint64_t)i + 5, 0, 4096);
    }
    for (int i = 0; i < 16; i++) {
        if (ht_verify(p[i], (uint64_t)i + 5, 0, 4096) != (size_t)-1) _exit(4);
        free(p[i]);
    }
    (void)r;
    malloc_trim(0);
    _exit(0);
}

static void stress_phase(void)
{
    pthread_t t[THREADS];
    atomic_store(&running, THREADS);
    for (uintptr_t i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, worker, (void *)(i + 1)) == 0, "pthread_create");
    int forks = 0;
    while (atomic_load(&running) > 0) {
        malloc_trim(0);
        if (forks < 8) {
            pid_t c = fork();
            CHECK(c >= 0, "fork: %s", strerror(errno));
            if (c == 0) {
                alarm(20); /* the watchdog: a hung child dies of SIGALRM */
                child_work();
            }
            int st = ht_wait(c);
            CHECK(ht_exited0(st), "child %d: %s %d", forks,
                  WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            forks++;
        }
        usleep(500);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    printf("test_seg_reserve: stress: %d threads x %d rounds, %d forks\n", THREADS, rounds, forks);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "all";
    bool all = strcmp(mode, "all") == 0;
    if (all || strcmp(mode, "count") == 0) count_phase();
    if (all || strcmp(mode, "stress") == 0) stress_phase();
    printf("test_seg_reserve: ok\n");
    return 0;
}
