/* test_fork_collect - fork while threads' refills collect from their peers.
 *
 * Four threads allocate batches of 1-8 KiB blocks and free the batches of
 * the next thread (remote frees), so every heap has pages with frees waiting
 * and refills about to carve or cut a page walk their peers
 * (heap/collect.c, heap_collect_peers: each enters through its own heap's
 * `collecting` flag, which fork's prepare handler waits on). Main forks
 * `[FORKS]` times meanwhile; each child collects every heap (malloc_trim,
 * whose collector waits for each heap's lock: one left held by a collector
 * of the parent would hang it), allocates and frees blocks of every kind, and
 * exits 0. A child that has not finished after 10 s dies of its own alarm
 * and counts as hung; the test fails unless every child exited 0.
 *
 * usage: test_fork_collect [FORKS]
 */
#include "hak_test.h"

#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#define NT 4
#define BATCH 256

static _Atomic(void **) g_mail[NT];
static atomic_int g_stop;
static atomic_ulong g_rounds;

static void *worker(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg, k = id * 7919u + 1;
    while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
        void **batch = malloc(BATCH * sizeof(void *));
        CHECK(batch != NULL, "malloc failed");
        for (int i = 0; i < BATCH; i++) {
            k = k * 1103515245u + 12345u;
            batch[i] = malloc(1024 + (k >> 8) % 7168);
            CHECK(batch[i] != NULL, "malloc failed");
            memset(batch[i], (int)id, 32);
        }
        /* to the next thread, which frees it: remote frees into our pages */
        void **old = atomic_exchange_explicit(&g_mail[(id + 1) % NT], batch, memory_order_acq_rel);
        old = old ? old : atomic_exchange_explicit(&g_mail[id], NULL, memory_order_acq_rel);
        if (old) {
            for (int i = 0; i < BATCH; i++)
                free(old[i]);
            free(old);
        }
        atomic_fetch_add_explicit(&g_rounds, 1, memory_order_relaxed);
    }
    return NULL;
}

static void child(void)
{
    alarm(10); /* a hung child dies of SIGALRM: the parent counts it */
    malloc_trim(0);
    for (int r = 0; r < 4; r++) {
        void *v[64];
        for (int i = 0; i < 64; i++) {
            v[i] = malloc((size_t)(i * 4099 % 300000) + 1);
            if (!v[i])
                _exit(3);
            memset(v[i], 0x5a, 1);
        }
        for (int i = 0; i < 64; i++)
            free(v[i]);
    }
    malloc_trim(0);
    _exit(0);
}

int main(int argc, char **argv)
{
    hak_test_require_hakmem("test_fork_collect");
    int forks = argc > 1 ? atoi(argv[1]) : 200, hung = 0, failed = 0;
    pthread_t t[NT];
    for (uintptr_t i = 0; i < NT; i++)
        CHECK(pthread_create(&t[i], NULL, worker, (void *)i) == 0, "pthread_create failed");
    for (int f = 0; f < forks; f++) {
        unsigned long seen = atomic_load(&g_rounds);
        while (atomic_load(&g_rounds) < seen + 2) /* the workers run between forks */
            sched_yield();
        fflush(stdout);
        pid_t pid = fork();
        CHECK(pid >= 0, "fork failed: %s", strerror(errno));
        if (pid == 0)
            child();
        int st = ht_wait(pid);
        if (ht_killed_by(st, SIGALRM))
            hung++;
        else if (!ht_exited0(st)) {
            failed++;
            fprintf(stderr, "test_fork_collect: child %d ended with status 0x%x\n", f, st);
        }
    }
    atomic_store(&g_stop, 1);
    for (int i = 0; i < NT; i++)
        CHECK(pthread_join(t[i], NULL) == 0, "pthread_join failed");
    for (int i = 0; i < NT; i++) {
        void **b = atomic_exchange(&g_mail[i], NULL);
        if (b) {
            for (int j = 0; j < BATCH; j++)
                free(b[j]);
            free(b);
        }
    }
    malloc_trim(0);
    printf("test_fork_collect: %d forks while %d threads freed each other's blocks (%lu batches): %d children hung, "
           "%d failed otherwise%s\n",
           forks, NT, atomic_load(&g_rounds), hung, failed, hak_test_owns ? "" : " [plain]");
    CHECK(hung == 0 && failed == 0, "%d of %d children hung, %d failed", hung, forks, failed);
    printf("test_fork_collect: OK\n");
    return 0;
}
