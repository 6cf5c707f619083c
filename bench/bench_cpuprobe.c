/* bench_cpuprobe [REPS [WORK [THREADS]]]
 *
 * Not an allocator benchmark: a probe of the CPU time the machine gives, for
 * the benchmark runner to take before, between and after the workloads.  In a
 * virtual machine the host can take CPU time away from the guest, and nothing
 * inside it shows that (load average, steal time in /proc/stat and the CPU
 * time of other processes all read normal) while every multi-threaded
 * workload runs at a fraction of its usual throughput.
 *
 * Each of REPS repetitions (default 5) times THREADS threads (default: the
 * CPUs this process may run on) spinning WORK steps each (default 50000000,
 * about 17 ms on this 2026 x86 VM), all at once, and one thread spinning WORK
 * steps alone; odd repetitions run the threads first.  The spin is a chain of
 * dependent loads and stores of a volatile counter: no memory traffic beyond
 * the thread's own cache line, so on an uncontended machine the threads take
 * as long together as one alone.  Printed, one line:
 *
 *     bench_cpuprobe threads=2 reps=5 work=50000000 serial_s=S parallel_s=P
 *         ratio=R ratio_min=.. ratio_max=.. serial_min_s=.. serial_max_s=..
 *         cpus=C secs=T serial_all=s1,s2,.. parallel_all=p1,p2,..
 *
 * serial_s and parallel_s are the medians over the repetitions of one
 * thread's time alone and of the threads' time together (from the start
 * clock to the last thread's end); ratio is the median of each repetition's
 * parallel / serial (about 1.0-1.1 uncontended; 2 when the threads share one
 * CPU); cpus = THREADS / ratio, the CPUs the threads got in effect; secs the
 * probe's whole time.  What counts as contended is the runner's call
 * (scripts/hakbench/cpuprobe.py).
 */
#include "bench_common.h"
#include <sched.h>

static const char *USAGE = "[REPS [WORK [THREADS]]]";
static const char *prog = "bench_cpuprobe";

#define MAX_REPS 100

static uint64_t work = 50000000;
static pthread_barrier_t start;

struct spinner {
    pthread_t tid;
    double end;
};

static volatile uint64_t sink;

static void spin(uint64_t n)
{
    volatile uint64_t x = 0;
    for (uint64_t i = 0; i < n; i++)
        x += i;
    sink = x;
}

static void *run(void *arg)
{
    struct spinner *s = arg;
    bench_start_wait(&start);
    spin(work);
    s->end = bench_now();
    return NULL;
}

static double time_serial(void)
{
    double t0 = bench_now();
    spin(work);
    return bench_now() - t0;
}

static double time_parallel(struct spinner *sp, unsigned n)
{
    if (pthread_barrier_init(&start, NULL, n + 1) != 0)
        bench_die(prog, "pthread_barrier_init failed");
    for (unsigned i = 0; i < n; i++)
        if (pthread_create(&sp[i].tid, NULL, run, &sp[i]) != 0)
            bench_die(prog, "pthread_create failed");
    double t0 = bench_start_clock(&start);
    double end = t0;
    for (unsigned i = 0; i < n; i++) {
        pthread_join(sp[i].tid, NULL);
        if (sp[i].end > end)
            end = sp[i].end;
    }
    pthread_barrier_destroy(&start);
    return end - t0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, unsigned n)
{
    double s[MAX_REPS];
    memcpy(s, v, n * sizeof *v);
    qsort(s, n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* The CPUs this process may run on (taskset, cgroup cpusets), at most the
 * online ones. */
static unsigned usable_cpus(void)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned n = online > 0 ? (unsigned)online : 1;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int c = CPU_COUNT(&set);
        if (c > 0 && (unsigned)c < n)
            n = (unsigned)c;
    }
    return n;
}

static void print_list(const char *key, const double *v, unsigned n)
{
    printf(" %s=", key);
    for (unsigned i = 0; i < n; i++)
        printf("%s%.6f", i ? "," : "", v[i]);
}

int main(int argc, char **argv)
{
    uint64_t reps = 5, threads = usable_cpus();
    if (argc > 4)
        bench_die(prog, "too many arguments");
    if (argc > 1)
        reps = bench_arg_u64(prog, USAGE, argv[1]);
    if (argc > 2)
        work = bench_arg_u64(prog, USAGE, argv[2]);
    if (argc > 3)
        threads = bench_arg_u64(prog, USAGE, argv[3]);
    if (reps < 1 || reps > MAX_REPS || work < 1 || threads < 1 || threads > 1024)
        bench_die(prog, "REPS must be 1..100, WORK and THREADS (1..1024) at least 1");

    struct spinner *sp = calloc(threads, sizeof *sp);
    if (!sp)
        bench_oom(prog, threads * sizeof *sp);
    double ser[MAX_REPS], par[MAX_REPS], ratio[MAX_REPS];
    double t0 = bench_now();
    for (unsigned r = 0; r < reps; r++) {
        if (r % 2) {
            par[r] = time_parallel(sp, (unsigned)threads);
            ser[r] = time_serial();
        } else {
            ser[r] = time_serial();
            par[r] = time_parallel(sp, (unsigned)threads);
        }
        ratio[r] = ser[r] > 0 ? par[r] / ser[r] : 0;
    }
    double secs = bench_now() - t0;
    free(sp);

    double rmin = ratio[0], rmax = ratio[0], smin = ser[0], smax = ser[0];
    for (unsigned r = 1; r < reps; r++) {
        rmin = ratio[r] < rmin ? ratio[r] : rmin;
        rmax = ratio[r] > rmax ? ratio[r] : rmax;
        smin = ser[r] < smin ? ser[r] : smin;
        smax = ser[r] > smax ? ser[r] : smax;
    }
    double rmed = median(ratio, (unsigned)reps);
    printf("%s threads=%llu reps=%llu work=%llu serial_s=%.6f parallel_s=%.6f ratio=%.4f "
           "ratio_min=%.4f ratio_max=%.4f serial_min_s=%.6f serial_max_s=%.6f cpus=%.3f secs=%.4f",
           prog, (unsigned long long)threads, (unsigned long long)reps,
           (unsigned long long)work, median(ser, (unsigned)reps), median(par, (unsigned)reps),
           rmed, rmin, rmax, smin, smax, rmed > 0 ? (double)threads / rmed : 0.0, secs);
    print_list("serial_all", ser, (unsigned)reps);
    print_list("parallel_all", par, (unsigned)reps);
    printf("\n");
    return 0;
}
