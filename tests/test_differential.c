/* test_differential - a long seeded random run checked against a model.
 *
 * usage: test_differential [OPS [SLOTS [SEED]]]   (defaults 4000000 2000 and
 * HAKMEM_TEST_SEED or 20250601).  The run is deterministic for a seed; the seed
 * is printed so a failure can be replayed.
 *
 * A table of SLOTS slots is the model: each live slot knows its block's size,
 * alignment, and a key from (slot, generation).  Operations: malloc, calloc,
 * realloc(NULL, n), posix_memalign and aligned_alloc with random power-of-two
 * alignments up to 1 MiB, realloc (grow, shrink, random), free.  Sizes 0 B to
 * 4 MiB, mostly small (80% <= 1 KiB, 17% <= 32 KiB, 3% up to 256 KiB, 0.3%
 * up to 4 MiB).  Every block holds the pattern of its key; the pattern is
 * checked before every free and realloc and after every realloc (the kept
 * prefix); blocks up to 4 KiB are checked whole, bigger ones on a sample (the
 * first 64 bytes of every KiB and the last 64 bytes).  Alignment and
 * usable_size >= size are checked on every allocation, calloc zeroing on the
 * sample, and at intervals all live blocks are sorted by address and checked
 * for overlap.  Now and then most of the table is freed at once, so pages and
 * segments empty out and are reused.
 */
#include "hak_test.h"

#include <malloc.h>
#include <stdalign.h>
#include <time.h>

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)
#define FULL_LIMIT 4096 /* blocks up to this size are written and checked whole */

typedef struct {
    unsigned char *p;
    size_t size;
    size_t align; /* alignment it was allocated with */
    uint64_t key;
    uint64_t gen;
    const char *how;
} slot_t;

static slot_t *g_slots;
static FILE *g_trace; /* HAKMEM_TEST_TRACE=file: every operation, for replay and diagnosis */
static size_t g_nslots;
static uint64_t g_seed;
static unsigned long g_op;
static unsigned long g_count[16];
enum { OP_MALLOC, OP_CALLOC, OP_REALLOC_NULL, OP_MEMALIGN, OP_ALIGNED_ALLOC, OP_FREE,
       OP_REALLOC_GROW, OP_REALLOC_SHRINK, OP_REALLOC_RANDOM, OP_CHECK, OP_OVERLAP, OP_FLUSH };

#define FAILX(...)                                                                     \
    do {                                                                               \
        fflush(stdout);                                                                \
        fprintf(stderr, "test_differential: FAIL (seed %lu, operation %lu): ",         \
                (unsigned long)g_seed, g_op);                                          \
        fprintf(stderr, __VA_ARGS__);                                                  \
        fputc('\n', stderr);                                                           \
        _exit(1);                                                                      \
    } while (0)

/* Apply fn over the checked part of a block of size n, restricted to [0, lim). */
typedef size_t (*range_fn)(void *p, uint64_t key, size_t from, size_t to);

static size_t do_fill(void *p, uint64_t key, size_t from, size_t to)
{
    ht_fill(p, key, from, to);
    return (size_t)-1;
}
static size_t do_verify(void *p, uint64_t key, size_t from, size_t to)
{
    return ht_verify(p, key, from, to);
}
static size_t do_zero(void *p, uint64_t key, size_t from, size_t to)
{
    (void)key;
    size_t off = ht_first_nonzero((unsigned char *)p + from, to - from);
    return off == (size_t)-1 ? off : from + off;
}

static size_t over_sample(range_fn fn, void *p, uint64_t key, size_t n, size_t lim)
{
    if (lim > n)
        lim = n;
    if (n <= FULL_LIMIT)
        return fn(p, key, 0, lim);
    for (size_t i = 0; i < lim; i += KiB) {
        size_t e = i + 64 < lim ? i + 64 : lim;
        size_t r = fn(p, key, i, e);
        if (r != (size_t)-1)
            return r;
    }
    size_t t = n - 64;
    if (t < lim)
        return fn(p, key, t, lim);
    return (size_t)-1;
}

static size_t rand_size(ht_rng *r)
{
    uint64_t c = ht_below(r, 1000);
    if (c < 400)
        return ht_below(r, 129);               /* 0..128 */
    if (c < 800)
        return 129 + ht_below(r, 1024 - 128);  /* ..1 KiB */
    if (c < 970)
        return 1025 + ht_below(r, 32 * KiB - 1024);
    if (c < 997)
        return 32 * KiB + 1 + ht_below(r, 256 * KiB - 32 * KiB);
    return 256 * KiB + 1 + ht_below(r, 4 * MiB - 256 * KiB);
}

static void check_new_block(slot_t *s, size_t i)
{
    if (!s->p)
        FAILX("%s(size %zu, align %zu) for slot %zu returned NULL", s->how, s->size, s->align, i);
    if (!ht_aligned(s->p, s->align))
        FAILX("%s(size %zu) = %p for slot %zu: not aligned to %zu", s->how, s->size, (void *)s->p, i, s->align);
    size_t u = malloc_usable_size(s->p);
    if (u < s->size)
        FAILX("%s(size %zu) = %p for slot %zu: usable size %zu < size", s->how, s->size, (void *)s->p, i, u);
    if (hak_test_owns && (g_op & 255) == 0 && !hak_test_owns(s->p))
        FAILX("%s(size %zu) = %p: hak_owns says it is not HAKMEM's", s->how, s->size, (void *)s->p);
}

static void verify_slot(slot_t *s, size_t i, const char *when)
{
    size_t off = over_sample(do_verify, s->p, s->key, s->size, s->size);
    if (off != (size_t)-1)
        FAILX("%s: slot %zu block %p (size %zu, align %zu, from %s, generation %lu) was changed at offset "
              "%zu: byte 0x%02x, expected 0x%02x",
              when, i, (void *)s->p, s->size, s->align, s->how, (unsigned long)s->gen, off, s->p[off],
              ht_pat_byte(s->key, off));
}

static void free_slot(slot_t *s, size_t i)
{
    verify_slot(s, i, "before free");
    if (g_trace)
        fprintf(g_trace, "%lu free slot %zu %p\n", g_op, i, (void *)s->p);
    free(s->p);
    s->p = NULL;
    g_count[OP_FREE]++;
}

static void alloc_slot(ht_rng *r, slot_t *s, size_t i)
{
    size_t n = rand_size(r);
    s->size = n;
    s->gen++;
    s->key = ht_mix64(g_seed ^ ((uint64_t)i << 40) ^ s->gen);
    s->align = alignof(max_align_t);
    int zeroed = 0;
    uint64_t c = ht_below(r, 100);
    if (c < 50) {
        s->how = "malloc";
        s->p = malloc(n);
        g_count[OP_MALLOC]++;
    } else if (c < 65) {
        s->how = "calloc";
        /* split n into count * size when it divides */
        size_t k = (n % 8 == 0 && n) ? 8 : 1;
        s->p = calloc(n / (k ? k : 1), k);
        zeroed = 1;
        g_count[OP_CALLOC]++;
    } else if (c < 75) {
        s->how = "realloc(NULL)";
        s->p = realloc(NULL, n);
        g_count[OP_REALLOC_NULL]++;
    } else if (c < 90) {
        s->how = "posix_memalign";
        s->align = (size_t)1 << (3 + ht_below(r, 18)); /* 8 B .. 1 MiB */
        void *p = NULL;
        int e = posix_memalign(&p, s->align, n);
        if (e)
            FAILX("posix_memalign(%zu, %zu) returned %d", s->align, n, e);
        s->p = p;
        g_count[OP_MEMALIGN]++;
    } else {
        s->how = "aligned_alloc";
        s->align = (size_t)1 << ht_below(r, 21); /* 1 B .. 1 MiB */
        s->p = aligned_alloc(s->align, n);
        g_count[OP_ALIGNED_ALLOC]++;
    }
    if (g_trace)
        fprintf(g_trace, "%lu %s slot %zu size %zu align %zu -> %p\n", g_op, s->how, i, n, s->align, (void *)s->p);
    check_new_block(s, i);
    if (zeroed) {
        size_t off = over_sample(do_zero, s->p, 0, n, n);
        if (off != (size_t)-1)
            FAILX("calloc(%zu) = %p for slot %zu: byte %zu is 0x%02x, not zero", n, (void *)s->p, i, off,
                  s->p[off]);
    }
    over_sample(do_fill, s->p, s->key, n, n);
}

static void realloc_slot(ht_rng *r, slot_t *s, size_t i)
{
    size_t old = s->size, n;
    uint64_t c = ht_below(r, 100);
    if (c < 35) {
        n = old + 1 + ht_below(r, old / 2 + 64);
        g_count[OP_REALLOC_GROW]++;
    } else if (c < 70) {
        n = old - ht_below(r, old / 2 + 1);
        g_count[OP_REALLOC_SHRINK]++;
    } else {
        n = rand_size(r);
        g_count[OP_REALLOC_RANDOM]++;
    }
    if (n == 0)
        n = 1; /* realloc(p, 0) frees on glibc: tested in test_api */
    if (n > 8 * MiB)
        n = 8 * MiB;
    verify_slot(s, i, "before realloc");
    unsigned char *q = realloc(s->p, n);
    const char *prev = s->how;
    s->how = "realloc";
    if (!q)
        FAILX("realloc(%p [slot %zu, size %zu], %zu) returned NULL", (void *)s->p, i, old, n);
    if (g_trace)
        fprintf(g_trace, "%lu realloc slot %zu %p size %zu -> %zu = %p\n", g_op, i, (void *)s->p, old, n, (void *)q);
    s->p = q;
    s->size = n;
    s->align = alignof(max_align_t);
    check_new_block(s, i);
    size_t keep = old < n ? old : n;
    /* the kept prefix, on the old block's sample */
    size_t off = over_sample(do_verify, q, s->key, old, keep);
    if (off != (size_t)-1)
        FAILX("realloc of slot %zu (block from %s) from %zu to %zu bytes = %p: kept prefix differs at offset "
              "%zu: byte 0x%02x, expected 0x%02x",
              i, prev, old, n, (void *)q, off, q[off], ht_pat_byte(s->key, off));
    /* rewrite the new block's sample (same key: the kept part is unchanged) */
    over_sample(do_fill, q, s->key, n, n);
}

static int cmp_slot_addr(const void *a, const void *b)
{
    const slot_t *x = *(const slot_t *const *)a, *y = *(const slot_t *const *)b;
    return x->p < y->p ? -1 : x->p > y->p;
}

static void check_overlap(void)
{
    static slot_t **v;
    if (!v)
        v = malloc(g_nslots * sizeof *v);
    size_t m = 0;
    for (size_t i = 0; i < g_nslots; i++)
        if (g_slots[i].p)
            v[m++] = &g_slots[i];
    qsort(v, m, sizeof *v, cmp_slot_addr);
    for (size_t i = 1; i < m; i++) {
        size_t a = v[i - 1]->size ? v[i - 1]->size : 1;
        if (v[i - 1]->p + a > v[i]->p)
            FAILX("live blocks overlap: %p (size %zu, from %s) and %p (size %zu, from %s)",
                  (void *)v[i - 1]->p, v[i - 1]->size, v[i - 1]->how, (void *)v[i]->p, v[i]->size, v[i]->how);
    }
    g_count[OP_OVERLAP]++;
}

int main(int argc, char **argv)
{
    hak_test_require_hakmem("test_differential");
    unsigned long ops = argc > 1 ? strtoul(argv[1], NULL, 0) : 4000000;
    g_nslots = argc > 2 ? strtoul(argv[2], NULL, 0) : 2000;
    const char *es = getenv("HAKMEM_TEST_SEED");
    g_seed = argc > 3 ? strtoull(argv[3], NULL, 0) : es ? strtoull(es, NULL, 0) : 20250601;
    if (g_nslots == 0)
        g_nslots = 1;
    printf("test_differential: seed %lu, %lu operations, %zu slots\n", (unsigned long)g_seed, ops, g_nslots);
    fflush(stdout);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);

    const char *tr = getenv("HAKMEM_TEST_TRACE");
    if (tr && *tr) {
        g_trace = fopen(tr, "w");
        CHECK(g_trace != NULL, "cannot open trace file %s", tr);
        setvbuf(g_trace, NULL, _IOLBF, 0);
    }
    g_slots = calloc(g_nslots, sizeof *g_slots);
    CHECK(g_slots != NULL, "calloc of the slot table failed");
    ht_rng r = { g_seed };
    size_t peak_live = 0, live = 0;
    for (g_op = 0; g_op < ops; g_op++) {
        size_t i = ht_below(&r, g_nslots);
        slot_t *s = &g_slots[i];
        if (!s->p) {
            alloc_slot(&r, s, i);
            live += s->size;
        } else {
            uint64_t c = ht_below(&r, 100);
            live -= s->size;
            if (c < 50)
                free_slot(s, i);
            else if (c < 95)
                realloc_slot(&r, s, i);
            else {
                verify_slot(s, i, "periodic check");
                g_count[OP_CHECK]++;
            }
            if (s->p)
                live += s->size;
        }
        if (live > peak_live)
            peak_live = live;
        if (g_op % 100000 == 99999)
            check_overlap();
        if (g_op % 500000 == 250000) {
            /* free most of the table at once */
            for (size_t j = 0; j < g_nslots; j++)
                if (g_slots[j].p && ht_below(&r, 10) < 9) {
                    live -= g_slots[j].size;
                    free_slot(&g_slots[j], j);
                }
            g_count[OP_FLUSH]++;
        }
    }
    check_overlap();
    for (size_t j = 0; j < g_nslots; j++)
        if (g_slots[j].p)
            free_slot(&g_slots[j], j);
    free(g_slots);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("test_differential: OK: seed %lu, %lu ops in %.2f s: malloc %lu, calloc %lu, realloc(NULL) %lu, "
           "posix_memalign %lu, aligned_alloc %lu, free %lu, realloc grow/shrink/random %lu/%lu/%lu, "
           "checks %lu, overlap scans %lu, flushes %lu; peak live %.1f MiB; contents, alignment, usable size "
           "verified%s\n",
           (unsigned long)g_seed, ops, secs, g_count[OP_MALLOC], g_count[OP_CALLOC], g_count[OP_REALLOC_NULL],
           g_count[OP_MEMALIGN], g_count[OP_ALIGNED_ALLOC], g_count[OP_FREE], g_count[OP_REALLOC_GROW],
           g_count[OP_REALLOC_SHRINK], g_count[OP_REALLOC_RANDOM], g_count[OP_CHECK], g_count[OP_OVERLAP],
           g_count[OP_FLUSH], (double)peak_live / MiB, hak_test_owns ? "" : " [plain]");
    return 0;
}
