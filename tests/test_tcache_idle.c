/* test_tcache_idle - a class used from its cache after its last cold event,
 * then left alone, is found idle and gives its room to classes that want to
 * grow past the thread's budget (heap/tcache.c, make_room).
 *
 * Linked with libhakmem.a, to read the class caps of the thread's bins.
 *  1. Class X (4 KiB) is used in bursts until its cap has grown.
 *  2. X is used from its cache only: two blocks taken and given back in the
 *     other order, so its cache has a new top block and no cold event saw it.
 *  3. Bursts of blocks of the classes from 8 to 32 KiB, each one more than
 *     the class's cap (so every burst ends in a flush, a cold event), make
 *     those classes want to grow past the budget (set to 1 MiB), for many
 *     more cold events than a class needs to age.
 * X has had no cold event since 1 and was not used since 2: it must have
 * given room back (its cap lowered). It used to keep its cap for good: a
 * class whose cache had changed since its last cold event counted as in use
 * until its next cold event, however long ago the change was.
 * 4. The recency list make_room walks holds no class that has neither had a
 *    cold event nor a starting cap (the classes above 32 KiB here): those
 *    used to sit at its front, each skipped at every make_room call.
 *
 * usage: test_tcache_idle
 */
#include "hak_test.h"
#include "hakmem.h"
#include "heap/heap.h"
#include "heap/canary.h"
#include "heap/size_class.h"
#include "policy/config.h"

#define BIG_FIRST (8 * 1024 + 1)
#define BIG_LAST (32 * 1024)
#define BUDGET (1 << 20)

/* A request that lands in class c (the secure build adds its tail). */
static size_t req(unsigned c) { return hak_class_size[c] - HAK_TAIL; }

int main(void)
{
    hak_test_name = "test_tcache_idle";
    CHECK(hak_option_set("HAKMEM_TCACHE_BUDGET", BUDGET) == 0, "setting the budget");
    free(malloc(16)); /* the thread's heap exists from here on */
    CHECK(hak_tls.state == HAK_THREAD_LIVE, "no thread heap");
    unsigned x = size_class_of(4096);
    size_t xs = req(x);

    void *blk[64];
    for (int round = 0; round < 200; round++) {
        for (int i = 0; i < 16; i++) {
            blk[i] = malloc(xs);
            CHECK(blk[i] != NULL, "malloc(%zu)", xs);
        }
        for (int i = 0; i < 16; i++) free(blk[i]);
    }
    uint32_t grown = bin_cap(&hak_tls, x);
    CHECK(grown >= 8, "the 4 KiB class's cap grew to only %u", grown);
    CHECK(bin_count(&hak_tls, x) >= 2, "the 4 KiB class's cache holds %u blocks", bin_count(&hak_tls, x));

    void *a = malloc(xs), *b = malloc(xs);
    CHECK(a && b, "malloc(%zu)", xs);
    free(a);
    free(b);

    unsigned first = size_class_of(BIG_FIRST), last = size_class_of(BIG_LAST);
    for (int round = 0; round < 60; round++)
        for (unsigned c = first; c <= last; c++) {
            unsigned n = bin_cap(&hak_tls, c) + 1;
            if (n > 64) n = 64;
            for (unsigned i = 0; i < n; i++) {
                blk[i] = malloc(req(c));
                CHECK(blk[i] != NULL, "malloc(%zu)", req(c));
            }
            for (unsigned i = 0; i < n; i++) free(blk[i]);
        }
    size_t big = 0;
    for (unsigned c = first; c <= last; c++) big += (size_t)bin_cap(&hak_tls, c) * hak_class_size[c];
    printf("test_tcache_idle: 4 KiB class cap %u after its bursts, %u after %u cold events of the classes of "
           "8-32 KiB (their caps: %zu KiB)\n",
           grown, bin_cap(&hak_tls, x), hak_tls.heap->tick, big >> 10);
    CHECK(bin_cap(&hak_tls, x) < grown, "the 4 KiB class, idle since, kept its cap of %u", grown);

    hak_heap_t *h = hak_tls.heap;
    unsigned listed = 0, never = 0;
    for (unsigned c = h->lru_first; c < HAK_NCLASSES; c = h->lru_next[c]) {
        CHECK(++listed <= HAK_NCLASSES, "the recency list loops");
        if (hak_config.tcache_start[c] == 0 && h->last_use[c] == 0) never++;
    }
    printf("test_tcache_idle: %u classes on the recency list, %u of them never used and without a starting cap\n",
           listed, never);
    CHECK(never == 0, "make_room walks %u classes that were never used", never);
    printf("test_tcache_idle: OK\n");
    return 0;
}
