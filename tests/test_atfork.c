/* test_atfork - a library whose fork handlers were registered before
 * HAKMEM's allocates in its prepare handler.
 *
 * libatfork_needed.so (DT_NEEDED) registers pthread_atfork handlers in its
 * constructor, before HAKMEM's start-up registers its own, so at fork its
 * prepare handler runs after HAKMEM's (reverse order), while HAKMEM holds
 * every lock for the fork, and allocates small, mid, large and huge blocks
 * and frees one; its parent and child handlers free them.  The program forks
 * from main and from another thread while two threads allocate; each child
 * allocates and exits 0.  Before the fix the first fork deadlocked (a
 * watchdog fails the test).
 */
#include "hak_test.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

void atfork_needed_counts(int *prepared, int *parents, int *children);

#define NFORKS 20

static atomic_int g_stop;

static void *churn(void *arg)
{
    size_t n = (size_t)(uintptr_t)arg;
    while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
        void *p = malloc(n), *q = malloc(n * 1000);
        CHECK(p && q, "malloc failed");
        free(p);
        free(q);
        n = n % 5000 + 17;
    }
    return NULL;
}

static void fork_one(int k)
{
    pid_t pid = fork();
    CHECK(pid >= 0, "fork failed: %s", strerror(errno));
    if (pid == 0) {
        alarm(10);
        int prepared, parents, children;
        atfork_needed_counts(&prepared, &parents, &children);
        if (children < 1)
            _exit(2); /* the library's child handler did not run */
        for (int i = 0; i < 1000; i++) {
            void *p = malloc((size_t)(i * 37 % 70000) + 1);
            if (!p)
                _exit(3);
            free(p);
        }
        void *big = malloc(6 << 20);
        if (!big)
            _exit(4);
        free(big);
        _exit(0);
    }
    int st = ht_wait(pid);
    CHECK(ht_exited0(st), "child %d ended with status 0x%x", k, st);
}

static void *forker(void *arg)
{
    (void)arg;
    for (int k = 0; k < NFORKS / 2; k++)
        fork_one(100 + k);
    return NULL;
}

static void watchdog(int sig)
{
    (void)sig;
    static const char msg[] = "test_atfork: FAIL: watchdog: fork hung for 30 s (a library's prepare handler "
                              "allocating while HAKMEM holds its locks for the fork?)\n";
    if (write(2, msg, sizeof msg - 1) < 0) {}
    _exit(1);
}

int main(void)
{
    hak_test_require_hakmem("test_atfork");
    signal(SIGALRM, watchdog);
    alarm(30);
    pthread_t t[2], f;
    for (uintptr_t i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, churn, (void *)(i * 300 + 24)) == 0, "pthread_create failed");
    CHECK(pthread_create(&f, NULL, forker, NULL) == 0, "pthread_create failed");
    for (int k = 0; k < NFORKS / 2; k++)
        fork_one(k);
    CHECK(pthread_join(f, NULL) == 0, "pthread_join failed");
    atomic_store(&g_stop, 1);
    for (int i = 0; i < 2; i++)
        CHECK(pthread_join(t[i], NULL) == 0, "pthread_join failed");
    alarm(0);
    int prepared, parents, children;
    atfork_needed_counts(&prepared, &parents, &children);
    CHECK(prepared == NFORKS && parents == NFORKS && children == 0,
          "the library's handlers ran %d/%d/%d times, not %d/%d/0", prepared, parents, children, NFORKS, NFORKS);
    printf("test_atfork: OK: %d forks (from main and another thread, two threads allocating) with a prepare "
           "handler registered before HAKMEM's that allocates up to 5 MiB; children allocate and exit 0%s\n",
           NFORKS, hak_test_owns ? "" : " [plain]");
    return 0;
}
