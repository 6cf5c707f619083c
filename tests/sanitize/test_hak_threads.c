/* test_hak_threads - the cross-thread paths through the hak_ API, written for
 * ThreadSanitizer: linked with libhakmem.a (prefix-only in the TSan build, so
 * TSan keeps its own malloc and sees every access HAKMEM makes).
 *
 * usage: test_hak_threads [THREADS [GENERATIONS [OPS]]]  (defaults 4 40 3000)
 *
 * THREADS workers run at a time; main replaces them one by one for
 * GENERATIONS rounds, so heaps are torn down (their pages abandoned with
 * blocks still out) and adopted by later threads all the time. Each worker
 * allocates (hak_malloc, hak_calloc, hak_aligned_alloc, hak_posix_memalign;
 * 16 B..64 KiB, now and then 300 KiB), stamps the block, and swaps it into a
 * shared mailbox table; the block it takes out - usually another thread's,
 * often a dead thread's - is checked and then freed (a remote free) or
 * reallocated and passed on. At the end main drains the table. Every check
 * failure exits 1; under TSan any race report fails the run too. */
#include "hak_test.h"
#include "hakmem.h"

#include <pthread.h>
#include <stdatomic.h>

#define NBOX 512

typedef struct {
    uint64_t key;
    uint32_t size;
    uint32_t owner;
} hdr_t;

static _Atomic(hdr_t *) g_box[NBOX];
static unsigned g_ops = 3000;
static atomic_uint g_next_id = 1;
static atomic_ulong g_checked;

static void check_block(hdr_t *h)
{
    CHECK(h->size >= sizeof(hdr_t), "block %p: corrupt header size %u", (void *)h, h->size);
    CHECK(hak_usable_size(h) >= h->size, "block %p: usable %zu < %u", (void *)h, hak_usable_size(h), h->size);
    size_t bad = ht_verify(h, h->key, sizeof(hdr_t), h->size);
    CHECK(bad == (size_t)-1, "block %p (size %u, owner %u): byte %zu changed", (void *)h, h->size, h->owner, bad);
    atomic_fetch_add_explicit(&g_checked, 1, memory_order_relaxed);
}

static hdr_t *stamp(void *p, size_t size, uint32_t owner, uint64_t key)
{
    hdr_t *h = p;
    h->key = key;
    h->size = (uint32_t)size;
    h->owner = owner;
    ht_fill(h, key, sizeof(hdr_t), size);
    return h;
}

static void *new_block(ht_rng *r, size_t *size)
{
    uint64_t k = ht_below(r, 100);
    size_t n = k < 70 ? 24 + ht_below(r, 500) : k < 98 ? 24 + ht_below(r, 65536) : 300000;
    void *p = NULL;
    switch (ht_below(r, 4)) {
    case 0: p = hak_malloc(n); break;
    case 1: p = hak_calloc(1, n);
        if (p) CHECK(ht_first_nonzero(p, n) == (size_t)-1, "hak_calloc(%zu) not zeroed", n);
        break;
    case 2: p = hak_aligned_alloc(64, n); if (p) CHECK(ht_aligned(p, 64), "misaligned %p", p); break;
    default: CHECK(hak_posix_memalign(&p, 256, n) == 0, "hak_posix_memalign failed");
        CHECK(ht_aligned(p, 256), "misaligned %p", p);
        break;
    }
    CHECK(p != NULL, "allocation of %zu failed", n);
    *size = n;
    return p;
}

static void *worker(void *arg)
{
    uint32_t id = atomic_fetch_add(&g_next_id, 1);
    ht_rng r = {ht_mix64((uint64_t)(uintptr_t)arg ^ id)};
    void *local[8] = {0};
    for (unsigned i = 0; i < g_ops; i++) {
        size_t n;
        void *p = new_block(&r, &n);
        if (ht_below(&r, 8) == 0) { /* a few blocks stay with their thread */
            unsigned s = (unsigned)ht_below(&r, 8);
            if (local[s]) { check_block(local[s]); hak_free(local[s]); }
            local[s] = stamp(p, n, id, ht_next(&r));
            continue;
        }
        hdr_t *mine = stamp(p, n, id, ht_next(&r));
        hdr_t *got = atomic_exchange(&g_box[ht_below(&r, NBOX)], mine);
        if (!got) continue;
        check_block(got);
        if (ht_below(&r, 4) == 0) { /* resize another thread's block and pass it on */
            size_t m = 24 + ht_below(&r, 4000);
            uint64_t key = got->key;
            size_t keep = m < got->size ? m : got->size;
            hdr_t *q = hak_realloc(got, m);
            CHECK(q != NULL, "hak_realloc(%zu) failed", m);
            size_t bad = ht_verify(q, key, sizeof(hdr_t), keep);
            CHECK(bad == (size_t)-1, "hak_realloc lost byte %zu", bad);
            q = stamp(q, m, id, ht_next(&r));
            hdr_t *old = atomic_exchange(&g_box[ht_below(&r, NBOX)], q);
            if (old) { check_block(old); hak_free(old); }
        } else {
            hak_free(got);
        }
    }
    /* Exit with most local blocks still out: the heap abandons their pages. */
    for (unsigned s = 0; s < 4; s++)
        if (local[s]) { check_block(local[s]); hak_free(local[s]); }
    for (unsigned s = 4; s < 8; s++)
        if (local[s]) {
            hdr_t *old = atomic_exchange(&g_box[ht_below(&r, NBOX)], local[s]);
            if (old) { check_block(old); hak_free(old); }
        }
    return NULL;
}

int main(int argc, char **argv)
{
    hak_test_name = "test_hak_threads";
    unsigned threads = argc > 1 ? (unsigned)atoi(argv[1]) : 4;
    unsigned gens = argc > 2 ? (unsigned)atoi(argv[2]) : 40;
    if (argc > 3) g_ops = (unsigned)atoi(argv[3]);
    if (threads < 2) threads = 2;
    if (threads > 64) threads = 64;
    pthread_t t[64];
    for (unsigned i = 0; i < threads; i++)
        CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i) == 0, "pthread_create");
    for (unsigned g = 0; g < gens; g++) { /* replace the oldest worker */
        unsigned i = g % threads;
        CHECK(pthread_join(t[i], NULL) == 0, "pthread_join");
        CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(threads + g)) == 0, "pthread_create");
    }
    for (unsigned i = 0; i < threads; i++)
        CHECK(pthread_join(t[i], NULL) == 0, "pthread_join");
    for (unsigned b = 0; b < NBOX; b++) { /* blocks of dead threads, freed by main */
        hdr_t *h = atomic_exchange(&g_box[b], NULL);
        if (h) { check_block(h); hak_free(h); }
    }
    hak_trim();
    printf("test_hak_threads: OK: %u threads, %u generations, %u ops each, %lu blocks checked\n",
           threads, gens, g_ops, (unsigned long)atomic_load(&g_checked));
    return 0;
}
