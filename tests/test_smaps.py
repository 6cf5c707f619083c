#!/usr/bin/env python3
"""test_smaps.py — scripts/hakmem-smaps.py and HAKMEM's mapping names.

    test_smaps.py script TARGET   the script's sums: a fixture with named
                                  mappings, and a live process (smaps_target)
    test_smaps.py names TARGET    /proc/PID/maps shows [anon:hakmem-*] names;
                                  exit 77 (skipped) on kernels without
                                  CONFIG_ANON_VMA_NAME
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "scripts", "hakmem-smaps.py")
sys.path.insert(0, os.path.dirname(SCRIPT))
smaps = __import__("hakmem-smaps")

FIXTURE = """\
7f0000000000-7f0000400000 rw-p 00000000 00:00 0                          [anon:hakmem-segment]
Size:               4096 kB
Rss:                3000 kB
Pss:                3000 kB
Private_Dirty:      2900 kB
AnonHugePages:      2048 kB
Swap:                  4 kB
VmFlags: rd wr mr mw me ac
7f0000400000-7f0000404000 rw-p 00000000 00:00 0                          [anon:hakmem-meta]
Size:                 16 kB
Rss:                  16 kB
Pss:                  16 kB
Private_Dirty:        16 kB
7f0000600000-7f0000800000 rw-p 00000000 00:00 0                          [anon:hakmem-segment]
Size:               2048 kB
Rss:                 100 kB
Pss:                  50 kB
Private_Dirty:        60 kB
7f1000000000-7f1000200000 rw-p 00000000 00:00 0
Size:               2048 kB
Rss:                2048 kB
Pss:                2048 kB
55a19d363000-55a19d365000 r--p 00000000 fe:00 247134                     /usr/bin/cat
Size:                  8 kB
Rss:                   8 kB
"""


def fail(msg):
    print("test_smaps: FAIL: " + msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def start(target):
    p = subprocess.Popen([target], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline().split()
    check(line and line[0] == "ready", "target did not start: %r" % line)
    return p, line[1] == "1"


def script_test(target):
    s = smaps.summarize(FIXTURE)
    seg = s["kinds"]["segment"]
    check(s["named"] and set(s["kinds"]) == {"segment", "meta"}, "kinds %s" % s["kinds"].keys())
    check(seg["mappings"] == 2 and seg["Rss"] == 3100 and seg["Pss"] == 3050 and seg["Private_Dirty"] == 2960 and
          seg["Swap"] == 4 and seg["AnonHugePages"] == 2048, "segment sums %s" % seg)
    check(s["total"]["Rss"] == 3116 and s["total"]["mappings"] == 3, "total %s" % s["total"])
    # Without names: the 2 MiB-aligned anonymous mappings (all three here).
    unnamed = smaps.summarize(FIXTURE.replace("[anon:hakmem-segment]", "").replace("[anon:hakmem-meta]", ""))
    check(not unnamed["named"] and unnamed["total"]["Rss"] == 3000 + 100 + 2048, "estimate %s" % unnamed["total"])

    p, named = start(target)
    try:
        out = subprocess.run([sys.executable, SCRIPT, str(p.pid), "--json"], stdout=subprocess.PIPE, text=True,
                             check=True).stdout
        text = subprocess.run([sys.executable, SCRIPT, str(p.pid)], stdout=subprocess.PIPE, text=True,
                              check=True).stdout
    finally:
        p.stdin.close()
        p.wait()
    check(p.returncode == 0, "target exit %d" % p.returncode)
    import json
    s = json.loads(out)
    rss = s["total"]["Rss"] + s["total"]["Private_Hugetlb"]
    # 32 MiB of blocks and an 8 MiB huge block were written.
    check(rss >= 40 * 1024 and s["named"] == named, "live process: %d kB counted (named %s)" % (rss, s["named"]))
    if named:
        check("segment" in s["kinds"] and "huge" in s["kinds"], "kinds %s" % list(s["kinds"]))
    check("total" in text, "text output:\n" + text)
    print(text, end="")
    print("test_smaps: fixture sums, estimate without names, live process (%d kB, names %s): ok" % (rss, named))


def names_test(target):
    p, named = start(target)
    try:
        maps = open("/proc/%d/maps" % p.pid).read()
    finally:
        p.stdin.close()
        p.wait()
    if not named:
        print("test_smaps: this kernel does not name anonymous mappings (no CONFIG_ANON_VMA_NAME): skipped")
        sys.exit(77)
    for kind in ("segment", "huge", "slicemap"):
        check("[anon:hakmem-%s]" % kind in maps, "no [anon:hakmem-%s] in maps:\n%s" % (kind, maps))
    print("test_smaps: /proc/PID/maps names HAKMEM's mappings: ok")


if __name__ == "__main__":
    {"script": script_test, "names": names_test}[sys.argv[1]](sys.argv[2])
