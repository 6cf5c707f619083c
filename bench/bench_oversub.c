/* bench_oversub THREADS ITERS WS [REMOTE_PCT [MIN MAX [SEED]]]
 *
 * Many more threads than cores (the runner uses 8x and 16x the core count),
 * all running at once: each does ITERS steps of the random-mixed loop over its
 * own WS slots (a random slot is freed if it holds a block, else filled with
 * MIN..MAX bytes, default 16..1024, first and last byte written).  With chance
 * REMOTE_PCT percent (default 10) a block is not freed by its thread but
 * handed to the mailbox of the next thread still at work, which frees its
 * mailbox every 64 steps and at its end; the main thread frees what is left
 * after the join (blocks handed in the instant a thread finished).  With
 * this many threads on few cores, a thread is often preempted inside the
 * allocator, so whatever it holds then (a lock) stalls the others.
 *
 * A thread that has finished is skipped (its own thread frees the block when
 * no other is at work).  Before, blocks went on being handed to a finished
 * thread until the join: 22-47% of the handed blocks (bench_oversub 32
 * 100000 400, 2 cores), 23-41 MB where the slots hold about 3 MB, so the
 * footprint and page faults measured the order in which threads finished,
 * for every allocator alike (bench_sizemix had the same fault, 56e3a2e).
 *
 * The clock starts once every worker waits at the start barrier and before
 * main releases them (bench_start_clock): read after the release, main was
 * often descheduled by the workers it had just woken, and the clock missed
 * their first milliseconds of work (up to 55 ms of a 0.1-0.2 s run on a busy
 * 2-core machine).
 *
 * Operations = THREADS * ITERS (each step is one malloc or one free, a handed
 * block counting as its free); the blocks left in the slots at the end are
 * freed inside the clock but not counted.  The checksum sums the two bytes of
 * every block when it is released.
 */
#include "bench_xthread.h"
#include <pthread.h>

static const char *USAGE = "THREADS ITERS WS [REMOTE_PCT [MIN MAX [SEED]]]";
static const char *prog = "bench_oversub";

struct worker {
    struct bench_mailbox inbox;
    pthread_t tid;
    uint64_t index, checksum, handed;
    _Atomic int done; /* set once the thread has finished its steps */
};

static struct worker *workers;
static uint64_t n_threads, n_iters, ws, remote_pct, min_size, max_size, seed;
static pthread_barrier_t start;

static void *run(void *arg)
{
    struct worker *w = arg;
    struct worker *next = &workers[(w->index + 1) % n_threads];
    uint64_t rng = bench_rng_seed(seed * 104729u + w->index);
    const uint32_t remote = (uint32_t)(remote_pct * 65536 / 100);
    const uint32_t span = (uint32_t)(max_size - min_size + 1);
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
            if (((uint32_t)r & 0xffff) < remote) {
                /* done only ever goes 0 -> 1: a skipped thread stays skipped. */
                while (next != w && atomic_load_explicit(&next->done, memory_order_relaxed))
                    next = &workers[(next->index + 1) % n_threads];
                if (next != w) {
                    bench_mailbox_push(&next->inbox, p);
                    handed++;
                } else {
                    free(p);
                }
            } else {
                free(p);
            }
            slot[idx] = NULL;
        } else {
            size_t sz = (size_t)min_size + bench_range((uint32_t)r, span);
            p = malloc(sz);
            if (BENCH_UNLIKELY(!p))
                bench_oom(prog, sz);
            p[0] = (unsigned char)i;
            p[sz - 1] = (unsigned char)(w->index + sz);
            slot[idx] = p;
            size[idx] = sz;
        }
        if ((i & 63) == 63)
            bench_mailbox_drain(&w->inbox);
    }
    for (uint64_t k = 0; k < ws; k++) {
        if (slot[k]) {
            checksum += (uint64_t)slot[k][0] + slot[k][size[k] - 1];
            free(slot[k]);
        }
    }
    atomic_store_explicit(&w->done, 1, memory_order_relaxed);
    bench_mailbox_drain(&w->inbox);
    free(slot);
    free(size);
    w->checksum = checksum;
    w->handed = handed;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 5 && argc != 7 && argc != 8) {
        fprintf(stderr, "usage: %s %s\n", prog, USAGE);
        return 2;
    }
    n_threads = bench_arg_u64(prog, USAGE, argv[1]);
    n_iters = bench_arg_u64(prog, USAGE, argv[2]);
    ws = bench_arg_u64(prog, USAGE, argv[3]);
    remote_pct = argc >= 5 ? bench_arg_u64(prog, USAGE, argv[4]) : 10;
    min_size = 16;
    max_size = 1024;
    if (argc >= 7) {
        min_size = bench_arg_size(prog, USAGE, argv[5]);
        max_size = bench_arg_size(prog, USAGE, argv[6]);
    }
    seed = argc == 8 ? bench_arg_u64(prog, USAGE, argv[7]) : 1;
    if (n_threads == 0 || n_threads > 4096 || ws == 0 || ws > (1u << 26) || remote_pct > 100 ||
        min_size < sizeof(void *) || max_size < min_size || max_size - min_size >= UINT32_MAX)
        bench_die(prog, "need THREADS 1..4096, WS 1..2^26, REMOTE_PCT <= 100, 8 <= MIN <= MAX");

    workers = aligned_alloc(64, n_threads * sizeof(*workers));
    if (!workers)
        bench_oom(prog, n_threads * sizeof(*workers));
    memset(workers, 0, n_threads * sizeof(*workers));
    pthread_barrier_init(&start, NULL, (unsigned)(n_threads + 1));
    for (uint64_t t = 0; t < n_threads; t++) {
        workers[t].index = t;
        atomic_init(&workers[t].inbox.head, NULL);
        atomic_init(&workers[t].done, 0);
        if (pthread_create(&workers[t].tid, NULL, run, &workers[t]) != 0)
            bench_die(prog, "pthread_create failed");
    }
    double t0 = bench_start_clock(&start);
    for (uint64_t t = 0; t < n_threads; t++)
        pthread_join(workers[t].tid, NULL);
    double secs = bench_now() - t0;
    uint64_t checksum = 0, handed = 0;
    for (uint64_t t = 0; t < n_threads; t++) {
        bench_mailbox_drain(&workers[t].inbox);
        checksum += workers[t].checksum;
        handed += workers[t].handed;
    }
    pthread_barrier_destroy(&start);
    free(workers);

    printf("%s threads=%llu iters=%llu ws=%llu remote_pct=%llu min=%llu max=%llu seed=%llu "
           "handed=%llu", prog, (unsigned long long)n_threads, (unsigned long long)n_iters,
           (unsigned long long)ws, (unsigned long long)remote_pct,
           (unsigned long long)min_size, (unsigned long long)max_size,
           (unsigned long long)seed, (unsigned long long)handed);
    bench_print_tail(n_threads * n_iters, secs, checksum);
    return 0;
}
