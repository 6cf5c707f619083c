/* test_fork_exit - fork from a thread whose pages receive remote frees, and
 * let the child's copy of that thread exit.
 *
 * A worker thread allocates blocks of a few small classes and hands them to
 * three freeing threads through a mailbox table, so its pages receive remote
 * frees all the time (each page's first remote free of a round pushes the page
 * onto the worker's remote-page stack: two atomic steps another thread can be
 * between when fork runs).  The worker forks 1,000 times (`[FORKS]`).  In each
 * child, the only thread is the worker's copy: it frees and allocates a little
 * and then leaves with pthread_exit, so its heap is torn down while signals
 * that the parent's freeing threads had half-sent can never arrive.  A child
 * that has not finished after 10 s is killed by its own alarm and counted as
 * hung; the test fails unless every child exited 0.
 *
 * usage: test_fork_exit [FORKS]
 */
#include "hak_test.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#define NFREERS 3
#define NBOX 256

static _Atomic(void *) g_box[NBOX];
static atomic_int g_stop;
static atomic_ulong g_remote_frees;
static int g_forks = 1000;
static int g_hung, g_failed, g_done;
static pthread_t g_freer[NFREERS];

static size_t size_for(unsigned i)
{
    static const size_t s[] = { 16, 32, 48, 64, 100, 128, 256, 512 };
    return s[i % 8];
}

static void *freer(void *arg)
{
    unsigned i = (unsigned)(uintptr_t)arg;
    while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
        i = i * 1103515245u + 12345u;
        void *p = atomic_exchange_explicit(&g_box[(i >> 8) % NBOX], NULL, memory_order_acquire);
        if (p) {
            free(p); /* a remote free into one of the worker's pages */
            atomic_fetch_add_explicit(&g_remote_frees, 1, memory_order_relaxed);
        } else {
            sched_yield(); /* let the worker and the children run */
        }
    }
    return NULL;
}

static void child(void)
{
    alarm(10); /* a hung child dies of SIGALRM: the parent counts it */
    for (int r = 0; r < 4; r++) {
        void *v[64];
        for (int i = 0; i < 64; i++) {
            v[i] = malloc(size_for((unsigned)i));
            if (!v[i])
                _exit(3);
        }
        for (int i = 0; i < 64; i++)
            free(v[i]);
    }
    /* the worker's copy exits: its heap is torn down (key destructor); being
     * the last thread, the process then exits with status 0 */
    pthread_exit(NULL);
}

static void *worker(void *arg)
{
    (void)arg;
    unsigned k = 0;
    for (int f = 0; f < g_forks; f++) {
        /* keep the freeing threads busy for a while before each fork */
        for (int i = 0; i < 400; i++, k++) {
            void *p = malloc(size_for(k));
            CHECK(p != NULL, "malloc failed");
            memset(p, (int)k, 16);
            void *old = atomic_exchange_explicit(&g_box[k % NBOX], p, memory_order_acq_rel);
            free(old); /* a local free, when no freeing thread took it */
        }
        fflush(stdout);
        pid_t pid = fork();
        CHECK(pid >= 0, "fork failed: %s", strerror(errno));
        if (pid == 0)
            child();
        int st = ht_wait(pid);
        g_done++;
        if (ht_killed_by(st, SIGALRM))
            g_hung++;
        else if (!ht_exited0(st)) {
            g_failed++;
            fprintf(stderr, "test_fork_exit: child %d ended with status 0x%x\n", f, st);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    hak_test_require_hakmem("test_fork_exit");
    if (argc > 1)
        g_forks = atoi(argv[1]);
    pthread_t w;
    for (uintptr_t i = 0; i < NFREERS; i++)
        CHECK(pthread_create(&g_freer[i], NULL, freer, (void *)(i * 7919 + 1)) == 0, "pthread_create failed");
    CHECK(pthread_create(&w, NULL, worker, NULL) == 0, "pthread_create failed");
    CHECK(pthread_join(w, NULL) == 0, "pthread_join failed");
    atomic_store(&g_stop, 1);
    for (int i = 0; i < NFREERS; i++)
        CHECK(pthread_join(g_freer[i], NULL) == 0, "pthread_join failed");
    for (int i = 0; i < NBOX; i++)
        free(atomic_exchange(&g_box[i], NULL));
    printf("test_fork_exit: %d forks from a thread receiving remote frees (%lu in all): %d children hung "
           "at thread exit, %d failed otherwise%s\n",
           g_done, atomic_load(&g_remote_frees), g_hung, g_failed, hak_test_owns ? "" : " [plain]");
    CHECK(g_hung == 0 && g_failed == 0, "%d of %d children hung, %d failed", g_hung, g_done, g_failed);
    printf("test_fork_exit: OK\n");
    return 0;
}
