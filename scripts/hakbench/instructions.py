"""--instructions: instructions per operation under callgrind and, beside
them, what each operation costs the memory system under cachegrind's
simulator: D1 and last-level cache misses, and page touches as misses of
simulated data TLBs.  Every figure is the difference of two run lengths per
operation, so start-up cancels."""
import datetime
import os
import shutil

from .allocators import discover_allocators, extra_allocators
from .common import INSTALL_HINT, RESULTS_DIR, log
from .parse import ParseError
from .report import machine_line, markdown_table, write_csv
from .runner import (
    CACHE_SIM, TLB_SIM, Progress, cachegrind_counts, callgrind_instructions, git_revision,
    machine_info, probe_hakmem)
from .stats import instructions_per_op
from .workloads import WORKLOADS, check_programs, select_workloads

# (key, title, simulator, events summed) of the cache figures.
CACHE_METRICS = (
    ("d1", "D1 misses per operation (32 KiB 8-way L1 data cache, 64 B lines)",
     "cache", ("D1mr", "D1mw")),
    ("ll", "LL data misses per operation (8 MiB 16-way last level, 64 B lines)",
     "cache", ("DLmr", "DLmw")),
    ("tlb64", "page touches per operation outside the 64 most recent pages "
              "(64-entry fully associative dTLB)", "tlb", ("D1mr", "D1mw")),
    ("tlb1536", "page touches per operation outside a 1536-entry 12-way L2 TLB",
     "tlb", ("DLmr", "DLmw")),
)
SIMS = {"cache": CACHE_SIM, "tlb": TLB_SIM}


def cache_figures(short, long_):
    """{metric key: per-op} from {sim: (ops, events)} of two run lengths."""
    out = {}
    for key, _, sim, events in CACHE_METRICS:
        if sim not in short or sim not in long_:
            continue
        (ops_s, ev_s), (ops_l, ev_l) = short[sim], long_[sim]
        out[key] = instructions_per_op((ops_s, sum(ev_s.get(e, 0) for e in events)),
                                       (ops_l, sum(ev_l.get(e, 0) for e in events)))
    return out


def fmt_per_op(v):
    if v is None:
        return "FAIL"
    return "%.3f" % v if abs(v) < 10 else "%.1f" % v


def do_instructions(args):
    if not shutil.which("valgrind"):
        raise SystemExit("valgrind not found: install it with %s" % INSTALL_HINT)
    build_dir = args.build_dir
    wanted = set(args.allocators.split(",")) if args.allocators else None
    allocators = discover_allocators(build_dir, wanted, log) + extra_allocators(args.lib)
    notes = []
    note = probe_hakmem(build_dir, allocators)
    if note:
        notes.append(note)
    if args.workloads:
        workloads = [w for w in select_workloads(args.workloads) if w.callgrind]
    else:
        workloads = [w for w in WORKLOADS if w.callgrind]
    check_programs(build_dir, workloads)
    sims = [] if getattr(args, "no_cache", False) else list(SIMS)
    progress = Progress(len(workloads) * len(allocators) * 2 * (1 + len(sims)), args.quiet)
    ipo = {}
    cache = {}
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
                progress.step("%s %s: %.1f instructions/op" % (w.name, a.name, v))
                runs = ({}, {})
                for sim in sims:
                    for i, n in enumerate(w.callgrind):
                        runs[i][sim] = cachegrind_counts(build_dir, w, n, a, SIMS[sim])
                        progress.step("%s %s: cachegrind (%s) %s run" % (
                            w.name, a.name, sim, ("short", "long")[i]))
                figs = cache_figures(*runs)
                cache[(w.name, a.name)] = figs
                raw.append([w.name, a.name, " ".join(w.args(w.callgrind[0])), short[0],
                            short[1], " ".join(w.args(w.callgrind[1])), long_[0], long_[1],
                            "%.2f" % v] + ["%.4f" % figs[m[0]] if m[0] in figs else ""
                                           for m in CACHE_METRICS])
            except (RuntimeError, ParseError, ValueError) as e:
                progress.step("%s %s: FAILED" % (w.name, a.name))
                log(str(e))
                lines = [x for x in str(e).splitlines() if x.strip() and not x.startswith("==")]
                notes.append("%s under %s failed under valgrind: %s" % (
                    w.name, a.name, lines[0] + (" (%s)" % lines[-1] if len(lines) > 1 else "")))
    names = [a.name for a in allocators]
    rows = []
    for w in workloads:
        rows.append([w.name + " (%s vs %s)" % (w.callgrind[0], w.callgrind[1])]
                    + ["%.1f" % ipo[(w.name, n)] if (w.name, n) in ipo else "FAIL"
                       for n in names])
    tables = [("instructions per operation (callgrind Ir, difference of two run lengths)",
               markdown_table(["workload (run lengths)"] + names, rows))]
    for key, title, sim, _ in CACHE_METRICS:
        if sim not in sims:
            continue
        rows = [[w.name] + [fmt_per_op(cache.get((w.name, n), {}).get(key)) for n in names]
                for w in workloads]
        tables.append((title, markdown_table(["workload"] + names, rows)))
    text = "\n\n".join("%s:\n\n%s" % t for t in tables)
    print(text)
    for n in notes:
        print("note: " + n)
    date = datetime.date.today().isoformat()
    out_dir = args.out_dir or RESULTS_DIR
    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, "instructions-" + date)
    write_csv(base + ".csv", ["workload", "allocator", "short_args", "short_ops", "short_ir",
                              "long_args", "long_ops", "long_ir", "instructions_per_op"]
              + ["%s_per_op" % m[0] for m in CACHE_METRICS], raw)
    with open(base + ".md", "w", encoding="utf-8") as f:
        f.write("# Instructions and memory-system cost per operation, %s\n\n"
                "Machine: %s; source %s\n\n"
                "`valgrind --tool=callgrind`, total Ir of two run lengths of each program; "
                "(Ir(long) - Ir(short)) / (ops(long) - ops(short)), so start-up cancels. "
                "Misses likewise from `valgrind --tool=cachegrind --cache-sim=yes` with fixed "
                "simulated caches (`%s`) and, with 4 KiB lines standing for pages, data "
                "TLBs (`%s`).\n\n%s\n%s" % (
                    date, machine_line(machine_info()), git_revision() or "?",
                    " ".join(CACHE_SIM), " ".join(TLB_SIM), text,
                    "".join("\n- " + n for n in notes)))
    log("wrote %s.md and %s.csv" % (base, base))
    return 0
