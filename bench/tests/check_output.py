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
