/* bench_larson THREADS ROUNDS ITERS CHUNKS [MIN MAX [SEED [REMOTE_PCT]]]
 *
 * A Larson-style server simulation with fixed work.  There are THREADS
 * lineages; each owns a table of CHUNKS blocks, filled by the main thread
 * before the clock starts.  The run has ROUNDS rounds; in each round every
 * lineage gets a new thread that does ITERS iterations (pick a random victim
 * block, free it, allocate a new block of MIN..MAX bytes (default 8..1000) in
 * its place, write two bytes) and exits; so most blocks are freed by a thread
 * other than the one that allocated it, after that thread has gone.  In
 * addition REMOTE_PCT percent (default 25) of the victims are not freed by the
 * thread that picked them but handed to the thread of the next lineage
 * through a lock-free mailbox, drained every 64 iterations and at the end of
 * each thread (blocks that arrive later are freed by the next round's
 * thread), like a server passing buffers between workers.  The rounds are
 * joined one after the other, which bounds the blocks in flight; the work,
 * the hand-overs ("handed=") and the checksum do not depend on scheduling.
 *
 * Operations = 2 * THREADS * ROUNDS * ITERS (one free and one malloc per
 * iteration).  The clock covers all rounds, thread creation included.
 */
#include "bench_common.h"
#include <pthread.h>
#include <stdatomic.h>

static const char *USAGE = "THREADS ROUNDS ITERS CHUNKS [MIN MAX [SEED [REMOTE_PCT]]]";
static const char *prog = "bench_larson";

struct lineage {
    _Alignas(64) _Atomic(void *) mailbox;   /* blocks handed to this lineage */
    _Alignas(64) unsigned index;
    pthread_t tid;
    unsigned char **blocks;
    uint64_t rng;
    uint64_t round;
    uint64_t checksum;
    uint64_t handed;             /* blocks this lineage handed to the next */
};

static struct lineage *lines;
static uint64_t n_lines, n_rounds, n_iters, n_chunks, min_size, max_size, remote_pct;

static void mailbox_push(struct lineage *to, void *block)
{
    void *head = atomic_load_explicit(&to->mailbox, memory_order_relaxed);
    do {
        *(void **)block = head;
    } while (!atomic_compare_exchange_weak_explicit(&to->mailbox, &head, block,
                                                    memory_order_release,
                                                    memory_order_relaxed));
}

static void mailbox_drain(struct lineage *l)
{
    void *b = atomic_exchange_explicit(&l->mailbox, NULL, memory_order_acquire);
    while (b) {
        void *next = *(void **)b;
        free(b);
        b = next;
    }
}

static void *generation(void *arg)
{
    struct lineage *l = arg;
    struct lineage *next_line = &lines[(l->index + 1) % n_lines];
    const uint32_t span = (uint32_t)(max_size - min_size + 1);
    const uint32_t nchunks = (uint32_t)n_chunks;
    const uint32_t remote_threshold = (uint32_t)(remote_pct * 65536 / 100);
    uint64_t rng = l->rng, checksum = l->checksum, handed = 0;

    mailbox_drain(l);
    for (uint64_t i = 0; i < n_iters; i++) {
        uint64_t r = bench_rng_next(&rng);
        uint32_t victim = bench_range((uint32_t)(r >> 32), nchunks);
        unsigned char *p = l->blocks[victim];
        checksum += p[0] + p[1];
        if (((uint32_t)r & 0xffff) < remote_threshold) {
            mailbox_push(next_line, p);
            handed++;
        } else {
            free(p);
        }
        size_t sz = (size_t)min_size + bench_range((uint32_t)bench_rng_next(&rng), span);
        p = malloc(sz);
        if (BENCH_UNLIKELY(!p))
            bench_oom(prog, sz);
        p[0] = (unsigned char)i;
        p[1] = (unsigned char)(l->round + l->index);
        l->blocks[victim] = p;
        if ((i & 63) == 63)
            mailbox_drain(l);
    }
    mailbox_drain(l);
    l->rng = rng;
    l->checksum = checksum;
    l->handed += handed;
    l->round++;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 5 && argc != 7 && argc != 8 && argc != 9) {
        fprintf(stderr, "usage: %s %s\n", prog, USAGE);
        return 2;
    }
    n_lines = bench_arg_u64(prog, USAGE, argv[1]);
    n_rounds = bench_arg_u64(prog, USAGE, argv[2]);
    n_iters = bench_arg_u64(prog, USAGE, argv[3]);
    n_chunks = bench_arg_u64(prog, USAGE, argv[4]);
    min_size = 8;
    max_size = 1000;
    uint64_t seed = 1;
    remote_pct = 25;
    if (argc >= 7) {
        min_size = bench_arg_size(prog, USAGE, argv[5]);
        max_size = bench_arg_size(prog, USAGE, argv[6]);
    }
    if (argc >= 8)
        seed = bench_arg_u64(prog, USAGE, argv[7]);
    if (argc >= 9)
        remote_pct = bench_arg_u64(prog, USAGE, argv[8]);
    if (n_lines == 0 || n_lines > 1024 || n_rounds == 0 || n_chunks == 0 ||
        n_chunks > (1u << 28) || min_size < sizeof(void *) || max_size < min_size ||
        max_size - min_size >= UINT32_MAX || remote_pct > 100)
        bench_die(prog, "need THREADS 1..1024, ROUNDS >= 1, CHUNKS 1..2^28, "
                        "8 <= MIN <= MAX, REMOTE_PCT <= 100");

    lines = aligned_alloc(64, sizeof(*lines) * n_lines);
    if (!lines)
        bench_oom(prog, sizeof(*lines) * n_lines);
    const uint32_t span = (uint32_t)(max_size - min_size + 1);
    for (unsigned t = 0; t < n_lines; t++) {
        struct lineage *l = &lines[t];
        memset(l, 0, sizeof(*l));
        l->index = t;
        l->rng = bench_rng_seed(seed * 7919u + t);
        atomic_init(&l->mailbox, NULL);
        l->blocks = calloc(n_chunks, sizeof(*l->blocks));
        if (!l->blocks)
            bench_oom(prog, n_chunks * sizeof(*l->blocks));
        for (uint64_t c = 0; c < n_chunks; c++) {
            size_t sz = (size_t)min_size + bench_range((uint32_t)bench_rng_next(&l->rng), span);
            unsigned char *p = malloc(sz);
            if (!p)
                bench_oom(prog, sz);
            p[0] = (unsigned char)c;
            p[1] = (unsigned char)t;
            l->blocks[c] = p;
        }
    }

    double t0 = bench_now();
    for (uint64_t r = 0; r < n_rounds; r++) {
        for (unsigned t = 0; t < n_lines; t++)
            if (pthread_create(&lines[t].tid, NULL, generation, &lines[t]) != 0)
                bench_die(prog, "pthread_create failed");
        for (unsigned t = 0; t < n_lines; t++)
            pthread_join(lines[t].tid, NULL);
    }
    double secs = bench_now() - t0;

    uint64_t checksum = 0, handed = 0;
    for (unsigned t = 0; t < n_lines; t++) {
        struct lineage *l = &lines[t];
        mailbox_drain(l);
        checksum += l->checksum;
        handed += l->handed;
        for (uint64_t c = 0; c < n_chunks; c++) {
            checksum += l->blocks[c][0] + l->blocks[c][1];
            free(l->blocks[c]);
        }
        free(l->blocks);
    }
    free(lines);

    printf("%s threads=%llu rounds=%llu iters=%llu chunks=%llu min=%llu max=%llu seed=%llu "
           "remote_pct=%llu handed=%llu", prog, (unsigned long long)n_lines,
           (unsigned long long)n_rounds, (unsigned long long)n_iters,
           (unsigned long long)n_chunks, (unsigned long long)min_size,
           (unsigned long long)max_size, (unsigned long long)seed,
           (unsigned long long)remote_pct, (unsigned long long)handed);
    bench_print_tail(2 * n_lines * n_rounds * n_iters, secs, checksum);
    return 0;
}
