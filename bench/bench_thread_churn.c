/* bench_thread_churn THREADS CONCURRENT ITERS [MIN MAX [KEEP]]
 *
 * THREADS short-lived threads in total, at most CONCURRENT alive at a time
 * (the main thread joins the oldest and starts the next).  Each thread runs
 * ITERS iterations of the random-mixed loop on a table of 64 slots with sizes
 * in MIN..MAX (default 16..1024), frees what it still holds except KEEP blocks
 * (default 8), which it leaves to the main thread to free after it has
 * exited.  This exercises per-thread heap set-up and tear-down and frees into
 * the pages of dead threads.
 * Operations = all mallocs and frees (counted); the clock covers thread
 * creation and joining.
 */
#include "bench_common.h"
#include <pthread.h>

static const char *USAGE = "THREADS CONCURRENT ITERS [MIN MAX [KEEP]]";
static const char *prog = "bench_thread_churn";

#define SLOTS 64

struct job {
    pthread_t tid;
    uint64_t index, iters, min, max, keep;
    uint64_t ops, checksum;
    unsigned char *kept[SLOTS];
    unsigned nkept;
};

static void *churn(void *arg)
{
    struct job *j = arg;
    unsigned char *slots[SLOTS] = { 0 };
    uint64_t rng = bench_rng_seed(j->index * 2654435761u + 17);
    const uint32_t span = (uint32_t)(j->max - j->min + 1);
    uint64_t ops = 0, checksum = 0;
    for (uint64_t i = 0; i < j->iters; i++) {
        bench_mixed_step(prog, (void **)slots, SLOTS, &rng, j->min, span, (unsigned char)(i + j->index), &checksum);
        ops++;
    }
    j->nkept = 0;
    for (unsigned i = 0; i < SLOTS; i++) {
        if (!slots[i])
            continue;
        if (j->nkept < j->keep) {
            j->kept[j->nkept++] = slots[i];
        } else {
            checksum += *slots[i];
            free(slots[i]);
            ops++;
        }
    }
    j->ops = ops;
    j->checksum = checksum;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 6 && argc != 7) {
        fprintf(stderr, "usage: %s %s\n", prog, USAGE);
        return 2;
    }
    uint64_t threads = bench_arg_u64(prog, USAGE, argv[1]);
    uint64_t concurrent = bench_arg_u64(prog, USAGE, argv[2]);
    uint64_t iters = bench_arg_u64(prog, USAGE, argv[3]);
    uint64_t min = 16, max = 1024, keep = 8;
    if (argc >= 6) {
        min = bench_arg_size(prog, USAGE, argv[4]);
        max = bench_arg_size(prog, USAGE, argv[5]);
    }
    if (argc == 7)
        keep = bench_arg_u64(prog, USAGE, argv[6]);
    if (threads == 0 || concurrent == 0 || concurrent > 1024 || min == 0 || max < min ||
        max - min >= UINT32_MAX || keep > SLOTS)
        bench_die(prog, "need THREADS >= 1, CONCURRENT 1..1024, 1 <= MIN <= MAX, KEEP <= 64");
    if (concurrent > threads)
        concurrent = threads;

    struct job *jobs = calloc(concurrent, sizeof(*jobs));
    if (!jobs)
        bench_oom(prog, concurrent * sizeof(*jobs));
    uint64_t ops = 0, checksum = 0;

    double t0 = bench_now();
    for (uint64_t n = 0; n < threads + concurrent; n++) {
        struct job *j = &jobs[n % concurrent];
        if (n >= concurrent) {            /* retire the oldest thread */
            pthread_join(j->tid, NULL);
            ops += j->ops;
            checksum += j->checksum;
            for (unsigned k = 0; k < j->nkept; k++) {
                checksum += *j->kept[k];
                free(j->kept[k]);
                ops++;
            }
        }
        if (n < threads) {
            *j = (struct job){ .index = n, .iters = iters, .min = min, .max = max,
                               .keep = keep };
            if (pthread_create(&j->tid, NULL, churn, j) != 0)
                bench_die(prog, "pthread_create failed");
        }
    }
    double secs = bench_now() - t0;
    free(jobs);

    printf("%s threads=%llu concurrent=%llu iters=%llu min=%llu max=%llu keep=%llu", prog,
           (unsigned long long)threads, (unsigned long long)concurrent,
           (unsigned long long)iters, (unsigned long long)min, (unsigned long long)max,
           (unsigned long long)keep);
    bench_print_tail(ops, secs, checksum);
    return 0;
}
