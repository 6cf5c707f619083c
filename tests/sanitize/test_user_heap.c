/* test_user_heap - first-class heaps (hak_heap_new ... hak_heap_destroy),
 * through the hak_ API, linked with libhakmem.a; in the TSan build too
 * (prefix-only: TSan sees every access HAKMEM makes, and the stress part
 * is the race check of heap/user_heap.c's locking).
 *
 * usage: test_user_heap [PART]   (PART: basic tree threads delete delete_race stress fork nocache bad; default all)
 *
 *  basic   malloc/calloc (zeroed)/realloc (contents kept)/aligned_alloc
 *          (aligned) in a heap, large blocks, the NULL heap is the process's
 *  tree    a tree of 1,000,000 nodes built in a heap, then hak_heap_destroy:
 *          the pages retired by destroy are a small fraction of the blocks
 *          (work per page, none per block), and RSS comes back (a heap
 *          bigger than the dirty budget is purged by destroy itself)
 *  threads blocks of a heap freed by other threads, then reused
 *  delete  hak_heap_delete, then the blocks checked and freed by another
 *          thread; the process allocates on from the pages
 *  delete_race  hak_heap_delete while two threads free the heap's blocks:
 *          every free an ordinary one
 *  stress  two heaps shared by four threads: allocate from either heap,
 *          swap blocks through a mailbox, check and free them anywhere
 *  fork    fork while another thread uses the heap; the child allocates,
 *          frees and destroys; the parent goes on
 *  nocache blocks of a heap freed on this thread, the heap destroyed: malloc
 *          never hands out an address twice (they were never cached)
 *  bad     destroy twice, a destroyed heap's malloc, a free after destroy,
 *          a double free: each a message, nothing corrupted */
#include "hak_test.h"
#include "hakmem.h"

#include <pthread.h>
#include <stdatomic.h>

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

static int g_build; /* hak_stats_t.build: 0 fast (no checks, no counters) */

/* realloc of a heap's huge block through the process's realloc: it moves */
static void *realloc_or_die(void *p, size_t n)
{
    void *q = hak_realloc(p, n);
    CHECK(q != NULL, "realloc to %zu", n);
    return q;
}

/* ---- basic ------------------------------------------------------------------ */

static void part_basic(void)
{
    hak_heap_t *h = hak_heap_new();
    CHECK(h != NULL, "hak_heap_new failed: %s", strerror(errno));
    for (size_t n = 0; n <= 40000; n = n < 64 ? n + 1 : n * 5 / 4) {
        unsigned char *z = hak_heap_calloc(h, 1, n);
        CHECK(z != NULL, "calloc %zu", n);
        CHECK(ht_first_nonzero(z, n) == (size_t)-1, "calloc(%zu) byte %zu not zero", n, ht_first_nonzero(z, n));
        memset(z, 0xab, n);
        hak_free(z);
        z = hak_heap_calloc(h, n, 1); /* reuses the block just dirtied */
        CHECK(z != NULL && ht_first_nonzero(z, n) == (size_t)-1, "calloc(%zu) again not zero", n);
        hak_free(z);
    }
    /* realloc keeps the contents, growing through classes, pages and large */
    size_t n = 8;
    unsigned char *p = hak_heap_malloc(h, n);
    ht_fill(p, 42, 0, n);
    while (n < 3000000) {
        size_t m = n * 3 / 2 + 5;
        p = hak_heap_realloc(h, p, m);
        CHECK(p != NULL, "realloc to %zu", m);
        CHECK(ht_verify(p, 42, 0, n) == (size_t)-1, "realloc to %zu lost byte %zu", m, ht_verify(p, 42, 0, n));
        ht_fill(p, 42, n, m);
        n = m;
    }
    p = hak_heap_realloc(h, p, 100); /* shrinking moves it back into a class */
    CHECK(p && ht_verify(p, 42, 0, 100) == (size_t)-1, "realloc down lost contents");
    CHECK(hak_heap_realloc(h, p, 0) == NULL, "realloc(p, 0) frees and returns NULL");
    /* aligned */
    for (size_t a = 1; a <= ((size_t)1 << 22); a *= 2)
        for (size_t s = 1; s <= 70000; s = s * 7 + 3) {
            void *q = hak_heap_aligned_alloc(h, a, s);
            CHECK(q != NULL, "aligned_alloc(%zu, %zu)", a, s);
            CHECK(ht_aligned(q, a), "aligned_alloc(%zu, %zu) = %p", a, s, q);
            memset(q, 1, s);
            CHECK(hak_usable_size(q) >= s, "usable %zu < %zu", hak_usable_size(q), s);
            hak_free(q);
        }
    errno = 0;
    CHECK(hak_heap_aligned_alloc(h, 24, 10) == NULL && errno == EINVAL, "alignment 24: NULL, EINVAL");
    errno = 0;
    CHECK(hak_heap_calloc(h, SIZE_MAX / 2, 3) == NULL && errno == ENOMEM, "calloc overflow: NULL, ENOMEM");
    errno = 0;
    CHECK(hak_heap_malloc(h, ht_hide(SIZE_MAX)) == NULL && errno == ENOMEM, "malloc(SIZE_MAX): NULL, ENOMEM");
    /* large blocks of the heap, left for destroy */
    for (int i = 0; i < 8; i++) memset(hak_heap_malloc(h, 40000 + i * 100000), 7, 40000 + i * 100000);
    /* huge and over-aligned blocks: freed by destroy too (counted below) */
    hak_stats_t st0 = HAK_STATS_INIT, st1 = HAK_STATS_INIT, st2 = HAK_STATS_INIT;
    hak_stats_get(&st0);
    for (int i = 0; i < 40; i++) memset(hak_heap_malloc(h, 1100000 + (size_t)i * 70000), 1, 4096);
    void *ov = hak_heap_aligned_alloc(h, (size_t)4 << 20, 100);
    CHECK(ov && ht_aligned(ov, (size_t)4 << 20), "4 MiB-aligned block %p", ov);
    void *gone = hak_heap_malloc(h, 3000000); /* freed before destroy: off the heap's books */
    gone = realloc_or_die(gone, 5000000);
    hak_free(gone);
    hak_stats_get(&st1);
    CHECK(st1.memory.huge_blocks >= st0.memory.huge_blocks + 40, "40 huge blocks: %llu -> %llu",
          (unsigned long long)st0.memory.huge_blocks, (unsigned long long)st1.memory.huge_blocks);
    /* the NULL heap is the process's allocator */
    void *d = hak_heap_malloc(NULL, 100);
    CHECK(d != NULL && hak_owns(d), "malloc(NULL heap)");
    d = hak_heap_realloc(NULL, d, 200);
    hak_free(d);
    hak_free(hak_heap_calloc(NULL, 2, 8));
    hak_free(hak_heap_aligned_alloc(NULL, 64, 8));
    hak_heap_destroy(NULL);  /* nothing */
    hak_heap_delete(NULL);   /* nothing */
    hak_heap_destroy(h);
    hak_stats_get(&st2);
    CHECK(st2.memory.huge_blocks <= st0.memory.huge_blocks, "destroy left huge blocks: %llu -> %llu",
          (unsigned long long)st0.memory.huge_blocks, (unsigned long long)st2.memory.huge_blocks);
    printf("basic: ok\n");
}

/* ---- tree ------------------------------------------------------------------- */

typedef struct node {
    struct node *left, *right;
    uint64_t key, pad;
} node_t;

static node_t *tree_build(hak_heap_t *h, uint64_t lo, uint64_t hi)
{
    if (lo >= hi)
        return NULL;
    uint64_t mid = lo + (hi - lo) / 2;
    node_t *n = hak_heap_malloc(h, sizeof *n);
    CHECK(n != NULL, "node %llu", (unsigned long long)mid);
    n->key = mid;
    n->left = tree_build(h, lo, mid);
    n->right = tree_build(h, mid + 1, hi);
    return n;
}

static uint64_t tree_sum(const node_t *n)
{
    return n ? n->key + tree_sum(n->left) + tree_sum(n->right) : 0;
}

static uint64_t retired_pages(void)
{
    hak_stats_t st = HAK_STATS_INIT;
    CHECK(hak_stats_get(&st) == 0, "hak_stats_get");
    return st.events.page_retire;
}

/* Build a tree of n nodes, destroy it; returns destroy's ms. */
static double tree_round(uint64_t n, int check_rss)
{
    hak_collect(true);
    size_t rss0 = ht_rss_bytes_raw();
    hak_heap_t *h = hak_heap_new();
    CHECK(h != NULL, "hak_heap_new");
    node_t *root = tree_build(h, 0, n);
    CHECK(tree_sum(root) == n * (n - 1) / 2, "tree sum");
    size_t rss1 = ht_rss_bytes_raw();
    uint64_t r0 = retired_pages();
    double t0 = ht_now_ms();
    hak_heap_destroy(h);
    double t1 = ht_now_ms();
    uint64_t pages = retired_pages() - r0;
    size_t rss2 = ht_rss_bytes_raw();
    hak_collect(false); /* the freed slices' purge, now rather than after the delay */
    size_t rss3 = ht_rss_bytes_raw();
    printf("tree %llu nodes: destroy %.3f ms, %llu pages retired; RSS start %.1f MiB, built %.1f, "
           "after destroy %.1f, after purge %.1f\n", (unsigned long long)n, t1 - t0,
           (unsigned long long)pages, rss0 / 1048576.0, rss1 / 1048576.0, rss2 / 1048576.0, rss3 / 1048576.0);
    if (g_build != 0) { /* counters: standard and observe builds */
        /* 32-byte nodes, 2048 to a 64 KiB page: work per page, not per block */
        CHECK(pages >= n / 2048 && pages <= n / 512 + 4, "destroy of %llu nodes retired %llu pages",
              (unsigned long long)n, (unsigned long long)pages);
    }
    if (check_rss && !SANITIZED) {
        size_t grown = rss1 - rss0;
        CHECK(grown >= n * 24, "the tree made %zu bytes resident", grown);
        /* more than the dirty budget (8 MiB by default): purged by destroy itself */
        CHECK(rss2 < rss0 + grown / 4, "RSS %zu after destroy, %zu at start, tree %zu", rss2, rss0, grown);
        CHECK(rss3 < rss0 + grown / 4, "RSS %zu after destroy and purge, %zu at start, tree %zu", rss3, rss0, grown);
    }
    return t1 - t0;
}

static void part_tree(void)
{
    uint64_t big = SANITIZED ? 200000 : 1000000;
    double small = tree_round(big / 10, 0);
    double large = tree_round(big, 1);
    printf("tree: destroy %.3f ms for %llu nodes, %.3f ms for %llu: %.3f ns per node (work per 64 KiB page)\n",
           small, (unsigned long long)(big / 10), large, (unsigned long long)big, large * 1e6 / (double)big);
}

/* ---- threads: frees from other threads ------------------------------------ */

#define XN 20000
static void *g_blocks[XN];

static void *free_range(void *arg)
{
    size_t k = (size_t)arg;
    for (size_t i = k; i < XN; i += 2) {
        size_t n = 16 + (i * 37) % 3000;
        CHECK(ht_verify(g_blocks[i], i, 0, n) == (size_t)-1, "block %zu changed", i);
        hak_free(g_blocks[i]);
    }
    return NULL;
}

static void part_threads(void)
{
    hak_heap_t *h = hak_heap_new();
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < XN; i++) {
            size_t n = 16 + (i * 37) % 3000;
            g_blocks[i] = hak_heap_malloc(h, n);
            CHECK(g_blocks[i] != NULL, "malloc");
            ht_fill(g_blocks[i], i, 0, n);
        }
        pthread_t t[2];
        for (size_t k = 0; k < 2; k++) pthread_create(&t[k], NULL, free_range, (void *)k);
        for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
    }
    hak_heap_destroy(h);
    printf("threads: ok\n");
}

/* ---- delete ----------------------------------------------------------------- */

static void *check_and_free_all(void *arg)
{
    (void)arg;
    for (size_t i = 0; i < XN; i++) {
        size_t n = 16 + (i * 53) % 40000;
        CHECK(ht_verify(g_blocks[i], i + 7, 0, n) == (size_t)-1, "deleted heap's block %zu changed", i);
        hak_free(g_blocks[i]);
    }
    return NULL;
}

static void part_delete(void)
{
    hak_heap_t *h = hak_heap_new();
    for (size_t i = 0; i < XN; i++) {
        size_t n = 16 + (i * 53) % 40000;
        g_blocks[i] = hak_heap_malloc(h, n);
        ht_fill(g_blocks[i], i + 7, 0, n);
    }
    for (size_t i = 0; i < XN; i += 3) { /* some freed before: pages with holes */
        hak_free(g_blocks[i]);
        g_blocks[i] = hak_malloc(16 + (i * 53) % 40000);
        ht_fill(g_blocks[i], i + 7, 0, 16 + (i * 53) % 40000);
    }
    void *big = hak_heap_malloc(h, 3000000);
    memset(big, 3, 3000000);
    hak_heap_delete(h);
    CHECK(((unsigned char *)big)[2999999] == 3, "a deleted heap's huge block changed");
    hak_free(big);
    /* the process allocates on; its blocks may come from the abandoned pages */
    void *more[1000];
    for (int i = 0; i < 1000; i++) memset(more[i] = hak_malloc(48), 0x5a, 48);
    pthread_t t;
    pthread_create(&t, NULL, check_and_free_all, NULL);
    pthread_join(t, NULL);
    for (int i = 0; i < 1000; i++) hak_free(more[i]);
    printf("delete: ok\n");
}

/* ---- delete while other threads free the heap's blocks ----------------------
 * Legal: delete keeps the blocks valid. Each free must be an ordinary one
 * (no message), before, during or after the delete. */

static atomic_int g_go;

static void *free_half_racing(void *arg)
{
    size_t k = (size_t)arg;
    while (!atomic_load(&g_go)) {
    }
    for (size_t i = k; i < XN; i += 2) {
        CHECK(ht_verify(g_blocks[i], i, 0, 64) == (size_t)-1, "block %zu changed", i);
        hak_free(g_blocks[i]);
    }
    return NULL;
}

static void part_delete_race(void)
{
    for (int round = 0; round < 20; round++) {
        hak_heap_t *h = hak_heap_new();
        for (size_t i = 0; i < XN; i++) {
            g_blocks[i] = hak_heap_malloc(h, 64 + (i % 7) * 16);
            ht_fill(g_blocks[i], i, 0, 64);
        }
        atomic_store(&g_go, 0);
        pthread_t t[2];
        for (size_t k = 0; k < 2; k++) pthread_create(&t[k], NULL, free_half_racing, (void *)k);
        ht_capture_begin();
        atomic_store(&g_go, 1);
        for (volatile int spin = 0; spin < round * 2000; spin++) {
        }
        hak_heap_delete(h);
        for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
        const char *msg = ht_capture_end();
        CHECK(msg[0] == 0, "frees racing a delete got messages: %s", msg);
    }
    printf("delete_race: ok\n");
}

/* ---- stress: two heaps, four threads ---------------------------------------- */

#define NBOX 256
static _Atomic(uint64_t *) g_box[NBOX];
static hak_heap_t *g_heaps[2];
static atomic_ulong g_checked;

static void *stress_worker(void *arg)
{
    ht_rng r = {(uint64_t)(uintptr_t)arg * 7919 + 1};
    unsigned ops = SANITIZED ? 20000 : 100000;
    for (unsigned i = 0; i < ops; i++) {
        hak_heap_t *h = g_heaps[ht_below(&r, 2)];
        uint64_t k = ht_below(&r, 1000);
        size_t n = k == 0 ? 1100000 : k < 100 ? 16 + ht_below(&r, 60000) : 16 + ht_below(&r, 400);
        uint64_t *p;
        switch (ht_below(&r, 4)) {
        case 0: p = hak_heap_calloc(h, 1, n); break;
        case 1: p = hak_heap_aligned_alloc(h, 64, n); break;
        default: p = hak_heap_malloc(h, n); break;
        }
        CHECK(p != NULL, "stress malloc %zu", n);
        uint64_t key = ht_next(&r);
        if (n > 65536)
            n = 65536; /* the part checked */
        p[0] = key;
        p[1] = n;
        ht_fill(p, key, 16, n);
        uint64_t *q = atomic_exchange(&g_box[ht_below(&r, NBOX)], p);
        if (q) {
            CHECK(ht_verify(q, q[0], 16, q[1]) == (size_t)-1, "stress block %p changed", (void *)q);
            atomic_fetch_add(&g_checked, 1);
            if (ht_below(&r, 4) == 0) {
                size_t m = 16 + ht_below(&r, 3000);
                q = hak_heap_realloc(h, q, m); /* may move it to the other heap */
                CHECK(q != NULL, "stress realloc");
                q[1] = m < q[1] ? m : q[1];
                q = atomic_exchange(&g_box[ht_below(&r, NBOX)], q);
                if (q) hak_free(q);
            } else {
                hak_free(q);
            }
        }
    }
    return NULL;
}

static void part_stress(void)
{
    g_heaps[0] = hak_heap_new();
    g_heaps[1] = hak_heap_new();
    pthread_t t[4];
    for (uintptr_t k = 0; k < 4; k++) pthread_create(&t[k], NULL, stress_worker, (void *)k);
    for (int k = 0; k < 4; k++) pthread_join(t[k], NULL);
    /* half of the mailbox freed one by one, the rest goes with its heap */
    for (int i = 0; i < NBOX; i += 2) {
        uint64_t *q = atomic_exchange(&g_box[i], NULL);
        if (q) hak_free(q);
    }
    hak_heap_destroy(g_heaps[0]);
    hak_heap_destroy(g_heaps[1]);
    for (int i = 0; i < NBOX; i++) atomic_store(&g_box[i], NULL);
    printf("stress: ok (%lu blocks checked)\n", (unsigned long)atomic_load(&g_checked));
}

/* ---- fork --------------------------------------------------------------------- */

static atomic_int g_stop;

static void *fork_busy(void *arg)
{
    hak_heap_t *h = arg;
    while (!atomic_load(&g_stop)) {
        void *p[64];
        for (int i = 0; i < 64; i++) p[i] = hak_heap_malloc(h, 16 + i * 40);
        for (int i = 0; i < 64; i++) hak_free(p[i]);
    }
    return NULL;
}

static void part_fork(void)
{
    hak_heap_t *h = hak_heap_new();
    char *keep = hak_heap_malloc(h, 1000);
    memset(keep, 'k', 1000);
    pthread_t t;
    int threaded = !SANITIZED; /* TSan does not support threads after a multithreaded fork */
    if (threaded) pthread_create(&t, NULL, fork_busy, h);
    for (int round = 0; round < (threaded ? 20 : 2); round++) {
        pid_t pid = fork();
        CHECK(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
            for (int i = 0; i < 1000; i++) CHECK(keep[i] == 'k', "child: block changed");
            void *p[500];
            for (int i = 0; i < 500; i++) CHECK((p[i] = hak_heap_malloc(h, 24 + i)) != NULL, "child malloc");
            for (int i = 0; i < 500; i += 2) hak_free(p[i]);
            hak_free(keep);
            hak_heap_destroy(h);
            hak_heap_t *h2 = hak_heap_new();
            CHECK(h2 && hak_heap_malloc(h2, 100), "child: new heap");
            hak_heap_destroy(h2);
            _exit(0);
        }
        int st = ht_wait(pid);
        CHECK(ht_exited0(st), "child failed (status %d)", st);
    }
    if (threaded) {
        atomic_store(&g_stop, 1);
        pthread_join(t, NULL);
    }
    for (int i = 0; i < 1000; i++) CHECK(keep[i] == 'k', "parent: block changed");
    hak_free(keep);
    hak_heap_destroy(h);
    printf("fork: ok\n");
}

/* ---- nocache: a heap's blocks never reach a thread's cache ---------------------
 * Blocks of a heap freed on this thread, then the heap destroyed, then as
 * many blocks of the same class from malloc: were the freed blocks in this
 * thread's cache, malloc would hand them out while new pages cut from the
 * same slices hand them out again - the same address twice. */

#define NC 3000
static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

static void part_nocache(void)
{
    static void *got[2 * NC];
    for (int round = 0; round < 3; round++) {
        hak_heap_t *h = hak_heap_new();
        for (int i = 0; i < NC; i++) got[i] = hak_heap_malloc(h, 48);
        for (int i = 0; i < NC; i++) hak_free(got[i]);
        hak_heap_destroy(h);
        for (int i = 0; i < 2 * NC; i++) {
            got[i] = hak_malloc(48);
            CHECK(got[i] != NULL, "malloc");
        }
        qsort(got, 2 * NC, sizeof got[0], cmp_ptr);
        for (int i = 1; i < 2 * NC; i++)
            CHECK(got[i] != got[i - 1], "malloc handed out %p twice: a heap block was in the thread's cache", got[i]);
        for (int i = 0; i < 2 * NC; i++) hak_free(got[i]);
    }
    printf("nocache: ok\n");
}

/* ---- bad input ------------------------------------------------------------------ */

static void part_bad(void)
{
    hak_heap_t *h = hak_heap_new();
    void *a = hak_heap_malloc(h, 40);
    void *b = hak_heap_malloc(h, 40);
    hak_heap_malloc(h, 40); /* keeps the page */
    if (g_build != 0) { /* checks: standard and observe builds */
        hak_free(a);
        ht_capture_begin();
        hak_free(a);
        const char *msg = ht_capture_end();
        CHECK(strstr(msg, "double free") != NULL, "double free of a heap block: stderr was \"%s\"", msg);
        void *c = hak_heap_malloc(h, 40); /* a is reused once, not twice */
        void *d = hak_heap_malloc(h, 40);
        CHECK(c != d, "a double-freed block was handed out twice");
    }
    hak_heap_destroy(h);
    ht_capture_begin();
    hak_heap_destroy(h);
    hak_heap_delete(h);
    errno = 0;
    void *x = hak_heap_malloc(h, 10);
    int e = errno;
    hak_free(b); /* its page went back with the heap */
    const char *msg = ht_capture_end();
    CHECK(strstr(msg, "hak_heap_destroy: not a live heap") != NULL, "destroy twice: stderr was \"%s\"", msg);
    CHECK(strstr(msg, "hak_heap_delete: not a live heap") != NULL, "delete after destroy: stderr was \"%s\"", msg);
    CHECK(x == NULL && e == EINVAL, "malloc from a destroyed heap: %p, errno %d", x, e);
    CHECK(strstr(msg, "free: invalid pointer") != NULL, "free after destroy: stderr was \"%s\"", msg);
    /* nothing broke: a new heap and the process work */
    hak_heap_t *h2 = hak_heap_new();
    for (int i = 0; i < 1000; i++) hak_free(hak_heap_malloc(h2, 40));
    hak_heap_destroy(h2);
    printf("bad: ok\n");
}

int main(int argc, char **argv)
{
    hak_test_name = "test_user_heap";
    setvbuf(stdout, NULL, _IONBF, 0);
    hak_stats_t st = HAK_STATS_INIT;
    hak_stats_get(&st);
    g_build = (int)st.build;
    const char *part = argc > 1 ? argv[1] : "all";
    int all = !strcmp(part, "all");
    if (all || !strcmp(part, "basic")) part_basic();
    if (all || !strcmp(part, "tree")) part_tree();
    if (all || !strcmp(part, "threads")) part_threads();
    if (all || !strcmp(part, "delete")) part_delete();
    if (all || !strcmp(part, "delete_race")) part_delete_race();
    if (all || !strcmp(part, "stress")) part_stress();
    if (all || !strcmp(part, "fork")) part_fork();
    if (all || !strcmp(part, "nocache")) part_nocache();
    if (all || !strcmp(part, "bad")) part_bad();
    return 0;
}
