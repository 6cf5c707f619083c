"""Formatting and reports: number formats, markdown tables, the comparison
tables, the markdown and CSV files of a run, the README block."""
import math
import os
import re

from .allocators import package_version
from .common import (
    BLOCK_BEGIN, BLOCK_END, EXTRA_SYSCALLS, MEMORY_SYSCALLS, README_BEGIN, README_END, RESULTS_DIR,
    ROOT, fmt_duration, log)
from .cpuprobe import CONTENDED_MARK, refuse_readme
from .parse import ParseError
from .stats import ratio
from .targets import targets_table


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


def secure_cost_table(workloads, summary, fast="hakmem", secure="hakmem-secure"):
    """--secure: per workload the median throughput of the secure library
    over the fast one, and their geometric mean over the workloads measured
    under both whose throughput is compared (not thread_mem or heap_destroy,
    whose figure is memory or one call's time: their rows say so).
    Returns (markdown table, geometric mean or NaN)."""
    rows, logs = [], []
    for w in workloads:
        f = summary.get((w.name, fast), {}).get("median", float("nan"))
        s = summary.get((w.name, secure), {}).get("median", float("nan"))
        r = ratio(s, f)
        if w.compared and not math.isnan(r) and r > 0:
            logs.append(math.log(r))
        rows.append([w.name, fmt_mops(f), fmt_mops(s), fmt_ratio(r) + ("" if w.compared else " (not in the mean)")])
    gm = math.exp(sum(logs) / len(logs)) if logs else float("nan")
    rows.append(["geometric mean", "", "", fmt_ratio(gm)])
    return markdown_table(["workload", "libhakmem.so M ops/s", "libhakmem-secure.so M ops/s", "secure / fast"],
                          rows), gm


def markdown_table(header, rows):
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    for row in rows:
        out.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(out)


def display_path(path):
    """Paths inside the repository are shown relative to it."""
    if path and os.path.isabs(path) and path.startswith(ROOT + os.sep):
        return os.path.relpath(path, ROOT)
    return path


def machine_line(m):
    return "%d x %s (%s), Linux %s, %s" % (m["nproc"], m["cpu"], m["arch"], m["kernel"],
                                          m["glibc"] or "libc ?")


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


def best_peer(summary, workload, peers):
    """The peer with the highest median throughput on workload, or None."""
    ok = [(summary[(workload, n)]["median"], n) for n in peers
          if summary[(workload, n)]["n"] and summary[(workload, n)]["median"] > 0]
    return max(ok)[1] if ok else None


def live_note(workloads, names, summary):
    """A line giving, for the workloads whose program counts them
    (peak_live_kb=), the bytes the program held at its peak over every run
    of every allocator: the part of the peak RSS that is the workload's, not
    the allocator's.  None when no workload reports it."""
    parts = []
    for w in workloads:
        vals = [v for n in names for v in summary[(w.name, n)].get("live_kb") or ()]
        if vals:
            lo, hi = min(vals), max(vals)
            parts.append("%s %s MB" % (w.name, fmt_mb(lo) if fmt_mb(lo) == fmt_mb(hi)
                                       else "%s-%s" % (fmt_mb(lo), fmt_mb(hi))))
    if not parts:
        return None
    return ("Bytes the program itself held at its peak (requested sizes, its own count, "
            "over all runs): " + ", ".join(parts) + ".")


HAKMEM_BUILDS = ("hakmem", "hakmem-std")


def build_tables(workloads, allocators, summary):
    """The throughput table (with HAKMEM's ratios), the peak-RSS table, the
    workloads' own figures and the targets; and the syscall table."""
    names = [a.name for a in allocators]
    has_hak = "hakmem" in names
    haks = [n for n in HAKMEM_BUILDS if n in names]
    header = ["workload"] + ["%s Mops/s (CV)" % n for n in names]
    peers = [a.name for a in allocators if a.name not in ("hakmem", "glibc") and not a.extra]
    # The issue targets are stated against the allocators users run today
    # (Debian's mimalloc, jemalloc, tcmalloc): their best gets a column of its
    # own when the optional peers make "best peer" a different question.
    debian = [n for n in ("mimalloc", "jemalloc", "tcmalloc") if n in peers]
    with_debian = len(debian) > 1 and len(peers) > len(debian)
    refs = [r for r in ("mimalloc", "glibc") if r in names] if has_hak else []
    # (build, peer group) of each best-peer column
    best_cols = []
    if with_debian:
        best_cols += [(h, debian, "%s/best of %s" % (h, ", ".join(debian))) for h in haks]
    if len(peers) > 1:
        best_cols += [(h, peers, "%s/best peer" % h)
                      for h in (haks if not with_debian else haks[:1])]
    header += ["hakmem/%s" % r for r in refs] + [c[2] for c in best_cols]
    rows, rss_rows = [], []
    for w in workloads:
        row = [w.name]
        for n in names:
            s = summary[(w.name, n)]
            if s["n"] == 0:
                row.append("FAIL" if s["failed"] else "-")
            else:
                row.append("%s (%s)" % (fmt_mops(s["median"]), fmt_pct(s["cv"])))
        if not w.compared:
            row += ["n/a"] * (len(refs) + len(best_cols))
        else:
            for ref in refs:
                row.append(fmt_ratio(ratio(summary[(w.name, "hakmem")]["median"],
                                           summary[(w.name, ref)]["median"])))
            for h, group, _ in best_cols:
                best = best_peer(summary, w.name, group)
                row.append("%s (%s)" % (fmt_ratio(ratio(summary[(w.name, h)]["median"],
                                                        summary[(w.name, best)]["median"])),
                                        best) if best else "-")
        rows.append(row)
        rss_rows.append([w.name] + [fmt_mb(summary[(w.name, n)]["rss_kb"]) for n in names])
    main = markdown_table(header, rows)
    main += ("\n\nMedian peak resident memory of the process, MB:\n\n"
             + markdown_table(["workload"] + names, rss_rows))
    live = live_note(workloads, names, summary)
    if live:
        main += "\n\n" + live
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
    targets = targets_table(workloads, names, summary, markdown_table)
    if targets:
        main += ("\n\nThe issues' targets, judged on this run's paired ratios: the median "
                 "over the rounds of HAKMEM's throughput over that of the fastest of the "
                 "named peers (in brackets) in the same round, then the ratio of the two "
                 "medians; peak RSS as medians, MB, and the median of the paired ratios "
                 "HAKMEM/mimalloc (at most 1 meets the target):\n\n" + targets)
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


def g(v):
    if v is None or v == "":
        return ""
    if isinstance(v, float):
        if math.isnan(v):
            return ""
        return "%.6g" % v
    return v


def readme_block(date, mode, machine, command, main_table, sys_table, chart_rel, notes,
                 lock_table=None):
    lines = [
        "_%s, %s run on %s%s._" % (date, mode, machine_line(machine),
                                   ", source %s" % machine["rev"] if machine.get("rev") else ""),
        "",
        "Median throughput in million operations per second (one operation = one",
        "malloc, free or realloc) with the coefficient of variation over the runs;",
        "`hakmem` is the fast build, `hakmem-std` the standard one (what `make",
        "install` installs). Ratios: HAKMEM's throughput to mimalloc's, to glibc's,",
        "to the fastest of Debian's mimalloc, jemalloc and tcmalloc (the issues'",
        "targets) and to the fastest peer on that workload (named).",
        "",
        main_table,
    ]
    if sys_table:
        lines += ["", "Memory system calls (mmap+munmap+madvise+brk+mremap) per operation",
                  "after warm-up (difference of two run lengths under strace; 0 means none",
                  "in the extra operations of the longer run):", "",
                  sys_table]
    if lock_table:
        lines += ["", "HAKMEM's process-wide lock acquisitions per million operations after",
                  "warm-up (observe build, difference of two run lengths):", "", lock_table]
    if chart_rel:
        lines += ["", "![HAKMEM relative to its peers](%s)" % chart_rel]
    if notes:
        lines += [""] + ["- " + n for n in notes]
    lines += ["", "Reproduce: `%s`" % command]
    return "\n".join(lines)


def write_report_md(path, date, mode, machine, command, allocators, workloads, runs_n,
                    elapsed, block, summary, extra=()):
    lines = ["# HAKMEM benchmarks, %s (%s)" % (date, mode), ""]
    lines.append("Machine: %s.  " % machine_line(machine))
    # The revision read before this run wrote its tracked result files (the
    # chart, the CSVs): read now, it would say "-dirty" because of them.
    rev = machine.get("rev")
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
                                     " (package version %s)" % ver if ver else
                                     " (%s)" % a.note if a.note else ""))
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
    for section in extra:
        lines += ["", section]
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
              "peak_rss_kb", "ru_maxrss_kb", "peak_live_kb", "checksum", "error"]
    rows = []
    for w in workloads:
        for a in allocators:
            for i, r in enumerate(runs.get((w.name, a.name), [])):
                f = r.fields or {}
                rows.append([w.name, a.name, i, int(r.ok), g(f.get("ops_per_sec")),
                             f.get("ops", ""), g(f.get("secs")), "%.4f" % r.wall,
                             r.peak_rss_kb, r.maxrss_kb, f.get("peak_live_kb", ""),
                             f.get("checksum", ""), r.error or ""])
    write_csv(path, header, rows)


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


def update_readme(block=None, out_dir=None, readme=None, allow_contended=False):
    """Put block (or the newest report's) into README.md.  A report whose
    CPU-availability probes read contended is refused unless allow_contended."""
    readme = readme or os.path.join(ROOT, "README.md")
    if block is None:
        report = latest_report(out_dir or RESULTS_DIR)
        if not report:
            log("no bench/results/<date>.md yet: run the benchmarks first")
            return 1
        with open(report, encoding="utf-8") as f:
            text = f.read()
        block = extract_block(text)
        log("using %s" % os.path.relpath(report, ROOT))
        if refuse_readme(CONTENDED_MARK in text, allow_contended):
            return 1
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
