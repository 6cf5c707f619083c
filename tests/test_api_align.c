/* test_api_align.c — part of test_api (see test_api.c): posix_memalign,
 * aligned_alloc, memalign/valloc/pvalloc, an alignment sweep and alignments
 * that cannot be met, against glibc's rules. */
#include "test_api.h"

void test_posix_memalign(void)
{
    void *p = (void *)0x1;
    static const size_t inval[] = { 0, 1, 2, 3, 4, 24, 48, sizeof(void *) / 2, 12, 4097, 3 * 4096,
                                    (size_t)1 << 63 | 8, SIZE_MAX };
    for (size_t i = 0; i < sizeof inval / sizeof inval[0]; i++) {
        int r = T_POSIX_MEMALIGN(&p, ht_hide(inval[i]), 100);
        C(r == EINVAL, "posix_memalign(alignment %zu) returned %d, expected EINVAL", inval[i], r);
    }
    static const size_t huge[] = { SIZE_MAX, (size_t)PTRDIFF_MAX + 1, SIZE_MAX - 4096, SIZE_MAX - 2 * MiB,
                                   (size_t)1 << 62 };
    static const size_t halign[] = { 8, 16, 64, 4096, MiB, 4 * MiB };
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++)
        for (size_t j = 0; j < sizeof halign / sizeof halign[0]; j++) {
            int r = T_POSIX_MEMALIGN(&p, halign[j], ht_hide(huge[i]));
            C(r == ENOMEM, "posix_memalign(alignment %zu, size %zu) returned %d, expected ENOMEM",
              halign[j], huge[i], r);
        }
    static const size_t sizes[] = { 0, 1, 15, 16, 17, 100, 4095, 4096, 65536, MiB, 3 * MiB };
    for (size_t a = sizeof(void *); a <= 4 * MiB; a *= 2)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            p = NULL;
            int r = T_POSIX_MEMALIGN(&p, a, ht_hide(sizes[i]));
            C(r == 0, "posix_memalign(alignment %zu, size %zu) returned %d", a, sizes[i], r);
            char what[80];
            snprintf(what, sizeof what, "posix_memalign[align %zu]", a);
            check_block(what, p, sizes[i], a);
            fill_check(what, p, sizes[i], a + i);
            T_FREE(p);
        }
    /* many at once, so that they are not all the same recycled block */
    enum { N = 64 };
    void *v[N];
    for (size_t a = 8; a <= 64 * KiB; a *= 4) {
        for (int i = 0; i < N; i++) {
            int r = T_POSIX_MEMALIGN(&v[i], a, (size_t)(i * 37 + 1));
            C(r == 0, "posix_memalign(%zu, %d) returned %d", a, i * 37 + 1, r);
            check_block("posix_memalign (batch)", v[i], (size_t)(i * 37 + 1), a);
            ht_fill(v[i], (uint64_t)i * 1000 + a, 0, (size_t)(i * 37 + 1));
        }
        for (int i = 0; i < N; i++) {
            C(ht_verify(v[i], (uint64_t)i * 1000 + a, 0, (size_t)(i * 37 + 1)) == (size_t)-1,
              "posix_memalign batch: block %d (align %zu) was overwritten", i, a);
            T_FREE(v[i]);
        }
    }
    /* realloc of an aligned block keeps the contents */
    int r = T_POSIX_MEMALIGN(&p, 4096, 5000);
    C(r == 0, "posix_memalign(4096, 5000) = %d", r);
    ht_fill(p, 4242, 0, 5000);
    p = T_REALLOC(p, 200000);
    check_block("realloc of posix_memalign block", p, 200000, MAX_ALIGN);
    C(ht_verify(p, 4242, 0, 5000) == (size_t)-1, "realloc of an aligned block lost contents");
    T_FREE(p);
    r = T_POSIX_MEMALIGN(&p, MiB, 100);
    C(r == 0, "posix_memalign(1 MiB, 100) = %d", r);
    ht_fill(p, 4343, 0, 100);
    p = T_REALLOC(p, 50);
    C(p && ht_verify(p, 4343, 0, 50) == (size_t)-1, "shrinking a 1 MiB-aligned block lost contents");
    p = T_REALLOC(p, 3 * MiB);
    C(p && ht_verify(p, 4343, 0, 50) == (size_t)-1, "growing a 1 MiB-aligned block lost contents");
    T_FREE(p);
}

void test_aligned_alloc(void)
{
    static const size_t sizes[] = { 0, 1, 15, 16, 17, 100, 4095, 4096, 65536, MiB, 3 * MiB };
    for (size_t a = 1; a <= 4 * MiB; a *= 2)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            void *p = T_ALIGNED_ALLOC(a, ht_hide(sizes[i]));
            char what[80];
            snprintf(what, sizeof what, "aligned_alloc[align %zu]", a);
            check_block(what, p, sizes[i], a);
            fill_check(what, p, sizes[i], a * 3 + i);
            T_FREE(p);
        }
    /* a size that is not a multiple of the alignment is fine (C17) */
    void *p = T_ALIGNED_ALLOC(64, ht_hide(100));
    check_block("aligned_alloc(64, 100)", p, 100, 64);
    T_FREE(p);
    /* glibc 2.36 rounds a non-power-of-two alignment up; glibc >= 2.38 fails
     * with EINVAL.  Accept either, never a misaligned block. */
    errno = 0;
    p = T_ALIGNED_ALLOC(ht_hide(24), 100);
    if (p) {
        check_block("aligned_alloc(24, 100)", p, 100, 32);
        T_FREE(p);
    } else {
        C(errno == EINVAL, "aligned_alloc(24, 100) = NULL with errno %d, expected EINVAL", errno);
    }
}

#ifndef TEST_HAK_API
void test_memalign_valloc(void)
{
    static const size_t sizes[] = { 0, 1, 15, 16, 17, 100, 4095, 4096, 4097, 65536, MiB, 3 * MiB };
    for (size_t a = 1; a <= 4 * MiB; a *= 2)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            void *p = memalign(a, ht_hide(sizes[i]));
            char what[80];
            snprintf(what, sizeof what, "memalign[align %zu]", a);
            check_block(what, p, sizes[i], a);
            fill_check(what, p, sizes[i], a * 5 + i);
            free(p);
        }
    /* glibc rounds a non-power-of-two alignment up to the next power of two */
    void *p = memalign(ht_hide(24), 100);
    check_block("memalign(24, 100) (rounded up to 32)", p, 100, 32);
    free(p);
    p = memalign(ht_hide(3000), 100);
    check_block("memalign(3000, 100) (rounded up to 4096)", p, 100, 4096);
    free(p);
    p = memalign(ht_hide(0), 100);
    check_block("memalign(0, 100)", p, 100, MAX_ALIGN);
    free(p);
    errno = 0;
    p = memalign(64, ht_hide(SIZE_MAX - 100));
    expect_enomem_ptr("memalign(64, SIZE_MAX-100)", p, errno);

    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        p = valloc(ht_hide(n));
        check_block("valloc", p, n, g_page);
        fill_check("valloc", p, n, 77 + i);
        free(p);

        p = pvalloc(ht_hide(n));
        size_t rounded = (n + g_page - 1) & ~(g_page - 1);
        check_block("pvalloc", p, rounded, g_page);
        fill_check("pvalloc", p, rounded, 88 + i);
        free(p);
    }
    errno = 0;
    p = valloc(ht_hide(SIZE_MAX - 10));
    expect_enomem_ptr("valloc(SIZE_MAX-10)", p, errno);
    errno = 0;
    p = pvalloc(ht_hide(SIZE_MAX - 10));
    expect_enomem_ptr("pvalloc(SIZE_MAX-10)", p, errno);
}
#endif

/* Every malloc/calloc/realloc result is aligned to max_align_t and at least
 * the requested size; sizes 0..70000 exhaustively, then larger. */
void test_alignment_sweep(void)
{
    for (size_t n = 0; n <= 70000; n++) {
        unsigned char *p = T_MALLOC(ht_hide(n));
        g_checks++;
        if (!p || !ht_aligned(p, MAX_ALIGN) || T_USABLE(p) < n)
            check_block("malloc (sweep)", p, n, MAX_ALIGN);
        if (g_owns && !g_owns(p))
            check_block("malloc (sweep)", p, n, MAX_ALIGN);
        if (n) {
            p[0] = 1;
            p[n - 1] = 2;
        }
        T_FREE(p);
    }
    /* hold many small blocks at once: different addresses, all aligned, no overlap */
    enum { HOLD = 4097 };
    static unsigned char *held[HOLD];
    for (size_t n = 0; n < HOLD; n++) {
        held[n] = T_MALLOC(n);
        check_block("malloc (held)", held[n], n, MAX_ALIGN);
        ht_fill(held[n], n, 0, n);
    }
    for (size_t n = 0; n < HOLD; n++) {
        size_t off = ht_verify(held[n], n, 0, n);
        C(off == (size_t)-1, "held block of size %zu at %p overwritten at offset %zu", n, held[n], off);
        T_FREE(held[n]);
    }
    for (size_t n = 0; n <= 70000; n += (n < 2048 ? 1 : 61)) {
        unsigned char *p = T_CALLOC(1, ht_hide(n));
        check_block("calloc (sweep)", p, n, MAX_ALIGN);
        size_t nz = ht_first_nonzero(p, n);
        C(nz == (size_t)-1, "calloc(1, %zu) = %p: byte %zu is not zero", n, p, nz);
        memset(p, 0x5a, n);
        T_FREE(p);
    }
    for (size_t n = 70000; n <= 64 * MiB; n = n * 5 / 4 + 4093) {
        unsigned char *p = T_MALLOC(ht_hide(n));
        check_block("malloc (large sweep)", p, n, MAX_ALIGN);
        p[0] = 1;
        p[n / 2] = 2;
        p[n - 1] = 3;
        T_FREE(p);
        p = T_CALLOC(n, 1);
        check_block("calloc (large sweep)", p, n, MAX_ALIGN);
        C(p[0] == 0 && p[n / 2] == 0 && p[n - 1] == 0, "calloc(%zu, 1) not zeroed", n);
        T_FREE(p);
    }
    /* one block realloc'ed through many sizes: aligned, contents kept */
    unsigned char *p = NULL;
    size_t cur = 0;
    for (size_t n = 1; n <= 70000; n += 7) {
        p = T_REALLOC(p, n);
        check_block("realloc (sweep)", p, n, MAX_ALIGN);
        size_t off = ht_verify(p, 31337, 0, cur);
        C(off == (size_t)-1, "realloc grow %zu -> %zu lost contents at offset %zu", cur, n, off);
        ht_fill(p, 31337, cur, n);
        cur = n;
    }
    for (size_t n = cur; n > 0; n = n > 1000 ? n - 997 : n - 1) {
        p = T_REALLOC(p, n);
        check_block("realloc (shrink sweep)", p, n, MAX_ALIGN);
        size_t off = ht_verify(p, 31337, 0, n);
        C(off == (size_t)-1, "realloc shrink to %zu lost contents at offset %zu", n, off);
    }
    T_FREE(p);
}

/* Valid but absurd alignments (2^62, 2^63) cannot be satisfied: glibc says
 * ENOMEM.  Checked last: an edge case should not hide other failures. */
void test_absurd_alignment(void)
{
    for (size_t a = (size_t)1 << 62; a; a <<= 1) {
        void *p = NULL;
        int r = T_POSIX_MEMALIGN(&p, ht_hide(a), 100);
        C(r == ENOMEM, "posix_memalign(alignment %zu, size 100) returned %d, expected ENOMEM (glibc)", a, r);
        errno = 0;
        p = T_ALIGNED_ALLOC(ht_hide(a), 100);
        int e = errno;
        C(p == NULL, "aligned_alloc(%zu, 100) = %p, expected NULL", a, p);
        C(e == ENOMEM, "aligned_alloc(%zu, 100): errno %d, expected ENOMEM (glibc)", a, e);
#ifndef TEST_HAK_API
        errno = 0;
        p = memalign(ht_hide(a), 10);
        e = errno;
        C(p == NULL, "memalign(%zu, 10) = %p, expected NULL", a, p);
        C(e == ENOMEM, "memalign(%zu, 10): errno %d, expected ENOMEM (glibc)", a, e);
#endif
    }
}
