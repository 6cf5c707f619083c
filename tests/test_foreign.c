/* test_foreign - pointers HAKMEM did not hand out.
 *
 * (a) In process: blocks from glibc's own allocator (__libc_malloc,
 *     __libc_calloc, __libc_memalign, small and mmap-sized) given to free,
 *     realloc (grow, shrink, 0) and malloc_usable_size behave as on glibc: no
 *     crash, contents kept, usable size >= requested; hak_owns says no; also
 *     freed from another thread, and interleaved with HAKMEM blocks.
 * (b) Pointers no allocator handed out (a page from mmap with a zeroed word
 *     before it, a page from mmap after a PROT_NONE page, a static array) given
 *     to free, realloc and malloc_usable_size, and a double free of a glibc
 *     block.  What glibc does there (abort, crash, or a result) is the
 *     reference: each case runs in a child process twice, once without
 *     LD_PRELOAD (glibc) and once with it (HAKMEM), and the two fates - exit
 *     status or signal, and the printed result - must be the same.
 *
 * usage: test_foreign             run (a), then (b) for every case
 *        test_foreign case NAME   run one case of (b), print its result
 */
#include "hak_test.h"

#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

#define MiB ((size_t)1024 * 1024)

static unsigned long g_checks;
#define C(cond, ...) do { g_checks++; CHECK(cond, __VA_ARGS__); } while (0)

static void not_ours(const void *p, const char *what)
{
    if (hak_test_owns)
        C(!hak_test_owns(p), "hak_owns(%s %p) != 0: HAKMEM claims a glibc block", what, p);
}

/* ---- (a) ---------------------------------------------------------------- */

static void libc_block_roundtrip(void *p, size_t n, const char *what, uint64_t key)
{
    C(p != NULL, "%s(%zu) failed", what, n);
    not_ours(p, what);
    size_t u = malloc_usable_size(p);
    C(u >= n, "malloc_usable_size(%s block of %zu) = %zu", what, n, u);
    C(u < n + 2 * MiB, "malloc_usable_size(%s block of %zu) = %zu: implausible", what, n, u);
    ht_fill(p, key, 0, n);
    /* grow: contents kept */
    size_t n2 = n * 3 + 1000;
    void *q = realloc(p, n2);
    C(q != NULL, "realloc(%s block, %zu) returned NULL", what, n2);
    size_t off = ht_verify(q, key, 0, n);
    C(off == (size_t)-1, "realloc(%s block of %zu, %zu) lost contents at offset %zu", what, n, n2, off);
    C(malloc_usable_size(q) >= n2, "usable size after realloc of a %s block: %zu < %zu", what,
      malloc_usable_size(q), n2);
    ht_fill(q, key, n, n2);
    /* shrink */
    void *s = realloc(q, n / 2 + 1);
    C(s != NULL, "realloc(%s block, shrink) returned NULL", what);
    off = ht_verify(s, key, 0, n / 2 + 1);
    C(off == (size_t)-1, "shrinking realloc of a %s block lost contents at offset %zu", what, off);
    free(s);
}

static void *libc_free_thread(void *arg)
{
    void **v = arg;
    for (int i = 0; i < 100; i++) {
        C(ht_verify(v[i], 900 + i, 0, 50 + i) == (size_t)-1, "glibc block changed before a cross-thread free");
        free(v[i]);
    }
    return NULL;
}

static void part_a(void)
{
    static const size_t sizes[] = { 1, 24, 100, 1000, 5000, 70000, 200000, MiB, 5 * MiB };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        libc_block_roundtrip(__libc_malloc(n), n, "__libc_malloc", 100 + i);
        unsigned char *c = __libc_calloc(1, n);
        C(c && ht_first_nonzero(c, n) == (size_t)-1, "__libc_calloc(1, %zu) failed", n);
        libc_block_roundtrip(c, n, "__libc_calloc", 200 + i);
        void *m = __libc_memalign(64, n);
        C(ht_aligned(m, 64), "__libc_memalign(64) misaligned");
        libc_block_roundtrip(m, n, "__libc_memalign(64)", 300 + i);
        m = __libc_memalign(4096, n);
        libc_block_roundtrip(m, n, "__libc_memalign(4096)", 400 + i);
        /* plain free */
        void *p = __libc_malloc(n);
        C(p != NULL, "__libc_malloc failed");
        memset(p, 0x5a, n);
        free(p);
        /* realloc(p, 0) frees it (glibc) and returns NULL */
        p = __libc_malloc(n);
        C(p != NULL, "__libc_malloc failed");
        void *z = realloc(p, 0);
        C(z == NULL, "realloc(glibc block, 0) = %p, glibc frees and returns NULL", z);
    }
    /* many glibc and HAKMEM blocks interleaved, freed in a mixed order */
    enum { N = 2000 };
    static void *v[N];
    for (int i = 0; i < N; i++) {
        size_t n = (size_t)(i % 300) * 7 + 1;
        v[i] = (i % 3 == 0) ? __libc_malloc(n) : malloc(n);
        C(v[i] != NULL, "allocation failed");
        ht_fill(v[i], (uint64_t)i, 0, n);
    }
    for (int pass = 0; pass < 2; pass++)
        for (int i = pass; i < N; i += 2) {
            size_t n = (size_t)(i % 300) * 7 + 1;
            C(ht_verify(v[i], (uint64_t)i, 0, n) == (size_t)-1, "mixed block %d changed", i);
            C(malloc_usable_size(v[i]) >= n, "mixed block %d: usable size too small", i);
            if (i % 4 == 0) {
                v[i] = realloc(v[i], n + 500);
                C(v[i] && ht_verify(v[i], (uint64_t)i, 0, n) == (size_t)-1, "realloc of mixed block %d", i);
            }
            free(v[i]);
        }
    /* glibc blocks freed by another thread */
    void *w[100];
    for (int i = 0; i < 100; i++) {
        w[i] = __libc_malloc(50 + (size_t)i);
        C(w[i] != NULL, "__libc_malloc failed");
        ht_fill(w[i], 900 + (uint64_t)i, 0, 50 + (size_t)i);
    }
    pthread_t t;
    C(pthread_create(&t, NULL, libc_free_thread, w) == 0, "pthread_create failed");
    C(pthread_join(t, NULL) == 0, "pthread_join failed");
    /* HAKMEM still works */
    void *p = malloc(100);
    C(p != NULL, "malloc after foreign frees failed");
    if (hak_test_owns)
        C(hak_test_owns(p), "malloc after foreign frees is not HAKMEM's");
    free(p);
}

/* ---- (b) ---------------------------------------------------------------- */

static char g_static_area[8192] __attribute__((aligned(4096)));

static void *page_after_zero_word(void)
{
    char *b = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(b != MAP_FAILED, "mmap failed");
    return b + 4096;
}
static void *page_after_guard(void)
{
    char *b = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(b != MAP_FAILED, "mmap failed");
    CHECK(mprotect(b, 4096, PROT_NONE) == 0, "mprotect failed");
    return b + 4096;
}

static const char *const g_cases[] = {
    "free-mmap-zero-header", "realloc-mmap-zero-header", "usable-mmap-zero-header",
    "free-mmap-after-guard", "realloc-mmap-after-guard", "usable-mmap-after-guard",
    "free-static", "realloc-static", "usable-static",
    "double-free-libc",
};

static int run_case(const char *name)
{
    void *p;
    if (strstr(name, "zero-header"))
        p = page_after_zero_word();
    else if (strstr(name, "after-guard"))
        p = page_after_guard();
    else if (strstr(name, "static"))
        p = g_static_area + 4096;
    else if (!strcmp(name, "double-free-libc")) {
        void *q = __libc_malloc(40);
        free(q);
        free(q);
        printf("double free returned\n");
        return 0;
    } else {
        fprintf(stderr, "unknown case %s\n", name);
        return 2;
    }
    if (!strncmp(name, "free-", 5)) {
        free(p);
        printf("free returned\n");
    } else if (!strncmp(name, "realloc-", 8)) {
        void *q = realloc(p, 100);
        printf("realloc returned %s\n", q ? "a block" : "NULL");
    } else if (!strncmp(name, "usable-", 7)) {
        printf("malloc_usable_size = %zu\n", malloc_usable_size(p));
    }
    fflush(stdout);
    return 0;
}

typedef struct {
    int status;
    char out[512];
    char err[512];
} fate_t;

/* keep it on one line */
static void one_line(char *buf)
{
    size_t n = strlen(buf);
    for (size_t i = 0; i < n; i++)
        if (buf[i] == '\n' && i + 1 < n)
            buf[i] = '|';
        else if (buf[i] == '\n')
            buf[i] = 0;
}

typedef struct {
    const char *self, *name, *preload;
} child_t;

static void case_child(void *arg)
{
    const child_t *c = arg;
    struct rlimit rl = { 0, 0 };
    setrlimit(RLIMIT_CORE, &rl); /* no core files from the crashing cases */
    setenv("LIBC_FATAL_STDERR_", "1", 1); /* glibc's abort message to stderr, not the tty */
    if (c->preload) {
        setenv("LD_PRELOAD", c->preload, 1);
        unsetenv("HAKMEM_TEST_PLAIN");
    } else {
        unsetenv("LD_PRELOAD");
        setenv("HAKMEM_TEST_PLAIN", "1", 1);
    }
    execl(c->self, "test_foreign", "case", c->name, (char *)NULL);
    _exit(127);
}

static fate_t run_child(const char *self, const char *name, const char *preload)
{
    fate_t f;
    child_t c = {self, name, preload};
    f.status = ht_run_captured(case_child, &c, f.err, sizeof f.err, f.out, sizeof f.out);
    one_line(f.out);
    one_line(f.err);
    return f;
}

static void describe(const fate_t *f, char *buf, size_t cap)
{
    char how[64];
    snprintf(buf, cap, "%s [%s]", ht_status_text(f->status, how, sizeof how), f->out);
}

static void part_b(void)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0, "readlink /proc/self/exe failed");
    self[n] = 0;
    const char *preload = getenv("LD_PRELOAD");
    if (!ht_plain_mode())
        CHECK(preload && *preload, "LD_PRELOAD is not set: cannot run the preloaded side of the comparison");
    else
        preload = NULL; /* both sides plain */
    for (size_t i = 0; i < sizeof g_cases / sizeof g_cases[0]; i++) {
        fate_t g = run_child(self, g_cases[i], NULL);
        fate_t h = preload ? run_child(self, g_cases[i], preload) : g;
        char dg[700], dh[700];
        describe(&g, dg, sizeof dg);
        describe(&h, dh, sizeof dh);
        if (WIFEXITED(h.status) && WEXITSTATUS(h.status) == 1 && strstr(h.err, "FAIL"))
            HT_FAIL("case %s: the preloaded child failed its own check: %s", g_cases[i], h.err);
        int same = g.status == h.status && strcmp(g.out, h.out) == 0;
        CHECK(same, "case %s: glibc: %s, stderr [%s]; HAKMEM: %s, stderr [%s] - the fates differ "
              "(rerun: LD_PRELOAD=... %s case %s)",
              g_cases[i], dg, g.err, dh, h.err, self, g_cases[i]);
        g_checks++;
        printf("  %-26s %s\n", g_cases[i], dg);
    }
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "case")) {
        hak_test_require_hakmem("test_foreign (case)");
        return run_case(argv[2]);
    }
    hak_test_require_hakmem("test_foreign");
    part_a();
    printf("test_foreign: fates of pointers no allocator handed out, glibc vs HAKMEM:\n");
    part_b();
    printf("test_foreign: OK: %lu checks: glibc blocks (__libc_malloc/calloc/memalign, 1 B..5 MiB) through "
           "free/realloc/malloc_usable_size, mixed with HAKMEM blocks and freed from another thread; %zu "
           "invalid-pointer cases end the same way with and without HAKMEM%s\n",
           g_checks, sizeof g_cases / sizeof g_cases[0], hak_test_owns ? "" : " [plain: both sides glibc]");
    return 0;
}
