/* test_debug_lists - HAKMEM_DEBUG_LISTS (segment/list_check.h) stops the
 * process at a corrupted block list, with one line naming the list, the
 * page, the class and the block. Each case runs in a child process:
 *   - clean:   the steps of every other case without the corruption, which
 *              must pass (no false report);
 *   - refill:  a use-after-free write of a block's link word on its page's
 *              free list (a link into the middle of another block), then a
 *              refill that pops the list: "link not at a block start";
 *   - detach:  a link cut (NULL) halfway down the free list, then a lazy
 *              refill that takes the list whole (page_detach): its length
 *              differs from carved - used;
 *   - loop:    a link back to the head: the walk at the detach exceeds the
 *              page's capacity (the secure build's link check passes it: a
 *              block start of the page);
 *   - remote:  another thread's free puts the blocks on the page's remote
 *              list; a link of it written to point outside the page, then
 *              the owner's collect of its remote frees (remote_take).
 * The secure build's own link check (segment/free_list.h) may stop a
 * corruption first: its "corrupted free list" line counts as well there.
 * Registered only in builds with HAKMEM_DEBUG_LISTS (the UBSan build).
 * Linked with libhakmem.a, to drive the lists through the heap's functions.
 *
 * usage: test_debug_lists [case]   (no argument: every case, each forked)
 */
#include "hak_test.h"
#include "heap/heap.h"
#include "heap/size_class.h"
#include "segment/free_list.h"

#include <pthread.h>
#include <signal.h>

#if !HAK_DEBUG_LISTS
#error "test_debug_lists needs a build with HAKMEM_DEBUG_LISTS=ON"
#endif

#define NB 9 /* blocks taken; NB - 1 go back, one stays out so the page does not retire */

static unsigned g_cls;
static void *g_blk[NB];

/* NB blocks of a class nothing else here uses, one at a time: one page. */
static hak_heap_t *take_blocks(void) {
    free(malloc(16)); /* the thread's heap */
    CHECK(hak_tls.state == HAK_THREAD_LIVE, "no thread heap");
    hak_heap_t *h = hak_tls.heap;
    for (unsigned i = 0; i < NB; i++)
        CHECK(heap_take(h, g_cls, &g_blk[i], 1, NULL, true) == 1, "heap_take gave no block");
    for (unsigned i = 1; i < NB; i++)
        CHECK(page_of(g_blk[i]) == page_of(g_blk[0]), "the blocks are not on one page");
    return h;
}

static void *remote_freer(void *arg) {
    (void)arg;
    free(malloc(16));
    CHECK(hak_tls.state == HAK_THREAD_LIVE, "no heap in the freeing thread");
    /* blk[0] -> blk[1] -> ... -> blk[NB-2] on the page's remote list */
    CHECK(heap_return_blocks(hak_tls.heap, g_blk, NB - 1) == NB - 1, "the frees of another heap's blocks were not remote");
    return NULL;
}

static void run_case(const char *name) {
    hak_heap_t *h = take_blocks();
    hak_page_t *p = page_of(g_blk[0]);
    bool corrupt = strcmp(name, "clean") != 0;
    if (!strcmp(name, "remote") || !strcmp(name, "clean")) {
        pthread_t t;
        CHECK(pthread_create(&t, NULL, remote_freer, NULL) == 0, "pthread_create");
        CHECK(pthread_join(t, NULL) == 0, "pthread_join");
        static char outside[64];
        if (corrupt) block_set_next(p, g_blk[2], outside); /* the write after free */
        heap_collect_remote(h);
        if (corrupt) return; /* not reached: the collect stops the process */
        CHECK(p->used == 1, "after the remote frees the page counts %u blocks out (1)", p->used);
        /* the same blocks out again, for the steps below */
        unsigned n = heap_take(h, g_cls, g_blk, NB - 1, NULL, true);
        CHECK(n == NB - 1, "the refill took %u blocks (%u)", n, NB - 1);
        for (unsigned i = 0; i < n; i++) CHECK(page_of(g_blk[i]) == p, "the refill took a block of another page");
    }
    /* Onto the local free list: blk[NB-2] -> ... -> blk[0] (the run's last on top). */
    CHECK(heap_return_blocks(h, g_blk, NB - 1) == 0, "the heap's own blocks went remote");
    CHECK(p->used == 1 && p->free == g_blk[NB - 2], "the page's free list does not start at the last block returned");
    if (!strcmp(name, "refill")) block_set_next(p, g_blk[5], (char *)g_blk[3] + 16);
    if (!strcmp(name, "detach")) block_set_next(p, g_blk[5], NULL);
    if (!strcmp(name, "loop")) block_set_next(p, g_blk[5], g_blk[NB - 2]);
    void *out[NB];
    if (!strcmp(name, "refill") || !strcmp(name, "clean")) {
        unsigned n = heap_take(h, g_cls, out, NB - 1, NULL, true);
        CHECK(!corrupt && n == NB - 1, "the refill took %u blocks (%u)", n, NB - 1);
        heap_return_blocks(h, out, n);
    }
    hak_pend_t q = {0};
    heap_take(h, g_cls, out, NB - 1, &q, true); /* lazy: page_detach */
    CHECK(!corrupt && q.n >= NB - 1, "the lazy refill took %u blocks (%u)", q.n, NB - 1);
    heap_return_pending(h, &q);
}

static void case_child(void *name) { run_case(name); }

int main(int argc, char **argv) {
    hak_test_name = "test_debug_lists";
    g_cls = size_class_of(3000);
    if (argc > 1) {
        run_case(argv[1]);
        printf("test_debug_lists: %s: no report\n", argv[1]);
        return 0;
    }
    static const char *const cases[] = {"clean", "refill", "detach", "loop", "remote"};
    static const char *const expect[] = {NULL, "link not at a block start", "length differs from its count",
                                         "longer than the page's capacity", "link outside the page"};
    for (unsigned c = 0; c < sizeof cases / sizeof *cases; c++) {
        char out[4096];
        int st = ht_run_captured(case_child, (void *)cases[c], out, sizeof out, NULL, 0);
        if (!expect[c]) {
            CHECK(ht_exited0(st) && !out[0],
                  "case %s: the uncorrupted lists were reported (status %#x): %s", cases[c], st, out);
            printf("test_debug_lists: %s: no report\n", cases[c]);
            continue;
        }
        CHECK(ht_killed_by(st, SIGABRT), "case %s: the child was not aborted (status %#x): %s",
              cases[c], st, out);
#if HAK_SECURE
        bool secure_first = strstr(out, "corrupted free list") != NULL;
#else
        bool secure_first = false;
#endif
        char want[64];
        snprintf(want, sizeof want, "class %u ", g_cls);
        CHECK(secure_first || (strstr(out, "hakmem: debug lists: ") && strstr(out, expect[c]) && strstr(out, want)),
              "case %s: expected \"hakmem: debug lists: ... %s ... %s\", got: %s", cases[c], expect[c], want, out);
        printf("test_debug_lists: %s: %s", cases[c], out);
    }
    printf("test_debug_lists: OK: each corrupted list stopped the process with its report\n");
    return 0;
}
