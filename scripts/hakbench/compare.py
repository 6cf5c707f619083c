"""The default mode: every workload under every allocator, alternating run by
run, then system calls per operation under strace; tables, report, chart."""
import datetime
import os
import shutil
import time

from .allocators import (
    OPTIONAL_PEERS, Allocator, discover_allocators, extra_allocators, peers_dir_candidates)
from .chart import chart_comparison
from .common import INSTALL_HINT, RESULTS_DIR, ROOT, fmt_duration, log, tail
from .cpuprobe import CONTENDED_MARK, ProbeLog, judge, probe_table, refuse_readme, verdict_line
from .cpuprobe import write_json as write_probe_json
from .locks import LOCKS_TITLE, lock_table, measure_locks, observe_build
from .parse import ParseError
from .report import (
    build_tables, fmt_mb, fmt_mops, fmt_pct, fmt_rate, fmt_ratio, markdown_table, readme_block,
    secure_cost_table, update_readme, write_report_md, write_runs_csv, write_summary_csv)
from .runner import (
    CpuMeter, Progress, format_cmd, machine_info, probe_hakmem, run_program, strace_counts,
    wait_idle)
from .stats import cv, mean, median, syscalls_per_op
from .workloads import check_programs, select_workloads


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
                 "values": ops,
                 # Round by round (None where the run failed): the runs of
                 # round i alternated with the other allocators' round i, so
                 # the targets compare them as pairs.
                 "rounds": [r.fields["ops_per_sec"] if r.ok else None for r in rs],
                 "rss_rounds": [r.peak_rss_kb if r.ok else None for r in rs]}
            # The bytes the program itself held at its peak (bench_prodcons):
            # the same work under every allocator, shown beside the RSS.
            lives = [r.fields.get("peak_live_kb") for r in good]
            lives = [v for v in lives if isinstance(v, (int, float))]
            s["live_kb"] = lives
            if w.figure:
                figs = [r.fields.get(w.figure[0]) for r in good]
                figs = [f for f in figs if isinstance(f, (int, float))]
                s["figure"] = median(figs) if figs else float("nan")
            sc = syscalls.get((w.name, a.name))
            s["syscalls"] = sc
            summary[(w.name, a.name)] = s
    return summary


def paired_cpu_ratio(mine, theirs):
    """Median over the rounds of their CPU time over mine (> 1: mine used
    less); runs[i] of both lists is round i, so each ratio is one round."""
    ratios = [b.cpu / a.cpu for a, b in zip(mine, theirs)
              if a.ok and b.ok and a.cpu and b.cpu]
    return median(ratios) if ratios else None


def cpu_time_table(workloads, allocators, runs):
    """Each peer's CPU time over HAKMEM's (fast build, and standard after a
    slash), paired round by round; None without HAKMEM or a peer."""
    names = [a.name for a in allocators]
    haks = [n for n in ("hakmem", "hakmem-std") if n in names]
    peers = [a.name for a in allocators if not a.name.startswith("hakmem") and not a.extra]
    if not haks or not peers:
        return None
    rows = []
    for w in workloads:
        if not w.compared:
            continue
        row = [w.name]
        for p in peers:
            row.append(" / ".join(fmt_ratio(paired_cpu_ratio(runs.get((w.name, h), []),
                                                             runs.get((w.name, p), [])))
                                  for h in haks))
        rows.append(row)
    if not rows:
        return None
    return markdown_table(["workload"] + ["%s / %s" % (p, " / ".join(haks)) for p in peers], rows)


CPU_TIME_TITLE = (
    "CPU time (user + system of the whole process) of each peer over HAKMEM's, the median of "
    "the ratios of each round's runs (> 1: HAKMEM used less). Time spent waiting for a CPU "
    "is not in it, so on a busy machine it varies far less than throughput (`--ab` prints "
    "the same for two settings); for the multi-threaded workloads it also counts every "
    "thread's spinning and is no throughput figure.")


def checksum_notes(workloads, allocators, summary):
    notes = []
    for w in workloads:
        sums = {a.name: summary[(w.name, a.name)]["checksum"] for a in allocators
                if summary[(w.name, a.name)]["checksum"] is not None}
        if len(set(sums.values())) > 1:
            notes.append("CHECKSUM MISMATCH in %s (data corrupted by some allocator): %s"
                         % (w.name, ", ".join("%s=%s" % kv for kv in sums.items())))
    return notes


def do_compare(args):
    build_dir = args.build_dir
    secure = getattr(args, "secure", False)
    wanted = set(args.allocators.split(",")) if args.allocators else ({"hakmem"} if secure else None)
    allocators = (discover_allocators(build_dir, wanted, log,
                                      None if secure else getattr(args, "std_build_dir", None))
                  + extra_allocators(args.lib))
    if secure:
        allocators.append(secure_allocator(build_dir))
        args.no_syscalls = True
    notes = []
    missing = [p for p in ("mimalloc", "jemalloc", "tcmalloc")
               if (not wanted or p in wanted) and p not in [a.name for a in allocators]]
    if missing:
        notes.append("not measured (not installed): %s; run %s"
                     % (", ".join(missing), INSTALL_HINT))
    absent = [p[0] for p in OPTIONAL_PEERS
              if (not wanted or p[0] in wanted) and p[0] not in [a.name for a in allocators]]
    if absent:
        log("optional peers not found (skipped): %s; looked in %s" % (
            ", ".join(absent), ", ".join(peers_dir_candidates()) or "no directory"))
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
    # CPU-availability probes (cpuprobe.py): before each workload, between its
    # rounds every few minutes, and after the last.
    probes = ProbeLog(build_dir, args.quiet)
    t_start = time.perf_counter()
    for w in workloads:
        n = w.full if args.full else w.quick
        probes.probe("before " + w.name)
        for r in range(runs_n):
            if r and probes.due():
                probes.probe("%s round %d" % (w.name, r + 1))
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
    probes.probe("after " + (workloads[-1].name if workloads else "the runs"))
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
    cpu_table = cpu_time_table(workloads, allocators, runs)
    if cpu_table:
        main_table += "\n\n" + CPU_TIME_TITLE + "\n\n" + cpu_table
    if secure:
        cost, gm = secure_cost_table(workloads, summary)
        notes.append("secure build: geometric mean of throughput secure/fast %s (%s lower)"
                     % (fmt_ratio(gm), fmt_pct(1 - gm)))
        main_table += "\n\nlibhakmem-secure.so against libhakmem.so (median throughput):\n\n" + cost
    locks = None
    if getattr(args, "with_locks", False):
        rates, names, lock_notes = measure_locks(observe_build(args.observe_build), workloads,
                                                 args.quiet)
        notes += lock_notes
        locks = lock_table(workloads, rates, names) if rates else None
    print(main_table)
    if sys_table:
        print()
        print("memory syscalls per operation (mmap+munmap+madvise+brk+mremap, after warm-up):")
        print(sys_table)
    if locks:
        print("\n" + LOCKS_TITLE + ":\n\n" + locks)
    for n in notes:
        print("note: " + n)
    verdict = judge(probes.probes)
    print(verdict_line(verdict))
    if probes.enabled:
        notes.append(verdict_line(verdict))
    log("finished in %s" % fmt_duration(elapsed))

    date = datetime.date.today().isoformat()
    out_dir = args.out_dir or RESULTS_DIR
    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, ("secure-" if secure else "") + date)
    machine = machine_info()
    command = reproduce_command(args)
    chart_ok = False
    if not args.no_chart:
        chart_ok = chart_comparison(base + ".png", workloads, allocators, summary,
                                    " (%s, %s)" % (date, mode))
    chart_rel = os.path.relpath(base + ".png", ROOT) if chart_ok else None
    block = readme_block(date, mode, machine, command, main_table, sys_table, chart_rel, notes,
                         locks)
    extra = []
    if probes.probes:
        extra.append("CPU-availability probes (`bench_cpuprobe`: %s threads spinning together "
                     "against one alone, no preload):\n\n%s"
                     % (verdict.get("threads") or "N",
                        probe_table(probes.probes, verdict, markdown_table)))
        write_probe_json(base + "-cpuprobe.json", probes.probes, verdict)
    if verdict["contended"]:
        extra.append(CONTENDED_MARK)
    write_report_md(base + ".md", date, mode, machine, command, allocators, workloads,
                    runs_n, elapsed, block, summary, extra)
    write_summary_csv(base + ".csv", date, workloads, allocators, summary)
    write_runs_csv(base + "-runs.csv", workloads, allocators, runs)
    log("wrote %s.md, %s.csv, %s-runs.csv%s%s" % (
        base, base, base, ", %s-cpuprobe.json" % base if probes.probes else "",
        ", %s.png" % base if chart_ok else ""))
    if args.update_readme and not secure and \
            not refuse_readme(verdict["contended"], getattr(args, "allow_contended", False)):
        update_readme(block, readme=args.readme)
    failed = any(s["failed"] for s in summary.values())
    mismatch = any("CHECKSUM MISMATCH" in n for n in notes)
    return 1 if (failed or mismatch) and args.strict else 0


def secure_allocator(build_dir):
    """--secure: the secure library built beside libhakmem.so."""
    lib = os.path.join(build_dir, "libhakmem-secure.so")
    if not os.path.exists(lib):
        raise SystemExit("--secure: %s not found (built unless -DHAKMEM_SECURE_LIB=OFF)" % lib)
    return Allocator("hakmem-secure", os.path.abspath(lib), note="libhakmem-secure.so", extra=True)


def reproduce_command(args):
    if args.reproduce:
        return args.reproduce
    build = os.path.relpath(os.path.abspath(args.build_dir), ROOT)
    std = getattr(args, "std_build_dir", None)
    std = os.path.relpath(os.path.abspath(std), ROOT) if std else None
    rest = []
    if args.full:
        rest.append("--full")
    if args.runs:
        rest += ["--runs", str(args.runs)]
    if args.workloads:
        rest += ["--workloads", args.workloads]
    if args.allocators:
        rest += ["--allocators", args.allocators]
    if getattr(args, "with_locks", False):
        rest.append("--with-locks")
    if getattr(args, "secure", False):
        rest.append("--secure")
    for spec in getattr(args, "lib", None) or ():
        rest += ["--lib", spec]
    # make bench = scripts/bench.py --build-dir build-fast --std-build-dir build-bench-std ARGS
    if build == "build-fast" and std in (None, "build-bench-std"):
        if not rest:
            return "make bench"
        return 'make bench ARGS="%s"' % " ".join(rest) if len(rest) > 1 else \
            "make bench ARGS=%s" % rest[0]
    parts = ["python3", "scripts/bench.py", "--build-dir", build]
    if std:
        parts += ["--std-build-dir", std]
    return " ".join(parts + rest)
