"""The workloads: each is a program in bench/ with arguments as a function of
one length n, the lengths of the quick and --full timed runs and of the
strace and valgrind run pairs."""
import os


class Workload:
    def __init__(self, name, program, argfn, quick, full, trace, callgrind, desc, figure=None,
                 compared=True):
        self.name = name
        self.figure = figure        # extra result key reported per allocator, or None
        self.compared = compared    # throughput ratios and chart (False: the figure is the point)
        self.program = program
        self.argfn = argfn          # n -> list of arguments
        self.quick = quick          # n for the quick timed runs
        self.full = full            # n for --full
        self.trace = trace          # (short n, long n) for the strace runs
        self.callgrind = callgrind  # (short n, long n) or None
        self.desc = desc

    def args(self, n):
        return [str(a) for a in self.argfn(n)]


WORKLOADS = [
    Workload("random_mixed", "bench_random_mixed", lambda n: [n, 400, 1],
             20000000, 100000000, (1000000, 5000000), (200000, 400000),
             "1 thread, ws=400, 16-1024 B (SPEC reference: 20000000 400 1)"),
    Workload("random_mixed_c6", "bench_random_mixed", lambda n: [n, 400, 1, 257, 768],
             20000000, 100000000, (1000000, 5000000), (200000, 400000),
             "1 thread, ws=400, 257-768 B (C6-heavy)"),
    Workload("fixed_size_64", "bench_fixed_size", lambda n: [n, 64, 400],
             20000000, 100000000, (1000000, 5000000), (200000, 400000),
             "1 thread, ws=400, 64 B only"),
    Workload("fifo", "bench_fifo", lambda n: [n, 400, 1],
             10000000, 50000000, (500000, 2500000), (100000, 200000),
             "1 thread, a ring of 400 blocks freed oldest first, 16-1024 B from another generator"),
    # The Mixed loop as written elsewhere (issue 6: a loop of random_mixed's
    # shape, not this repository's, ran the fast build at 0.96x mimalloc):
    # bench_slot_churn, its own generator; first and last byte written, and
    # a slot replaced (free, then malloc) with the whole block written.
    Workload("churn_toggle", "bench_slot_churn", lambda n: [n, 1000, 1, "toggle", "ends"],
             10000000, 50000000, (1000000, 5000000), (200000, 400000),
             "1 thread, ws=1000, 16-1024 B, a slot freed if full else filled, first and last "
             "byte written (random_mixed's shape from another generator)"),
    Workload("churn_fill", "bench_slot_churn", lambda n: [n, 400, 1, "replace", "fill"],
             5000000, 20000000, (500000, 2500000), (100000, 200000),
             "1 thread, ws=400, 16-1024 B, a random slot's block freed and replaced by a new "
             "one, every byte written (memset)"),
    Workload("mixed_wide", "bench_random_mixed", lambda n: [n, 20000, 1, 16, "32K"],
             12000000, 100000000, (2000000, 10000000), None,
             "1 thread, ws=20000, 16 B-32 KiB (a large working set: RSS)"),
    Workload("mid_mt", "bench_mid_large_mt", lambda n: [2, n, 400],
             5000000, 30000000, (250000, 1250000), (100000, 200000),
             "2 threads, ws=400 each, 1-32 KiB"),
    Workload("large_mt", "bench_mid_large_mt", lambda n: [2, n, 16, "64K", "4M"],
             100000, 500000, (5000, 25000), None,
             "2 threads, ws=16 each, 64 KiB-4 MiB"),
    Workload("larson", "bench_larson", lambda n: [2, n, 50000, 1000],
             60, 200, (4, 20), None,
             "2 lineages, a new thread per lineage each round, 1000 blocks 8-1000 B, 25% of frees handed to the other lineage"),
    Workload("prodcons", "bench_prodcons", lambda n: [1, n],
             3000000, 10000000, (200000, 1000000), None,
             "1 producer -> 1 consumer, 16-1024 B, every free remote; the consumer starts at a "
             "full ring of 4096 blocks, so every run peaks with the same blocks in flight"),
    Workload("prodcons_mid", "bench_prodcons", lambda n: [2, n, 16, "64K"],
             150000, 1500000, (30000, 150000), None,
             "2 producer -> consumer pairs (4 threads), 16 B-64 KiB, every free remote; each "
             "consumer starts at a full ring of 4096 blocks"),
    Workload("thread_churn", "bench_thread_churn", lambda n: [n, 4, 500],
             5000, 20000, (500, 2500), None,
             "short-lived threads (4 at a time, 500 ops each, 8 blocks left to main)"),
    Workload("realloc", "bench_realloc", lambda n: [n, 256, "64K"],
             2000000, 10000000, (200000, 1000000), (100000, 200000),
             "256 growing buffers (string builders and vectors) up to 64 KiB"),
    Workload("realloc_large", "bench_realloc", lambda n: [n, 64, "8M"],
             15000, 60000, (3000, 15000), None,
             "64 growing buffers up to 8 MiB (large reallocs)"),
]


def _cores():
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


CORES = _cores()


OVERSUB = (8 * CORES, 16 * CORES)


# The cross-thread shapes (issue 6): batches through a locked queue, threads
# re-created with a shared exchange array, a realistic size mix, many more
# threads than cores, and the memory an idle thread keeps.
WORKLOADS += [
    # 1500 batches (24 M operations) in the quick runs: at 300 (15-35 ms) the
    # spread under chrt was 10-14% against 3-7%, and the peers' ratio moved
    # with the length (mimalloc +9-14% from 300 to 1500, HAKMEM +5-20%).
    Workload("xmalloc", "bench_xmalloc", lambda n: [2, 2, n],
             1500, 6000, (30, 150), None,
             "2 producers allocate 64 B blocks in batches of 4096, queue whole batches on a "
             "mutex-protected list; 2 consumers free whole batches"),
    Workload("stress", "bench_stress", lambda n: [32, 10, n],
             8, 40, (2, 10), None,
             "32 threads re-created every round, a quarter of the blocks swapped through a "
             "shared array, 8-512 B powers of two with 1% 100-1000x larger, contents checked "
             "on free"),
    Workload("sizemix", "bench_sizemix", lambda n: [CORES, n, 1000],
             600000, 3000000, (60000, 300000), (20000, 40000),
             "%d threads (one per core), ws=1000 each, 60%% 16-128 B, 25%% to 1 KiB, 10%% to 8 KiB, "
             "4%% to 64 KiB, 1%% to 512 KiB; 20%% of frees handed to the next thread, which keeps "
             "freeing them after its own work until every thread is done" % CORES),
    Workload("oversub_8x", "bench_oversub", lambda n: [OVERSUB[0], n // OVERSUB[0], 400],
             3200000, 16000000, (320000, 1600000), None,
             "%d threads (8x the cores) at once, ws=400 each, 16-1024 B, 10%% of frees "
             "handed to the next thread still at work" % OVERSUB[0]),
    Workload("oversub_16x", "bench_oversub", lambda n: [OVERSUB[1], n // OVERSUB[1], 400],
             3200000, 16000000, (320000, 1600000), None,
             "%d threads (16x the cores) at once, ws=400 each, 16-1024 B, 10%% of frees "
             "handed to the next thread still at work" % OVERSUB[1]),
    Workload("thread_mem", "bench_thread_mem", lambda n: [64, n],
             1, 1, (1, 4), None,
             "64 threads each allocate and free one block of every class 16 B-32 KiB, then "
             "idle: RSS per idle thread",
             figure=("rss_per_thread_kb", "RSS per idle thread, KiB"), compared=False),
    # First-class heaps (issue 9): hak_heap_destroy against mi_heap_destroy;
    # allocators without a heap API free every node (their figure is that).
    Workload("heap_destroy", "bench_heap_destroy", lambda n: [n, 200000],
             1000000, 1000000, (200000, 1000000), None,
             "a binary tree of 1,000,000 32 B nodes built in a first-class heap (HAKMEM's "
             "hak_heap_*, mimalloc's mi_heap_*; malloc elsewhere) and destroyed at once "
             "(elsewhere: every node freed)",
             figure=("destroy_ms", "destroy of a 1M-node tree (no heap API: free of every node), ms"),
             compared=False),
]


WORKLOAD_BY_NAME = {w.name: w for w in WORKLOADS}


def program_path(build_dir, program):
    return os.path.join(build_dir, "bench", program)


def select_workloads(spec):
    if not spec:
        return list(WORKLOADS)
    out = []
    for name in spec.split(","):
        name = name.strip()
        if name not in WORKLOAD_BY_NAME:
            raise SystemExit("unknown workload %r; known: %s"
                             % (name, ", ".join(WORKLOAD_BY_NAME)))
        out.append(WORKLOAD_BY_NAME[name])
    return out


def check_programs(build_dir, workloads):
    missing = [program_path(build_dir, w.program) for w in workloads
               if not os.path.exists(program_path(build_dir, w.program))]
    if missing:
        raise SystemExit("benchmark programs not built: %s\nbuild them first: make bench "
                         "(or cmake --build %s)" % (", ".join(sorted(set(missing))), build_dir))
