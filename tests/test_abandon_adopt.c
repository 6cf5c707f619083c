/* test_abandon_adopt - the lock-free abandoned-page stacks (remote/remote.c)
 * under stress: pages abandoned by exiting threads, claimed at the same time
 * by threads freeing into them (adopt_this_page) and by refills taking the
 * stacks (adopt_page), with stale entries, preempted takers and fork.
 *
 * usage: test_abandon_adopt [THREADS [ROUNDS [BLOCKS [SEED]]]]
 *        (defaults 16 150 300 5)
 *
 * Each round starts THREADS short-lived workers (far more than the cores, so
 * takers and abandoners are preempted mid-protocol). A worker frees the blocks
 * it finds in its mailbox slots (left there by workers that have exited:
 * their pages are abandoned, so each free claims or feeds an abandoned page),
 * allocates BLOCKS blocks of a few classes (its refills take the abandoned
 * stacks), checks them, leaves some in the mailbox and frees the rest, and
 * exits with blocks still out, abandoning their pages. Every block carries a
 * pattern keyed by a header; a page adopted twice or a block handed out twice
 * shows as a changed pattern. Every few rounds main forks a child that does a
 * round of its own (the stacks must be consistent in it). At the end every
 * block is freed and malloc_trim(0) must bring resident memory back near the
 * start: pages lost from the stacks, or never adopted, would stay.
 */
#include "hak_test.h"

#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#define SLOTS 4096
static _Atomic(unsigned char *) mailbox[SLOTS];
static unsigned blocks_per_thread = 300;
static uint64_t seed = 5;
static atomic_ulong checked;
static const size_t sizes[] = {24, 48, 64, 128, 320, 1024, 3000};

static unsigned char *make(ht_rng *r)
{
    size_t n = sizes[ht_below(r, sizeof sizes / sizeof sizes[0])];
    unsigned char *p = malloc(n);
    CHECK(p != NULL, "malloc(%zu)", n);
    ht_keyed_stamp(p, n, ht_next(r) | 1, n, 0);
    return p;
}

static void check_free(unsigned char *p)
{
    ht_keyed_check_free(p, 24, 3000, SIZE_MAX, 0);
    atomic_fetch_add_explicit(&checked, 1, memory_order_relaxed);
}

static void *worker(void *arg)
{
    ht_rng r = {seed ^ ht_mix64((uintptr_t)arg)};
    unsigned base = (unsigned)ht_below(&r, SLOTS);
    /* blocks of exited threads first: frees into abandoned pages */
    for (unsigned i = 0; i < 64; i++) {
        unsigned char *old = atomic_exchange(&mailbox[(base + i) % SLOTS], NULL);
        if (old) check_free(old);
    }
    unsigned char **mine = malloc(blocks_per_thread * sizeof *mine);
    CHECK(mine != NULL, "malloc");
    for (unsigned i = 0; i < blocks_per_thread; i++) mine[i] = make(&r);
    for (unsigned i = 0; i < blocks_per_thread; i++) {
        if (ht_below(&r, 3) == 0) { /* left for later threads: keeps the page abandoned */
            unsigned char *old = atomic_exchange(&mailbox[ht_below(&r, SLOTS)], mine[i]);
            if (old) check_free(old);
        } else {
            check_free(mine[i]);
        }
    }
    free(mine);
    return NULL;
}

static void round_of(unsigned threads, uintptr_t *id)
{
    pthread_t t[64];
    for (unsigned i = 0; i < threads; i++)
        CHECK(pthread_create(&t[i], NULL, worker, (void *)(*id)++) == 0, "pthread_create");
    for (unsigned i = 0; i < threads; i++) CHECK(pthread_join(t[i], NULL) == 0, "pthread_join");
}

int main(int argc, char **argv)
{
    hak_test_name = "test_abandon_adopt";
    hak_test_require_hakmem(hak_test_name);
    unsigned threads = argc > 1 ? (unsigned)atoi(argv[1]) : 16;
    unsigned rounds = argc > 2 ? (unsigned)atoi(argv[2]) : 150;
    if (argc > 3) blocks_per_thread = (unsigned)atoi(argv[3]);
    if (argc > 4) seed = strtoull(argv[4], NULL, 10);
    CHECK(threads >= 1 && threads <= 64, "THREADS in 1..64");

    size_t rss0 = ht_rss_bytes();
    uintptr_t id = 1;
    unsigned forks = 0;
    for (unsigned g = 0; g < rounds; g++) {
        round_of(threads, &id);
        if (g % 10 == 5) {
            pid_t pid = fork();
            CHECK(pid >= 0, "fork: %s", strerror(errno));
            if (pid == 0) {
                alarm(20);
                round_of(threads, &id);
                _exit(0);
            }
            int st = ht_wait(pid);
            CHECK(ht_exited0(st), "child ended with status 0x%x", st);
            forks++;
        }
    }
    for (unsigned k = 0; k < SLOTS; k++) {
        unsigned char *p = atomic_exchange(&mailbox[k], NULL);
        if (p) check_free(p);
    }
    malloc_trim(0);
    size_t rss1 = ht_rss_bytes();
    /* everything is freed: what stays is the caches' and maps' own memory */
    CHECK(HT_RSS_SHADOWED || rss1 < rss0 + (size_t)24 * 1024 * 1024, "resident memory %zu KiB after freeing everything and malloc_trim, %zu KiB at start",
          rss1 >> 10, rss0 >> 10);
    printf("test_abandon_adopt: OK: %u rounds of %u threads, %lu blocks checked and freed (most into abandoned pages), %u forked children; RSS KiB start %zu, end %zu\n",
           rounds, threads, (unsigned long)atomic_load(&checked), forks, rss0 >> 10, rss1 >> 10);
    return 0;
}
