"""--soak SECONDS: bench_soak's epochs, drift of throughput and RSS."""
import datetime
import os
import shlex
import time

from .allocators import discover_allocators
from .chart import chart_soak
from .common import RESULTS_DIR, log, tail
from .parse import ParseError, parse_epochs, parse_fields
from .report import fmt_mb, fmt_mops, fmt_num, fmt_pct, g, machine_line, markdown_table, write_csv
from .runner import CpuMeter, check_run, format_cmd, git_revision, machine_info, run_measured
from .stats import soak_stats
from .workloads import program_path


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
