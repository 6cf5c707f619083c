/* test_fork - fork while other threads allocate.
 *
 * Four threads allocate, pass blocks to each other and free them in a loop.
 * Meanwhile main forks 50 times, and one more thread forks 10 times; each
 * child checks blocks inherited from the parent, frees and reallocs some,
 * mallocs/frees thousands of blocks of many sizes (16 B .. 4 MiB), starts a
 * thread that allocates and frees, sometimes forks a grandchild that
 * allocates, and _exit(0)s.  A child that deadlocks (an allocator lock held
 * across fork) is killed by its own alarm; the parent checks that every child
 * exited with status 0.  A watchdog alarm fails the whole test if it hangs.
 */
#include "hak_test.h"

#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

#define NBG 4
#define NSHARE 1024
#define NPARENT 512

static atomic_int g_stop;
static _Atomic(unsigned char *) g_share[NSHARE];
static atomic_ulong g_bg_ops;
static unsigned char *g_parent_blocks[NPARENT];
static size_t g_parent_sizes[NPARENT];

static size_t size_of(uint64_t x)
{
    if (x % 97 == 0)
        return x % 2 ? 1 << 20 : 300000;
    switch (x % 10) {
    case 0: return 16 + x % 4000;
    case 1: return 20000 + x % 50000;
    default: return 8 + x % 600;
    }
}

/* a block starts with its size; bytes after it hold (size + i) & 0xff */
static unsigned char *make(size_t n)
{
    unsigned char *p = malloc(n);
    CHECK(p != NULL, "malloc(%zu) failed", n);
    memcpy(p, &n, sizeof n);
    for (size_t i = sizeof n; i < n; i += (n > 8192 ? 61 : 1))
        p[i] = (unsigned char)(n + i);
    return p;
}
static void check_and_free(unsigned char *p, const char *who)
{
    size_t n;
    memcpy(&n, p, sizeof n);
    CHECK(n >= sizeof n && n <= 8 << 20, "%s: block %p has a corrupt size word %zu", who, (void *)p, n);
    for (size_t i = sizeof n; i < n; i += (n > 8192 ? 61 : 1))
        CHECK(p[i] == (unsigned char)(n + i), "%s: block %p (size %zu) changed at offset %zu", who, (void *)p,
              n, i);
    free(p);
}

static void *bg_thread(void *arg)
{
    ht_rng r = { (uint64_t)(uintptr_t)arg * 7919 };
    while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
        unsigned char *p = make(size_of(ht_next(&r)) % 5000 + 8);
        unsigned char *old = atomic_exchange(&g_share[ht_below(&r, NSHARE)], p);
        if (old)
            check_and_free(old, "background thread");
        if (ht_below(&r, 64) == 0) {
            void *q = calloc(1, 100000);
            CHECK(q != NULL, "calloc failed");
            free(q);
        }
        atomic_fetch_add_explicit(&g_bg_ops, 1, memory_order_relaxed);
    }
    return NULL;
}

static void *child_thread(void *arg)
{
    (void)arg;
    unsigned char *v[300];
    for (int rep = 0; rep < 5; rep++) {
        for (int i = 0; i < 300; i++)
            v[i] = make(size_of((uint64_t)i * 13 + (uint64_t)rep));
        for (int i = 0; i < 300; i++)
            check_and_free(v[i], "thread in the child");
    }
    return NULL;
}

static void child_work(int k)
{
    alarm(20); /* a deadlocked child dies of SIGALRM: the parent reports it */
    /* blocks inherited from the parent are intact and can be freed here */
    for (int i = 0; i < NPARENT; i += 3) {
        check_and_free(g_parent_blocks[i], "child, block inherited from the parent");
    }
    unsigned char *q = realloc(g_parent_blocks[1], 200000);
    CHECK(q != NULL, "child: realloc of an inherited block failed");
    free(q);
    /* and a block that was in flight between the parent's threads */
    for (int i = 0; i < NSHARE; i += 2) {
        unsigned char *p = atomic_exchange(&g_share[i], NULL);
        if (p)
            check_and_free(p, "child, block from a parent thread's mailbox");
    }
    pthread_t t;
    CHECK(pthread_create(&t, NULL, child_thread, NULL) == 0, "child: pthread_create failed");
    static unsigned char *v[2000];
    for (int i = 0; i < 2000; i++)
        v[i] = make(size_of((uint64_t)i * 31 + (uint64_t)k));
    for (int i = 0; i < 2000; i += 2)
        check_and_free(v[i], "child");
    for (int i = 1; i < 2000; i += 2) {
        unsigned char *r = realloc(v[i], 64);
        CHECK(r != NULL, "child: realloc failed");
        free(r);
    }
    void *big = malloc(4 << 20);
    CHECK(big != NULL, "child: malloc(4 MiB) failed");
    memset(big, 1, 4 << 20);
    free(big);
    CHECK(pthread_join(t, NULL) == 0, "child: pthread_join failed");
    if (k % 10 == 3) {
        /* a grandchild */
        pid_t g = fork();
        CHECK(g >= 0, "child: fork failed");
        if (g == 0) {
            alarm(20);
            for (int i = 0; i < 500; i++)
                check_and_free(make(size_of((uint64_t)i)), "grandchild");
            _exit(0);
        }
        int st = ht_wait(g);
        CHECK(ht_exited0(st), "grandchild ended with status 0x%x", st);
    }
    _exit(0);
}

static atomic_int g_children;

static void fork_one(int k, const char *who)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork failed: %s", strerror(errno));
    if (pid == 0)
        child_work(k);
    int st = ht_wait(pid);
    atomic_fetch_add(&g_children, 1);
    if (WIFSIGNALED(st))
        HT_FAIL("child %d forked by %s was killed by signal %d (%s)%s", k, who, WTERMSIG(st),
                strsignal(WTERMSIG(st)),
                WTERMSIG(st) == SIGALRM ? ": it hung for 20 s (deadlock on an allocator lock after fork?)" : "");
    CHECK(ht_exited0(st), "child %d forked by %s exited with status %d", k, who,
          WEXITSTATUS(st));
}

static void *forking_thread(void *arg)
{
    (void)arg;
    for (int k = 0; k < 10; k++) {
        void *p = malloc(1000);
        fork_one(100 + k, "a non-main thread");
        free(p);
    }
    return NULL;
}

static void watchdog(int sig)
{
    (void)sig;
    static const char msg[] = "test_fork: FAIL: watchdog: the test hung for 100 s\n";
    if (write(2, msg, sizeof msg - 1) < 0) {}
    _exit(1);
}

int main(void)
{
    hak_test_require_hakmem("test_fork");
    signal(SIGALRM, watchdog);
    alarm(100);
    for (int i = 0; i < NPARENT; i++) {
        g_parent_sizes[i] = size_of((uint64_t)i * 7);
        g_parent_blocks[i] = make(g_parent_sizes[i]);
    }
    pthread_t bg[NBG], ft;
    for (uintptr_t i = 0; i < NBG; i++)
        CHECK(pthread_create(&bg[i], NULL, bg_thread, (void *)(i + 1)) == 0, "pthread_create failed");
    usleep(20000);
    CHECK(pthread_create(&ft, NULL, forking_thread, NULL) == 0, "pthread_create failed");
    for (int k = 0; k < 50; k++) {
        fork_one(k, "main");
        /* allocate in the parent between forks too */
        void *p = malloc((size_t)k * 100 + 1);
        CHECK(p != NULL, "malloc failed");
        free(p);
    }
    CHECK(pthread_join(ft, NULL) == 0, "pthread_join failed");
    atomic_store(&g_stop, 1);
    for (int i = 0; i < NBG; i++)
        CHECK(pthread_join(bg[i], NULL) == 0, "pthread_join failed");
    for (int i = 0; i < NSHARE; i++) {
        unsigned char *p = atomic_exchange(&g_share[i], NULL);
        if (p)
            check_and_free(p, "parent, after the forks");
    }
    for (int i = 0; i < NPARENT; i++)
        check_and_free(g_parent_blocks[i], "parent, its own block after the forks");
    alarm(0);
    printf("test_fork: OK: %d children (50 forked by main, 10 by another thread, 6 grandchildren) all "
           "exited 0 while %d threads did %lu allocations; inherited blocks checked and freed in children%s\n",
           atomic_load(&g_children), NBG, atomic_load(&g_bg_ops), hak_test_owns ? "" : " [plain]");
    return 0;
}
