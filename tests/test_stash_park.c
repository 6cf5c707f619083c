/* test_stash_park - a large page in the page stash is parked, not detached
 * (segment/segment.c, segment_page_park): its slices still point at its
 * record, whose state says it holds no block, and everything that meets a
 * stale pointer into it must see that.
 *
 * Linked with libhakmem.a, to read the page record and the stash.
 *  1. A 500 KiB block (a run of 8 slices), written at both ends, is freed:
 *     the stash holds it; its slices still point at its record, which says
 *     free (HAK_PAGE_FREE, no owner), and the large-block queries
 *     (large_usable, large_live_usable) answer 0 for it.
 *  2. In a child: the block freed again is reported ("hakmem: free: ...")
 *     and ignored: the next two blocks of its size are distinct and whole.
 *  3. malloc of the same size takes the page back: the same run, a live
 *     large page again (state, start, usable size, the `ends` it had).
 *  4. Freed once more, then the stash trimmed (malloc_trim's step): the page
 *     goes back to its segment detached (its slices point at no record).
 */
#include "hak_test.h"
#include "hakmem.h"
#include "large/large.h"
#include "large/page_stash.h"

#define SIZE (500 * 1024)

static unsigned char *g_block;

static void check_parked(const unsigned char *p, const char *when)
{
    hak_segment_t *s = segment_of(p);
    hak_page_t *pg = s->slice_page[slice_index(p)];
    CHECK(pg != NULL, "%s: the stashed page's slices lost their record", when);
    CHECK(pg->state == HAK_PAGE_FREE, "%s: the stashed page's record says state %u, not free", when,
          (unsigned)pg->state);
    CHECK(atomic_load(&pg->owner) == NULL, "%s: the stashed page has an owner", when);
    for (unsigned i = pg->first_slice; i < pg->first_slice + pg->slice_count; i++)
        CHECK(s->slice_page[i] == pg && s->slice_cls[i] == HAK_CLASS_NONE, "%s: slice %u of the stashed page", when, i);
    CHECK(large_usable(p) == 0 && large_live_usable(p) == 0, "%s: a stashed block reads as live", when);
}

static void stale_child(void *arg)
{
    (void)arg;
    free(g_block); /* reported, ignored */
    unsigned char *a = malloc(SIZE), *b = malloc(SIZE);
    if (!a || !b || a == b) _exit(3);
    memset(a, 1, SIZE);
    memset(b, 2, SIZE);
    if (a[SIZE - 1] != 1 || b[0] != 2) _exit(4);
    free(a);
    free(b);
    _exit(0);
}

int main(void)
{
    hak_test_name = "test_stash_park";
    free(malloc(16));
    size_t before = page_stash_bytes();
    unsigned char *p = malloc(SIZE);
    CHECK(p != NULL, "malloc");
    p[0] = 1;
    p[SIZE - 1] = 2;
    hak_page_t *pg = page_of(p);
    unsigned first = pg->first_slice, n = pg->slice_count;
    uint16_t ends = pg->ends;
    CHECK(pg->state == HAK_PAGE_LARGE && n > 2, "a %d KiB block is not on a large page of several slices", SIZE / 1024);
    free(p);
    CHECK(page_stash_bytes() == before + ((size_t)n << HAK_SLICE_SHIFT), "the freed block's page was not stashed "
          "(%zu bytes before, %zu after)", before, page_stash_bytes());
    check_parked(p, "after free");

    g_block = p;
    char err[1024];
    int st = ht_run_captured(stale_child, NULL, err, sizeof err, NULL, 0);
    char how[64];
    CHECK(ht_exited0(st) || ht_killed_by(st, SIGABRT), "stale frees child: %s; stderr: %s",
          ht_status_text(st, how, sizeof how), err);
    CHECK(strstr(err, "hakmem: free: ") != NULL, "the stale free was not reported; stderr: %s", err);
    check_parked(p, "after the child");

    unsigned char *q = malloc(SIZE);
    CHECK(q != NULL, "malloc");
    hak_page_t *qg = page_of(q);
    CHECK(qg == pg && qg->first_slice == first && qg->slice_count == n, "the stash did not hand the run back");
    CHECK(qg->state == HAK_PAGE_LARGE && qg->start == q && atomic_load(&qg->owner) == NULL, "the page taken back "
          "is not a live large page");
    /* (the secure build's usable size leaves out the block's tail canary) */
    CHECK(malloc_usable_size(q) >= SIZE && large_live_usable(q) >= malloc_usable_size(q), "usable size %zu, "
          "large_live_usable %zu", malloc_usable_size(q), large_live_usable(q));
    CHECK((qg->ends & ends) == ends, "the run's block ends were forgotten (%#x, had %#x)", qg->ends, ends);
    memset(q, 3, SIZE);
    free(q);
    check_parked(q, "after the second free");

    /* malloc_trim's path for the stash, without the unmapping of empty
     * segments that follows it there: the segment stays readable. */
    CHECK(page_stash_trim(), "the stash gave nothing back");
    CHECK(segment_of(q)->slice_page[slice_index(q)] == NULL, "given back, the page still owns its slices");
    printf("test_stash_park: OK: a stashed %d KiB block's page (%u slices) parked, stale free reported, "
           "taken back whole, detached when trimmed\n", SIZE / 1024, n);
    return 0;
}
