/* test_carve_give - a refill about to carve new blocks of a class of
 * one-slice pages first takes the current page of a peer whose owner has
 * been away from its slow paths, when that page holds freed blocks
 * (heap/collect.c, "Pages to a peer"). A thread (the peer) takes blocks of
 * a class from its only page and gives half of them back (onto that page's
 * free list: its current page, with blocks out), then:
 *   - class A, looks driven one by one (heap_collect_peers, as a refill
 *     about to carve, under main's lock): the first look notes the peer's
 *     activity and takes nothing; the peer then gives back one more block (a
 *     slow path), so the second look finds it active and takes nothing; the
 *     third, with nothing done in the peer since, takes its current page;
 *     the page is main's from then on, and the peer's frees of its blocks
 *     still out go to the page's remote list;
 *   - class B, through refills (heap_take, one block each) while the peer
 *     waits: within a few refills main hands out a block the peer freed,
 *     from the peer's page, instead of carving its own page further.
 * Before, a refill took only a page behind the peer's current one or an
 * empty one, and only to avoid cutting a page: with the peer descheduled
 * (four threads on two cores, bench_sizemix) its freed blocks waited while
 * the running threads carved new memory. Linked with libhakmem.a.
 *
 * usage: test_carve_give
 */
#include "hak_test.h"
#include "heap/collect.h"
#include "heap/heap.h"
#include "heap/size_class.h"

#include <pthread.h>
#include <semaphore.h>

#define NB 16

static sem_t to_peer, to_main;

struct side {
    unsigned cls;
    hak_page_t *page; /* the peer's page */
    void *blk[NB];
};
static struct side A, B;
static unsigned g_remote = ~0u;

/* The peer's page of s->cls: NB blocks taken, the first half given back. */
static void peer_setup(hak_heap_t *h, struct side *s) {
    for (unsigned i = 0; i < NB; i++) {
        CHECK(heap_take(h, s->cls, &s->blk[i], 1, NULL, true) == 1, "heap_take gave no block");
        CHECK(page_of(s->blk[i]) == page_of(s->blk[0]), "the peer's blocks are on two pages");
    }
    s->page = page_of(s->blk[0]);
    CHECK(heap_return_blocks(h, s->blk, NB / 2) == 0, "the peer's own blocks went remote");
    CHECK(h->avail[s->cls].head == s->page && s->page->free && s->page->used == NB / 2,
          "the peer's page is not its current page with freed blocks (used %u)", s->page->used);
}

static void *peer(void *arg) {
    (void)arg;
    free(malloc(16)); /* the thread's heap */
    CHECK(hak_tls.state == HAK_THREAD_LIVE, "no heap in the peer thread");
    hak_heap_t *h = hak_tls.heap;
    peer_setup(h, &A);
    peer_setup(h, &B);
    sem_post(&to_main);
    sem_wait(&to_peer); /* main looked once */
    heap_return_blocks(h, &A.blk[NB / 2], 1); /* a slow path: the peer is active */
    sem_post(&to_main);
    sem_wait(&to_peer); /* main took the page of class A, then refilled class B */
    g_remote = heap_return_blocks(h, &A.blk[NB / 2 + 1], NB / 2 - 1);
    heap_return_blocks(h, &B.blk[NB / 2], NB / 2);
    return NULL;
}

static hak_page_t *look(hak_heap_t *me) {
    heap_lock(me);
    hak_page_t *p = heap_collect_peers(me, A.cls, true);
    if (p) heap_page_adopted(me, p);
    heap_unlock(me);
    return p;
}

int main(void) {
    hak_test_name = "test_carve_give";
    free(malloc(16));
    CHECK(hak_tls.state == HAK_THREAD_LIVE, "no thread heap");
    hak_heap_t *me = hak_tls.heap;
    A.cls = size_class_of(2800); /* 2816 B and 3072 B: one-slice pages, classes nothing here uses */
    B.cls = size_class_of(3000);
    CHECK(A.cls != B.cls && class_slices(A.cls) == 1 && class_slices(B.cls) == 1, "classes %u and %u", A.cls, B.cls);
    sem_init(&to_peer, 0, 0);
    sem_init(&to_main, 0, 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, peer, NULL) == 0, "pthread_create");
    sem_wait(&to_main);

    /* Class A: the looks one by one. */
    CHECK(look(me) == NULL, "the first look took the peer's current page before seeing it away");
    sem_post(&to_peer);
    sem_wait(&to_main); /* the peer was on a slow path since */
    CHECK(look(me) == NULL, "a look took the current page of a peer that was on a slow path since the last look");
    hak_page_t *got = look(me);
    CHECK(got == A.page, "the look after the peer stayed away took %p, not the peer's current page %p", (void *)got,
          (void *)A.page);
    CHECK(atomic_load(&got->owner) == me && got->used == NB / 2 - 1 && got->free,
          "the page taken is not main's with the peer's blocks out (used %u)", got->used);

    /* Class B: refills. */
    void *mine[64];
    unsigned n = 0;
    bool from_peer = false;
    while (n < 64 && !from_peer) {
        CHECK(heap_take(me, B.cls, &mine[n], 1, NULL, true) == 1, "main's heap_take gave no block");
        for (unsigned i = 0; i < NB / 2; i++) from_peer |= mine[n] == B.blk[i];
        n++;
    }
    CHECK(from_peer && page_of(mine[n - 1]) == B.page,
          "%u refills of a class carved new blocks while the peer's current page, its owner away, held %u freed "
          "blocks", n, NB / 2);
    sem_post(&to_peer);
    CHECK(pthread_join(t, NULL) == 0, "pthread_join");
    CHECK(g_remote == NB / 2 - 1, "the peer's frees of its blocks of the taken page did not go remote (%u of %u)",
          g_remote, NB / 2 - 1);
    heap_return_blocks(me, mine, n);
    heap_collect_remote(me);
    printf("test_carve_give: OK: a refill about to carve took the current page of a peer away from its slow paths "
           "(after %u refills), not of one that was active\n", n);
    return 0;
}
