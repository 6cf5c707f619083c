/* test_dlopen - HAKMEM loaded with dlopen, used by threads through its hak_
 * API, unloaded with dlclose while those threads still run.
 *
 * Not preloaded: the program runs on glibc and loads the library given on
 * the command line (RTLD_LOCAL, so malloc stays glibc's).  Four threads
 * allocate and free through the dlsym'd hak_malloc/hak_calloc/hak_realloc/
 * hak_free (blocks also cross threads, so frees are remote), keep some
 * blocks, and wait; main calls dlclose; then the threads exit, which runs
 * HAKMEM's thread-exit key destructor (before the fix the library was
 * unmapped by then and the process crashed).  Then the library is loaded
 * again and used by a new thread.
 *
 * Libraries named after LIB are loaded first, in order, and failing to load
 * them is reported but not an error: ctest passes libtls_eater.so (1 KiB of
 * initial-exec TLS) and then the default build, under GLIBC_TUNABLES=
 * glibc.rtld.optional_static_tls=0, so glibc's reserve of static TLS for
 * dlopen is used up and the default (initial-exec) build cannot be loaded;
 * LIB, the dynamic-TLS build, must load and work all the same.
 *
 * usage: test_dlopen LIB [LIB_LOADED_FIRST...]
 */
#include "hak_test.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>

#define NTHREADS 4
#define NBOX 512

typedef void *(*malloc_fn)(size_t);
typedef void *(*calloc_fn)(size_t, size_t);
typedef void *(*realloc_fn)(void *, size_t);
typedef void (*free_fn)(void *);

static malloc_fn h_malloc;
static calloc_fn h_calloc;
static realloc_fn h_realloc;
static free_fn h_free;
static _Atomic(void *) g_box[NBOX];
static sem_t g_used, g_closed;

static void *user(void *arg)
{
    ht_rng r = { (uint64_t)(uintptr_t)arg };
    void *kept[64];
    for (int i = 0; i < 20000; i++) {
        size_t n = ht_below(&r, 10) == 0 ? 1000 + ht_below(&r, 200000) : 2 + ht_below(&r, 600);
        unsigned char *p = i % 7 ? h_malloc(n) : h_calloc(1, n);
        CHECK(p != NULL, "hak_malloc(%zu) failed", n);
        p[0] = (unsigned char)n;
        p[n - 1] = (unsigned char)i;
        if (i % 5 == 0) {
            p = h_realloc(p, n + 100);
            CHECK(p != NULL && p[0] == (unsigned char)n, "hak_realloc lost the block's contents");
        }
        h_free(atomic_exchange(&g_box[ht_below(&r, NBOX)], p)); /* often another thread's block */
        if (i < 64)
            kept[i] = h_malloc(48);
    }
    for (int i = 0; i < 32; i++)
        h_free(kept[i]);
    sem_post(&g_used);
    sem_wait(&g_closed);
    /* exits holding a heap and 32 blocks: HAKMEM's key destructor runs now */
    return NULL;
}

static void *open_lib(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL, "dlopen(%s) failed: %s", path, dlerror());
    h_malloc = (malloc_fn)dlsym(h, "hak_malloc");
    h_calloc = (calloc_fn)dlsym(h, "hak_calloc");
    h_realloc = (realloc_fn)dlsym(h, "hak_realloc");
    h_free = (free_fn)dlsym(h, "hak_free");
    CHECK(h_malloc && h_calloc && h_realloc && h_free, "dlsym of the hak_ API failed in %s", path);
    return h;
}

int main(int argc, char **argv)
{
    hak_test_name = "test_dlopen";
    CHECK(argc >= 2, "usage: test_dlopen LIB [LIB_LOADED_FIRST...]");
    int refused = 0;
    for (int i = 2; i < argc; i++) {
        void *o = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
        const char *e = o ? NULL : dlerror();
        printf("test_dlopen: note: dlopen(%s) first: %s\n", argv[i], o ? "loaded" : e);
        refused += !o;
    }
    sem_init(&g_used, 0, 0);
    sem_init(&g_closed, 0, 0);
    void *h = open_lib(argv[1]);
    pthread_t t[NTHREADS];
    for (uintptr_t i = 0; i < NTHREADS; i++)
        CHECK(pthread_create(&t[i], NULL, user, (void *)(i + 1)) == 0, "pthread_create failed");
    for (int i = 0; i < NTHREADS; i++)
        sem_wait(&g_used);
    for (int i = 0; i < NBOX; i++)
        h_free(atomic_exchange(&g_box[i], NULL));
    CHECK(dlclose(h) == 0, "dlclose failed: %s", dlerror());
    for (int i = 0; i < NTHREADS; i++)
        sem_post(&g_closed);
    for (int i = 0; i < NTHREADS; i++)
        CHECK(pthread_join(t[i], NULL) == 0, "pthread_join failed");
    /* loaded again, used again */
    h = open_lib(argv[1]);
    pthread_t t2;
    CHECK(pthread_create(&t2, NULL, user, (void *)99) == 0, "pthread_create failed");
    sem_wait(&g_used);
    sem_post(&g_closed);
    CHECK(pthread_join(t2, NULL) == 0, "pthread_join failed");
    for (int i = 0; i < NBOX; i++)
        h_free(atomic_exchange(&g_box[i], NULL));
    CHECK(dlclose(h) == 0, "dlclose failed: %s", dlerror());
    printf("test_dlopen: OK: %s loaded with dlopen, used by %d threads, closed while they ran, their exit "
           "ran its key destructor; loaded and used again (%d of %d libraries loaded before it refused)\n",
           argv[1], NTHREADS, refused, argc - 2);
    return 0;
}
