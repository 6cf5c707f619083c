#!/usr/bin/env python3
"""check_cpuprobe.py PROGRAM: run bench_cpuprobe once, short, and check that
its line parses with the runner's parser and that its figures are consistent
(not its timing: any machine, any load).  ctest's bench_cpuprobe test."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))

from hakbench import cpuprobe  # noqa: E402


def main(argv):
    if len(argv) != 2:
        print("usage: check_cpuprobe.py PROGRAM", file=sys.stderr)
        return 2
    reps, work = 3, 2000000
    out = subprocess.run([argv[1], str(reps), str(work)], capture_output=True, text=True,
                         timeout=60)
    print(out.stdout, end="")
    if out.returncode != 0:
        print("FAIL: exit status %d: %s" % (out.returncode, out.stderr), file=sys.stderr)
        return 1
    f = cpuprobe.parse_probe(out.stdout)
    problems = []
    if f["reps"] != reps or f["work"] != work:
        problems.append("reps=%s work=%s, asked %d %d" % (f["reps"], f["work"], reps, work))
    if not (isinstance(f["threads"], int) and 1 <= f["threads"] <= (os.cpu_count() or 1)):
        problems.append("threads=%r, online CPUs %r" % (f["threads"], os.cpu_count()))
    for key in ("serial_all", "parallel_all"):
        if len(f.get(key) or ()) != reps or min(f[key]) <= 0:
            problems.append("%s=%r: not %d positive times" % (key, f.get(key), reps))
    if not problems:
        ser, par = sorted(f["serial_all"]), sorted(f["parallel_all"])
        if abs(f["serial_s"] - ser[reps // 2]) > 1e-5 or abs(f["parallel_s"] - par[reps // 2]) > 1e-5:
            problems.append("serial_s/parallel_s are not the medians of the lists")
        ratios = sorted(p / s for p, s in zip(f["parallel_all"], f["serial_all"]))
        if abs(f["ratio"] - ratios[reps // 2]) > 0.02 * ratios[reps // 2]:
            problems.append("ratio %s is not the median of parallel/serial %s" % (f["ratio"], ratios))
        if not f["ratio_min"] <= f["ratio"] <= f["ratio_max"]:
            problems.append("ratio outside ratio_min..ratio_max")
        if abs(f["cpus"] - f["threads"] / f["ratio"]) > 0.01:
            problems.append("cpus %s != threads / ratio" % f["cpus"])
        if f["secs"] < sum(f["serial_all"]) + sum(f["parallel_all"]) - 1e-4:
            problems.append("secs %s less than the timed spins" % f["secs"])
    for p in problems:
        print("FAIL: " + p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
