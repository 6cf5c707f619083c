/* bench_mid_large_mt THREADS ITERS WS [MIN MAX [SEED]]
 *
 * THREADS threads, each with its own table of WS slots and its own random
 * stream, run ITERS iterations of the random-mixed loop with sizes in
 * MIN..MAX (default 1K..32K; pass e.g. 64K 4M for the large variant).  The
 * first and the last byte of every block are written and read back at free.
 * Operations = THREADS * ITERS (each one malloc or one free); the clock runs
 * from the moment all threads are released until the last one finishes.
 */
#include "bench_common.h"
#include <pthread.h>

static const char *USAGE = "THREADS ITERS WS [MIN MAX [SEED]]";
static const char *prog = "bench_mid_large_mt";

struct worker {
    pthread_t tid;
    unsigned index;
    uint64_t iters, ws, min, max, seed;
    pthread_barrier_t *start;
    uint64_t checksum;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    unsigned char **slots = calloc(w->ws, sizeof(*slots));
    size_t *sizes = calloc(w->ws, sizeof(*sizes));
    if (!slots || !sizes)
        bench_oom(prog, w->ws * sizeof(*slots));
    uint64_t rng = bench_rng_seed(w->seed * 1000003u + w->index);
    const uint32_t nslots = (uint32_t)w->ws;
    const uint32_t span = (uint32_t)(w->max - w->min + 1);
    uint64_t checksum = 0;

    bench_start_wait(w->start);
    for (uint64_t i = 0; i < w->iters; i++) {
        uint64_t r = bench_rng_next(&rng);
        uint32_t idx = bench_range((uint32_t)(r >> 32), nslots);
        unsigned char *p = slots[idx];
        if (p) {
            checksum += p[0] + p[sizes[idx] - 1];
            free(p);
            slots[idx] = NULL;
        } else {
            size_t sz = (size_t)w->min + bench_range((uint32_t)r, span);
            p = malloc(sz);
            if (BENCH_UNLIKELY(!p))
                bench_oom(prog, sz);
            p[0] = (unsigned char)i;
            p[sz - 1] = (unsigned char)(i >> 8);
            slots[idx] = p;
            sizes[idx] = sz;
        }
    }
    pthread_barrier_wait(w->start);   /* the clock stops when all are here */
    for (uint32_t i = 0; i < nslots; i++) {
        if (slots[i]) {
            checksum += slots[i][0] + slots[i][sizes[i] - 1];
            free(slots[i]);
        }
    }
    free(slots);
    free(sizes);
    w->checksum = checksum;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 6 && argc != 7) {
        fprintf(stderr, "usage: %s %s\n", prog, USAGE);
        return 2;
    }
    uint64_t threads = bench_arg_u64(prog, USAGE, argv[1]);
    uint64_t iters = bench_arg_u64(prog, USAGE, argv[2]);
    uint64_t ws = bench_arg_u64(prog, USAGE, argv[3]);
    uint64_t min = 1024, max = 32768, seed = 1;
    if (argc >= 6) {
        min = bench_arg_size(prog, USAGE, argv[4]);
        max = bench_arg_size(prog, USAGE, argv[5]);
    }
    if (argc == 7)
        seed = bench_arg_u64(prog, USAGE, argv[6]);
    if (threads == 0 || threads > 1024 || ws == 0 || ws > (1u << 28) || min == 0 ||
        max < min || max - min >= UINT32_MAX)
        bench_die(prog, "need THREADS in 1..1024, WS in 1..2^28, 1 <= MIN <= MAX");

    struct worker *w = calloc(threads, sizeof(*w));
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    for (unsigned t = 0; t < threads; t++) {
        w[t] = (struct worker){ .index = t, .iters = iters, .ws = ws, .min = min,
                                .max = max, .seed = seed, .start = &start };
        if (pthread_create(&w[t].tid, NULL, worker_main, &w[t]) != 0)
            bench_die(prog, "pthread_create failed");
    }
    double t0 = bench_start_clock(&start);
    pthread_barrier_wait(&start);
    double secs = bench_now() - t0;
    uint64_t checksum = 0;
    for (unsigned t = 0; t < threads; t++) {
        pthread_join(w[t].tid, NULL);
        checksum += w[t].checksum;
    }
    pthread_barrier_destroy(&start);
    free(w);

    printf("%s threads=%llu iters=%llu ws=%llu min=%llu max=%llu seed=%llu", prog,
           (unsigned long long)threads, (unsigned long long)iters, (unsigned long long)ws,
           (unsigned long long)min, (unsigned long long)max, (unsigned long long)seed);
    bench_print_tail(threads * iters, secs, checksum);
    return 0;
}
