/* bench_prodcons PAIRS ITEMS [MIN MAX [BATCH]]
 *
 * PAIRS producer threads and PAIRS consumer threads.  Producer i allocates
 * ITEMS blocks of MIN..MAX bytes (default 16..1024), writes the first and the
 * last byte and passes them, BATCH (default 64) at a time, through a bounded
 * single-producer/single-consumer ring to consumer i, which reads them and
 * frees them: every free is a cross-thread free.
 * Operations = 2 * PAIRS * ITEMS (one malloc and one free per item); the
 * clock runs from the release of all threads until the last consumer ends.
 *
 * Each consumer starts once its producer has filled the ring (4096 entries,
 * or as many whole batches as fit).
 * The ring fills anyway whenever the consumer loses its CPU for ~0.1 ms, and
 * then holds 4096 blocks (about 2 MB at the default sizes) plus the batch
 * the producer waits with.  Left to chance, that happened in some runs and
 * not in others, so peak RSS was bimodal under every allocator (2.5 or
 * 5 MB) and a median of 7 runs fell on either mode.  Filled once at the
 * start, every run reaches the same peak of blocks in flight.
 *
 * peak_live_kb: the most bytes (sizes as requested) allocated and not yet
 * freed, as each producer sees it after each batch it allocates (where the
 * figure peaks; it reads the consumer's published position, so it may
 * overstate by up to 63 blocks), summed over the pairs (an upper bound for
 * more than one).  Blocks above 4 KiB are touched only at both ends, so
 * their middle pages need not be resident.
 */
#include "bench_common.h"
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

static const char *USAGE = "PAIRS ITEMS [MIN MAX [BATCH]]";
static const char *prog = "bench_prodcons";

#define RING 4096u   /* entries per ring, a power of two */

struct ring {
    _Alignas(64) _Atomic uint64_t head;    /* consumer position */
    _Alignas(64) _Atomic uint64_t tail;    /* producer position */
    _Alignas(64) unsigned char *slot[RING];
};

struct pair {
    struct ring *ring;
    unsigned index;
    uint64_t items, min, max, batch;
    pthread_barrier_t *start;
    uint64_t checksum, peak_live;
};

static inline void cpu_relax(unsigned *spins)
{
    if (++*spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        __asm__ __volatile__("yield");
#endif
    } else {
        sched_yield();
    }
}

static void *producer(void *arg)
{
    struct pair *pr = arg;
    struct ring *rg = pr->ring;
    uint64_t rng = bench_rng_seed(4242u + pr->index);
    const uint32_t span = (uint32_t)(pr->max - pr->min + 1);
    unsigned char *batch[RING];
    /* before[i % 2*RING]: bytes allocated before item i.  At most RING + BATCH
     * <= 2*RING items are in flight, so the consumer's position is still in it
     * (and below the batch being sampled, so written). */
    uint64_t before[2 * RING];
    uint64_t n = 0, tail = 0, made = 0, peak_live = 0;
    bench_start_wait(pr->start);
    for (uint64_t i = 0; i < pr->items; i++) {
        size_t sz = (size_t)pr->min + bench_range((uint32_t)bench_rng_next(&rng), span);
        unsigned char *p = malloc(sz);
        if (BENCH_UNLIKELY(!p))
            bench_oom(prog, sz);
        p[0] = (unsigned char)i;
        p[sz - 1] = (unsigned char)(i >> 8);
        before[i & (2 * RING - 1)] = made;
        made += sz;
        batch[n++] = p;
        if (n == pr->batch || i + 1 == pr->items) {
            uint64_t head = atomic_load_explicit(&rg->head, memory_order_relaxed);
            uint64_t live = made - before[head & (2 * RING - 1)];
            if (live > peak_live)
                peak_live = live;
            unsigned spins = 0;
            while (tail + n - atomic_load_explicit(&rg->head, memory_order_acquire) > RING)
                cpu_relax(&spins);
            for (uint64_t k = 0; k < n; k++)
                rg->slot[(tail + k) & (RING - 1)] = batch[k];
            tail += n;
            atomic_store_explicit(&rg->tail, tail, memory_order_release);
            n = 0;
        }
    }
    pr->peak_live = peak_live;
    return NULL;
}

static void *consumer(void *arg)
{
    struct pair *pr = arg;
    struct ring *rg = pr->ring;
    uint64_t head = 0, checksum = 0;
    bench_start_wait(pr->start);
    /* Start at a full ring (see the opening comment): as many whole batches
     * as fit, or every item if there are fewer. */
    const uint64_t fit = RING / pr->batch * pr->batch;
    const uint64_t full = pr->items < fit ? pr->items : fit;
    unsigned spins = 0;
    while (atomic_load_explicit(&rg->tail, memory_order_acquire) < full)
        cpu_relax(&spins);
    while (head < pr->items) {
        uint64_t tail;
        spins = 0;
        while ((tail = atomic_load_explicit(&rg->tail, memory_order_acquire)) == head)
            cpu_relax(&spins);
        while (head < tail) {
            unsigned char *p = rg->slot[head & (RING - 1)];
            checksum += p[0];
            free(p);
            head++;
            if ((head & 63) == 0)
                atomic_store_explicit(&rg->head, head, memory_order_release);
        }
        atomic_store_explicit(&rg->head, head, memory_order_release);
    }
    pr->checksum = checksum;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 5 && argc != 6) {
        fprintf(stderr, "usage: %s %s\n", prog, USAGE);
        return 2;
    }
    uint64_t pairs = bench_arg_u64(prog, USAGE, argv[1]);
    uint64_t items = bench_arg_u64(prog, USAGE, argv[2]);
    uint64_t min = 16, max = 1024, batch = 64;
    if (argc >= 5) {
        min = bench_arg_size(prog, USAGE, argv[3]);
        max = bench_arg_size(prog, USAGE, argv[4]);
    }
    if (argc == 6)
        batch = bench_arg_u64(prog, USAGE, argv[5]);
    if (pairs == 0 || pairs > 512 || min == 0 || max < min || max - min >= UINT32_MAX ||
        batch == 0 || batch > RING)
        bench_die(prog, "need PAIRS 1..512, 1 <= MIN <= MAX, BATCH 1..4096");

    struct pair *prs = calloc(pairs, sizeof(*prs));
    pthread_t *tids = calloc(2 * pairs, sizeof(*tids));
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)(2 * pairs + 1));
    for (unsigned i = 0; i < pairs; i++) {
        struct ring *rg = aligned_alloc(64, sizeof(struct ring));
        if (!rg)
            bench_oom(prog, sizeof(struct ring));
        atomic_init(&rg->head, 0);
        atomic_init(&rg->tail, 0);
        prs[i] = (struct pair){ .ring = rg, .index = i, .items = items, .min = min,
                                .max = max, .batch = batch, .start = &start };
        if (pthread_create(&tids[2 * i], NULL, consumer, &prs[i]) != 0 ||
            pthread_create(&tids[2 * i + 1], NULL, producer, &prs[i]) != 0)
            bench_die(prog, "pthread_create failed");
    }
    double t0 = bench_start_clock(&start);
    for (unsigned i = 0; i < 2 * pairs; i++)
        pthread_join(tids[i], NULL);
    double secs = bench_now() - t0;
    uint64_t checksum = 0, peak_live = 0;
    for (unsigned i = 0; i < pairs; i++) {
        checksum += prs[i].checksum;
        peak_live += prs[i].peak_live;
        free(prs[i].ring);
    }
    pthread_barrier_destroy(&start);
    free(prs);
    free(tids);

    printf("%s pairs=%llu items=%llu min=%llu max=%llu batch=%llu peak_live_kb=%llu", prog,
           (unsigned long long)pairs, (unsigned long long)items, (unsigned long long)min,
           (unsigned long long)max, (unsigned long long)batch,
           (unsigned long long)((peak_live + 1023) / 1024));
    bench_print_tail(2 * pairs * items, secs, checksum);
    return 0;
}
