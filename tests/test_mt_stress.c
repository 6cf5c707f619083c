/* test_mt_stress - many threads, most frees remote, threads coming and going,
 * resident memory bounded.
 *
 * usage: test_mt_stress [THREADS [GENERATIONS [OPS_PER_THREAD [SEED]]]]
 *        (defaults 8 480 2000 20250602)
 *
 * THREADS worker threads run at all times.  Each allocates blocks (75% of
 * 24 B..512 B, 24.5% up to 16 KiB, 0.5% up to 128 KiB; malloc, calloc,
 * posix_memalign), writes a header {owner thread id, size, sequence,
 * checksum} and a pattern keyed by the checksum, and swaps the block into a random slot of a shared
 * table of mailboxes (atomic exchange); whatever block it takes out - almost
 * always another thread's, often one whose thread has exited - it checks and
 * frees, or reallocs, rewrites and passes on.  A few blocks stay in a small
 * local ring and are freed by their own thread.  Main replaces the workers one
 * by one (join, create) for GENERATIONS rounds, so threads are created and
 * exit all the time, while the others keep running.
 *
 * Memory bound.  The live set is statistically the same all the time: the
 * mailbox table (4096 blocks, ~2.6 KiB on average, ~11 MiB) plus what the
 * running threads hold.  Let R1 be the resident size after the first third of
 * the generations (warm: every size class and the mailbox table populated,
 * about 1300 threads come and gone).  From then on, at every generation,
 * resident size must stay <= 1.5 * R1 + 32 MiB.  glibc measured here: R1 is
 * 23-45 MiB and later peaks reach up to 1.7 * R1 (its arenas fragment), so the
 * 32 MiB margin keeps it well inside; HAKMEM stays nearly flat.  An allocator
 * that strands the memory of exited threads (caches, partial pages never
 * adopted) grows linearly with the number of dead threads: if each strands L
 * bytes, R1 already holds 1300 L of it and the last third adds 2600 L more,
 * which breaks the bound once L is more than about 30 KiB - far less than one
 * page per size class a thread touched.
 */
#include "hak_test.h"

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)
#define NBOX 4096
#define RING 8

typedef struct {
    uint32_t owner;
    uint32_t size;
    uint64_t seq;
    uint64_t check;
} hdr_t; /* 24 bytes: the smallest block is 24 bytes */

static _Atomic(hdr_t *) g_box[NBOX];
static unsigned g_ops = 2000;
static uint64_t g_seed = 20250602;
static atomic_uint g_next_id = 1;
static atomic_ulong g_frees_remote, g_frees_self, g_reallocs, g_allocs;

static uint64_t hdr_check(uint32_t owner, uint32_t size, uint64_t seq)
{
    return ht_mix64(((uint64_t)owner << 32 | size) ^ ht_mix64(seq));
}

/* apply to the checked part of a block: whole if <= 4 KiB, else the first
 * KiB, 64 bytes every 4 KiB, the last 64 bytes */
static size_t sample(int fill, unsigned char *p, uint64_t key, size_t n)
{
    size_t from = sizeof(hdr_t);
    if (n <= 4 * KiB) {
        if (fill)
            ht_fill(p, key, from, n);
        return fill ? (size_t)-1 : ht_verify(p, key, from, n);
    }
    size_t r;
    if (fill)
        ht_fill(p, key, from, KiB);
    else if ((r = ht_verify(p, key, from, KiB)) != (size_t)-1)
        return r;
    for (size_t i = 4 * KiB; i + 64 <= n; i += 4 * KiB) {
        if (fill)
            ht_fill(p, key, i, i + 64);
        else if ((r = ht_verify(p, key, i, i + 64)) != (size_t)-1)
            return r;
    }
    if (fill)
        ht_fill(p, key, n - 64, n);
    else if ((r = ht_verify(p, key, n - 64, n)) != (size_t)-1)
        return r;
    return (size_t)-1;
}

static size_t rand_size(ht_rng *r)
{
    uint64_t c = ht_below(r, 100);
    if (c < 75)
        return 24 + ht_below(r, 512 - 24 + 1);
    if (c < 99 || ht_below(r, 2))
        return 513 + ht_below(r, 16 * KiB - 512);
    return 16 * KiB + 1 + ht_below(r, 128 * KiB - 16 * KiB);
}

static void init_block(hdr_t *h, uint32_t owner, size_t n, uint64_t seq)
{
    h->owner = owner;
    h->size = (uint32_t)n;
    h->seq = seq;
    h->check = hdr_check(owner, (uint32_t)n, seq);
    sample(1, (unsigned char *)h, h->check, n);
}

static hdr_t *new_block(uint32_t me, ht_rng *r, uint64_t seq)
{
    size_t n = rand_size(r);
    uint64_t c = ht_below(r, 100);
    hdr_t *h;
    if (c < 90) {
        h = malloc(n);
    } else if (c < 95) {
        h = calloc(1, n);
        CHECK(h != NULL, "thread %u: calloc(1, %zu) failed", me, n);
        size_t nz = ht_first_nonzero(h, n);
        CHECK(nz == (size_t)-1, "thread %u: calloc(1, %zu) = %p: byte %zu not zero", me, n, (void *)h, nz);
    } else {
        void *p = NULL;
        int e = posix_memalign(&p, 64, n);
        CHECK(e == 0, "thread %u: posix_memalign(64, %zu) returned %d", me, n, e);
        CHECK(ht_aligned(p, 64), "thread %u: posix_memalign(64) = %p misaligned", me, p);
        h = p;
    }
    CHECK(h != NULL, "thread %u: allocation of %zu bytes failed", me, n);
    CHECK(ht_aligned(h, 16), "thread %u: block %p of %zu bytes not 16-byte aligned", me, (void *)h, n);
    init_block(h, me, n, seq);
    atomic_fetch_add_explicit(&g_allocs, 1, memory_order_relaxed);
    return h;
}

static void verify_block(const hdr_t *h, uint32_t me, const char *when)
{
    CHECK(h->check == hdr_check(h->owner, h->size, h->seq),
          "thread %u %s: block %p has a corrupt header (owner %u, size %u, seq %lu): overwritten or "
          "handed out twice",
          me, when, (const void *)h, h->owner, h->size, (unsigned long)h->seq);
    size_t u = malloc_usable_size((void *)h);
    CHECK(u >= h->size, "thread %u %s: block %p of size %u has usable size %zu", me, when, (const void *)h,
          h->size, u);
    size_t off = sample(0, (unsigned char *)h, h->check, h->size);
    CHECK(off == (size_t)-1,
          "thread %u %s: block %p (size %u, allocated by thread %u, seq %lu) changed at offset %zu",
          me, when, (const void *)h, h->size, h->owner, (unsigned long)h->seq, off);
}

static void dispose(hdr_t *h, uint32_t me)
{
    verify_block(h, me, "before free");
    if (h->owner == me)
        atomic_fetch_add_explicit(&g_frees_self, 1, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&g_frees_remote, 1, memory_order_relaxed);
    free(h);
}

static void *worker(void *arg)
{
    (void)arg;
    uint32_t me = atomic_fetch_add(&g_next_id, 1);
    ht_rng r = { ht_mix64(g_seed ^ ((uint64_t)me << 20)) };
    hdr_t *ring[RING] = { 0 };
    unsigned long self = 0, remote = 0;
    (void)self; (void)remote;
    for (unsigned i = 0; i < g_ops; i++) {
        hdr_t *h = new_block(me, &r, i);
        if (ht_below(&r, 100) < 8) {
            /* keep it for a while, free it ourselves */
            unsigned k = (unsigned)ht_below(&r, RING);
            if (ring[k])
                dispose(ring[k], me);
            ring[k] = h;
            continue;
        }
        hdr_t *old = atomic_exchange(&g_box[ht_below(&r, NBOX)], h);
        if (!old)
            continue;
        if (ht_below(&r, 100) < 10) {
            /* realloc someone else's block, check the kept part, pass it on */
            verify_block(old, me, "before realloc");
            size_t n = rand_size(&r);
            hdr_t saved = *old;
            size_t keep = n < old->size ? n : old->size;
            hdr_t *q = realloc(old, n);
            CHECK(q != NULL, "thread %u: realloc(%zu -> %zu) failed", me, (size_t)saved.size, n);
            CHECK(memcmp(q, &saved, sizeof saved) == 0, "thread %u: realloc lost the block header", me);
            /* the kept prefix: whole if the old block was written whole, else its first KiB */
            size_t lim = saved.size > 4 * KiB && keep > KiB ? KiB : keep;
            size_t off = ht_verify(q, saved.check, sizeof(hdr_t), lim);
            CHECK(off == (size_t)-1, "thread %u: realloc of a block of thread %u (%u -> %zu bytes) lost "
                  "contents at offset %zu", me, saved.owner, saved.size, n, off);
            init_block(q, me, n, ((uint64_t)1 << 63) | i);
            atomic_fetch_add_explicit(&g_reallocs, 1, memory_order_relaxed);
            hdr_t *o2 = atomic_exchange(&g_box[ht_below(&r, NBOX)], q);
            if (o2)
                dispose(o2, me);
        } else {
            dispose(old, me);
        }
    }
    for (unsigned k = 0; k < RING; k++)
        if (ring[k])
            dispose(ring[k], me);
    return NULL;
}

int main(int argc, char **argv)
{
    hak_test_require_hakmem("test_mt_stress");
    unsigned nthreads = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 0) : 8;
    unsigned gens = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 0) : 480;
    if (argc > 3)
        g_ops = (unsigned)strtoul(argv[3], NULL, 0);
    const char *es = getenv("HAKMEM_TEST_SEED");
    g_seed = argc > 4 ? strtoull(argv[4], NULL, 0) : es ? strtoull(es, NULL, 0) : g_seed;
    if (nthreads < 1) nthreads = 1;
    if (gens < 3) gens = 3;
    printf("test_mt_stress: %u threads at a time, %u generations, %u operations per thread, seed %lu\n",
           nthreads, gens, g_ops, (unsigned long)g_seed);
    fflush(stdout);

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_t *th = calloc(nthreads, sizeof *th);
    CHECK(th != NULL, "calloc failed");
    for (unsigned k = 0; k < nthreads; k++)
        CHECK(pthread_create(&th[k], NULL, worker, NULL) == 0, "pthread_create failed");

    size_t rss_first = 0, rss_max_after = 0, rss_last = 0;
    unsigned first_third = gens / 3;
    size_t rss_start = ht_rss_bytes();
    for (unsigned g = 1; g < gens; g++) {
        for (unsigned k = 0; k < nthreads; k++) {
            CHECK(pthread_join(th[k], NULL) == 0, "pthread_join failed");
            int e = pthread_create(&th[k], NULL, worker, NULL);
            CHECK(e == 0, "pthread_create (generation %u) failed: %s", g, strerror(e));
        }
        size_t rss = ht_rss_bytes();
        if (g == first_third)
            rss_first = rss;
        if (g > first_third) {
            if (rss > rss_max_after)
                rss_max_after = rss;
            size_t bound = rss_first + rss_first / 2 + 32 * MiB;
            CHECK(HT_RSS_SHADOWED || rss <= bound,
                  "resident memory grows as threads come and go: %.1f MiB at generation %u (%u threads "
                  "created so far), but %.1f MiB at generation %u; bound 1.5 * %.1f + 32 = %.1f MiB",
                  (double)rss / MiB, g, atomic_load(&g_next_id) - 1, (double)rss_first / MiB, first_third,
                  (double)rss_first / MiB, (double)bound / MiB);
        }
    }
    for (unsigned k = 0; k < nthreads; k++)
        CHECK(pthread_join(th[k], NULL) == 0, "pthread_join failed");
    rss_last = ht_rss_bytes();
    /* drain the mailboxes: main frees blocks of threads that are all gone */
    unsigned long drained = 0;
    for (unsigned i = 0; i < NBOX; i++) {
        hdr_t *h = atomic_exchange(&g_box[i], NULL);
        if (h) {
            dispose(h, 0);
            drained++;
        }
    }
    free(th);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    unsigned long fr = atomic_load(&g_frees_remote), fs = atomic_load(&g_frees_self);
    CHECK(fr > fs, "only %lu of %lu frees were remote: the test does not do what it should", fr, fr + fs);
    printf("test_mt_stress: OK: %u threads created (%u at a time), %lu allocations, %lu frees (%.0f%% by "
           "another thread, %lu after main drained the mailboxes), %lu cross-thread reallocs, in %.2f s; "
           "RSS MiB: start %.1f, after 1/3 %.1f, max later %.1f (bound %.1f), end %.1f%s\n",
           atomic_load(&g_next_id) - 1, nthreads, atomic_load(&g_allocs), fr + fs,
           100.0 * (double)fr / (double)(fr + fs), drained, atomic_load(&g_reallocs), secs,
           (double)rss_start / MiB, (double)rss_first / MiB, (double)rss_max_after / MiB,
           (double)(rss_first + rss_first / 2 + 32 * MiB) / MiB, (double)rss_last / MiB, hak_test_owns ? "" : " [plain]");
    return 0;
}
