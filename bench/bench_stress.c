/* bench_stress THREADS SCALE ROUNDS [SEED]
 *
 * Threads re-created every round that exchange blocks through a shared array,
 * with every block's contents checked on free (the shape of mimalloc's
 * test-stress, e.g. `32 50 50`).  Each round starts THREADS threads and joins
 * them.  Thread t of a round makes 100 * SCALE * (t % 8 + 1) short-lived
 * allocations and half as many retained ones, in random order:
 *   - a short-lived block has 1 << (r % 5) words (8..128 bytes), a retained
 *     one 1 << (r % 7) words (8..512 bytes); 1% of all blocks are 100 times
 *     larger and 0.1% 1000 times larger (up to 4 MiB);
 *   - after each allocation, with chance 66% a random short-lived slot is
 *     freed, and with chance 25% a random short-lived slot is swapped with a
 *     random entry of a shared array of 1000 pointers (an atomic exchange), so
 *     about a quarter of the blocks end up freed by another thread, often
 *     after their allocating thread has exited;
 *   - at exit the thread frees its retained blocks and what its slots hold.
 * Between rounds the main thread frees about half the shared entries (all of
 * them after the last round).  Every word of a block is written on allocation
 * and checked on free: a mismatch aborts with "corrupted block".
 *
 * Operations = 2 * blocks (each block is allocated once and freed once; the
 * count is checked).  The checksum sums the sizes read back from the blocks
 * when they are freed, so it does not depend on which thread freed what.
 * The clock covers all rounds, thread creation included.
 */
#include "bench_common.h"
#include <pthread.h>
#include <stdatomic.h>

static const char *USAGE = "THREADS SCALE ROUNDS [SEED]";
static const char *prog = "bench_stress";

#define TRANSFERS 1000

static _Atomic(uintptr_t *) transfer[TRANSFERS];
static uint64_t n_threads, scale, seed;
static uintptr_t cookie;

struct worker {
    pthread_t tid;
    uint64_t index, round;
    uint64_t allocated, freed, checksum;
};

static inline int chance(uint64_t *rng, unsigned pct)
{
    return bench_range((uint32_t)(bench_rng_next(rng) >> 32), 100) < pct;
}

static uintptr_t *alloc_block(uint64_t *rng, unsigned max_shift, uint64_t *allocated)
{
    size_t items = (size_t)1 << (bench_rng_next(rng) % max_shift);
    if (chance(rng, 1))
        items *= chance(rng, 10) ? 1000 : 100;
    uintptr_t *p = malloc(items * sizeof(uintptr_t));
    if (BENCH_UNLIKELY(!p))
        bench_oom(prog, items * sizeof(uintptr_t));
    for (size_t i = 0; i < items; i++)
        p[i] = (items - i) ^ cookie;
    (*allocated)++;
    return p;
}

static void free_block(uintptr_t *p, uint64_t *freed, uint64_t *checksum)
{
    if (!p)
        return;
    uintptr_t items = p[0] ^ cookie;
    if (items == 0 || items > (uintptr_t)1 << 20)
        goto bad;
    for (uintptr_t i = 0; i < items; i++)
        if ((p[i] ^ cookie) != items - i)
            goto bad;
    *checksum += items;
    (*freed)++;
    free(p);
    return;
bad:
    fprintf(stderr, "%s: corrupted block %p (first word %#lx)\n", prog, (void *)p,
            (unsigned long)p[0]);
    abort();
}

static void *stress(void *arg)
{
    struct worker *w = arg;
    uint64_t rng = bench_rng_seed(seed * 1000003u + w->round * n_threads + w->index);
    uint64_t allocs = 100 * scale * (w->index % 8 + 1);
    uint64_t retain = allocs / 2;
    uint64_t allocated = 0, freed = 0, checksum = 0;
    uintptr_t **data = malloc((allocs + 1) * sizeof(*data));
    uintptr_t **retained = malloc((retain + 1) * sizeof(*retained));
    if (!data || !retained)
        bench_oom(prog, (allocs + 1) * sizeof(*data));
    uint64_t data_top = 0, retain_top = 0;

    while (allocs > 0 || retain > 0) {
        if (retain == 0 || (allocs > 0 && chance(&rng, 50))) {
            data[data_top++] = alloc_block(&rng, 5, &allocated);
            allocs--;
        } else {
            retained[retain_top++] = alloc_block(&rng, 7, &allocated);
            retain--;
        }
        if (data_top > 0 && chance(&rng, 66)) {
            uint64_t idx = bench_range((uint32_t)bench_rng_next(&rng), (uint32_t)data_top);
            free_block(data[idx], &freed, &checksum);
            data[idx] = NULL;
        }
        if (data_top > 0 && chance(&rng, 25)) {
            uint64_t r = bench_rng_next(&rng);
            uint64_t idx = bench_range((uint32_t)r, (uint32_t)data_top);
            uint32_t slot = bench_range((uint32_t)(r >> 32), TRANSFERS);
            data[idx] = atomic_exchange_explicit(&transfer[slot], data[idx],
                                                 memory_order_acq_rel);
        }
    }
    for (uint64_t i = 0; i < retain_top; i++)
        free_block(retained[i], &freed, &checksum);
    for (uint64_t i = 0; i < data_top; i++)
        free_block(data[i], &freed, &checksum);
    free(retained);
    free(data);
    w->allocated += allocated;
    w->freed += freed;
    w->checksum += checksum;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: %s %s\n", prog, USAGE);
        return 2;
    }
    n_threads = bench_arg_u64(prog, USAGE, argv[1]);
    scale = bench_arg_u64(prog, USAGE, argv[2]);
    uint64_t rounds = bench_arg_u64(prog, USAGE, argv[3]);
    seed = argc == 5 ? bench_arg_u64(prog, USAGE, argv[4]) : 1;
    if (n_threads == 0 || n_threads > 1024 || scale == 0 || scale > 100000 || rounds == 0)
        bench_die(prog, "need THREADS 1..1024, SCALE 1..100000, ROUNDS >= 1");
    cookie = (uintptr_t)bench_rng_seed(seed) | 1;

    struct worker *ws = calloc(n_threads, sizeof(*ws));
    if (!ws)
        bench_oom(prog, n_threads * sizeof(*ws));
    uint64_t main_rng = bench_rng_seed(seed + 77);
    uint64_t main_freed = 0, checksum = 0;
    double t0 = bench_now();
    for (uint64_t r = 0; r < rounds; r++) {
        for (uint64_t t = 0; t < n_threads; t++) {
            ws[t].index = t;
            ws[t].round = r;
            if (pthread_create(&ws[t].tid, NULL, stress, &ws[t]) != 0)
                bench_die(prog, "pthread_create failed");
        }
        for (uint64_t t = 0; t < n_threads; t++)
            pthread_join(ws[t].tid, NULL);
        for (unsigned i = 0; i < TRANSFERS; i++)
            if (chance(&main_rng, 50) || r + 1 == rounds)
                free_block(atomic_exchange(&transfer[i], NULL), &main_freed, &checksum);
    }
    double secs = bench_now() - t0;

    uint64_t allocated = 0, freed = main_freed;
    for (uint64_t t = 0; t < n_threads; t++) {
        allocated += ws[t].allocated;
        freed += ws[t].freed;
        checksum += ws[t].checksum;
    }
    free(ws);
    if (freed != allocated) {
        fprintf(stderr, "%s: %llu blocks allocated but %llu freed\n", prog,
                (unsigned long long)allocated, (unsigned long long)freed);
        return 1;
    }
    printf("%s threads=%llu scale=%llu rounds=%llu seed=%llu blocks=%llu", prog,
           (unsigned long long)n_threads, (unsigned long long)scale,
           (unsigned long long)rounds, (unsigned long long)seed,
           (unsigned long long)allocated);
    bench_print_tail(2 * allocated, secs, checksum);
    return 0;
}
