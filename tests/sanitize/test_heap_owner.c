/* test_heap_owner - the owner's cache of first-class heaps (protocol in
 * src/heap/user_heap_oc.c): the thread that created a heap allocates from it
 * without its lock while other threads free its blocks and a third thread
 * destroys or deletes it. Linked with libhakmem.a; in the TSan build the race check
 * of the protocol (TSan does not know the membarrier, so it checks the
 * busy-word handshake the protocol rests on).
 *
 * usage: test_heap_owner [ROUNDS]   (default 100, 20 under a sanitizer)
 *
 * Each round: the owner creates a heap and allocates from it (sizes 16 B to
 * 2 KiB) until the heap is gone, stamping every block with a sequence number
 * and handing most of them to two freeing threads through a mailbox; the
 * main thread waits for NALLOC blocks and then
 *  - even rounds: stops the freeing threads and destroys the heap while the
 *    owner allocates (blocks of a destroyed heap are never touched again);
 *  - odd rounds: deletes the heap while the owner allocates and the freeing
 *    threads go on freeing (delete keeps every block valid).
 * The owner must then get NULL and EINVAL (one "not a live heap" line per
 * round, nothing else on stderr). In delete rounds the blocks it kept must
 * still carry their stamps (no block handed out twice) and are freed.
 * Before the rounds: a block freed twice while reserved for the owner is
 * reported (builds with checks); a fork while another thread owns a heap,
 * the child allocating from it and destroying or deleting it.
 * After the rounds (standard build: counters on), the slices in use are back
 * near where they started: blocks the owner's cache held when its heap was
 * deleted went back to their pages (else each round would pin a page). */
#include "hak_test.h"
#include "hakmem.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

#define NALLOC 20000
#define KEEP (1 << 16)
#define NBOX 512

static pthread_barrier_t g_start, g_end;
static _Atomic(hak_heap_t *) g_heap;
static atomic_int g_round, g_quit;
static atomic_ulong g_allocs;
static atomic_int g_free_stop, g_freeing;
static _Atomic(uint64_t *) g_box[NBOX];
static uint64_t *g_kept[KEEP];
static size_t g_nkept;
static atomic_ulong g_freed;

static int is_delete_round(int round) { return round & 1; }

static void *owner(void *arg)
{
    (void)arg;
    ht_rng r = {12345};
    uint64_t seq = 1;
    for (;;) {
        pthread_barrier_wait(&g_start);
        if (atomic_load(&g_quit))
            return NULL;
        int round = atomic_load(&g_round);
        hak_heap_t *h = hak_heap_new();
        CHECK(h != NULL, "hak_heap_new");
        atomic_store(&g_heap, h);
        g_nkept = 0;
        for (;;) {
            size_t n = 16 + ht_below(&r, 2033);
            errno = 0;
            uint64_t *p = hak_heap_malloc(h, n);
            if (!p) {
                CHECK(errno == EINVAL, "malloc from a gone heap: errno %d", errno);
                break;
            }
            atomic_fetch_add(&g_allocs, 1);
            /* A block the owner got just before a destroy is not written
             * (the program's race): the writes happen inside the gate the
             * destroying thread closes and waits on, as the frees do. */
            atomic_fetch_add(&g_freeing, 1);
            if (is_delete_round(round) || !atomic_load(&g_free_stop)) {
                p[0] = seq;
                p[1] = ~seq;
                seq++;
                uint64_t *q = p;
                if (ht_below(&r, 8) != 0)
                    q = atomic_exchange(&g_box[ht_below(&r, NBOX)], p);
                if (q && g_nkept < KEEP)
                    g_kept[g_nkept++] = q; /* kept, or the mailbox was full there */
                else if (q)
                    hak_free(q); /* the owner's own free */
            }
            atomic_fetch_sub(&g_freeing, 1);
        }
        if (is_delete_round(round)) {
            for (size_t i = 0; i < g_nkept; i++) {
                CHECK(g_kept[i][1] == ~g_kept[i][0], "kept block %p changed", (void *)g_kept[i]);
                hak_free(g_kept[i]);
            }
        }
        pthread_barrier_wait(&g_end);
    }
}

static void *freer(void *arg)
{
    ht_rng r = {(uint64_t)(uintptr_t)arg * 7919 + 3};
    for (;;) {
        pthread_barrier_wait(&g_start);
        if (atomic_load(&g_quit))
            return NULL;
        for (;;) {
            atomic_fetch_add(&g_freeing, 1);
            if (atomic_load(&g_free_stop)) {
                atomic_fetch_sub(&g_freeing, 1);
                break;
            }
            uint64_t *q = atomic_exchange(&g_box[ht_below(&r, NBOX)], NULL);
            if (q) {
                CHECK(q[1] == ~q[0], "block %p changed before its free", (void *)q);
                memset(q, 0xdd, 16);
                hak_free(q);
                atomic_fetch_add(&g_freed, 1);
            }
            atomic_fetch_sub(&g_freeing, 1);
        }
        pthread_barrier_wait(&g_end);
    }
}

/* Builds with checks: a block freed, then reserved for the owner's cache by
 * a refill, then freed again is a double free (its stamp says it), not a
 * block put on its page while the cache holds it. */
static void double_free_reserved(void)
{
    hak_heap_t *h = hak_heap_new();
    void *x[200];
    for (int i = 0; i < 200; i++) x[i] = hak_heap_malloc(h, 40);
    void *p = x[10], *q = x[20];
    hak_free(p);
    hak_free(q); /* the page's free list: q, p */
    void *r = NULL;
    for (int i = 0; i < 1000 && r != p && r != q; i++) r = hak_heap_malloc(h, 40);
    CHECK(r == q, "the refill did not start from the page's free list (%p, p %p q %p)", r, p, q);
    ht_capture_begin();
    hak_free(p); /* reserved for the owner, never handed out again */
    const char *msg = ht_capture_end();
    CHECK(strstr(msg, "double free") != NULL, "free of a reserved block: stderr was \"%s\"", msg);
    void *a = hak_heap_malloc(h, 40), *b = hak_heap_malloc(h, 40);
    CHECK(a == p && b != p, "the reserved block: %p then %p, p %p", a, b, p);
    hak_heap_destroy(h);
    printf("test_heap_owner: double free of a reserved block reported\n");
}

/* fork while another thread owns a heap (and sits in it): the child, where
 * that thread is not, allocates from the heap, frees, and deletes it; the
 * parent's owner goes on allocating without a lock afterwards */
static _Atomic(hak_heap_t *) g_fheap;
static atomic_int g_fdone;

static void *fork_owner(void *arg)
{
    (void)arg;
    hak_heap_t *h = hak_heap_new();
    void *keep[1000];
    for (int i = 0; i < 1000; i++) keep[i] = hak_heap_malloc(h, 24 + i % 200);
    atomic_store(&g_fheap, h);
    while (!atomic_load(&g_fdone))
        for (int i = 0; i < 1000; i++) {
            hak_free(keep[i]);
            keep[i] = hak_heap_malloc(h, 24 + i % 200);
            CHECK(keep[i] != NULL, "owner malloc after fork");
        }
    hak_heap_destroy(h);
    return NULL;
}

static void fork_foreign_owner(void)
{
    pthread_t t;
    pthread_create(&t, NULL, fork_owner, NULL);
    while (!atomic_load(&g_fheap))
        sched_yield();
    hak_heap_t *h = atomic_load(&g_fheap);
    for (int round = 0; round < 10; round++) {
        pid_t pid = fork();
        CHECK(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
            void *p[2000];
            for (int i = 0; i < 2000; i++) CHECK((p[i] = hak_heap_malloc(h, 16 + i % 300)) != NULL, "child malloc");
            for (int i = 0; i < 2000; i += 2) hak_free(p[i]);
            if (round & 1)
                hak_heap_destroy(h);
            else {
                hak_heap_delete(h);
                for (int i = 1; i < 2000; i += 2) hak_free(p[i]);
            }
            _exit(0);
        }
        int st = ht_wait(pid);
        CHECK(ht_exited0(st), "child failed (status %d)", st);
    }
    atomic_store(&g_fdone, 1);
    pthread_join(t, NULL);
    printf("test_heap_owner: fork with another thread owning the heap: ok\n");
}

static uint64_t in_use(void)
{
    hak_stats_t st = HAK_STATS_INIT;
    hak_stats_get(&st);
    return st.memory.in_use;
}

int main(int argc, char **argv)
{
    hak_test_name = "test_heap_owner";
    setvbuf(stdout, NULL, _IONBF, 0);
    int rounds = argc > 1 ? atoi(argv[1]) : SANITIZED ? 20 : 100;
    hak_stats_t st = HAK_STATS_INIT;
    hak_stats_get(&st);
    int counted = st.build != 0;
    if (counted)
        double_free_reserved();
    if (!SANITIZED) /* TSan: no fork of a process with threads here */
        fork_foreign_owner();

    pthread_barrier_init(&g_start, NULL, 4);
    pthread_barrier_init(&g_end, NULL, 4);
    pthread_t t[3];
    pthread_create(&t[0], NULL, owner, NULL);
    for (uintptr_t k = 1; k < 3; k++) pthread_create(&t[k], NULL, freer, (void *)k);

    hak_collect(1);
    uint64_t use0 = in_use();
    ht_capture_begin(); /* each round's owner gets one "not a live heap" line */
    for (int round = 0; round < rounds; round++) {
        atomic_store(&g_round, round);
        atomic_store(&g_allocs, 0);
        atomic_store(&g_free_stop, 0);
        atomic_store(&g_heap, NULL);
        pthread_barrier_wait(&g_start);
        while (atomic_load(&g_allocs) < NALLOC)
            sched_yield();
        hak_heap_t *h = atomic_load(&g_heap);
        if (is_delete_round(round)) {
            hak_heap_delete(h); /* frees go on meanwhile */
            atomic_store(&g_free_stop, 1);
        } else {
            atomic_store(&g_free_stop, 1);
            while (atomic_load(&g_freeing))
                sched_yield();
            hak_heap_destroy(h);
        }
        pthread_barrier_wait(&g_end);
        /* the mailbox: freed after a delete, dropped after a destroy */
        for (int i = 0; i < NBOX; i++) {
            uint64_t *q = atomic_exchange(&g_box[i], NULL);
            if (q && is_delete_round(round)) {
                CHECK(q[1] == ~q[0], "mailbox block %p changed", (void *)q);
                hak_free(q);
            }
        }
    }
    atomic_store(&g_quit, 1);
    pthread_barrier_wait(&g_start);
    for (int k = 0; k < 3; k++) pthread_join(t[k], NULL);
    const char *msg = ht_capture_end();

    /* stderr: only "not a live heap" lines, one per round */
    int lines = 0;
    for (const char *l = msg; *l; lines++) {
        const char *nl = strchr(l, '\n');
        static const char want[] = "hakmem: hak_heap_malloc: not a live heap";
        CHECK(strncmp(l, want, sizeof want - 1) == 0,
              "unexpected message: %.*s", (int)(nl ? nl - l : (long)strlen(l)), l);
        l = nl ? nl + 1 : l + strlen(l);
    }
    CHECK(lines == rounds, "%d \"not a live heap\" lines for %d rounds", lines, rounds);
    hak_collect(1);
    uint64_t use1 = in_use();
    printf("test_heap_owner: %d rounds, %lu blocks freed by other threads, in use %.1f -> %.1f MiB\n", rounds,
           (unsigned long)atomic_load(&g_freed), use0 / 1048576.0, use1 / 1048576.0);
    if (counted && !SANITIZED)
        CHECK(use1 < use0 + ((uint64_t)2 << 20), "slices in use grew from %llu to %llu over %d rounds",
              (unsigned long long)use0, (unsigned long long)use1, rounds);
    printf("test_heap_owner: ok\n");
    return 0;
}
