#!/usr/bin/env python3
"""test_api_doc.py ROOT — the public API is documented exactly: every
function declared in include/hakmem.h has a "### `name`" section in
docs/api.md and a line in the README's API list (between <!-- api:begin -->
and <!-- api:end -->), neither names a function the header lacks, and every
one is called by at least one program in examples/."""
import glob
import os
import re
import sys

root = sys.argv[1]
header = open(os.path.join(root, "include", "hakmem.h")).read()
# Declarations, not comments or macros: strip comments, then "type name(".
code = re.sub(r"/\*.*?\*/", "", header, flags=re.S)
code = re.sub(r"^\s*#.*$", "", code, flags=re.M)
declared = set(re.findall(r"\b(hak_\w+)\s*\(", code))
api_md = open(os.path.join(root, "docs", "api.md")).read()
documented = set(re.findall(r"^### `(hak_\w+)`", api_md, flags=re.M))
readme = open(os.path.join(root, "README.md")).read()
block = readme.split("<!-- api:begin -->", 1)[1].split("<!-- api:end -->", 1)[0]
listed = set(re.findall(r"^- `(hak_\w+)\(", block, flags=re.M))
examples = "".join(open(p).read() for p in glob.glob(os.path.join(root, "examples", "*.c")))
used = {f for f in declared if re.search(r"\b%s\s*\(" % f, examples)}

bad = []
for name, have in (("docs/api.md", documented), ("README API list", listed)):
    if declared - have:
        bad.append("%s lacks %s" % (name, sorted(declared - have)))
    if have - declared:
        bad.append("%s names functions the header does not declare: %s" % (name, sorted(have - declared)))
if declared - used:
    bad.append("no example in examples/ calls %s" % sorted(declared - used))
if not declared:
    bad.append("no function found in include/hakmem.h")
if bad:
    print("test_api_doc: FAIL\n  " + "\n  ".join(bad))
    print("A new public function needs: a '### `name`' section in docs/api.md (signature, errors,\n"
          "cost), a '- `name(args)`: what it does.' line between <!-- api:begin --> and <!-- api:end -->\n"
          "in README.md, and a call in one of examples/*.c (a new family: a new example, listed in\n"
          "examples/CMakeLists.txt).")
    sys.exit(1)
print("test_api_doc: %d functions declared, documented, listed and used by an example: ok" % len(declared))
