/* bench_fixed_size ITERS SIZE WS [SEED]
 *
 * bench_random_mixed with a single block size: each iteration picks a random
 * slot of WS, frees its block if it holds one, else allocates SIZE bytes and
 * writes the first byte.  One iteration is one operation.
 */
#include "bench_common.h"

static const char *USAGE = "ITERS SIZE WS [SEED]";

int main(int argc, char **argv)
{
    const char *prog = "bench_fixed_size";
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: %s %s\n", prog, USAGE);
        return 2;
    }
    uint64_t iters = bench_arg_u64(prog, USAGE, argv[1]);
    uint64_t size = bench_arg_size(prog, USAGE, argv[2]);
    uint64_t ws = bench_arg_u64(prog, USAGE, argv[3]);
    uint64_t seed = argc == 5 ? bench_arg_u64(prog, USAGE, argv[4]) : 1;
    if (ws == 0 || ws > (1u << 30) || size == 0)
        bench_die(prog, "need WS in 1..2^30 and SIZE >= 1");

    void **slots = calloc(ws, sizeof(void *));
    if (!slots)
        bench_oom(prog, ws * sizeof(void *));
    uint64_t rng = bench_rng_seed(seed);
    const uint32_t nslots = (uint32_t)ws;
    const size_t sz = (size_t)size;
    uint64_t checksum = 0;

    double t0 = bench_now();
    for (uint64_t i = 0; i < iters; i++) {
        uint64_t r = bench_rng_next(&rng);
        uint32_t idx = bench_range((uint32_t)(r >> 32), nslots);
        unsigned char *p = slots[idx];
        if (p) {
            checksum += *p;
            free(p);
            slots[idx] = NULL;
        } else {
            p = malloc(sz);
            if (BENCH_UNLIKELY(!p))
                bench_oom(prog, sz);
            *p = (unsigned char)i;
            slots[idx] = p;
        }
    }
    double secs = bench_now() - t0;

    for (uint32_t i = 0; i < nslots; i++) {
        if (slots[i]) {
            checksum += *(unsigned char *)slots[i];
            free(slots[i]);
        }
    }
    free(slots);

    printf("%s iters=%llu size=%llu ws=%llu seed=%llu", prog, (unsigned long long)iters,
           (unsigned long long)size, (unsigned long long)ws, (unsigned long long)seed);
    bench_print_tail(iters, secs, checksum);
    return 0;
}
