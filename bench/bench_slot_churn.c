/* bench_slot_churn ITERS WS SEED POLICY TOUCH [MIN MAX]
 *
 * The random-mixed loop as a program written without this repository would
 * write it (issue 6: a loop of bench_random_mixed's shape, written elsewhere,
 * ran HAKMEM at 0.96x mimalloc where bench_random_mixed reads 1.08x). One
 * thread, a table of WS slots, sizes MIN..MAX bytes (default 16..1024), and a
 * generator of its own (a 64-bit LCG, slot and size by `%` of its high bits),
 * so neither the order of the slots nor that of the sizes is the one
 * bench_random_mixed's xorshift gives. Each iteration picks a slot and
 *
 *   POLICY toggle:  frees its block if it holds one, else allocates one
 *                   (bench_random_mixed's rule);
 *   POLICY replace: frees its block if it holds one, then allocates a new one
 *                   into it (a cache whose entries are replaced: once the
 *                   table is full, every iteration is a free and a malloc);
 *
 * and writes the new block:
 *
 *   TOUCH first: its first byte;
 *   TOUCH ends:  its first and last byte (a header and a terminator);
 *   TOUCH fill:  every byte (memset, as when a buffer is initialised).
 *
 * Before a block is freed its first byte is read into the checksum. One
 * operation is one malloc or one free; the result line counts both.
 */
#include "bench_common.h"

static const char *USAGE = "ITERS WS SEED toggle|replace first|ends|fill [MIN MAX]";

enum { TOUCH_FIRST, TOUCH_ENDS, TOUCH_FILL };

/* Knuth's MMIX LCG; the high half is the usable part. */
static inline uint32_t lcg_next(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*s >> 33);
}

static inline __attribute__((always_inline)) void
touch_block(unsigned char *p, size_t n, int touch, unsigned char tag)
{
    if (touch == TOUCH_FILL) {
        memset(p, tag, n);
    } else {
        p[0] = tag;
        if (touch == TOUCH_ENDS)
            p[n - 1] = tag;
    }
}

/* The loop, specialised per policy and touch (constant arguments). */
static inline __attribute__((always_inline)) uint64_t
churn(const char *prog, void **slots, uint32_t ws, uint64_t *rng, uint64_t iters,
      size_t min, uint32_t span, int replace, int touch, uint64_t *checksum)
{
    uint64_t ops = 0;
    for (uint64_t i = 0; i < iters; i++) {
        uint32_t k = lcg_next(rng) % ws;
        unsigned char *p = slots[k];
        if (p) {
            *checksum += *p;
            free(p);
            slots[k] = NULL;
            ops++;
            if (!replace)
                continue;
        }
        size_t n = min + lcg_next(rng) % span;
        p = malloc(n);
        if (BENCH_UNLIKELY(!p))
            bench_oom(prog, n);
        ops++;
        touch_block(p, n, touch, (unsigned char)i);
        slots[k] = p;
    }
    return ops;
}

int main(int argc, char **argv)
{
    const char *prog = "bench_slot_churn";
    if (argc != 6 && argc != 8) {
        fprintf(stderr, "usage: %s %s\n", prog, USAGE);
        return 2;
    }
    uint64_t iters = bench_arg_u64(prog, USAGE, argv[1]);
    uint64_t ws = bench_arg_u64(prog, USAGE, argv[2]);
    uint64_t seed = bench_arg_u64(prog, USAGE, argv[3]);
    const char *policy = argv[4], *touch_name = argv[5];
    int replace;
    if (strcmp(policy, "toggle") == 0)
        replace = 0;
    else if (strcmp(policy, "replace") == 0)
        replace = 1;
    else
        bench_die(prog, "POLICY is toggle or replace");
    int touch;
    if (strcmp(touch_name, "first") == 0)
        touch = TOUCH_FIRST;
    else if (strcmp(touch_name, "ends") == 0)
        touch = TOUCH_ENDS;
    else if (strcmp(touch_name, "fill") == 0)
        touch = TOUCH_FILL;
    else
        bench_die(prog, "TOUCH is first, ends or fill");
    uint64_t min = 16, max = 1024;
    if (argc == 8) {
        min = bench_arg_size(prog, USAGE, argv[6]);
        max = bench_arg_size(prog, USAGE, argv[7]);
    }
    if (ws == 0 || ws > (1u << 30) || min == 0 || max < min || max - min >= UINT32_MAX)
        bench_die(prog, "need WS in 1..2^30 and 1 <= MIN <= MAX");

    void **slots = calloc(ws, sizeof(void *));
    if (!slots)
        bench_oom(prog, ws * sizeof(void *));
    uint64_t rng = seed * 0x9E3779B97F4A7C15ull + 1;
    const uint32_t span = (uint32_t)(max - min + 1);
    uint64_t checksum = 0, ops = 0;

    double t0 = bench_now();
#define CHURN(r, t) churn(prog, slots, (uint32_t)ws, &rng, iters, (size_t)min, span, r, t, &checksum)
    switch (replace * 3 + touch) {
    case 0: ops = CHURN(0, TOUCH_FIRST); break;
    case 1: ops = CHURN(0, TOUCH_ENDS); break;
    case 2: ops = CHURN(0, TOUCH_FILL); break;
    case 3: ops = CHURN(1, TOUCH_FIRST); break;
    case 4: ops = CHURN(1, TOUCH_ENDS); break;
    default: ops = CHURN(1, TOUCH_FILL); break;
    }
#undef CHURN
    double secs = bench_now() - t0;

    for (uint32_t i = 0; i < (uint32_t)ws; i++) {
        if (slots[i]) {
            checksum += *(unsigned char *)slots[i];
            free(slots[i]);
        }
    }
    free(slots);

    printf("%s iters=%llu ws=%llu seed=%llu policy=%s touch=%s min=%llu max=%llu", prog,
           (unsigned long long)iters, (unsigned long long)ws, (unsigned long long)seed,
           policy, touch_name, (unsigned long long)min, (unsigned long long)max);
    bench_print_tail(ops, secs, checksum);
    return 0;
}
