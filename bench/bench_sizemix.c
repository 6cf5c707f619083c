/* bench_sizemix THREADS ITERS WS [CROSS_PCT [SEED]]
 *
 * A realistic size mix with cross-thread frees (the shape of rpmalloc's
 * benchmark).  THREADS threads each own WS slots and make ITERS allocations.
 * Each step picks a random slot; a block already in it is released first and
 * the slot gets a new block.  Sizes follow a distribution weighted to small
 * blocks with a tail of mid and large ones:
 *     60%  16..128 B    25%  129 B..1 KiB    10%  1..8 KiB
 *      4%  8..64 KiB     1%  64..512 KiB
 * The first and last byte of every block are written.  A released block is
 * freed by its thread, or with chance CROSS_PCT percent (default 20) handed to
 * the next thread's mailbox; each thread frees what it was handed every 64
 * steps.
 *
 * make bench runs one thread per core.  With more threads than cores (4 on
 * 2) a thread waiting for a CPU cannot drain its mailbox, and what piles up
 * there while its predecessor runs a whole time slice set the peak: the
 * page faults of touching it took about half the CPU time and followed the
 * scheduler, not the allocator (bench/README.md).
 *
 * A thread that has made its ITERS allocations and freed its slots keeps
 * freeing what it is handed (every 100 us, asleep in between) until every
 * thread has finished; then it frees what is left, and the run ends with no
 * block outstanding.  Before, a finished thread stopped draining: its
 * predecessor kept handing it a fifth of its frees, which stayed allocated
 * until the join, so the footprint depended on the order in which threads
 * finished (peak RSS varied 2x run to run under every allocator).
 *
 * Operations = 2 * THREADS * ITERS (every block is allocated once and freed
 * once).  The checksum sums the two bytes of every block when it is released;
 * it does not depend on scheduling.
 */
#include "bench_xthread.h"
#include <pthread.h>
#include <time.h>

static const char *USAGE = "THREADS ITERS WS [CROSS_PCT [SEED]]";
static const char *prog = "bench_sizemix";

struct worker {
    struct bench_mailbox inbox;
    pthread_t tid;
    uint64_t index, checksum, handed, late;
};

static struct worker *workers;
static uint64_t n_threads, n_iters, ws, cross_pct, seed;
static pthread_barrier_t start;
/* Threads still making their allocations. Every push into a mailbox comes
 * before its sender's decrement (release); a thread that reads 0 (acquire)
 * and then drains frees the last blocks anyone handed it. */
static _Atomic uint64_t running;

/* After its own work: free what the predecessor hands over while any thread
 * still runs, then the rest.  Returns how many blocks it freed here.  The
 * 100 us sleep keeps a finished thread off the CPU the others need (more
 * threads than cores) while bounding what waits in its mailbox to what the
 * predecessor hands over in one nap (about 1 MB at 5 KB a block on average,
 * against the ~5 MB each thread keeps live). */
static uint64_t drain_until_all_done(struct bench_mailbox *inbox)
{
    const struct timespec nap = { 0, 100 * 1000 };
    uint64_t n = 0;
    atomic_fetch_sub_explicit(&running, 1, memory_order_release);
    for (;;) {
        uint64_t left = atomic_load_explicit(&running, memory_order_acquire);
        n += bench_mailbox_drain(inbox);
        if (left == 0)
            return n;
        nanosleep(&nap, NULL);
    }
}

static size_t pick_size(uint64_t r)
{
    uint32_t bucket = bench_range((uint32_t)r, 100);
    uint32_t u = (uint32_t)(r >> 32);
    if (bucket < 60)
        return 16 + bench_range(u, 113);                 /* 16..128 */
    if (bucket < 85)
        return 129 + bench_range(u, 1024 - 128);         /* 129..1024 */
    if (bucket < 95)
        return 1025 + bench_range(u, 8192 - 1024);       /* 1K..8K */
    if (bucket < 99)
        return 8193 + bench_range(u, 65536 - 8192);      /* 8K..64K */
    return 65537 + bench_range(u, 524288 - 65536);       /* 64K..512K */
}

static void *run(void *arg)
{
    struct worker *w = arg;
    struct bench_mailbox *next = &workers[(w->index + 1) % n_threads].inbox;
    uint64_t rng = bench_rng_seed(seed * 7919u + w->index);
    const uint32_t cross = (uint32_t)(cross_pct * 65536 / 100);
    unsigned char **slot = calloc(ws, sizeof(*slot));
    size_t *size = calloc(ws, sizeof(*size));
    if (!slot || !size)
        bench_oom(prog, ws * sizeof(*slot));
    uint64_t checksum = 0, handed = 0;
    bench_start_wait(&start);
    for (uint64_t i = 0; i < n_iters; i++) {
        uint64_t r = bench_rng_next(&rng);
        uint32_t idx = bench_range((uint32_t)(r >> 32), (uint32_t)ws);
        unsigned char *p = slot[idx];
        if (p) {
            checksum += (uint64_t)p[0] + p[size[idx] - 1];
            if (((uint32_t)r & 0xffff) < cross) {
                bench_mailbox_push(next, p);
                handed++;
            } else {
                free(p);
            }
        }
        size_t sz = pick_size(bench_rng_next(&rng));
        p = malloc(sz);
        if (BENCH_UNLIKELY(!p))
            bench_oom(prog, sz);
        p[0] = (unsigned char)i;
        p[sz - 1] = (unsigned char)(w->index + sz);
        slot[idx] = p;
        size[idx] = sz;
        if ((i & 63) == 63)
            bench_mailbox_drain(&w->inbox);
    }
    for (uint64_t k = 0; k < ws; k++) {
        if (slot[k]) {
            checksum += (uint64_t)slot[k][0] + slot[k][size[k] - 1];
            free(slot[k]);
        }
    }
    free(slot);
    free(size);
    w->late = drain_until_all_done(&w->inbox);
    w->checksum = checksum;
    w->handed = handed;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 6) {
        fprintf(stderr, "usage: %s %s\n", prog, USAGE);
        return 2;
    }
    n_threads = bench_arg_u64(prog, USAGE, argv[1]);
    n_iters = bench_arg_u64(prog, USAGE, argv[2]);
    ws = bench_arg_u64(prog, USAGE, argv[3]);
    cross_pct = argc >= 5 ? bench_arg_u64(prog, USAGE, argv[4]) : 20;
    seed = argc >= 6 ? bench_arg_u64(prog, USAGE, argv[5]) : 1;
    if (n_threads == 0 || n_threads > 1024 || ws == 0 || ws > (1u << 26) || cross_pct > 100)
        bench_die(prog, "need THREADS 1..1024, WS 1..2^26, CROSS_PCT <= 100");

    workers = aligned_alloc(64, n_threads * sizeof(*workers));
    if (!workers)
        bench_oom(prog, n_threads * sizeof(*workers));
    memset(workers, 0, n_threads * sizeof(*workers));
    pthread_barrier_init(&start, NULL, (unsigned)(n_threads + 1));
    atomic_init(&running, n_threads);
    for (uint64_t t = 0; t < n_threads; t++) {
        workers[t].index = t;
        atomic_init(&workers[t].inbox.head, NULL);
        if (pthread_create(&workers[t].tid, NULL, run, &workers[t]) != 0)
            bench_die(prog, "pthread_create failed");
    }
    double t0 = bench_start_clock(&start);
    for (uint64_t t = 0; t < n_threads; t++)
        pthread_join(workers[t].tid, NULL);
    double secs = bench_now() - t0;
    uint64_t checksum = 0, handed = 0, late = 0;
    for (uint64_t t = 0; t < n_threads; t++) {
        if (atomic_load_explicit(&workers[t].inbox.head, memory_order_relaxed))
            bench_die(prog, "a mailbox was not empty after the join");
        checksum += workers[t].checksum;
        handed += workers[t].handed;
        late += workers[t].late;
    }
    pthread_barrier_destroy(&start);
    free(workers);

    printf("%s threads=%llu iters=%llu ws=%llu cross_pct=%llu seed=%llu handed=%llu late=%llu", prog,
           (unsigned long long)n_threads, (unsigned long long)n_iters, (unsigned long long)ws,
           (unsigned long long)cross_pct, (unsigned long long)seed, (unsigned long long)handed,
           (unsigned long long)late);
    bench_print_tail(2 * n_threads * n_iters, secs, checksum);
    return 0;
}
