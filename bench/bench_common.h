/* bench_common.h — shared helpers for the HAKMEM benchmark programs.
 *
 * The programs link against plain malloc/free; an allocator is chosen at run
 * time with LD_PRELOAD.  Every program prints exactly one result line
 *
 *     <program> key=value ... ops=N secs=S ops_per_sec=X ns_per_op=T peak_rss_kb=K checksum=C
 *
 * on stdout (bench_soak also prints one line per epoch).  "ops" counts calls
 * into the allocator (malloc, free, realloc) made in the timed region;
 * "checksum" depends only on the work done, never on addresses or timing, so
 * it must be identical under every allocator: a mismatch means corrupted data.
 */
#ifndef HAKMEM_BENCH_COMMON_H
#define HAKMEM_BENCH_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BENCH_UNUSED __attribute__((unused))
#define BENCH_LIKELY(x) __builtin_expect(!!(x), 1)
#define BENCH_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* xorshift64: three shifts, no multiply; good enough to pick slots and sizes. */
static inline uint64_t bench_rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    return x;
}

/* Turn any seed (including 0) into a valid, well-mixed xorshift state. */
static inline uint64_t bench_rng_seed(uint64_t seed)
{
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return z ? z : 0x2545F4914F6CDD1Dull;
}

/* Uniform in [0, n) from 32 random bits without a division (Lemire). */
static inline uint32_t bench_range(uint32_t r, uint32_t n)
{
    return (uint32_t)(((uint64_t)r * (uint64_t)n) >> 32);
}

static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The start of a timed multi-threaded run, on one barrier counting the
 * workers and main: every worker calls bench_start_wait before its work,
 * main calls bench_start_clock, which returns the start time. The first
 * round has every thread created and waiting; main reads the clock; the
 * second round releases them. Read after a single release, the clock missed
 * the workers' first milliseconds whenever main, having just woken them, was
 * descheduled (up to 58 ms of a 0.1-0.2 s bench_oversub run on 2 busy
 * cores); read before it, it counted the workers' start-up. */
static inline void bench_start_wait(pthread_barrier_t *b)
{
    pthread_barrier_wait(b);
    pthread_barrier_wait(b);
}

static inline double bench_start_clock(pthread_barrier_t *b)
{
    pthread_barrier_wait(b);
    double t0 = bench_now();
    pthread_barrier_wait(b);
    return t0;
}

static BENCH_UNUSED void bench_die(const char *prog, const char *msg)
{
    fprintf(stderr, "%s: %s\n", prog, msg);
    exit(2);
}

static BENCH_UNUSED void bench_oom(const char *prog, size_t size)
{
    fprintf(stderr, "%s: allocation of %zu bytes failed\n", prog, size);
    exit(3);
}

/* One step of the random-mixed loop (SPEC's workload): pick a slot; free its
 * block if it holds one, else allocate min + [0, span) bytes and write a byte.
 * Always inlined, so every program that runs it compiles the same loop. */
static inline __attribute__((always_inline)) void
bench_mixed_step(const char *prog, void **slots, uint32_t nslots, uint64_t *rng,
                 uint64_t min, uint32_t span, unsigned char tag, uint64_t *checksum)
{
    uint64_t r = bench_rng_next(rng);
    uint32_t idx = bench_range((uint32_t)(r >> 32), nslots);
    unsigned char *p = slots[idx];
    if (p) {
        *checksum += *p;
        free(p);
        slots[idx] = NULL;
    } else {
        size_t sz = (size_t)min + bench_range((uint32_t)r, span);
        p = malloc(sz);
        if (BENCH_UNLIKELY(!p))
            bench_oom(prog, sz);
        *p = tag;
        slots[idx] = p;
    }
}

/* Parse a count: decimal, optional k/m/g suffix (powers of 1000), or an
 * exponent form such as 2e7.  Exits with a usage error when malformed. */
static BENCH_UNUSED uint64_t bench_arg_u64(const char *prog, const char *usage,
                                           const char *s)
{
    char *end = NULL;
    errno = 0;
    double mult = 1.0;
    double v;
    if (strpbrk(s, "eE.")) {
        v = strtod(s, &end);
    } else {
        unsigned long long u = strtoull(s, &end, 10);
        v = (double)u;
    }
    if (end == s || errno != 0 || v < 0)
        goto bad;
    switch (*end) {
    case '\0': break;
    case 'k': case 'K': mult = 1e3; end++; break;
    case 'm': case 'M': mult = 1e6; end++; break;
    case 'g': case 'G': mult = 1e9; end++; break;
    default: goto bad;
    }
    if (*end != '\0')
        goto bad;
    return (uint64_t)(v * mult + 0.5);
bad:
    fprintf(stderr, "%s: bad number '%s'\nusage: %s %s\n", prog, s, prog, usage);
    exit(2);
}

/* Sizes may carry a binary suffix: 64K = 65536, 4M = 4194304. */
static BENCH_UNUSED uint64_t bench_arg_size(const char *prog, const char *usage,
                                            const char *s)
{
    char *end = NULL;
    errno = 0;
    unsigned long long u = strtoull(s, &end, 10);
    if (end == s || errno != 0)
        goto bad;
    switch (*end) {
    case '\0': return u;
    case 'k': case 'K': u <<= 10; end++; break;
    case 'm': case 'M': u <<= 20; end++; break;
    case 'g': case 'G': u <<= 30; end++; break;
    default: goto bad;
    }
    if (*end == 'i' || *end == 'B')
        end++;
    if (*end == 'B')
        end++;
    if (*end != '\0')
        goto bad;
    return u;
bad:
    fprintf(stderr, "%s: bad size '%s'\nusage: %s %s\n", prog, s, prog, usage);
    exit(2);
}

/* Resident set size in KiB, from /proc/self/statm (second field, in pages). */
static BENCH_UNUSED long bench_rss_kb(void)
{
    char buf[128];
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return -1;
    long size = 0, resident = -1;
    if (fgets(buf, sizeof buf, f))
        sscanf(buf, "%ld %ld", &size, &resident);
    fclose(f);
    if (resident < 0)
        return -1;
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Peak resident set size of this process in KiB: VmHWM from
 * /proc/self/status.  (getrusage's ru_maxrss is not used: Linux carries the
 * peak of the image before exec over exec, so a program started by a large
 * parent such as the Python runner would report the parent's size.) */
static BENCH_UNUSED long bench_peak_rss_kb(void)
{
    char line[256];
    long kb = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "VmHWM:", 6) == 0) {
            kb = strtol(line + 6, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kb;
}

/* The common tail of every result line. */
static BENCH_UNUSED void bench_print_tail(uint64_t ops, double secs, uint64_t checksum)
{
    double ops_per_sec = secs > 0 ? (double)ops / secs : 0.0;
    long peak = bench_peak_rss_kb();
    printf(" ops=%llu secs=%.6f ops_per_sec=%.6e ns_per_op=%.3f peak_rss_kb=%ld checksum=%llu\n",
           (unsigned long long)ops, secs, ops_per_sec,
           ops ? secs * 1e9 / (double)ops : 0.0, peak, (unsigned long long)checksum);
    fflush(stdout);
}

#endif /* HAKMEM_BENCH_COMMON_H */
