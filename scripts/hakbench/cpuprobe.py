"""The CPU-availability probe (bench/bench_cpuprobe.c): run before the first
workload, between workloads, every few minutes within one, and after the
last; its figures go into the report (markdown and <date>-cpuprobe.json)
with a verdict.  A table taken on a contended machine is not written into
README.md unless --allow-contended says so.

Why: this is a 2-vCPU virtual machine, and the host at times takes CPU time
away from it.  Nothing inside the guest shows that (load average, steal time,
the other processes' CPU time all read normal), yet every multi-threaded
workload then runs at a fraction of its usual throughput.  The probe times
N threads spinning together against one thread alone: uncontended they take
about as long (parallel / serial 1.0-1.1); when the guest gets less than N
CPUs' worth, the threads together take longer, and when the host slows every
vCPU, one thread alone takes longer than at the run's best probe."""
import json
import os
import subprocess
import time

from .common import log
from .parse import ParseError, parse_fields
from .runner import CpuMeter
from .workloads import program_path

PROGRAM = "bench_cpuprobe"

# A probe reads contended when the median over its repetitions of the threads'
# time together over one thread's alone exceeds RATIO_LIMIT, or when its one
# thread took more than SERIAL_LIMIT times the fastest probe of the run.
# Measured on the 2-vCPU VM (bench_cpuprobe's defaults, 5 x 50M steps, 16-17
# ms a spin): 0.93-1.07 with nothing else running in the guest, 1.3-5.5 under
# other work there or while the host took a vCPU; README "Performance" and the
# commit that set them give the figures.
RATIO_LIMIT = 1.30
SERIAL_LIMIT = 1.50
# A contended probe while the guest's other processes used less than this
# share of the CPUs is counted as the host's doing in the verdict.
HOST_OTHERS = 0.10
# Within a workload, probe again between rounds once this many seconds have
# passed since the last probe.
INTERVAL = 180.0

REQUIRED = ("threads", "reps", "work", "serial_s", "parallel_s", "ratio", "ratio_max", "cpus")


def parse_probe(text):
    """The probe's result line -> dict; the per-repetition lists as floats."""
    line = None
    for raw in text.splitlines():
        if raw.strip().startswith(PROGRAM + " "):
            line = raw.strip()
    if line is None:
        raise ParseError("no %s line in %r" % (PROGRAM, text[-200:]))
    f = parse_fields(line)
    missing = [k for k in REQUIRED if k not in f]
    if missing:
        raise ParseError("%s line lacks %s: %r" % (PROGRAM, ", ".join(missing), line))
    for key in ("serial_all", "parallel_all"):
        v = f.get(key)
        if isinstance(v, (int, float)):
            f[key] = [float(v)]
        elif isinstance(v, str):
            try:
                f[key] = [float(x) for x in v.split(",") if x]
            except ValueError:
                raise ParseError("bad %s=%r" % (key, v))
    for key in ("serial_s", "parallel_s", "ratio", "ratio_max", "cpus"):
        if not isinstance(f[key], (int, float)) or f[key] <= 0:
            raise ParseError("%s=%r is not a positive number" % (key, f[key]))
    return f


class Probe:
    """One run of the probe: when (a label), at (epoch seconds), fields or
    error, and others: the share of the CPUs that other processes of the
    guest used meanwhile (NaN unknown).  A contended probe with others near 0
    lost its CPU to the host."""

    def __init__(self, when, at, fields=None, error=None, others=float("nan")):
        self.when = when
        self.at = at
        self.fields = fields
        self.error = error
        self.others = others

    @property
    def ok(self):
        return self.fields is not None


def run_probe(build_dir, when, timeout=60):
    """Run the probe once, without any preload; never raises."""
    at = time.time()
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    meter = CpuMeter()
    try:
        out = subprocess.run([program_path(build_dir, PROGRAM)], env=env,
                             stdin=subprocess.DEVNULL, capture_output=True, text=True,
                             timeout=timeout)
        if out.returncode != 0:
            return Probe(when, at, error="exit status %d: %s" % (out.returncode,
                                                                out.stderr.strip()[-200:]))
        return Probe(when, at, fields=parse_probe(out.stdout), others=meter.others_fraction())
    except (OSError, subprocess.SubprocessError, ParseError) as e:
        return Probe(when, at, error=str(e))


class ProbeLog:
    """The probes of one comparison run.  Disabled (no probes, a note) when
    the build has no bench_cpuprobe, e.g. a build directory from before it."""

    def __init__(self, build_dir, quiet=False, interval=INTERVAL, runner=run_probe):
        self.build_dir = build_dir
        self.quiet = quiet
        self.interval = interval
        self.runner = runner
        self.probes = []
        self.last = None
        self.enabled = os.path.exists(program_path(build_dir, PROGRAM))
        if not self.enabled:
            log("%s not built in %s: no CPU-availability probes" % (PROGRAM, build_dir))

    def due(self):
        return self.enabled and (self.last is None
                                 or time.perf_counter() - self.last >= self.interval)

    def probe(self, when):
        if not self.enabled:
            return None
        p = self.runner(self.build_dir, when)
        self.last = time.perf_counter()
        self.probes.append(p)
        if not self.quiet:
            if p.ok:
                log("cpu probe %s: parallel/serial %.2f, one thread %.1f ms" % (
                    when, p.fields["ratio"], p.fields["serial_s"] * 1e3))
            else:
                log("cpu probe %s failed: %s" % (when, p.error))
        return p


def judge(probes, ratio_limit=RATIO_LIMIT, serial_limit=SERIAL_LIMIT):
    """The verdict over a run's probes: a dict with 'state' ('contended',
    'quiet' or 'unknown' when no probe succeeded), 'contended' (bool), the
    per-probe flags ('flags': one list of reasons per probe, None for a
    failed probe) and the figures of the one-line verdict."""
    good = [p for p in probes if p.ok]
    v = {"state": "unknown", "contended": False, "probes": len(probes), "ok": len(good),
         "ratio_limit": ratio_limit, "serial_limit": serial_limit, "flags": []}
    if not good:
        v["flags"] = [None] * len(probes)
        return v
    best = min(p.fields["serial_s"] for p in good)
    worst = max(good, key=lambda p: p.fields["ratio"])
    slowest = max(good, key=lambda p: p.fields["serial_s"])
    for p in probes:
        if not p.ok:
            v["flags"].append(None)
            continue
        why = []
        if p.fields["ratio"] > ratio_limit:
            why.append("parallel/serial %.2f > %.2f" % (p.fields["ratio"], ratio_limit))
        if p.fields["serial_s"] > serial_limit * best:
            why.append("one thread %.2fx the run's best" % (p.fields["serial_s"] / best))
        v["flags"].append(why)
    n_bad = sum(1 for f in v["flags"] if f)
    # Contended probes during which the guest's other processes used under
    # HOST_OTHERS of the CPUs: the CPU time went to the host.
    v["host_probes"] = sum(1 for p, f in zip(probes, v["flags"])
                           if f and p.others == p.others and p.others < HOST_OTHERS)
    ratios = sorted(p.fields["ratio"] for p in good)
    v.update(state="contended" if n_bad else "quiet", contended=bool(n_bad), contended_probes=n_bad,
             ratio_median=ratios[len(ratios) // 2] if len(ratios) % 2 else
             (ratios[len(ratios) // 2 - 1] + ratios[len(ratios) // 2]) / 2,
             ratio_worst=worst.fields["ratio"], ratio_worst_when=worst.when,
             serial_best_s=best, serial_worst_s=slowest.fields["serial_s"],
             serial_worst_when=slowest.when, threads=good[0].fields["threads"])
    return v


def verdict_line(v):
    """One line for the console and the report's notes."""
    if v["state"] == "unknown":
        if not v["probes"]:
            return "CPU availability: not probed (no %s in the build)" % PROGRAM
        return "CPU availability: unknown (all %d probes failed)" % v["probes"]
    core = ("%d probes of %d threads, parallel/serial median %.2f, worst %.2f (%s); one thread "
            "%.1f-%.1f ms" % (v["ok"], v["threads"], v["ratio_median"], v["ratio_worst"],
                              v["ratio_worst_when"], v["serial_best_s"] * 1e3,
                              v["serial_worst_s"] * 1e3))
    if v["contended"]:
        host = (", %d of them with the guest otherwise idle: the host took the CPU"
                % v["host_probes"] if v["host_probes"] else "")
        return ("CPU availability: CONTENDED, this table was taken on a contended machine "
                "(%d of %d probes: parallel/serial > %.2f or one thread > %.2fx the best%s): %s"
                % (v["contended_probes"], v["ok"], v["ratio_limit"], v["serial_limit"], host,
                   core))
    return "CPU availability: not contended (%s)" % core


def probe_table(probes, v, markdown_table):
    """The probes as a markdown table (for the report file)."""
    rows = []
    for p, flag in zip(probes, v["flags"]):
        stamp = time.strftime("%H:%M:%S", time.localtime(p.at))
        if not p.ok:
            rows.append([stamp, p.when, "-", "-", "-", "-", "-", "failed: " + p.error[:80]])
            continue
        f = p.fields
        others = "%.0f%%" % (p.others * 100) if p.others == p.others else "-"
        rows.append([stamp, p.when, "%.1f" % (f["serial_s"] * 1e3),
                     "%.1f" % (f["parallel_s"] * 1e3), "%.2f" % f["ratio"],
                     "%.2f" % f["ratio_max"], others, "; ".join(flag) if flag else "ok"])
    return markdown_table(["time", "when", "one thread ms", "%s threads ms" % (
        v.get("threads") or "N"), "parallel/serial", "worst rep", "others' CPU",
        "verdict"], rows)


def write_json(path, probes, v):
    data = {"verdict": {k: val for k, val in v.items() if k != "flags"},
            "probes": [{"when": p.when, "at": p.at, "ok": p.ok,
                        "others": p.others if p.others == p.others else None,
                        "flags": flag, "error": p.error, "fields": p.fields}
                       for p, flag in zip(probes, v["flags"])]}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")


# Written into the report file when the verdict is contended, read back by
# `bench.py --update-readme` alone (which takes the newest report).
CONTENDED_MARK = "<!-- cpuprobe: contended -->"


def refuse_readme(contended, allow):
    """True (with a message) when the README table must not be written."""
    if contended and not allow:
        log("NOT updating README.md: the CPU-availability probe read this table as taken "
            "on a contended machine; run again on a quiet one, or pass --allow-contended")
        return True
    if contended:
        log("--allow-contended: updating README.md with a table taken on a contended machine")
    return False
