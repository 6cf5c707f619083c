"""--ab: two settings (environment, library or build) alternating, with a
verdict only when the difference is outside the noise.

Besides throughput it reports each side's CPU time (user + system) and minor
page faults, with the medians of their paired ratios (run i of B over run i
of A): on a shared machine CPU time and fault counts vary far less than wall
time, and faults show memory purged and touched again (issue 6)."""
import datetime
import math
import os

from .allocators import ALL_ALLOCATORS, DEBIAN_PEERS, Allocator, peer_library
from .common import INSTALL_HINT, RESULTS_DIR, log, tail
from .parse import parse_env_assignments
from .report import fmt_mb, fmt_mops, fmt_num, fmt_pct, g, machine_line, markdown_table, write_csv
from .runner import CpuMeter, Progress, machine_info, run_program
from .stats import cv, mean, median, verdict
from .workloads import check_programs, select_workloads


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
        if lib in ALL_ALLOCATORS and lib != "hakmem":
            name = lib
            lib = peer_library(name)
            if not lib:
                raise SystemExit("%s is not installed: run %s%s" % (
                    name, INSTALL_HINT, "" if name in DEBIAN_PEERS else
                    " (Debian peers) or put it in the peers directory (--peers-dir)"))
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
        cpu = {"A": [], "B": []}
        flt = {"A": [], "B": []}
        pairs = []  # per run: side -> (CPU s, minor faults), only where it succeeded
        for r in range(runs_n):
            pairs.append({})
            order = [("A", a), ("B", b)] if r % 2 == 0 else [("B", b), ("A", a)]
            for key, side in order:
                res = run_program(build_dir, w, n, side)
                if res.ok:
                    vals[key].append(res.fields["ops_per_sec"])
                    rss[key].append(res.peak_rss_kb)
                    cpu[key].append(res.cpu)
                    flt[key].append(res.minflt)
                    pairs[-1][key] = (res.cpu, res.minflt)
                    progress.step("%s %s run %d: %s Mops/s" % (
                        w.name, key, r + 1, fmt_mops(res.fields["ops_per_sec"])))
                else:
                    progress.step("%s %s run %d: FAILED (%s)" % (w.name, key, r + 1, res.error))
                    log(tail(res.stderr))
        v = verdict(vals["A"], vals["B"], label_a="A", label_b="B")
        results.append((w, vals, rss, v, cpu, flt, pairs))
    header = ["workload", "side", "runs", "mean Mops/s", "median Mops/s", "CV", "RSS MB",
              "CPU s", "minor faults"]
    rows = []
    for w, vals, rss, v, cpu, flt, pairs in results:
        for key in ("A", "B"):
            rows.append([w.name, key, len(vals[key]), fmt_mops(mean(vals[key])),
                         fmt_mops(median(vals[key])), fmt_pct(cv(vals[key])),
                         fmt_mb(median(rss[key]) if rss[key] else float("nan")),
                         "%.3f" % median(cpu[key]) if cpu[key] else "-",
                         "%d" % median(flt[key]) if flt[key] else "-"])
    table = markdown_table(header, rows)
    prows = [[w.name, paired(pairs, 0), paired(pairs, 1)] for w, vals, rss, v, cpu, flt, pairs in results]
    ptable = markdown_table(["workload", "CPU time B/A", "minor faults B/A"], prows)
    vrows = [[w.name, "%+.2f%%" % v["delta_pct"] if not math.isnan(v["delta_pct"]) else "-",
              "[%+.2f%%, %+.2f%%]" % (v["ci_low"], v["ci_high"])
              if not math.isnan(v["ci_low"]) else "-", fmt_num(v["p"]), v["text"]]
             for w, vals, rss, v, cpu, flt, pairs in results]
    vtable = markdown_table(["workload", "delta B vs A (medians)", "bootstrap 95% CI",
                             "Mann-Whitney p", "verdict"], vrows)
    print("A = %s\nB = %s\n" % (format_side(a), format_side(b)))
    print(table)
    print()
    print(vtable)
    print()
    print(ptable)
    print("\nB/A: median of the paired ratios (run i of B over run i of A), and their "
          "interquartile range")
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
                "delta of medians excluding 0.\n\n%s\n\nB/A: median of the paired ratios "
                "(run i of B over run i of A), and their interquartile range.\n%s" % (
                    stamp, machine_line(machine_info()), format_side(a), format_side(b),
                    table, vtable, ptable, "\nNote: %s.\n" % noise if noise else ""))
    rows = []
    for w, vals, rss, v, cpu, flt, pairs in results:
        for key in ("A", "B"):
            for i, x in enumerate(vals[key]):
                rows.append([w.name, key, i, g(x), rss[key][i], "%.4f" % cpu[key][i], flt[key][i]])
    write_csv(base + ".csv", ["workload", "side", "run", "ops_per_sec", "peak_rss_kb", "cpu_s",
                              "minor_faults"], rows)
    log("wrote %s.md and %s.csv" % (base, base))
    return 0


def paired(pairs, k):
    """Median of B / A of figure k over the runs where both sides succeeded
    (run i of each), with the interquartile range."""
    r = sorted(p["B"][k] / p["A"][k] for p in pairs if "A" in p and "B" in p and p["A"][k] > 0)
    if not r:
        return "-"
    return "%.3f (%.3f-%.3f)" % (median(r), r[len(r) // 4], r[(3 * len(r)) // 4])


def format_side(s):
    env = " ".join("%s=%s" % kv for kv in s.env.items())
    return "%s (%s%s)" % (s.name, "LD_PRELOAD=" + s.preload if s.preload else "no preload",
                          ", " + env if env else "")
