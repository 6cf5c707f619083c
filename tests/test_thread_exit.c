/* test_thread_exit - allocation at and after thread exit.
 *
 *  - pthread key destructors that check and free their value, malloc and free
 *    more, and allocate the value of a second key (whose destructor then runs
 *    in the same or a later round and allocates again, keeping a block that
 *    main frees after the join); a key that sets itself again from its own
 *    destructor (several destructor rounds); a __cxa_thread_atexit_impl
 *    destructor (what C++ thread_local uses) that allocates too;
 *  - threads that exit without freeing what they allocated: main checks,
 *    reallocs and frees those blocks after the join;
 *  - blocks of a thread that has exited, freed by another, later thread,
 *    while yet more threads allocate (and may reuse the dead thread's memory);
 *  - detached threads exiting while main frees their blocks;
 *  - many rounds, so heaps of exited threads are reused again and again.
 */
#include "hak_test.h"

#include <malloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>

#define KiB ((size_t)1024)

extern int __cxa_thread_atexit_impl(void (*func)(void *), void *obj, void *dso_symbol);
extern void *__dso_handle;

typedef struct {
    void *p;
    size_t n;
    uint64_t key;
} blk_t;

static void blk_make(blk_t *b, size_t n, uint64_t key)
{
    b->p = malloc(n);
    CHECK(b->p != NULL, "malloc(%zu) failed", n);
    b->n = n;
    b->key = key;
    ht_fill(b->p, key, 0, n);
}
static void blk_check(const blk_t *b, const char *what)
{
    size_t off = ht_verify(b->p, b->key, 0, b->n);
    CHECK(off == (size_t)-1, "%s: block %p of %zu bytes changed at offset %zu", what, b->p, b->n, off);
    CHECK(malloc_usable_size(b->p) >= b->n, "%s: usable size %zu < %zu", what, malloc_usable_size(b->p), b->n);
}

static size_t size_for(unsigned i)
{
    static const size_t s[] = { 1, 16, 24, 40, 64, 100, 128, 256, 500, 1000, 1024, 2000, 4096, 8000,
                                20000, 40000, 100000, 300000 };
    return s[i % (sizeof s / sizeof s[0])];
}

/* ---- key destructors -------------------------------------------------- */

static pthread_key_t k_first, k_second, k_again;
static pthread_mutex_t g_late_lock = PTHREAD_MUTEX_INITIALIZER;
static blk_t g_late[4096];
static unsigned g_nlate;
static atomic_ulong g_dtor_first, g_dtor_second, g_dtor_again, g_dtor_atexit;

static void keep_late(size_t n, uint64_t key)
{
    blk_t b;
    blk_make(&b, n, key);
    pthread_mutex_lock(&g_late_lock);
    CHECK(g_nlate < sizeof g_late / sizeof g_late[0], "too many late blocks");
    g_late[g_nlate++] = b;
    pthread_mutex_unlock(&g_late_lock);
}

static void dtor_second(void *v)
{
    blk_t *b = v;
    blk_check(b, "second key destructor: value allocated in the first key's destructor");
    free(b->p);
    free(b);
    /* allocate once more, this time for main to free */
    keep_late(300 + (atomic_load(&g_dtor_second) % 7) * 1000, 0x5ec0 + atomic_load(&g_dtor_second));
    void *x = realloc(NULL, 50);
    x = realloc(x, 5000);
    CHECK(x != NULL, "realloc in a key destructor failed");
    free(x);
    atomic_fetch_add(&g_dtor_second, 1);
}

static void dtor_first(void *v)
{
    blk_t *b = v;
    blk_check(b, "first key destructor: the thread's block");
    free(b->p);
    free(b);
    /* malloc and free of every size, in the destructor */
    for (unsigned i = 0; i < 40; i++) {
        void *p = malloc(size_for(i));
        CHECK(p != NULL, "malloc in a key destructor failed");
        memset(p, 0x77, size_for(i));
        free(p);
    }
    void *c = calloc(100, 10);
    CHECK(c && ht_first_nonzero(c, 1000) == (size_t)-1, "calloc in a key destructor failed or not zeroed");
    free(c);
    /* give the second key a value: its destructor runs later */
    blk_t *nb = malloc(sizeof *nb);
    CHECK(nb != NULL, "malloc failed");
    blk_make(nb, 777, 0xd2);
    CHECK(pthread_setspecific(k_second, nb) == 0, "pthread_setspecific in a destructor failed");
    atomic_fetch_add(&g_dtor_first, 1);
}

/* sets itself again from its own destructor: called in up to 3 rounds */
static void dtor_again(void *v)
{
    blk_t *b = v;
    blk_check(b, "self-renewing key destructor");
    unsigned round = (unsigned)(b->key & 0xff);
    free(b->p);
    free(b);
    atomic_fetch_add(&g_dtor_again, 1);
    if (round < 3) {
        blk_t *nb = malloc(sizeof *nb);
        CHECK(nb != NULL, "malloc failed");
        blk_make(nb, 100 * (round + 1) + 8, 0xa9a1000 + round + 1);
        CHECK(pthread_setspecific(k_again, nb) == 0, "pthread_setspecific in a destructor failed");
    }
}

static void dtor_atexit(void *v)
{
    /* runs at thread exit before the key destructors (C++ thread_local style) */
    blk_t *b = v;
    blk_check(b, "thread_atexit destructor");
    free(b->p);
    free(b);
    keep_late(4000, 0xa7e);
    void *p = malloc(64);
    CHECK(p != NULL, "malloc in a thread_atexit destructor failed");
    free(p);
    atomic_fetch_add(&g_dtor_atexit, 1);
}

static void *key_thread(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    blk_t *b = malloc(sizeof *b);
    CHECK(b != NULL, "malloc failed");
    blk_make(b, size_for((unsigned)id), 0xf1 + id);
    CHECK(pthread_setspecific(k_first, b) == 0, "pthread_setspecific failed");
    blk_t *a = malloc(sizeof *a);
    CHECK(a != NULL, "malloc failed");
    blk_make(a, 10, 0xa9a1000);
    CHECK(pthread_setspecific(k_again, a) == 0, "pthread_setspecific failed");
    blk_t *t = malloc(sizeof *t);
    CHECK(t != NULL, "malloc failed");
    blk_make(t, 2000 + id, 0xbeef + id);
    CHECK(__cxa_thread_atexit_impl(dtor_atexit, t, &__dso_handle) == 0, "__cxa_thread_atexit_impl failed");
    /* some ordinary work, so the thread has a populated heap when it exits */
    void *keep[64];
    for (int i = 0; i < 64; i++) {
        keep[i] = malloc(size_for((unsigned)i + (unsigned)id));
        CHECK(keep[i] != NULL, "malloc failed");
    }
    for (int i = 0; i < 64; i += 2)
        free(keep[i]);
    for (int i = 1; i < 64; i += 2)
        free(keep[i]);
    if (id % 2)
        pthread_exit(NULL);
    return NULL;
}

static void test_key_destructors(void)
{
    CHECK(pthread_key_create(&k_first, dtor_first) == 0, "pthread_key_create failed");
    CHECK(pthread_key_create(&k_again, dtor_again) == 0, "pthread_key_create failed");
    CHECK(pthread_key_create(&k_second, dtor_second) == 0, "pthread_key_create failed");
    enum { ROUNDS = 20, T = 8 };
    for (int round = 0; round < ROUNDS; round++) {
        pthread_t th[T];
        for (uintptr_t i = 0; i < T; i++)
            CHECK(pthread_create(&th[i], NULL, key_thread, (void *)(i + (uintptr_t)round * T)) == 0,
                  "pthread_create failed");
        for (int i = 0; i < T; i++)
            CHECK(pthread_join(th[i], NULL) == 0, "pthread_join failed");
        /* main frees what the destructors allocated */
        pthread_mutex_lock(&g_late_lock);
        for (unsigned i = 0; i < g_nlate; i++) {
            blk_check(&g_late[i], "block allocated in a destructor, checked by main after the join");
            free(g_late[i].p);
        }
        g_nlate = 0;
        pthread_mutex_unlock(&g_late_lock);
    }
    unsigned long n = ROUNDS * T;
    CHECK(atomic_load(&g_dtor_first) == n, "first key destructor ran %lu times, expected %lu",
          atomic_load(&g_dtor_first), n);
    CHECK(atomic_load(&g_dtor_second) == n, "second key destructor ran %lu times, expected %lu",
          atomic_load(&g_dtor_second), n);
    CHECK(atomic_load(&g_dtor_again) == 4 * n, "self-renewing destructor ran %lu times, expected %lu",
          atomic_load(&g_dtor_again), 4 * n);
    CHECK(atomic_load(&g_dtor_atexit) == n, "thread_atexit destructor ran %lu times, expected %lu",
          atomic_load(&g_dtor_atexit), n);
}

/* ---- threads that exit without freeing ------------------------------- */

enum { NB = 300 };
typedef struct {
    unsigned id;
    blk_t b[NB];
} out_t;

static void *leaver(void *arg)
{
    out_t *o = arg;
    for (unsigned i = 0; i < NB; i++)
        blk_make(&o->b[i], i == 1 ? 1100000 : size_for(i * 7 + o->id), ((uint64_t)o->id << 32) | i);
    /* free a few, so the thread's pages are partly used */
    for (unsigned i = 0; i < NB; i += 5) {
        free(o->b[i].p);
        o->b[i].p = NULL;
    }
    return NULL;
}

static void *churner(void *arg)
{
    /* a thread that only allocates and frees: reuses memory of dead threads */
    unsigned id = (unsigned)(uintptr_t)arg;
    blk_t b[200];
    for (int rep = 0; rep < 3; rep++) {
        for (unsigned i = 0; i < 200; i++)
            blk_make(&b[i], size_for(i + id + rep), 0xc0000 + i + rep);
        for (unsigned i = 0; i < 200; i++) {
            blk_check(&b[i], "churner thread block");
            free(b[i].p);
        }
    }
    return NULL;
}

static void *freer(void *arg)
{
    out_t *o = arg;
    for (unsigned i = 0; i < NB; i++)
        if (o->b[i].p) {
            blk_check(&o->b[i], "block of an exited thread, freed by a later thread");
            free(o->b[i].p);
            o->b[i].p = NULL;
        }
    return NULL;
}

static void test_exit_without_free(void)
{
    enum { T = 8, ROUNDS = 15 };
    static out_t outs[T];
    for (int round = 0; round < ROUNDS; round++) {
        pthread_t th[T];
        for (unsigned i = 0; i < T; i++) {
            outs[i].id = (unsigned)round * T + i;
            CHECK(pthread_create(&th[i], NULL, leaver, &outs[i]) == 0, "pthread_create failed");
        }
        for (unsigned i = 0; i < T; i++)
            CHECK(pthread_join(th[i], NULL) == 0, "pthread_join failed");
        /* new threads allocate while the dead threads' blocks are still live */
        pthread_t ch[4];
        for (uintptr_t i = 0; i < 4; i++)
            CHECK(pthread_create(&ch[i], NULL, churner, (void *)i) == 0, "pthread_create failed");
        for (int i = 0; i < 4; i++)
            CHECK(pthread_join(ch[i], NULL) == 0, "pthread_join failed");
        /* half of the dead threads' blocks: main checks, reallocs some, frees */
        for (unsigned i = 0; i < T / 2; i++)
            for (unsigned j = 0; j < NB; j++) {
                blk_t *b = &outs[i].b[j];
                if (!b->p)
                    continue;
                blk_check(b, "block of an exited thread, checked by main");
                if (j % 3 == 0) {
                    size_t n = b->n * 2 + 100;
                    void *q = realloc(b->p, n);
                    CHECK(q != NULL, "realloc of an exited thread's block failed");
                    b->p = q;
                    size_t off = ht_verify(q, b->key, 0, b->n);
                    CHECK(off == (size_t)-1, "realloc of an exited thread's block (%zu -> %zu) lost offset %zu",
                          b->n, n, off);
                }
                free(b->p);
                b->p = NULL;
            }
        /* the other half: freed by new threads, in parallel */
        pthread_t fr[T / 2];
        for (unsigned i = 0; i < T / 2; i++)
            CHECK(pthread_create(&fr[i], NULL, freer, &outs[T / 2 + i]) == 0, "pthread_create failed");
        for (unsigned i = 0; i < T / 2; i++)
            CHECK(pthread_join(fr[i], NULL) == 0, "pthread_join failed");
    }
}

/* ---- detached threads ------------------------------------------------- */

static sem_t g_done;
static out_t g_det[16];

static void *detached(void *arg)
{
    leaver(arg);
    sem_post(&g_done);
    /* the thread goes on exiting (and tearing down its heap) while main frees */
    return NULL;
}

static void test_detached(void)
{
    CHECK(sem_init(&g_done, 0, 0) == 0, "sem_init failed");
    for (int round = 0; round < 10; round++) {
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        for (unsigned i = 0; i < 16; i++) {
            g_det[i].id = 1000 + (unsigned)round * 16 + i;
            pthread_t t;
            CHECK(pthread_create(&t, &at, detached, &g_det[i]) == 0, "pthread_create failed");
        }
        pthread_attr_destroy(&at);
        for (unsigned i = 0; i < 16; i++) {
            while (sem_wait(&g_done) != 0)
                ;
        }
        for (unsigned i = 0; i < 16; i++)
            for (unsigned j = 0; j < NB; j++)
                if (g_det[i].b[j].p) {
                    blk_check(&g_det[i].b[j], "block of a detached thread");
                    free(g_det[i].b[j].p);
                    g_det[i].b[j].p = NULL;
                }
    }
    /* give the last detached threads time to finish exiting */
    usleep(100000);
}

/* ---- resident memory over many thread lifetimes ----------------------- */

/* (1) Short threads that allocate in many size classes, free half themselves
 * and leave the other half to main, then exit: after 1000 of them (warm),
 * 7000 more must not raise resident memory by more than 16 MiB - nothing is
 * live between batches.
 * (2) Threads, two at a time, that each do 1000 steps on a shared table of
 * 2048 slots: malloc a block (16 B .. 32 KiB), swap it into a random slot,
 * free the block that was there - mostly one of an exited thread, so pages of
 * exited threads end up partly used and partly free.  The live set is the
 * table (constant, ~10 MiB).  After 100 threads (warm), 500 more must not
 * raise resident memory by more than 16 MiB + 25%.  An allocator that never
 * reuses the partly-free pages of exited threads grows with every thread.
 * glibc stays flat in both. */
enum { CHURN_BLOCKS = 48 };
typedef struct {
    void *left[CHURN_BLOCKS / 2];
} churn_out_t;

static void *churn_thread(void *arg)
{
    churn_out_t *o = arg;
    void *b[CHURN_BLOCKS];
    for (unsigned i = 0; i < CHURN_BLOCKS; i++) {
        size_t n = (size_t)16 << (i % 12); /* 16 B .. 32 KiB */
        b[i] = malloc(n + i);
        CHECK(b[i] != NULL, "malloc failed");
        memset(b[i], (int)i, 16);
    }
    for (unsigned i = 0; i < CHURN_BLOCKS; i += 2)
        free(b[i]);
    for (unsigned i = 1; i < CHURN_BLOCKS; i += 2)
        o->left[i / 2] = b[i];
    return NULL;
}

#define TABLE 2048
static _Atomic(unsigned char *) g_table[TABLE];
static atomic_uint g_table_thread;

static void *table_thread(void *arg)
{
    (void)arg;
    unsigned id = atomic_fetch_add(&g_table_thread, 1);
    ht_rng r = { ht_mix64(id + 1) };
    for (unsigned i = 0; i < 1000; i++) {
        size_t n = ((size_t)16 << ht_below(&r, 11)) + ht_below(&r, 16 << 10 >> 2); /* ~16 B .. 20 KiB */
        unsigned char *p = malloc(n);
        CHECK(p != NULL, "malloc(%zu) failed", n);
        memcpy(p, &n, sizeof n);
        p[n - 1] = (unsigned char)n;
        unsigned char *old = atomic_exchange(&g_table[ht_below(&r, TABLE)], p);
        if (old) {
            size_t on;
            memcpy(&on, old, sizeof on);
            CHECK(on >= 16 && on <= 64 * 1024 && old[on - 1] == (unsigned char)on,
                  "table block %p (size %zu) was changed", (void *)old, on);
            free(old);
        }
    }
    return NULL;
}

static size_t g_rss1_warm, g_rss1_peak, g_rss2_warm, g_rss2_peak;

static void test_exit_rss(void)
{
    /* (1) */
    enum { BATCH = 4, WARM = 1000, TOTAL = 8000 };
    churn_out_t out[BATCH];
    for (unsigned t = 0; t < TOTAL; t += BATCH) {
        pthread_t th[BATCH];
        for (unsigned i = 0; i < BATCH; i++)
            CHECK(pthread_create(&th[i], NULL, churn_thread, &out[i]) == 0, "pthread_create failed");
        for (unsigned i = 0; i < BATCH; i++)
            CHECK(pthread_join(th[i], NULL) == 0, "pthread_join failed");
        for (unsigned i = 0; i < BATCH; i++)
            for (unsigned j = 0; j < CHURN_BLOCKS / 2; j++) {
                unsigned char *p = out[i].left[j];
                CHECK(p[0] == (unsigned char)(2 * j + 1), "block left by an exited thread was changed");
                free(p);
            }
        if (t + BATCH == WARM)
            g_rss1_warm = ht_rss_bytes();
        if (t + BATCH > WARM && (t + BATCH) % 500 == 0) {
            size_t rss = ht_rss_bytes();
            if (rss > g_rss1_peak)
                g_rss1_peak = rss;
            CHECK(rss <= g_rss1_warm + 16 * 1024 * 1024,
                  "resident memory grows with the number of exited threads: %.1f MiB after %u threads, "
                  "%.1f MiB after %u (nothing is live in between): about %.1f KiB per exited thread",
                  (double)rss / 1048576, t + BATCH, (double)g_rss1_warm / 1048576, (unsigned)WARM,
                  (double)(rss - g_rss1_warm) / 1024 / (t + BATCH - WARM));
        }
    }
    /* (2) */
    enum { WARM2 = 100, TOTAL2 = 600 };
    for (unsigned t = 0; t < TOTAL2; t += 2) {
        pthread_t a, b;
        CHECK(pthread_create(&a, NULL, table_thread, NULL) == 0, "pthread_create failed");
        CHECK(pthread_create(&b, NULL, table_thread, NULL) == 0, "pthread_create failed");
        CHECK(pthread_join(a, NULL) == 0 && pthread_join(b, NULL) == 0, "pthread_join failed");
        if (t + 2 == WARM2)
            g_rss2_warm = ht_rss_bytes();
        if (t + 2 > WARM2 && (t + 2) % 50 == 0) {
            size_t rss = ht_rss_bytes();
            if (rss > g_rss2_peak)
                g_rss2_peak = rss;
            size_t bound = g_rss2_warm + g_rss2_warm / 4 + 16 * 1024 * 1024;
            CHECK(rss <= bound,
                  "resident memory grows as threads exit leaving blocks in a shared table (live set "
                  "constant): %.1f MiB after %u threads, %.1f MiB after %u (bound %.1f MiB): about %.1f KiB "
                  "per exited thread",
                  (double)rss / 1048576, t + 2, (double)g_rss2_warm / 1048576, (unsigned)WARM2,
                  (double)bound / 1048576, (double)(rss - g_rss2_warm) / 1024 / (t + 2 - WARM2));
        }
    }
    for (unsigned i = 0; i < TABLE; i++)
        free(atomic_exchange(&g_table[i], NULL));
}

int main(void)
{
    hak_test_require_hakmem("test_thread_exit");
    test_key_destructors();
    test_exit_without_free();
    test_detached();
    test_exit_rss();
    printf("test_thread_exit: OK: 160 threads with key destructors that free/malloc/set a second key "
           "(%lu + %lu + %lu calls) and thread_atexit destructors; 120 threads exiting without freeing "
           "(blocks checked, realloc'ed and freed by main or later threads while others allocate); "
           "160 detached threads; RSS over 8000 short threads %.1f -> at most %.1f MiB, over 600 threads "
           "sharing a table %.1f -> at most %.1f MiB%s\n",
           atomic_load(&g_dtor_first), atomic_load(&g_dtor_second), atomic_load(&g_dtor_again),
           (double)g_rss1_warm / 1048576, (double)g_rss1_peak / 1048576, (double)g_rss2_warm / 1048576,
           (double)g_rss2_peak / 1048576, hak_test_owns ? "" : " [plain]");
    return 0;
}
