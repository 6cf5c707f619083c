#!/usr/bin/env python3
"""check_output.py --program NAME --output TEXT [--reference TEXT]

Used by the ctest smoke tests (smoke.sh): the result line in TEXT must parse
with the runner's parser, and its checksum must equal the one in the
reference output (the same program and arguments without the preload)."""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "scripts"))
from hakbench import parse  # noqa: E402


MASK64 = (1 << 64) - 1


def rng_seed(seed):
    """bench_rng_seed of bench_common.h."""
    z = (seed + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    z ^= z >> 31
    return z or 0x2545F4914F6CDD1D


def rng_next(x):
    """bench_rng_next of bench_common.h: (new state, output)."""
    x ^= (x << 13) & MASK64
    x ^= x >> 7
    x ^= (x << 17) & MASK64
    return x, x


def prodcons_first_bytes(index, count, lo, hi):
    """Bytes of the first count blocks producer index of bench_prodcons allocates."""
    x, span, total = rng_seed(4242 + index), hi - lo + 1, 0
    for _ in range(count):
        x, r = rng_next(x)
        total += lo + (((r & 0xFFFFFFFF) * span) >> 32)
    return total


def program_checks(program, f):
    """What a program's result line must show beyond parsing; None if fine."""
    if program == "bench_prodcons":
        # Every consumer starts at a full ring (4096 entries, whole batches):
        # before it does, its producer has allocated at least those blocks.
        if "peak_live_kb" not in f:
            return "bench_prodcons reports no peak_live_kb="
        full = min(f["items"], 4096 // f["batch"] * f["batch"])
        need = sum(prodcons_first_bytes(i, full, f["min"], f["max"])
                   for i in range(f["pairs"]))
        if f["peak_live_kb"] < (need + 1023) // 1024:
            return ("peak_live_kb=%d is below the %d KiB of a full ring: the consumer did not "
                    "wait for the ring to fill" % (f["peak_live_kb"], (need + 1023) // 1024))
    if program == "bench_sizemix":
        # Finished threads free what they are handed (late=), at most all of it.
        if not isinstance(f.get("late"), int) or not 0 <= f["late"] <= f["handed"]:
            return "bench_sizemix: late=%s is not a count of at most handed=%s" % (
                f.get("late"), f.get("handed"))
    return None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--program", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--reference")
    a = p.parse_args()
    try:
        got = parse.parse_result(a.output, a.program)
    except parse.ParseError as e:
        print("FAIL: %s" % e)
        return 1
    print("ok: %s" % " ".join("%s=%s" % kv for kv in got.items() if kv[0] != "program"))
    if a.program == "bench_soak":
        parse.parse_epochs(a.output)
    problem = program_checks(a.program, got)
    if problem:
        print("FAIL: %s" % problem)
        return 1
    if a.reference is not None:
        try:
            ref = parse.parse_result(a.reference, a.program)
        except parse.ParseError as e:
            print("FAIL: reference run: %s" % e)
            return 1
        if ref["checksum"] != got["checksum"] or ref["ops"] != got["ops"]:
            print("FAIL: checksum/ops %s/%s differ from the run without preload %s/%s: "
                  "the allocator returned corrupted data"
                  % (got["checksum"], got["ops"], ref["checksum"], ref["ops"]))
            return 1
        print("checksum matches the run without preload")
    return 0


if __name__ == "__main__":
    sys.exit(main())
