/* test_heap_park - a thread's heap keeps its pages at thread exit (parked,
 * heap/heap_exit.c "Parking"), the next thread the pool hands the heap to
 * goes on with them, and a parked heap that no thread takes gives them up.
 *
 * Linked with libhakmem.a (it reads the heap and page records).  A worker
 * allocates blocks of one class, leaves some to main and exits: the page of
 * those blocks must still name the worker's heap as owner (not abandoned).
 * The next thread is handed the same heap (the pool's free stack is LIFO) and
 * its first block of the class comes from that page.  After it exits too,
 * the page is given up (abandoned, owner none) by the purge deadline's
 * collector once the heap has gone a pass untouched (HAKMEM_PURGE_DELAY_MS
 * is short here: argument "deadline"), or at once by malloc_trim (argument
 * "trim").  Then main frees what it holds and everything still works.
 * A page mostly handed out at its thread's exit is not parked but abandoned
 * (heap/heap_exit.c, "Mostly handed out"): a worker hands main a few
 * pages' worth of blocks and exits; its first page must be abandoned (owner
 * none), and the successor that frees those blocks (bench_larson's pattern)
 * adopts it, the blocks intact, and allocates as many again.
 * Last, the pool's hint (heap/pool.c, free_pop_hinted): of heaps parked one
 * after the other, a thread whose first call frees a block of one near the
 * top is handed that one, and the heaps popped on the way go back (threads
 * alive at once afterwards get exactly the parked heaps, none twice).
 *
 * usage: test_heap_park deadline|trim
 */
#include "hak_test.h"
#include "heap/heap.h"

#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#define SIZE 200
#define N 64
#define KEEP 8

struct job {
    void *kept[KEEP];
    void *first;      /* the next thread's first block of the class */
    hak_heap_t *heap;
    atomic_int ready, go; /* hint_test: both workers alive at once */
};

static void *worker(void *arg)
{
    struct job *j = arg;
    void *b[N];
    for (int i = 0; i < N; i++) {
        b[i] = malloc(SIZE);
        CHECK(b[i] != NULL, "malloc failed");
        memset(b[i], 0x5a, SIZE);
    }
    for (int i = 0; i < N; i++) {
        if (i < KEEP) j->kept[i] = b[i];
        else free(b[i]);
    }
    j->heap = hak_tls.heap;
    atomic_store(&j->ready, 1);
    return NULL;
}

static void *waiting_worker(void *arg)
{
    struct job *j = arg;
    worker(j);
    while (!atomic_load(&j->go)) sched_yield();
    return NULL;
}

static void *next_thread(void *arg)
{
    struct job *j = arg;
    j->first = malloc(SIZE);
    CHECK(j->first != NULL, "malloc failed");
    j->heap = hak_tls.heap;
    free(j->first);
    return NULL;
}

static void *frees_first(void *arg)
{
    struct job *j = arg;
    free(j->first); /* the thread's first call */
    j->heap = hak_tls.heap;
    return NULL;
}

#define HEAVY 2000
static void *heavy_worker(void *arg)
{
    void **b = arg;
    for (int i = 0; i < HEAVY; i++) {
        b[i] = malloc(SIZE);
        CHECK(b[i] != NULL, "malloc failed");
        memset(b[i], 0x3c, SIZE);
    }
    return NULL;
}

static hak_page_t *heavy_page;
static void *heavy_successor(void *arg)
{
    void **b = arg;
    for (int i = 0; i < HEAVY; i++) {
        CHECK(((unsigned char *)b[i])[0] == 0x3c && ((unsigned char *)b[i])[SIZE - 1] == 0x3c,
              "a block handed over changed");
        free(b[i]);
    }
    /* the cache keeps its newest frees; the oldest (the first page's) went
     * back to the page, whose first flush adopted it */
    CHECK(heavy_page->state != HAK_PAGE_ABANDONED, "the successor freeing into the abandoned page did not adopt it");
    for (int i = 0; i < HEAVY; i++) {
        b[i] = malloc(SIZE);
        CHECK(b[i] != NULL, "malloc failed");
        memset(b[i], 0x77, SIZE);
    }
    return NULL;
}

static void heavy_test(void)
{
    static void *b[HEAVY];
    pthread_t t;
    CHECK(pthread_create(&t, NULL, heavy_worker, b) == 0, "pthread_create failed");
    CHECK(pthread_join(t, NULL) == 0, "pthread_join failed");
    heavy_page = page_of(b[0]);
    CHECK(heavy_page->used > heavy_page->capacity / 4, "the first page is not mostly handed out (%u of %u)",
          heavy_page->used, heavy_page->capacity);
    CHECK(heavy_page->state == HAK_PAGE_ABANDONED && atomic_load(&heavy_page->owner) == NULL,
          "a page mostly handed out stayed with the exited thread's heap (state %d)", heavy_page->state);
    CHECK(pthread_create(&t, NULL, heavy_successor, b) == 0, "pthread_create failed");
    CHECK(pthread_join(t, NULL) == 0, "pthread_join failed");
    for (int i = 0; i < HEAVY; i++) {
        CHECK(((unsigned char *)b[i])[SIZE - 1] == 0x77, "a block changed");
        free(b[i]);
    }
}

static hak_heap_t *one_thread(void *(*fn)(void *), struct job *j)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, fn, j) == 0, "pthread_create failed");
    CHECK(pthread_join(t, NULL) == 0, "pthread_join failed");
    return j->heap;
}

/* NW workers alive at once, parked in order (the last on top); returns their heaps. */
#define NW 6
static void park_in_order(struct job *w)
{
    pthread_t t[NW];
    for (int i = 0; i < NW; i++) CHECK(pthread_create(&t[i], NULL, waiting_worker, &w[i]) == 0, "pthread_create");
    for (int i = 0; i < NW; i++)
        while (!atomic_load(&w[i].ready)) sched_yield();
    for (int i = 0; i < NW; i++) {
        atomic_store(&w[i].go, 1);
        CHECK(pthread_join(t[i], NULL) == 0, "pthread_join failed");
    }
    for (int i = 0; i < NW; i++)
        for (int k = 0; k < i; k++) CHECK(w[i].heap != w[k].heap, "threads alive at once had the same heap");
}

static void free_kept(struct job *w)
{
    for (int i = 0; i < NW; i++)
        for (int k = 0; k < KEEP; k++) free(w[i].kept[k]);
}

/* The pool's hint: a thread whose first call frees a block of a heap parked
 * at `depth` from the top (1: the top) is handed that heap if depth <= 4,
 * else the top one; either way the heaps popped on the way go back: NW
 * threads alive at once afterwards get NW different heaps, all parked ones. */
static int hint_case(int depth)
{
    struct job w[NW] = { 0 }, v[NW] = { 0 }, f = { 0 };
    park_in_order(w);
    /* a kept block whose page the heap at that depth owns (a page may have
     * moved to another worker's heap: heap/collect.c, "Pages to a peer") */
    hak_heap_t *at = w[NW - depth].heap;
    int wi = -1, ki = -1;
    for (int i = 0; i < NW && wi < 0; i++)
        for (int k = 0; k < KEEP && wi < 0; k++)
            if (atomic_load(&page_of(w[i].kept[k])->owner) == at) wi = i, ki = k;
    if (wi >= 0) {
        hak_heap_t *want = depth <= 4 ? at : w[NW - 1].heap;
        f.first = w[wi].kept[ki];
        w[wi].kept[ki] = malloc(1); /* (freed with the others) */
        CHECK(one_thread(frees_first, &f) == want, "depth %d: the thread freeing first was handed heap %p, not %p",
              depth, (void *)f.heap, (void *)want);
    }
    park_in_order(v);
    for (int i = 0; i < NW; i++) {
        int found = 0;
        for (int k = 0; k < NW; k++) found |= v[i].heap == w[k].heap;
        CHECK(found, "depth %d: a thread was handed a heap that was not parked (a popped one lost?)", depth);
    }
    free_kept(w);
    free_kept(v);
    return wi >= 0;
}

static void hint_test(void)
{
    int done = 0;
    for (int round = 0; round < 20 && done != 7; round++) {
        if (!(done & 1) && hint_case(2)) done |= 1;
        if (!(done & 2) && hint_case(4)) done |= 2;
        if (!(done & 4) && hint_case(6)) done |= 4; /* not among the top 4 */
    }
    CHECK(done == 7, "no kept block owned by the heap at some depth in 20 rounds (cases done: %d)", done);
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
    hak_test_name = "test_heap_park";
    int trim = argc > 1 && !strcmp(argv[1], "trim");
    struct job a = { 0 }, n = { 0 };
    pthread_t t;
    CHECK(pthread_create(&t, NULL, worker, &a) == 0, "pthread_create failed");
    CHECK(pthread_join(t, NULL) == 0, "pthread_join failed");
    hak_page_t *page = page_of(a.kept[0]);
    CHECK(atomic_load(&page->owner) == a.heap && page->state != HAK_PAGE_ABANDONED,
          "the exited worker's page was given up at its exit (state %d), not kept with its heap", page->state);
    CHECK(pthread_create(&t, NULL, next_thread, &n) == 0, "pthread_create failed");
    CHECK(pthread_join(t, NULL) == 0, "pthread_join failed");
    CHECK(n.heap == a.heap, "the next thread was not handed the parked heap");
    CHECK(page_of(n.first) == page, "the next thread's first block did not come from the parked page");
    CHECK(atomic_load(&page->owner) == a.heap, "the page left the heap while a thread used it");
    if (trim) {
        malloc_trim(0);
    } else {
        /* two passes of the collector: the first sees the heap's activity
         * changed, the second finds it untouched; main's own slow paths run
         * the deadline too (HAKMEM_BACKGROUND_PURGE may be 0) */
        for (int i = 0; i < 200 && atomic_load(&page->owner) != NULL; i++) {
            sleep_ms(10);
            free(malloc(100000 + (size_t)i * 4096)); /* a slow path: the deadline's check */
        }
    }
    CHECK(page->state == HAK_PAGE_ABANDONED && atomic_load(&page->owner) == NULL,
          "the parked heap's page was not given up by %s (state %d)", trim ? "malloc_trim" : "the collector",
          page->state);
    for (int i = 0; i < KEEP; i++) {
        CHECK(((unsigned char *)a.kept[i])[SIZE - 1] == 0x5a, "a kept block changed");
        free(a.kept[i]);
    }
    for (int i = 0; i < 10000; i++) {
        void *p = malloc((size_t)(i % 3000) + 1);
        CHECK(p != NULL, "malloc failed");
        free(p);
    }
    heavy_test();
    hint_test();
    printf("test_heap_park: OK: the exited thread's page stayed with its heap, the next thread went on with it, "
           "and %s gave it up; a page mostly handed out was abandoned at exit and adopted by the thread freeing into it; a thread freeing first was handed the heap of its block\n",
           trim ? "malloc_trim" : "the collector");
    return 0;
}
