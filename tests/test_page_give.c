/* test_page_give - a page a refill takes from a peer (heap/collect.c, "Pages
 * to a peer") is the taker's from the moment it leaves the peer's lists,
 * before the taker adopts it:
 *   - a thread (the peer) takes blocks of one class until it has three
 *     pages, then gives back all but two blocks of its first page: that page
 *     has freed blocks, blocks out, and sits behind the peer's current page
 *     (a page it can spare);
 *   - main, holding its own heap's lock as a refill does, takes it with
 *     heap_collect_peers; the page's owner must be main's heap already;
 *   - before main adopts it, the peer frees one of its two blocks (what a
 *     flush of its cache does, under its own lock): the block must go to the
 *     page's remote list (the peer no longer owns the page), not onto its
 *     local free list;
 *   - main adopts the page (heap_page_adopted): the page counts the one block
 *     still out, and its free list holds every other block it carved.
 * With the owner stored only at the adoption, the peer's free between the
 * two steps took the page for its own and wrote its free list and used
 * count while the taker took the remote frees into the same list (in
 * test_mt_stress, 2 runs in 112 under UBSan: a live block read as a
 * free-list link, a live block whose page had retired).
 * Linked with libhakmem.a, to drive the refill's steps one by one.
 *
 * usage: test_page_give
 */
#include "hak_test.h"
#include "heap/canary.h"
#include "heap/collect.h"
#include "heap/heap.h"
#include "heap/size_class.h"
#include "remote/remote.h"
#include "segment/free_list.h"

#include <pthread.h>
#include <semaphore.h>

#define MAXB 512

static sem_t to_peer, to_main;
static unsigned g_cls;
static hak_page_t *g_page;    /* the peer's first page */
static hak_heap_t *g_peer;
static void *g_out[2];        /* its two blocks still out */
static unsigned g_remote = ~0u; /* heap_return_blocks' count of remote frees for the first of them */
static void *g_rest[MAXB];
static unsigned g_nrest;

static void *peer(void *arg) {
    (void)arg;
    free(malloc(16)); /* the thread's heap */
    CHECK(hak_tls.state == HAK_THREAD_LIVE, "no heap in the peer thread");
    hak_heap_t *h = hak_tls.heap;
    g_peer = h;
    void *blk[MAXB], *first[MAXB];
    unsigned n = 0, nfirst = 0, pages = 0;
    hak_page_t *last = NULL;
    while (pages < 3) {
        CHECK(n < MAXB && g_nrest < MAXB, "%u blocks of %u B on fewer than three pages", n, hak_class_size[g_cls]);
        CHECK(heap_take(h, g_cls, &blk[n], 1, NULL, true) == 1, "heap_take gave no block");
        hak_page_t *p = page_of(blk[n]);
        if (p != last) pages++, last = p;
        if (pages == 1) first[nfirst++] = blk[n];
        else g_rest[g_nrest++] = blk[n]; /* the third page's first block among them: its current page stays in use */
        n++;
    }
    g_page = page_of(first[0]);
    CHECK(nfirst > 4, "only %u blocks on the first page", nfirst);
    g_out[0] = first[0];
    g_out[1] = first[1];
    CHECK(heap_return_blocks(h, first + 2, nfirst - 2) == 0, "the peer's own blocks went remote");
    CHECK(g_page->used == 2 && g_page->free != NULL && h->avail[g_cls].head != g_page,
          "the first page is not one to spare (used %u, free %p, current page %s)", g_page->used, g_page->free,
          h->avail[g_cls].head == g_page ? "yes" : "no");
    sem_post(&to_main);
    sem_wait(&to_peer); /* main took the page, and has not adopted it yet */
    g_remote = heap_return_blocks(h, &g_out[0], 1);
    sem_post(&to_main);
    sem_wait(&to_peer); /* adopted */
    heap_return_blocks(h, &g_out[1], 1);
    heap_return_blocks(h, g_rest, g_nrest);
    return NULL;
}

int main(void) {
    hak_test_name = "test_page_give";
    free(malloc(16));
    CHECK(hak_tls.state == HAK_THREAD_LIVE, "no thread heap");
    hak_heap_t *me = hak_tls.heap;
    g_cls = size_class_of(2800); /* 2816 B: a class nothing here uses */
    sem_init(&to_peer, 0, 0);
    sem_init(&to_main, 0, 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, peer, NULL) == 0, "pthread_create");
    sem_wait(&to_main);

    heap_lock(me); /* as a refill about to cut a page */
    hak_page_t *got = heap_collect_peers(me, g_cls, false);
    CHECK(got == g_page, "heap_collect_peers took %p, not the peer's page to spare %p", (void *)got, (void *)g_page);
    hak_heap_t *owner = atomic_load(&got->owner);
    void *free_before = got->free;
    unsigned used_before = got->used;
    sem_post(&to_peer);
    sem_wait(&to_main); /* the peer freed one of its blocks of the page */
    void *free_after = got->free;
    unsigned used_after = got->used;
    heap_page_adopted(me, got);
    heap_unlock(me);

    CHECK(g_remote == 1 && free_after == free_before && used_after == used_before,
          "the peer's free of its block of the given page, before the adoption, went onto the page's local free list "
          "(%u remote; free list %p -> %p, used %u -> %u)", g_remote, free_before, free_after, used_before, used_after);
    CHECK(owner == me, "the page taken from the peer is still the peer's (owner %p, taker %p, peer %p) until the taker "
          "adopts it", (void *)owner, (void *)me, (void *)g_peer);
    unsigned nfree = 0;
    for (void *b = got->free; b && nfree <= got->capacity; b = block_next(got, b)) nfree++;
    unsigned carved = (unsigned)((size_t)(got->bump - got->start) / got->bsize);
#if HAK_SECURE
    if (got->bsize <= HAK_GUARD_BLOCK_MAX && carved) carved--; /* the page's guard block */
#endif
    CHECK(got->used == 1 && nfree + 1 == carved, "after the adoption the page counts %u blocks out (1) and holds %u "
          "free of %u carved", got->used, nfree, carved);
    sem_post(&to_peer);
    CHECK(pthread_join(t, NULL) == 0, "pthread_join");
    printf("test_page_give: OK: the page taken from a peer was the taker's before its adoption; the peer's free in "
           "between went to its remote list; adopted, it counts its one block out\n");
    return 0;
}
