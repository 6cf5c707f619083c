#!/usr/bin/env python3
"""HAKMEM_THP / HAKMEM_HUGE_PAGES on three workloads: median elapsed time,
peak RSS and minor page faults over R alternating rounds (/usr/bin/time).
Usage: scripts/thp_measure.py [ROUNDS]  (needs build-fast/; hugetlb rows use
whatever vm.nr_hugepages holds)."""
import os
import statistics
import subprocess
import sys
B = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build-fast")
LIB = B + "/libhakmem.so"
W = {
 "random_mixed": [B + "/bench/bench_random_mixed", "20000000", "400", "1"],
 "mixed_wide": [B + "/bench/bench_random_mixed", "12000000", "20000", "1", "16", "32K"],
 "mid_mt": [B + "/bench/bench_mid_large_mt", "2", "5000000", "400"],
}
S = {"system": {}, "never": {"HAKMEM_THP": "never"}, "auto": {"HAKMEM_THP": "auto"},
     "always": {"HAKMEM_THP": "always"}, "hugetlb": {"HAKMEM_HUGE_PAGES": "1"}}
R = int(sys.argv[1]) if len(sys.argv) > 1 else 3
res = {}
for r in range(R):
    for w, cmd in W.items():
        for s, env in S.items():
            e = dict(os.environ, LD_PRELOAD=LIB, **env)
            p = subprocess.run(["/usr/bin/time", "-f", "TIME %e %M %R %F"] + cmd, env=e, capture_output=True, text=True)
            line = [l for l in p.stderr.splitlines() if l.startswith("TIME")][-1].split()
            res.setdefault((w, s), []).append((float(line[1]), int(line[2]), int(line[3])))
for w in W:
    for s in S:
        v = res[(w, s)]
        print("%-13s %-8s time %.3f s (min %.3f max %.3f)  maxRSS %6.1f MB  minor faults %7d" % (
            w, s, statistics.median(x[0] for x in v), min(x[0] for x in v), max(x[0] for x in v),
            statistics.median(x[1] for x in v) / 1024, statistics.median(x[2] for x in v)))
