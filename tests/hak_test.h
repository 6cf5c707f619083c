/* hak_test.h - small helpers shared by the HAKMEM test programs.
 *
 * Every test is a plain program: it checks, stops at the first failure with a
 * message naming the file, line and what was expected, and ends with a one-line
 * summary on stdout.  Tests that use only the standard malloc API are NOT
 * linked against HAKMEM; ctest runs them with LD_PRELOAD=libhakmem.so, and
 * each one first calls hak_test_require_hakmem() to prove that malloc really
 * is HAKMEM's.  Set HAKMEM_TEST_PLAIN=1 to run the same binary on glibc.
 */
#ifndef HAK_TEST_H
#define HAK_TEST_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <malloc.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#ifndef __cplusplus
#include <pthread.h>
#include <stdatomic.h>
#endif

#ifdef HAK_TEST_HAK_API
/* Built into a program on the hak_ API (tests/sanitize: the TSan build, whose
 * prefix-only libhakmem.a exports no malloc): the test's calls go to HAKMEM
 * under its hak_ names, as prefix.h renames the library's own entry points.
 * Function-like, after every system header, so declarations and `struct
 * mallinfo2` keep their names. */
#include "hakmem.h"
struct mallinfo2 hak_prefixed_mallinfo2(void);
int hak_prefixed_trim(size_t pad);
#define malloc(...)             hak_malloc(__VA_ARGS__)
#define free(...)               hak_free(__VA_ARGS__)
#define calloc(...)             hak_calloc(__VA_ARGS__)
#define realloc(...)            hak_realloc(__VA_ARGS__)
#define reallocarray(...)       hak_reallocarray(__VA_ARGS__)
#define aligned_alloc(...)      hak_aligned_alloc(__VA_ARGS__)
#define posix_memalign(...)     hak_posix_memalign(__VA_ARGS__)
#define malloc_usable_size(...) hak_usable_size(__VA_ARGS__)
#define malloc_trim(...)        hak_prefixed_trim(__VA_ARGS__)
#define mallinfo2(...)          hak_prefixed_mallinfo2(__VA_ARGS__)
#endif

#ifdef __cplusplus
extern "C" {
#endif

static const char *hak_test_name = "test";

#define HT_FAIL(...)                                                             \
    do {                                                                         \
        fflush(stdout);                                                          \
        fprintf(stderr, "%s: FAIL at %s:%d: ", hak_test_name, __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                                            \
        fputc('\n', stderr);                                                     \
        fflush(stderr);                                                          \
        _exit(1);                                                                \
    } while (0)

/* CHECK(cond, "what it means %d", x): fail with the condition text and message. */
#define CHECK(cond, ...)                                                         \
    do {                                                                         \
        if (__builtin_expect(!(cond), 0)) {                                      \
            fflush(stdout);                                                      \
            fprintf(stderr, "%s: FAIL at %s:%d: `%s` is false: ", hak_test_name, \
                    __FILE__, __LINE__, #cond);                                  \
            fprintf(stderr, __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                 \
            fflush(stderr);                                                      \
            _exit(1);                                                            \
        }                                                                        \
    } while (0)

/* Hide a value from the optimizer, so that malloc(SIZE_MAX) and friends are
 * really called and do not trigger -Walloc-size-larger-than. */
static inline size_t ht_hide(size_t x)
{
    __asm__ volatile("" : "+r"(x));
    return x;
}
static inline void *ht_hide_ptr(void *p)
{
    __asm__ volatile("" : "+r"(p)::"memory");
    return p;
}

static inline int ht_aligned(const void *p, size_t a)
{
    return ((uintptr_t)p & (a - 1)) == 0;
}

static inline int ht_plain_mode(void)
{
    const char *s = getenv("HAKMEM_TEST_PLAIN");
    return s && strcmp(s, "1") == 0;
}

typedef int (*ht_owns_fn)(const void *);

/* hak_owns from the preloaded library, or NULL when running plain. */
static ht_owns_fn hak_test_owns = 0;

/* Fail unless malloc in this process is HAKMEM's (unless HAKMEM_TEST_PLAIN=1). */
static inline void hak_test_require_hakmem(const char *name)
{
    hak_test_name = name;
    union { void *p; ht_owns_fn f; } u;
#ifdef HAK_TEST_HAK_API
    u.f = hak_owns; /* linked in, not exported */
#else
    u.p = dlsym(RTLD_DEFAULT, "hak_owns");
#endif
    if (ht_plain_mode()) {
        hak_test_owns = 0;
        fprintf(stderr, "%s: note: HAKMEM_TEST_PLAIN=1, running on the system allocator%s\n",
                name, u.p ? " (hak_owns is present but ignored)" : "");
        return;
    }
    if (!u.p)
        HT_FAIL("hak_owns not found with dlsym: this process does not run on HAKMEM "
                "(run it with LD_PRELOAD=libhakmem.so, or set HAKMEM_TEST_PLAIN=1 to test glibc)");
    hak_test_owns = u.f;
    void *p = malloc(ht_hide(16));
    if (!p)
        HT_FAIL("malloc(16) returned NULL");
    if (!hak_test_owns(p))
        HT_FAIL("malloc(16) = %p is not owned by HAKMEM (hak_owns returned 0): "
                "malloc is not interposed", p);
    free(p);
}

/* Under ThreadSanitizer the process's resident set holds TSan's shadow of
 * every byte touched: checks of HAKMEM's footprint by RSS are skipped there. */
#ifdef __SANITIZE_THREAD__
#define HT_RSS_SHADOWED 1
#else
#define HT_RSS_SHADOWED 0
#endif

/* Resident set size of this process in bytes (from /proc/self/statm). */
static inline size_t ht_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        HT_FAIL("cannot open /proc/self/statm: %s", strerror(errno));
    unsigned long size = 0, res = 0;
    int n = fscanf(f, "%lu %lu", &size, &res);
    fclose(f);
    if (n != 2)
        HT_FAIL("cannot parse /proc/self/statm");
    return (size_t)res * (size_t)sysconf(_SC_PAGESIZE);
}

/* The same, without allocating (no stdio): for programs that must stay
 * idle while they watch their memory (a malloc could reach a slow path of
 * the allocator and purge). */
static inline size_t ht_rss_bytes_raw(void)
{
    char buf[128];
    int fd = open("/proc/self/statm", O_RDONLY);
    if (fd < 0)
        HT_FAIL("cannot open /proc/self/statm: %s", strerror(errno));
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        HT_FAIL("cannot read /proc/self/statm");
    buf[n] = 0;
    char *sp = strchr(buf, ' ');
    if (!sp)
        HT_FAIL("cannot parse /proc/self/statm");
    return (size_t)strtoul(sp + 1, NULL, 10) * (size_t)sysconf(_SC_PAGESIZE);
}

/* Monotonic clock in milliseconds. */
static inline double ht_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* splitmix64: small, fast, deterministic. */
static inline uint64_t ht_mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

typedef struct { uint64_t s; } ht_rng;
static inline uint64_t ht_next(ht_rng *r)
{
    r->s += 0x9E3779B97F4A7C15ull;
    uint64_t x = r->s;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
/* uniform in [0, n) (n > 0) */
static inline uint64_t ht_below(ht_rng *r, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)ht_next(r) * n) >> 64);
}

/* steps random replacements over ws slots: each frees a random slot's block
 * and puts fill's new one there (test_tcache_mid, test_tcache_big: the
 * classes' cache counts walk between a refill and a flush; ht_cold_events). */
static inline void ht_replace_steps(void **slot, unsigned ws, unsigned steps,
                                    void *(*fill)(ht_rng *), ht_rng *r)
{
    for (unsigned s = 0; s < steps; s++) {
        unsigned i = (unsigned)ht_below(r, ws);
        free(slot[i]);
        slot[i] = fill(r);
    }
}

/* malloc(n), its first and last byte written (as bench_sizemix does). */
static inline void *ht_malloc_ends(size_t n)
{
    unsigned char *p = (unsigned char *)malloc(n);
    CHECK(p != NULL, "malloc(%zu)", n);
    p[0] = 1;
    p[n - 1] = 2;
    return p;
}

/* Cold events (refills and flushes of the class caches, counted by the
 * thread's heap at *tick: &hak_tls.heap->tick) in steps replacements over
 * ws slots, which it fills first, after as many steps that let the caps
 * grow (they grow on cold events). */
static inline uint32_t ht_cold_events(void **slot, unsigned ws, unsigned steps, void *(*fill)(ht_rng *), ht_rng *r,
                                      const uint32_t *tick)
{
    for (unsigned i = 0; i < ws; i++) slot[i] = fill(r);
    ht_replace_steps(slot, ws, steps, fill, r);
    uint32_t before = *tick;
    ht_replace_steps(slot, ws, steps, fill, r);
    return *tick - before;
}

/* Pattern: the byte at offset i of a block with key k is byte (i % 8) of the
 * little-endian word  k ^ ((i / 8 + 1) * 0x9E3779B97F4A7C15). */
static inline uint64_t ht_pat_word(uint64_t key, size_t wi)
{
    return key ^ ((uint64_t)(wi + 1) * 0x9E3779B97F4A7C15ull);
}
static inline unsigned char ht_pat_byte(uint64_t key, size_t i)
{
    return (unsigned char)(ht_pat_word(key, i >> 3) >> ((i & 7) * 8));
}

/* Write the pattern of key over [from, to) of block p. */
static inline void ht_fill(void *p, uint64_t key, size_t from, size_t to)
{
    unsigned char *b = (unsigned char *)p;
    size_t i = from;
    while (i < to && (i & 7))
        b[i] = ht_pat_byte(key, i), i++;
    for (; i + 8 <= to; i += 8) {
        uint64_t w = ht_pat_word(key, i >> 3);
        memcpy(b + i, &w, 8);
    }
    for (; i < to; i++)
        b[i] = ht_pat_byte(key, i);
}

/* Return the offset of the first byte in [from, to) that does not hold the
 * pattern of key, or (size_t)-1 if all do. */
static inline size_t ht_verify(const void *p, uint64_t key, size_t from, size_t to)
{
    const unsigned char *b = (const unsigned char *)p;
    size_t i = from;
    while (i < to && (i & 7)) {
        if (b[i] != ht_pat_byte(key, i))
            return i;
        i++;
    }
    for (; i + 8 <= to; i += 8) {
        uint64_t w = ht_pat_word(key, i >> 3), v;
        memcpy(&v, b + i, 8);
        if (v != w) {
            for (size_t j = i; j < i + 8; j++)
                if (b[j] != ht_pat_byte(key, j))
                    return j;
        }
    }
    for (; i < to; i++)
        if (b[i] != ht_pat_byte(key, i))
            return i;
    return (size_t)-1;
}

/* Offset of the first non-zero byte in [0, n), or (size_t)-1. */
static inline size_t ht_first_nonzero(const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, b + i, 8);
        if (v)
            break;
    }
    for (; i < n; i++)
        if (b[i])
            return i;
    return (size_t)-1;
}

/* stderr into an unlinked temporary file between ht_capture_begin() and
 * ht_capture_end(), which returns what was written (up to 64 KiB; the
 * messages bad input gets). Not nested. */
static inline int *ht_cap_fds(void) /* {the file, the saved stderr} */
{
    static int fds[2] = {-1, -1};
    return fds;
}
static inline void ht_capture_begin(void)
{
    int *fd = ht_cap_fds();
    char path[] = "/tmp/hak_test_capture.XXXXXX";
    fd[0] = mkstemp(path);
    CHECK(fd[0] >= 0, "mkstemp: %s", strerror(errno));
    unlink(path);
    fflush(stderr);
    fd[1] = dup(2);
    dup2(fd[0], 2);
}
static inline const char *ht_capture_end(void)
{
    static char buf[1 << 16];
    int *fd = ht_cap_fds();
    fflush(stderr);
    dup2(fd[1], 2);
    close(fd[1]);
    ssize_t n = pread(fd[0], buf, sizeof buf - 1, 0);
    close(fd[0]);
    buf[n > 0 ? n : 0] = 0;
    return buf;
}

/* Keyed blocks of the multi-threaded stress tests: the first 16 bytes hold
 * the block's key and size, and the pattern of the key covers [16, head)
 * and [n - tail, n), each clipped to the block (head and tail: what a test
 * can afford to write and check per block). ht_keyed_stamp writes them;
 * ht_keyed_check_free reads the size back (it must lie in [lo, hi]),
 * checks both ranges and frees the block. */
static inline void ht_keyed_stamp(unsigned char *p, size_t n, uint64_t key, size_t head, size_t tail)
{
    memcpy(p, &key, 8);
    memcpy(p + 8, &n, 8);
    ht_fill(p, key, 16, head < n ? head : n);
    if (tail) ht_fill(p, key, n > tail + 16 ? n - tail : 16, n);
}
static inline void ht_keyed_check_free(unsigned char *p, size_t lo, size_t hi, size_t head, size_t tail)
{
    uint64_t key;
    size_t n;
    memcpy(&key, p, 8);
    memcpy(&n, p + 8, 8);
    CHECK(n >= lo && n <= hi, "block %p has a corrupt header (size %zu)", (void *)p, n);
    size_t bad = ht_verify(p, key, 16, head < n ? head : n);
    if (bad == (size_t)-1 && tail) bad = ht_verify(p, key, n > tail + 16 ? n - tail : 16, n);
    CHECK(bad == (size_t)-1, "block %p of %zu bytes changed at offset %zu", (void *)p, n, bad);
    free(p);
}

/* Children whose end and output a test checks. ht_wait waits for child pid
 * (again after EINTR) and returns its wait status. ht_exited0(st): it exited
 * with status 0; ht_killed_by(st, sig): signal sig ended it; ht_status_text
 * says which ("exit N", "signal N (name)") into buf. */
static inline int ht_wait(pid_t pid)
{
    int st = 0;
    pid_t r;
    while ((r = waitpid(pid, &st, 0)) < 0 && errno == EINTR) {}
    CHECK(r == pid, "waitpid(%d): %s", (int)pid, strerror(errno));
    return st;
}
/* ht_wait_for: the same, but for at most `secs` seconds: a child still
 * there then is taken for hung, killed (SIGKILL) and reaped, and the test
 * fails saying so. A child may hang where its own watchdog cannot reach it:
 * in the fork's child handlers, before it runs a line of the test (alarm,
 * ht_child_rounds); a plain waitpid then waited for good and ctest's timeout
 * ended the test with no word of where. */
static inline int ht_wait_for(pid_t pid, unsigned secs)
{
    int st = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) return st;
        CHECK(r == 0 || errno == EINTR, "waitpid(%d): %s", (int)pid, strerror(errno));
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec >= (time_t)secs) break;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    ht_wait(pid);
    CHECK(0, "child %d still running after %u s: hung (killed)", (int)pid, secs);
    return st;
}
static inline int ht_exited0(int st) { return WIFEXITED(st) && WEXITSTATUS(st) == 0; }
static inline int ht_killed_by(int st, int sig) { return WIFSIGNALED(st) && WTERMSIG(st) == sig; }
static inline const char *ht_status_text(int st, char *buf, size_t cap)
{
    if (WIFEXITED(st)) snprintf(buf, cap, "exit %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st)) snprintf(buf, cap, "signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else snprintf(buf, cap, "status 0x%x", st);
    return buf;
}

/* The fork step of the multi-threaded stress tests. ht_fork_wait forks;
 * the child runs child(), which must end with _exit; the parent waits (at
 * most 60 s: ht_wait_for) and requires exit status 0. ht_child_rounds is
 * such a child's work: rounds
 * of n blocks (n <= 64) made by make, then checked and freed by check,
 * malloc_trim(0) after every round (trim_odd_only: after odd rounds),
 * under alarm(20), so that a child that deadlocks is killed and its
 * parent sees it. */
static inline void ht_child_rounds(uint64_t seed, unsigned char *(*make)(ht_rng *),
                                   void (*check)(unsigned char *), int n, int rounds, int trim_odd_only)
{
    alarm(20);
    ht_rng r = {seed};
    unsigned char *keep[64];
    CHECK(n >= 1 && n <= 64, "ht_child_rounds: n = %d", n);
    for (int round = 0; round < rounds; round++) {
        for (int i = 0; i < n; i++) keep[i] = make(&r);
        for (int i = 0; i < n; i++) check(keep[i]);
        if (!trim_odd_only || (round & 1)) malloc_trim(0);
    }
    _exit(0);
}
static inline void ht_fork_wait(void (*child)(void))
{
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        child();
        _exit(0);
    }
    int st = ht_wait_for(pid, 60);
    char how[64];
    CHECK(ht_exited0(st), "child %d ended with %s", (int)pid, ht_status_text(st, how, sizeof how));
}

/* ht_run_captured(fn, arg, err, err_cap, out, out_cap) runs fn(arg) in a
 * forked child (stdio flushed first; the child _exits 0 if fn returns),
 * its stderr sent to an unlinked temporary file (err NULL: to /dev/null)
 * and, when out is given, its stdout to another; it waits for the child
 * and returns its wait status, with what the child wrote in err and out
 * (the first cap - 1 bytes, NUL-terminated). Files, not pipes: a child
 * that says much never blocks, its parent reads after the end. */
static inline int ht_tmp_fd(void)
{
    char path[] = "/tmp/hak_test_child.XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp: %s", strerror(errno));
    unlink(path);
    return fd;
}
static inline void ht_read_back(int fd, char *buf, size_t cap)
{
    ssize_t n = pread(fd, buf, cap - 1, 0);
    buf[n > 0 ? n : 0] = 0;
    close(fd);
}
static inline int ht_run_captured(void (*fn)(void *), void *arg, char *err, size_t err_cap, char *out,
                                  size_t out_cap)
{
    int fe = err ? ht_tmp_fd() : open("/dev/null", O_WRONLY), fo = out ? ht_tmp_fd() : -1;
    CHECK(fe >= 0, "open /dev/null: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        dup2(fe, 2);
        if (out) dup2(fo, 1);
        fn(arg);
        _exit(0);
    }
    int st = ht_wait(pid);
    if (err) ht_read_back(fe, err, err_cap);
    else close(fe);
    if (out) ht_read_back(fo, out, out_cap);
    return st;
}

/* A child for ht_run_captured that runs a program again: argv[0] is its
 * path, env an assignment ("NAME=value") added to the environment, or NULL.
 * It ends with status 127 when the program cannot run. */
typedef struct {
    const char *env;
    const char *const *argv;
} ht_exec_t;
static inline void ht_exec(void *arg)
{
    const ht_exec_t *e = (const ht_exec_t *)arg;
    if (e->env) putenv((char *)e->env);
    execv(e->argv[0], (char *const *)e->argv);
    _exit(127);
}

#ifndef __cplusplus
/* The mailbox stress of test_page_exchange and test_huge_cache. A worker
 * (ht_swap_worker, arg an ht_swap_arg_t) makes ops blocks with make: one in
 * four it keeps in a ring of its own (ring <= 16 places; the block it
 * replaces there is checked and freed by check_free), the others it swaps
 * into a random place of box (slots places), checking and freeing the
 * block it takes out, most often another thread's. ht_swap_generations
 * starts threads workers and replaces each gens times, with malloc_trim(0)
 * after every fourth replacement and ht_fork_wait(child) after the
 * generations g with g % fork_every == fork_at, and counts both;
 * ht_swap_drain checks and frees what is left in box. */
typedef struct {
    _Atomic(unsigned char *) *box;
    unsigned slots, ring, ops;
    uint64_t seed;
    unsigned char *(*make)(ht_rng *);
    void (*check_free)(unsigned char *);
} ht_swap_t;
typedef struct {
    const ht_swap_t *sw;
    uintptr_t id;
} ht_swap_arg_t;
static inline void *ht_swap_worker(void *arg)
{
    const ht_swap_t *sw = ((const ht_swap_arg_t *)arg)->sw;
    ht_rng r = {sw->seed ^ ht_mix64(((const ht_swap_arg_t *)arg)->id)};
    unsigned char *ring[16] = {0};
    for (unsigned i = 0; i < sw->ops; i++) {
        unsigned char *p = sw->make(&r);
        if (ht_below(&r, 4) == 0) { /* a few stay local: freed by their owner */
            unsigned k = (unsigned)ht_below(&r, sw->ring);
            if (ring[k]) sw->check_free(ring[k]);
            ring[k] = p;
            continue;
        }
        unsigned char *old = atomic_exchange(&sw->box[ht_below(&r, sw->slots)], p);
        if (old) sw->check_free(old);
    }
    for (unsigned k = 0; k < sw->ring; k++)
        if (ring[k]) sw->check_free(ring[k]);
    return NULL;
}
static inline void ht_swap_generations(const ht_swap_t *sw, unsigned threads, unsigned gens, unsigned fork_every,
                                       unsigned fork_at, void (*child)(void), unsigned *trims, unsigned *forks)
{
    CHECK(threads >= 1 && threads <= 64 && sw->ring >= 1 && sw->ring <= 16, "THREADS in 1..64");
    pthread_t t[64];
    ht_swap_arg_t a[64];
    uintptr_t id = 1;
    for (unsigned i = 0; i < threads; i++) {
        a[i] = (ht_swap_arg_t){sw, id++};
        CHECK(pthread_create(&t[i], NULL, ht_swap_worker, &a[i]) == 0, "pthread_create");
    }
    for (unsigned g = 0; g < gens; g++) {
        for (unsigned i = 0; i < threads; i++) {
            CHECK(pthread_join(t[i], NULL) == 0, "pthread_join");
            a[i] = (ht_swap_arg_t){sw, id++};
            CHECK(pthread_create(&t[i], NULL, ht_swap_worker, &a[i]) == 0, "pthread_create");
            if ((i & 3) == 0) { malloc_trim(0); ++*trims; }
        }
        if (g % fork_every == fork_at) {
            ht_fork_wait(child);
            ++*forks;
        }
    }
    for (unsigned i = 0; i < threads; i++) CHECK(pthread_join(t[i], NULL) == 0, "pthread_join");
}
static inline void ht_swap_drain(_Atomic(unsigned char *) *box, unsigned slots, void (*check_free)(unsigned char *))
{
    for (unsigned k = 0; k < slots; k++) {
        unsigned char *p = atomic_exchange(&box[k], NULL);
        if (p) check_free(p);
    }
}
#endif

#ifdef __cplusplus
}
#endif

#endif /* HAK_TEST_H */
