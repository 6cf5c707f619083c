/* vg_errors - bugs memcheck must see while HAKMEM (the valgrind build,
 * libhakmem-valgrind.so) is the program's malloc. Run by test_valgrind.sh.
 *
 * usage: vg_errors clean | leak | uaf | uninit | overflow | double
 *   clean     correct use of every entry point (malloc, calloc, realloc
 *             growing and shrinking, aligned, usable size and its slack,
 *             blocks freed by another thread, large and huge blocks):
 *             memcheck must report nothing
 *   leak      a 4000-byte and a 7000-byte block whose last pointers are
 *             dropped (the 7000-byte one is the first block of a fresh page,
 *             whose record points at it: memcheck must not count that)
 *   uaf       a write and a read after free
 *   uninit    a branch on a byte malloc never initialised
 *   overflow  a write one byte past a 100-byte block
 *   double    the same block freed twice */
#include "hak_test.h"

#include <malloc.h>
#include <pthread.h>

static void *volatile g_sink;

static void *free_in_thread(void *p)
{
    free(p);
    return NULL;
}

static int clean(void)
{
    char *a = malloc(ht_hide(100));
    memset(a, 'a', 100);
    char *b = calloc(10, 30);
    CHECK(b[299] == 0, "calloc not zeroed");
    a = realloc(a, ht_hide(5000));
    CHECK(a[99] == 'a', "realloc lost data");
    memset(a + 100, 'b', 4900);
    a = realloc(a, ht_hide(50));
    CHECK(a[49] == 'a', "realloc lost data");
    size_t u = malloc_usable_size(a);
    CHECK(u >= 50, "usable size %zu", u);
    memset(a, 'c', u); /* the whole usable size is the program's */
    void *al = NULL;
    CHECK(posix_memalign(&al, 4096, 3000) == 0, "posix_memalign");
    memset(al, 1, 3000);
    char *big = malloc(ht_hide(300000)), *huge = malloc(ht_hide(5u << 20));
    big[299999] = huge[(5u << 20) - 1] = 1;
    pthread_t t;
    void *remote = malloc(ht_hide(64));
    memset(remote, 2, 64);
    CHECK(pthread_create(&t, NULL, free_in_thread, remote) == 0, "pthread_create");
    CHECK(pthread_join(t, NULL) == 0, "pthread_join");
    for (int i = 0; i < 2000; i++) { /* churn through the thread cache and its flushes */
        void *v[8];
        for (int j = 0; j < 8; j++) { v[j] = malloc(ht_hide(16 + 16 * (size_t)j)); memset(v[j], j, 16); }
        for (int j = 0; j < 8; j++) free(v[j]);
    }
    free(a); free(b); free(al); free(big); free(huge);
    malloc_trim(0);
    return 0;
}

int main(int argc, char **argv)
{
    hak_test_require_hakmem("vg_errors");
    const char *what = argc > 1 ? argv[1] : "clean";
    if (!strcmp(what, "clean")) return clean();
    /* a first block, so that the block under test is not the first of its
     * page (a page record points at its first block) */
    void *first = malloc(ht_hide(4000));
    if (!strcmp(what, "leak")) {
        char *p = malloc(ht_hide(4000));
        memset(p, 1, 4000);
        g_sink = p;
        p = malloc(ht_hide(7000));
        memset(p, 2, 7000);
        g_sink = p;
        g_sink = NULL;
    } else if (!strcmp(what, "uaf")) {
        char *p = malloc(ht_hide(48));
        memset(p, 1, 48);
        free(p);
        p[8] = 2;
        printf("read after free: %d\n", p[16]);
    } else if (!strcmp(what, "uninit")) {
        char *p = malloc(ht_hide(48));
        if (p[10] == 42) puts("forty-two");
        free(p);
    } else if (!strcmp(what, "overflow")) {
        char *p = malloc(ht_hide(100));
        memset(p, 0, 100);
        p[100] = 1;
        free(p);
    } else if (!strcmp(what, "double")) {
        char *p = malloc(ht_hide(48));
        free(p);
        free(ht_hide_ptr(p));
    } else {
        HT_FAIL("unknown case %s", what);
    }
    free(first);
    return 0;
}
