/* bench_random_mixed ITERS WS SEED [MIN MAX]
 *
 * One thread, a table of WS slots.  Each iteration picks a random slot; if it
 * holds a block the block is freed, otherwise a block of a random size in
 * MIN..MAX bytes (default 16..1024) is allocated and its first byte written.
 * One iteration is one operation (one malloc or one free).
 * Reference run (SPEC): 20000000 400 1.
 */
#include "bench_common.h"

static const char *USAGE = "ITERS WS SEED [MIN MAX]";

int main(int argc, char **argv)
{
    const char *prog = "bench_random_mixed";
    if (argc != 4 && argc != 6) {
        fprintf(stderr, "usage: %s %s\n", prog, USAGE);
        return 2;
    }
    uint64_t iters = bench_arg_u64(prog, USAGE, argv[1]);
    uint64_t ws = bench_arg_u64(prog, USAGE, argv[2]);
    uint64_t seed = bench_arg_u64(prog, USAGE, argv[3]);
    uint64_t min = 16, max = 1024;
    if (argc == 6) {
        min = bench_arg_size(prog, USAGE, argv[4]);
        max = bench_arg_size(prog, USAGE, argv[5]);
    }
    if (ws == 0 || ws > (1u << 30) || min == 0 || max < min || max - min >= UINT32_MAX)
        bench_die(prog, "need WS in 1..2^30 and 1 <= MIN <= MAX");

    void **slots = calloc(ws, sizeof(void *));
    if (!slots)
        bench_oom(prog, ws * sizeof(void *));
    uint64_t rng = bench_rng_seed(seed);
    const uint32_t nslots = (uint32_t)ws;
    const uint32_t span = (uint32_t)(max - min + 1);
    uint64_t checksum = 0;

    double t0 = bench_now();
    for (uint64_t i = 0; i < iters; i++)
        bench_mixed_step(prog, slots, nslots, &rng, min, span, (unsigned char)i, &checksum);
    double secs = bench_now() - t0;

    for (uint32_t i = 0; i < nslots; i++) {
        if (slots[i]) {
            checksum += *(unsigned char *)slots[i];
            free(slots[i]);
        }
    }
    free(slots);

    printf("%s iters=%llu ws=%llu seed=%llu min=%llu max=%llu", prog,
           (unsigned long long)iters, (unsigned long long)ws, (unsigned long long)seed,
           (unsigned long long)min, (unsigned long long)max);
    bench_print_tail(iters, secs, checksum);
    return 0;
}
