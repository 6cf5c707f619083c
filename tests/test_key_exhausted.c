/* test_key_exhausted - HAKMEM's start-up cannot create its thread-exit key.
 *
 * Linked with libhakmem.a.  A .preinit_array function (which runs before
 * HAKMEM's constructor) creates pthread keys until there are none left, so
 * HAKMEM's own pthread_key_create fails.  Before the fix HAKMEM then called
 * pthread_setspecific on key 0 - the program's first key - overwriting the
 * program's value with its heap.  Now threads must fall back to the shared
 * heap: the program's key values stay intact, and threads allocate, free
 * (locally and across threads) and exit many times.
 */
#include "hak_test.h"
#include "heap/heap.h"

#include <limits.h>
#include <pthread.h>

static pthread_key_t g_keys[PTHREAD_KEYS_MAX];
static int g_nkeys;

static void exhaust_keys(int argc, char **argv, char **envp)
{
    (void)argc; (void)argv; (void)envp;
    while (g_nkeys < PTHREAD_KEYS_MAX && pthread_key_create(&g_keys[g_nkeys], NULL) == 0)
        g_nkeys++;
}
__attribute__((section(".preinit_array"), used)) static void (*const g_preinit)(int, char **, char **) =
    exhaust_keys;

static void *g_shared[256];

static void *worker(void *arg)
{
    int sentinel[4];
    uintptr_t id = (uintptr_t)arg;
    for (int i = 0; i < g_nkeys; i++)
        CHECK(pthread_setspecific(g_keys[i], &sentinel[i % 4]) == 0, "pthread_setspecific failed");
    for (int r = 0; r < 2000; r++) {
        size_t n = 1 + (size_t)(r * 37 + id) % 3000;
        char *p = malloc(n);
        CHECK(p != NULL, "malloc(%zu) failed", n);
        memset(p, (int)id, n);
        free(__atomic_exchange_n(&g_shared[(r + id) % 256], p, __ATOMIC_ACQ_REL));
    }
    for (int i = 0; i < g_nkeys; i++)
        CHECK(pthread_getspecific(g_keys[i]) == &sentinel[i % 4],
              "the program's key %u lost its value (HAKMEM set it?)", (unsigned)g_keys[i]);
    CHECK(hak_tls.state != HAK_THREAD_LIVE, "a thread got a heap of its own without an exit key");
    return NULL;
}

int main(void)
{
    hak_test_name = "test_key_exhausted";
    CHECK(g_nkeys > 0, "the program created no key");
    pthread_key_t k;
    CHECK(pthread_key_create(&k, NULL) != 0, "keys were not exhausted");
    for (int round = 0; round < 50; round++) {
        pthread_t t[4];
        for (uintptr_t i = 0; i < 4; i++)
            CHECK(pthread_create(&t[i], NULL, worker, (void *)(i + 1 + 4 * (uintptr_t)round)) == 0,
                  "pthread_create failed");
        for (int i = 0; i < 4; i++)
            CHECK(pthread_join(t[i], NULL) == 0, "pthread_join failed");
    }
    for (int i = 0; i < 256; i++)
        free(g_shared[i]);
    printf("test_key_exhausted: OK: with all %d keys taken before start-up, 200 threads allocated and freed "
           "through the shared heap; the program's key values stayed intact\n", g_nkeys);
    return 0;
}
