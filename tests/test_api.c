/* test_api - every malloc-family entry point and every rule of its contract.
 *
 * Built twice from this file and test_api_align.c (shared: test_api.h):
 *   test_api      standard names (malloc, free, ...), NOT linked with HAKMEM;
 *                 run with LD_PRELOAD=libhakmem.so (HAKMEM_TEST_PLAIN=1: glibc).
 *   test_hak_api  -DTEST_HAK_API: the hak_ functions of include/hakmem.h,
 *                 linked with libhakmem.a; also checks hak_owns.
 * The rules are glibc's (2.36): a test that passes on glibc must pass on HAKMEM.
 */
#include "test_api.h"

size_t g_page;
unsigned long g_checks;
ht_owns_fn g_owns;

static int g_global_object;

/* ------------------------------------------------------------------------ */

static void test_malloc_zero(void)
{
    enum { N = 200 };
    void *p[N];
    for (int i = 0; i < N; i++) {
        p[i] = T_MALLOC(ht_hide(0));
        check_block("malloc", p[i], 0, MAX_ALIGN);
        for (int j = 0; j < i; j++)
            C(p[i] != p[j], "malloc(0) returned the same pointer %p twice while both are live", p[i]);
    }
    for (int i = 0; i < N; i++)
        T_FREE(p[i]);
    /* malloc(0) blocks may be written up to their usable size */
    void *q = T_MALLOC(ht_hide(0));
    size_t u = T_USABLE(q);
    memset(q, 0xab, u);
    T_FREE(q);
}

static void test_free_null(void)
{
    T_FREE(NULL);
    T_FREE(ht_hide_ptr(NULL));
    g_checks++;
    C(T_USABLE(NULL) == 0, "usable_size(NULL) = %zu, expected 0", T_USABLE(NULL));
}

static void test_huge_fail(void)
{
    static const size_t huge[] = {
        SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 4096, SIZE_MAX - 2 * 1024 * 1024,
        (size_t)PTRDIFF_MAX + 1, (size_t)PTRDIFF_MAX, SIZE_MAX / 2 + 4096,
        (size_t)1 << 62, (size_t)1 << 60,
    };
    char what[128];
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        size_t n = ht_hide(huge[i]);
        errno = 0;
        void *p = T_MALLOC(n);
        int e = errno;
        snprintf(what, sizeof what, "malloc(%zu)", n);
        expect_enomem_ptr(what, p, e);

        errno = 0;
        p = T_CALLOC(1, n);
        e = errno;
        snprintf(what, sizeof what, "calloc(1, %zu)", n);
        expect_enomem_ptr(what, p, e);

        errno = 0;
        p = T_REALLOC(NULL, n);
        e = errno;
        snprintf(what, sizeof what, "realloc(NULL, %zu)", n);
        expect_enomem_ptr(what, p, e);

        errno = 0;
        p = T_ALIGNED_ALLOC(64, n);
        e = errno;
        snprintf(what, sizeof what, "aligned_alloc(64, %zu)", n);
        expect_enomem_ptr(what, p, e);
    }
    /* calloc: the product overflows size_t, or exceeds PTRDIFF_MAX */
    static const size_t pairs[][2] = {
        { SIZE_MAX, 2 }, { 2, SIZE_MAX }, { SIZE_MAX / 2 + 1, 2 }, { (size_t)1 << 32, (size_t)1 << 32 },
        { (size_t)1 << 33, (size_t)1 << 31 }, { 274177, 67280421310721ull }, /* 2^64+1: wraps to 1 */
        { (size_t)PTRDIFF_MAX / 2 + 1, 2 }, { 3, SIZE_MAX / 3 + 1 }, { SIZE_MAX, SIZE_MAX },
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        size_t a = ht_hide(pairs[i][0]), b = ht_hide(pairs[i][1]);
        errno = 0;
        void *p = T_CALLOC(a, b);
        int e = errno;
        snprintf(what, sizeof what, "calloc(%zu, %zu)", a, b);
        expect_enomem_ptr(what, p, e);

        errno = 0;
        p = T_REALLOCARRAY(NULL, a, b);
        e = errno;
        snprintf(what, sizeof what, "reallocarray(NULL, %zu, %zu)", a, b);
        expect_enomem_ptr(what, p, e);
    }
    /* calloc with a zero factor is a zero-size allocation, not an error */
    void *z = T_CALLOC(0, ht_hide(SIZE_MAX));
    check_block("calloc(0, SIZE_MAX)", z, 0, MAX_ALIGN);
    T_FREE(z);
    z = T_CALLOC(ht_hide(SIZE_MAX), 0);
    check_block("calloc(SIZE_MAX, 0)", z, 0, MAX_ALIGN);
    T_FREE(z);

    /* the allocator still works after all those failures */
    void *p = T_MALLOC(ht_hide(100));
    check_block("malloc after failures", p, 100, MAX_ALIGN);
    T_FREE(p);
}

static void test_reallocarray(void)
{
    unsigned char *p = T_REALLOCARRAY(NULL, 10, 10);
    check_block("reallocarray(NULL,10,10)", p, 100, MAX_ALIGN);
    ht_fill(p, 7, 0, 100);
    p = T_REALLOCARRAY(p, 100, 100);
    check_block("reallocarray(p,100,100)", p, 10000, MAX_ALIGN);
    C(ht_verify(p, 7, 0, 100) == (size_t)-1, "reallocarray grow lost contents");
    /* overflowing reallocarray fails with ENOMEM and leaves the block alone */
    static const size_t pairs[][2] = { { SIZE_MAX, 2 }, { (size_t)1 << 33, (size_t)1 << 33 },
                                       { (size_t)PTRDIFF_MAX / 4 + 1, 4 } };
    for (size_t i = 0; i < 3; i++) {
        errno = 0;
        void *q = T_REALLOCARRAY(p, ht_hide(pairs[i][0]), ht_hide(pairs[i][1]));
        int e = errno;
        C(q == NULL, "reallocarray(p, %zu, %zu) = %p, expected NULL", pairs[i][0], pairs[i][1], q);
        C(e == ENOMEM, "reallocarray overflow: errno %d, expected ENOMEM", e);
        C(ht_verify(p, 7, 0, 100) == (size_t)-1, "failed reallocarray damaged the block");
    }
    p = T_REALLOCARRAY(p, 3, 11);
    check_block("reallocarray shrink", p, 33, MAX_ALIGN);
    C(ht_verify(p, 7, 0, 33) == (size_t)-1, "reallocarray shrink lost contents");
    T_FREE(p);
}

static void test_realloc_rules(void)
{
    /* realloc(NULL, n) is malloc(n) */
    static const size_t sizes[] = { 0, 1, 16, 100, 1000, 5000, 40000, 300000, 3 * MiB };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *p = T_REALLOC(NULL, ht_hide(sizes[i]));
        check_block("realloc(NULL, n)", p, sizes[i], MAX_ALIGN);
        fill_check("realloc(NULL, n)", p, sizes[i], i);
        T_FREE(p);
    }
    /* realloc(p, 0): glibc frees p and returns NULL */
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *p = T_MALLOC(ht_hide(sizes[i]));
        check_block("malloc", p, sizes[i], MAX_ALIGN);
        void *q = T_REALLOC(p, ht_hide(0));
        C(q == NULL, "realloc(p [size %zu], 0) = %p; glibc frees p and returns NULL", sizes[i], q);
    }
    /* a failing realloc returns NULL, sets ENOMEM, and leaves the old block
     * intact and usable */
    static const size_t bad[] = { SIZE_MAX / 2, SIZE_MAX, (size_t)PTRDIFF_MAX + 1, SIZE_MAX - 4096,
                                  (size_t)1 << 62 };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i] ? sizes[i] : 1;
        unsigned char *p = T_MALLOC(n);
        check_block("malloc", p, n, MAX_ALIGN);
        ht_fill(p, 99 + i, 0, n);
        for (size_t j = 0; j < sizeof bad / sizeof bad[0]; j++) {
            errno = 0;
            void *q = T_REALLOC(p, ht_hide(bad[j]));
            int e = errno;
            C(q == NULL, "realloc(p [size %zu], %zu) = %p, expected NULL", n, bad[j], q);
            C(e == ENOMEM, "realloc(p [size %zu], %zu): errno %d, expected ENOMEM", n, bad[j], e);
            size_t off = ht_verify(p, 99 + i, 0, n);
            C(off == (size_t)-1, "failed realloc(p [size %zu], %zu) changed the old block at offset %zu",
              n, bad[j], off);
            C(T_USABLE(p) >= n, "failed realloc: usable size of old block is now %zu < %zu", T_USABLE(p), n);
        }
        /* still usable: grow it for real */
        p = T_REALLOC(p, n * 2 + 10);
        check_block("realloc after failed realloc", p, n * 2 + 10, MAX_ALIGN);
        C(ht_verify(p, 99 + i, 0, n) == (size_t)-1, "realloc after failed realloc lost contents");
        T_FREE(p);
    }
}

/* usable_size: the whole usable area can be written without touching any
 * other block. */
static void test_usable_size(void)
{
    enum { K = 8 };
    void *b[K];
    size_t u[K];
    for (size_t n = 0; n <= 600 * KiB; n += (n < 1100 ? 1 : n < 70000 ? 509 : 16411)) {
        for (int k = 0; k < K; k++) {
            b[k] = T_MALLOC(ht_hide(n));
            check_block("malloc (usable)", b[k], n, MAX_ALIGN);
            u[k] = T_USABLE(b[k]);
            ht_fill(b[k], n * K + k, 0, u[k]);
        }
        for (int k = 0; k < K; k++) {
            size_t off = ht_verify(b[k], n * K + k, 0, u[k]);
            C(off == (size_t)-1, "malloc(%zu): usable size %zu, but writing the usable area of a "
              "neighbouring block overwrote offset %zu of this one", n, u[k], off);
            C(T_USABLE(b[k]) == u[k], "usable size of %p changed from %zu to %zu", b[k], u[k], T_USABLE(b[k]));
            T_FREE(b[k]);
        }
    }
    static const size_t big[] = { MiB, MiB + 1, 5 * MiB + 3, 17 * MiB };
    for (size_t i = 0; i < 4; i++) {
        void *p = T_MALLOC(big[i]);
        check_block("malloc (usable, big)", p, big[i], MAX_ALIGN);
        size_t us = T_USABLE(p);
        fill_check("big block usable area", p, us, i);
        T_FREE(p);
    }
}

/* calloc returns zeroed memory, including when it reuses a dirty block. */
static void test_calloc_dirty(void)
{
    static const size_t sizes[] = { 1, 16, 24, 100, 1000, 1024, 5000, 30000, 70000, 200 * KiB,
                                    MiB, 3 * MiB + 5, 9 * MiB };
    enum { N = 16 };
    void *b[N];
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        for (int round = 0; round < 3; round++) {
            /* one block: malloc, dirty, free, calloc the same size */
            void *p = T_MALLOC(n);
            check_block("malloc", p, n, MAX_ALIGN);
            memset(p, 0xff, T_USABLE(p));
            T_FREE(p);
            unsigned char *q = round == 1 ? T_CALLOC(n, 1) : T_CALLOC(1, n);
            check_block("calloc after dirty free", q, n, MAX_ALIGN);
            size_t nz = ht_first_nonzero(q, n);
            C(nz == (size_t)-1, "calloc(%zu) reusing a dirty block: byte %zu is 0x%02x, not zero",
              n, nz, nz == (size_t)-1 ? 0 : q[nz]);
            memset(q, 0xee, n);
            T_FREE(q);
            if (n > MiB)
                continue;
            /* many blocks */
            for (int k = 0; k < N; k++) {
                b[k] = T_MALLOC(n);
                check_block("malloc", b[k], n, MAX_ALIGN);
                memset(b[k], 0xff, T_USABLE(b[k]));
            }
            for (int k = 0; k < N; k++)
                T_FREE(b[k]);
            for (int k = 0; k < N; k++) {
                b[k] = T_CALLOC(1, n);
                check_block("calloc (batch)", b[k], n, MAX_ALIGN);
                nz = ht_first_nonzero(b[k], n);
                C(nz == (size_t)-1, "calloc(1, %zu) batch block %d: byte %zu is not zero", n, k, nz);
            }
            for (int k = 0; k < N; k++) {
                memset(b[k], 0xff, n);
                T_FREE(b[k]);
            }
        }
    }
    /* calloc(count, size) with count*size not overflowing */
    unsigned char *p = T_CALLOC(1000, 1000);
    check_block("calloc(1000, 1000)", p, 1000000, MAX_ALIGN);
    C(ht_first_nonzero(p, 1000000) == (size_t)-1, "calloc(1000, 1000) not zeroed");
    T_FREE(p);
}

/* realloc keeps the contents across small -> mid -> large -> huge -> small. */
static void test_realloc_chain(void)
{
    static const size_t chain[] = { 24, 100, 1000, 5000, 30000, 70000, 300 * KiB, 2 * MiB, 20 * MiB,
                                    5 * MiB, 100000, 9000, 700, 40, 8, 1, 33 * MiB, 17, 0x10000 };
    for (int pass = 0; pass < 2; pass++) {
        size_t cur = chain[0];
        unsigned char *p = T_MALLOC(cur);
        check_block("malloc", p, cur, MAX_ALIGN);
        ht_fill(p, 555 + pass, 0, cur);
        for (size_t i = 1; i < sizeof chain / sizeof chain[0]; i++) {
            size_t n = chain[i];
            /* an unrelated allocation in between, so that growth in place is not always possible */
            void *other = pass ? T_MALLOC(n / 2 + 1) : NULL;
            p = T_REALLOC(p, n);
            check_block("realloc (chain)", p, n, MAX_ALIGN);
            size_t keep = cur < n ? cur : n;
            size_t off = ht_verify(p, 555 + pass, 0, keep);
            C(off == (size_t)-1, "realloc %zu -> %zu lost contents at offset %zu", cur, n, off);
            if (n > cur)
                ht_fill(p, 555 + pass, cur, n);
            cur = n;
            T_FREE(other);
        }
        T_FREE(p);
    }
    /* grow one byte at a time over class boundaries */
    unsigned char *p = NULL;
    for (size_t n = 1; n <= 5000; n++) {
        p = T_REALLOC(p, n);
        C(p != NULL, "realloc grow to %zu returned NULL", n);
        p[n - 1] = (unsigned char)(n * 7);
        if (n % 500 == 0)
            for (size_t j = 0; j < n; j++)
                C(p[j] == (unsigned char)((j + 1) * 7), "byte-wise realloc lost byte %zu at size %zu", j, n);
    }
    T_FREE(p);
}

static void test_trim_stats(void)
{
    /* allocate and free a lot, then trim */
    enum { N = 2000 };
    static void *v[N];
    for (int i = 0; i < N; i++) {
        v[i] = T_MALLOC((size_t)(i % 97) * 41 + (i % 10 == 0 ? 100000 : 0));
        C(v[i] != NULL, "malloc failed");
    }
    for (int i = 0; i < N; i++)
        T_FREE(v[i]);
#ifdef TEST_HAK_API
    int r = hak_trim();
    C(r == 0 || r == 1, "hak_trim() returned %d, expected 0 or 1", r);
    r = hak_trim();
    C(r == 0 || r == 1, "hak_trim() (again) returned %d, expected 0 or 1", r);
    /* hak_stats_print writes to stderr: send it to /dev/null */
    fflush(stderr);
    int saved = dup(2);
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, 2);
    hak_stats_print();
    fflush(stderr);
    if (devnull >= 0) { dup2(saved, 2); close(devnull); }
    close(saved);
    g_checks++;
#else
    int r = malloc_trim(0);
    C(r == 0 || r == 1, "malloc_trim(0) returned %d, expected 0 or 1", r);
    r = malloc_trim(1 << 20);
    C(r == 0 || r == 1, "malloc_trim(1 MiB) returned %d, expected 0 or 1", r);
    fflush(stderr);
    int saved = dup(2);
    FILE *devnull = fopen("/dev/null", "w");
    if (devnull) dup2(fileno(devnull), 2);
    malloc_stats();
    fflush(stderr);
    if (devnull) { dup2(saved, 2); fclose(devnull); }
    close(saved);
    g_checks++;

    /* mallinfo2 after allocations: arena and uordblks are non-zero */
    for (int i = 0; i < N; i++) {
        v[i] = malloc((size_t)(i % 50) * 20 + 16);
        C(v[i] != NULL, "malloc failed");
        memset(v[i], 1, 16);
    }
    struct mallinfo2 mi = mallinfo2();
    C(mi.arena > 0, "mallinfo2().arena is 0 with 2000 live blocks");
    C(mi.uordblks > 0, "mallinfo2().uordblks is 0 with 2000 live blocks");
    C(mi.uordblks >= 16 * (size_t)N || mi.hblkhd >= 16 * (size_t)N,
      "mallinfo2(): uordblks %zu (hblkhd %zu) smaller than the %zu bytes in use", mi.uordblks, mi.hblkhd,
      (size_t)16 * N);
    for (int i = 0; i < N; i++)
        free(v[i]);
#endif
    /* everything still works after trimming */
    for (int i = 0; i < N; i++) {
        size_t n = (size_t)(i % 97) * 41 + (i % 10 == 0 ? 100000 : 0);
        v[i] = T_MALLOC(n);
        check_block("malloc after trim", v[i], n, MAX_ALIGN);
        ht_fill(v[i], i, 0, n);
    }
    for (int i = 0; i < N; i++) {
        size_t n = (size_t)(i % 97) * 41 + (i % 10 == 0 ? 100000 : 0);
        C(ht_verify(v[i], i, 0, n) == (size_t)-1, "block allocated after trim was overwritten");
        T_FREE(v[i]);
    }
}

/* hak_owns: yes for every kind of HAKMEM block, no for memory that is not
 * HAKMEM's.  (Under HAKMEM_TEST_PLAIN=1 there is no hak_owns: skipped.) */
static void test_owns(void)
{
    if (!g_owns)
        return;
    static const size_t sizes[] = { 0, 1, 16, 1024, 1025, 32768, 70000, 300000, 3 * MiB, 40 * MiB };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *p = T_MALLOC(sizes[i]);
        C(p && g_owns(p), "hak_owns(malloc(%zu)) = 0", sizes[i]);
        T_FREE(p);
        p = NULL;
        C(T_POSIX_MEMALIGN(&p, MiB, sizes[i]) == 0 && g_owns(p), "hak_owns(posix_memalign(1MiB, %zu)) = 0", sizes[i]);
        T_FREE(p);
    }
    int local = 0;
    C(!g_owns(NULL), "hak_owns(NULL) != 0");
    C(!g_owns(&local), "hak_owns(stack address) != 0");
    C(!g_owns(&g_global_object), "hak_owns(address of a global) != 0");
    C(!g_owns((void *)&test_owns), "hak_owns(address of a function) != 0");
    void *libc = __libc_malloc(100);
    C(libc != NULL, "__libc_malloc failed");
    C(!g_owns(libc), "hak_owns(block from glibc's __libc_malloc) != 0");
    __libc_free(libc);
    void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    C(m != MAP_FAILED, "mmap failed");
    C(!g_owns(m), "hak_owns(a page from mmap) != 0");
    munmap(m, 4096);
}

int main(void)
{
#ifdef TEST_HAK_API
    hak_test_name = T_NAME;
    g_owns = hak_owns;
#else
    hak_test_require_hakmem(T_NAME);
    g_owns = hak_test_owns;
#endif
    g_page = (size_t)sysconf(_SC_PAGESIZE);

    test_malloc_zero();
    test_free_null();
    test_huge_fail();
    test_reallocarray();
    test_realloc_rules();
    test_posix_memalign();
    test_aligned_alloc();
#ifndef TEST_HAK_API
    test_memalign_valloc();
#endif
    test_alignment_sweep();
    test_usable_size();
    test_calloc_dirty();
    test_realloc_chain();
    test_trim_stats();
    test_owns();
    test_absurd_alignment();

    printf("%s: OK: %lu checks: malloc(0), free(NULL), huge/overflowing requests -> ENOMEM, "
           "reallocarray, realloc rules, posix_memalign/aligned_alloc%s 8 B..4 MiB, "
           "alignment sweep 0..70000+large, usable size, calloc zeroing, realloc chain, trim/stats%s%s\n",
           T_NAME, g_checks,
#ifdef TEST_HAK_API
           "", "",
#else
           "/memalign/valloc/pvalloc", "/mallinfo2",
#endif
           g_owns ? ", hak_owns" : " (plain: hak_owns not checked)");
    return 0;
}
