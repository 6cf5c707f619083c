/* asan_host - a program built with -fsanitize=address, run with HAKMEM
 * preloaded or linked (test_asan_*). It must run to the end: HAKMEM starts up
 * inside AddressSanitizer's own start-up (ASan's dlsym allocates) and must
 * not call an intercepted function there.
 *
 * usage: asan_host hakmem|asan   which allocator malloc must be: HAKMEM
 * (preloaded in front of libasan, or linked) or ASan's (libasan first). */
#include "hak_test.h"

#include <pthread.h>
#ifdef ASAN_HOST_LINKED
#include "hakmem.h"
#endif

static void *worker(void *arg)
{
    for (int i = 0; i < 1000; i++) {
        char *p = malloc(ht_hide((size_t)(i % 300) + 1));
        CHECK(p != NULL, "malloc failed");
        memset(p, i, (size_t)(i % 300) + 1);
        free(p);
    }
    return arg;
}

int main(int argc, char **argv)
{
    hak_test_name = "asan_host";
    const char *want = argc > 1 ? argv[1] : "hakmem";
#ifdef ASAN_HOST_LINKED /* libhakmem.a: the reference pulls it in */
    int (*owns)(const void *) = hak_owns;
#else
    int (*owns)(const void *) = (int (*)(const void *))dlsym(RTLD_DEFAULT, "hak_owns");
#endif
    char *p = malloc(ht_hide(64));
    CHECK(p != NULL, "malloc failed");
    strcpy(p, "asan");
    int ours = owns && owns(p);
    if (!strcmp(want, "hakmem")) CHECK(ours, "malloc is not HAKMEM's (hak_owns %s)", owns ? "says no" : "missing");
    else CHECK(!ours, "malloc is HAKMEM's, expected ASan's");
    pthread_t t[2];
    for (int i = 0; i < 2; i++) CHECK(pthread_create(&t[i], NULL, worker, NULL) == 0, "pthread_create");
    for (int i = 0; i < 2; i++) CHECK(pthread_join(t[i], NULL) == 0, "pthread_join");
    free(p);
    printf("asan_host: OK: malloc is %s's, 2 threads\n", ours ? "HAKMEM" : "ASan");
    return 0;
}
