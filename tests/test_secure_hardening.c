/* test_secure_hardening - the secure build's hardening (README "Bug
 * detection"), run with libhakmem-secure.so preloaded. Each case runs in a
 * child process and the parent checks how it ended:
 *
 *   list        free blocks that went back to their pages get their first
 *               word overwritten (a write after free); the next refill
 *               reads those links: the child must die of SIGABRT after
 *               "corrupted free list", not follow them
 *   order       1000 consecutive mallocs of one size: fewer than 90% of
 *               neighbours ascend (and fewer than 90% descend)
 *   guard-huge  a 3 MiB block written byte by byte past p + malloc_usable_size(p)
 *               (the size asked for; then the canary and the rest of the
 *               block's slack): SIGSEGV at the guard after it
 *   guard-large the same for a 100 KB block (slices of a segment): SIGSEGV
 *   guard-meta  a write just after the segment header: SIGSEGV
 *   guard-reuse large blocks of 7 sizes freed (their guards stay behind),
 *               then large and small blocks cut over those slices: every
 *               byte of them writable (exits 0)
 *   guard-again a 100 KB block freed and asked for again: SIGSEGV past it
 *   stamp-copy  user data copied from another block's freed memory (the free
 *               mark included) is not taken for a double free: exits 0
 *   heap-large  a first-class heap's large block on a page that was cached
 *               with its guard: all of its usable size is writable
 *
 * usage: test_secure_hardening [PAGE_SIZE]  (the page size the library
 * believes in: 65536 for the simulated 64 KiB-page build) */
#include "hak_test.h"
#include "hak_internal.h"

#include <malloc.h>
#include <signal.h>
#include <sys/wait.h>

static size_t g_page;

static void case_list(void)
{
    enum { N = 6000 };
    static void *v[N];
    for (int i = 0; i < N; i++)
        v[i] = malloc(ht_hide(48));
    /* Every 8th block stays, so no page empties (and is retired). */
    for (int i = 0; i < N; i++)
        if (i % 8) free(v[i]);
    /* Most went back to their pages (the thread cache holds a few hundred at
     * most): their first word is a link now. */
    for (int i = 0; i < N; i++)
        if (i % 8) memset(v[i], 0x41, 8);
    for (int i = 0; i < N; i++)
        if (i % 8) v[i] = malloc(ht_hide(48));
    for (int i = 0; i < N; i++)
        memset(v[i], 0, 48);
}

static void case_order(void)
{
    enum { N = 1000 };
    static uintptr_t a[N];
    for (int i = 0; i < N; i++)
        a[i] = (uintptr_t)malloc(ht_hide(208));
    int up = 0, down = 0;
    for (int i = 1; i < N; i++) {
        if (a[i] > a[i - 1]) up++;
        else down++;
    }
    printf("order: %d of %d neighbours ascend, %d descend\n", up, N - 1, down);
    CHECK(up < (N - 1) * 9 / 10 && down < (N - 1) * 9 / 10,
          "allocation order is (nearly) monotonic: %d up, %d down", up, down);
}

/* A linear overflow from the end of p's usable size: it must fault within
 * the block's mapping (2 MiB units at most); returning is a failure. */
static void overflow_linearly(char *p)
{
    size_t u = malloc_usable_size(p);
    memset(p, 1, u);
    for (size_t i = u; i < u + (4u << 20); i++) ((volatile char *)p)[i] = 1;
}

static void case_guard_huge(void)
{
    char *p = malloc(ht_hide(3u << 20));
    CHECK(p != NULL, "malloc(3 MiB) failed");
    overflow_linearly(p);
}

static void case_guard_large(void)
{
    char *p = malloc(ht_hide(100000));
    CHECK(p != NULL, "malloc(100000) failed");
    overflow_linearly(p);
}

static void case_guard_meta(void)
{
    char *p = malloc(ht_hide(64));
    CHECK(p != NULL, "malloc(64) failed");
    char *seg = (char *)((uintptr_t)p & ~(uintptr_t)HAK_SEG_MASK);
    size_t hdr = (sizeof(struct hak_segment) + g_page - 1) & ~(g_page - 1);
    ((volatile char *)seg)[hdr] = 1; /* the first byte after the header's pages */
}

/* A large page freed with its guard, cached, then taken by a first-class
 * heap: the heap's block must not reach into the guard. */
static void case_heap_large(void)
{
    void *(*heap_new)(void) = (void *(*)(void))dlsym(RTLD_DEFAULT, "hak_heap_new");
    void *(*heap_malloc)(void *, size_t) = (void *(*)(void *, size_t))dlsym(RTLD_DEFAULT, "hak_heap_malloc");
    void (*heap_destroy)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "hak_heap_destroy");
    CHECK(heap_new && heap_malloc && heap_destroy, "no hak_heap_* functions");
    void *v[6]; /* more than the thread's page cache keeps: some go to the exchange */
    for (int i = 0; i < 6; i++) v[i] = malloc(ht_hide(100000));
    for (int i = 0; i < 6; i++) free(v[i]);
    void *h = heap_new();
    CHECK(h != NULL, "hak_heap_new failed");
    char *q = heap_malloc(h, ht_hide(100000));
    CHECK(q != NULL, "hak_heap_malloc failed");
    memset(q, 1, malloc_usable_size(q));
    heap_destroy(h);
}

/* Large pages leave their guards behind when freed (segment.c): a block cut
 * again over such slices, large of another size or small, must be wholly
 * writable, and a large block of the same size again ends in a guard. */
static void case_guard_reuse(void)
{
    enum { N = 24 };
    void *v[N];
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < N; i++) {
            v[i] = malloc(ht_hide(40000 + 70000 * (size_t)((i + round) % 7)));
            CHECK(v[i] != NULL, "malloc (large) failed");
            memset(v[i], 1, malloc_usable_size(v[i]));
        }
        for (int i = 0; i < N; i++) free(v[i]);
    }
    enum { M = 40000 };
    static void *s[M];
    for (int i = 0; i < M; i++) {
        s[i] = malloc(ht_hide(200 + (size_t)(i % 5) * 1000));
        CHECK(s[i] != NULL, "malloc (small) failed");
        memset(s[i], 2, malloc_usable_size(s[i]));
    }
    for (int i = 0; i < M; i++) free(s[i]);
}

static void case_guard_again(void)
{
    for (int i = 0; i < 3; i++) free(malloc(ht_hide(100000)));
    char *p = malloc(ht_hide(100000));
    CHECK(p != NULL, "malloc(100000) failed");
    overflow_linearly(p);
}

static void case_stamp_copy(void)
{
    uintptr_t *p1 = malloc(ht_hide(64)), *p2 = malloc(ht_hide(64));
    free(p1);
    uintptr_t mark = ((volatile uintptr_t *)p1)[1]; /* what free left in p1 */
    p2[1] = mark;                                   /* program data, in p2 */
    free(p2);                                       /* an ordinary free */
}

typedef struct {
    const char *name;
    void (*run)(void);
    int signal;          /* 0: must exit 0 */
    const char *message; /* must appear on stderr (or NULL) */
} hcase_t;

static const hcase_t cases[] = {
    {"list", case_list, SIGABRT, "corrupted free list"},
    {"order", case_order, 0, NULL},
    {"guard-huge", case_guard_huge, SIGSEGV, NULL},
    {"guard-large", case_guard_large, SIGSEGV, NULL},
    {"guard-meta", case_guard_meta, SIGSEGV, NULL},
    {"guard-reuse", case_guard_reuse, 0, NULL},
    {"guard-again", case_guard_again, SIGSEGV, NULL},
    {"stamp-copy", case_stamp_copy, 0, NULL},
    {"heap-large", case_heap_large, 0, NULL},
};

static int run_case(const hcase_t *c)
{
    int fd[2];
    CHECK(pipe(fd) == 0, "pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 2);
        alarm(20);
        c->run();
        _exit(0);
    }
    close(fd[1]);
    char buf[4096];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof buf - 1 && (r = read(fd[0], buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = 0;
    close(fd[0]);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid, "waitpid: %s", strerror(errno));
    int ok = c->signal ? WIFSIGNALED(st) && WTERMSIG(st) == c->signal : WIFEXITED(st) && WEXITSTATUS(st) == 0;
    if (ok && c->message && !strstr(buf, c->message))
        ok = 0;
    char how[64];
    if (WIFSIGNALED(st)) snprintf(how, sizeof how, "signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else snprintf(how, sizeof how, "exit %d", WEXITSTATUS(st));
    printf("%-12s %s: %s; stderr: %s", c->name, ok ? "ok" : "FAIL", how, *buf ? buf : "(nothing)\n");
    if (buf[0] && buf[strlen(buf) - 1] != '\n')
        putchar('\n');
    return ok;
}

int main(int argc, char **argv)
{
    hak_test_require_hakmem("test_secure_hardening");
    setvbuf(stdout, NULL, _IOLBF, 0);
    g_page = argc > 1 ? (size_t)strtoul(argv[1], NULL, 0) : (size_t)sysconf(_SC_PAGESIZE);
    int failed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        failed += !run_case(&cases[i]);
    if (failed)
        HT_FAIL("%d case(s) failed", failed);
    printf("test_secure_hardening: OK\n");
    return 0;
}
