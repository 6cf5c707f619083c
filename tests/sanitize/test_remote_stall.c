/* test_remote_stall - a remote free's sender stalled at each step of
 * remote_push (remote/remote.c) while the page's owner thread exits and its
 * heap is parked (heap/heap_exit.c, "Parking"), taken by the next thread,
 * torn down as a vanished thread's, or its page abandoned (heap_exit.c,
 * "Mostly handed out") and adopted; and while the process forks.
 *
 * Built with its own copy of remote/remote.c compiled with HAK_TEST_HOOKS,
 * which calls hak_test_push_step (below) at each step where a preempted
 * pusher leaves the other threads a window (remote.h): LINKED (chain linked
 * to the list it read, CAS not done), QUEUED (queued bit set by it, owner not
 * read), OWNER (owner read, page not on its stack), SIGNALLED (page on the
 * stack, signal time not stamped). The library's own remote.o is not linked
 * in (the copy defines all its symbols); no build of the library has the
 * hook. On the hak_ API, so the TSan build runs it too.
 *
 * A round: an owner thread allocates blocks of one size (stamped), hands
 * them to main and one to a pusher thread, which frees it and flushes: the
 * block's page is another thread's, so the flush pushes it remotely, and
 * the hook holds the pusher at the round's step. Meanwhile main
 *  - PARK:   lets the owner exit (heap parked with the page), then forces a
 *            collection (malloc_trim: a parked heap gives its pages up);
 *  - TAKEN:  the same exit, then a new thread whose first call frees a block
 *            of the page is handed the parked heap and goes on with it;
 *  - ADOPT:  the owner leaves more than 1/4 of the page out, so its exit
 *            abandons the page unless a signal is on its way; main adopts it
 *            by freeing into it;
 *  - DESTROY: the exit, then main tears the parked heap down as the pool
 *            does a vanished thread's (heap_destroy), then heap_reap;
 *  - FORK_LIVE / FORK_PARKED: forks with the owner alive / exited; the child
 *            (pusher and owner gone) frees main's blocks and must account for
 *            exactly the blocks that can still come back.
 * Then the pusher goes on. Checked: a page whose queued bit the pusher has
 * set, its signal not yet on the stack (QUEUED, OWNER), keeps the owner it
 * had (never abandoned, given to a peer or released) whatever that heap
 * goes through; a page whose signal cannot be in flight is parked,
 * abandoned or adopted as the policy says; a pusher whose CAS comes after
 * an adoption signals the adopter; heap_destroy awaits exactly the signals
 * in flight; the pusher's block comes back to its page exactly once,
 * wherever the signal lands (the page's used count), and in a forked child
 * only if its CAS was done; the stamps of every block main holds are
 * intact; no thread waits on the held one (joins and the child return);
 * the slices in use after the rounds are those after the first. Under TSan
 * no fork rounds (as test_heap_owner: no fork of a process with threads).
 *
 * usage: test_remote_stall            every scenario at every step, 3 sizes
 *        test_remote_stall stress [N] N rounds (default 300, 60 under a
 *                                     sanitizer) of random scenario, step and
 *                                     size, a churning thread beside them
 *                                     allocating, checking and freeing blocks
 *                                     of the same size; only the checks that
 *                                     hold whoever adopts what (run with a
 *                                     short purge delay and the background
 *                                     purger: collectors come in too). A
 *                                     round whose push is silent (the page
 *                                     fenced for a peer first) holds nothing.
 */
#include "hak_test.h"
#include "heap/heap.h"
#include "remote/remote.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

enum { PARK, TAKEN, ADOPT, DESTROY, FORK_LIVE, FORK_PARKED, NSCEN };
static const char *const scen_name[NSCEN] = { "park", "taken", "adopt", "destroy", "fork-live", "fork-parked" };
static const char *const step_name[] = { "linked", "queued", "owner", "signalled" };
#define NSTEP 4

#define MAXB 8192

static int g_stress;

/* ---- the hook ----------------------------------------------------------- */
static _Atomic(hak_page_t *) g_page;        /* the page whose push stalls */
static atomic_int g_step;                   /* at this step */
static atomic_int g_stalled, g_go;          /* the pusher is held / may go on */
static atomic_int g_pdone;                  /* the pusher's flush returned */
static _Atomic(hak_heap_t *) g_read_owner;  /* the owner the pusher read */
static __thread int t_pusher;               /* 1: stall at g_step, 2: done */

void hak_test_push_step(hak_page_t *page, hak_heap_t *h, int step)
{
    if (!t_pusher || page != atomic_load(&g_page))
        return;
    if (step == HAK_PUSH_OWNER)
        atomic_store(&g_read_owner, h);
    if (t_pusher != 1 || step != atomic_load(&g_step))
        return;
    t_pusher = 2; /* once: a retried CAS (LINKED) goes through */
    atomic_store(&g_stalled, 1);
    while (!atomic_load(&g_go))
        sched_yield();
}

/* ---- one round ---------------------------------------------------------- */
struct round {
    int scen, step, no;
    size_t size;
    void *blk[MAXB]; /* blk[0] to the pusher, the rest main's */
    int n;
    int freed[MAXB]; /* main has freed it (or handed it to the new thread) */
    hak_heap_t *heap;
    atomic_int ready, go_exit;
};
static struct round R;

static uint64_t key_of(int round, int i) { return ((uint64_t)round << 32) ^ (uint64_t)i ^ 0x5eed; }

static void stamp(void *p, size_t size, uint64_t key) { ht_fill(p, key, 0, size < 64 ? size : 64); }
static void verify(void *p, size_t size, uint64_t key, const char *who)
{
    size_t bad = ht_verify(p, key, 0, size < 64 ? size : 64);
    CHECK(bad == (size_t)-1, "round %d (%s, %s, %zu B): %s block %p overwritten at byte %zu", R.no,
          scen_name[R.scen], step_name[R.step], R.size, who, p, bad);
}

static void *owner(void *arg)
{
    (void)arg;
    /* the pusher's block from a page of this thread's heap (a block may
     * also be borrowed from another heap's page: heap/thread.c) */
    R.n = 0;
    do {
        CHECK(R.n < MAXB, "round %d: no block of the owner's own page", R.no);
        R.blk[R.n] = malloc(R.size);
        CHECK(R.blk[R.n] != NULL, "malloc failed");
    } while (atomic_load(&page_of(R.blk[R.n++])->owner) != hak_tls.heap);
    void *t = R.blk[0];
    R.blk[0] = R.blk[R.n - 1];
    R.blk[R.n - 1] = t;
    hak_page_t *p = page_of(R.blk[0]);
    /* blocks of the page out at the exit: more than 1/4 for ADOPT (the page
     * is abandoned then, heap_exit.c), 2 otherwise (kept parked) */
    unsigned want = R.scen == ADOPT ? p->capacity / 4 + 2 : 2, on = 1;
    while (on < want && R.n < MAXB) {
        void *b = malloc(R.size);
        CHECK(b != NULL, "malloc failed");
        on += page_of(b) == p;
        R.blk[R.n++] = b;
    }
    /* (with a churning thread beside it, the page may have had little room) */
    CHECK(on >= want || g_stress, "round %d: %u blocks on the page, wanted %u", R.no, on, want);
    for (int i = 0; i < R.n; i++)
        stamp(R.blk[i], R.size, key_of(R.no, i));
    /* its caches back to their pages: the page's used count is then the
     * blocks main and the pusher hold (a forked child loses a vanished
     * thread's caches) */
    heap_flush_all(&hak_tls);
    R.heap = hak_tls.heap;
    atomic_store(&R.ready, 1);
    while (!atomic_load(&R.go_exit))
        sched_yield();
    return NULL;
}

static void *pusher(void *arg)
{
    (void)arg;
    /* a heap of its own first: a thread whose first call frees is handed the
     * block's heap if parked (heap/pool.c), and this one is not */
    free(malloc(24));
    verify(R.blk[0], R.size, key_of(R.no, 0), "the pusher's");
    t_pusher = 1;
    free(R.blk[0]);
    heap_flush_all(&hak_tls); /* the remote push: held at the step */
    t_pusher = 0;
    atomic_store(&g_pdone, 1);
    return NULL;
}

/* TAKEN: a thread whose first call frees a block of the parked heap's page */
static struct {
    void *first;
    hak_heap_t *heap;
    atomic_int ready, go, done, exit;
} N;

static void *next_thread(void *arg)
{
    (void)arg;
    free(N.first);
    heap_flush_all(&hak_tls);
    N.heap = hak_tls.heap;
    atomic_store(&N.ready, 1);
    while (!atomic_load(&N.go))
        sched_yield();
    heap_flush_all(&hak_tls); /* collects the signalled pages */
    atomic_store(&N.done, 1);
    while (!atomic_load(&N.exit))
        sched_yield();
    return NULL;
}

/* stress: a thread allocating, checking and freeing blocks of the round's
 * size the whole time (it adopts abandoned pages, takes peers' pages) */
static atomic_int g_churn_stop;
static _Atomic size_t g_churn_size;
static void *churn(void *arg)
{
    (void)arg;
    enum { SLOTS = 256 };
    void *slot[SLOTS] = { 0 };
    size_t sz[SLOTS] = { 0 };
    ht_rng r = { 777 };
    uint64_t n = 0;
    while (!atomic_load(&g_churn_stop)) {
        unsigned i = (unsigned)ht_below(&r, SLOTS);
        if (slot[i]) {
            size_t bad = ht_verify(slot[i], (uint64_t)(uintptr_t)slot[i], 0, sz[i] < 64 ? sz[i] : 64);
            CHECK(bad == (size_t)-1, "churn: block %p of %zu B overwritten at byte %zu", slot[i], sz[i], bad);
            free(slot[i]);
            slot[i] = NULL;
        } else {
            sz[i] = atomic_load(&g_churn_size);
            slot[i] = malloc(sz[i]);
            CHECK(slot[i] != NULL, "malloc failed");
            ht_fill(slot[i], (uint64_t)(uintptr_t)slot[i], 0, sz[i] < 64 ? sz[i] : 64);
        }
        if (++n % 64 == 0)
            sched_yield();
    }
    for (unsigned i = 0; i < SLOTS; i++)
        free(slot[i]);
    return NULL;
}

static void wait_flag2(atomic_int *f, atomic_int *or, const char *what)
{
    double t0 = ht_now_ms();
    while (!atomic_load(f) && !(or && atomic_load(or))) {
        CHECK(ht_now_ms() - t0 < 20000, "round %d (%s, %s): %s: not within 20 s", R.no, scen_name[R.scen],
              step_name[R.step], what);
        sched_yield();
    }
}
static void wait_flag(atomic_int *f, const char *what) { wait_flag2(f, NULL, what); }

#define RCHECK(cond, ...)                                                                                    \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            fprintf(stderr, "round %d (%s, pusher held at %s, %zu B): ", R.no, scen_name[R.scen],            \
                    step_name[R.step], R.size);                                                              \
            CHECK(cond, __VA_ARGS__);                                                                        \
        }                                                                                                    \
    } while (0)

/* A signal in flight (the pusher held at QUEUED or OWNER: the queued bit
 * is its, the page not yet on the stack): the page keeps the owner it had,
 * whatever that heap goes through. (At SIGNALLED the page is on the stack,
 * and the first look, the exit's own, takes it in.) */
static int in_flight(void) { return R.step == HAK_PUSH_QUEUED || R.step == HAK_PUSH_OWNER; }
static void check_held(hak_page_t *p, hak_heap_t *h, const char *when)
{
    if (!in_flight())
        return;
    RCHECK(atomic_load(&p->owner) == h, "%s: a page with a signal in flight changed owner (%p, not %p)", when,
           (void *)atomic_load(&p->owner), (void *)h);
    if (!g_stress)
        RCHECK(p->state != HAK_PAGE_ABANDONED, "%s: a page with a signal in flight was abandoned", when);
}

static void release_pusher(pthread_t pt)
{
    atomic_store(&g_go, 1);
    CHECK(pthread_join(pt, NULL) == 0, "pthread_join failed");
}

/* the child of a fork with the pusher held: main's copies of the blocks
 * back; the pusher's block can come back only if its CAS was done */
static void child(hak_page_t *p)
{
    alarm(20);
    /* the fork's child handlers gave the vanished threads' heaps up (heap/
     * pool.c), taking in what was on the page's remote list */
    unsigned expect = R.step == HAK_PUSH_LINKED; /* its chain never reached the page */
    for (int i = 1; i < R.n; i++)
        expect += !R.freed[i] && page_of(R.blk[i]) == p;
    if (!g_stress)
        RCHECK(p->used == expect, "child: the page counts %u blocks out, not %u (main's and %s)", p->used, expect,
               R.step == HAK_PUSH_LINKED ? "the pusher's, lost with it" : "none of the pusher's");
    for (int i = 1; i < R.n; i++) {
        if (R.freed[i])
            continue;
        verify(R.blk[i], R.size, key_of(R.no, i), "(child) main's");
        free(R.blk[i]);
    }
    heap_flush_all(&hak_tls);
    hak_trim();
    if (!g_stress && R.step == HAK_PUSH_LINKED)
        RCHECK(p->used == 1, "child: main's blocks freed, the page counts %u blocks out, not 1 (the pusher's)",
               p->used);
    for (int i = 0; i < 2000; i++) {
        void *q = malloc((size_t)(i % 700) + 1);
        CHECK(q != NULL, "child: malloc failed");
        free(q);
    }
    _exit(0);
}

static uint64_t in_use(void);

/* a block main holds on page p (index > 0), or 0 */
static int on_page(hak_page_t *p)
{
    for (int k = 1; k < R.n; k++)
        if (!R.freed[k] && page_of(R.blk[k]) == p)
            return k;
    return 0;
}
static uint64_t g_use0; /* after the first round */
static int g_silent;    /* stress: rounds whose pusher was never held */

static void one_round(int no, int scen, int step, size_t size)
{
    memset(&R, 0, sizeof R);
    R.no = no, R.scen = scen, R.step = step, R.size = size;
    atomic_store(&g_page, NULL);
    atomic_store(&g_stalled, 0);
    atomic_store(&g_pdone, 0);
    atomic_store(&g_go, 0);
    atomic_store(&g_read_owner, NULL);
    atomic_store(&g_step, step);
    atomic_store(&g_churn_size, size);

    pthread_t ot, pt, nt;
    CHECK(pthread_create(&ot, NULL, owner, NULL) == 0, "pthread_create failed");
    wait_flag(&R.ready, "owner's blocks");
    hak_page_t *p = page_of(R.blk[0]);
    hak_heap_t *h = R.heap;
    atomic_store(&g_page, p);
    CHECK(pthread_create(&pt, NULL, pusher, NULL) == 0, "pthread_create failed");
    wait_flag2(&g_stalled, &g_pdone, "the pusher reaching its step");
    if (!atomic_load(&g_stalled)) {
        /* stress: the push was silent (the page fenced: given to a peer, or
         * abandoned), or the pusher adopted the page: nothing to hold */
        RCHECK(g_stress, "the pusher's flush returned without reaching its step");
        g_silent++;
        atomic_store(&R.go_exit, 1);
        CHECK(pthread_join(ot, NULL) == 0, "pthread_join failed");
        CHECK(pthread_join(pt, NULL) == 0, "pthread_join failed");
        goto out;
    }
    /* the owner when the pusher set the bit (stress: maybe not the owner
     * thread's heap any more, a peer may have been given the page before) */
    hak_heap_t *held = atomic_load(&p->owner);
    if (!g_stress)
        RCHECK(held == h, "the owner thread's page is owned by %p, not its heap %p", (void *)held, (void *)h);
    if (in_flight() && step == HAK_PUSH_OWNER)
        RCHECK(atomic_load(&g_read_owner) == held, "the pusher read owner %p, the page says %p",
               (void *)atomic_load(&g_read_owner), (void *)held);
    uint32_t u0 = g_stress ? 0 : p->used; /* the owner waits, the pusher is held (stress: collectors may
                                           * be at the page: not read) */
    int owner_gone = 0;
    if (scen != FORK_LIVE) {
        atomic_store(&R.go_exit, 1);
        CHECK(pthread_join(ot, NULL) == 0, "pthread_join failed");
        owner_gone = 1;
        check_held(p, held, "owner exited");
        if (!g_stress && !in_flight())
            RCHECK(scen == ADOPT ? p->state == HAK_PAGE_ABANDONED && !atomic_load(&p->owner)
                                 : atomic_load(&p->owner) == h && p->state != HAK_PAGE_ABANDONED,
                   "owner exited: page state %d owner %p (heap %p)", p->state, (void *)atomic_load(&p->owner),
                   (void *)h);
    }

    switch (scen) {
    case PARK:
        hak_trim(); /* the parked heap gives its pages up: not this one if a signal is in flight */
        check_held(p, held, "forced collection");
        release_pusher(pt);
        hak_trim();
        break;
    case TAKEN: {
        int k = on_page(p);
        if (k)
            verify(R.blk[k], R.size, key_of(no, k), "main's");
        N.first = k ? R.blk[k] : malloc(R.size); /* (stress: none there) */
        R.freed[k] = 1;
        atomic_store(&N.ready, 0), atomic_store(&N.go, 0), atomic_store(&N.done, 0), atomic_store(&N.exit, 0);
        CHECK(pthread_create(&nt, NULL, next_thread, NULL) == 0, "pthread_create failed");
        wait_flag(&N.ready, "the next thread's start");
        if (!g_stress)
            RCHECK(N.heap == h, "the next thread, freeing a block of the parked heap first, got heap %p, not %p",
                   (void *)N.heap, (void *)h);
        check_held(p, held, "heap taken by the next thread");
        uint32_t u1 = g_stress ? 0 : p->used;
        release_pusher(pt);
        atomic_store(&N.go, 1);
        wait_flag(&N.done, "the next thread's collection");
        if (!g_stress && N.heap == h && step != HAK_PUSH_SIGNALLED)
            RCHECK(p->used == u1 - 1, "the heap's new thread took the signal in: %u blocks out, not %u", p->used,
                   u1 - 1);
        atomic_store(&N.exit, 1);
        CHECK(pthread_join(nt, NULL) == 0, "pthread_join failed");
        u0 -= k != 0; /* the next thread's block */
        hak_trim();
        break;
    }
    case ADOPT: {
        hak_trim();
        check_held(p, held, "forced collection");
        if (in_flight()) {
            /* the signal has not arrived: the page is still h's */
            release_pusher(pt);
            hak_trim(); /* now it arrives and the page is given up */
        }
        if (!g_stress)
            RCHECK(p->state == HAK_PAGE_ABANDONED && !atomic_load(&p->owner),
                   "a page mostly handed out, its signal taken: state %d owner %p", p->state,
                   (void *)atomic_load(&p->owner));
        /* main frees into it: adopts it */
        int k = on_page(p);
        if (k) {
            verify(R.blk[k], R.size, key_of(no, k), "main's");
            free(R.blk[k]);
            R.freed[k] = 1;
            heap_flush_all(&hak_tls);
            u0--;
        }
        if (!g_stress)
            RCHECK(atomic_load(&p->owner) == hak_tls.heap, "main freed into the abandoned page and did not adopt it");
        if (!in_flight()) {
            uint32_t u1 = g_stress ? 0 : p->used;
            release_pusher(pt);
            if (!g_stress && step == HAK_PUSH_LINKED)
                RCHECK(atomic_load(&g_read_owner) == hak_tls.heap,
                       "the pusher's CAS on the adopted page signalled %p, not its adopter %p",
                       (void *)atomic_load(&g_read_owner), (void *)hak_tls.heap);
            heap_flush_all(&hak_tls); /* takes the pusher's block in */
            if (!g_stress && step == HAK_PUSH_LINKED)
                RCHECK(p->used == u1 - 1, "the adopter took the signal in: %u blocks out, not %u", p->used, u1 - 1);
        }
        break;
    }
    case DESTROY: {
        /* as the pool's claimer of a vanished thread's heap: heap_destroy
         * waits (bounded) for a signal in flight and says whether none is
         * left; what it could not wait for, heap_reap releases */
        bool done = heap_destroy(h);
        if (!g_stress)
            RCHECK(done == !in_flight(), "heap_destroy said %s with the pusher held",
                   done ? "done" : "awaiting");
        check_held(p, held, "heap torn down");
        release_pusher(pt);
        if (!done) {
            done = heap_reap(h, false);
            RCHECK(done, "heap_reap: the signal arrived and the heap still awaits one");
        }
        if (!g_stress)
            RCHECK(p->state == HAK_PAGE_ABANDONED && !atomic_load(&p->owner),
                   "a torn-down heap's page with blocks out: state %d owner %p", p->state,
                   (void *)atomic_load(&p->owner));
        hak_trim();
        break;
    }
    case FORK_LIVE:
    case FORK_PARKED: {
        fflush(stdout);
        pid_t pid = fork();
        CHECK(pid >= 0, "fork failed");
        if (pid == 0)
            child(p);
        int st = ht_wait_for(pid, 30);
        RCHECK(ht_exited0(st), "the child (owner %s, pusher held) ended with status 0x%x",
               owner_gone ? "exited" : "alive", st);
        if (!owner_gone) {
            atomic_store(&R.go_exit, 1);
            CHECK(pthread_join(ot, NULL) == 0, "pthread_join failed");
            check_held(p, held, "owner exited after the fork");
        }
        release_pusher(pt);
        hak_trim();
        break;
    }
    }
    /* the pusher's block came back to its page exactly once (other blocks
     * of the page that main freed meanwhile counted off: u0); none left out,
     * the page may have gone (its record reused: the in-use check at the
     * end covers it) */
    if (!g_stress && u0 > 1)
        RCHECK(p->used == u0 - 1, "the page counts %u blocks out, not %u (the pusher's back)", p->used, u0 - 1);
out:
    for (int i = 1; i < R.n; i++) {
        if (R.freed[i])
            continue;
        verify(R.blk[i], R.size, key_of(no, i), "main's");
        free(R.blk[i]);
    }
    heap_flush_all(&hak_tls);
    hak_trim();
    if (no == 0) {
        hak_collect(1);
        g_use0 = in_use();
    }
}

static uint64_t in_use(void)
{
    hak_stats_t st = HAK_STATS_INIT;
    hak_stats_get(&st);
    return st.build ? st.memory.in_use : 0;
}

int main(int argc, char **argv)
{
    hak_test_name = "test_remote_stall";
    static const size_t sizes[] = { 48, 256, 1000, 16, 100, 3000 };
    int rounds = 0;
    /* TSan: no fork of a process with threads (as test_heap_owner) */
    int nscen = SANITIZED ? FORK_LIVE : NSCEN;
    if (argc > 1 && !strcmp(argv[1], "stress")) {
        g_stress = 1;
        int n = argc > 2 ? atoi(argv[2]) : SANITIZED ? 60 : 300;
        ht_rng r = { 4242 };
        pthread_t ct;
        CHECK(pthread_create(&ct, NULL, churn, NULL) == 0, "pthread_create failed");
        for (int i = 0; i < n; i++) {
            /* forks less often: each waits for a child */
            int scen = !SANITIZED && ht_below(&r, 8) == 0 ? FORK_LIVE + (int)ht_below(&r, 2) : (int)ht_below(&r, 4);
            one_round(rounds++, scen, (int)ht_below(&r, NSTEP), sizes[ht_below(&r, 6)]);
        }
        atomic_store(&g_churn_stop, 1);
        CHECK(pthread_join(ct, NULL) == 0, "pthread_join failed");
    } else {
        for (int scen = 0; scen < nscen; scen++)
            for (int step = 0; step < NSTEP; step++)
                for (int s = 0; s < 3; s++)
                    one_round(rounds++, scen, step, sizes[s]);
    }
    /* every block back: the pages emptied and went (the pusher's blocks
     * too), as after the first round */
    hak_collect(1);
    uint64_t use0 = g_use0, use1 = in_use();
    if (!SANITIZED)
        CHECK(use1 < use0 + ((uint64_t)1 << 20), "slices in use grew from %llu to %llu over %d rounds",
              (unsigned long long)use0, (unsigned long long)use1, rounds);
    for (int i = 0; i < 10000; i++) {
        void *q = malloc((size_t)(i % 3000) + 1);
        CHECK(q != NULL, "malloc failed");
        free(q);
    }
    printf("test_remote_stall: OK: %d rounds%s, a remote free's pusher held at each step of remote_push while "
           "the page's owner exited (heap parked, taken by the next thread, torn down; page abandoned and "
           "adopted) or the process forked: the page kept its owner while a signal was in flight, every block "
           "came back once, stamps intact; in use %.1f -> %.1f MiB\n",
           rounds, g_stress ? " (stress)" : "", use0 / 1048576.0, use1 / 1048576.0);
    if (g_stress)
        printf("test_remote_stall: %d of %d rounds pushed silently (page fenced or adopted first): not held\n",
               g_silent, rounds);
    return 0;
}
