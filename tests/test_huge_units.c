/* test_huge_units - huge blocks (above 960 KiB, a mapping each) are sized
 * in 64 KiB units at every size (large/large.c, huge_alloc), above 2 MiB
 * too: a 2.1 MiB block used to get a 4 MiB mapping, whose tail its later,
 * bigger users faulted in and the huge cache kept resident.
 *
 *  1. fresh: blocks of 1 MiB + 1 .. 9 MiB + odd sizes, all live at once (so
 *     none can come from the cache), each with a usable size of at least the
 *     request and less than 64 KiB more (plus the mapping's header and, in
 *     the secure build, its guard, both inside the last unit); all of it
 *     written.
 *  2. reuse: all freed (into the cache), then blocks of other sizes taken:
 *     a cached mapping is taken only up to twice the block's mapping (or any
 *     up to 2 MiB for a block of up to 1 MiB), so the usable size stays
 *     below twice the request plus a unit; calloc'd ones read zero over the
 *     request; every byte of the usable size is writable.
 * Also runs on glibc (HAKMEM_TEST_PLAIN=1): its mmapped chunks are rounded
 * to 4 KiB pages, within both bounds.
 */
#include "hak_test.h"

#define UNIT ((size_t)64 << 10)
#define MIB ((size_t)1 << 20)
#define N 12

static const size_t fresh_sizes[N] = {
    MIB + 1, 2 * MIB - 100, 2 * MIB + 1, 2 * MIB + 100 * 1024, 2 * MIB + 3 * UNIT + 7, 5 * MIB / 2,
    3 * MIB + 1, 4 * MIB - 4096, 4 * MIB + 1, 5 * MIB + 12345, 7 * MIB + 3, 9 * MIB + UNIT - 1,
};

static void fill(unsigned char *p, size_t u, unsigned char v) { memset(p, v, u); }

int main(void)
{
    hak_test_name = "test_huge_units";
    hak_test_require_hakmem(hak_test_name);
    unsigned char *p[N];
    /* 1. fresh mappings: within one unit of the request */
    for (int i = 0; i < N; i++) {
        size_t n = fresh_sizes[i];
        p[i] = malloc(n);
        CHECK(p[i] != NULL, "malloc(%zu) failed", n);
        size_t u = malloc_usable_size(p[i]);
        CHECK(u >= n, "fresh %zu: usable size %zu below the request", n, u);
        CHECK(u < n + UNIT, "fresh %zu: usable size %zu is %zu over the request, a 64 KiB unit at most", n, u, u - n);
        fill(p[i], u, (unsigned char)(0x10 + i));
    }
    for (int i = 0; i < N; i++) {
        size_t u = malloc_usable_size(p[i]);
        CHECK(p[i][0] == 0x10 + i && p[i][u - 1] == 0x10 + i, "fresh block %d lost its contents", i);
    }
    /* 2. reuse from the cache: the fit rule bounds the usable size */
    for (int i = 0; i < N; i++) free(p[i]);
    unsigned reused = 0;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) {
            size_t n = fresh_sizes[(i + 5 * round + 1) % N] - (round + 1) * 40000;
            int z = (i + round) % 2;
            p[i] = z ? calloc(n, 1) : malloc(n);
            CHECK(p[i] != NULL, "reuse malloc(%zu) failed", n);
            size_t u = malloc_usable_size(p[i]);
            CHECK(u >= n, "reuse %zu: usable size %zu below the request", n, u);
            size_t most = n + UNIT <= MIB ? 2 * MIB : 2 * (n + UNIT);
            CHECK(u < most + UNIT, "reuse %zu: usable size %zu beyond the fit rule (%zu)", n, u, most);
            if (u >= n + UNIT) reused++;
            if (z)
                for (size_t k = 0; k < n; k += 4093) CHECK(p[i][k] == 0, "calloc(%zu) byte %zu not zero", n, k);
            fill(p[i], u, (unsigned char)(0x60 + i));
        }
        for (int i = 0; i < N; i++) free(p[i]);
    }
    malloc_trim(0);
    printf("test_huge_units: OK: %d fresh huge blocks within 64 KiB of their request, %d reused (%u from a bigger mapping)\n",
           N, 3 * N, reused);
    return 0;
}
