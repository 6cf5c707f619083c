/* bench_thread_mem THREADS [COUNT [MAX [IDLE_MS]]]
 *
 * Memory an allocator keeps per thread.  THREADS threads (the runner uses 64)
 * start together; each allocates COUNT (default 1) blocks of every size class
 * from 16 bytes to MAX (default 32 KiB) — sizes 16, 32, ... 128 in 16-byte
 * steps, then eight per doubling, which hits every class of HAKMEM and at
 * least one size in every class of the usual peers — writes every byte, and
 * frees them all again.  Then all threads idle, alive, while the main thread
 * waits IDLE_MS milliseconds (default 100) and reads the resident set size.
 *
 *   rss_per_thread_kb = (RSS while idle - RSS before the threads) / THREADS
 *
 * The "before" figure is taken after the main thread did the same work once,
 * so the allocator's one-time set-up is not counted; thread stacks and TLS
 * (a few KiB each under any allocator) are.  Operations = 2 * THREADS *
 * COUNT * sizes; secs is the time until every thread finished its work.  The
 * checksum sums the first byte of every block, read before its free.
 */
#include "bench_common.h"
#include <pthread.h>

static const char *USAGE = "THREADS [COUNT [MAX [IDLE_MS]]]";
static const char *prog = "bench_thread_mem";

static uint64_t n_threads, count, max_size;
static pthread_barrier_t start, done, release;

static size_t next_size(size_t s)
{
    return s < 128 ? s + 16 : s + s / 8;
}

/* Allocates COUNT blocks of every size, touches them, frees them; returns the
 * checksum and adds the number of allocator calls to *ops. */
static uint64_t every_class(uint64_t tag, uint64_t *ops)
{
    uint64_t sum = 0;
    unsigned char **blocks = malloc(count * sizeof(*blocks));
    if (!blocks)
        bench_oom(prog, count * sizeof(*blocks));
    for (size_t s = 16; s <= max_size; s = next_size(s)) {
        for (uint64_t i = 0; i < count; i++) {
            blocks[i] = malloc(s);
            if (BENCH_UNLIKELY(!blocks[i]))
                bench_oom(prog, s);
            memset(blocks[i], (int)((tag + s + i) & 0xff), s);
        }
        for (uint64_t i = 0; i < count; i++) {
            sum += blocks[i][0] + blocks[i][s - 1];
            free(blocks[i]);
        }
        *ops += 2 * count;
    }
    free(blocks);
    return sum;
}

struct worker {
    pthread_t tid;
    uint64_t index, checksum, ops;
};

static void *run(void *arg)
{
    struct worker *w = arg;
    pthread_barrier_wait(&start);
    w->checksum = every_class(w->index, &w->ops);
    pthread_barrier_wait(&done);
    pthread_barrier_wait(&release);   /* idle, alive, until main has measured */
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 5) {
        fprintf(stderr, "usage: %s %s\n", prog, USAGE);
        return 2;
    }
    n_threads = bench_arg_u64(prog, USAGE, argv[1]);
    count = argc >= 3 ? bench_arg_u64(prog, USAGE, argv[2]) : 1;
    max_size = argc >= 4 ? bench_arg_size(prog, USAGE, argv[3]) : 32768;
    uint64_t idle_ms = argc >= 5 ? bench_arg_u64(prog, USAGE, argv[4]) : 100;
    if (n_threads == 0 || n_threads > 4096 || count == 0 || count > 100000 ||
        max_size < 16 || max_size > (64u << 20) || idle_ms > 600000)
        bench_die(prog, "need THREADS 1..4096, COUNT 1..100000, MAX 16..64M, IDLE_MS <= 600000");

    struct worker *ws = calloc(n_threads, sizeof(*ws));
    if (!ws)
        bench_oom(prog, n_threads * sizeof(*ws));
    pthread_barrier_init(&start, NULL, (unsigned)(n_threads + 1));
    pthread_barrier_init(&done, NULL, (unsigned)(n_threads + 1));
    pthread_barrier_init(&release, NULL, (unsigned)(n_threads + 1));
    uint64_t main_ops = 0;
    uint64_t checksum = every_class(n_threads, &main_ops);   /* one-time set-up */
    long rss_before = bench_rss_kb();

    for (uint64_t t = 0; t < n_threads; t++) {
        ws[t].index = t;
        if (pthread_create(&ws[t].tid, NULL, run, &ws[t]) != 0)
            bench_die(prog, "pthread_create failed");
    }
    pthread_barrier_wait(&start);
    double t0 = bench_now();
    pthread_barrier_wait(&done);
    double secs = bench_now() - t0;
    if (idle_ms) {
        struct timespec ts = { (time_t)(idle_ms / 1000), (long)(idle_ms % 1000) * 1000000L };
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    long rss_idle = bench_rss_kb();
    pthread_barrier_wait(&release);
    uint64_t ops = 0;
    for (uint64_t t = 0; t < n_threads; t++) {
        pthread_join(ws[t].tid, NULL);
        checksum += ws[t].checksum;
        ops += ws[t].ops;
    }
    free(ws);
    pthread_barrier_destroy(&start);
    pthread_barrier_destroy(&done);
    pthread_barrier_destroy(&release);

    double per_thread = (double)(rss_idle - rss_before) / (double)n_threads;
    printf("%s threads=%llu count=%llu max=%llu idle_ms=%llu rss_before_kb=%ld "
           "rss_idle_kb=%ld rss_per_thread_kb=%.1f", prog, (unsigned long long)n_threads,
           (unsigned long long)count, (unsigned long long)max_size,
           (unsigned long long)idle_ms, rss_before, rss_idle, per_thread);
    bench_print_tail(ops, secs, checksum);
    return 0;
}
