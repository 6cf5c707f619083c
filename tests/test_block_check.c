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
 * always no).
 *
 * usage: test_block_check
 */
#include "hak_test.h"
#include "guard/block_check.h"
#include "guard/registry.h"
#include "heap/size_class.h"

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
#endif
    printf("test_block_check: OK: %u classes, %u with the fast test; %llu offsets checked against division\n",
           HAK_NCLASSES, served, checked);
    return 0;
}
