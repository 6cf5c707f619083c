#!/usr/bin/env python3
"""Print the Markdown table of HAKMEM's options, generated from the option
table in src/policy/options.c as the library itself lists it
(HAKMEM_VERBOSE=2 under each profile), or check that files hold it.

    scripts/options_table.py LIBHAKMEM.so                # print the table
    scripts/options_table.py LIBHAKMEM.so --check FILE.. # exit 1 if a file's
        table (between <!-- options:begin --> and <!-- options:end -->) differs
"""
import os
import re
import subprocess
import sys

PROFILES = ["speed", "balanced", "lean"]
LINE = re.compile(r"^hakmem:   (HAKMEM_\w+)\s+(\S+)\s+([* ])\s+default (\S+), (.*)$")
DESC = re.compile(r"^hakmem:       (.*)$")
BEGIN, END = "<!-- options:begin -->", "<!-- options:end -->"


def listing(lib, profile):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HAKMEM_")}
    env.update(HAKMEM_PROFILE=profile, HAKMEM_VERBOSE="2", LD_PRELOAD=lib)
    err = subprocess.run(["/bin/true"], env=env, stderr=subprocess.PIPE, text=True, check=True).stderr
    opts, last = {}, None
    for line in err.splitlines():
        m = LINE.match(line)
        if m:
            name, _value, star, default, rng = m.groups()
            last = opts[name] = {"default": default, "range": rng, "runtime": star == "*", "desc": ""}
            continue
        m = DESC.match(line)
        if m and last is not None:
            last["desc"] = m.group(1)
    if not opts:
        sys.exit("options_table: no option listing from %s (HAKMEM_VERBOSE=2)" % lib)
    return opts


def table(lib):
    by_profile = [listing(lib, p) for p in PROFILES]
    rows = ["| variable | default: speed (balanced, lean) | range | set at run time | meaning |",
            "|---|---|---|---|---|"]
    for name, o in by_profile[0].items():
        d = [p[name]["default"] for p in by_profile]
        default = "`%s`" % d[0] if d[1] == d[0] and d[2] == d[0] else "`%s` (%s, %s)" % tuple(d)
        if name == "HAKMEM_PROFILE":
            default = "`speed`"
        rng = o["range"].replace("|", ", ")
        rows.append("| `%s` | %s | %s | %s | %s |" % (name, default, rng, "yes" if o["runtime"] else "no",
                                                     o["desc"].replace("|", "\\|")))
    return "\n".join(rows)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    want = table(sys.argv[1])
    if "--check" not in sys.argv:
        print(want)
        return
    bad = 0
    for path in sys.argv[sys.argv.index("--check") + 1:]:
        text = open(path).read()
        if BEGIN not in text or END not in text:
            print("%s: no %s ... %s block" % (path, BEGIN, END))
            bad = 1
            continue
        have = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
        if have != want:
            print("%s: the options table is not current; regenerate it with\n  scripts/options_table.py %s\n"
                  "--- in the file\n%s\n--- from the library\n%s" % (path, sys.argv[1], have, want))
            bad = 1
        else:
            print("%s: options table current (%d options)" % (path, len(want.splitlines()) - 2))
    sys.exit(bad)


if __name__ == "__main__":
    main()
