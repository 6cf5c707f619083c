/* test_stash_resident - the page stash's residency test (large/page_stash.c,
 * run_warm; os/os.c, os_resident) counts resident memory in the kernel's
 * pages, whatever page size HAKMEM works with.
 *
 * mincore reports one byte per page of the kernel's size. The 64 KiB-page
 * test build (HAKMEM_TEST_PAGE_SIZE=65536) on a 4 KiB-page kernel counted
 * the first k bytes of the vector as k pages of 64 KiB: a stashed run was
 * judged by its first k x 4 KiB only. A run written whole but for its first
 * 32 KiB was then "not resident" and a block cut fresh slices instead; one
 * written only in its first 32 KiB would have counted as resident.
 *
 * Preloaded (standard library, and the 64 KiB-page one). A block of a run of
 * 14-15 slices, every OS page written but those of its first 32 KiB, is
 * freed (stashed); a block of 5 slices' bytes (a run of 5-7), with no
 * stashed run of its size, must take the start of that run (same address:
 * all but 8 of its 80-112 pages of 4 KiB are resident).
 *
 * usage: test_stash_resident (HAKMEM_BACKGROUND_PURGE=0)
 */
#include "hak_test.h"

#include <sys/mman.h>

#define PAGE 4096
#define SLICE (64 * 1024) /* HAK_SLICE_SIZE */
#define COLD (32 * 1024)  /* unwritten at the block's start */

/* A block in a run of n slices, or n - 1: room left for the secure build's
 * head and guard page, which is 64 KiB in the 64 KiB-page build. */
static size_t slices(unsigned n) { return (size_t)n * SLICE - 2 * SLICE; }

static size_t resident_pages(const unsigned char *p, size_t size)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)(PAGE - 1), e = ((uintptr_t)p + size + PAGE - 1) & ~(uintptr_t)(PAGE - 1);
    static unsigned char v[(16 * SLICE) / PAGE + 2];
    size_t n = (e - a) / PAGE, r = 0;
    CHECK(n <= sizeof v, "range of %zu pages", n);
    CHECK(mincore((void *)a, e - a, v) == 0, "mincore: %s", strerror(errno));
    for (size_t i = 0; i < n; i++) r += v[i] & 1;
    return r;
}

int main(void)
{
    hak_test_require_hakmem("test_stash_resident");
    size_t s15 = slices(15), s5 = slices(7); /* 13 and 5 slices: above 256 KiB, a large block */
    unsigned char *a = malloc(s15);
    CHECK(a != NULL, "malloc(%zu)", s15);
    for (size_t i = COLD; i < s15; i += PAGE) a[i] = 1;
    a[s15 - 1] = 1;
    /* Huge pages make every page of a run resident: nothing to tell. */
    unsigned char *probe = malloc(s15);
    CHECK(probe != NULL, "malloc(%zu)", s15);
    if (resident_pages(probe + SLICE, PAGE)) {
        printf("test_stash_resident: SKIP (the runs are backed by huge pages)\n");
        return 0;
    }
    uintptr_t at = (uintptr_t)a;
    free(a);
    unsigned char *b = malloc(s5);
    CHECK(b != NULL, "malloc(%zu)", s5);
    CHECK((uintptr_t)b == at, "a 5-slice block at %p, not at the start of the stashed 13-slice block's run at %#lx (written "
          "but for its first %d KiB): its residency was misjudged", (void *)b, (unsigned long)at, COLD / 1024);
    free(b);
    free(probe);
    printf("test_stash_resident: OK: a stashed run written but for its first %d KiB counted as resident\n", COLD / 1024);
    return 0;
}
