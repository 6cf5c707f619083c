/* test_heap_pool - the lock-free heap pool (src/heap/pool.c) under churn.
 *
 * Linked with libhakmem.a, so it can see each thread's heap (hak_tls.heap).
 * 6 spawner threads each start and join short-lived threads, 2 at a time,
 * for many rounds, while a seventh thread forks now and then. A short-lived
 * thread marks its heap in use with an atomic exchange: finding it marked
 * already means two live threads were handed the same heap (a pop that an
 * ABA let through). It allocates blocks of several classes, hands some to
 * the next thread through a mailbox (frees into pages of heaps that are
 * being retired and recycled), checks the contents of what it receives,
 * and exits without freeing a few (they stay valid, freed by main). A
 * forked child checks that it can start threads that allocate and free,
 * and that its pool was rebuilt (new threads get heaps). At the end the
 * heaps ever mapped stay within the most threads alive at once plus slack:
 * heaps are recycled, none lost.
 */
#include "hak_test.h"
#include "heap/heap.h"

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#define SPAWNERS 6
#define PER_SPAWNER 2
#define ROUNDS 300
#define MAILBOX 256
#define MAXHEAPS 4096

static _Atomic(void *) g_mail[MAILBOX];
static _Atomic(hak_heap_t *) g_in_use[MAXHEAPS];
static atomic_int g_forks_done;
static atomic_int g_threads;

static size_t size_of(unsigned i) { static const size_t s[] = {16, 48, 100, 256, 700, 2000, 9000}; return s[i % 7]; }

static void fill(unsigned char *p, size_t n, unsigned char k) { memset(p, k, n); p[0] = (unsigned char)n; }
static void check(unsigned char *p)
{
    size_t n = malloc_usable_size(p);
    CHECK(n >= 16, "usable size %zu", n);
    unsigned char k = p[1];
    for (size_t i = 1; i < 16; i++)
        CHECK(p[i] == k, "block %p changed at %zu", (void *)p, i);
}

static unsigned mark(hak_heap_t *h)
{
    unsigned i = (unsigned)(((uintptr_t)h >> 12) * 2654435761u) % MAXHEAPS;
    for (unsigned n = 0; n < MAXHEAPS; n++, i = (i + 1) % MAXHEAPS) {
        hak_heap_t *none = NULL;
        if (atomic_compare_exchange_strong(&g_in_use[i], &none, h))
            return i;
        CHECK(none != h, "heap %p handed to two live threads at once", (void *)h);
    }
    HT_FAIL("in-use table full");
    return 0;
}

static void *short_thread(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    void *first = malloc(24); /* the thread's heap exists from here */
    CHECK(first != NULL, "malloc failed");
    hak_heap_t *h = hak_tls.heap;
    CHECK(h != NULL && hak_tls.state == HAK_THREAD_LIVE, "thread has no heap of its own");
    unsigned slot = mark(h);
    for (unsigned i = 0; i < 40; i++) {
        size_t n = size_of(i + (unsigned)id);
        unsigned char *p = malloc(n);
        CHECK(p != NULL, "malloc(%zu) failed", n);
        fill(p, n < 16 ? n : 16, (unsigned char)(i + id));
        p[1] = p[2];
        unsigned char *q = atomic_exchange(&g_mail[(i * 7 + id) % MAILBOX], p);
        if (q) {
            check(q);
            free(q);
        }
    }
    CHECK(hak_tls.heap == h, "the thread's heap changed under it");
    atomic_store(&g_in_use[slot], NULL);
    return first; /* freed by the spawner, after this thread is gone */
}

static void *spawner(void *arg)
{
    uintptr_t s = (uintptr_t)arg;
    for (unsigned r = 0; r < ROUNDS || !atomic_load(&g_forks_done); r++) {
        pthread_t t[PER_SPAWNER];
        for (unsigned k = 0; k < PER_SPAWNER; k++)
            CHECK(pthread_create(&t[k], NULL, short_thread, (void *)(s * 1000 + r * 3 + k)) == 0, "pthread_create failed");
        for (unsigned k = 0; k < PER_SPAWNER; k++) {
            void *kept;
            CHECK(pthread_join(t[k], &kept) == 0, "pthread_join failed");
            free(kept); /* its thread is gone: into a page of a retired or recycled heap */
        }
        atomic_fetch_add(&g_threads, PER_SPAWNER);
    }
    return NULL;
}

static void *child_thread(void *arg)
{
    (void)arg;
    for (int i = 0; i < 200; i++) {
        void *p = malloc(size_of((unsigned)i));
        CHECK(p != NULL, "malloc in the child failed");
        free(p);
    }
    return hak_tls.heap;
}

static void *forker(void *arg)
{
    (void)arg;
    for (int k = 0; k < 12; k++) {
        usleep(10000);
        pid_t pid = fork();
        CHECK(pid >= 0, "fork failed");
        if (pid == 0) {
            alarm(20);
            for (int r = 0; r < 20; r++) {
                pthread_t t;
                void *h;
                CHECK(pthread_create(&t, NULL, child_thread, NULL) == 0, "child: pthread_create failed");
                CHECK(pthread_join(t, &h) == 0, "child: pthread_join failed");
                CHECK(h != NULL, "child: a thread had no heap");
            }
            _exit(0);
        }
        int st = ht_wait(pid);
        CHECK(ht_exited0(st), "child ended with status 0x%x", st);
    }
    atomic_store(&g_forks_done, 1);
    return NULL;
}

int main(void)
{
    pthread_t sp[SPAWNERS], fk;
    free(malloc(1));
    CHECK(pthread_create(&fk, NULL, forker, NULL) == 0, "pthread_create failed");
    for (uintptr_t s = 0; s < SPAWNERS; s++)
        CHECK(pthread_create(&sp[s], NULL, spawner, (void *)s) == 0, "pthread_create failed");
    for (int s = 0; s < SPAWNERS; s++)
        CHECK(pthread_join(sp[s], NULL) == 0, "pthread_join failed");
    CHECK(pthread_join(fk, NULL) == 0, "pthread_join failed");
    for (int i = 0; i < MAILBOX; i++) {
        unsigned char *q = atomic_exchange(&g_mail[i], NULL);
        if (q) {
            check(q);
            free(q);
        }
    }
    unsigned heaps = 0;
    for (hak_heap_t *h = heap_all_first(); h; h = h->all_next)
        heaps++;
    /* at most 1 + 6*2 + 1 threads alive at once, a few dying heaps, the shared heap */
    CHECK(heaps <= 2 * (2 + SPAWNERS * PER_SPAWNER) + 4, "%u heaps mapped for %d threads", heaps,
          atomic_load(&g_threads));
    printf("test_heap_pool: OK: %d threads (%d alive at most) started and exited, 12 forks; %u heaps mapped\n",
           atomic_load(&g_threads), 2 + SPAWNERS * PER_SPAWNER, heaps);
    return 0;
}
