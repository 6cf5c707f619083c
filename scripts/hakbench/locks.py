"""--locks: acquisitions of HAKMEM's process-wide locks per million operations
after warm-up, per lock and workload.

The observe build (-DHAKMEM_BUILD=observe) counts every acquisition of each
process-wide lock and its HAKMEM_STATS=1 report at exit (on stderr) has one
line `lock <name> <count>` per lock taken, after a `locks counted` line
(present even when no lock was taken at all).  Each workload runs at the two
lengths of its strace pair; (count(long) - count(short)) / (ops(long) -
ops(short)) cancels start-up and warm-up.  When the longer run took a lock
fewer times than the shorter (scheduling-dependent work such as abandoning
pages at thread exit), the whole longer run's average is shown instead,
marked '*'.  A build without the counters prints no such lines: the mode
says so rather than failing."""
import datetime
import os
import re
import subprocess

from .allocators import Allocator
from .common import RESULTS_DIR, ROOT, log, tail
from .report import machine_line, markdown_table, write_csv
from .runner import Progress, check_run, git_revision, machine_info, run_measured
from .workloads import WORKLOADS, program_path, select_workloads

_LOCK_LINE = re.compile(r"^\s*lock\s+(\S+)\s+(\d+)\s*$", re.MULTILINE)
_COUNTED_LINE = re.compile(r"^\s*locks counted\s*$", re.MULTILINE)
NO_LINES = ("no `lock <name> <count>` lines in the HAKMEM_STATS=1 report of %s: "
            "this build does not count lock acquisitions")


def parse_lock_lines(text):
    """{lock name: acquisitions} from a HAKMEM_STATS report (summed if repeated)."""
    out = {}
    for name, count in _LOCK_LINE.findall(text):
        out[name] = out.get(name, 0) + int(count)
    return out


def per_million(short, long_):
    """(ops, {lock: n}) of two run lengths -> ({lock: (per million ops, whole_run)})
    where whole_run is True when the difference was negative and the longer
    run's own average stands in."""
    ops_s, locks_s = short
    ops_l, locks_l = long_
    if ops_l <= ops_s:
        raise ValueError("the long run must do more operations than the short one")
    out = {}
    for name in set(locks_s) | set(locks_l):
        d = locks_l.get(name, 0) - locks_s.get(name, 0)
        if d >= 0:
            out[name] = (d * 1e6 / (ops_l - ops_s), False)
        else:
            out[name] = (locks_l.get(name, 0) * 1e6 / ops_l, True)
    return out


def fmt_rate_cell(value):
    if value is None:
        return "-"
    v, whole = value
    text = "0" if v == 0 else ("%.0f" % v if v >= 100 else "%.3g" % v)
    return text + ("*" if whole else "")


def observe_build(dir_=None, log=log):
    """The observe build's directory, configured and built (incrementally) when
    it is the default one or already a CMake build tree."""
    d = os.path.abspath(dir_ or os.path.join(ROOT, "build-observe"))
    lib = os.path.join(d, "libhakmem.so")
    if dir_ is None or os.path.exists(os.path.join(d, "CMakeCache.txt")):
        steps = []
        if not os.path.exists(os.path.join(d, "CMakeCache.txt")):
            steps.append(["cmake", "-S", ROOT, "-B", d, "-DCMAKE_BUILD_TYPE=Release",
                          "-DHAKMEM_BUILD=observe", "-DHAKMEM_BUILD_TESTS=OFF"])
        steps.append(["cmake", "--build", d, "-j", "2"])
        for cmd in steps:
            log("locks: " + " ".join(cmd))
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode != 0:
                raise SystemExit("building the observe build failed:\n%s"
                                 % tail(res.stdout + res.stderr, 20))
    if not os.path.exists(lib):
        raise SystemExit("%s not found: build it with cmake -S . -B %s -DHAKMEM_BUILD=observe "
                         "-DHAKMEM_BUILD_TESTS=OFF" % (lib, d))
    return d


def lock_run(prog_dir, workload, n, alloc):
    """Run one length with HAKMEM_STATS=1; return (ops, {lock: count})."""
    cmd = [program_path(prog_dir, workload.program)] + workload.args(n)
    env = alloc.environment()
    env["HAKMEM_STATS"] = "1"
    res = run_measured(cmd, env, timeout=600)
    check_run(res, workload.program)
    if not res.ok:
        raise RuntimeError("%s %s: %s\n%s" % (workload.name, " ".join(workload.args(n)),
                                              res.error, tail(res.stderr)))
    return res.fields["ops"], parse_lock_lines(res.stderr), bool(_COUNTED_LINE.search(res.stderr))


def measure_locks(obs_dir, workloads, quiet=False, log=log):
    """{workload: {lock: (per million, whole_run)}} (None when a run failed),
    the lock names in order of total rate, and notes."""
    alloc = Allocator("hakmem-observe", os.path.join(obs_dir, "libhakmem.so"))
    prog_dir = obs_dir
    progress = Progress(2 * len(workloads), quiet)
    rates, notes, seen_any = {}, [], False
    for w in workloads:
        try:
            short = lock_run(prog_dir, w, w.trace[0], alloc)
            progress.step("%s locks: short run" % w.name)
            long_ = lock_run(prog_dir, w, w.trace[1], alloc)
            progress.step("%s locks: %s" % (w.name, ", ".join(
                "%s %d" % kv for kv in sorted(long_[1].items())) or "no lock lines"))
            seen_any = seen_any or bool(short[1] or long_[1]) or short[2] or long_[2]
            rates[w.name] = per_million(short[:2], long_[:2])
        except (RuntimeError, ValueError) as e:
            progress.done += 1
            rates[w.name] = None
            log(str(e))
            notes.append("%s: lock run failed: %s" % (w.name, str(e).splitlines()[0]))
    if not seen_any:
        return {}, [], [NO_LINES % alloc.preload] + notes
    totals = {}
    for r in rates.values():
        for name, (v, _) in (r or {}).items():
            totals[name] = totals.get(name, 0.0) + v
    names = sorted(totals, key=lambda k: (-totals[k], k))
    return rates, names, notes


def lock_table(workloads, rates, names):
    rows = []
    for w in workloads:
        r = rates.get(w.name)
        if r is None:
            rows.append([w.name] + ["FAIL"] * (len(names) + 1))
            continue
        total = (sum(v for v, _ in r.values()), any(wh for _, wh in r.values()))
        rows.append([w.name] + [fmt_rate_cell(r.get(n, (0.0, False))) for n in names]
                    + [fmt_rate_cell(total)])
    table = markdown_table(["workload"] + names + ["all locks"], rows)
    if any(c.endswith("*") for row in rows for c in row):
        table += ("\n\n\\* the longer run took the lock fewer times than the shorter one "
                  "(scheduling-dependent): the longer run's whole-run average instead")
    return table


LOCKS_TITLE = ("Process-wide lock acquisitions per million operations after warm-up "
               "(observe build, difference of two run lengths)")


def do_locks(args):
    obs = observe_build(args.observe_build)
    workloads = select_workloads(args.workloads) if args.workloads else list(WORKLOADS)
    missing = [w.program for w in workloads
               if not os.path.exists(program_path(obs, w.program))]
    if missing:
        raise SystemExit("benchmark programs missing in %s/bench: %s"
                         % (obs, ", ".join(sorted(set(missing)))))
    rates, names, notes = measure_locks(obs, workloads, args.quiet)
    date = datetime.date.today().isoformat()
    if not rates:
        for n in notes:
            print("note: " + n)
        print("no lock acquisition figures (none were found)")
        return 0
    table = lock_table(workloads, rates, names)
    print(LOCKS_TITLE + ":\n")
    print(table)
    for n in notes:
        print("note: " + n)
    out_dir = args.out_dir or RESULTS_DIR
    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, "locks-" + date)
    rows = []
    for w in workloads:
        for name, (v, whole) in sorted((rates.get(w.name) or {}).items()):
            rows.append([w.name, " ".join(w.args(w.trace[0])), " ".join(w.args(w.trace[1])),
                         name, "%.4g" % v, int(whole)])
    write_csv(base + ".csv", ["workload", "short_args", "long_args", "lock",
                              "per_million_ops", "whole_run_average"], rows)
    with open(base + ".md", "w", encoding="utf-8") as f:
        f.write("# Lock acquisitions, %s\n\nMachine: %s; source %s; library %s\n\n%s:\n\n%s\n%s"
                % (date, machine_line(machine_info()), git_revision() or "?",
                   os.path.join(obs, "libhakmem.so"), LOCKS_TITLE, table,
                   "".join("\n- " + n for n in notes)))
    log("wrote %s.md and %s.csv" % (base, base))
    return 0
