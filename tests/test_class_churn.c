/* test_class_churn - blocks of the classes whose pages span several slices
 * (above 8 KiB, up to 64 KiB) and their neighbours, handed between threads
 * that come and go, every block checked when it is freed.
 *
 * usage: test_class_churn [GENERATIONS [THREADS [OPS [SEED]]]]
 *        (defaults 40 4 3000 20261126; the seed also from HAKMEM_TEST_SEED)
 *
 * What it aims at: a block that sits on a free list, a pending list or a
 * cache while it is out (handed out twice, pushed while in use, a stale list
 * head), a page retired while one of its blocks is out, a block of the wrong
 * alignment or size. Each block carries {key, size} in its first 16 bytes
 * and its key's pattern over its first 512 and last 64 bytes; when it is
 * freed (or realloc'ed) the header, the pattern and malloc_usable_size
 * (>= its size) are checked. A list link written into a block that is out
 * changes its first word, which the check sees; a second hand-out of a block
 * rewrites its key.
 *
 * THREADS workers run at all times; main replaces them one by one (join,
 * create) for GENERATIONS rounds, so heaps are torn down, their pages
 * abandoned and adopted, and heap records recycled, while the others run.
 * Each worker has one of three roles, drawn at its start:
 *   - producer: allocates blocks of one class C (malloc, posix_memalign,
 *     aligned_alloc at C's alignment) and only passes them on (others free
 *     them: C is refilled again and again without a flush), while it also
 *     allocates and frees, itself, blocks of the next two classes (their
 *     pages' free lists become its pending lists): the conditions under
 *     which a class borrows a block of a neighbour's pending list
 *     (heap/thread.c, "Borrowing");
 *   - mixed: random sizes from 16 B to 72 KiB (most above 7 KiB) through
 *     malloc, calloc, posix_memalign and aligned_alloc (alignments 16 B to
 *     16 KiB) and realloc, blocks exchanged through a table of mailboxes
 *     (most frees remote) and a small ring of its own;
 *   - trimmer: takes blocks out of the mailboxes, checks and frees them, and
 *     calls malloc_trim(0) (process-wide collection, abandoned pages, the
 *     page stash) every few hundred operations.
 * At the end every mailbox is emptied and checked. */
#include "hak_test.h"

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>

#define KiB ((size_t)1024)
#define NBOX 1024
#define RING 16
#define HEAD 512
#define TAIL 64
#define MAXN (96 * KiB) /* 72 KiB, rounded up by aligned_alloc */
#define MAXT 64

static _Atomic(unsigned char *) g_box[NBOX];
static unsigned g_ops = 3000;
static uint64_t g_seed = 20261126;
static atomic_uint g_next_id = 1;
static atomic_ulong g_allocs, g_frees, g_passed;

static void check_free(unsigned char *p)
{
    size_t n;
    memcpy(&n, p + 8, 8);
    CHECK(n >= 1 && n <= MAXN, "block %p has a corrupt header (size %zu): overwritten or handed out twice",
          (void *)p, n);
    size_t u = malloc_usable_size(p);
    CHECK(u >= n, "block %p of %zu bytes has usable size %zu", (void *)p, n, u);
    atomic_fetch_add_explicit(&g_frees, 1, memory_order_relaxed);
    ht_keyed_check_free(p, 1, MAXN, HEAD, TAIL);
}

static unsigned char *stamp(unsigned char *p, size_t n, ht_rng *r)
{
    CHECK(p != NULL, "allocation of %zu bytes failed", n);
    CHECK(ht_aligned(p, 16), "block %p of %zu bytes not 16-byte aligned", (void *)p, n);
    ht_keyed_stamp(p, n, ht_next(r) | 1, HEAD, TAIL);
    atomic_fetch_add_explicit(&g_allocs, 1, memory_order_relaxed);
    return p;
}

/* n bytes aligned to a (a power of two >= 16, or 0: none asked), by one of
 * the entry points. */
static unsigned char *alloc_n(size_t n, size_t a, ht_rng *r)
{
    void *p = NULL;
    unsigned k = (unsigned)ht_below(r, 10);
    if (a == 0 && k < 6) {
        p = malloc(n);
    } else if (a == 0 && k < 8) {
        p = calloc(1, n);
        CHECK(p != NULL, "calloc(1, %zu) failed", n);
        size_t nz = ht_first_nonzero(p, n < 4 * KiB ? n : 4 * KiB);
        CHECK(nz == (size_t)-1, "calloc(1, %zu) = %p: byte %zu not zero", n, p, nz);
    } else {
        if (a == 0) a = (size_t)16 << ht_below(r, 11); /* 16 B .. 16 KiB */
        if (k & 1) {
            int e = posix_memalign(&p, a, n);
            CHECK(e == 0, "posix_memalign(%zu, %zu) returned %d", a, n, e);
        } else {
            p = aligned_alloc(a, (n + a - 1) / a * a);
            n = (n + a - 1) / a * a;
        }
        CHECK(p && ht_aligned(p, a), "aligned allocation (%zu, %zu) = %p", a, n, p);
    }
    return stamp(p, n, r);
}

/* Mostly the classes of several slices a page (8-64 KiB) and those next to them. */
static size_t rand_size(ht_rng *r)
{
    uint64_t c = ht_below(r, 100);
    if (c < 15) return 16 + ht_below(r, 1024);
    if (c < 25) return 1024 + ht_below(r, 6 * KiB);
    return 7 * KiB + ht_below(r, 65 * KiB);
}

static unsigned char *swap_box(ht_rng *r, unsigned char *p)
{
    return atomic_exchange(&g_box[ht_below(r, NBOX)], p);
}

/* realloc of a checked block to m bytes: the kept part must come along. */
static unsigned char *realloc_checked(unsigned char *p, size_t m, ht_rng *r)
{
    uint64_t key;
    size_t n;
    memcpy(&key, p, 8);
    memcpy(&n, p + 8, 8);
    CHECK(n >= 1 && n <= MAXN, "block %p has a corrupt header (size %zu) before realloc", (void *)p, n);
    size_t bad = ht_verify(p, key, 16, n < HEAD ? n : HEAD);
    CHECK(bad == (size_t)-1, "block %p of %zu bytes changed at offset %zu before realloc", (void *)p, n, bad);
    unsigned char *q = realloc(p, m);
    CHECK(q != NULL, "realloc(%zu -> %zu) failed", n, m);
    size_t keep = m < n ? m : n;
    uint64_t k2;
    memcpy(&k2, q, 8);
    bad = k2 != key ? 0 : ht_verify(q, key, 16, keep < HEAD ? keep : HEAD);
    CHECK(bad == (size_t)-1, "realloc(%p, %zu -> %zu) = %p lost contents at offset %zu", (void *)p, n, m, (void *)q, bad);
    return stamp(q, m, r);
}

static void producer(ht_rng *r)
{
    /* Class C and its next two, found by their usable sizes (the secure
     * build reports the size asked for: then sizes next to each other). */
    size_t c0 = 7 * KiB + ht_below(r, 57 * KiB), sz[3];
    for (int i = 0; i < 3; i++) {
        void *p = malloc(c0);
        sz[i] = malloc_usable_size(p);
        free(p);
        c0 = sz[i] + 1;
    }
    size_t a = sz[0] & -sz[0];
    if (a > 4096) a = 4096;
    unsigned char *ring[RING] = {0};
    for (unsigned i = 0; i < g_ops; i++) {
        if (ht_below(r, 2)) {
            /* C: out to the others only */
            unsigned char *p = ht_below(r, 4) ? alloc_n(sz[0] - ht_below(r, 512), 0, r)
                                              : alloc_n(sz[0] - ht_below(r, 512), a < 16 ? 16 : a, r);
            /* what comes back is freed here unless it is of class C (its
             * frees would refill C's cache): that goes on to another box */
            unsigned char *old = swap_box(r, p);
            for (int t = 0; old && malloc_usable_size(old) == sz[0] && t < 4; t++) {
                atomic_fetch_add_explicit(&g_passed, 1, memory_order_relaxed);
                old = swap_box(r, old);
            }
            if (old) check_free(old);
            continue;
        }
        /* the next two classes: allocated and freed here */
        size_t n = sz[1 + ht_below(r, 2)] - ht_below(r, 256);
        unsigned k = (unsigned)ht_below(r, RING);
        if (ring[k]) check_free(ring[k]);
        ring[k] = (unsigned char *)malloc(n);
        stamp(ring[k], n, r);
    }
    for (unsigned k = 0; k < RING; k++)
        if (ring[k]) check_free(ring[k]);
}

static void mixed(ht_rng *r)
{
    unsigned char *ring[RING] = {0};
    for (unsigned i = 0; i < g_ops; i++) {
        unsigned char *p = alloc_n(rand_size(r), ht_below(r, 5) ? 0 : (size_t)16 << ht_below(r, 11), r);
        if (ht_below(r, 100) < 15) {
            unsigned k = (unsigned)ht_below(r, RING);
            if (ring[k]) check_free(ring[k]);
            ring[k] = p;
            continue;
        }
        unsigned char *old = swap_box(r, p);
        if (!old) continue;
        if (ht_below(r, 100) < 15) {
            old = realloc_checked(old, rand_size(r), r);
            old = swap_box(r, old);
            if (!old) continue;
        }
        check_free(old);
    }
    for (unsigned k = 0; k < RING; k++)
        if (ring[k]) check_free(ring[k]);
}

static void trimmer(ht_rng *r)
{
    for (unsigned i = 0; i < g_ops; i++) {
        unsigned char *old = atomic_exchange(&g_box[ht_below(r, NBOX)], NULL);
        if (old) check_free(old);
        if (ht_below(r, 300) == 0) malloc_trim(0);
    }
}

static void *worker(void *arg)
{
    (void)arg;
    uint32_t me = atomic_fetch_add(&g_next_id, 1);
    ht_rng r = {ht_mix64(g_seed ^ ((uint64_t)me << 20))};
    uint64_t role = ht_below(&r, 10);
    if (role < 4) producer(&r);
    else if (role < 9) mixed(&r);
    else trimmer(&r);
    return NULL;
}

int main(int argc, char **argv)
{
    hak_test_name = "test_class_churn";
    unsigned gens = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 0) : 40;
    unsigned nt = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 0) : 4;
    if (argc > 3) g_ops = (unsigned)strtoul(argv[3], NULL, 0);
    const char *es = getenv("HAKMEM_TEST_SEED");
    g_seed = argc > 4 ? strtoull(argv[4], NULL, 0) : es ? strtoull(es, NULL, 0) : g_seed;
    CHECK(nt >= 1 && nt <= MAXT, "THREADS must be 1..%d", MAXT);
    printf("test_class_churn: %u threads, %u generations, %u operations each, seed %lu\n", nt, gens, g_ops,
           (unsigned long)g_seed);
    pthread_t th[MAXT];
    for (unsigned i = 0; i < nt; i++) CHECK(pthread_create(&th[i], NULL, worker, NULL) == 0, "pthread_create");
    for (unsigned g = 0; g < gens; g++) {
        unsigned i = g % nt;
        CHECK(pthread_join(th[i], NULL) == 0, "pthread_join");
        CHECK(pthread_create(&th[i], NULL, worker, NULL) == 0, "pthread_create");
    }
    for (unsigned i = 0; i < nt; i++) CHECK(pthread_join(th[i], NULL) == 0, "pthread_join");
    for (unsigned i = 0; i < NBOX; i++) {
        unsigned char *p = atomic_exchange(&g_box[i], NULL);
        if (p) check_free(p);
    }
    malloc_trim(0);
    printf("test_class_churn: %lu allocations, %lu checked frees, %lu class-C blocks passed on: ok\n",
           (unsigned long)atomic_load(&g_allocs), (unsigned long)atomic_load(&g_frees),
           (unsigned long)atomic_load(&g_passed));
    return 0;
}
