/* bench_fifo ITERS WS [SEED]
 *
 * One thread, a ring of WS blocks freed in the order they were allocated
 * (first in, first out): each iteration frees the oldest block and allocates
 * a new one of 16..1024 bytes, its first byte written. Unlike
 * bench_random_mixed (random slots, so a block is often freed soon after it
 * was made), every block lives exactly WS iterations, and the sizes come
 * from a different generator (a 32-bit xorshift, not the shared one), so
 * the loop is one that no allocator was tuned on. One iteration is two
 * operations (one free, one malloc).
 */
#include "bench_common.h"

static const char *USAGE = "ITERS WS [SEED]";

static inline uint32_t xorshift32(uint32_t *s)
{
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

int main(int argc, char **argv)
{
    const char *prog = "bench_fifo";
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s %s\n", prog, USAGE);
        return 2;
    }
    uint64_t iters = bench_arg_u64(prog, USAGE, argv[1]);
    uint64_t ws = bench_arg_u64(prog, USAGE, argv[2]);
    uint64_t seed = argc == 4 ? bench_arg_u64(prog, USAGE, argv[3]) : 1;
    if (ws == 0 || ws > (1u << 30))
        bench_die(prog, "need WS in 1..2^30");

    unsigned char **ring = calloc(ws, sizeof(void *));
    if (!ring)
        bench_oom(prog, ws * sizeof(void *));
    uint32_t rng = (uint32_t)(seed * 2654435761u) | 1u;
    uint64_t checksum = 0;

    double t0 = bench_now();
    uint64_t head = 0;
    for (uint64_t i = 0; i < iters; i++) {
        unsigned char *old = ring[head];
        if (old) {
            checksum += *old;
            free(old);
        }
        size_t sz = 16 + (xorshift32(&rng) & 1023) % 1009; /* 16..1024 */
        unsigned char *p = malloc(sz);
        if (BENCH_UNLIKELY(!p))
            bench_oom(prog, sz);
        *p = (unsigned char)i;
        ring[head] = p;
        if (++head == ws)
            head = 0;
    }
    double secs = bench_now() - t0;

    for (uint64_t i = 0; i < ws; i++) {
        if (ring[i]) {
            checksum += *ring[i];
            free(ring[i]);
        }
    }
    free(ring);

    printf("%s iters=%llu ws=%llu seed=%llu", prog, (unsigned long long)iters,
           (unsigned long long)ws, (unsigned long long)seed);
    bench_print_tail(2 * iters - (iters < ws ? iters : ws), secs, checksum);
    return 0;
}
