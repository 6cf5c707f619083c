/* test_block_check - the block-start tests' table (guard/block_check.c)
 * against the size classes, and free()'s fast test (block_fast_ok: one
 * 32-bit multiplication and one comparison) against the division it stands
 * for, at every offset of a slice of every class it serves.
 *
 * For each class: size is the class size; fast_lim is 65536 / size up to
 * 8 KiB (one-slice pages), else 0; inv * odd part == 1 mod 2^64 and shift is
 * the size's power of two (the rotation test of the slow paths); mul and
 * fast_bound as block_check.c says. Then, for a pointer at offset off of
 * slice 1 of a segment, block_fast_ok must say yes exactly when size divides
 * off and off / size < fast_lim, as the rotation test says too; in slice 0
 * the same (the standard build gives slice 0 to no page: the header needs
 * no test; the secure build, whose slice 0 keeps the header's layout:
 * always no). Standard build: free_checked's page-relative test
 * (block_carved_start, mul64 in the window's check copy) against the
 * division at every offset of a page of every class, below and past the
 * bump.
 *
 * usage: test_block_check
 */
#include "hak_test.h"
#include "guard/block_check.h"
#include "guard/registry.h"
#include "heap/size_class.h"

#if HAK_CHECKS && !HAK_SECURE
/* free()'s test in the window (block_slice_ok_map, the window's
 * slice_term) on real pages of every one-slice class: at
 * every offset of the slice of a block of the class, yes exactly at the
 * class's block starts (block_fast_ok's answer), and on the slice of a
 * large block, never. Then on real pages of every class of several slices
 * (9 KiB to 256 KiB): blocks are taken until one's page is carved to its
 * end; at every offset of each of that page's slices the test says yes
 * exactly at the page's blocks, and on the last page, carved in part, at
 * its carved blocks only. Then free() of pointers the test must leave to
 * free_checked: an interior pointer of a block of the carved page, the
 * multiple of the size past that page's last block (where its last slice
 * holds one), the last page's first block not carved yet: each reported
 * (stderr), the first two never handed out by a malloc after, the third
 * only once (by its carve). */
static void one_slice_pages(unsigned long long *checked)
{
    const hak_slice_window_t *w = __atomic_load_n(&hak_slice_window.w, __ATOMIC_ACQUIRE);
    unsigned tested = 0;
    for (unsigned c = 0; c < HAK_NCLASSES; c++) {
        uint32_t size = hak_class_size[c];
        const hak_block_check_t *e = &hak_block_check[c + 1];
        if (class_slices(c) != 1)
            continue;
        char *b = malloc(size);
        CHECK(b != NULL, "malloc(%u)", size);
        uintptr_t i = ((uintptr_t)b >> HAK_SLICE_SHIFT) - w->first;
        uintptr_t off = (uintptr_t)(c + 1) * HAK_SLICE_MAP_SCALE;
        CHECK(slice_map_entry(b) == off, "class %u: slice map entry %u", c, slice_map_entry(b));
        if (i < HAK_WIN_ENTRIES) {
            const uint8_t *slice = (const uint8_t *)((uintptr_t)b & ~(uintptr_t)(HAK_SLICE_SIZE - 1));
            for (uint64_t o = 0; o < HAK_SLICE_SIZE; o++) {
                bool want = o % size == 0 && o / size < e->fast_lim;
                CHECK(block_slice_ok_map(slice + o, w, i, off) == want,
                      "class %u (%u B): offset %llu of a slice of its page: free()'s test says %d", c, size,
                      (unsigned long long)o, !want);
                CHECK(block_fast_ok(slice + o, e) == want, "class %u: the 32-bit test disagrees at %llu", c,
                      (unsigned long long)o);
                (*checked)++;
            }
            tested++;
        }
        free(b);
    }
    /* a large block's slices: sentinel entry, term 0 */
    char *big = malloc(512 * 1024);
    CHECK(big != NULL, "malloc(512 KiB)");
    uintptr_t bi = ((uintptr_t)big >> HAK_SLICE_SHIFT) - w->first;
    unsigned bv = slice_map_entry(big);
    if (bi < HAK_WIN_ENTRIES)
        for (uint64_t o = 0; o < HAK_SLICE_SIZE; o += 16)
            CHECK(!block_slice_ok_map(big + o - ((uintptr_t)big & (HAK_SLICE_SIZE - 1)), w, bi, bv),
                  "a large block's slice, offset %llu: free()'s test says yes", (unsigned long long)o);
    free(big);
    printf("test_block_check: free()'s window test tried on real pages of %u one-slice classes\n", tested);
}

/* The same test on pages made up at the top of the window, where no
 * memory of ours is (their slices' entries read 0; their addresses are
 * never dereferenced): for every class of several slices, the fields a
 * carve to each possible bump gives (slice_map_mid_carved), at every
 * 16th offset of each slice: yes exactly at the carved blocks (for a power
 * of two, in slices whose blocks are all carved; above 64 KiB a slice
 * holds one block start or none). Carves are at least a block on real
 * pages, so a page of two blocks is seldom seen carved in part there.
 * Then a slice with nothing carved (term 0) under every bin: never. */
static void mid_made_up(unsigned long long *checked)
{
    const hak_slice_window_t *w = __atomic_load_n(&hak_slice_window.w, __ATOMIC_ACQUIRE);
    uintptr_t i0 = HAK_WIN_ENTRIES - 32; /* the window's last 2 MiB */
    const uint8_t *start = (const uint8_t *)((w->first + i0) << HAK_SLICE_SHIFT);
    for (unsigned j = 0; j < 32; j++)
        if (slice_map_entry(start + ((size_t)j << HAK_SLICE_SHIFT)) != 0) {
            printf("test_block_check: the window's top is in use: made-up pages not tried\n");
            return;
        }
    for (unsigned c = 0; c < HAK_NCLASSES; c++) {
        uint32_t size = hak_class_size[c];
        unsigned n = class_slices(c);
        if (n < 2)
            continue;
        size_t cap = ((size_t)n << HAK_SLICE_SHIFT) / size, per = HAK_SLICE_SIZE / size;
        bool pow2 = (size & (size - 1)) == 0;
        uintptr_t off = (uintptr_t)(c + 1) * HAK_SLICE_MAP_SCALE;
        for (size_t carved = 0; carved <= cap; carved++) {
            slice_map_mid_carved(start, n, size, carved * size);
            for (unsigned j = 0; j < n; j++)
                for (uint64_t o = 0; o < HAK_SLICE_SIZE; o += 16) {
                    uint64_t po = ((uint64_t)j << HAK_SLICE_SHIFT) + o;
                    size_t k = po / size;
                    bool want = po % size == 0 && k < carved && (!pow2 || per == 0 || (size_t)j * per + per <= carved);
                    CHECK(block_slice_ok_map(start + po, w, i0 + j, off) == want,
                          "class %u (%u B): made-up page with %zu of %zu blocks carved, slice %u, offset %llu: "
                          "free()'s test says %d", c, size, carved, cap, j, (unsigned long long)o, !want);
                    (*checked)++;
                }
        }
        slice_map_mid_carved(start, n, size, 0); /* bound 0 again */
        for (unsigned j = 0; j < n; j++)
            CHECK(w->slice_term[i0 + j] == 0, "class %u: nothing carved, but slice %u's term is %llu", c, j,
                  (unsigned long long)w->slice_term[i0 + j]);
    }
    /* Term 0 (nothing carved, large and free slices, memory not ours):
     * no offset passes, whatever the bin (registry.c, slice_term), and
     * the margins that argument takes, for every class: a multiple of
     * the size past the bound stays below 2^20, any other offset below
     * 2^64 - mul64 + e + 2^20, both under the passing span, which holds
     * every bound (< 2^20). */
    for (unsigned v = 0; v < HAK_NCLASSES + 2; v++) {
        uint64_t m = w->check[v].mul64, size = v && v <= HAK_NCLASSES ? hak_class_size[v - 1] : 0;
        if (size)
            CHECK(m - m * size - ((uint64_t)1 << 21) >= HAK_SLICE_SPAN && HAK_SLICE_SPAN >= ((uint64_t)1 << 20),
                  "class %u (%llu B): mul64 %llu leaves no room for the passing span", v - 1,
                  (unsigned long long)size, (unsigned long long)m);
        for (uint64_t o = 0; o < HAK_SLICE_SIZE; o++) {
            CHECK(!block_slice_ok_map(start + o, w, i0, (uintptr_t)v * HAK_SLICE_MAP_SCALE),
                  "bin %u: a slice whose term is 0 passes free()'s test at offset %llu", v, (unsigned long long)o);
            (*checked)++;
        }
    }
}

static void mid_pages(unsigned long long *checked)
{
    unsigned tested = 0;
    for (unsigned c = 0; c < HAK_NCLASSES; c++) {
        uint32_t size = hak_class_size[c];
        unsigned n = class_slices(c);
        if (n < 2)
            continue;
        enum { KEEP = 64 };
        char *keep[KEEP];
        unsigned kept = 0;
        hak_page_t *done = NULL;
        while (kept < KEEP) {
            char *b = malloc(size);
            CHECK(b != NULL, "malloc(%u)", size);
            keep[kept++] = b;
            hak_page_t *pg = page_of(b);
            if (!done && pg->bump == pg->end)
                done = pg;
        }
        CHECK(done != NULL, "class %u (%u B): no page carved to its end after %d blocks", c, size, KEEP);
        const hak_slice_window_t *w = __atomic_load_n(&hak_slice_window.w, __ATOMIC_ACQUIRE);
        uintptr_t off = (uintptr_t)(c + 1) * HAK_SLICE_MAP_SCALE;
        uintptr_t first = ((uintptr_t)done->start >> HAK_SLICE_SHIFT) - w->first;
        CHECK(done->slice_count == n && ((uintptr_t)done->start & (HAK_SLICE_SIZE - 1)) == 0,
              "class %u: page of %u slices at %p", c, done->slice_count, (void *)done->start);
        if (first + n > HAK_WIN_ENTRIES) {
            printf("test_block_check: class %u: page outside the window, mid test not tried\n", c);
            goto out;
        }
        for (unsigned j = 0; j < n; j++) {
            const uint8_t *slice = done->start + ((size_t)j << HAK_SLICE_SHIFT);
            for (uint64_t o = 0; o < HAK_SLICE_SIZE; o++) {
                uint64_t po = ((uint64_t)j << HAK_SLICE_SHIFT) + o;
                bool want = po % size == 0 && po / size < done->capacity;
                CHECK(block_slice_ok_map(slice + o, w, first + j, off) == want,
                      "class %u (%u B): slice %u of its page, offset %llu: mid test says %d", c, size, j,
                      (unsigned long long)o, !want);
                (*checked)++;
            }
        }
        /* the last page, carved in part: its carved blocks pass (for a
         * power of two, only in slices carved whole), nothing else */
        hak_page_t *last = page_of(keep[kept - 1]);
        uintptr_t li = ((uintptr_t)last->start >> HAK_SLICE_SHIFT) - w->first;
        size_t carved = (size_t)(last->bump - last->start) / size, per = HAK_SLICE_SIZE / size;
        bool pow2 = (size & (size - 1)) == 0;
        if (li + n <= HAK_WIN_ENTRIES)
            for (unsigned j = 0; j < n; j++)
                for (uint64_t o = 0; o < HAK_SLICE_SIZE; o += 16) {
                    uint64_t po = ((uint64_t)j << HAK_SLICE_SHIFT) + o;
                    bool want = po % size == 0 && po / size < carved &&
                                (!pow2 || (size_t)j * per + (per ? per : 1) <= carved);
                    CHECK(block_slice_ok_map(last->start + po, w, li + j, off) == want,
                          "class %u (%u B): page with %zu of %u blocks carved, slice %u, offset %llu: mid test "
                          "says %d", c, size, carved, last->capacity, j, (unsigned long long)o, !want);
                }
        /* free() of what must not enter the cache: an interior pointer,
         * the multiple of the size past the carved page's last block, and
         * the last page's first block not carved yet */
        char *bad[3] = {(char *)done->start + size + 16, NULL, NULL};
        if ((size_t)done->capacity * size + 16 <= (size_t)n << HAK_SLICE_SHIFT)
            bad[1] = (char *)done->start + (size_t)done->capacity * size;
        if (carved < last->capacity)
            bad[2] = (char *)last->start + carved * size;
        /* the reports go to a file (ctest fails a test whose output has one) */
        fflush(stderr);
        FILE *f = tmpfile();
        CHECK(f != NULL, "tmpfile");
        int saved = dup(2);
        dup2(fileno(f), 2);
        int nbad = 0;
        for (int k = 0; k < 3; k++)
            if (bad[k]) {
                free(ht_hide_ptr(bad[k]));
                nbad++;
            }
        dup2(saved, 2);
        close(saved);
        char rep[512] = "";
        rewind(f);
        size_t got_n = fread(rep, 1, sizeof rep - 1, f);
        rep[got_n] = 0;
        fclose(f);
        int reports = 0;
        for (const char *q = rep; (q = strstr(q, "free: invalid pointer")) != NULL; q++)
            reports++;
        CHECK(reports == nbad, "class %u (%u B): %d bad frees, %d reports: %s", c, size, nbad, reports, rep);
        char *got[KEEP];
        for (unsigned k = 0; k < KEEP; k++) {
            got[k] = malloc(size);
            CHECK(got[k] != bad[0] && (!bad[1] || got[k] != bad[1]),
                  "class %u (%u B): malloc returned %p, freed as a bad pointer", c, size, (void *)got[k]);
            /* the uncarved block may come out once, from its carve */
            for (unsigned q = 0; q < k; q++)
                CHECK(got[q] != got[k], "class %u (%u B): malloc returned %p twice", c, size, (void *)got[k]);
            for (unsigned q = 0; q < kept; q++)
                CHECK(keep[q] != got[k], "class %u (%u B): malloc returned the live block %p", c, size,
                      (void *)got[k]);
        }
        for (unsigned k = 0; k < KEEP; k++)
            free(got[k]);
        tested++;
    out:
        for (unsigned k = 0; k < kept; k++)
            free(keep[k]);
    }
    printf("test_block_check: mid test tried on real pages of %u classes\n", tested);
}
#endif

int main(void)
{
    hak_test_name = "test_block_check";
    unsigned served = 0;
    unsigned long long checked = 0;
    CHECK(hak_block_check[0].fast_bound == 0 && hak_block_check[HAK_NCLASSES + 1].fast_bound == 0,
          "the not-small entries must fail the fast test");
    for (unsigned c = 0; c < HAK_NCLASSES; c++) {
        const hak_block_check_t *e = &hak_block_check[c + 1];
        CHECK(e == block_check_at((c + 1) * HAK_SLICE_MAP_SCALE), "class %u: entry not at its bin offset", c);
        uint64_t size = hak_class_size[c];
        CHECK(e->size == size, "class %u: size %u, class size %llu", c, e->size, (unsigned long long)size);
        unsigned shift = (unsigned)__builtin_ctzll(size);
        uint64_t odd = size >> shift;
        CHECK(e->shift == shift && e->inv * odd == 1, "class %u (%llu B): inv/shift wrong", c,
              (unsigned long long)size);
        unsigned lim = size <= 8192 ? (unsigned)(65536 / size) : 0;
        CHECK(e->fast_lim == lim, "class %u (%llu B): fast_lim %u, want %u", c, (unsigned long long)size,
              e->fast_lim, lim);
        uint64_t mul = ((uint64_t)1 << 32) / size + 1;
        CHECK(e->mul == mul && e->fast_bound == lim * (mul * size - ((uint64_t)1 << 32)),
              "class %u (%llu B): mul %u / fast_bound %u wrong", c, (unsigned long long)size, e->mul,
              e->fast_bound);
        for (uint64_t off = 0; off < HAK_SLICE_SIZE; off++) {
            bool start = off % size == 0 && off / size < lim;
            const void *p1 = (const void *)(uintptr_t)(HAK_SLICE_SIZE + off);
            const void *p0 = (const void *)(uintptr_t)off;
            CHECK(block_fast_ok(p1, e) == start, "class %u (%llu B): offset %llu of slice 1: fast test says %d",
                  c, (unsigned long long)size, (unsigned long long)off, !start);
            CHECK(!start || block_index(off, e) < lim, "class %u: the rotation test disagrees at %llu", c,
                  (unsigned long long)off);
            CHECK(start || lim == 0 || block_index(off, e) >= lim, "class %u: the rotation test disagrees at %llu",
                  c, (unsigned long long)off);
#if HAK_SECURE /* slice 0 keeps the header's layout there: never the fast test */
            bool start0 = false;
#elif HAK_CHECKS /* slice 0 is never a page's (segment/shard.h): the test is the slice's alone */
            bool start0 = start;
#else /* slice 0: blocks at multiples of the size past the header */
            bool start0 = start && off >= HAK_SEG_HDR_SIZE;
#endif
            CHECK(block_fast_ok(p0, e) == start0, "class %u: offset %llu of slice 0: fast test says %d", c,
                  (unsigned long long)off, !start0);
            checked++;
        }
        served += lim != 0;
    }
#if HAK_CHECKS && !HAK_SECURE
    /* free()'s copy of mul and fast_bound in the window's header (guard/
     * registry.h), filled when the window was mapped (the first block's
     * segment) and in the static headers at start-up: every entry as the
     * table's, in the header free() reads now. */
    void *volatile q = malloc(16); /* volatile: a malloc/free pair the compiler would drop */
    free(q);
    const hak_slice_window_t *w = __atomic_load_n(&hak_slice_window.w, __ATOMIC_ACQUIRE);
    CHECK(w->first < ((uintptr_t)1 << 32), "no window after the first block (first slice %llu)",
          (unsigned long long)w->first);
    for (unsigned v = 0; v < HAK_NCLASSES + 2; v++)
        CHECK(w->check[v].mul == hak_block_check[v].mul && w->check[v].bound == hak_block_check[v].fast_bound,
              "bin %u: free()'s copy of the fast test (%u, %u) is not the table's (%u, %u)", v,
              w->check[v].mul, w->check[v].bound, hak_block_check[v].mul, hak_block_check[v].fast_bound);
    /* free_checked's page-relative test (block_carved_start) with the
     * window's mul64, on a page record of each class laid out as
     * segment.c's: yes exactly at a multiple of the size below the bump, at
     * every offset of the page's slices, with the bump at the page's end
     * and after one block. */
    for (unsigned c = 0; c < HAK_NCLASSES; c++) {
        uint64_t size = hak_class_size[c];
        uintptr_t v = (uintptr_t)(c + 1) * HAK_SLICE_MAP_SCALE;
        CHECK(w->check[c + 1].mul64 == UINT64_MAX / size + 1, "class %u: mul64 %llu", c,
              (unsigned long long)w->check[c + 1].mul64);
        size_t span = (size_t)class_slices(c) * HAK_SLICE_SIZE;
        hak_page_t pg;
        memset(&pg, 0, sizeof pg);
        pg.start = (uint8_t *)(uintptr_t)(5 * HAK_SLICE_SIZE); /* any slice-aligned start */
        size_t cap = span / size;
        for (int b = 0; b < 2; b++) {
            size_t carved = b ? 1 : cap;
            pg.bump = pg.start + carved * size;
            for (uint64_t off = 0; off < span; off++) {
                bool want = off % size == 0 && off / size < carved;
                CHECK(block_carved_start(pg.start + off, &pg, w, v) == want,
                      "class %u (%llu B): page offset %llu, %zu carved: block_carved_start says %d", c,
                      (unsigned long long)size, (unsigned long long)off, carved, !want);
                checked++;
            }
        }
    }
    CHECK(w->check[0].mul64 == 0 && w->check[HAK_NCLASSES + 1].mul64 == 0, "the sentinels' mul64 must be 0");
    one_slice_pages(&checked);
    mid_made_up(&checked);
    mid_pages(&checked);
#endif
    printf("test_block_check: OK: %u classes, %u with the fast test; %llu offsets checked against division\n",
           HAK_NCLASSES, served, checked);
    return 0;
}
