/* test_late_heap - a thread whose first allocation happens in the last round
 * of pthread key destructors.
 *
 * Each thread only sets a key; that key's destructor sets the key again in
 * rounds 1..3 and allocates (for the first time in the thread) in round 4,
 * the last one glibc runs (PTHREAD_DESTRUCTOR_ITERATIONS).  HAKMEM creates
 * the thread's heap there, and glibc runs no further round for HAKMEM's own
 * key: before the fix the heap was never torn down, one lost per thread.
 * Checked through hak_stats_get: after 300 such threads and a few ordinary
 * ones, heaps created minus heaps torn down is the few live threads, not 300
 * (standard and observe builds; the fast build counts nothing).
 */
#include "hak_test.h"
#include "hakmem.h"

#include <pthread.h>
#include <stdatomic.h>

#define NLATE 300

static pthread_key_t g_key;
static atomic_int g_late_allocs;

static void dtor(void *v)
{
    uintptr_t round = (uintptr_t)v;
    if (round < 4) {
        pthread_setspecific(g_key, (void *)(round + 1)); /* another round, no allocation */
        return;
    }
    char *p = malloc(100); /* the thread's first allocation, in the last round */
    CHECK(p != NULL, "malloc in the last destructor round failed");
    memset(p, 7, 100);
    char *q = malloc(3000);
    CHECK(q != NULL, "malloc in the last destructor round failed");
    free(p);
    free(q);
    atomic_fetch_add(&g_late_allocs, 1);
}

static void *late_thread(void *arg)
{
    (void)arg;
    pthread_setspecific(g_key, (void *)1);
    return NULL;
}

static void *plain_thread(void *arg)
{
    (void)arg;
    free(malloc(64));
    return NULL;
}

typedef int (*stats_fn)(hak_stats_t *);

static long heaps_not_torn_down(stats_fn get)
{
    hak_stats_t st = HAK_STATS_INIT;
    CHECK(get(&st) == 0, "hak_stats_get failed");
    return (long)st.events.thread_init - (long)st.events.thread_exit;
}

int main(void)
{
    hak_test_require_hakmem("test_late_heap");
    CHECK(pthread_key_create(&g_key, dtor) == 0, "pthread_key_create failed");
    stats_fn get = (stats_fn)dlsym(RTLD_DEFAULT, "hak_stats_get");
    long before = hak_test_owns && get ? heaps_not_torn_down(get) : 0;
    for (int i = 0; i < NLATE; i++) {
        pthread_t t;
        CHECK(pthread_create(&t, NULL, late_thread, NULL) == 0, "pthread_create failed");
        CHECK(pthread_join(t, NULL) == 0, "pthread_join failed");
    }
    CHECK(atomic_load(&g_late_allocs) == NLATE, "only %d of %d threads reached the last destructor round",
          atomic_load(&g_late_allocs), NLATE);
    /* ordinary threads starting and exiting afterwards */
    for (int i = 0; i < 8; i++) {
        pthread_t t;
        CHECK(pthread_create(&t, NULL, plain_thread, NULL) == 0, "pthread_create failed");
        CHECK(pthread_join(t, NULL) == 0, "pthread_join failed");
    }
    long leaked = 0;
    if (hak_test_owns && get) {
        leaked = heaps_not_torn_down(get) - before;
        CHECK(leaked <= 2, "%ld heaps of exited threads were never torn down (of %d created in the last "
              "destructor round)", leaked, NLATE);
    }
    printf("test_late_heap: OK: %d threads allocated first in the last key-destructor round; heaps not torn "
           "down afterwards: %ld%s\n", NLATE, leaked, hak_test_owns ? "" : " [plain]");
    return 0;
}
