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
 *   guard-grow  a 3 MiB block grown by realloc to 5, 9 and 17 MiB: its
 *               mapping is resized or moved by mremap (the guard opened
 *               and closed around it: no copy; 3 mremap calls succeed), the
 *               contents stay, and the overflow past it faults: SIGSEGV
 *   guard-shrink a 17 MiB block shrunk by realloc to 5 MiB (the mapping's
 *               tail given back): SIGSEGV past it
 *   guard-meta  a write just after the segment header: SIGSEGV
 *   guard-reuse large blocks of 7 sizes freed (their guards stay behind),
 *               then large and small blocks cut over those slices: every
 *               byte of them writable (exits 0)
 *   guard-again a 100 KB block freed and asked for again: SIGSEGV past it
 *   stamp-copy  user data copied from another block's freed memory (the free
 *               mark included) is not taken for a double free: exits 0
 *   word-after-free  a write over the word before a block (its free mark)
 *               while the block is in the thread's cache; malloc hands the
 *               block out again and its next free must abort ("heap
 *               underflow before block": malloc seals from the mark it
 *               reads, where a recomputed canary hid the write)
 *   heap-large  a first-class heap's large block on a page that was cached
 *               with its guard: all of its usable size is writable
 *   zero-read   a read of a malloc(0) block: "zero-size block"
 *   zero-use    malloc(0), calloc(0, n), realloc(NULL, 0): unique pointers,
 *               usable size 0, owned, freed, grown by realloc; exits 0
 *   zero-double a malloc(0) block freed twice: "double free"
 *   zero-mt     the zero-size slots' lock-free protocol (guard/zero_size.c)
 *               under 4 threads: 120000 blocks live at once (more than
 *               the first region's 65536: a second one is mapped while
 *               the others take slots), then frees and mallocs, many of
 *               them of another thread's blocks (handed over through a
 *               shared mailbox); at the end every live pointer is
 *               distinct, of usable size 0, and freed once
 *   under-large a byte written before a 100 KB block, a 3 MiB one and a
 *               4 KiB-aligned 200 KB one (still aligned): "heap underflow"
 *   wild        a write to a page of no access the program mapped itself:
 *               not HAKMEM's, so a plain SIGSEGV, without a word
 *   raise       raise(SIGSEGV): the signal is not lost (SIGSEGV)
 *   paged       blocks of classes above 8 KiB, whose pages span several
 *               slices (free() checks them against their page record,
 *               free_secure_paged, not on the fast path): in a process of
 *               its own each, a free of
 *               a block inside, 8 bytes into, or right after a block in a
 *               later slice of its page, across a slice boundary or first
 *               in its page, of the place past the page's last block, a
 *               double free, and a byte written right past or before such
 *               a block: all abort
 *   off-by-one  one byte (NUL, '0', 'A' or 0xff) written right past or right
 *               before small blocks of 67 sizes, each in a process of its
 *               own that then frees the block: all 536 must abort (the
 *               bytes such a write hits are kept in 0x80..0xbf; a keyed
 *               byte let 1 write in 256 through)
 * The guard-* cases die of SIGSEGV at the guard, which the fault handler
 * (guard/fault.c) names before it aborts: SIGABRT after "heap overflow past
 * block" ("guard page after segment metadata" for guard-meta), and a plain
 * SIGSEGV with HAKMEM_FAULT_HANDLER=0 (test_secure_hardening_nohandler),
 * as zero-read then does too.
 *
 * usage: test_secure_hardening [PAGE_SIZE]  (the page size the library
 * believes in: 65536 for the simulated 64 KiB-page build) */
#include "hak_test.h"
#include "hak_internal.h"
#include "hakmem.h"

#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>

static size_t g_page;
static int g_no_handler; /* HAKMEM_FAULT_HANDLER=0 */

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

/* mremap calls so far (hak_stats_get of the preloaded library), and
 * failed ones. */
static void mremap_counts(uint64_t *calls, uint64_t *failed)
{
    int (*get)(hak_stats_t *) = (int (*)(hak_stats_t *))dlsym(RTLD_DEFAULT, "hak_stats_get");
    CHECK(get != NULL, "hak_stats_get not found");
    hak_stats_t st = HAK_STATS_INIT;
    CHECK(get(&st) == 0, "hak_stats_get failed");
    *calls = st.os.mremap;
    *failed = st.os.mremap_failed;
}

static void case_guard_grow(void)
{
    uint64_t calls0, failed0, calls1, failed1;
    size_t n = 3u << 20;
    char *p = malloc(ht_hide(n));
    CHECK(p != NULL, "malloc(3 MiB) failed");
    for (size_t i = 0; i < n; i += 4096) p[i] = (char)(i >> 12);
    mremap_counts(&calls0, &failed0);
    for (size_t m = 5u << 20; m <= (17u << 20); m = 2 * m - (1u << 20)) {
        p = realloc(p, ht_hide(m));
        CHECK(p != NULL, "realloc to %zu failed", m);
        for (size_t i = 0; i < n; i += 4096) CHECK(p[i] == (char)(i >> 12), "contents lost at %zu", i);
    }
    mremap_counts(&calls1, &failed1);
    CHECK(calls1 - calls0 - (failed1 - failed0) >= 3,
          "3 reallocs of a huge block: %llu mremap calls, %llu failed (copied, not remapped)",
          (unsigned long long)(calls1 - calls0), (unsigned long long)(failed1 - failed0));
    overflow_linearly(p);
}

static void case_guard_shrink(void)
{
    char *p = malloc(ht_hide(17u << 20));
    CHECK(p != NULL, "malloc(17 MiB) failed");
    char *q = realloc(p, ht_hide(5u << 20));
    CHECK(q == p, "a huge block shrunk to 5 MiB moved");
    overflow_linearly(q);
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

static void case_word_after_free(void)
{
    enum { N = 32 }; /* N + 16 bytes: the 48-byte class */
    free(malloc(ht_hide(N)));    /* the class's cache in use */
    char *p = malloc(ht_hide(N));
    CHECK(p != NULL && malloc_usable_size(p) == N, "malloc(%d) gave %p", N, (void *)p);
    free(p);
    memset(ht_hide_ptr(p - 8), 'A', 8); /* the write over the free mark */
    char *q = malloc(ht_hide(N));
    CHECK(q == p, "the cache handed out %p, not the block freed (%p)", (void *)q, (void *)p);
    free(ht_hide_ptr(q));
}

static void case_zero_read(void)
{
    volatile char *p = malloc(ht_hide(0));
    CHECK(p != NULL, "malloc(0) gave NULL");
    printf("%d\n", p[0]);
}

static void case_zero_use(void)
{
    enum { N = 5000 };
    static char *v[N];
    ht_owns_fn owns = hak_test_owns; /* found by hak_test_require_hakmem */
    CHECK(owns != NULL, "no hak_owns");
    for (int i = 0; i < N; i++) {
        v[i] = i % 3 == 0 ? malloc(ht_hide(0)) : i % 3 == 1 ? calloc(ht_hide(0), 8) : realloc(NULL, ht_hide(0));
        CHECK(v[i] != NULL && ((uintptr_t)v[i] & 15) == 0, "zero-size block %d: %p", i, (void *)v[i]);
        CHECK(malloc_usable_size(v[i]) == 0, "usable size of a zero-size block: %zu", malloc_usable_size(v[i]));
        CHECK(owns(v[i]), "hak_owns(zero-size block) is 0");
    }
    for (int i = 1; i < N; i++) CHECK(v[i] != v[i - 1], "malloc(0) gave %p twice", (void *)v[i]);
    for (int i = 0; i < N; i += 2) free(v[i]);
    for (int i = 1; i < N; i += 2) {
        v[i] = realloc(v[i], ht_hide(24)); /* a real block now */
        CHECK(v[i] != NULL, "realloc of a zero-size block failed");
        memset(v[i], 7, 24);
        free(v[i]);
    }
    void *z = malloc(ht_hide(0));
    CHECK(realloc(z, ht_hide(0)) == NULL, "realloc(p, 0) frees and gives NULL");
}

enum { ZT = 4, ZN = 30000, ZMAIL = 64 };
static void *zv[ZT][ZN];
static void *_Atomic zmail[ZMAIL];

static void *zero_worker(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg, x = 2463534242u * (t + 1);
    for (int i = 0; i < ZN; i++) zv[t][i] = malloc(ht_hide(0));
    for (int k = 0; k < 4 * ZN; k++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        unsigned j = x % ZN;
        void *q = atomic_exchange(&zmail[(x >> 16) % ZMAIL], zv[t][j]);
        free(q); /* often another thread's block; NULL at first */
        zv[t][j] = malloc(ht_hide(0));
    }
    return NULL;
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

static void case_zero_mt(void)
{
    pthread_t th[ZT];
    for (uintptr_t t = 0; t < ZT; t++) CHECK(pthread_create(&th[t], NULL, zero_worker, (void *)t) == 0, "pthread_create");
    for (int t = 0; t < ZT; t++) pthread_join(th[t], NULL);
    static void *all[ZT * ZN + ZMAIL];
    size_t n = 0;
    for (int t = 0; t < ZT; t++)
        for (int i = 0; i < ZN; i++) all[n++] = zv[t][i];
    for (int m = 0; m < ZMAIL; m++)
        if (zmail[m]) all[n++] = zmail[m];
    qsort(all, n, sizeof *all, cmp_ptr);
    for (size_t i = 0; i < n; i++) {
        CHECK(all[i] != NULL && malloc_usable_size(all[i]) == 0, "block %zu: %p", i, all[i]);
        CHECK(i == 0 || all[i] != all[i - 1], "%p handed out twice", all[i]);
    }
    for (size_t i = 0; i < n; i++) free(all[i]); /* a slot freed twice would abort here */
}

static void case_zero_double(void)
{
    void *p = malloc(ht_hide(0));
    free(p);
    free(ht_hide_ptr(p));
}

static void case_under_large(void)
{
    char *a = malloc(ht_hide(100000)), *b = malloc(ht_hide(3u << 20)), *c = NULL;
    CHECK(posix_memalign((void **)&c, 4096, ht_hide(200000)) == 0 && ((uintptr_t)c & 4095) == 0,
          "posix_memalign(4096, 200000): %p", (void *)c);
    free(a);
    free(b);
    ((volatile char *)c)[-1] = 1;
    free(ht_hide_ptr(c));
}

static void case_wild(void)
{
    volatile char *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED, "mmap failed");
    free(malloc(ht_hide(0))); /* a zero-size region exists */
    p[0] = 1;
}

static void case_raise(void) { raise(SIGSEGV); }

typedef struct {
    char *p;         /* paged: the block */
    size_t n, b;     /* the request, the class size */
    int what;        /* paged: the misuse; off-by-one: 1 before the block, 0 past it */
    unsigned char v; /* off-by-one: the byte written */
} misuse_t;

static void off_by_one_child(void *arg)
{
    const misuse_t *m = arg;
    char *p = malloc(ht_hide(m->n));
    memset(p, 1, m->n);
    p[m->what ? -1 : (ptrdiff_t)m->n] = (char)m->v;
    free(ht_hide_ptr(p));
}

static void case_off_by_one(void)
{
    static const unsigned char vals[] = {0, '0', 'A', 0xff};
    int trials = 0, missed = 0;
    for (size_t n = 1; n <= 199; n += 3)
        for (int under = 0; under < 2; under++)
            for (size_t v = 0; v < sizeof vals; v++) {
                misuse_t m = {NULL, n, 0, under, vals[v]};
                /* stderr to /dev/null: 536 reports */
                int st = ht_run_captured(off_by_one_child, &m, NULL, 0, NULL, 0);
                trials++;
                if (!ht_killed_by(st, SIGABRT)) {
                    fprintf(stderr, "not caught: %s of %zu bytes, byte 0x%02x\n", under ? "underflow" : "overflow", n,
                            vals[v]);
                    missed++;
                }
            }
    if (missed) {
        fprintf(stderr, "%d of %d off-by-one writes not caught\n", missed, trials);
        _exit(1);
    }
}

static void paged_child(void *arg)
{
    const misuse_t *m = arg;
    char *p = m->p;
    switch (m->what) {
    case 0: free(ht_hide_ptr(p + 16)); break;    /* interior */
    case 1: free(ht_hide_ptr(p + 8)); break;     /* unaligned */
    case 2: free(ht_hide_ptr(p + m->b)); break;  /* past the page's last block (p is it) */
    case 3: free(ht_hide_ptr(p)); free(ht_hide_ptr(p)); break;
    case 4: p[m->n] = 0; free(ht_hide_ptr(p)); break;
    default: p[-1] = 'A'; free(ht_hide_ptr(p)); break;
    }
}

/* One misuse of block p (request n, class size b) in a child: must abort. */
static int paged_misuse(char *p, size_t n, size_t b, int what)
{
    misuse_t m = {p, n, b, what, 0};
    if (ht_killed_by(ht_run_captured(paged_child, &m, NULL, 0, NULL, 0), SIGABRT)) return 0;
    fprintf(stderr, "not caught: misuse %d of a %zu-byte block %p (class %zu)\n", what, n, (void *)p, b);
    return 1;
}

static void case_paged(void)
{
    static const size_t sizes[] = {9000, 15000, 20000, 32000};
    int tried = 0, missed = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        char *v[48];
        for (int i = 0; i < 48; i++) v[i] = malloc(ht_hide(n));
        int later = 0, across = 0, last = 0, first = 0;
        for (int i = 0; i < 48; i++) {
            char *p = v[i];
            hak_page_t *pg = page_of(p);
            size_t b = pg->bsize;
            CHECK(pg->slice_count >= 2 && b > 8192, "%zu bytes: a page of %u slices, class %zu", n, pg->slice_count, b);
            if (pg->first_slice == 0) continue; /* slice 0: a page of its own kind */
            int is_later = slice_index(p) != pg->first_slice && (uint8_t *)p > pg->start;
            int is_across = slice_index(p) != slice_index(p + b - 1);
            int is_last = (uint8_t *)p + b == pg->end && pg->end < pg->start + (size_t)pg->slice_count * HAK_SLICE_SIZE;
            int is_first = (uint8_t *)p == pg->start; /* its word is in the page's lead */
            if (!(is_later && !later) && !(is_across && !across) && !(is_last && !last) && !(is_first && !first)) continue;
            later |= is_later, across |= is_across, last |= is_last, first |= is_first;
            for (int what = 0; what < 6; what++) {
                if (what == 2 && !is_last) continue;
                tried++;
                missed += paged_misuse(p, n, b, what);
            }
        }
        size_t b = page_of(v[0])->bsize; /* a class that divides a slice has no block across two */
        CHECK(later && (across || HAK_SLICE_SIZE % b == 0), "%zu bytes: no block in a later slice (%d) or across slices (%d)",
              n, later, across);
        for (int i = 0; i < 48; i++) free(v[i]);
    }
    CHECK(tried >= 30, "only %d misuses tried", tried);
    if (missed) {
        fprintf(stderr, "%d of %d misuses not caught\n", missed, tried);
        _exit(1);
    }
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
    {"guard-grow", case_guard_grow, SIGSEGV, NULL},
    {"guard-shrink", case_guard_shrink, SIGSEGV, NULL},
    {"guard-meta", case_guard_meta, SIGSEGV, NULL},
    {"guard-reuse", case_guard_reuse, 0, NULL},
    {"guard-again", case_guard_again, SIGSEGV, NULL},
    {"stamp-copy", case_stamp_copy, 0, NULL},
    {"word-after-free", case_word_after_free, SIGABRT, "heap underflow before block"},
    {"heap-large", case_heap_large, 0, NULL},
    {"zero-read", case_zero_read, SIGABRT, "zero-size block"},
    {"zero-use", case_zero_use, 0, NULL},
    {"zero-double", case_zero_double, SIGABRT, "double free"},
    {"zero-mt", case_zero_mt, 0, NULL},
    {"under-large", case_under_large, SIGABRT, "heap underflow before block"},
    {"wild", case_wild, SIGSEGV, NULL},
    {"raise", case_raise, SIGSEGV, NULL},
    {"off-by-one", case_off_by_one, 0, NULL},
    {"paged", case_paged, 0, NULL},
};

static void hcase_child(void *arg)
{
    alarm(20);
    ((const hcase_t *)arg)->run();
}

static int run_case(const hcase_t *c)
{
    char buf[4096];
    int st = ht_run_captured(hcase_child, (void *)c, buf, sizeof buf, NULL, 0);
    /* A fault in a guard is named by the fault handler, which aborts;
     * without it (and then also a zero-size block's fault) a plain SIGSEGV. */
    int guard = strncmp(c->name, "guard-", 6) == 0 && c->signal == SIGSEGV;
    int plain = g_no_handler && (guard || strcmp(c->name, "zero-read") == 0);
    int want = plain ? SIGSEGV : guard ? SIGABRT : c->signal;
    const char *message = plain ? NULL : !guard ? c->message
                          : strcmp(c->name, "guard-meta") == 0 ? "guard page after segment metadata"
                                                               : "heap overflow past block";
    int ok = want ? ht_killed_by(st, want) : ht_exited0(st);
    if (ok && message && !strstr(buf, message))
        ok = 0;
    if (ok && want == SIGSEGV && strstr(buf, "hakmem"))
        ok = 0; /* a fault that is not HAKMEM's to name, or with the handler off */
    char how[64];
    printf("%-12s %s: %s; stderr: %s", c->name, ok ? "ok" : "FAIL", ht_status_text(st, how, sizeof how),
           *buf ? buf : "(nothing)\n");
    if (buf[0] && buf[strlen(buf) - 1] != '\n')
        putchar('\n');
    return ok;
}

int main(int argc, char **argv)
{
    hak_test_require_hakmem("test_secure_hardening");
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *fh = getenv("HAKMEM_FAULT_HANDLER");
    g_no_handler = fh && strcmp(fh, "0") == 0;
    g_page = argc > 1 ? (size_t)strtoul(argv[1], NULL, 0) : (size_t)sysconf(_SC_PAGESIZE);
    int failed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        failed += !run_case(&cases[i]);
    if (failed)
        HT_FAIL("%d case(s) failed", failed);
    printf("test_secure_hardening: OK\n");
    return 0;
}
