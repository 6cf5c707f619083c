/* test_seg_index - each shard's index of its segments (segment/seg_index.c)
 * matches the segment headers, and the page search that reads it chooses
 * the slices the walk of the headers chose.
 *
 * Linked with libhakmem.a (it takes shard locks and calls the search).
 * Worker threads allocate and free blocks of 16 B..512 KiB (one in five
 * freed by another thread), with malloc_trim now and then; the test runs
 * with a 1 ms purge delay and a small dirty budget, so pages are cut, freed,
 * returned, purged (batches taken out and put back) and segments mapped and
 * unmapped meanwhile. While they run and after, every shard is checked
 * under its lock:
 *  - every segment on the shard's lists has a record with its masks, dense
 *    flag and last classes; every record's segment is the shard's and knows
 *    its index; a record has a free slice iff its segment is listed; the
 *    records are linked in the order of the headers' list;
 *  - for every class (and large pages of 1..32 slices), warm only or not,
 *    dense or not, seg_search_locked gives the segment and slice that the
 *    former walk of the list (ref_search below, the tiers of
 *    page_alloc_locked) gives.
 * A forked child (forked while the workers run) checks the same, then
 * allocates and frees and checks again.
 *
 * usage: test_seg_index   (HAKMEM_PURGE_DELAY_MS=1, HAKMEM_DIRTY_MAX=256K)
 */
#include "hak_test.h"
#include "heap/size_class.h"
#include "segment/segment.h"
#include "segment/shard.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>

#define THREADS 3
#define SLOTS 512
#define MAILBOX 64

/* The walk of the headers that seg_search_locked replaced (segment.c before
 * the index): each tier's first segment of the list. */
static int ref_search(seg_shard_t *sh, unsigned n, unsigned cls, bool warm_only, bool dense, hak_segment_t **out)
{
    hak_segment_t *head = dense ? sh->dense_head : sh->head;
    bool slice0_ok = n == 1 && cls != HAK_CLASS_NONE;
    hak_segment_t *seg[4] = {NULL, NULL, NULL, NULL};
    int at[4] = {-1, -1, -1, -1};
    if (cls != HAK_CLASS_NONE) {
        uint32_t run = n >= 32 ? ALL_SLICES : (1u << n) - 1;
        for (hak_segment_t *t = head; t; t = t->next) {
            uint32_t fm = t->free_mask, dm = t->dirty_mask, warm = fm & dm;
            for (uint32_t m = warm & (slice0_ok ? ALL_SLICES : ~1u); m; m &= m - 1) {
                unsigned i = (unsigned)__builtin_ctz(m);
                if (t->last_cls[i] == cls && i + n <= HAK_SLICES && ((fm >> i) & run) == run) {
                    seg[0] = t;
                    at[0] = (int)i;
                    break;
                }
            }
            if (seg[0]) break;
            if (!seg[1] && t->dense && fm != ALL_FREE && (at[1] = find_run(fm, 0, n, slice0_ok)) >= 0) seg[1] = t;
            if (!seg[1] && (t->whole_mask & fm) && (at[1] = find_run(fm & t->whole_mask, 0, n, slice0_ok)) >= 0) seg[1] = t;
            if (warm_only) continue;
            if (!seg[2] && (at[2] = find_run(fm & ~dm, 0, n, slice0_ok)) >= 0) seg[2] = t;
            if (!seg[3] && (at[3] = find_run(fm, dm, n, slice0_ok)) >= 0) seg[3] = t;
        }
    } else {
#if HAK_SECURE
        for (hak_segment_t *t = head; t && !seg[0]; t = t->next)
            if ((at[0] = seg_find_guarded_run(t, n)) >= 0) seg[0] = t;
#endif
        for (hak_segment_t *t = head; t && !seg[0] && !seg[1]; t = t->next) {
            uint32_t fm = t->free_mask, dm = t->dirty_mask;
            if ((dm & fm) && (at[1] = find_run(fm & dm, 0, n, slice0_ok)) >= 0) seg[1] = t;
            else if (!warm_only && !seg[3] && (at[3] = find_run(fm, dm, n, slice0_ok)) >= 0) seg[3] = t;
        }
    }
    for (unsigned k = 0; k < 4; k++)
        if (seg[k]) {
            *out = seg[k];
            return at[k];
        }
    return -1;
}

static atomic_ulong searches, listed_max;

/* sh locked: its index against its headers, and the search against ref_search. */
static void check_shard(unsigned idx, const char *when)
{
    seg_shard_t *sh = &hak_seg_shards[idx];
    seg_index_t *ix = seg_ix(sh);
    unsigned listed = 0;
    CHECK(ix->nrecs <= ix->caprecs, "%s: shard %u has %u records in room for %u", when, idx, ix->nrecs, ix->caprecs);
    for (unsigned l = 0; l < 2; l++) {
        uint32_t link = ix->rhead[l], prev = 0;
        for (hak_segment_t *s = l ? sh->dense_head : sh->head; s; s = s->next) {
            listed++;
            CHECK(s->rec < ix->nrecs, "%s: shard %u: a listed segment's record %u of %u", when, idx, s->rec, ix->nrecs);
            const seg_rec_t *r = &ix->recs[s->rec];
            CHECK(r->seg == s, "%s: shard %u: record %u is another segment's", when, idx, s->rec);
            CHECK(r->free == s->free_mask && r->dirty == s->dirty_mask && r->whole == s->whole_mask,
                  "%s: shard %u: record %u masks free %08x dirty %08x whole %08x, header %08x %08x %08x", when, idx,
                  s->rec, r->free, r->dirty, r->whole, s->free_mask, s->dirty_mask, s->whole_mask);
            CHECK(r->dense == s->dense && (bool)s->dense == (l == 1), "%s: shard %u: dense flag", when, idx);
            CHECK(memcmp(r->last_cls, s->last_cls, HAK_SLICES) == 0, "%s: shard %u: last classes differ", when, idx);
            uint64_t w = 0;
            for (unsigned i = 0; i < HAK_SLICES; i++)
                if ((s->free_mask & s->dirty_mask) >> i & 1) w |= 1ull << (s->last_cls[i] & 63);
            CHECK(r->warm_cls == w, "%s: shard %u: record %u's warm classes %016llx, its header's %016llx", when, idx,
                  s->rec, (unsigned long long)r->warm_cls, (unsigned long long)w);
            CHECK(s->free_mask != 0, "%s: shard %u: a listed segment without a free slice", when, idx);
            CHECK(link == s->rec + 1 && r->prev == prev, "%s: shard %u: the records' list is not the headers'", when,
                  idx);
            prev = link;
            link = r->next;
        }
        CHECK(link == 0 && ix->rtail[l] == prev, "%s: shard %u: the records' list is longer, or its tail wrong", when,
              idx);
    }
    unsigned with_free = 0;
    for (unsigned i = 0; i < ix->nrecs; i++) {
        const seg_rec_t *r = &ix->recs[i];
        CHECK(r->free || (!r->next && !r->prev && ix->rhead[r->dense] != i + 1),
              "%s: shard %u: record %u without a free slice is linked", when, idx, i);
        hak_segment_t *s = r->seg;
        CHECK(s && s->magic == HAK_SEG_MAGIC && s->shard == idx && s->rec == i,
              "%s: shard %u: record %u's segment is not a live segment of the shard indexed there", when, idx, i);
        CHECK(r->free == s->free_mask && r->dirty == s->dirty_mask && r->whole == s->whole_mask,
              "%s: shard %u: record %u's masks differ from its header", when, idx, i);
        if (r->free) with_free++;
    }
    CHECK(with_free == listed, "%s: shard %u: %u records with free slices, %u segments listed", when, idx, with_free,
          listed);
    uint32_t cnt[64] = {0}, whole = 0, clean = 0;
    for (unsigned i = 0; i < ix->nrecs; i++) {
        for (unsigned c = 0; c < 64; c++) cnt[c] += (unsigned)(ix->recs[i].warm_cls >> c & 1);
        whole += (ix->recs[i].whole & ix->recs[i].free) != 0;
        clean += (ix->recs[i].free & ~ix->recs[i].dirty) != 0;
    }
    CHECK(memcmp(cnt, ix->warm_cnt, sizeof cnt) == 0 && whole == ix->whole_cnt && clean == ix->clean_cnt,
          "%s: shard %u: the counts of records by warm class or with whole slices are wrong", when, idx);
    if ((unsigned long)listed > atomic_load(&listed_max)) atomic_store(&listed_max, listed);
    for (unsigned d = 0; d < 2; d++)
        for (unsigned w = 0; w < 2; w++) {
            for (unsigned cls = 0; cls <= HAK_CLASS_NONE; cls++) {
                unsigned n_lo = 1, n_hi = 32;
                if (cls != HAK_CLASS_NONE) n_lo = n_hi = class_slices(cls);
                for (unsigned n = n_lo; n <= n_hi; n++) {
                    hak_segment_t *a = NULL, *b = NULL;
                    int fa = seg_search_locked(sh, n, cls, w, d, &a);
                    int fb = ref_search(sh, n, cls, w, d, &b);
                    CHECK(fa == fb && (fa < 0 || a == b),
                          "%s: shard %u: class %u, %u slices, warm_only %u, dense %u: the index chose slice %d of "
                          "%p, the walk slice %d of %p",
                          when, idx, cls, n, w, d, fa, (void *)a, fb, (void *)b);
                    atomic_fetch_add(&searches, 1);
                }
            }
        }
}

static void check_all(const char *when)
{
    for (unsigned i = 0; i < HAK_SEG_SHARDS; i++) {
        seg_shard_t *sh = &hak_seg_shards[i];
        shard_lock(sh);
        check_shard(i, when);
        shard_unlock(sh);
    }
}

static _Atomic(void *) mailbox[THREADS][MAILBOX];
static atomic_int stop;

static size_t pick_size(ht_rng *r)
{
    switch (ht_below(r, 4)) {
    case 0: return 16 + ht_below(r, 1024);
    case 1: return 1024 + ht_below(r, 16 * 1024);
    case 2: return 16 * 1024 + ht_below(r, 112 * 1024);
    default: return 128 * 1024 + ht_below(r, 384 * 1024);
    }
}

static void *worker(void *arg)
{
    unsigned me = (unsigned)(uintptr_t)arg;
    ht_rng r = {0x5e9u + me};
    void *slot[SLOTS] = {0};
    for (unsigned long it = 0; !atomic_load(&stop); it++) {
        unsigned i = (unsigned)ht_below(&r, SLOTS);
        if (slot[i]) {
            if (ht_below(&r, 5) == 0) { /* to the next thread's mailbox */
                void *old = atomic_exchange(&mailbox[(me + 1) % THREADS][ht_below(&r, MAILBOX)], slot[i]);
                free(old);
            } else {
                free(slot[i]);
            }
            slot[i] = NULL;
        } else {
            size_t n = pick_size(&r);
            unsigned char *p = malloc(n);
            CHECK(p != NULL, "malloc(%zu)", n);
            p[0] = 1;
            p[n - 1] = 2;
            slot[i] = p;
        }
        for (unsigned k = 0; k < 2; k++) free(atomic_exchange(&mailbox[me][ht_below(&r, MAILBOX)], NULL));
        if (it % 20000 == 19999) malloc_trim(0);
    }
    for (unsigned i = 0; i < SLOTS; i++) free(slot[i]);
    return NULL;
}

static void child(void)
{
    alarm(20);
    check_all("fork child");
    ht_rng r = {77};
    void *keep[256];
    for (unsigned round = 0; round < 4; round++) {
        for (unsigned i = 0; i < 256; i++) keep[i] = malloc(pick_size(&r));
        for (unsigned i = 0; i < 256; i += 2) free(keep[i]);
        check_all("fork child, after its allocations");
        for (unsigned i = 1; i < 256; i += 2) free(keep[i]);
        malloc_trim(0);
        check_all("fork child, after its trim");
    }
    _exit(0);
}

int main(void)
{
    hak_test_name = "test_seg_index";
    free(malloc(1));
    check_all("start");
    pthread_t th[THREADS];
    for (unsigned i = 0; i < THREADS; i++)
        CHECK(pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i) == 0, "pthread_create");
    double t0 = ht_now_ms();
    unsigned checks = 0, forks = 0;
    while (ht_now_ms() - t0 < 3000) {
        check_all("while the workers run");
        checks++;
        if (checks % 16 == 0) {
            ht_fork_wait(child);
            forks++;
        }
        usleep(2000);
    }
    atomic_store(&stop, 1);
    for (unsigned i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
    check_all("workers joined");
    for (unsigned i = 0; i < THREADS; i++)
        for (unsigned k = 0; k < MAILBOX; k++) free(atomic_exchange(&mailbox[i][k], NULL));
    check_all("mailboxes emptied");
    malloc_trim(0);
    check_all("after malloc_trim");
    ht_fork_wait(child);
    CHECK(atomic_load(&listed_max) >= 2, "at most %lu segments listed in a shard: nothing to choose between",
          atomic_load(&listed_max));
    printf("test_seg_index: %u checks of every shard, %u forks, %lu searches compared, up to %lu segments listed "
           "in a shard\n",
           checks + 4, forks + 1, atomic_load(&searches), atomic_load(&listed_max));
    return 0;
}
