/* bench_heap_destroy - a binary tree of NODES nodes built in a first-class
 * heap and freed at once by destroying the heap, against building it with
 * malloc and freeing every node.
 *
 * usage: bench_heap_destroy NODES [PAIRS]
 *
 * Like every program here it is built against the C library only and the
 * allocator is chosen with LD_PRELOAD; the heap API is looked up at run
 * time: HAKMEM's hak_heap_new/hak_heap_malloc/hak_heap_destroy, or
 * mimalloc's mi_heap_new/mi_heap_malloc/mi_heap_destroy (no header needed,
 * so the program builds without mimalloc.h). With neither (glibc,
 * jemalloc, tcmalloc) the "heap" is malloc and its destroy is a free of
 * every node (api=none).
 *
 * Figures (one result line):
 *   destroy_ms   the heap's destroy (api=none: freeing every node)
 *   free_ms      freeing every node of the same tree built with malloc
 *   build_ms     building the tree in the heap
 *   rss_start_kb, rss_built_kb, rss_destroyed_kb (just after destroy),
 *   rss_later_kb (after 200 ms idle: the allocator's purge delay)
 *   heap_pair_ns / malloc_pair_ns  one 48 B allocation and its free, in the
 *                heap and with malloc, PAIRS times (the cost of the heap's
 *                lock; default 1000000)
 * ops = NODES, secs = build + destroy. checksum = the keys' sum (the same
 * under every allocator). */
#include "bench_common.h"

#include <dlfcn.h>

typedef struct node {
    struct node *left, *right;
    uint64_t key, pad;
} node_t;

typedef void *(*heap_new_fn)(void);
typedef void *(*heap_malloc_fn)(void *, size_t);
typedef void (*heap_destroy_fn)(void *);

static heap_new_fn heap_new;
static heap_malloc_fn heap_malloc;
static heap_destroy_fn heap_destroy;
static const char *prog = "bench_heap_destroy";

static void *node_alloc(void *heap)
{
    void *p = heap ? heap_malloc(heap, sizeof(node_t)) : malloc(sizeof(node_t));
    if (!p)
        bench_oom(prog, sizeof(node_t));
    return p;
}

static node_t *build(void *heap, uint64_t lo, uint64_t hi)
{
    if (lo >= hi)
        return NULL;
    uint64_t mid = lo + (hi - lo) / 2;
    node_t *n = node_alloc(heap);
    n->key = mid;
    n->left = build(heap, lo, mid);
    n->right = build(heap, mid + 1, hi);
    return n;
}

static uint64_t sum(const node_t *n)
{
    return n ? n->key + sum(n->left) + sum(n->right) : 0;
}

static void free_tree(node_t *n)
{
    if (!n)
        return;
    free_tree(n->left);
    free_tree(n->right);
    free(n);
}

static int find_api(const char **name)
{
    static const char *apis[2][4] = {
        {"hakmem", "hak_heap_new", "hak_heap_malloc", "hak_heap_destroy"},
        {"mimalloc", "mi_heap_new", "mi_heap_malloc", "mi_heap_destroy"},
    };
    for (int i = 0; i < 2; i++) {
        void *a = dlsym(RTLD_DEFAULT, apis[i][1]), *b = dlsym(RTLD_DEFAULT, apis[i][2]),
             *c = dlsym(RTLD_DEFAULT, apis[i][3]);
        if (a && b && c) {
            *(void **)&heap_new = a;
            *(void **)&heap_malloc = b;
            *(void **)&heap_destroy = c;
            *name = apis[i][0];
            return 1;
        }
    }
    *name = "none";
    return 0;
}

static void idle_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int main(int argc, char **argv)
{
    const char *usage = "NODES [PAIRS]";
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s %s\n", prog, usage);
        return 2;
    }
    uint64_t nodes = bench_arg_u64(prog, usage, argv[1]);
    uint64_t pairs = argc > 2 ? bench_arg_u64(prog, usage, argv[2]) : 1000000;
    const char *api;
    int have = find_api(&api);

    /* per-node free of a malloc-built tree */
    node_t *t = build(NULL, 0, nodes);
    uint64_t checksum = sum(t);
    double f0 = bench_now();
    free_tree(t);
    double free_ms = (bench_now() - f0) * 1e3;
    idle_ms(200);

    long rss_start = bench_rss_kb();
    void *heap = have ? heap_new() : NULL;
    if (have && !heap)
        bench_die(prog, "heap_new failed");
    double b0 = bench_now();
    t = build(heap, 0, nodes);
    double b1 = bench_now();
    if (sum(t) != checksum)
        bench_die(prog, "tree checksum differs");
    long rss_built = bench_rss_kb();
    double d0 = bench_now();
    if (heap)
        heap_destroy(heap);
    else
        free_tree(t);
    double d1 = bench_now();
    long rss_destroyed = bench_rss_kb();
    idle_ms(200);
    long rss_later = bench_rss_kb();

    /* the price of one allocation and free, in a heap and with malloc */
    double heap_pair_ns = 0, malloc_pair_ns;
    if (have) {
        void *h = heap_new();
        double p0 = bench_now();
        for (uint64_t i = 0; i < pairs; i++) {
            void *p = heap_malloc(h, 48);
            __asm__ volatile("" : : "r"(p) : "memory");
            free(p);
        }
        heap_pair_ns = pairs ? (bench_now() - p0) * 1e9 / (double)pairs : 0;
        heap_destroy(h);
    }
    double m0 = bench_now();
    for (uint64_t i = 0; i < pairs; i++) {
        void *p = malloc(48);
        __asm__ volatile("" : : "r"(p) : "memory");
        free(p);
    }
    malloc_pair_ns = pairs ? (bench_now() - m0) * 1e9 / (double)pairs : 0;

    printf("%s api=%s nodes=%llu build_ms=%.3f destroy_ms=%.3f free_ms=%.3f rss_start_kb=%ld "
           "rss_built_kb=%ld rss_destroyed_kb=%ld rss_later_kb=%ld heap_pair_ns=%.2f malloc_pair_ns=%.2f",
           prog, api, (unsigned long long)nodes, (b1 - b0) * 1e3, (d1 - d0) * 1e3, free_ms, rss_start,
           rss_built, rss_destroyed, rss_later, heap_pair_ns, malloc_pair_ns);
    bench_print_tail(nodes, (b1 - b0) + (d1 - d0), checksum);
    return 0;
}
