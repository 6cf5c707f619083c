/* test_errno - posix_memalign and free leave errno as they found it.
 *
 * POSIX: posix_memalign reports through its return value and does not set
 * errno; glibc 2.33 and later guarantee that free preserves errno.  Checked
 * for successful posix_memalign calls of every kind of block (small, mid,
 * large, huge; alignments 8 B .. 1 MiB) and for free of each.  Its failures
 * (EINVAL, ENOMEM) also keep errno on HAKMEM, as its README says (glibc's
 * ENOMEM path sets errno, so that part is not checked when run plain).
 */
#include "hak_test.h"

static unsigned long g_checks;
#define E(expr, what)                                                                              \
    do {                                                                                          \
        errno = 4321;                                                                             \
        expr;                                                                                     \
        g_checks++;                                                                               \
        CHECK(errno == 4321, "%s changed errno to %d (%s)", what, errno, strerror(errno));         \
    } while (0)

int main(void)
{
    hak_test_require_hakmem("test_errno");
    static const size_t aligns[] = { 8, 16, 64, 4096, 65536, 1 << 20 };
    static const size_t sizes[] = { 0, 1, 100, 1024, 30000, 100000, 1 << 20, 5 << 20 };
    for (size_t a = 0; a < sizeof aligns / sizeof *aligns; a++)
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            void *p = NULL;
            int r = -1;
            E(r = posix_memalign(&p, aligns[a], sizes[s]), "a successful posix_memalign");
            CHECK(r == 0 && p && ht_aligned(p, aligns[a]), "posix_memalign(%zu, %zu) = %d", aligns[a], sizes[s], r);
            if (sizes[s])
                memset(p, 1, sizes[s]);
            E(free(p), "free of a posix_memalign block");
        }
    for (size_t n = 1; n < (64 << 20); n = n * 3 + 1) {
        void *p = malloc(n);
        CHECK(p != NULL, "malloc(%zu) failed", n);
        E(free(p), "free");
    }
    E(free(NULL), "free(NULL)");
    void *p = (void *)1;
    int r = 0;
    E(r = posix_memalign(&p, 3, 100), "posix_memalign with alignment 3 (EINVAL)");
    CHECK(r == EINVAL && p == (void *)1, "posix_memalign(3, 100) = %d", r);
    E(r = posix_memalign(&p, 0, 100), "posix_memalign with alignment 0 (EINVAL)");
    CHECK(r == EINVAL, "posix_memalign(0, 100) = %d", r);
    if (hak_test_owns) {
        E(r = posix_memalign(&p, 64, ht_hide(SIZE_MAX - 100)), "posix_memalign of SIZE_MAX - 100 (ENOMEM)");
        CHECK(r == ENOMEM && p == (void *)1, "posix_memalign(64, SIZE_MAX - 100) = %d", r);
        E(r = posix_memalign(&p, 4096, ht_hide((size_t)1 << 62)), "posix_memalign of 2^62 (ENOMEM)");
        CHECK(r == ENOMEM, "posix_memalign(4096, 2^62) = %d", r);
    }
    printf("test_errno: OK: %lu calls of posix_memalign (successes, EINVAL%s) and free left errno alone%s\n",
           g_checks, hak_test_owns ? ", ENOMEM" : "", hak_test_owns ? "" : " [plain]");
    return 0;
}
