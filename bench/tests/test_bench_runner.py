"""Unit tests of the benchmark runner (scripts/hakbench): parsing of the
programs' and tools' output, and the statistics behind the tables and verdicts.
Standard library only:

    python3 -m unittest discover -s bench/tests -v
"""
import math
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))

from hakbench import (  # noqa: E402
    allocators, common, compare, parse, report, runner, stats, workloads)


# One real line of each program (as printed by bench/*.c).
SAMPLES = {
    "bench_random_mixed": "bench_random_mixed iters=20000000 ws=400 seed=1 min=16 max=1024 "
                          "ops=20000000 secs=0.221000 ops_per_sec=9.049774e+07 ns_per_op=11.050 "
                          "peak_rss_kb=1908 checksum=1275144739",
    "bench_fixed_size": "bench_fixed_size iters=20000000 size=64 ws=400 seed=1 ops=20000000 "
                        "secs=0.210000 ops_per_sec=9.523810e+07 ns_per_op=10.500 "
                        "peak_rss_kb=1524 checksum=1275144739",
    "bench_slot_churn": "bench_slot_churn iters=5000000 ws=400 seed=1 policy=replace touch=fill "
                        "min=16 max=1024 ops=9999600 secs=0.175876 ops_per_sec=5.685585e+07 "
                        "ns_per_op=17.588 peak_rss_kb=2320 checksum=637493856",
    "bench_fifo": "bench_fifo iters=10000000 ws=400 seed=1 ops=19999600 secs=0.095000 "
                  "ops_per_sec=2.105221e+08 ns_per_op=4.750 peak_rss_kb=2444 checksum=1275144739",
    "bench_mid_large_mt": "bench_mid_large_mt threads=2 iters=2000000 ws=400 min=1024 max=32768 "
                          "seed=1 ops=4000000 secs=0.172000 ops_per_sec=2.325581e+07 "
                          "ns_per_op=43.000 peak_rss_kb=9760 checksum=507935484",
    "bench_larson": "bench_larson threads=2 rounds=20 iters=100000 chunks=1000 min=8 max=1000 "
                    "seed=1 remote_pct=25 ops=8000000 secs=0.083000 ops_per_sec=9.638554e+07 "
                    "ns_per_op=10.375 peak_rss_kb=18696 checksum=549943232",
    "bench_prodcons": "bench_prodcons pairs=1 items=2000000 min=16 max=1024 batch=64 peak_live_kb=2146 "
                      "ops=4000000 "
                      "secs=0.080000 ops_per_sec=5.000000e+07 ns_per_op=20.000 "
                      "peak_rss_kb=2860 checksum=254991808",
    "bench_thread_churn": "bench_thread_churn threads=2000 concurrent=4 iters=500 min=16 "
                          "max=1024 keep=8 ops=1032000 secs=0.060000 ops_per_sec=1.720000e+07 "
                          "ns_per_op=58.140 peak_rss_kb=2148 checksum=67878483",
    "bench_realloc": "bench_realloc iters=5000000 nbuf=256 maxsize=65536 seed=1 reallocs=4747675 "
                     "ops=5000000 secs=1.320000 ops_per_sec=3.787879e+06 ns_per_op=264.000 "
                     "peak_rss_kb=12368 checksum=637578486",
    "bench_soak": "bench_soak seconds=1 epoch_ops=1000000 ws=400 seed=1 min=16 max=1024 "
                  "epochs=90 rss_kb=1968 ops=90000000 secs=1.004159 ops_per_sec=8.962724e+07 "
                  "ns_per_op=11.157 peak_rss_kb=1968 checksum=5737608306",
    "bench_xmalloc": "bench_xmalloc producers=2 consumers=2 batches=20 size=64 batch=1024 "
                     "depth=16 ops=82000 secs=0.001733 ops_per_sec=4.731742e+07 "
                     "ns_per_op=21.134 peak_rss_kb=4492 checksum=6246400",
    "bench_stress": "bench_stress threads=8 scale=2 rounds=3 seed=1 blocks=32400 ops=64800 "
                    "secs=0.010221 ops_per_sec=6.340023e+06 ns_per_op=157.728 "
                    "peak_rss_kb=3988 checksum=1202054",
    "bench_sizemix": "bench_sizemix threads=4 iters=20000 ws=200 cross_pct=20 seed=1 "
                     "handed=15768 late=1269 ops=160000 secs=0.032110 ops_per_sec=4.982827e+06 "
                     "ns_per_op=200.689 peak_rss_kb=21360 checksum=17986039",
    "bench_oversub": "bench_oversub threads=32 iters=5000 ws=100 remote_pct=10 min=16 max=1024 "
                     "seed=1 handed=7843 ops=160000 secs=0.004289 ops_per_sec=3.730417e+07 "
                     "ns_per_op=26.807 peak_rss_kb=4876 checksum=20484582",
    "bench_thread_mem": "bench_thread_mem threads=64 count=1 max=32768 idle_ms=0 "
                        "rss_before_kb=2060 rss_idle_kb=33056 rss_per_thread_kb=484.3 ops=7040 "
                        "secs=0.007985 ops_per_sec=8.816531e+05 ns_per_op=1134.233 "
                        "peak_rss_kb=35204 checksum=898190",
    "bench_heap_destroy": "bench_heap_destroy api=hakmem nodes=1000000 build_ms=47.823 destroy_ms=2.688 "
                          "free_ms=10.206 rss_start_kb=3248 rss_built_kb=33904 rss_destroyed_kb=2652 "
                          "rss_later_kb=2652 heap_pair_ns=30.10 malloc_pair_ns=13.31 ops=1000000 "
                          "secs=0.050511 ops_per_sec=1.979767e+07 ns_per_op=50.511 peak_rss_kb=33768 "
                          "checksum=499999500000",
}

SOAK_OUTPUT = """\
bench_soak epoch=0 ops=1000000 secs=0.011580 ops_per_sec=8.635485e+07 ns_per_op=11.5801 rss_kb=1828 elapsed=0.012
bench_soak epoch=1 ops=1000000 secs=0.011310 ops_per_sec=8.841800e+07 ns_per_op=11.3099 rss_kb=1960 elapsed=0.023
bench_soak epoch=2 ops=1000000 secs=0.011146 ops_per_sec=8.971684e+07 ns_per_op=11.1462 rss_kb=1964 elapsed=0.034
bench_soak seconds=0 epoch_ops=1000000 ws=400 seed=1 min=16 max=1024 epochs=3 rss_kb=1964 ops=3000000 secs=0.034 ops_per_sec=8.8e+07 ns_per_op=11.3 peak_rss_kb=1968 checksum=191
"""

STRACE_OUTPUT = """\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 96.18    0.002012          37        54           madvise
  1.58    0.000033           0        48           mprotect
  1.29    0.000027           0        29         2 mmap
  0.96    0.000020           0        21           munmap
  0.00    0.000000           0         3           brk
------ ----------- ----------- --------- --------- ----------------
100.00    0.002092          13       155         2 total
"""

STRACE_TWO_PERSONALITIES = STRACE_OUTPUT + """\
System call usage summary for 32 bit mode:
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
100.00    0.000010           1        10           mmap
------ ----------- ----------- --------- --------- ----------------
100.00    0.000010           1        10           total
"""

CALLGRIND_FILE = """\
# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 16420
cmd:  /tmp/bb/build/bench/bench_random_mixed 1000 10 1
part: 1

positions: line
events: Ir
summary: 260798

fn=(1) main
0 1
totals: 260798
"""


class ParseResultTest(unittest.TestCase):
    def test_every_program_line_parses(self):
        for prog, line in SAMPLES.items():
            with self.subTest(prog=prog):
                f = parse.parse_result(line + "\n", prog)
                self.assertEqual(f["program"], prog)
                self.assertIsInstance(f["ops"], int)
                self.assertIsInstance(f["ops_per_sec"], float)
                self.assertGreater(f["ops_per_sec"], 0)
                self.assertIsInstance(f["checksum"], int)
                self.assertIsInstance(f["peak_rss_kb"], int)

    def test_values_are_typed(self):
        f = parse.parse_result(SAMPLES["bench_random_mixed"])
        self.assertEqual(f["iters"], 20000000)
        self.assertEqual(f["ws"], 400)
        self.assertAlmostEqual(f["ops_per_sec"], 9.049774e7)
        self.assertAlmostEqual(f["secs"], 0.221)

    def test_last_result_line_wins_and_noise_is_skipped(self):
        text = ("warming up\n" + SAMPLES["bench_fixed_size"].replace("seed=1", "seed=9") + "\n"
                + "some other line ops_per_sec=5\n" + SAMPLES["bench_fixed_size"] + "\n")
        self.assertEqual(parse.parse_result(text, "bench_fixed_size")["seed"], 1)

    def test_epoch_lines_are_not_the_result(self):
        f = parse.parse_result(SOAK_OUTPUT, "bench_soak")
        self.assertEqual(f["epochs"], 3)
        self.assertNotIn("epoch", f)

    def test_other_program_is_not_taken(self):
        with self.assertRaises(parse.ParseError):
            parse.parse_result(SAMPLES["bench_larson"], "bench_prodcons")

    def test_missing_fields_are_errors(self):
        with self.assertRaises(parse.ParseError):
            parse.parse_result("bench_x ops=1 secs=1 ops_per_sec=1\n")     # no checksum
        with self.assertRaises(parse.ParseError):
            parse.parse_result("")
        with self.assertRaises(parse.ParseError):
            parse.parse_result("bench_x ops=1 secs=1 ops_per_sec=fast checksum=1")
        with self.assertRaises(parse.ParseError):
            parse.parse_result("bench_x ops=1 secs=1 ops_per_sec=1 checksum=1 garbage")

    def test_parse_fields(self):
        self.assertEqual(parse.parse_fields("p a=1 b=2.5 c=x d=-3"),
                         {"program": "p", "a": 1, "b": 2.5, "c": "x", "d": -3})
        with self.assertRaises(parse.ParseError):
            parse.parse_fields("a=1 b=2")

    def test_epochs(self):
        epochs = parse.parse_epochs(SOAK_OUTPUT)
        self.assertEqual([e["epoch"] for e in epochs], [0, 1, 2])
        self.assertEqual(epochs[1]["rss_kb"], 1960)
        self.assertAlmostEqual(epochs[2]["ns_per_op"], 11.1462)
        with self.assertRaises(parse.ParseError):
            parse.parse_epochs("bench_soak epoch=0 ops=1\n")


class ToolOutputTest(unittest.TestCase):
    def test_strace_summary(self):
        calls = parse.parse_strace_summary(STRACE_OUTPUT)
        self.assertEqual(calls, {"madvise": 54, "mprotect": 48, "mmap": 29, "munmap": 21,
                                 "brk": 3})

    def test_strace_personalities_are_summed(self):
        self.assertEqual(parse.parse_strace_summary(STRACE_TWO_PERSONALITIES)["mmap"], 39)

    def test_strace_empty_table(self):
        text = ("% time     seconds  usecs/call     calls    errors syscall\n"
                "------ ----------- ----------- --------- --------- ----------------\n"
                "------ ----------- ----------- --------- --------- ----------------\n"
                "100.00    0.000000           0         0           total\n")
        self.assertEqual(parse.parse_strace_summary(text), {})

    def test_strace_garbage(self):
        with self.assertRaises(parse.ParseError):
            parse.parse_strace_summary("strace: exec: No such file or directory\n")

    def test_callgrind(self):
        self.assertEqual(parse.parse_callgrind_total(CALLGRIND_FILE), 260798)
        self.assertEqual(parse.parse_callgrind_total("events: Ir\nsummary: 42\n"), 42)
        self.assertEqual(parse.parse_callgrind_total("==1== Collected : 1234\n"), 1234)
        with self.assertRaises(parse.ParseError):
            parse.parse_callgrind_total("events: Ir\n")

    def test_env_assignments(self):
        self.assertEqual(parse.parse_env_assignments("A=1 B='x y' C="),
                         {"A": "1", "B": "x y", "C": ""})
        self.assertEqual(parse.parse_env_assignments(""), {})
        with self.assertRaises(parse.ParseError):
            parse.parse_env_assignments("NOVALUE")


class StatsTest(unittest.TestCase):
    def test_median_mean(self):
        self.assertEqual(stats.median([3, 1, 2]), 2)
        self.assertEqual(stats.median([4, 1, 3, 2]), 2.5)
        self.assertTrue(math.isnan(stats.median([])))
        self.assertEqual(stats.mean([1, 2, 3, 6]), 3)

    def test_cv(self):
        self.assertAlmostEqual(stats.cv([10, 10, 10]), 0.0)
        # sample stdev of [9, 10, 11] is 1, mean 10
        self.assertAlmostEqual(stats.cv([9, 10, 11]), 0.1)
        self.assertEqual(stats.cv([5]), 0.0)
        self.assertTrue(math.isnan(stats.cv([])))

    def test_ratio(self):
        self.assertAlmostEqual(stats.ratio(50, 100), 0.5)
        self.assertTrue(math.isnan(stats.ratio(1, 0)))
        self.assertTrue(math.isnan(stats.ratio(None, 1)))
        self.assertTrue(math.isnan(stats.ratio(float("nan"), 1)))

    def test_percentile(self):
        v = list(range(1, 101))        # 1..100
        self.assertAlmostEqual(stats.percentile(v, 50), 50.5)
        self.assertAlmostEqual(stats.percentile(v, 0), 1)
        self.assertAlmostEqual(stats.percentile(v, 100), 100)
        self.assertAlmostEqual(stats.percentile(v, 99), 99.01)
        self.assertAlmostEqual(stats.percentile([7], 99.9), 7)
        self.assertAlmostEqual(stats.percentile([3, 1, 2], 50), 2)

    def test_mann_whitney_exact(self):
        # Completely separated samples of 5: p = 2 / C(10, 5) = 2/252.
        u, p = stats.mann_whitney_u([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
        self.assertEqual(u, 0)
        self.assertAlmostEqual(p, 2 / 252)
        u, p = stats.mann_whitney_u([6, 7, 8, 9, 10], [1, 2, 3, 4, 5])
        self.assertEqual(u, 25)
        self.assertAlmostEqual(p, 2 / 252)
        # Interleaved samples: no evidence.
        u, p = stats.mann_whitney_u([1, 3, 5, 7, 9], [2, 4, 6, 8, 10])
        self.assertGreater(p, 0.5)
        # Three against three can never reach 0.05 (minimum 2/20).
        _, p = stats.mann_whitney_u([1, 2, 3], [4, 5, 6])
        self.assertAlmostEqual(p, 0.1)

    def test_mann_whitney_exact_distribution_small(self):
        # n1=1, n2=2: U in {0,1,2} each with probability 1/3.
        self.assertEqual(stats._mw_counts(1, 2), [1, 1, 1])
        self.assertEqual(sum(stats._mw_counts(4, 6)), math.comb(10, 4))

    def test_mann_whitney_ties_use_normal_approximation(self):
        u, p = stats.mann_whitney_u([1, 1, 2, 2, 3], [1, 2, 2, 3, 3])
        self.assertTrue(0 < p <= 1)
        u, p = stats.mann_whitney_u([5, 5, 5, 5], [5, 5, 5, 5])
        self.assertEqual(p, 1.0)

    def test_bootstrap_is_deterministic_and_sensible(self):
        a = [100, 101, 99, 100.5, 99.5, 100.2]
        b = [110, 111, 109, 110.5, 109.5, 110.2]
        lo, hi = stats.bootstrap_delta_ci(a, b)
        self.assertEqual((lo, hi), stats.bootstrap_delta_ci(a, b))
        self.assertTrue(8 < lo <= hi < 12, (lo, hi))

    def test_verdict_significant(self):
        a = [100, 101, 99, 100.5, 99.5, 100.2, 100.1, 99.8]
        b = [x * 1.05 for x in a]
        v = stats.verdict(a, b)
        self.assertTrue(v["significant"])
        self.assertAlmostEqual(v["delta_pct"], 5.0, places=6)
        self.assertIn("better", v["text"])
        v = stats.verdict(b, a)
        self.assertTrue(v["significant"])
        self.assertIn("worse", v["text"])

    def test_verdict_noise(self):
        a = [100, 103, 97, 101, 99, 102, 98, 100]
        b = [101, 98, 102, 99, 100, 97, 103, 100.5]
        v = stats.verdict(a, b)
        self.assertFalse(v["significant"])
        self.assertIn("noise", v["text"])

    def test_verdict_too_few_runs(self):
        v = stats.verdict([1, 2, 3], [10, 11, 12])
        self.assertFalse(v["significant"])
        self.assertIn("not enough", v["text"])

    def test_drift(self):
        first, last, pct = stats.drift([10, 10, 20, 20], 2)
        self.assertEqual((first, last), (10, 20))
        self.assertAlmostEqual(pct, 100.0)

    def test_syscalls_per_op(self):
        short = (1000000, {"mmap": 30, "munmap": 5, "brk": 3})
        long_ = (5000000, {"mmap": 34, "munmap": 9, "brk": 3, "madvise": 8, "mprotect": 4})
        per, total = stats.syscalls_per_op(short, long_)
        self.assertAlmostEqual(per["mmap"], 1e-6)
        self.assertAlmostEqual(per["madvise"], 2e-6)
        self.assertAlmostEqual(per["mprotect"], 1e-6)
        self.assertAlmostEqual(total, 4e-6)          # mprotect is not in the total
        with self.assertRaises(ValueError):
            stats.syscalls_per_op(long_, short)

    def test_syscall_cell_falls_back_on_bursty_runs(self):
        short = (60000, {"madvise": 20000})
        long_ = (300000, {"madvise": 12000, "mmap": 30, "mprotect": 1000})
        per, total = stats.syscalls_per_op(short, long_)
        sc = {"per_op": per, "total_per_op": total, "short": short, "long": long_}
        self.assertLess(total, 0)
        self.assertEqual(report.fmt_syscall_cell(sc), "0.04*")     # (12000 + 30) / 300000
        per, total = stats.syscalls_per_op(long_, (600000, {"madvise": 24000, "mmap": 30}))
        sc = {"per_op": per, "total_per_op": total, "short": long_, "long": None}
        self.assertEqual(report.fmt_syscall_cell(sc), "0.04")

    def test_instructions_per_op(self):
        self.assertAlmostEqual(stats.instructions_per_op((200000, 1_000_000 + 200000 * 56),
                                                         (400000, 1_000_000 + 400000 * 56)), 56)
        with self.assertRaises(ValueError):
            stats.instructions_per_op((2, 10), (1, 5))

    def test_soak_stats(self):
        epochs = [{"epoch": i, "ops": 10, "secs": 1.0, "ops_per_sec": 100.0 + (i % 2),
                   "ns_per_op": float(i + 1), "rss_kb": 1000 + (50 if i == 0 else 0)}
                  for i in range(21)]
        st = stats.soak_stats(epochs)
        self.assertEqual(st["epochs"], 21)
        self.assertEqual(st["window"], 2)
        self.assertAlmostEqual(st["rss_drift_kb"], 0)       # epoch 0 left out
        self.assertAlmostEqual(st["ns_p50"], 11)
        self.assertAlmostEqual(st["ns_p99"], 20.8)
        self.assertEqual(st["rss_max_kb"], 1050)
        self.assertLess(st["cv"], 0.01)


class ReportTest(unittest.TestCase):
    def test_readme_block_replacement(self):
        text = "intro\n<!-- bench:begin -->\nold table\n<!-- bench:end -->\nrest\n"
        new = report.replace_readme_block(text, "new table\n")
        self.assertEqual(new, "intro\n<!-- bench:begin -->\nnew table\n<!-- bench:end -->\nrest\n")
        self.assertEqual(report.replace_readme_block(new, "new table"), new)
        with self.assertRaises(parse.ParseError):
            report.replace_readme_block("no markers", "x")

    def test_report_source_is_the_runs_revision(self):
        # The report names the revision read when the run began (machine["rev"]),
        # not one read after the run wrote its own tracked result files, which
        # made every report of a clean tree say "-dirty".
        import tempfile
        machine = {"nproc": 2, "cpu": "cpu", "arch": "x86_64", "kernel": "6", "glibc": "2.36",
                   "rev": "abc1234"}
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "r.md")
            report.write_report_md(path, "2026-01-01", "quick", machine, "cmd", [], [], 1, 1.0,
                                   "block", {})
            with open(path, encoding="utf-8") as f:
                text = f.read()
        self.assertIn("Source: abc1234.  ", text)
        self.assertNotIn("dirty", text)

    def test_extract_block(self):
        md = "# r\n%s\nthe block\n%s\nmore" % (common.BLOCK_BEGIN, common.BLOCK_END)
        self.assertEqual(report.extract_block(md), "the block")

    def test_markdown_table(self):
        t = report.markdown_table(["a", "b"], [[1, 2]])
        self.assertEqual(t.splitlines(), ["| a | b |", "|---|---:|", "| 1 | 2 |"])

    def test_secure_mean_leaves_out_uncompared_workloads(self):
        class W:
            def __init__(self, name, compared):
                self.name, self.compared = name, compared
        ws = [W("a", True), W("b", True), W("thread_mem", False)]
        summary = {("a", "hakmem"): {"median": 100.0}, ("a", "hakmem-secure"): {"median": 50.0},
                   ("b", "hakmem"): {"median": 100.0}, ("b", "hakmem-secure"): {"median": 200.0},
                   ("thread_mem", "hakmem"): {"median": 1.0}, ("thread_mem", "hakmem-secure"): {"median": 6.0}}
        table, gm = report.secure_cost_table(ws, summary)
        self.assertAlmostEqual(gm, 1.0)  # sqrt(0.5 * 2.0): thread_mem's 6.0 left out
        self.assertIn("(not in the mean)", table.splitlines()[4])

    def test_formatting(self):
        self.assertEqual(report.fmt_mops(1.0123e8), "101.2")
        self.assertEqual(report.fmt_pct(0.0123), "1.2%")
        self.assertEqual(report.fmt_rate(0), "0")
        self.assertEqual(report.fmt_rate(1.25e-7), "1.2e-07")
        self.assertEqual(report.fmt_mb(2048), "2.0")
        self.assertEqual(report.fmt_ratio(float("nan")), "-")

    def test_checksum_mismatch_is_reported(self):
        w = workloads.WORKLOADS[0]
        allocs = [allocators.Allocator("glibc"), allocators.Allocator("hakmem", "/x.so")]
        summary = {(w.name, "glibc"): {"checksum": 5}, (w.name, "hakmem"): {"checksum": 6}}
        self.assertEqual(len(compare.checksum_notes([w], allocs, summary)), 1)
        summary[(w.name, "hakmem")]["checksum"] = 5
        self.assertEqual(compare.checksum_notes([w], allocs, summary), [])

    def test_workloads_have_sane_lengths(self):
        for w in workloads.WORKLOADS:
            with self.subTest(w=w.name):
                self.assertLess(w.trace[0], w.trace[1])
                self.assertLessEqual(w.quick, w.full)
                if w.callgrind:
                    self.assertLess(w.callgrind[0], w.callgrind[1])

    def test_every_program_has_a_sample_and_a_workload(self):
        programs = {w.program for w in workloads.WORKLOADS}
        self.assertLessEqual(programs, set(SAMPLES))

    def test_figure_of_a_workload_is_tabled_per_allocator(self):
        w = workloads.WORKLOAD_BY_NAME["thread_mem"]
        allocs = [allocators.Allocator("hakmem", "/x.so"), allocators.Allocator("glibc")]
        runs = {}
        for a, kb in (("hakmem", [40.0, 50.0, 60.0]), ("glibc", [20.0, 30.0])):
            for v in kb:
                r = runner.RunResult([], 0, "", "", 0.1, 1000)
                r.fields = parse.parse_result(
                    SAMPLES["bench_thread_mem"].replace("rss_per_thread_kb=484.3",
                                                        "rss_per_thread_kb=%s" % v))
                runs.setdefault((w.name, a), []).append(r)
        summary = compare.summarize([w], allocs, runs, {})
        self.assertEqual(summary[(w.name, "hakmem")]["figure"], 50.0)
        self.assertEqual(summary[(w.name, "glibc")]["figure"], 25.0)
        main, _ = report.build_tables([w], allocs, summary)
        self.assertIn("| thread_mem: RSS per idle thread, KiB | 50 | 25 |", main)
        # its throughput is not the point: no ratio
        self.assertIn("| n/a |", main.splitlines()[2])

    def test_cpu_time_ratios_are_paired_round_by_round(self):
        # Round i of each allocator is paired with round i of the others: a
        # slow round (the machine busy) moves both sides, not the ratio.
        w = workloads.WORKLOAD_BY_NAME["churn_fill"]
        allocs = [allocators.Allocator("hakmem", "/x.so"), allocators.Allocator("hakmem-std", "/y.so"),
                  allocators.Allocator("mimalloc", "/m.so"), allocators.Allocator("old", "/o.so", extra=True)]
        cpus = {"hakmem": [1.0, 2.0, 1.0], "hakmem-std": [1.0, 2.0, 2.0], "mimalloc": [1.1, 2.2, 0.9],
                "old": [5.0, 5.0, 5.0]}
        runs = {}
        for a, cs in cpus.items():
            for c in cs:
                r = runner.RunResult([], 0, "", "", 0.1, 1000, cpu=c)
                r.fields = parse.parse_result(SAMPLES["bench_slot_churn"])
                runs.setdefault((w.name, a), []).append(r)
        table = compare.cpu_time_table([w], allocs, runs)
        # mimalloc/hakmem per round 1.1, 1.1, 0.9; mimalloc/hakmem-std 1.1, 1.1, 0.45
        self.assertIn("| mimalloc / hakmem / hakmem-std |", table)
        self.assertIn("| churn_fill | 1.10 / 1.10 |", table)
        self.assertNotIn("old", table)  # --lib libraries are not peers
        failed = runner.RunResult([], 1, "", "", 0.1, 1000, cpu=0.1)
        self.assertIsNone(compare.paired_cpu_ratio([failed], runs[(w.name, "mimalloc")][:1]))

    def test_bytes_in_flight_are_shown_beside_the_rss(self):
        # bench_prodcons counts the bytes it holds at its peak; the RSS table
        # is followed by their range over every run of every allocator.
        w = workloads.WORKLOAD_BY_NAME["prodcons"]
        other = workloads.WORKLOAD_BY_NAME["fifo"]
        allocs = [allocators.Allocator("hakmem", "/x.so"), allocators.Allocator("glibc")]
        runs = {}
        for a, lives in (("hakmem", [2146, 2160]), ("glibc", [2150, 2600])):
            for v in lives:
                r = runner.RunResult([], 0, "", "", 0.1, 1000)
                r.fields = parse.parse_result(SAMPLES["bench_prodcons"].replace(
                    "peak_live_kb=2146", "peak_live_kb=%d" % v))
                runs.setdefault((w.name, a), []).append(r)
            r = runner.RunResult([], 0, "", "", 0.1, 1000)
            r.fields = parse.parse_result(SAMPLES["bench_fifo"])
            runs.setdefault((other.name, a), []).append(r)
        summary = compare.summarize([w, other], allocs, runs, {})
        self.assertEqual(summary[(w.name, "glibc")]["live_kb"], [2150, 2600])
        self.assertEqual(summary[(other.name, "glibc")]["live_kb"], [])
        main, _ = report.build_tables([w, other], allocs, summary)
        self.assertIn("over all runs): prodcons 2.1-2.5 MB.", main)
        self.assertIsNone(report.live_note([other], ["hakmem", "glibc"], summary))

    def test_smoke_checks_of_the_cross_thread_programs(self):
        # check_output.py (the smoke tests) replays bench_prodcons's sizes:
        # the peak must hold at least a full ring, which its consumer waits for.
        sys.path.insert(0, HERE)
        import check_output
        line = parse.parse_result(SAMPLES["bench_prodcons"])
        self.assertIsNone(check_output.program_checks("bench_prodcons", line))
        self.assertEqual(check_output.prodcons_first_bytes(0, 4096, 16, 1024) // 1024, 2087)
        low = dict(line, peak_live_kb=300)
        self.assertIn("did not wait", check_output.program_checks("bench_prodcons", low))
        old = {k: v for k, v in line.items() if k != "peak_live_kb"}
        self.assertIn("no peak_live_kb", check_output.program_checks("bench_prodcons", old))
        mix = parse.parse_result(SAMPLES["bench_sizemix"])
        self.assertIsNone(check_output.program_checks("bench_sizemix", mix))
        self.assertIn("late=None", check_output.program_checks(
            "bench_sizemix", {k: v for k, v in mix.items() if k != "late"}))

    def test_entry_point_lists_every_workload(self):
        import subprocess
        out = subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "scripts", "bench.py"),
                              "--build-dir", "/nonexistent", "--list"],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        listed = [line.split()[0] for line in out.stdout.splitlines()]
        self.assertEqual(listed, [w.name for w in workloads.WORKLOADS])

    def test_optional_peers_directory(self):
        import tempfile
        self.assertEqual(allocators.peers_dir_candidates("/r/repo", {"HAKMEM_PEERS_DIR": ""}), [])
        self.assertEqual(allocators.peers_dir_candidates("/r/repo", {"HAKMEM_PEERS_DIR": "/p"}),
                         ["/p"])
        self.assertEqual(allocators.peers_dir_candidates("/nonexistent/repo", {})[0],
                         "/nonexistent/shared/peers")
        with tempfile.TemporaryDirectory() as d:
            self.assertIsNone(allocators.find_optional_peer("snmalloc", [d]))
            open(os.path.join(d, "libsnmallocshim.so"), "w").close()
            self.assertEqual(allocators.find_optional_peer("snmalloc", ["/nonexistent", d]),
                             os.path.join(d, "libsnmallocshim.so"))
            self.assertIsNone(allocators.find_optional_peer("rpmalloc", [d]))

    def test_extra_libraries(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            open(os.path.join(d, "libhakmem.so"), "w").close()
            a, = allocators.extra_allocators(["before=" + d])
            self.assertEqual((a.name, a.preload, a.extra),
                             ("before", os.path.join(os.path.abspath(d), "libhakmem.so"), True))
            for bad in ("before", "=x", "mimalloc=" + d, "x=/nonexistent.so"):
                with self.assertRaises(SystemExit):
                    allocators.extra_allocators([bad])

    def test_best_peer_ratio_column(self):
        w = workloads.WORKLOADS[0]
        allocs = [allocators.Allocator(n, None if n == "glibc" else "/%s.so" % n)
                  for n in ("hakmem", "glibc", "mimalloc", "snmalloc", "rpmalloc")]
        summary = {}
        for a, med in zip(allocs, (120.0, 200.0, 100.0, 80.0, float("nan"))):
            summary[(w.name, a.name)] = {"n": 0 if med != med else 3, "failed": 0,
                                         "median": med, "cv": 0.0, "rss_kb": 1024.0,
                                         "syscalls": None}
        self.assertEqual(report.best_peer(summary, w.name, ["mimalloc", "snmalloc", "rpmalloc"]),
                         "mimalloc")
        main, _ = report.build_tables([w], allocs, summary)
        self.assertIn("hakmem/best peer", main)
        self.assertIn("1.20 (mimalloc)", main)

    def test_best_debian_peer_column(self):
        # With optional peers present, the Debian peers' best gets its own
        # column: snmalloc wins overall, tcmalloc among the Debian ones.
        w = workloads.WORKLOADS[0]
        names = ("hakmem", "glibc", "mimalloc", "jemalloc", "tcmalloc", "snmalloc")
        allocs = [allocators.Allocator(n, None if n == "glibc" else "/%s.so" % n) for n in names]
        summary = {(w.name, n): {"n": 3, "failed": 0, "median": med, "cv": 0.0,
                                 "rss_kb": 1024.0, "syscalls": None}
                   for n, med in zip(names, (110.0, 50.0, 80.0, 90.0, 100.0, 200.0))}
        main, _ = report.build_tables([w], allocs, summary)
        self.assertIn("hakmem/best of mimalloc, jemalloc, tcmalloc", main)
        self.assertIn("1.10 (tcmalloc)", main)
        self.assertIn("0.55 (snmalloc)", main)

    def test_standard_build_columns_and_targets(self):
        # The standard build gets its own best-of-Debian ratio; the targets
        # table judges both builds (ratio and, where asked, RSS vs mimalloc).
        w = workloads.WORKLOAD_BY_NAME["stress"]
        names = ("hakmem", "hakmem-std", "glibc", "mimalloc", "jemalloc", "tcmalloc",
                 "snmalloc")
        allocs = [allocators.Allocator(n, None if n == "glibc" else "/%s.so" % n,
                                       extra=(n == "hakmem-std")) for n in names]
        meds = (120.0, 105.0, 50.0, 100.0, 90.0, 80.0, 200.0)
        rss = (10.0, 12.0, 5.0, 11.0, 9.0, 9.0, 9.0)
        summary = {(w.name, n): {"n": 3, "failed": 0, "median": m, "cv": 0.0,
                                 "rss_kb": r * 1024, "syscalls": None}
                   for n, m, r in zip(names, meds, rss)}
        main, _ = report.build_tables([w], allocs, summary)
        self.assertIn("hakmem-std/best of mimalloc, jemalloc, tcmalloc", main)
        first = main.splitlines()[2]
        self.assertIn("| 1.20 (mimalloc) | 1.05 (mimalloc) | 0.60 (snmalloc) |", first)
        self.assertIn("Median peak resident memory", main)
        self.assertIn("| stress | 10.0 | 12.0 | 5.0 | 11.0 |", main)
        # fast: 1.20 and 10 <= 11 MB; standard: 1.05 < 1.10 and 12 > 11 MB
        # (the median of paired ratios first, the ratio of the medians beside it: 2bef928)
        self.assertIn("| 1.20 (mimalloc; medians 1.20), RSS 10.0/11.0 MB (paired 0.909)"
                      " | 1.05 (mimalloc; medians 1.05), RSS 12.0/11.0 MB (paired 1.091) | no |", main)
        from hakbench import targets
        self.assertEqual(targets.check(summary, "stress", "hakmem", "debian", 1.10, True,
                                       names)[1], True)
        self.assertEqual(targets.check(summary, "stress", "hakmem-std", "debian", 1.10, True,
                                       names)[1], False)

    def test_cachegrind_summary(self):
        text = ("desc: I1 cache: 32768 B, 64 B, 8-way associative\ncmd: ./x 1\n"
                "events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw \nfl=a.c\n"
                "summary: 19897872 1658 1614 4871541 50785 1077 2776749 2676 1698\n")
        ev = parse.parse_cachegrind_summary(text)
        self.assertEqual(ev["Ir"], 19897872)
        self.assertEqual(ev["D1mw"], 2676)
        with self.assertRaises(parse.ParseError):
            parse.parse_cachegrind_summary("events: Ir D1mr\nsummary: 5\n")
        with self.assertRaises(parse.ParseError):
            parse.parse_cachegrind_summary("nothing here")

    def test_cache_figures_are_differences_per_op(self):
        from hakbench import instructions
        short = {"cache": (1000, {"D1mr": 100, "D1mw": 50, "DLmr": 10, "DLmw": 0}),
                 "tlb": (1000, {"D1mr": 7, "D1mw": 3, "DLmr": 1, "DLmw": 1})}
        long_ = {"cache": (3000, {"D1mr": 400, "D1mw": 150, "DLmr": 10, "DLmw": 0}),
                 "tlb": (3000, {"D1mr": 207, "D1mw": 3, "DLmr": 1, "DLmw": 1})}
        f = instructions.cache_figures(short, long_)
        self.assertAlmostEqual(f["d1"], 0.2)
        self.assertAlmostEqual(f["ll"], 0.0)
        self.assertAlmostEqual(f["tlb64"], 0.1)
        self.assertAlmostEqual(f["tlb1536"], 0.0)
        self.assertEqual(instructions.cache_figures({}, {}), {})

    def test_lock_lines(self):
        from hakbench import locks
        report_text = ("HAKMEM statistics\n  refill 12\nlock segment 267\nlock heap_pool 9\n"
                       "  lock in a sentence 5 words\nlock abandoned 58\n")
        self.assertEqual(locks.parse_lock_lines(report_text),
                         {"segment": 267, "heap_pool": 9, "abandoned": 58})
        self.assertEqual(locks.parse_lock_lines("HAKMEM statistics\n  refill 12\n"), {})

    def test_lock_rates_per_million_ops(self):
        from hakbench import locks
        r = locks.per_million((1000000, {"segment": 100, "abandoned": 58}),
                              (3000000, {"segment": 300, "abandoned": 4, "large": 2}))
        self.assertEqual(r["segment"], (100.0, False))
        self.assertEqual(r["large"], (1.0, False))
        # fewer in the longer run: its whole-run average, marked
        self.assertAlmostEqual(r["abandoned"][0], 4 / 3.0)
        self.assertTrue(r["abandoned"][1])
        with self.assertRaises(ValueError):
            locks.per_million((10, {}), (10, {}))
        w = workloads.WORKLOADS[:2]
        table = locks.lock_table(w, {w[0].name: r, w[1].name: None},
                                 ["segment", "large", "abandoned"])
        self.assertIn("| %s | 100 | 1 | 1.33* | 102* |" % w[0].name, table)
        self.assertIn("| %s | FAIL | FAIL | FAIL | FAIL |" % w[1].name, table)
        self.assertIn("whole-run average", table)

    def test_allocator_environment(self):
        base = {"LD_PRELOAD": "/old.so", "PATH": "/bin"}
        env = allocators.Allocator("glibc").environment(base)
        self.assertNotIn("LD_PRELOAD", env)
        env = allocators.Allocator("mi", "/mi.so", {"X": "1"}).environment(base)
        self.assertEqual(env["LD_PRELOAD"], "/mi.so")
        self.assertEqual(env["X"], "1")


if __name__ == "__main__":
    unittest.main()
