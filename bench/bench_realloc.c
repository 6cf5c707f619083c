/* bench_realloc ITERS NBUF MAXSIZE [SEED]
 *
 * NBUF growing buffers, as string builders and vectors keep them.  Each
 * iteration picks a random buffer: an empty one is created with malloc (16..64
 * bytes); an even-numbered one grows like a string builder (by 1..64 bytes),
 * an odd-numbered one like a vector (by half its size); a buffer that would
 * pass MAXSIZE (default suffixes allowed, e.g. 64K) is freed instead.  After
 * every realloc the byte written last before it is checked (realloc must keep
 * the contents; a mismatch exits with status 4) and the new last byte is
 * written.  Operations = calls to malloc, realloc and free.
 */
#include "bench_common.h"

static const char *USAGE = "ITERS NBUF MAXSIZE [SEED]";
static const char *prog = "bench_realloc";

struct buf {
    unsigned char *p;
    size_t size;
};

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: %s %s\n", prog, USAGE);
        return 2;
    }
    uint64_t iters = bench_arg_u64(prog, USAGE, argv[1]);
    uint64_t nbuf = bench_arg_u64(prog, USAGE, argv[2]);
    uint64_t maxsize = bench_arg_size(prog, USAGE, argv[3]);
    uint64_t seed = argc == 5 ? bench_arg_u64(prog, USAGE, argv[4]) : 1;
    if (nbuf == 0 || nbuf > (1u << 26) || maxsize < 64)
        bench_die(prog, "need NBUF in 1..2^26 and MAXSIZE >= 64");

    struct buf *bufs = calloc(nbuf, sizeof(*bufs));
    if (!bufs)
        bench_oom(prog, nbuf * sizeof(*bufs));
    uint64_t rng = bench_rng_seed(seed);
    uint64_t ops = 0, checksum = 0, reallocs = 0;

    double t0 = bench_now();
    for (uint64_t i = 0; i < iters; i++) {
        uint64_t r = bench_rng_next(&rng);
        uint32_t idx = bench_range((uint32_t)(r >> 32), (uint32_t)nbuf);
        struct buf *b = &bufs[idx];
        unsigned char tag = (unsigned char)(i * 31 + 7);
        if (!b->p) {
            size_t sz = 16 + bench_range((uint32_t)r, 49);
            b->p = malloc(sz);
            if (BENCH_UNLIKELY(!b->p))
                bench_oom(prog, sz);
            b->size = sz;
            b->p[0] = tag;
            b->p[sz - 1] = tag;
            ops++;
            continue;
        }
        size_t grow = (idx & 1) ? b->size / 2 : 1 + bench_range((uint32_t)r, 64);
        size_t nsz = b->size + grow;
        if (nsz > maxsize) {
            checksum += b->p[0] + b->p[b->size - 1];
            free(b->p);
            b->p = NULL;
            b->size = 0;
            ops++;
            continue;
        }
        unsigned char last = b->p[b->size - 1];
        unsigned char *np = realloc(b->p, nsz);
        if (BENCH_UNLIKELY(!np))
            bench_oom(prog, nsz);
        if (BENCH_UNLIKELY(np[b->size - 1] != last)) {
            fprintf(stderr, "%s: realloc lost data (iteration %llu, %zu -> %zu bytes)\n",
                    prog, (unsigned long long)i, b->size, nsz);
            return 4;
        }
        checksum += last;
        np[nsz - 1] = tag;
        b->p = np;
        b->size = nsz;
        ops++;
        reallocs++;
    }
    double secs = bench_now() - t0;

    for (uint64_t i = 0; i < nbuf; i++) {
        if (bufs[i].p) {
            checksum += bufs[i].p[0] + bufs[i].p[bufs[i].size - 1];
            free(bufs[i].p);
        }
    }
    free(bufs);

    printf("%s iters=%llu nbuf=%llu maxsize=%llu seed=%llu reallocs=%llu", prog,
           (unsigned long long)iters, (unsigned long long)nbuf, (unsigned long long)maxsize,
           (unsigned long long)seed, (unsigned long long)reallocs);
    bench_print_tail(ops, secs, checksum);
    return 0;
}
