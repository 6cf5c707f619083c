/* test_purge_cut - purging without the shard lock (segment/purge.c): a
 * purger takes the slices it will madvise out of their segment's free mask
 * under the shard's lock, drops the lock for the system calls and takes it
 * again to put them back clean. Meanwhile the shard's threads cut pages from
 * the same segments. A slice handed out while it is being purged would read
 * zeros where its block was written; one put back twice would be handed out
 * twice; one never put back would stay out of use (and resident) for good.
 *
 * usage: test_purge_cut [ROUNDS [SEED]]   (defaults 4 7; run with a 1 ms
 * purge delay, a small dirty budget and the background purger, so that
 * budget sweeps, the deadline and malloc_trim all purge while pages are cut)
 *
 * Each round, 8 workers (more than the cores: purgers and cutters are
 * preempted between their critical sections) allocate class and large
 * blocks, write a keyed pattern over every 4 KiB page of each, keep up to 24,
 * and free them (a fifth through a shared mailbox, by another thread, so
 * pages also go back through the returned stacks) after checking every
 * page's pattern. Main calls malloc_trim(0) in a loop meanwhile and forks
 * children that allocate, check and trim (a batch the parent's purger had
 * out must come back in the child; a watchdog kills a child that hangs). At
 * the end every block is freed and trimmed: the resident size must come
 * back near where it started (no slices left out of their free masks). */
#include "hak_test.h"

#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#define SLOTS 64
#define KEEP 24

static _Atomic(unsigned char *) mailbox[SLOTS];
static atomic_int stop;
static atomic_ulong checked;
static uint64_t seed = 7;
static unsigned iters = 6000;

static size_t pick_size(ht_rng *r)
{
    uint64_t k = ht_below(r, 10);
    if (k < 3) return 512 + (size_t)ht_below(r, 24 * 1024);           /* class pages */
    if (k < 9) return 48 * 1024 + (size_t)ht_below(r, 250 * 1024);    /* large, 1-5 slices */
    return 400 * 1024 + (size_t)ht_below(r, 600 * 1024);              /* large, up to 16 slices */
}

/* header: key, size; the pattern over [16, 64) of every 4 KiB page and the last 64 bytes */
static unsigned char *make(ht_rng *r)
{
    size_t n = pick_size(r);
    unsigned char *p = malloc(n);
    CHECK(p != NULL, "malloc(%zu)", n);
    uint64_t key = ht_next(r) | 1;
    memcpy(p, &key, 8);
    memcpy(p + 8, &n, 8);
    for (size_t at = 0; at < n; at += 4096) {
        size_t from = at < 16 ? 16 : at, to = at + 64 < n ? at + 64 : n;
        if (from < to) ht_fill(p, key, from, to);
    }
    if (n > 64) ht_fill(p, key, n - 64, n);
    return p;
}

static void check_free(unsigned char *p)
{
    uint64_t key;
    size_t n;
    memcpy(&key, p, 8);
    memcpy(&n, p + 8, 8);
    CHECK(key & 1, "block %p lost its header (key 0x%llx): purged while in use?", (void *)p, (unsigned long long)key);
    for (size_t at = 0; at < n; at += 4096) {
        size_t from = at < 16 ? 16 : at, to = at + 64 < n ? at + 64 : n;
        if (from >= to) continue;
        size_t bad = ht_verify(p, key, from, to);
        CHECK(bad == (size_t)-1, "block %p of %zu bytes changed at offset %zu (purged or handed out twice)",
              (void *)p, n, bad);
    }
    if (n > 64) CHECK(ht_verify(p, key, n - 64, n) == (size_t)-1, "block %p: tail changed", (void *)p);
    atomic_fetch_add(&checked, 1);
    free(p);
}

static void *worker(void *arg)
{
    ht_rng r = {seed * 1000003 + (uintptr_t)arg};
    unsigned char *keep[KEEP] = {0};
    for (unsigned it = 0; it < iters; it++) {
        unsigned i = (unsigned)ht_below(&r, KEEP);
        if (keep[i]) {
            if (ht_below(&r, 5) == 0) {
                unsigned char *old = atomic_exchange(&mailbox[ht_below(&r, SLOTS)], keep[i]);
                if (old) check_free(old);
            } else {
                check_free(keep[i]);
            }
            keep[i] = NULL;
        } else {
            keep[i] = make(&r);
        }
    }
    for (unsigned i = 0; i < KEEP; i++)
        if (keep[i]) check_free(keep[i]);
    return NULL;
}

static void child_work(void)
{
    ht_child_rounds(seed * 31, make, check_free, 32, 8, 0);
}

static void *trimmer(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        malloc_trim(0);
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    hak_test_name = "test_purge_cut";
    hak_test_require_hakmem(hak_test_name);
    unsigned rounds = argc > 1 ? (unsigned)atoi(argv[1]) : 4;
    if (argc > 2) seed = strtoull(argv[2], NULL, 10);

    malloc_trim(0);
    size_t rss0 = ht_rss_bytes();
    enum { WORKERS = 8 };
    pthread_t t[WORKERS], tr;
    unsigned forks = 0;
    uintptr_t id = 1;
    CHECK(pthread_create(&tr, NULL, trimmer, NULL) == 0, "pthread_create");
    for (unsigned g = 0; g < rounds; g++) {
        for (unsigned i = 0; i < WORKERS; i++)
            CHECK(pthread_create(&t[i], NULL, worker, (void *)id++) == 0, "pthread_create");
        for (unsigned i = 0; i < WORKERS; i++) {
            if (i == WORKERS / 2) {
                ht_fork_wait(child_work);
                forks++;
            }
            CHECK(pthread_join(t[i], NULL) == 0, "pthread_join");
        }
    }
    atomic_store(&stop, 1);
    CHECK(pthread_join(tr, NULL) == 0, "pthread_join");
    ht_swap_drain(mailbox, SLOTS, check_free);
    malloc_trim(0);
    size_t rss1 = ht_rss_bytes();
    CHECK(HT_RSS_SHADOWED || rss1 <= rss0 + ((size_t)12 << 20),
          "after every block was freed and trimmed, resident %zu KiB, %zu KiB at the start (slices left out of use?)",
          rss1 >> 10, rss0 >> 10);
    printf("test_purge_cut: OK: %u rounds of %u workers, %lu blocks checked, %u forked children, rss %zu -> %zu KiB\n",
           rounds, (unsigned)WORKERS, (unsigned long)atomic_load(&checked), forks, rss0 >> 10, rss1 >> 10);
    return 0;
}
