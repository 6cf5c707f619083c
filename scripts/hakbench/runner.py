"""Running the programs: wall time and peak RSS of a child, the result-line
check, runs under strace and valgrind, progress, the load of the machine."""
import math
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time

from .allocators import Allocator, glibc_version
from .common import ROOT, fmt_duration, log, tail
from .parse import (
    ParseError, parse_cachegrind_summary, parse_callgrind_total, parse_result,
    parse_strace_summary)
from .workloads import WORKLOAD_BY_NAME, program_path


class RunResult:
    def __init__(self, cmd, rc, stdout, stderr, wall, maxrss_kb, cpu=None, minflt=None):
        self.cmd = cmd
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        self.wall = wall
        self.maxrss_kb = maxrss_kb
        self.cpu = cpu          # the child's user + system seconds (wait4)
        self.minflt = minflt    # its minor page faults (wait4)
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
    return RunResult(cmd, proc.returncode, "".join(chunks), stderr, wall, usage.ru_maxrss,
                     usage.ru_utime + usage.ru_stime, usage.ru_minflt)


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


# Fixed simulated caches, so that figures do not depend on the host's caches
# (cachegrind would copy the host's, with a 256 MiB direct-mapped L3 on some):
# a common L1 (32 KiB, 8-way) and an 8 MiB 16-way last level, 64-byte lines.
CACHE_SIM = ("--I1=32768,8,64", "--D1=32768,8,64", "--LL=8388608,16,64")
# The same simulator with 4 KiB lines models the data TLBs: a 64-entry fully
# associative L1 dTLB and a 1536-entry 12-way L2 TLB.  A miss is a touch of a
# page outside the most recently used 64 (1536): pages touched per operation.
TLB_SIM = ("--I1=32768,8,64", "--D1=262144,64,4096", "--LL=6291456,12,4096")


def cachegrind_counts(build_dir, workload, n, alloc, sim, timeout=1800):
    """Run under cachegrind with the cache simulator configured by sim;
    return (ops, {event: count})."""
    with tempfile.TemporaryDirectory(prefix="bench-cachegrind.") as d:
        out_path = os.path.join(d, "cachegrind.out")
        cmd = (["valgrind", "--tool=cachegrind", "--cache-sim=yes"] + list(sim)
               + ["--cachegrind-out-file=" + out_path,
                  program_path(build_dir, workload.program)] + workload.args(n))
        return run_tool("cachegrind", cmd, alloc.environment(), workload, alloc, out_path,
                        parse_cachegrind_summary, timeout)


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
