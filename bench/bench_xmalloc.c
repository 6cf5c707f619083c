/* bench_xmalloc PRODUCERS CONSUMERS BATCHES [SIZE [BATCH [DEPTH [PIN]]]]
 *
 * Batches of blocks handed from producer threads to consumer threads through
 * one mutex-protected queue (the shape of the xmalloc-test program).  Each
 * producer allocates BATCHES batches; a batch is a malloc'd holder of BATCH
 * (default 4096) pointers to blocks of SIZE (default 64) bytes, each with its
 * first and last byte written.  Whole batches go on a FIFO queue protected by
 * a mutex and two condition variables; at most DEPTH (default 16) batches
 * wait in it, so producers block when consumers fall behind, which bounds the
 * memory in flight.  Consumers take whole batches, read each block and free
 * it, then free the holder: every block is freed by a thread other than its
 * allocator, in runs of thousands from the same pages.
 *
 * Operations = 2 * PRODUCERS * BATCHES * (BATCH + 1) (a malloc and a free per
 * block and per holder).  The checksum sums the bytes the consumers read; it
 * does not depend on which consumer got which batch.
 *
 * PIN (default 0) = 1 pins every producer to the first CPU the process may
 * run on and every consumer to the second (pthread_setaffinity_np, each
 * thread at its start): every block then crosses cores, whatever the
 * scheduler would have done. Unpinned, the scheduler decides where the
 * threads run and the runs are bimodal: threads sharing one CPU keep every
 * block in that core's caches, producers and consumers on two cores pay
 * for every block's trip, and a loaded host mixes the two from run to
 * run. The runner's row does not pin (it measures what a program gets);
 * PIN isolates the cross-core mode for an A/B comparison (`taskset -c 0`
 * gives the other mode). A process allowed one CPU only pins both there;
 * the result line's pin_producers= and pin_consumers= say where they ran.
 */
#include "bench_common.h"
#include <pthread.h>
#include <sched.h>

static const char *USAGE = "PRODUCERS CONSUMERS BATCHES [SIZE [BATCH [DEPTH [PIN]]]]";
static const char *prog = "bench_xmalloc";

struct batch {
    struct batch *next;          /* queue link */
    uint64_t count;
    unsigned char *block[];
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t not_empty, not_full;
    struct batch *head, *tail;
    uint64_t depth, max_depth;
    uint64_t producers_left;     /* producers still running */
} queue = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
            NULL, NULL, 0, 0, 0 };

static uint64_t n_batches, block_size, batch_len;
static int pin_cpu[2] = { -1, -1 }; /* producers', consumers' CPU with PIN=1 */
static pthread_barrier_t start;

static void queue_put(struct batch *b)
{
    pthread_mutex_lock(&queue.lock);
    while (queue.depth >= queue.max_depth)
        pthread_cond_wait(&queue.not_full, &queue.lock);
    b->next = NULL;
    if (queue.tail)
        queue.tail->next = b;
    else
        queue.head = b;
    queue.tail = b;
    queue.depth++;
    pthread_cond_signal(&queue.not_empty);
    pthread_mutex_unlock(&queue.lock);
}

/* NULL once every producer has finished and the queue is empty. */
static struct batch *queue_take(void)
{
    pthread_mutex_lock(&queue.lock);
    while (!queue.head && queue.producers_left > 0)
        pthread_cond_wait(&queue.not_empty, &queue.lock);
    struct batch *b = queue.head;
    if (b) {
        queue.head = b->next;
        if (!queue.head)
            queue.tail = NULL;
        queue.depth--;
        pthread_cond_signal(&queue.not_full);
    }
    pthread_mutex_unlock(&queue.lock);
    return b;
}

static void producer_done(void)
{
    pthread_mutex_lock(&queue.lock);
    if (--queue.producers_left == 0)
        pthread_cond_broadcast(&queue.not_empty);
    pthread_mutex_unlock(&queue.lock);
}

/* PIN=1: the calling thread onto CPU cpu (a failure ends the run: a run
 * that was asked to pin and did not would measure the other mode). */
static void pin_to(int cpu)
{
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0)
        bench_die(prog, "PIN: pthread_setaffinity_np failed");
}

static void *producer(void *arg)
{
    uint64_t index = (uint64_t)(uintptr_t)arg;
    size_t holder = sizeof(struct batch) + batch_len * sizeof(unsigned char *);
    pin_to(pin_cpu[0]);
    bench_start_wait(&start);
    for (uint64_t n = 0; n < n_batches; n++) {
        struct batch *b = malloc(holder);
        if (BENCH_UNLIKELY(!b))
            bench_oom(prog, holder);
        b->count = batch_len;
        unsigned char tag = (unsigned char)(index * 31 + n);
        for (uint64_t i = 0; i < batch_len; i++) {
            unsigned char *p = malloc(block_size);
            if (BENCH_UNLIKELY(!p))
                bench_oom(prog, block_size);
            p[0] = (unsigned char)(tag + i);
            p[block_size - 1] = tag;
            b->block[i] = p;
        }
        queue_put(b);
    }
    producer_done();
    return NULL;
}

static void *consumer(void *arg)
{
    uint64_t *checksum = arg;
    uint64_t sum = 0;
    struct batch *b;
    pin_to(pin_cpu[1]);
    bench_start_wait(&start);
    while ((b = queue_take()) != NULL) {
        for (uint64_t i = 0; i < b->count; i++) {
            unsigned char *p = b->block[i];
            sum += (uint64_t)p[0] + p[block_size - 1];
            free(p);
        }
        free(b);
    }
    *checksum = sum;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 8) {
        fprintf(stderr, "usage: %s %s\n", prog, USAGE);
        return 2;
    }
    uint64_t producers = bench_arg_u64(prog, USAGE, argv[1]);
    uint64_t consumers = bench_arg_u64(prog, USAGE, argv[2]);
    n_batches = bench_arg_u64(prog, USAGE, argv[3]);
    block_size = argc >= 5 ? bench_arg_size(prog, USAGE, argv[4]) : 64;
    batch_len = argc >= 6 ? bench_arg_u64(prog, USAGE, argv[5]) : 4096;
    uint64_t depth = argc >= 7 ? bench_arg_u64(prog, USAGE, argv[6]) : 16;
    uint64_t pin = argc >= 8 ? bench_arg_u64(prog, USAGE, argv[7]) : 0;
    if (producers == 0 || producers > 512 || consumers == 0 || consumers > 512 ||
        block_size == 0 || block_size > (1u << 30) || batch_len == 0 ||
        batch_len > (1u << 24) || depth == 0 || pin > 1)
        bench_die(prog, "need PRODUCERS and CONSUMERS 1..512, SIZE 1..1G, BATCH 1..2^24, "
                        "DEPTH >= 1, PIN 0 or 1");
    if (pin) {
        cpu_set_t set;
        if (sched_getaffinity(0, sizeof(set), &set) != 0)
            bench_die(prog, "PIN: sched_getaffinity failed");
        for (int c = 0, k = 0; c < CPU_SETSIZE && k < 2; c++)
            if (CPU_ISSET(c, &set))
                pin_cpu[k++] = c;
        if (pin_cpu[1] < 0) /* one CPU: both there (the result line says so) */
            pin_cpu[1] = pin_cpu[0];
    }
    queue.max_depth = depth;
    queue.producers_left = producers;

    pthread_t *tids = calloc(producers + consumers, sizeof(*tids));
    uint64_t *sums = calloc(consumers, sizeof(*sums));
    if (!tids || !sums)
        bench_oom(prog, (producers + consumers) * sizeof(*tids));
    pthread_barrier_init(&start, NULL, (unsigned)(producers + consumers + 1));
    for (uint64_t i = 0; i < consumers; i++)
        if (pthread_create(&tids[i], NULL, consumer, &sums[i]) != 0)
            bench_die(prog, "pthread_create failed");
    for (uint64_t i = 0; i < producers; i++)
        if (pthread_create(&tids[consumers + i], NULL, producer, (void *)(uintptr_t)i) != 0)
            bench_die(prog, "pthread_create failed");
    double t0 = bench_start_clock(&start);
    for (uint64_t i = 0; i < producers + consumers; i++)
        pthread_join(tids[i], NULL);
    double secs = bench_now() - t0;
    uint64_t checksum = 0;
    for (uint64_t i = 0; i < consumers; i++)
        checksum += sums[i];
    pthread_barrier_destroy(&start);
    free(tids);
    free(sums);

    printf("%s producers=%llu consumers=%llu batches=%llu size=%llu batch=%llu depth=%llu",
           prog, (unsigned long long)producers, (unsigned long long)consumers,
           (unsigned long long)n_batches, (unsigned long long)block_size,
           (unsigned long long)batch_len, (unsigned long long)depth);
    if (pin)
        printf(" pin_producers=%d pin_consumers=%d", pin_cpu[0], pin_cpu[1]);
    bench_print_tail(2 * producers * n_batches * (batch_len + 1), secs, checksum);
    return 0;
}
