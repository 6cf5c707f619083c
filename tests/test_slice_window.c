/* test_slice_window - free()'s lookup through the slice map's window
 * (guard/registry.h) gives what the two-level map gives, for every kind of
 * pointer, inside the window, outside it, and without it.
 *
 * Linked with libhakmem.a (it reads the window and both lookups).
 *  - After the first allocation the window is mapped and holds the block.
 *  - For blocks of 16 B..4 MiB, addresses around and inside them, every
 *    64 KiB slice of the window and 512 MiB around it, foreign pointers
 *    (stack, static, glibc's, mmap'd, NULL, above 47 bits, -1):
 *    slice_map_lookup(p) == slice_map_entry(p).
 *  - The free space of the window's 4 GiB is then filled with PROT_NONE
 *    mappings, so that new segments and huge blocks land outside it; their
 *    blocks must read the same through both lookups, and are freed (half of
 *    them by another thread), then allocated again.
 *  - `test_slice_window noroom` (HT_NOROOM=1 in the environment): the
 *    window's mapping fails (this program's mmap refuses it), so the window
 *    is a header that no slice is in, and the same checks pass through the
 *    two-level map alone.
 *  - Standard build: the window or header free() reads holds the fast
 *    block-start test's copy (check[]), equal to hak_block_check, in both
 *    runs (a zero copy would send every free to the full test: right
 *    answers, so only this finds it).
 */
#include "hak_test.h"
#include "guard/block_check.h"
#include "guard/registry.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);

static size_t window_bytes(void)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    return (sizeof(hak_slice_window_t) + pg - 1) & ~(pg - 1);
}

/* HAKMEM's mmap calls come here (static link): the window's one fails when
 * HT_NOROOM is set. */
void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    static int noroom = -1;
    if (noroom < 0) {
        const char *e = getenv("HT_NOROOM");
        noroom = e && *e == '1';
    }
    if (noroom && len == window_bytes()) {
        errno = ENOMEM;
        return MAP_FAILED;
    }
    return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

static unsigned long g_checks;

static void same(const void *p, const char *what)
{
    const hak_slice_window_t *w;
    uintptr_t i;
    unsigned a = slice_map_lookup(p, &w, &i), b = slice_map_entry(p);
    g_checks++;
    CHECK(a == b, "%s %p: window lookup %u, two-level %u", what, p, a, b);
    CHECK(i == ((uintptr_t)p >> HAK_SLICE_SHIFT) - w->first, "%s %p: window index %llu", what, p,
          (unsigned long long)i);
}

static void same_block(const char *p, size_t n, const char *what)
{
    same(p, what);
    same(p + n - 1, what);
    for (size_t o = 0; o < n; o += (size_t)1 << 16) same(p + o, what);
}

static int in_window(const void *p)
{
    return ((uintptr_t)p >> HAK_SLICE_SHIFT) - hak_slice_window.w->first < HAK_WIN_ENTRIES;
}

static int static_word;

static void foreign(void)
{
    int local = 0;
    same(&local, "stack");
    same(&static_word, "static");
    same(NULL, "NULL");
    same((void *)(uintptr_t)-1, "-1");
    same((void *)((uintptr_t)1 << 47), "2^47");
    same((void *)(((uintptr_t)0xffff << 48) | (uintptr_t)&local), "tagged stack");
    void *g = __libc_malloc(100);
    same(g, "glibc");
    CHECK(slice_map_entry(g) == 0, "glibc's block reads as ours");
    __libc_free(g);
    char *q = (char *)(uintptr_t)syscall(SYS_mmap, NULL, (size_t)1 << 20, PROT_READ | PROT_WRITE,
                                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(q != MAP_FAILED, "mmap");
    same_block(q, (size_t)1 << 20, "mmap'd");
    CHECK(slice_map_entry(q) == 0, "an mmap'd page reads as ours");
    syscall(SYS_munmap, q, (size_t)1 << 20);
}

static void sweep(void)
{
    uintptr_t first = hak_slice_window.w->first;
    if (first >> 62) return; /* no window */
    uintptr_t lo = first > 8192 ? first - 8192 : 0, hi = first + HAK_WIN_ENTRIES + 8192;
    for (uintptr_t s = lo; s < hi; s++) {
        same((void *)(s << HAK_SLICE_SHIFT), "slice");
        same((void *)((s << HAK_SLICE_SHIFT) + 12345), "slice+");
    }
}

#define N 3000
static char *sets[2][N], **blk = sets[0];
static size_t sz[N];

static size_t size_of(unsigned i)
{
    static const size_t sizes[] = {16, 48, 100, 256, 1000, 4096, 9000, 40000, 200000, 1 << 20, 3 << 20, 5 << 20};
    if (i % 97 == 0) return sizes[9 + i / 97 % 3];
    return sizes[i % 9];
}

static unsigned fill(int set)
{
    blk = sets[set];
    unsigned out = 0;
    for (unsigned i = 0; i < N; i++) {
        sz[i] = size_of(i);
        blk[i] = malloc(ht_hide(sz[i]));
        CHECK(blk[i] != NULL, "malloc(%zu)", sz[i]);
        blk[i][0] = (char)i;
        blk[i][sz[i] - 1] = (char)i;
        same_block(blk[i], sz[i], "block");
        CHECK(slice_map_entry(blk[i]) != 0, "block %p of %zu B not ours", (void *)blk[i], sz[i]);
        out += !in_window(blk[i]);
    }
    return out;
}

static void *free_odd(void *arg)
{
    (void)arg;
    for (unsigned i = 1; i < N; i += 2) {
        CHECK(blk[i][0] == (char)i && blk[i][sz[i] - 1] == (char)i, "block %u changed", i);
        free(blk[i]);
    }
    return NULL;
}

static void drain(int set)
{
    blk = sets[set];
    pthread_t t;
    CHECK(pthread_create(&t, NULL, free_odd, NULL) == 0, "pthread_create");
    for (unsigned i = 0; i < N; i += 2) {
        CHECK(blk[i][0] == (char)i && blk[i][sz[i] - 1] == (char)i, "block %u changed", i);
        free(blk[i]);
    }
    pthread_join(t, NULL);
}

/* Fill every hole of [lo, hi) with a PROT_NONE mapping. /proc/self/maps is
 * read with read(2) into a static buffer: no allocation meanwhile. */
static size_t block_holes(uintptr_t lo, uintptr_t hi)
{
    static char buf[1 << 20];
    int fd = open("/proc/self/maps", O_RDONLY);
    CHECK(fd >= 0, "open maps");
    size_t len = 0;
    ssize_t r;
    while ((r = read(fd, buf + len, sizeof buf - 1 - len)) > 0) len += (size_t)r;
    close(fd);
    buf[len] = 0;
    static uintptr_t starts[8192], ends[8192];
    size_t n = 0;
    for (char *line = buf; *line && n < 8192; n++) {
        unsigned long a, b;
        CHECK(sscanf(line, "%lx-%lx", &a, &b) == 2, "maps line");
        starts[n] = a, ends[n] = b;
        char *nl = strchr(line, '\n');
        if (!nl) { n++; break; }
        line = nl + 1;
    }
    size_t blocked = 0;
    uintptr_t at = lo;
    for (size_t i = 0; i <= n && at < hi; i++) {
        uintptr_t next = i < n ? starts[i] : hi;
        if (next > hi) next = hi;
        if (next > at) {
            void *m = (void *)(uintptr_t)syscall(SYS_mmap, at, next - at, PROT_NONE,
                                                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
            if (m == (void *)at) blocked += next - at;
        }
        if (i < n && ends[i] > at) at = ends[i];
    }
    return blocked;
}

int main(int argc, char **argv)
{
    hak_test_name = "test_slice_window";
    int noroom = argc > 1 && strcmp(argv[1], "noroom") == 0;
    CHECK(noroom == (getenv("HT_NOROOM") && getenv("HT_NOROOM")[0] == '1'), "run `noroom` with HT_NOROOM=1");
    void *p = malloc(ht_hide(64));
    CHECK(p != NULL, "malloc");
    const hak_slice_window_t *w = hak_slice_window.w;
    if (noroom) {
        CHECK(w->first >> 62, "the window was mapped although its mmap failed");
        CHECK(!in_window(p), "a block in a window that is not there");
    } else {
        CHECK(!(w->first >> 62), "no window after the first allocation");
        CHECK(in_window(p), "the first block %p is outside the window from slice %#lx", p, (unsigned long)w->first);
    }
#if HAK_WORD_CHECKS
    for (unsigned v = 0; v < HAK_NCLASSES + 2; v++)
        CHECK(w->check[v].mul == hak_block_check[v].mul && w->check[v].bound == hak_block_check[v].fast_bound,
              "bin %u: the %s's check copy (%u, %u) is not the table's (%u, %u)", v, noroom ? "header" : "window",
              w->check[v].mul, w->check[v].bound, hak_block_check[v].mul, hak_block_check[v].fast_bound);
#endif
    same(p, "first block");
    free(p);
    foreign();
    unsigned out = fill(0);
    printf("first fill: %u of %d blocks outside the window\n", out, N);
    sweep();
    drain(0);
    if (!noroom) {
        uintptr_t lo = w->first << HAK_SLICE_SHIFT, hi = (w->first + HAK_WIN_ENTRIES) << HAK_SLICE_SHIFT;
        size_t blocked = block_holes(lo, hi);
        printf("blocked %zu MiB of the window's free space\n", blocked >> 20);
    }
    /* Both sets live at once: the second needs segments the first did not
     * leave free, which only the space outside the window can hold. */
    unsigned outs = 0;
    for (int set = 0; set < 2; set++) {
        out = fill(set);
        outs += out;
        printf("set %d: %u of %d blocks outside the window\n", set, out, N);
        if (noroom) CHECK(out == N, "a block inside a window that is not there");
    }
    CHECK(noroom || outs > 0, "no block outside the window after its space was filled");
    foreign();
    sweep();
    drain(0);
    drain(1);
    printf("test_slice_window%s: OK (%lu lookups compared)\n", noroom ? " noroom" : "", g_checks);
    return 0;
}
