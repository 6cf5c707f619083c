#!/usr/bin/env python3
"""Sum a running process's HAKMEM memory from /proc/PID/smaps.

    scripts/hakmem-smaps.py PID [--json]
    scripts/hakmem-smaps.py --file SMAPS [--json]   # a saved copy of smaps

HAKMEM names its mappings (prctl PR_SET_VMA_ANON_NAME): [anon:hakmem-segment]
(2 MiB segments of small and large blocks), [anon:hakmem-huge] (blocks with a
mapping of their own), [anon:hakmem-meta] (heap records), [anon:hakmem-slicemap]
(the slice map). Rss, Pss, Private_Dirty, Swap, AnonHugePages and
Private_Hugetlb (segments on explicit huge pages, which Rss leaves out) are
summed by kind, in KiB.

Kernels built without CONFIG_ANON_VMA_NAME (or older than 5.17) show no
names. Then the script falls back to an estimate and says so: anonymous
read-write mappings that hold a whole 2 MiB-aligned 2 MiB range (segments
and huge blocks always do; other large anonymous mappings of the program may
match too), counting mappings joined through no-access ones (the secure
build's guard pages) as one. Not "that start on a 2 MiB boundary": the kernel
merges a neighbouring anonymous mapping (a heap record, another program
mapping) into the one above it, and in the secure build a guard chain then
joins every segment after it to that unaligned start (test_smaps_script
counted 0 kB in about 1 run in 15).
"""
import json
import re
import sys

HEADER = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$")
FIELDS = ["Size", "Rss", "Pss", "Private_Dirty", "Swap", "AnonHugePages", "Private_Hugetlb"]
SEG = 2 << 20


def mappings(text):
    cur = None
    for line in text.splitlines():
        m = HEADER.match(line)
        if m:
            if cur:
                yield cur
            lo, hi, perms, path = m.groups()
            cur = {"lo": int(lo, 16), "hi": int(hi, 16), "perms": perms, "path": path.strip(), "kb": {}}
            continue
        if cur is None:
            continue
        key, _, rest = line.partition(":")
        if key in FIELDS:
            cur["kb"][key] = int(rest.split()[0])
    if cur:
        yield cur


def guard_runs(maps):
    """Without names: anonymous mappings joined through no-access ones (the
    secure build's guard pages split a segment or huge block into several
    mappings) count as one, the first one's start and permissions."""
    out = []
    for m in maps:
        guard = not m["path"] and m["perms"].startswith("---")
        prev = out[-1] if out else None
        if prev is not None and not m["path"] and not prev["path"] and prev["hi"] == m["lo"] and \
                (guard or prev["guard_end"]):
            prev["hi"] = m["hi"]
            prev["guard_end"] = guard
            for f, v in m["kb"].items():
                prev["kb"][f] = prev["kb"].get(f, 0) + v
            continue
        out.append(dict(m, kb=dict(m["kb"]), guard_end=guard))
    return out


def summarize(text):
    maps = list(mappings(text))
    named = any(m["path"].startswith("[anon:hakmem") for m in maps)
    if not named:
        maps = guard_runs(maps)
    kinds = {}
    for m in maps:
        if named:
            if not m["path"].startswith("[anon:hakmem"):
                continue
            kind = m["path"][len("[anon:hakmem-"):-1] or "hakmem"
        else:
            if m["path"] or not m["perms"].startswith("rw") or -(-m["lo"] // SEG) * SEG + SEG > m["hi"]:
                continue
            kind = "aligned-anonymous"
        k = kinds.setdefault(kind, dict({f: 0 for f in FIELDS}, mappings=0))
        k["mappings"] += 1
        for f in FIELDS:
            k[f] += m["kb"].get(f, 0)
    total = dict({f: sum(k[f] for k in kinds.values()) for f in FIELDS},
                 mappings=sum(k["mappings"] for k in kinds.values()))
    return {"named": named, "kinds": kinds, "total": total}


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 2
    if argv[1] == "--file":
        text = open(argv[2]).read()
    else:
        try:
            text = open("/proc/%d/smaps" % int(argv[1])).read()
        except (OSError, ValueError) as e:
            print("hakmem-smaps: cannot read smaps of %s: %s" % (argv[1], e), file=sys.stderr)
            return 1
    s = summarize(text)
    if "--json" in argv:
        print(json.dumps(s, indent=1))
        return 0
    if not s["named"]:
        print("note: no [anon:hakmem-*] names (kernel without CONFIG_ANON_VMA_NAME?); estimate from "
              "2 MiB-aligned anonymous mappings")
    print("%-20s %8s %10s %10s %10s %14s %8s %14s %16s" % ("kind", "mappings", "Size kB", "Rss kB", "Pss kB",
                                                            "Private_Dirty", "Swap", "AnonHugePages",
                                                            "Private_Hugetlb"))
    for name, k in sorted(s["kinds"].items()) + [("total", s["total"])]:
        print("%-20s %8d %10d %10d %10d %14d %8d %14d %16d" % (name, k["mappings"], k["Size"], k["Rss"], k["Pss"],
                                                               k["Private_Dirty"], k["Swap"], k["AnonHugePages"],
                                                               k["Private_Hugetlb"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
