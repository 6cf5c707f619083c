/* test_pending - the lazy refill (heap/heap.h, hak_pend_t): a refill that
 * finds a page's free list hands it to the thread whole, as the class's
 * pending list, without reading its links; malloc then takes its blocks one
 * per call. The blocks are the page's until handed out (counted as used), so
 * they must come back:
 *   - hot:     blocks this thread just flushed onto the page are walked
 *              into the cache by the next refill (heap_take), none pending;
 *   - refill:  K blocks of one page (and whatever else of it the cache
 *              held) back on its free list; the next malloc takes one of
 *              them and leaves the others pending, the page's free list
 *              empty, no block carved; the next mallocs are exactly those;
 *   - trim:    malloc_trim(0) gives a pending list back to its page (the
 *              page counts only the blocks still out);
 *   - exit:    a thread that exits with a pending list gives it back (the
 *              page counts no block out after the join);
 *   - fork:    a child forked with a pending list hands its blocks out;
 *   - double:  (builds with checks) a block freed twice while it sits in a
 *              pending list is reported, not handed out twice;
 *   - remote:  a list that is only blocks another thread has just freed
 *              (one take of the remote list onto an empty list) goes
 *              pending as well: the next mallocs are exactly those blocks,
 *              and none goes through the cache.
 * Linked with libhakmem.a, to reach the thread's pending lists and pages.
 *
 * usage: test_pending
 */
#include "hak_test.h"
#include "heap/canary.h"
#include "heap/heap.h"
#include "heap/size_class.h"

#include <malloc.h>
#include <pthread.h>

#define SIZE 48
#define K    40  /* blocks put back on their page */
#define MAXF 256 /* ... with the others of it the cache held */

static unsigned cls;
static void *freel[MAXF]; /* the page's free list after blocks_on_page */
static unsigned nfree;

/* K blocks of one page of the class (and any others of it the cache held)
 * back on the page's free list, no other block of the class cached, the
 * list in freel[]; returns the page. */
static hak_page_t *blocks_on_page(void) {
    void *all[4 * K], *out[K];
    unsigned n = 0, k = 0;
    hak_page_t *p = NULL;
    while (k < K) { /* K blocks of the page of the first one; the others kept out */
        CHECK(n < 4 * K, "fewer than %u blocks of %d B on one page", K, SIZE);
        void *b = malloc(SIZE);
        CHECK(b != NULL, "malloc(%d) failed", SIZE);
        if (!p) p = page_of(b);
        if (page_of(b) == p) out[k++] = b;
        else all[n++] = b;
    }
    for (unsigned i = 0; i < K; i++) free(out[i]);
    heap_flush_all(&hak_tls); /* the cache's blocks back to their pages, the pending list too */
    for (unsigned i = 0; i < n; i++) free(all[i]); /* cached (a cap of at least K / 2 after K mallocs) */
    if (bin_count(&hak_tls, cls)) heap_return_blocks(hak_tls.heap, bin_slots(&hak_tls, cls), bin_count(&hak_tls, cls));
    bin_set_count(&hak_tls, cls, 0);
    CHECK((*pend_of(&hak_tls, cls)).head == NULL, "a pending list left after the flush");
    nfree = 0;
    for (void *x = p->free; x; x = block_next(p, x)) {
        CHECK(nfree < MAXF, "more than %u blocks free on the page", MAXF);
        freel[nfree++] = x;
    }
    CHECK(nfree >= K, "only %u blocks free on the page after %u went back", nfree, K);
    return p;
}

/* The list as one not linked by this thread's last flushes (older, or
 * another thread's): a refill hands such a list over as a pending list. */
static hak_page_t *blocks_on_page_cold(void) {
    hak_page_t *p = blocks_on_page();
    p->hot_n = 0;
    return p;
}

/* p heads its class's list of pages with blocks to hand out. */
static int h_page_current(const hak_page_t *p) { return hak_tls.heap->avail[cls].head == p; }

static int in_list(void *const *a, unsigned n, const void *x) {
    for (unsigned i = 0; i < n; i++)
        if (a[i] == x) return 1;
    return 0;
}

/* The next malloc takes one of freel[] and leaves the rest pending. */
static void *refill_pending(hak_page_t *p) {
    uint8_t *bump = p->bump;
    unsigned used = p->used;
    void *x = malloc(SIZE);
    CHECK(in_list(freel, nfree, x), "the refill gave a block that was not on the page's free list");
    hak_pend_t *q = &(*pend_of(&hak_tls, cls));
    CHECK(q->head != NULL && q->n == nfree - 1, "the refill left %u blocks pending, not %u", q->n, nfree - 1);
    CHECK(p->free == NULL, "the page kept a free list: the refill did not take it whole");
    CHECK(p->used == used + nfree, "the page counts %u blocks out, not %u (pending blocks count as used)", p->used,
          used + nfree);
    CHECK(p->bump == bump, "the refill carved %td bytes while freed blocks were there", p->bump - bump);
    CHECK(bin_count(&hak_tls, cls) == 0, "the refill put %u blocks in the cache", bin_count(&hak_tls, cls));
    return x;
}

/* hot: the blocks this thread's flush just linked at the head of the list
 * are walked into the cache (heap/heap.c, heap_take): the next malloc takes
 * one of them, no list goes pending, the others are cached, in the list's
 * order (the head first), and no block is carved. */
static void case_hot(void) {
    hak_page_t *p = blocks_on_page();
    uint8_t *bump = p->bump;
    unsigned used = p->used, hot = p->hot_n;
    CHECK(hot > 0 && p->hot_head == p->free, "the flush left no hint (%u)", hot);
    void *head = p->free;
    void *x = malloc(SIZE);
    CHECK(x == head, "the walk did not hand out the list's head first");
    CHECK(pend_of(&hak_tls, cls)->head == NULL, "the refill left a pending list");
    unsigned c = bin_count(&hak_tls, cls);
    CHECK(c + 1 <= hot && c + 1 <= nfree, "the refill took %u blocks, the hint said %u", c + 1, hot);
    CHECK(p->used == used + c + 1, "the page counts %u blocks out, not %u", p->used, used + c + 1);
    CHECK(p->bump == bump, "the refill carved while freed blocks were there");
    void *prev = x;
    for (unsigned i = 0; i < c; i++) {
        void *y = malloc(SIZE);
        CHECK(in_list(freel, nfree, y) && y != prev, "malloc %u after the walk: not a block of the list", i);
        prev = y;
    }
    CHECK(bin_count(&hak_tls, cls) == 0, "blocks left in the cache");
    malloc_trim(0);
}

static void case_refill(void) {
    void *got[MAXF];
    hak_page_t *p = blocks_on_page_cold();
    got[0] = refill_pending(p);
    for (unsigned i = 1; i < nfree; i++) {
        got[i] = malloc(SIZE);
        CHECK(in_list(freel, nfree, got[i]) && !in_list(got, i, got[i]), "malloc %u after the refill: not the next "
              "pending block", i);
        memset(got[i], 0x5a, SIZE);
    }
    CHECK((*pend_of(&hak_tls, cls)).head == NULL && (*pend_of(&hak_tls, cls)).n == 0, "the pending list is not empty after %u mallocs",
          nfree - 1);
    for (unsigned i = 0; i < nfree; i++) free(got[i]);
}

static void case_trim(void) {
    hak_page_t *p = blocks_on_page_cold();
    unsigned used = p->used;
    void *x = refill_pending(p);
    malloc_trim(0);
    CHECK((*pend_of(&hak_tls, cls)).head == NULL, "malloc_trim left the pending list");
    CHECK(p->used == used + 1, "after malloc_trim the page counts %u blocks out, not %u", p->used, used + 1);
    free(x);
}

static hak_page_t *exit_page;
static unsigned exit_pending, exit_want;

static void *exit_thread(void *arg) {
    (void)arg;
    exit_page = blocks_on_page_cold();
    void *x = refill_pending(exit_page);
    exit_pending = (*pend_of(&hak_tls, cls)).n;
    exit_want = nfree - 1;
    free(x);
    return NULL; /* x cached, K - 1 pending: all back to the page at exit */
}

static void case_exit(void) {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, exit_thread, NULL) == 0, "pthread_create");
    CHECK(pthread_join(t, NULL) == 0, "pthread_join");
    /* The page went back to its segment or the page exchange (no block out)
     * or was abandoned with some out: its record stays readable either way. */
    CHECK(exit_pending == exit_want && exit_want >= K - 1, "the thread had %u blocks pending", exit_pending);
    CHECK(exit_page->used == 0, "after the thread's exit its page counts %u blocks out, not 0", exit_page->used);
}

/* In a forked child: the blocks of the pending list go out, x not among them. */
static void fork_child(void *x) {
    void *got[MAXF];
    for (unsigned i = 0; i < nfree - 1; i++) {
        got[i] = malloc(SIZE);
        if (!in_list(freel, nfree, got[i]) || got[i] == x) _exit(2);
        memset(got[i], 0x33, SIZE);
    }
    if ((*pend_of(&hak_tls, cls)).head != NULL) _exit(3);
    for (unsigned i = 0; i < nfree - 1; i++) free(got[i]);
    free(x);
    _exit(0);
}

static void case_fork(void) {
    hak_page_t *p = blocks_on_page_cold();
    void *x = refill_pending(p);
    char err[512];
    int st = ht_run_captured(fork_child, x, err, sizeof err, NULL, 0);
    CHECK(ht_exited0(st), "the forked child failed to take its pending blocks (status %d): %s", st, err);
    free(x);
    malloc_trim(0);
}

static void *free_some(void *arg) {
    void **blocks = arg;
    for (unsigned i = 0; i < K; i++) free(blocks[i]);
    return NULL; /* flushed at exit: one chain onto the page's remote list */
}

static void case_remote(void) {
    void *got[MAXF];
    hak_page_t *p = blocks_on_page_cold();
    got[0] = refill_pending(p);
    for (unsigned i = 1; i < nfree; i++) got[i] = malloc(SIZE); /* the pending list, emptied */
    CHECK(p->free == NULL && pend_of(&hak_tls, cls)->head == NULL, "blocks left on the page or pending");
    CHECK(h_page_current(p), "the page is not the class's current page");
    pthread_t t;
    CHECK(pthread_create(&t, NULL, free_some, got) == 0, "pthread_create");
    CHECK(pthread_join(t, NULL) == 0, "pthread_join");
    void *x = malloc(SIZE); /* collects the K blocks, takes them as the pending list */
    CHECK(in_list(got, K, x), "the refill did not take the blocks the other thread freed");
    CHECK(pend_of(&hak_tls, cls)->head != NULL && pend_of(&hak_tls, cls)->n == K - 1,
          "a list of remote frees just taken did not go pending whole (%u pending)", pend_of(&hak_tls, cls)->n);
    CHECK(bin_count(&hak_tls, cls) == 0, "the refill put blocks in the cache");
    void *y[K];
    y[0] = x;
    for (unsigned i = 1; i < K; i++) {
        y[i] = malloc(SIZE);
        CHECK(in_list(got, K, y[i]), "malloc %u handed out a block that is not one the other thread freed", i);
    }
    CHECK(pend_of(&hak_tls, cls)->head == NULL, "blocks left pending after %u mallocs", K);
    for (unsigned i = 0; i < K; i++) free(y[i]);
    for (unsigned i = K; i < nfree; i++) free(got[i]);
    malloc_trim(0);
}

#if HAK_CHECKS && !HAK_SECURE
static void double_child(void *victim) {
    free(victim); /* a double free: reported and ignored */
    void *a = malloc(SIZE), *b = malloc(SIZE);
    _exit(a == b ? 4 : 0);
}

/* x freed, flushed to its page, taken into a pending list by a refill (not
 * its head), then freed again: the free must see it there. */
static void case_double(void) {
    hak_page_t *p = blocks_on_page_cold();
    void *x = refill_pending(p);
    void *victim = (*pend_of(&hak_tls, cls)).head; /* the next block to go out: freed, never handed out since */
    char buf[512];
    int st = ht_run_captured(double_child, victim, buf, sizeof buf, NULL, 0);
    CHECK(ht_exited0(st) && strstr(buf, "double free") != NULL, "a double free of a pending block was not reported, "
          "or its block went out twice (stderr: '%s', status %d)", buf, st);
    free(x);
    malloc_trim(0);
}
#endif

int main(void) {
    hak_test_name = "test_pending";
    free(malloc(SIZE)); /* the thread's heap exists from here on */
    CHECK(hak_tls.state == HAK_THREAD_LIVE, "no thread heap");
    cls = size_class_of(SIZE + HAK_TAIL); /* the secure build's blocks hold a tail */
    case_hot();
    case_refill();
    case_trim();
    case_exit();
    case_fork();
    case_remote();
#if HAK_CHECKS && !HAK_SECURE
    case_double();
#endif
    printf("test_pending: OK: a list this thread had just flushed was walked into the cache; a refill took a page's %u or more free blocks as a pending list without carving, malloc "
           "handed them out; malloc_trim, thread exit and a fork handled the list; a list of remote frees just taken "
           "went pending too%s\n",
           K, HAK_CHECKS && !HAK_SECURE ? "; a double free of a pending block was reported" : "");
    return 0;
}
