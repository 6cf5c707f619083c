/* test_api.h — what test_api.c and test_api_align.c share: the names under
 * test (the standard malloc family, or with TEST_HAK_API the hak_ functions
 * of include/hakmem.h), the check counter and the common block checks. */
#ifndef TEST_API_H
#define TEST_API_H

#include "hak_test.h"

#include <malloc.h>
#include <stdalign.h>
#include <fcntl.h>
#include <sys/mman.h>

#ifdef TEST_HAK_API
#include "hakmem.h"
#define T_NAME "test_hak_api"
#define T_MALLOC hak_malloc
#define T_FREE hak_free
#define T_CALLOC hak_calloc
#define T_REALLOC hak_realloc
#define T_REALLOCARRAY hak_reallocarray
#define T_ALIGNED_ALLOC hak_aligned_alloc
#define T_POSIX_MEMALIGN hak_posix_memalign
#define T_USABLE hak_usable_size
#else
#define T_NAME "test_api"
#define T_MALLOC malloc
#define T_FREE free
#define T_CALLOC calloc
#define T_REALLOC realloc
#define T_REALLOCARRAY reallocarray
#define T_ALIGNED_ALLOC aligned_alloc
#define T_POSIX_MEMALIGN posix_memalign
#define T_USABLE malloc_usable_size
#endif

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)
#define MAX_ALIGN alignof(max_align_t)

extern size_t g_page;
extern unsigned long g_checks;
extern ht_owns_fn g_owns; /* NULL when HAKMEM_TEST_PLAIN=1 */

#define C(cond, ...) do { g_checks++; CHECK(cond, __VA_ARGS__); } while (0)

/* Common checks on any successful allocation of n bytes with alignment a. */
static inline void check_block(const char *what, void *p, size_t n, size_t a)
{
    C(p != NULL, "%s(%zu): returned NULL", what, n);
    C(ht_aligned(p, a), "%s(%zu) = %p: not aligned to %zu", what, n, p, a);
    size_t u = T_USABLE(p);
    C(u >= n, "%s(%zu) = %p: usable size %zu < requested", what, n, p, u);
    if (g_owns)
        C(g_owns(p), "%s(%zu) = %p: hak_owns says HAKMEM does not own it", what, n, p);
}

/* Fill [0, n) with a pattern and read it back. */
static inline void fill_check(const char *what, void *p, size_t n, uint64_t key)
{
    ht_fill(p, key, 0, n);
    size_t bad = ht_verify(p, key, 0, n);
    C(bad == (size_t)-1, "%s: block %p size %zu does not keep data at offset %zu", what, p, n, bad);
}

static inline void expect_enomem_ptr(const char *what, void *p, int err)
{
    C(p == NULL, "%s: expected NULL, got %p", what, p);
    C(err == ENOMEM, "%s: expected errno ENOMEM, got %d (%s)", what, err, strerror(err));
}

/* test_api_align.c: the aligned-allocation entry points. */
void test_posix_memalign(void);
void test_aligned_alloc(void);
#ifndef TEST_HAK_API
void test_memalign_valloc(void);
#endif
void test_alignment_sweep(void);
void test_absurd_alignment(void);

#endif
