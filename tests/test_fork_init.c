/* test_fork_init - fork while another thread is inside HAKMEM's start-up.
 *
 * Linked with libhakmem.a.  The program defines pthread_key_create, which
 * start-up calls, so the test can act in the middle of start-up: the first
 * call starts a thread that forks, and returns (to the real function) only
 * after that child has finished.  The child holds HAKMEM's start-up state as
 * the parent's initialising thread left it, but that thread does not exist
 * in the child: the child must still be able to initialise, so its threads
 * get their own heaps (before the fix, start-up stayed "running" for ever and
 * every allocation of the child went to the locked shared heap).
 */
#include "hak_test.h"
#include "front/init.h"
#include "heap/heap.h"

#include <pthread.h>
#include <sys/wait.h>

static int (*real_key_create)(pthread_key_t *, void (*)(void *));
static int g_forked;
static int g_child_status = -1;

static void *thread_in_child(void *arg)
{
    (void)arg;
    void *p = malloc(200);
    if (!p || hak_tls.state != HAK_THREAD_LIVE)
        _exit(4);
    free(p);
    return NULL;
}

static void child(void)
{
    alarm(10);
    void *p = malloc(100);
    if (!p)
        _exit(2);
    if (!hak_init_done() || hak_tls.state != HAK_THREAD_LIVE) {
        static const char msg[] = "test_fork_init: child: start-up never finished; allocations go to the "
                                  "shared heap\n";
        if (write(2, msg, sizeof msg - 1) < 0) {}
        _exit(3);
    }
    free(p);
    pthread_t t;
    if (pthread_create(&t, NULL, thread_in_child, NULL) != 0 || pthread_join(t, NULL) != 0)
        _exit(5);
    _exit(0);
}

static void *forker(void *arg)
{
    (void)arg;
    pid_t pid = fork();
    if (pid == 0)
        child();
    int st = -1;
    if (pid > 0)
        while (waitpid(pid, &st, 0) != pid && errno == EINTR) {}
    g_child_status = st;
    return NULL;
}

int pthread_key_create(pthread_key_t *key, void (*dtor)(void *))
{
    if (!real_key_create)
        real_key_create = (int (*)(pthread_key_t *, void (*)(void *)))dlsym(RTLD_NEXT, "pthread_key_create");
    if (!g_forked && !hak_init_done()) {
        /* inside HAKMEM's start-up: another thread forks now */
        g_forked = 1;
        pthread_t t;
        if (pthread_create(&t, NULL, forker, NULL) == 0)
            pthread_join(t, NULL);
    }
    return real_key_create(key, dtor);
}

int main(void)
{
    hak_test_name = "test_fork_init";
    CHECK(g_forked, "start-up did not call pthread_key_create: the test cannot fork inside it");
    CHECK(hak_init_done(), "start-up did not finish in the parent");
    CHECK(WIFEXITED(g_child_status) && WEXITSTATUS(g_child_status) == 0,
          "the child forked during start-up ended with status 0x%x (exit %d)", g_child_status,
          WIFEXITED(g_child_status) ? WEXITSTATUS(g_child_status) : -1);
    void *p = malloc(100);
    CHECK(p != NULL && hak_tls.state == HAK_THREAD_LIVE, "the parent has no thread heap");
    free(p);
    printf("test_fork_init: OK: a child forked while another thread was inside start-up initialised "
           "itself; its threads have their own heaps\n");
    return 0;
}
