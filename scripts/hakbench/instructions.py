"""--instructions: instructions per operation under callgrind, from the
difference of two run lengths."""
import datetime
import os
import shutil

from .allocators import discover_allocators
from .common import INSTALL_HINT, RESULTS_DIR, log
from .parse import ParseError
from .report import machine_line, markdown_table, write_csv
from .runner import Progress, callgrind_instructions, git_revision, machine_info, probe_hakmem
from .stats import instructions_per_op
from .workloads import WORKLOADS, check_programs, select_workloads


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
