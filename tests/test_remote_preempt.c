/* test_remote_preempt - a remote-free sender stalled between its two steps
 * while the page's owner thread exits, or forks (remote/remote.c, "Thread
 * exit", "A preempted thread", "Fork").
 *
 * Linked with libhakmem.a, so it can play the sender itself: main sets the
 * queued bit of a page owned by a worker thread (step one of remote_push),
 * then lets the worker exit and joins it, and only then pushes the page onto
 * the owner's remote-page stack (step two).  The exiting worker must not
 * wait for ever; the page must still name its heap as owner when step two
 * reads it (the heap is parked with its pages: heap/heap_exit.c, "Parking");
 * after the signal has arrived the next thread may reuse the heap, and a
 * forced collection (malloc_trim) gives the parked heap's page up (abandoned:
 * main still holds blocks of it), its pending block counted back.
 * Repeated for several size classes and rounds.  Then the same with a fork:
 * the owner forks while the sender is stalled, and the child's copy of the
 * owner exits; the signal can never arrive in the child, which must still
 * exit (before the fix it hung in heap_destroy).
 *
 * usage: test_remote_preempt [exit|fork]   (default: both kinds of rounds)
 */
#include "hak_test.h"
#include "heap/heap.h"
#include "remote/remote.h"
#include "segment/free_list.h"
#include "heap/canary.h"

#include <pthread.h>
#include <signal.h>

#define ROUNDS 20 /* and as many with a fork */

struct job {
    size_t size;
    void *kept[8];     /* blocks the worker leaves to main */
    hak_heap_t *heap;  /* the worker's heap */
    int go_exit;
    int fork_first;   /* fork after main's step one; the child's copy exits */
    int child_status;
};

static void *worker(void *arg)
{
    struct job *j = arg;
    for (int i = 0; i < 8; i++) {
        j->kept[i] = malloc(j->size);
        CHECK(j->kept[i] != NULL, "malloc failed");
    }
    __atomic_store_n(&j->heap, hak_tls.heap, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&j->go_exit, __ATOMIC_ACQUIRE))
        sched_yield();
    if (j->fork_first) {
        pid_t pid = fork();
        if (pid == 0) {
            alarm(10); /* a hung child dies of SIGALRM */
            void *p = malloc(j->size);
            free(p);
            pthread_exit(NULL); /* the only thread: the process exits 0 after */
        }
        CHECK(pid > 0, "fork failed");
        j->child_status = ht_wait(pid);
    }
    return NULL; /* exits: its heap is torn down while main's signal is pending */
}

static void *next_thread(void *arg)
{
    hak_heap_t **out = arg;
    void *p = malloc(40);
    CHECK(p != NULL, "malloc failed");
    *out = hak_tls.heap;
    free(p);
    return NULL;
}

int main(int argc, char **argv)
{
    /* "exit" or "fork": only those rounds */
    int first = argc > 1 && !strcmp(argv[1], "fork") ? ROUNDS : 0;
    int last = argc > 1 && !strcmp(argv[1], "exit") ? ROUNDS : 2 * ROUNDS;
    hak_test_name = "test_remote_preempt";
    static const size_t sizes[] = { 16, 48, 100, 256, 1000, 3000, 20000 };
    unsigned reused = 0;
    for (int r = first; r < last; r++) {
        struct job j = { .size = sizes[r % 7], .fork_first = r >= ROUNDS };
        pthread_t t;
        CHECK(pthread_create(&t, NULL, worker, &j) == 0, "pthread_create failed");
        /* wait until the worker has its blocks, but do not let it exit yet:
         * join only after step one */
        while (!__atomic_load_n(&j.heap, __ATOMIC_ACQUIRE))
            sched_yield();
        void *b = j.kept[0];
        hak_page_t *page = page_of(b);
        /* step one of remote_push, done by "a sender" that then stalls: the
         * page's owner is still running, so the bit is clear */
        uintptr_t old = atomic_load(&page->remote);
        int ok = 0;
#if HAK_SECURE
        /* free() marks a block's tail free before the block can reach a
         * remote list (heap/canary.h); malloc takes that mark for the
         * block's canary when it hands it out again */
        canary_mark_free(b, page->bsize);
#endif
        while (!(old & HAK_REMOTE_QUEUED)) {
            block_set_next(page, b, remote_head(page, old)); /* the link and word, as the library writes them */
            if (atomic_compare_exchange_weak(&page->remote, &old,
                                             remote_word_push(page, old, b, b, 1) | HAK_REMOTE_QUEUED)) {
                ok = 1;
                break;
            }
        }
        CHECK(ok, "round %d: the page of a live thread's fresh block was already queued", r);
        /* the owner exits: before the fix this join never returned */
        __atomic_store_n(&j.go_exit, 1, __ATOMIC_RELEASE);
        CHECK(pthread_join(t, NULL) == 0, "pthread_join failed");
        if (j.fork_first)
            CHECK(ht_exited0(j.child_status),
                  "round %d: the child whose copy of the owner exited ended with status 0x%x%s", r, j.child_status,
                  ht_killed_by(j.child_status, SIGALRM)
                      ? " (hung 10 s: waiting for a signal whose sender does not exist in the child)"
                      : "");
        /* step two: the sender reads the owner only now; it must still be the
         * exited thread's heap, which must not have been reused meanwhile */
        hak_heap_t *h = atomic_load(&page->owner);
        CHECK(h == j.heap, "round %d: the page of an awaited signal changed owner (%p, not %p)", r, (void *)h,
              (void *)j.heap);
        uint32_t used_before = page->used;
        hak_page_t *top = atomic_load(&h->remote_pages);
        do
            page->qnext = top;
        while (!atomic_compare_exchange_weak(&h->remote_pages, &top, page));
        /* the next thread may reuse the parked heap (and take the signal in);
         * it parks it again at its exit, and the forced collection gives
         * the pages of the parked heaps up */
        hak_heap_t *nh = NULL;
        CHECK(pthread_create(&t, NULL, next_thread, &nh) == 0, "pthread_create failed");
        CHECK(pthread_join(t, NULL) == 0, "pthread_join failed");
        reused += nh == j.heap;
        malloc_trim(0);
        CHECK(page->state == HAK_PAGE_ABANDONED && atomic_load(&page->owner) == NULL,
              "round %d: the page of the arrived signal was not given up (state %d)", r, page->state);
        CHECK(page->used == used_before - 1, "round %d: the page counts %u blocks out, not %u (the sent one back)",
              r, page->used, used_before - 1);
        /* the remaining blocks are freed by main, the one sent through the
         * stalled signal is back on its page */
        for (int i = 1; i < 8; i++)
            free(j.kept[i]);
        /* main's cached blocks back to their pages, which then retire: main
         * keeps no page with freed blocks that the next worker, about to
         * carve, could take while main waits (heap/collect.c, "Pages to a
         * peer"), so the next page of the sent block holds the worker's
         * blocks only */
        malloc_trim(0);
    }
    /* and the allocator still works everywhere */
    for (int i = 0; i < 10000; i++) {
        void *p = malloc((size_t)(i % 3000) + 1);
        CHECK(p != NULL, "malloc failed");
        free(p);
    }
    printf("test_remote_preempt: OK: %d owner exits with a signal stalled in flight (%d of them after the owner "
           "forked, the child's copy exiting too): no hang, the page kept its owner until the signal arrived, "
           "heap reused by the next thread in %u rounds\n",
           last - first, last > ROUNDS ? last - (first > ROUNDS ? first : ROUNDS) : 0, reused);
    return 0;
}
