#!/usr/bin/env python3
"""HAKMEM benchmark runner (python3 standard library only).

Runs the programs in bench/ (built into <build-dir>/bench/) under HAKMEM and
under the peer allocators found on this machine, alternating allocators run by
run, and reports median throughput, its spread, peak resident memory and
memory system calls per operation.

  scripts/bench.py --build-dir build-fast            quick comparison (~3-5 min)
  scripts/bench.py --build-dir build-fast --full     more iterations, more runs
  scripts/bench.py --ab --a-env HAKMEM_PROFILE=speed --b-env HAKMEM_PROFILE=lean
  scripts/bench.py --soak 600 [--allocator hakmem,mimalloc]
  scripts/bench.py --instructions                    callgrind instructions/op
  scripts/bench.py --update-readme                   latest table into README.md

Allocators: hakmem (<build-dir>/libhakmem.so), glibc (no preload), mimalloc,
jemalloc and tcmalloc (Debian packages; scripts/install-peers.sh installs
them).  Results go to bench/results/<date>.{md,csv,png}.
"""

import argparse
import datetime
import math
import os
import random
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS_DIR = os.path.join(ROOT, "bench", "results")
README_BEGIN = "<!-- bench:begin -->"
README_END = "<!-- bench:end -->"
BLOCK_BEGIN = "<!-- readme:begin -->"
BLOCK_END = "<!-- readme:end -->"
MEMORY_SYSCALLS = ("mmap", "munmap", "madvise", "brk", "mremap")
# Reported beside them, not in the total: glibc commits memory in its thread
# arenas with mprotect.
EXTRA_SYSCALLS = ("mprotect",)
INSTALL_HINT = "scripts/install-peers.sh"


class ParseError(ValueError):
    """A program's output or a tool's report could not be understood."""


# --------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------

_INT_RE = re.compile(r"^[+-]?\d+$")


def _convert(value):
    if _INT_RE.match(value):
        return int(value)
    try:
        return float(value)
    except ValueError:
        return value


def parse_fields(line):
    """'prog a=1 b=2.5 c=x' -> {'program': 'prog', 'a': 1, 'b': 2.5, 'c': 'x'}."""
    tokens = line.split()
    if not tokens or "=" in tokens[0]:
        raise ParseError("no program name at the start of %r" % line)
    out = {"program": tokens[0]}
    for tok in tokens[1:]:
        key, sep, value = tok.partition("=")
        if not sep or not key:
            raise ParseError("token %r in %r is not key=value" % (tok, line))
        out[key] = _convert(value)
    return out


REQUIRED_RESULT_KEYS = ("ops", "secs", "ops_per_sec", "checksum")


def parse_result(text, program=None):
    """The result line of a benchmark program's stdout.

    The result line is the last line that starts with the program's name (any
    name starting with "bench_" when program is None), carries ops_per_sec=
    and is not a per-epoch line (no epoch=)."""
    found = None
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        name = line.split(None, 1)[0]
        if program is not None and name != program:
            continue
        if program is None and not name.startswith("bench_"):
            continue
        if "ops_per_sec=" not in line or " epoch=" in line:
            continue
        found = line
    if found is None:
        raise ParseError("no result line%s in output: %r"
                         % (" of " + program if program else "", text[-300:]))
    fields = parse_fields(found)
    for key in REQUIRED_RESULT_KEYS:
        if key not in fields:
            raise ParseError("result line lacks %s=: %r" % (key, found))
        if not isinstance(fields[key], (int, float)):
            raise ParseError("%s= is not a number in %r" % (key, found))
    if fields["ops_per_sec"] < 0 or fields["ops"] < 0:
        raise ParseError("negative figures in %r" % found)
    return fields


def parse_epochs(text):
    """Per-epoch lines of bench_soak, in order."""
    epochs = []
    for line in text.splitlines():
        line = line.strip()
        if " epoch=" not in line or not line.startswith("bench_"):
            continue
        f = parse_fields(line)
        for key in ("epoch", "ops", "secs", "ops_per_sec", "ns_per_op", "rss_kb"):
            if key not in f:
                raise ParseError("epoch line lacks %s=: %r" % (key, line))
        epochs.append(f)
    return epochs


_STRACE_ROW = re.compile(
    r"^\s*(?P<pct>[\d.]+)\s+(?P<secs>[\d.]+)\s+(?P<usecs>\d+)\s+(?P<calls>\d+)"
    r"\s+(?:(?P<errors>\d+)\s+)?(?P<name>[A-Za-z_][\w]*)\s*$")


def parse_strace_summary(text):
    """Calls per system call from `strace -c` output (all personalities).

    Returns {name: calls}; the 'total' row is left out."""
    calls = {}
    seen_header = False
    for line in text.splitlines():
        if line.lstrip().startswith("% time"):
            seen_header = True
            continue
        m = _STRACE_ROW.match(line)
        if not m:
            continue
        name = m.group("name")
        if name == "total":
            continue
        calls[name] = calls.get(name, 0) + int(m.group("calls"))
    if not seen_header:
        raise ParseError("no strace -c summary table in %r" % text[-300:])
    return calls


def parse_callgrind_total(text):
    """Total Ir of a callgrind output file ('totals:' or 'summary:' line), or
    of valgrind's stderr ('Collected : N')."""
    for pattern in (r"^totals:\s+(\d+)", r"^summary:\s+(\d+)", r"Collected\s*:\s*(\d+)"):
        m = re.search(pattern, text, re.MULTILINE)
        if m:
            return int(m.group(1))
    raise ParseError("no totals/summary line in callgrind output")


def parse_env_assignments(spec):
    """'A=1 B="x y"' -> {'A': '1', 'B': 'x y'}."""
    env = {}
    for tok in shlex.split(spec or ""):
        key, sep, value = tok.partition("=")
        if not sep or not key:
            raise ParseError("%r is not NAME=VALUE" % tok)
        env[key] = value
    return env


# --------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------

def median(values):
    values = list(values)
    if not values:
        return float("nan")
    return statistics.median(values)


def mean(values):
    values = list(values)
    return statistics.fmean(values) if values else float("nan")


def cv(values):
    """Coefficient of variation: sample standard deviation / mean (0 for n=1)."""
    values = list(values)
    if not values:
        return float("nan")
    if len(values) < 2:
        return 0.0
    m = statistics.fmean(values)
    if m == 0:
        return float("nan")
    return statistics.stdev(values) / m


def ratio(a, b):
    """a / b, NaN when either side is missing or b is zero."""
    if a is None or b is None:
        return float("nan")
    try:
        if b == 0 or math.isnan(a) or math.isnan(b):
            return float("nan")
    except TypeError:
        return float("nan")
    return a / b


def percentile(values, p):
    """Linear-interpolation percentile (p in 0..100), as numpy's default."""
    values = sorted(values)
    if not values:
        return float("nan")
    if len(values) == 1:
        return float(values[0])
    rank = (len(values) - 1) * p / 100.0
    lo = int(math.floor(rank))
    hi = min(lo + 1, len(values) - 1)
    frac = rank - lo
    return values[lo] + (values[hi] - values[lo]) * frac


def _mw_counts(m, n, memo={}):
    """Number of orderings of m A's and n B's for each value of U (A above B)."""
    key = (m, n)
    if key in memo:
        return memo[key]
    if m == 0 or n == 0:
        res = [1]
    else:
        a = _mw_counts(m - 1, n)    # largest value is an A: it beats all n B's
        b = _mw_counts(m, n - 1)    # largest value is a B: it beats nothing
        res = [0] * (m * n + 1)
        for u, c in enumerate(a):
            res[u + n] += c
        for u, c in enumerate(b):
            res[u] += c
    memo[key] = res
    return res


def mann_whitney_u(a, b):
    """Two-sided Mann-Whitney U test.  Returns (U of a, p-value).

    Exact distribution when there are no ties and both samples have at most 30
    values; otherwise the normal approximation with tie and continuity
    corrections."""
    a, b = list(a), list(b)
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        return float("nan"), float("nan")
    u = 0.0
    for x in a:
        for y in b:
            if x > y:
                u += 1.0
            elif x == y:
                u += 0.5
    pooled = a + b
    ties = len(set(pooled)) != len(pooled)
    if not ties and n1 <= 30 and n2 <= 30:
        counts = _mw_counts(n1, n2)
        total = float(sum(counts))
        k = int(round(u))
        p_le = sum(counts[:k + 1]) / total
        p_ge = sum(counts[k:]) / total
        return u, min(1.0, 2.0 * min(p_le, p_ge))
    n = n1 + n2
    mu = n1 * n2 / 2.0
    tie_term = 0.0
    for v in set(pooled):
        t = pooled.count(v)
        tie_term += t ** 3 - t
    var = n1 * n2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1)))
    if var <= 0:
        return u, 1.0
    z = (abs(u - mu) - 0.5) / math.sqrt(var)
    if z < 0:
        z = 0.0
    return u, min(1.0, math.erfc(z / math.sqrt(2.0)))


def bootstrap_delta_ci(a, b, resamples=2000, seed=12345, level=0.95):
    """Bootstrap confidence interval of (median(b) - median(a)) / median(a), in %."""
    a, b = list(a), list(b)
    if not a or not b:
        return float("nan"), float("nan")
    rng = random.Random(seed)
    deltas = []
    for _ in range(resamples):
        ma = statistics.median(rng.choices(a, k=len(a)))
        mb = statistics.median(rng.choices(b, k=len(b)))
        if ma != 0:
            deltas.append((mb - ma) / ma * 100.0)
    if not deltas:
        return float("nan"), float("nan")
    tail = (1.0 - level) / 2.0 * 100.0
    return percentile(deltas, tail), percentile(deltas, 100.0 - tail)


def verdict(a, b, alpha=0.05, higher_is_better=True, label_a="A", label_b="B"):
    """Compare samples a and b (e.g. ops/s of two builds).

    A difference is called only when the two-sided Mann-Whitney p-value is
    below alpha AND the bootstrap 95% interval of the delta of medians
    excludes zero; otherwise the delta is within the noise."""
    a, b = list(a), list(b)
    ma, mb = median(a), median(b)
    delta = ratio(mb - ma, ma) * 100.0 if a and b else float("nan")
    _, p = mann_whitney_u(a, b)
    lo, hi = bootstrap_delta_ci(a, b)
    significant = (not math.isnan(p) and p < alpha and not math.isnan(lo)
                   and (lo > 0 or hi < 0))
    if significant:
        better = (delta > 0) == higher_is_better
        text = "%s %s than %s by %.1f%% (p=%.3g)" % (
            label_b, "better" if better else "worse", label_a, abs(delta), p)
    elif len(a) < 4 or len(b) < 4:
        text = "not enough runs for a verdict (need >= 4 per side)"
    else:
        text = "no difference outside the noise (p=%.3g)" % p
    return {"median_a": ma, "median_b": mb, "delta_pct": delta, "p": p,
            "ci_low": lo, "ci_high": hi, "significant": significant, "text": text}


def drift(values, window):
    """(mean of first window, mean of last window, change in %)."""
    values = list(values)
    if not values:
        return float("nan"), float("nan"), float("nan")
    window = max(1, min(window, len(values)))
    first = mean(values[:window])
    last = mean(values[-window:])
    return first, last, ratio(last - first, first) * 100.0


def syscalls_per_op(short, long_):
    """Memory system calls per operation from two runs of different length.

    short/long_: (ops, {syscall: calls}).  The difference of the two cancels
    start-up and warm-up.  Returns ({name: per_op}, total_per_op)."""
    ops_s, calls_s = short
    ops_l, calls_l = long_
    dops = ops_l - ops_s
    if dops <= 0:
        raise ValueError("the long run must do more operations than the short one")
    per = {}
    for name in MEMORY_SYSCALLS + EXTRA_SYSCALLS:
        per[name] = (calls_l.get(name, 0) - calls_s.get(name, 0)) / dops
    return per, sum(per[name] for name in MEMORY_SYSCALLS)


def instructions_per_op(short, long_):
    """(ops, Ir) of two run lengths -> instructions per operation."""
    ops_s, ir_s = short
    ops_l, ir_l = long_
    if ops_l <= ops_s:
        raise ValueError("the long run must do more operations than the short one")
    return (ir_l - ir_s) / float(ops_l - ops_s)


# --------------------------------------------------------------------------
# Formatting
# --------------------------------------------------------------------------

def fmt_num(v, digits=3):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return "%.*g" % (digits, v)


def fmt_mops(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return "%.1f" % (v / 1e6) if v >= 1e6 else "%.3f" % (v / 1e6)


def fmt_pct(v, digits=1):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return "%.*f%%" % (digits, v * 100.0)


def fmt_ratio(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return "%.2f" % v


def fmt_mb(kb):
    if kb is None or (isinstance(kb, float) and math.isnan(kb)):
        return "-"
    return "%.1f" % (kb / 1024.0)


def fmt_rate(v):
    """Per-operation rates such as syscalls/op: 0, 1.2e-07 ..."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if v == 0:
        return "0"
    return "%.2g" % v


def markdown_table(header, rows):
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    for row in rows:
        out.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(out)


def fmt_duration(secs):
    secs = int(round(secs))
    return "%dm%02ds" % (secs // 60, secs % 60) if secs >= 60 else "%ds" % secs


# --------------------------------------------------------------------------
# Allocators
# --------------------------------------------------------------------------

LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
            "/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
            "/usr/lib64", "/usr/lib", "/usr/local/lib")
PEERS = (
    ("mimalloc", ("libmimalloc.so.2", "libmimalloc.so"), "libmimalloc2.0", "libmimalloc-dev"),
    ("jemalloc", ("libjemalloc.so.2", "libjemalloc.so"), "libjemalloc2", "libjemalloc-dev"),
    ("tcmalloc", ("libtcmalloc_minimal.so.4", "libtcmalloc_minimal.so", "libtcmalloc.so.4"),
     "libtcmalloc-minimal4", "libtcmalloc-minimal4"),
)
ALL_ALLOCATORS = ("hakmem", "glibc", "mimalloc", "jemalloc", "tcmalloc")


class Allocator:
    def __init__(self, name, preload=None, env=None, package=None):
        self.name = name
        self.preload = preload      # path to LD_PRELOAD, None for the C library
        self.env = dict(env or {})  # extra environment (A/B settings)
        self.package = package

    def environment(self, base=None):
        env = dict(os.environ if base is None else base)
        env.pop("LD_PRELOAD", None)
        env.update(self.env)
        if self.preload:
            env["LD_PRELOAD"] = self.preload
        return env

    def __repr__(self):
        return "Allocator(%r, %r)" % (self.name, self.preload)


def find_peer_library(names, dirs=LIB_DIRS):
    for d in dirs:
        for n in names:
            path = os.path.join(d, n)
            if os.path.exists(path):
                return path
    return None


def package_version(package):
    if not package or not shutil.which("dpkg-query"):
        return None
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def glibc_version():
    try:
        return os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):
        return None


def discover_allocators(build_dir, wanted, log):
    """Allocators present on this machine, in ALL_ALLOCATORS order."""
    found = []
    for name in ALL_ALLOCATORS:
        if wanted and name not in wanted:
            continue
        if name == "hakmem":
            lib = os.path.join(build_dir, "libhakmem.so")
            if os.path.exists(lib):
                found.append(Allocator("hakmem", os.path.abspath(lib)))
            else:
                log("hakmem: %s not found (build it: make bench, or cmake --build %s)"
                    % (lib, build_dir))
        elif name == "glibc":
            found.append(Allocator("glibc", None, package="libc6"))
        else:
            for peer, libs, pkg, devpkg in PEERS:
                if peer != name:
                    continue
                path = find_peer_library(libs)
                if path:
                    found.append(Allocator(peer, path, package=pkg))
                else:
                    log("%s: not found; install it with %s (Debian package %s)"
                        % (peer, INSTALL_HINT, devpkg))
    return found


# --------------------------------------------------------------------------
# Workloads
# --------------------------------------------------------------------------

class Workload:
    def __init__(self, name, program, argfn, quick, full, trace, callgrind, desc, figure=None):
        self.name = name
        self.figure = figure        # extra result key reported per allocator, or None
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
             "1 producer -> 1 consumer, 16-1024 B, every free remote"),
    Workload("prodcons_mid", "bench_prodcons", lambda n: [2, n, 16, "64K"],
             150000, 1500000, (30000, 150000), None,
             "2 producer -> consumer pairs (4 threads), 16 B-64 KiB, every free remote"),
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
    Workload("xmalloc", "bench_xmalloc", lambda n: [2, 2, n],
             300, 1500, (30, 150), None,
             "2 producers allocate 64 B blocks in batches of 4096, queue whole batches on a "
             "mutex-protected list; 2 consumers free whole batches"),
    Workload("stress", "bench_stress", lambda n: [32, 10, n],
             8, 40, (2, 10), None,
             "32 threads re-created every round, a quarter of the blocks swapped through a "
             "shared array, 8-512 B powers of two with 1% 100-1000x larger, contents checked "
             "on free"),
    Workload("sizemix", "bench_sizemix", lambda n: [4, n, 1000],
             300000, 1500000, (30000, 150000), (20000, 40000),
             "4 threads, ws=1000 each, 60% 16-128 B, 25% to 1 KiB, 10% to 8 KiB, 4% to "
             "64 KiB, 1% to 512 KiB; 20% of frees handed to another thread"),
    Workload("oversub_8x", "bench_oversub", lambda n: [OVERSUB[0], n // OVERSUB[0], 400],
             3200000, 16000000, (320000, 1600000), None,
             "%d threads (8x the cores) at once, ws=400 each, 16-1024 B, 10%% of frees "
             "handed to another thread" % OVERSUB[0]),
    Workload("oversub_16x", "bench_oversub", lambda n: [OVERSUB[1], n // OVERSUB[1], 400],
             3200000, 16000000, (320000, 1600000), None,
             "%d threads (16x the cores) at once, ws=400 each, 16-1024 B, 10%% of frees "
             "handed to another thread" % OVERSUB[1]),
    Workload("thread_mem", "bench_thread_mem", lambda n: [64, n],
             1, 1, (1, 4), None,
             "64 threads each allocate and free one block of every class 16 B-32 KiB, then "
             "idle: RSS per idle thread",
             figure=("rss_per_thread_kb", "RSS per idle thread, KiB")),
]
WORKLOAD_BY_NAME = {w.name: w for w in WORKLOADS}


def program_path(build_dir, program):
    return os.path.join(build_dir, "bench", program)


# --------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------

class RunResult:
    def __init__(self, cmd, rc, stdout, stderr, wall, maxrss_kb):
        self.cmd = cmd
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        self.wall = wall
        self.maxrss_kb = maxrss_kb
        self.fields = None
        self.error = None

    @property
    def peak_rss_kb(self):
        """The program's own VmHWM when it reports one, else wait4's ru_maxrss.

        ru_maxrss alone is not used: Linux keeps the pre-exec peak across
        exec, so a child of this Python process never reports less than the
        runner's own resident size (~20 MB)."""
        if self.fields and isinstance(self.fields.get("peak_rss_kb"), int) \
                and self.fields["peak_rss_kb"] > 0:
            return self.fields["peak_rss_kb"]
        return self.maxrss_kb

    @property
    def ok(self):
        return self.rc == 0 and self.fields is not None


def run_measured(cmd, env, timeout=None, on_line=None):
    """Run cmd; return RunResult with wall time and the child's peak RSS.

    on_line, when given, is called with each stdout line as it arrives."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=err)
        timer = None
        if timeout:
            timer = threading.Timer(timeout, lambda: proc.returncode is None and proc.kill())
            timer.daemon = True
            timer.start()
        chunks = []
        try:
            for raw in proc.stdout:
                line = raw.decode("utf-8", "replace")
                chunks.append(line)
                if on_line:
                    on_line(line)
        finally:
            proc.stdout.close()
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - t0
            proc.returncode = os.waitstatus_to_exitcode(status)
            if timer:
                timer.cancel()
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
    return RunResult(cmd, proc.returncode, "".join(chunks), stderr, wall, usage.ru_maxrss)


def run_program(build_dir, workload, n, alloc, timeout=600):
    prog = program_path(build_dir, workload.program)
    cmd = [prog] + workload.args(n)
    res = run_measured(cmd, alloc.environment(), timeout=timeout)
    check_run(res, workload.program)
    return res


def check_run(res, program):
    if "cannot be preloaded" in res.stderr:
        res.error = "preload ignored: " + res.stderr.strip().splitlines()[0]
        res.rc = res.rc or 1
        return
    if res.rc != 0:
        res.error = describe_exit(res.rc)
        return
    try:
        res.fields = parse_result(res.stdout, program)
    except ParseError as e:
        res.error = str(e)


def describe_exit(rc):
    if rc < 0:
        try:
            import signal
            return "killed by %s" % signal.Signals(-rc).name
        except (ValueError, ImportError):
            return "killed by signal %d" % -rc
    return "exit status %d" % rc


def run_tool(tool, cmd, env, workload, alloc, out_path, parse, timeout):
    """Run a workload under an analysis tool (strace, callgrind) that writes
    its report to out_path; return (ops the program did, parse(report))."""
    res = run_measured(cmd, env, timeout=timeout)
    check_run(res, workload.program)
    if not res.ok:
        raise RuntimeError("%s under %s: %s\n%s" % (alloc.name, tool, res.error, tail(res.stderr)))
    with open(out_path, encoding="utf-8", errors="replace") as f:
        return res.fields["ops"], parse(f.read())


def strace_counts(build_dir, workload, n, alloc, timeout=600):
    """Run under `strace -f -c -e trace=%memory`; return (ops, {syscall: calls})."""
    with tempfile.NamedTemporaryFile(prefix="bench-strace.", suffix=".txt",
                                     delete=False) as tf:
        out_path = tf.name
    try:
        cmd = ["strace", "-f", "-c", "--seccomp-bpf", "-e", "trace=%memory", "-o", out_path]
        if alloc.preload:
            cmd += ["-E", "LD_PRELOAD=" + alloc.preload]
        cmd += [program_path(build_dir, workload.program)] + workload.args(n)
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        env.update(alloc.env)
        return run_tool("strace", cmd, env, workload, alloc, out_path, parse_strace_summary, timeout)
    finally:
        os.unlink(out_path)


def callgrind_instructions(build_dir, workload, n, alloc, timeout=1800):
    """Run under callgrind; return (ops, total instructions)."""
    with tempfile.TemporaryDirectory(prefix="bench-cg.") as d:
        out_path = os.path.join(d, "callgrind.out")
        cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out_path,
               program_path(build_dir, workload.program)] + workload.args(n)
        # valgrind hands LD_PRELOAD from its environment on to the program.
        return run_tool("callgrind", cmd, alloc.environment(), workload, alloc, out_path,
                        parse_callgrind_total, timeout)


def tail(text, lines=8):
    return "\n".join(text.strip().splitlines()[-lines:])


class Progress:
    def __init__(self, total, quiet=False):
        self.total = total
        self.done = 0
        self.start = time.perf_counter()
        self.quiet = quiet

    def step(self, msg):
        self.done += 1
        if self.quiet:
            return
        elapsed = time.perf_counter() - self.start
        eta = elapsed / self.done * (self.total - self.done) if self.done else 0
        sys.stderr.write("[%3d/%d %s, eta %s] %s\n" % (
            self.done, self.total, fmt_duration(elapsed), fmt_duration(eta), msg))
        sys.stderr.flush()


def log(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def probe_hakmem(build_dir, allocators):
    """Drop HAKMEM from the list if a tiny run under it fails; return a note."""
    hak = [a for a in allocators if a.name == "hakmem"]
    if not hak:
        return None
    w = WORKLOAD_BY_NAME["random_mixed"]
    ref = run_program(build_dir, w, 100000, Allocator("glibc"))
    res = run_program(build_dir, w, 100000, hak[0])
    problem = None
    if not res.ok:
        problem = res.error
    elif ref.ok and res.fields["checksum"] != ref.fields["checksum"]:
        problem = "checksum %s differs from glibc's %s" % (res.fields["checksum"],
                                                         ref.fields["checksum"])
    if problem:
        allocators.remove(hak[0])
        note = ("hakmem left out: `bench_random_mixed 100000 400 1` under %s failed: %s"
                % (hak[0].preload, problem))
        log(note + ("\n" + tail(res.stderr) if res.stderr.strip() else ""))
        return note
    return None


# --------------------------------------------------------------------------
# Comparison run
# --------------------------------------------------------------------------

def machine_info():
    cpu = None
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "Model", "cpu model") and value.strip():
                    cpu = value.strip()
                    break
    except OSError:
        pass
    if not cpu:
        cpu = os.uname().machine
    return {"nproc": os.cpu_count(), "cpu": cpu, "kernel": os.uname().release,
            "arch": os.uname().machine, "glibc": glibc_version(), "rev": git_revision()}


def git_revision():
    """`git describe --always --dirty` of the source tree, or None."""
    try:
        out = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def display_path(path):
    """Paths inside the repository are shown relative to it."""
    if path and os.path.isabs(path) and path.startswith(ROOT + os.sep):
        return os.path.relpath(path, ROOT)
    return path


def machine_line(m):
    return "%d x %s (%s), Linux %s, %s" % (m["nproc"], m["cpu"], m["arch"], m["kernel"],
                                          m["glibc"] or "libc ?")


def summarize(workloads, allocators, runs, syscalls):
    """Per (workload, allocator) summary dicts."""
    summary = {}
    for w in workloads:
        for a in allocators:
            rs = runs.get((w.name, a.name), [])
            good = [r for r in rs if r.ok]
            ops = [r.fields["ops_per_sec"] for r in good]
            rss = [r.peak_rss_kb for r in good]
            s = {"n": len(good), "failed": len(rs) - len(good),
                 "median": median(ops) if ops else float("nan"),
                 "mean": mean(ops) if ops else float("nan"),
                 "cv": cv(ops) if ops else float("nan"),
                 "min": min(ops) if ops else float("nan"),
                 "max": max(ops) if ops else float("nan"),
                 "rss_kb": median(rss) if rss else float("nan"),
                 "rss_max_kb": max(rss) if rss else float("nan"),
                 "wall": median([r.wall for r in good]) if good else float("nan"),
                 "checksum": good[0].fields["checksum"] if good else None,
                 "errors": sorted(set(r.error for r in rs if not r.ok)),
                 "values": ops}
            if w.figure:
                figs = [r.fields.get(w.figure[0]) for r in good]
                figs = [f for f in figs if isinstance(f, (int, float))]
                s["figure"] = median(figs) if figs else float("nan")
            sc = syscalls.get((w.name, a.name))
            s["syscalls"] = sc
            summary[(w.name, a.name)] = s
    return summary


def checksum_notes(workloads, allocators, summary):
    notes = []
    for w in workloads:
        sums = {a.name: summary[(w.name, a.name)]["checksum"] for a in allocators
                if summary[(w.name, a.name)]["checksum"] is not None}
        if len(set(sums.values())) > 1:
            notes.append("CHECKSUM MISMATCH in %s (data corrupted by some allocator): %s"
                         % (w.name, ", ".join("%s=%s" % kv for kv in sums.items())))
    return notes


def whole_run_rate(sc):
    """Memory syscalls per operation over the whole longer run (start-up included)."""
    ops, calls = sc["long"]
    return sum(calls.get(n, 0) for n in MEMORY_SYSCALLS) / float(ops) if ops else float("nan")


def fmt_syscall_cell(sc):
    """The difference of the two runs; when the shorter run made more calls
    than the longer (bursty behaviour that depends on scheduling), the
    whole-run average of the longer run instead, marked with '*'."""
    if sc["total_per_op"] >= 0:
        return fmt_rate(sc["total_per_op"])
    return fmt_rate(whole_run_rate(sc)) + "*"


def build_tables(workloads, allocators, summary):
    names = [a.name for a in allocators]
    has_hak = "hakmem" in names
    header = ["workload"] + ["%s Mops/s (CV)" % n for n in names]
    if has_hak:
        for ref in ("mimalloc", "glibc"):
            if ref in names:
                header.append("hakmem/%s" % ref)
    header += ["RSS MB %s" % n for n in names]
    rows = []
    for w in workloads:
        row = [w.name]
        for n in names:
            s = summary[(w.name, n)]
            if s["n"] == 0:
                row.append("FAIL" if s["failed"] else "-")
            else:
                row.append("%s (%s)" % (fmt_mops(s["median"]), fmt_pct(s["cv"])))
        if has_hak:
            for ref in ("mimalloc", "glibc"):
                if ref in names:
                    row.append(fmt_ratio(ratio(summary[(w.name, "hakmem")]["median"],
                                               summary[(w.name, ref)]["median"])))
        for n in names:
            row.append(fmt_mb(summary[(w.name, n)]["rss_kb"]))
        rows.append(row)
    main = markdown_table(header, rows)

    sys_rows = []
    for w in workloads:
        row = [w.name]
        any_sc = False
        for n in names:
            sc = summary[(w.name, n)]["syscalls"]
            if sc is None:
                row.append("-")
            elif isinstance(sc, str):
                row.append("FAIL")
            else:
                any_sc = True
                row.append(fmt_syscall_cell(sc))
        if any_sc:
            sys_rows.append(row)
    sys_table = markdown_table(["workload"] + names, sys_rows) if sys_rows else None
    fig_rows = [[w.name + ": " + w.figure[1]]
                + [fmt_num(summary[(w.name, n)].get("figure"), 4) for n in names]
                for w in workloads if w.figure]
    if fig_rows:
        main += ("\n\nFigures of their own (median of the runs; memory per thread: RSS "
                 "while idle minus RSS before the threads, over the thread count):\n\n"
                 + markdown_table(["workload: figure"] + names, fig_rows))
    if sys_table and any(c.endswith("*") for r in sys_rows for c in r):
        sys_table += ("\n\n\\* the shorter run made more calls than the longer one (bursty, "
                      "scheduling-dependent): average over the whole longer run instead")
    return main, sys_table


def write_csv(path, header, rows):
    import csv
    with open(path, "w", newline="", encoding="utf-8") as f:
        wr = csv.writer(f)
        wr.writerow(header)
        for r in rows:
            wr.writerow(r)


def gnuplot_available():
    return shutil.which("gnuplot") is not None


def run_gnuplot(script, what):
    if not gnuplot_available():
        log("gnuplot not found: no %s chart (install it with %s)" % (what, INSTALL_HINT))
        return False
    res = subprocess.run(["gnuplot"], input=script, capture_output=True, text=True)
    if res.returncode != 0:
        log("gnuplot failed for the %s chart:\n%s" % (what, tail(res.stderr)))
        return False
    return True


def gp_quote(s):
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'


def chart_bound(values, low):
    """Log-scale axis bound that keeps 1 and every ratio inside, with a margin."""
    if low:
        lo = min(values + [1.0])
        return 2.0 ** (math.floor(math.log2(lo / 1.15) * 2) / 2) if lo > 0 else 0.25
    hi = max(values + [1.0])
    return 2.0 ** (math.ceil(math.log2(hi * 1.15) * 2) / 2)


def chart_comparison(png_path, workloads, allocators, summary, title_suffix=""):
    """Two panels: throughput and peak RSS of HAKMEM relative to each peer (or,
    without HAKMEM, of every allocator relative to glibc)."""
    names = [a.name for a in allocators]
    if "hakmem" in names:
        subject, others = "hakmem", [n for n in names if n != "hakmem"]
        series = [("vs " + o, "hakmem", o) for o in others]
        t1 = "HAKMEM throughput / peer throughput (higher is better)"
        t2 = "HAKMEM peak RSS / peer peak RSS (lower is better)"
    elif "glibc" in names:
        others = [n for n in names if n != "glibc"]
        series = [(o, o, "glibc") for o in others]
        t1 = "throughput relative to glibc (higher is better)"
        t2 = "peak RSS relative to glibc (lower is better)"
    else:
        return False
    if not series:
        return False
    tp_all, rs_all = [], []
    with tempfile.TemporaryDirectory(prefix="bench-gp.") as d:
        data = os.path.join(d, "data.txt")
        with open(data, "w", encoding="utf-8") as f:
            f.write("workload " + " ".join(gp_quote(s[0]) for s in series) + " "
                    + " ".join(gp_quote(s[0]) for s in series) + "\n")
            for w in workloads:
                tp, rs = [], []
                for _, num, den in series:
                    r1 = ratio(summary[(w.name, num)]["median"], summary[(w.name, den)]["median"])
                    r2 = ratio(summary[(w.name, num)]["rss_kb"], summary[(w.name, den)]["rss_kb"])
                    ok1 = not math.isnan(r1) and r1 > 0
                    ok2 = not math.isnan(r2) and r2 > 0
                    tp.append("%.4f" % r1 if ok1 else "?")
                    rs.append("%.4f" % r2 if ok2 else "?")
                    if ok1:
                        tp_all.append(r1)
                    if ok2:
                        rs_all.append(r2)
                f.write(gp_quote(w.name) + " " + " ".join(tp) + " " + " ".join(rs) + "\n")
        k = len(series)
        script = """
set terminal pngcairo size 1100,860 font ",10"
set output %(out)s
set termoption noenhanced
set datafile missing "?"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set key outside top center horizontal
set grid ytics
set xtics rotate by -25 nomirror
set logscale y 2
set multiplot layout 2,1 title %(title)s
set title %(t1)s
set ylabel "ratio (log scale)"
set yrange [%(y1lo)g:%(y1hi)g]
set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead lw 2 lc rgb "black" front
plot for [i=2:%(k1)d] %(data)s using i:xtic(1) title columnheader(i)
set title %(t2)s
set yrange [%(y2lo)g:%(y2hi)g]
plot for [i=%(k2)d:%(k3)d] %(data)s using i:xtic(1) title columnheader(i)
unset multiplot
""" % {"out": gp_quote(png_path), "title": gp_quote("HAKMEM benchmarks" + title_suffix),
       "t1": gp_quote(t1), "t2": gp_quote(t2), "data": gp_quote(data),
       "k1": k + 1, "k2": k + 2, "k3": 2 * k + 1,
       "y1lo": chart_bound(tp_all, low=True), "y1hi": chart_bound(tp_all, low=False),
       "y2lo": chart_bound(rs_all, low=True), "y2hi": chart_bound(rs_all, low=False)}
        return run_gnuplot(script, "comparison")


def readme_block(date, mode, machine, command, main_table, sys_table, chart_rel, notes):
    lines = [
        "_%s, %s run on %s%s._" % (date, mode, machine_line(machine),
                                   ", source %s" % machine["rev"] if machine.get("rev") else ""),
        "",
        "Median throughput in million operations per second (one operation = one",
        "malloc, free or realloc) with the coefficient of variation over the runs,",
        "HAKMEM's throughput ratio to mimalloc and to glibc, and median peak resident",
        "memory of the process.",
        "",
        main_table,
    ]
    if sys_table:
        lines += ["", "Memory system calls (mmap+munmap+madvise+brk+mremap) per operation",
                  "after warm-up (difference of two run lengths under strace; 0 means none",
                  "in the extra operations of the longer run):", "",
                  sys_table]
    if chart_rel:
        lines += ["", "![HAKMEM relative to its peers](%s)" % chart_rel]
    if notes:
        lines += [""] + ["- " + n for n in notes]
    lines += ["", "Reproduce: `%s`" % command]
    return "\n".join(lines)


def do_compare(args):
    build_dir = args.build_dir
    wanted = set(args.allocators.split(",")) if args.allocators else None
    allocators = discover_allocators(build_dir, wanted, log)
    notes = []
    missing = [p for p in ("mimalloc", "jemalloc", "tcmalloc")
               if (not wanted or p in wanted) and p not in [a.name for a in allocators]]
    if missing:
        notes.append("not measured (not installed): %s; run %s"
                     % (", ".join(missing), INSTALL_HINT))
    workloads = select_workloads(args.workloads)
    check_programs(build_dir, workloads)
    note = probe_hakmem(build_dir, allocators)
    if note:
        notes.append(note)
    if not allocators:
        log("no allocator to measure")
        return 1
    runs_n = args.runs or (11 if args.full else 7)
    mode = "full" if args.full else "quick"
    if args.wait_idle:
        wait_idle(args.wait_idle)
    meter = CpuMeter()
    log("allocators: " + ", ".join("%s (%s)" % (a.name, a.preload or "no preload")
                                   for a in allocators))
    do_sys = not args.no_syscalls and shutil.which("strace") is not None
    if not args.no_syscalls and not do_sys:
        log("strace not found: no system-call counts (install it with %s)" % INSTALL_HINT)
    total = len(workloads) * len(allocators) * (runs_n + (2 if do_sys else 0))
    progress = Progress(total, args.quiet)
    runs = {}
    syscalls = {}
    t_start = time.perf_counter()
    for w in workloads:
        n = w.full if args.full else w.quick
        for r in range(runs_n):
            # Alternate allocators run by run, rotating who goes first.
            order = allocators[r % len(allocators):] + allocators[:r % len(allocators)]
            for a in order:
                res = run_program(build_dir, w, n, a)
                runs.setdefault((w.name, a.name), []).append(res)
                if res.ok:
                    msg = "%s %s run %d/%d: %s Mops/s, %.2fs, %s MB" % (
                        w.name, a.name, r + 1, runs_n, fmt_mops(res.fields["ops_per_sec"]),
                        res.wall, fmt_mb(res.peak_rss_kb))
                else:
                    msg = "%s %s run %d/%d: FAILED (%s)" % (w.name, a.name, r + 1, runs_n,
                                                          res.error)
                    log("  command: %s\n  %s" % (format_cmd(res.cmd, a),
                                                 tail(res.stderr).replace("\n", "\n  ")))
                progress.step(msg)
        if do_sys:
            for a in allocators:
                try:
                    short = strace_counts(build_dir, w, w.trace[0], a)
                    progress.step("%s %s strace short run" % (w.name, a.name))
                    # --full counts over the full timed length: finer resolution.
                    long_ = strace_counts(build_dir, w, w.full if args.full else w.trace[1], a)
                    per, tot = syscalls_per_op(short, long_)
                    syscalls[(w.name, a.name)] = {"per_op": per, "total_per_op": tot,
                                                  "short": short, "long": long_}
                    progress.step("%s %s strace: %s memory syscalls/op" % (
                        w.name, a.name, fmt_rate(tot)))
                except (RuntimeError, ParseError, ValueError) as e:
                    syscalls[(w.name, a.name)] = "failed"
                    log("%s %s strace run failed: %s" % (w.name, a.name, e))
                    notes.append("%s under %s: strace run failed: %s"
                                 % (w.name, a.name, str(e).splitlines()[0]))
                    progress.done = min(total, progress.done + 1)
    elapsed = time.perf_counter() - t_start
    others = meter.others_fraction()
    if others > 0.05:
        notes.append("other processes used %.0f%% of the CPUs during the run: expect noise"
                     % (others * 100))
    summary = summarize(workloads, allocators, runs, syscalls)
    notes += checksum_notes(workloads, allocators, summary)
    for w in workloads:
        for a in allocators:
            s = summary[(w.name, a.name)]
            if s["failed"]:
                notes.append("%s under %s: %d of %d runs failed (%s)" % (
                    w.name, a.name, s["failed"], s["failed"] + s["n"], "; ".join(s["errors"])))
    main_table, sys_table = build_tables(workloads, allocators, summary)
    print(main_table)
    if sys_table:
        print()
        print("memory syscalls per operation (mmap+munmap+madvise+brk+mremap, after warm-up):")
        print(sys_table)
    for n in notes:
        print("note: " + n)
    log("finished in %s" % fmt_duration(elapsed))

    date = datetime.date.today().isoformat()
    out_dir = args.out_dir or RESULTS_DIR
    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, date)
    machine = machine_info()
    command = reproduce_command(args)
    chart_ok = False
    if not args.no_chart:
        chart_ok = chart_comparison(base + ".png", workloads, allocators, summary,
                                    " (%s, %s)" % (date, mode))
    chart_rel = os.path.relpath(base + ".png", ROOT) if chart_ok else None
    block = readme_block(date, mode, machine, command, main_table, sys_table, chart_rel, notes)
    write_report_md(base + ".md", date, mode, machine, command, allocators, workloads,
                    runs_n, elapsed, block, summary)
    write_summary_csv(base + ".csv", date, workloads, allocators, summary)
    write_runs_csv(base + "-runs.csv", workloads, allocators, runs)
    log("wrote %s.md, %s.csv, %s-runs.csv%s" % (base, base, base,
                                                 ", %s.png" % base if chart_ok else ""))
    if args.update_readme:
        update_readme(block, readme=args.readme)
    failed = any(s["failed"] for s in summary.values())
    mismatch = any("CHECKSUM MISMATCH" in n for n in notes)
    return 1 if (failed or mismatch) and args.strict else 0


class CpuMeter:
    """CPU time used by other processes while the runner works: all busy time
    of the machine (/proc/stat) minus the runner's own and its children's."""

    def __init__(self):
        self.start = self._sample()

    @staticmethod
    def _sample():
        try:
            with open("/proc/stat", encoding="ascii") as f:
                fields = [int(x) for x in f.readline().split()[1:]]
            busy = (sum(fields) - fields[3] - (fields[4] if len(fields) > 4 else 0))
            busy /= float(os.sysconf("SC_CLK_TCK"))
        except (OSError, ValueError, IndexError):
            busy = float("nan")
        t = os.times()
        own = t.user + t.system + t.children_user + t.children_system
        return time.perf_counter(), busy, own

    def others_fraction(self):
        """Share of all CPUs that other processes used since the start."""
        w0, b0, o0 = self.start
        w1, b1, o1 = self._sample()
        capacity = (w1 - w0) * (os.cpu_count() or 1)
        if capacity <= 0 or math.isnan(b0) or math.isnan(b1):
            return float("nan")
        return max(0.0, ((b1 - b0) - (o1 - o0)) / capacity)


def cpu_busy_fraction(interval=1.0):
    """Fraction of all CPUs busy over `interval` seconds (from /proc/stat)."""
    def sample():
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return sum(fields), idle
    try:
        t0, i0 = sample()
        time.sleep(interval)
        t1, i1 = sample()
    except (OSError, ValueError, IndexError):
        return float("nan")
    return 1.0 - (i1 - i0) / float(t1 - t0) if t1 > t0 else float("nan")


def wait_idle(max_seconds, busy_max=0.15, quiet_needed=3):
    """Wait until the CPUs have been (nearly) idle for quiet_needed seconds."""
    deadline = time.perf_counter() + max_seconds
    quiet = 0
    while time.perf_counter() < deadline:
        busy = cpu_busy_fraction(1.0)
        quiet = quiet + 1 if busy <= busy_max else 0
        if quiet >= quiet_needed:
            return True
        if quiet == 0:
            log("waiting for an idle machine: CPUs %.0f%% busy" % (busy * 100))
    log("machine still busy after %ds: running anyway" % max_seconds)
    return False


def format_cmd(cmd, alloc):
    pre = "LD_PRELOAD=%s " % alloc.preload if alloc.preload else ""
    envs = "".join("%s=%s " % kv for kv in alloc.env.items())
    return envs + pre + " ".join(shlex.quote(c) for c in cmd)


def reproduce_command(args):
    if args.reproduce:
        return args.reproduce
    parts = ["python3", "scripts/bench.py", "--build-dir", os.path.relpath(
        os.path.abspath(args.build_dir), ROOT)]
    if args.full:
        parts.append("--full")
    if args.runs:
        parts += ["--runs", str(args.runs)]
    if args.workloads:
        parts += ["--workloads", args.workloads]
    if args.allocators:
        parts += ["--allocators", args.allocators]
    cmd = " ".join(parts)
    if parts[3] == "build-fast" and len(parts) == 4:
        return "make bench   # = %s" % cmd
    if parts[3] == "build-fast" and parts[4:] == ["--full"]:
        return 'make bench ARGS="--full"'
    return cmd


def write_report_md(path, date, mode, machine, command, allocators, workloads, runs_n,
                    elapsed, block, summary):
    lines = ["# HAKMEM benchmarks, %s (%s)" % (date, mode), ""]
    lines.append("Machine: %s.  " % machine_line(machine))
    rev = git_revision()
    if rev:
        lines.append("Source: %s.  " % rev)
    lines.append("Runs per allocator and workload: %d, allocators alternating run by run; "
                 "total time %s." % (runs_n, fmt_duration(elapsed)))
    lines.append("")
    lines.append("Allocators:")
    lines.append("")
    for a in allocators:
        ver = package_version(a.package) if a.package else None
        lines.append("- %s: %s%s" % (a.name, display_path(a.preload) or "C library, no preload",
                                     " (package version %s)" % ver if ver else ""))
    lines += ["", "Workloads (`n` varies with --full):", ""]
    for w in workloads:
        lines.append("- `%s`: `%s %s` - %s" % (w.name, w.program,
                                               " ".join(w.args(w.full if mode == "full"
                                                               else w.quick)), w.desc))
    lines += ["", BLOCK_BEGIN, block, BLOCK_END, ""]
    lines += ["Throughput spread (min-max of the runs, M ops/s):", ""]
    rows = []
    for w in workloads:
        row = [w.name]
        for a in allocators:
            s = summary[(w.name, a.name)]
            row.append("%s-%s" % (fmt_mops(s["min"]), fmt_mops(s["max"])) if s["n"] else "-")
        rows.append(row)
    lines.append(markdown_table(["workload"] + [a.name for a in allocators], rows))
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def write_summary_csv(path, date, workloads, allocators, summary):
    header = ["date", "workload", "allocator", "runs", "failed", "median_ops_per_sec",
              "mean_ops_per_sec", "cv", "min_ops_per_sec", "max_ops_per_sec",
              "ratio_hakmem_to", "median_peak_rss_kb", "max_peak_rss_kb", "median_wall_s",
              "checksum"] + ["%s_per_op" % s for s in MEMORY_SYSCALLS + EXTRA_SYSCALLS] \
        + ["memsys_per_op"]
    rows = []
    names = [a.name for a in allocators]
    for w in workloads:
        for n in names:
            s = summary[(w.name, n)]
            hr = (ratio(summary[(w.name, "hakmem")]["median"], s["median"])
                  if "hakmem" in names else float("nan"))
            sc = s["syscalls"] if isinstance(s["syscalls"], dict) else None
            rows.append([date, w.name, n, s["n"], s["failed"], g(s["median"]), g(s["mean"]),
                         g(s["cv"]), g(s["min"]), g(s["max"]), g(hr), g(s["rss_kb"]),
                         g(s["rss_max_kb"]), g(s["wall"]), s["checksum"] or ""]
                        + [g(sc["per_op"][k]) if sc else ""
                           for k in MEMORY_SYSCALLS + EXTRA_SYSCALLS]
                        + [g(sc["total_per_op"]) if sc else ""])
    write_csv(path, header, rows)


def write_runs_csv(path, workloads, allocators, runs):
    header = ["workload", "allocator", "run", "ok", "ops_per_sec", "ops", "secs", "wall_s",
              "peak_rss_kb", "ru_maxrss_kb", "checksum", "error"]
    rows = []
    for w in workloads:
        for a in allocators:
            for i, r in enumerate(runs.get((w.name, a.name), [])):
                f = r.fields or {}
                rows.append([w.name, a.name, i, int(r.ok), g(f.get("ops_per_sec")),
                             f.get("ops", ""), g(f.get("secs")), "%.4f" % r.wall,
                             r.peak_rss_kb, r.maxrss_kb, f.get("checksum", ""), r.error or ""])
    write_csv(path, header, rows)


def g(v):
    if v is None or v == "":
        return ""
    if isinstance(v, float):
        if math.isnan(v):
            return ""
        return "%.6g" % v
    return v


# --------------------------------------------------------------------------
# README
# --------------------------------------------------------------------------

def replace_readme_block(text, block):
    """Replace what lies between the bench markers; raise if they are missing."""
    start = text.find(README_BEGIN)
    end = text.find(README_END)
    if start < 0 or end < 0 or end < start:
        raise ParseError("README.md has no %s ... %s markers" % (README_BEGIN, README_END))
    return text[:start + len(README_BEGIN)] + "\n" + block.strip() + "\n" + text[end:]


def extract_block(text):
    start = text.find(BLOCK_BEGIN)
    end = text.find(BLOCK_END)
    if start < 0 or end < start:
        raise ParseError("no %s ... %s in report" % (BLOCK_BEGIN, BLOCK_END))
    return text[start + len(BLOCK_BEGIN):end].strip()


def latest_report(out_dir):
    pat = re.compile(r"^\d{4}-\d{2}-\d{2}\.md$")
    names = sorted(n for n in os.listdir(out_dir) if pat.match(n)) if os.path.isdir(out_dir) else []
    return os.path.join(out_dir, names[-1]) if names else None


def update_readme(block=None, out_dir=None, readme=None):
    readme = readme or os.path.join(ROOT, "README.md")
    if block is None:
        report = latest_report(out_dir or RESULTS_DIR)
        if not report:
            log("no bench/results/<date>.md yet: run the benchmarks first")
            return 1
        with open(report, encoding="utf-8") as f:
            block = extract_block(f.read())
        log("using %s" % os.path.relpath(report, ROOT))
    if not os.path.exists(readme):
        log("%s not found" % readme)
        return 1
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    try:
        new = replace_readme_block(text, block)
    except ParseError as e:
        log(str(e))
        return 1
    with open(readme, "w", encoding="utf-8") as f:
        f.write(new)
    log("updated %s" % readme)
    return 0


# --------------------------------------------------------------------------
# A/B
# --------------------------------------------------------------------------

def ab_side(args, side, build_dir):
    lib = getattr(args, side + "_lib")
    bdir = getattr(args, side + "_build")
    env = parse_env_assignments(getattr(args, side + "_env"))
    if lib and bdir:
        raise SystemExit("--%s-lib and --%s-build exclude each other" % (side, side))
    if bdir:
        lib = os.path.join(bdir, "libhakmem.so")
    if lib is None:
        lib = os.path.join(build_dir, "libhakmem.so")
    if lib in ("none", "glibc"):
        preload = None
    else:
        if lib in dict((p[0], p) for p in PEERS):
            peer = [p for p in PEERS if p[0] == lib][0]
            lib = find_peer_library(peer[1])
            if not lib:
                raise SystemExit("%s is not installed: run %s" % (peer[0], INSTALL_HINT))
        if not os.path.exists(lib):
            raise SystemExit("%s: %s not found" % (side.upper(), lib))
        preload = os.path.abspath(lib)
    label = getattr(args, "label_" + side) or describe_side(preload, env, bdir)
    return Allocator(label, preload, env)


def describe_side(preload, env, bdir):
    parts = []
    if bdir:
        parts.append(os.path.basename(os.path.normpath(bdir)))
    elif preload:
        parts.append(os.path.basename(preload))
    else:
        parts.append("glibc")
    parts += ["%s=%s" % kv for kv in env.items()]
    return " ".join(parts)


def do_ab(args):
    build_dir = args.build_dir
    a = ab_side(args, "a", build_dir)
    b = ab_side(args, "b", build_dir)
    if a.name == b.name:
        a.name, b.name = "A: " + a.name, "B: " + b.name
    workloads = select_workloads(args.workloads or "random_mixed")
    check_programs(build_dir, workloads)
    runs_n = args.runs or 10
    log("A = %s\nB = %s\n%d runs each, alternating A B A B ..." % (
        format_side(a), format_side(b), runs_n))
    progress = Progress(len(workloads) * runs_n * 2, args.quiet)
    meter = CpuMeter()
    results = []
    for w in workloads:
        n = w.full if args.full else w.quick
        vals = {"A": [], "B": []}
        rss = {"A": [], "B": []}
        for r in range(runs_n):
            order = [("A", a), ("B", b)] if r % 2 == 0 else [("B", b), ("A", a)]
            for key, side in order:
                res = run_program(build_dir, w, n, side)
                if res.ok:
                    vals[key].append(res.fields["ops_per_sec"])
                    rss[key].append(res.peak_rss_kb)
                    progress.step("%s %s run %d: %s Mops/s" % (
                        w.name, key, r + 1, fmt_mops(res.fields["ops_per_sec"])))
                else:
                    progress.step("%s %s run %d: FAILED (%s)" % (w.name, key, r + 1, res.error))
                    log(tail(res.stderr))
        v = verdict(vals["A"], vals["B"], label_a="A", label_b="B")
        results.append((w, vals, rss, v))
    header = ["workload", "side", "runs", "mean Mops/s", "median Mops/s", "CV", "RSS MB"]
    rows = []
    for w, vals, rss, v in results:
        for key in ("A", "B"):
            rows.append([w.name, key, len(vals[key]), fmt_mops(mean(vals[key])),
                         fmt_mops(median(vals[key])), fmt_pct(cv(vals[key])),
                         fmt_mb(median(rss[key]) if rss[key] else float("nan"))])
    table = markdown_table(header, rows)
    vrows = [[w.name, "%+.2f%%" % v["delta_pct"] if not math.isnan(v["delta_pct"]) else "-",
              "[%+.2f%%, %+.2f%%]" % (v["ci_low"], v["ci_high"])
              if not math.isnan(v["ci_low"]) else "-", fmt_num(v["p"]), v["text"]]
             for w, vals, rss, v in results]
    vtable = markdown_table(["workload", "delta B vs A (medians)", "bootstrap 95% CI",
                             "Mann-Whitney p", "verdict"], vrows)
    print("A = %s\nB = %s\n" % (format_side(a), format_side(b)))
    print(table)
    print()
    print(vtable)
    print("\nverdict rule: two-sided Mann-Whitney U test p < 0.05 and the bootstrap 95% "
          "interval of the delta of medians excludes 0")
    others = meter.others_fraction()
    noise = ("other processes used %.0f%% of the CPUs during the runs: expect noise"
             % (others * 100)) if others > 0.05 else ""
    if noise:
        print("note: " + noise)
    out_dir = args.out_dir or RESULTS_DIR
    os.makedirs(out_dir, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y-%m-%d-%H%M%S")
    base = os.path.join(out_dir, "ab-" + stamp)
    with open(base + ".md", "w", encoding="utf-8") as f:
        f.write("# A/B %s\n\nMachine: %s\n\nA = `%s`\n\nB = `%s`\n\n%s\n\n%s\n\n"
                "Verdict: two-sided Mann-Whitney U p < 0.05 and bootstrap 95%% CI of the "
                "delta of medians excluding 0.\n%s" % (
                    stamp, machine_line(machine_info()), format_side(a), format_side(b),
                    table, vtable, "\nNote: %s.\n" % noise if noise else ""))
    rows = []
    for w, vals, rss, v in results:
        for key in ("A", "B"):
            for i, x in enumerate(vals[key]):
                rows.append([w.name, key, i, g(x), rss[key][i]])
    write_csv(base + ".csv", ["workload", "side", "run", "ops_per_sec", "peak_rss_kb"], rows)
    log("wrote %s.md and %s.csv" % (base, base))
    return 0


def format_side(s):
    env = " ".join("%s=%s" % kv for kv in s.env.items())
    return "%s (%s%s)" % (s.name, "LD_PRELOAD=" + s.preload if s.preload else "no preload",
                          ", " + env if env else "")


# --------------------------------------------------------------------------
# Soak
# --------------------------------------------------------------------------

def soak_stats(epochs):
    """Summary of bench_soak epochs (list of dicts)."""
    if not epochs:
        raise ValueError("no epochs")
    tput = [e["ops_per_sec"] for e in epochs]
    ns = [e["ns_per_op"] for e in epochs]
    rss = [e["rss_kb"] for e in epochs]
    n = len(epochs)
    window = max(1, n // 10)
    # Epoch 0 carries the warm-up (first-touch page faults): drift is measured
    # from the epochs after it when there are enough.
    body = slice(1, None) if n >= 3 else slice(0, None)
    t_first, t_last, t_drift = drift(tput[body], window)
    r_first, r_last, r_drift = drift(rss[body], window)
    return {
        "epochs": n, "window": window,
        "ops_per_sec_mean": mean(tput), "ops_per_sec_median": median(tput),
        "cv": cv(tput[body]), "first_epoch_ops_per_sec": tput[0],
        "tput_first": t_first, "tput_last": t_last, "tput_drift_pct": t_drift,
        "rss_first_kb": r_first, "rss_last_kb": r_last, "rss_drift_pct": r_drift,
        "rss_drift_kb": r_last - r_first, "rss_max_kb": max(rss), "rss_min_kb": min(rss),
        "ns_p50": percentile(ns, 50), "ns_p99": percentile(ns, 99),
        "ns_p999": percentile(ns, 99.9), "ns_max": max(ns),
    }


def do_soak(args):
    build_dir = args.build_dir
    names = (args.allocator or "hakmem").split(",")
    allocators = discover_allocators(build_dir, set(names), log)
    allocators = [a for n in names for a in allocators if a.name == n]
    if not allocators:
        log("none of %s is available" % ", ".join(names))
        return 1
    prog = program_path(build_dir, "bench_soak")
    if not os.path.exists(prog):
        raise SystemExit("%s not found: build first (make bench)" % prog)
    extra = shlex.split(args.soak_args) if args.soak_args else ["1000000", "400", "1"]
    date = datetime.date.today().isoformat()
    out_dir = args.out_dir or RESULTS_DIR
    os.makedirs(out_dir, exist_ok=True)
    reports = []
    rc = 0
    for a in allocators:
        cmd = [prog, str(args.soak)] + extra
        log("soak: %s for %d s: %s" % (a.name, args.soak, format_cmd(cmd, a)))
        last = [time.perf_counter()]

        def on_line(line, a=a):
            if " epoch=" in line and time.perf_counter() - last[0] >= 5 and not args.quiet:
                last[0] = time.perf_counter()
                try:
                    f = parse_fields(line)
                    log("  %s epoch %d at %.0fs: %s Mops/s, %s ns/op, RSS %s MB" % (
                        a.name, f["epoch"], f.get("elapsed", 0), fmt_mops(f["ops_per_sec"]),
                        fmt_num(f["ns_per_op"]), fmt_mb(f["rss_kb"])))
                except (ParseError, KeyError):
                    pass

        meter = CpuMeter()
        res = run_measured(cmd, a.environment(), timeout=args.soak * 3 + 120, on_line=on_line)
        others = meter.others_fraction()
        load_note = ("other processes used %.0f%% of the CPUs during the soak: expect noise"
                     % (others * 100)) if others > 0.05 else None
        check_run(res, "bench_soak")
        try:
            epochs = parse_epochs(res.stdout)
        except ParseError as e:
            epochs = []
            log(str(e))
        if not res.ok or not epochs:
            log("soak under %s failed: %s\n%s" % (a.name, res.error, tail(res.stderr)))
            rc = 1
            if not epochs:
                continue
        st = soak_stats(epochs)
        st["maxrss_kb"] = res.peak_rss_kb
        st["ok"] = res.ok
        base = os.path.join(out_dir, "soak-%s-%s" % (date, a.name))
        write_csv(base + ".csv", ["epoch", "elapsed_s", "ops", "secs", "ops_per_sec",
                                  "ns_per_op", "rss_kb"],
                  [[e["epoch"], e.get("elapsed", ""), e["ops"], g(e["secs"]),
                    g(e["ops_per_sec"]), g(e["ns_per_op"]), e["rss_kb"]] for e in epochs])
        chart = chart_soak(base + ".png", epochs, a.name, args.soak)
        st["note"] = load_note
        reports.append((a, st, base, chart, format_cmd(cmd, a), res.error))
    if not reports:
        return 1
    header = ["allocator", "epochs", "mean Mops/s", "CV", "drift (last vs first)",
              "ns/op p50", "p99", "p99.9", "RSS first MB", "RSS last MB", "RSS drift",
              "peak RSS MB"]
    rows = []
    for a, st, base, chart, cmd, err in reports:
        rows.append([a.name + ("" if st["ok"] else " (FAILED: %s)" % err), st["epochs"],
                     fmt_mops(st["ops_per_sec_mean"]), fmt_pct(st["cv"], 2),
                     "%+.2f%%" % st["tput_drift_pct"], fmt_num(st["ns_p50"]),
                     fmt_num(st["ns_p99"]), fmt_num(st["ns_p999"]), fmt_mb(st["rss_first_kb"]),
                     fmt_mb(st["rss_last_kb"]), "%+.0f KB" % st["rss_drift_kb"],
                     fmt_mb(st["maxrss_kb"])])
    table = markdown_table(header, rows)
    print(table)
    print("\ndrift: mean of the last %s of epochs against the first (epoch 0, the warm-up, "
          "left out); CV over epochs" % "10%")
    for a, st, base, chart, cmd, err in reports:
        md = base + ".md"
        with open(md, "w", encoding="utf-8") as f:
            f.write("# Soak, %s, %s\n\nMachine: %s; source %s\n\nCommand: `%s`\n\n%s\n\n"
                    "Window for drift: %d epochs; first epoch %s Mops/s.\n%s" % (
                        a.name, date, machine_line(machine_info()), git_revision() or "?", cmd,
                        markdown_table(header, [r for r in rows if r[0].startswith(a.name)]),
                        st["window"], fmt_mops(st["first_epoch_ops_per_sec"]),
                        ("\nNote: %s.\n" % st["note"] if st.get("note") else "")
                        + ("\n![soak](%s)\n" % os.path.basename(chart) if chart else "")))
        log("wrote %s.csv, %s.md%s" % (base, base, ", " + chart if chart else ""))
    return rc


def chart_soak(png_path, epochs, name, seconds):
    with tempfile.TemporaryDirectory(prefix="bench-gp.") as d:
        data = os.path.join(d, "soak.txt")
        with open(data, "w", encoding="utf-8") as f:
            for e in epochs:
                f.write("%s %s %s\n" % (e.get("elapsed", e["epoch"]), e["ops_per_sec"] / 1e6,
                                        e["rss_kb"] / 1024.0))
        script = """
set terminal pngcairo size 1000,700 font ",10"
set output %(out)s
set termoption noenhanced
set multiplot layout 2,1 title %(title)s
set grid
set xlabel "seconds"
set xrange [0:*]
set ylabel "M ops/s per epoch"
set yrange [0:*]
plot %(data)s using 1:2 with lines notitle
set ylabel "RSS MB"
plot %(data)s using 1:3 with lines notitle
unset multiplot
""" % {"out": gp_quote(png_path), "data": gp_quote(data),
       "title": gp_quote("soak: %s, %d s, %d epochs" % (name, seconds, len(epochs)))}
        return png_path if run_gnuplot(script, "soak") else None


# --------------------------------------------------------------------------
# Instructions per operation (callgrind)
# --------------------------------------------------------------------------

def do_instructions(args):
    if not shutil.which("valgrind"):
        raise SystemExit("valgrind not found: install it with %s" % INSTALL_HINT)
    build_dir = args.build_dir
    wanted = set(args.allocators.split(",")) if args.allocators else None
    allocators = discover_allocators(build_dir, wanted, log)
    notes = []
    note = probe_hakmem(build_dir, allocators)
    if note:
        notes.append(note)
    if args.workloads:
        workloads = [w for w in select_workloads(args.workloads) if w.callgrind]
    else:
        workloads = [w for w in WORKLOADS if w.callgrind]
    check_programs(build_dir, workloads)
    progress = Progress(len(workloads) * len(allocators) * 2, args.quiet)
    ipo = {}
    raw = []
    for w in workloads:
        for a in allocators:
            try:
                short = callgrind_instructions(build_dir, w, w.callgrind[0], a)
                progress.step("%s %s: short run %d ops, %d instructions" % (
                    w.name, a.name, short[0], short[1]))
                long_ = callgrind_instructions(build_dir, w, w.callgrind[1], a)
                v = instructions_per_op(short, long_)
                ipo[(w.name, a.name)] = v
                raw.append([w.name, a.name, " ".join(w.args(w.callgrind[0])), short[0],
                            short[1], " ".join(w.args(w.callgrind[1])), long_[0], long_[1],
                            "%.2f" % v])
                progress.step("%s %s: %.1f instructions/op" % (w.name, a.name, v))
            except (RuntimeError, ParseError, ValueError) as e:
                progress.step("%s %s: FAILED" % (w.name, a.name))
                log(str(e))
                notes.append("%s under %s failed under callgrind: %s"
                             % (w.name, a.name, str(e).splitlines()[0]))
    names = [a.name for a in allocators]
    rows = []
    for w in workloads:
        rows.append([w.name + " (%s vs %s)" % (w.callgrind[0], w.callgrind[1])]
                    + ["%.1f" % ipo[(w.name, n)] if (w.name, n) in ipo else "FAIL"
                       for n in names])
    table = markdown_table(["workload (run lengths)"] + names, rows)
    print("instructions per operation (callgrind Ir, difference of two run lengths):")
    print(table)
    for n in notes:
        print("note: " + n)
    date = datetime.date.today().isoformat()
    out_dir = args.out_dir or RESULTS_DIR
    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, "instructions-" + date)
    write_csv(base + ".csv", ["workload", "allocator", "short_args", "short_ops", "short_ir",
                              "long_args", "long_ops", "long_ir", "instructions_per_op"], raw)
    with open(base + ".md", "w", encoding="utf-8") as f:
        f.write("# Instructions per operation, %s\n\nMachine: %s; source %s\n\n"
                "`valgrind --tool=callgrind`, total Ir of two run lengths of each program; "
                "(Ir(long) - Ir(short)) / (ops(long) - ops(short)), so start-up cancels.\n\n"
                "%s\n%s" % (date, machine_line(machine_info()), git_revision() or "?", table,
                            "".join("\n- " + n for n in notes)))
    log("wrote %s.md and %s.csv" % (base, base))
    return 0


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------

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


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--build-dir",
                   help="build directory with libhakmem.so and bench/ (default build-fast)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--ab", action="store_true", help="A/B: two settings, alternating")
    mode.add_argument("--soak", type=int, metavar="SECONDS", help="soak run of bench_soak")
    mode.add_argument("--instructions", action="store_true",
                      help="instructions/op with callgrind (difference of two run lengths)")
    mode.add_argument("--list", action="store_true", help="list the workloads and exit")
    p.add_argument("--update-readme", action="store_true",
                   help="put the latest table between the bench markers in README.md "
                        "(alone: from the newest bench/results/<date>.md)")
    p.add_argument("--readme", help=argparse.SUPPRESS)
    p.add_argument("--full", action="store_true", help="more iterations and more runs")
    p.add_argument("--runs", type=int, help="runs per allocator (default 7, --full 11, --ab 10)")
    p.add_argument("--workloads", help="comma-separated workloads (see --list)")
    p.add_argument("--allocators", help="comma-separated subset of " + ",".join(ALL_ALLOCATORS))
    p.add_argument("--no-syscalls", action="store_true", help="skip the strace runs")
    p.add_argument("--no-chart", action="store_true", help="skip the gnuplot chart")
    p.add_argument("--out-dir", help="where results go (default bench/results)")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 if any run failed or checksums differ")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--wait-idle", type=int, metavar="SECONDS", default=0,
                   help="first wait up to SECONDS for other work on the machine to stop")
    p.add_argument("--reproduce", help=argparse.SUPPRESS)
    g_ab = p.add_argument_group("A/B (--ab)")
    for side in ("a", "b"):
        g_ab.add_argument("--%s-env" % side, default="",
                          help="environment for side %s, e.g. 'HAKMEM_PROFILE=lean'" % side.upper())
        g_ab.add_argument("--%s-lib" % side,
                          help="library to preload for side %s (path, a peer name, or 'none'"
                               " for glibc; default <build-dir>/libhakmem.so)" % side.upper())
        g_ab.add_argument("--%s-build" % side,
                          help="build directory whose libhakmem.so side %s uses" % side.upper())
        g_ab.add_argument("--label-%s" % side, help="name for side %s" % side.upper())
    g_soak = p.add_argument_group("soak (--soak SECONDS)")
    g_soak.add_argument("--allocator", help="allocator(s) to soak, comma-separated "
                                            "(default hakmem)")
    g_soak.add_argument("--soak-args", help="bench_soak arguments after SECONDS "
                                            "(default '1000000 400 1': EPOCH_OPS WS SEED [MIN MAX])")
    args = p.parse_args(argv)
    explicit_build_dir = args.build_dir is not None

    if not explicit_build_dir:
        if args.update_readme and not (args.ab or args.soak is not None or args.instructions):
            return update_readme(out_dir=args.out_dir, readme=args.readme)
        args.build_dir = os.path.join(ROOT, "build-fast")
    if args.list:
        for w in WORKLOADS:
            print("%-16s %s %s   # %s" % (w.name, w.program, " ".join(w.args(w.quick)), w.desc))
        return 0
    if args.ab:
        return do_ab(args)
    if args.soak is not None:
        return do_soak(args)
    if args.instructions:
        return do_instructions(args)
    return do_compare(args)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
