/* test_remote_count - the block count (and last block) carried in a page's remote word
 * (remote/remote.c): under concurrent pushes and takes it always equals the
 * length of the list, and what the owner takes in keeps every page's books.
 *
 * Linked with libhakmem.a, to read page records.  Main allocates blocks of
 * three classes (48 B, 640 B, 4 KiB: many blocks per page, a few, one slice's
 * worth), keeping the first block of each page so no page retires.  Each
 * round, PUSHERS threads free a random share of the other blocks, in random
 * order (their caches flush runs of one page with one CAS, at random
 * lengths; thread exit flushes the rest), while main keeps allocating and
 * freeing blocks of the same classes: its refills take remote lists while
 * the pushers add to them.  After the join, with no one pushing:
 *  - every page's remote count equals the number of blocks on its list, and
 *    the last block the word names is the list's last;
 *  - after main collects them, every page's blocks add up: out (used) + on
 *    the free list + not yet carved (+ the secure build's guard block) ==
 *    capacity.  A count that lost or doubled a push breaks this.
 * Then main allocates the freed blocks again, writes them, and the next
 * round begins.
 *
 * usage: test_remote_count [ROUNDS]   (default 40)
 */
#include "hak_test.h"
#include "heap/canary.h"
#include "heap/heap.h"
#include "remote/remote.h"
#include "segment/free_list.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#define PUSHERS 3
#define PER_CLASS 6000
#define NCLS 3
#define NBLK (PER_CLASS * NCLS)
#define MAXPAGES 4096

static const size_t sizes[NCLS] = {48, 640, 4096};
static void *blk[NBLK];
static hak_page_t *pages[MAXPAGES];
static void *keep[MAXPAGES]; /* the first block of each page, never freed */
static unsigned npages;
static atomic_int running;

struct pusher {
    pthread_t tid;
    void **mine;
    unsigned n;
    uint64_t rng;
};

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void *pusher(void *arg)
{
    struct pusher *p = arg;
    for (unsigned i = 0; i < p->n; i++) {
        unsigned j = i + (unsigned)(next_rand(&p->rng) % (p->n - i)); /* random order */
        void *t = p->mine[i];
        p->mine[i] = p->mine[j];
        p->mine[j] = t;
        free(p->mine[i]);
        if (next_rand(&p->rng) % 512 == 0)
            sched_yield();
    }
    atomic_fetch_sub(&running, 1);
    return NULL; /* thread exit flushes what the cache still holds */
}

static unsigned page_index(hak_page_t *pg)
{
    for (unsigned i = 0; i < npages; i++)
        if (pages[i] == pg)
            return i;
    return MAXPAGES;
}

static void fill(unsigned i)
{
    blk[i] = malloc(sizes[i / PER_CLASS]);
    CHECK(blk[i] != NULL, "malloc failed");
    memset(blk[i], (int)(i & 0xff), sizes[i / PER_CLASS]);
    hak_page_t *pg = page_of(blk[i]);
    if (page_index(pg) == MAXPAGES) { /* a new page: keep this block */
        CHECK(npages < MAXPAGES, "too many pages");
        pages[npages] = pg;
        keep[npages++] = blk[i];
        fill(i);
    }
}

int main(int argc, char **argv)
{
    hak_test_name = "test_remote_count";
    unsigned rounds = argc > 1 ? (unsigned)atoi(argv[1]) : 40;
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (unsigned i = 0; i < NBLK; i++)
        fill(i);
    unsigned long pushed = 0, counted = 0, longest = 0;
    for (unsigned r = 0; r < rounds; r++) {
        static void *share[PUSHERS][NBLK];
        struct pusher ps[PUSHERS];
        static unsigned char freed[NBLK];
        for (unsigned t = 0; t < PUSHERS; t++)
            ps[t] = (struct pusher){.mine = share[t], .n = 0, .rng = rng + 977 * (t + 1) + r};
        for (unsigned i = 0; i < NBLK; i++) {
            uint64_t x = next_rand(&rng) % 8;
            freed[i] = x < 6; /* three quarters go to the pushers */
            if (freed[i])
                share[x % PUSHERS][ps[x % PUSHERS].n++] = blk[i];
        }
        atomic_store(&running, PUSHERS);
        for (unsigned t = 0; t < PUSHERS; t++)
            CHECK(pthread_create(&ps[t].tid, NULL, pusher, &ps[t]) == 0, "pthread_create failed");
        /* meanwhile: main's refills take remote lists while pushes go on */
        for (unsigned k = 0; k < 200 || atomic_load(&running); k++) {
            void *q[64];
            for (unsigned j = 0; j < 64; j++) {
                q[j] = malloc(sizes[k % NCLS]);
                CHECK(q[j] != NULL, "malloc failed");
            }
            for (unsigned j = 0; j < 64; j++)
                free(q[j]);
            heap_collect_remote(hak_tls.heap); /* what a refill does first */
            if (k % 64 == 0)
                sched_yield();
        }
        for (unsigned t = 0; t < PUSHERS; t++) {
            CHECK(pthread_join(ps[t].tid, NULL) == 0, "pthread_join failed");
            pushed += ps[t].n;
        }
        /* no one pushes now: each count must be its list's length */
        for (unsigned i = 0; i < npages; i++) {
            hak_page_t *pg = pages[i];
            uintptr_t v = atomic_load(&pg->remote);
            unsigned len = 0;
            void *last = NULL;
            for (void *b = remote_head(pg, v); b; b = block_next(pg, b)) {
                CHECK(page_of(b) == pg, "round %u: a block of another page on page %u's remote list", r, i);
                CHECK(++len <= pg->capacity, "round %u: page %u's remote list does not end", r, i);
                last = b;
            }
            CHECK(remote_count(v) == len, "round %u: page %u's remote word counts %u blocks, its list has %u", r,
                  i, remote_count(v), len);
            CHECK(!last || remote_tail(pg, v) == last,
                  "round %u: page %u's remote word names %p as its list's last block, the list ends at %p", r, i,
                  remote_tail(pg, v), last);
            counted += len;
            if (len > longest)
                longest = len;
        }
        /* take them in: every page's blocks add up */
        heap_flush_all(&hak_tls);
        for (unsigned i = 0; i < npages; i++) {
            hak_page_t *pg = pages[i];
            CHECK(atomic_load(&pg->owner) == hak_tls.heap, "round %u: page %u left main's heap", r, i);
            unsigned freelen = 0;
            for (void *b = pg->free; b; b = block_next(pg, b))
                CHECK(++freelen <= pg->capacity, "round %u: page %u's free list does not end", r, i);
            unsigned uncarved = (unsigned)((size_t)(pg->end - pg->bump) / pg->bsize);
            unsigned guard = 0;
#if HAK_SECURE
            guard = pg->bsize <= HAK_GUARD_BLOCK_MAX && pg->bump > pg->start;
#endif
            CHECK(pg->used + freelen + uncarved + guard == pg->capacity,
                  "round %u: page %u (%u B blocks): %u out + %u free + %u uncarved + %u guard != %u blocks", r, i,
                  pg->bsize, pg->used, freelen, uncarved, guard, pg->capacity);
        }
        for (unsigned i = 0; i < NBLK; i++) {
            if (freed[i])
                fill(i);
            else
                CHECK(((unsigned char *)blk[i])[sizes[i / PER_CLASS] - 1] == (unsigned char)(i & 0xff),
                      "round %u: block %u was overwritten", r, i);
        }
    }
    for (unsigned i = 0; i < NBLK; i++)
        free(blk[i]);
    for (unsigned i = 0; i < npages; i++)
        free(keep[i]);
    CHECK(pushed > counted, "the owner took no list while pushes went on: the test does not race");
    printf("test_remote_count: OK: %u rounds, %lu blocks freed remotely on %u pages; %lu left on lists at the "
           "joins (longest %lu), every count equal to its list, every page's books balanced\n",
           rounds, pushed, npages, counted, longest);
    return 0;
}
