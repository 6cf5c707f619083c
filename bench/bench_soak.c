/* bench_soak SECONDS [EPOCH_OPS [WS [SEED [MIN MAX]]]]
 *
 * A long run of the random-mixed loop (bench_random_mixed) cut into epochs of
 * EPOCH_OPS operations (default 1000000) on one table of WS slots (default
 * 400), sizes MIN..MAX (default 16..1024).  Epochs continue until SECONDS
 * have passed.  After each epoch one line is printed and flushed:
 *
 *   bench_soak epoch=N ops=.. secs=.. ops_per_sec=.. ns_per_op=.. rss_kb=.. elapsed=..
 *
 * (rss_kb from /proc/self/statm, read outside the timed epoch), then one
 * summary line without "epoch=".  The work of each epoch is fixed; only the
 * number of epochs depends on time.
 */
#include "bench_common.h"

static const char *USAGE = "SECONDS [EPOCH_OPS [WS [SEED [MIN MAX]]]]";
static const char *prog = "bench_soak";

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 7 || argc == 6) {
        fprintf(stderr, "usage: %s %s\n", prog, USAGE);
        return 2;
    }
    double seconds = (double)bench_arg_u64(prog, USAGE, argv[1]);
    uint64_t epoch_ops = argc > 2 ? bench_arg_u64(prog, USAGE, argv[2]) : 1000000;
    uint64_t ws = argc > 3 ? bench_arg_u64(prog, USAGE, argv[3]) : 400;
    uint64_t seed = argc > 4 ? bench_arg_u64(prog, USAGE, argv[4]) : 1;
    uint64_t min = 16, max = 1024;
    if (argc == 7) {
        min = bench_arg_size(prog, USAGE, argv[5]);
        max = bench_arg_size(prog, USAGE, argv[6]);
    }
    if (epoch_ops == 0 || ws == 0 || ws > (1u << 30) || min == 0 || max < min ||
        max - min >= UINT32_MAX)
        bench_die(prog, "need EPOCH_OPS >= 1, WS in 1..2^30, 1 <= MIN <= MAX");

    void **slots = calloc(ws, sizeof(void *));
    if (!slots)
        bench_oom(prog, ws * sizeof(void *));
    uint64_t rng = bench_rng_seed(seed);
    const uint32_t nslots = (uint32_t)ws;
    const uint32_t span = (uint32_t)(max - min + 1);
    uint64_t checksum = 0, total_ops = 0, epoch = 0, i = 0;
    double busy = 0;
    double start = bench_now();

    for (;;) {
        double t0 = bench_now();
        for (uint64_t k = 0; k < epoch_ops; k++, i++)
            bench_mixed_step(prog, slots, nslots, &rng, min, span, (unsigned char)i, &checksum);
        double t1 = bench_now();
        double secs = t1 - t0;
        busy += secs;
        total_ops += epoch_ops;
        long rss = bench_rss_kb();
        printf("%s epoch=%llu ops=%llu secs=%.6f ops_per_sec=%.6e ns_per_op=%.4f "
               "rss_kb=%ld elapsed=%.3f\n", prog, (unsigned long long)epoch,
               (unsigned long long)epoch_ops, secs, (double)epoch_ops / secs,
               secs * 1e9 / (double)epoch_ops, rss, t1 - start);
        fflush(stdout);
        epoch++;
        if (t1 - start >= seconds)
            break;
    }

    long final_rss = bench_rss_kb();
    for (uint32_t k = 0; k < nslots; k++) {
        if (slots[k]) {
            checksum += *(unsigned char *)slots[k];
            free(slots[k]);
        }
    }
    free(slots);
    printf("%s seconds=%.0f epoch_ops=%llu ws=%llu seed=%llu min=%llu max=%llu epochs=%llu "
           "rss_kb=%ld", prog, seconds, (unsigned long long)epoch_ops,
           (unsigned long long)ws, (unsigned long long)seed, (unsigned long long)min,
           (unsigned long long)max, (unsigned long long)epoch, final_rss);
    bench_print_tail(total_ops, busy, checksum);
    return 0;
}
