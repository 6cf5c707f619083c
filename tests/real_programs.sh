#!/usr/bin/env bash
# real_programs.sh - real programs under LD_PRELOAD=libhakmem.so, compared
# byte for byte with the same run on glibc.
#
# usage: real_programs.sh LIBHAKMEM.so PROGRAM     PROGRAM: python3 sort git gcc sqlite3
#
# Everything happens in a fresh temporary directory.  Inputs are generated once
# (deterministically) and shared; then the scenario for PROGRAM runs twice, in
# the same fresh directory: once plain, once with the program (and
# every process it starts) preloaded with HAKMEM.  Each scenario writes a
# transcript - program output, stderr, exit codes and checksums of the files it
# produced - and the two transcripts must be identical.  Helpers used to build
# inputs (awk, printf) are never preloaded; only the program under test is.
# Exit 77 (ctest SKIP_RETURN_CODE) if PROGRAM is not installed.
set -u

lib=${1:?usage: real_programs.sh LIBHAKMEM.so PROGRAM}
prog=${2:?usage: real_programs.sh LIBHAKMEM.so PROGRAM}
name="real_programs[$prog]"

fail() { echo "$name: FAIL: $*" >&2; exit 1; }
skip() { echo "$name: SKIP: $*"; exit 77; }

[ -f "$lib" ] || fail "library $lib does not exist"
case $lib in /*) ;; *) lib=$PWD/$lib ;; esac

# the environment of both runs: fixed, minimal, no user configuration
work=$(mktemp -d "${TMPDIR:-/tmp}/hakmem-real-$prog.XXXXXX") || fail "mktemp failed"
trap 'rm -rf "$work"' EXIT
unset LD_PRELOAD HAKMEM_TEST_PLAIN
export LC_ALL=C LANG=C TZ=UTC HOME="$work/home" TMPDIR="$work/tmp"
export PYTHONHASHSEED=0 PYTHONDONTWRITEBYTECODE=1 PYTHONNOUSERSITE=1
export GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_PAGER=cat PAGER=cat
mkdir -p "$HOME" "$TMPDIR" "$work/in"

# the preloaded side must really load HAKMEM
maps=$(LD_PRELOAD="$lib" cat /proc/self/maps 2>&1)
grep -qF "$(basename "$lib")" <<<"$maps" ||
  fail "LD_PRELOAD=$lib does not load the library: $(head -c 300 <<<"$maps")"

# RUN is empty on the plain side and "env LD_PRELOAD=lib" on the HAKMEM side
RUN=()
run() { "${RUN[@]}" "$@"; }
# show: run a command, record its stdout+stderr and exit status in the transcript
show() {
  echo "\$ $*"
  run "$@" 2>&1
  echo "[exit $?]"
}
# sums FILE...: checksums (size, CRC) of produced files, for the transcript
sums() { for f in "$@"; do printf '%s ' "$f"; cksum < "$f"; done; }

find_python() {
  if [ -x /usr/bin/python3 ]; then echo /usr/bin/python3; else command -v python3; fi
}

# ---------------------------------------------------------------- inputs ---

gen_lines() { # N SEED: deterministic text lines, about 42 bytes each
  awk -v n="$1" -v seed="$2" 'BEGIN {
    split("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike", w, " ");
    x = seed;
    for (i = 0; i < n; i++) {
      x = (x * 1103 + 12345) % 1000003; y = (x * 7919 + i) % 999983;
      printf "%07d %s-%s %d %s\n", x, w[x % 13 + 1], w[y % 13 + 1], (x * y) % 100000 - 50000, substr("zyxwvutsrqponmlkjihgfedcba", 1 + y % 26, 1 + x % 17);
    }
  }'
}

prepare() {
  case $prog in
  python3)
    cat > "$work/in/alloc.py" <<'EOF'
import collections, hashlib, json, random, re, sys, threading, zlib

h = hashlib.sha256()
rnd = random.Random(12345)

# dicts of lists of dicts, with deletions
d = {}
for i in range(150000):
    k = "key%d_%s" % (i, "x" * (i % 50))
    d[k] = [i, str(i) * (i % 7), {"n": i, "s": k[::-1]}]
for i in range(0, 150000, 3):
    del d["key%d_%s" % (i, "x" * (i % 50))]
h.update(repr(sorted(d.items())[:200]).encode())
h.update(str(len(d)).encode())

# strings: build, join, split, sort
parts = [("%08x" % rnd.getrandbits(32)) * rnd.randint(1, 20) for _ in range(40000)]
s = ",".join(parts)
h.update(s.encode())
words = s.split(",")
h.update(repr(sorted(words)[:100]).encode())

# json round trip
obj = {"list": [{"id": i, "name": "n%d" % i, "vals": list(range(i % 30)), "f": i / 7}
                for i in range(25000)],
       "d": {str(k): k * k for k in range(10000)}}
txt = json.dumps(obj, sort_keys=True)
back = json.loads(txt)
assert back == obj
h.update(txt.encode())

# sorting numbers and records
nums = [rnd.random() for _ in range(200000)]
nums.sort()
h.update(repr(nums[::1000]).encode())
recs = sorted(((rnd.randint(0, 1000), "r%d" % i) for i in range(100000)))
h.update(repr(recs[::500]).encode())

# big bytes, compression, growing bytearrays
blob = b"".join(i.to_bytes(4, "little") for i in range(300000))
z = zlib.compress(blob, 6)
assert zlib.decompress(z) == blob
h.update(z)
ba = bytearray()
for i in range(100000):
    ba += b"%d;" % i
h.update(bytes(ba))

# collections and sets
c = collections.Counter(w[:3] for w in words)
h.update(repr(sorted(c.items())).encode())
st = set(words[::2]) ^ set(words[1::3])
h.update(repr(sorted(st)[:100]).encode())

# threads allocating at once
results = [None] * 4
def work(t):
    local = {}
    for i in range(40000):
        local[i] = str(i * t) * (1 + i % 5)
    results[t] = sum(len(v) for v in local.values())
ths = [threading.Thread(target=work, args=(t,)) for t in range(4)]
for t in ths:
    t.start()
for t in ths:
    t.join()
h.update(repr(results).encode())

# regex
h.update(repr(re.findall(r"[0-9a-f]{3}7", s[:200000])[:500]).encode())

print("dict entries", len(d), "words", len(words), "json bytes", len(txt), "zlib bytes", len(z))
print("digest", h.hexdigest())
EOF
    ;;
  sort)
    gen_lines 125000 7 > "$work/in/data.txt" # ~5 MB
    ;;
  git)
    gen_lines 40000 11 > "$work/in/big.txt" # ~1.7 MB, changed a little in every commit
    ;;
  gcc)
    cat > "$work/in/prog.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
struct node { int key; struct node *l, *r; };
static struct node *insert(struct node *t, int k) {
    if (!t) { t = calloc(1, sizeof *t); t->key = k; return t; }
    if (k < t->key) t->l = insert(t->l, k); else t->r = insert(t->r, k);
    return t;
}
static long walk(const struct node *t, int depth) {
    return t ? walk(t->l, depth + 1) + (long)t->key * depth + walk(t->r, depth + 1) : 0;
}
static void drop(struct node *t) { if (t) { drop(t->l); drop(t->r); free(t); } }
static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
int main(void) {
    struct node *t = NULL;
    unsigned x = 1;
    for (int i = 0; i < 100000; i++) { x = x * 1103515245u + 12345u; t = insert(t, (int)(x >> 8) % 1000000); }
    printf("tree checksum %ld\n", walk(t, 0));
    drop(t);
    char **s = malloc(50000 * sizeof *s);
    for (int i = 0; i < 50000; i++) { x = x * 1103515245u + 12345u; s[i] = malloc(32); snprintf(s[i], 32, "%u-%d", x % 100000, i); }
    qsort(s, 50000, sizeof *s, cmp);
    printf("first %s last %s\n", s[0], s[49999]);
    for (int i = 0; i < 50000; i++) free(s[i]);
    free(s);
    return 0;
}
EOF
    # a bigger generated unit, so that cc1 works (and allocates) for a while
    awk 'BEGIN {
      print "#include <string.h>";
      for (i = 0; i < 250; i++) {
        printf "struct s%d { int a[%d]; double d; char name[%d]; };\n", i, i % 7 + 1, i % 13 + 3;
        printf "int f%d(struct s%d *p, int n) {\n  int acc = %d;\n", i, i, i;
        printf "  for (int k = 0; k < n; k++) { acc += p->a[k %% %d] * %d + (int)p->d; if (acc > %d) acc ^= k; }\n", i % 7 + 1, i + 3, i * 1000;
        printf "  switch (n & 7) { case 0: acc++; break; case 1: acc += %d; break; case 3: acc -= (int)strlen(p->name); break; default: acc *= 3; }\n", i;
        printf "  return acc%s;\n}\n", (i ? sprintf(" + f%d((struct s%d *)p, n - 1)", i - 1, i - 1) : "");
      }
    }' > "$work/in/gen.c"
    ;;
  sqlite3)
    # 10000 customers, 60000 orders, 30000 items: ~100k INSERT statements
    awk 'BEGIN {
      print "PRAGMA journal_mode=DELETE;";
      print "CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT, since INTEGER);";
      print "CREATE TABLE orders(id INTEGER PRIMARY KEY, cust INTEGER REFERENCES customers(id), amount REAL, day INTEGER, note TEXT);";
      print "CREATE TABLE items(oid INTEGER, sku TEXT, qty INTEGER);";
      print "BEGIN;";
      split("Paris Tokyo Lima Oslo Cairo Quito Perth Dakar Riga Sofia", city, " ");
      x = 17;
      for (i = 1; i <= 10000; i++) {
        x = (x * 1103 + 12345) % 1000003;
        printf "INSERT INTO customers VALUES(%d,%s%d%s,%s%s%s,%d);\n", i, "\047cust", x % 100000, "\047", "\047", city[x % 10 + 1], "\047", 2000 + x % 25;
      }
      for (i = 1; i <= 60000; i++) {
        x = (x * 1103 + 12345) % 1000003;
        printf "INSERT INTO orders VALUES(%d,%d,%d.%02d,%d,%s%s%s);\n", i, 1 + x % 10000, x % 5000, x % 100, x % 365, "\047", substr("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod", 1 + x % 40, 5 + x % 30), "\047";
      }
      for (i = 1; i <= 30000; i++) {
        x = (x * 1103 + 12345) % 1000003;
        printf "INSERT INTO items VALUES(%d,%sSKU-%d%s,%d);\n", 1 + x % 60000, "\047", x % 700, "\047", 1 + x % 9;
      }
      print "COMMIT;";
    }' > "$work/in/load.sql"
    cat > "$work/in/queries.sql" <<'EOF'
.headers on
.mode list
SELECT count(*) FROM customers; SELECT count(*) FROM orders; SELECT count(*) FROM items;
CREATE INDEX orders_cust ON orders(cust);
CREATE INDEX items_oid ON items(oid);
SELECT c.city, count(DISTINCT c.id) AS customers, count(o.id) AS orders, printf('%.2f', sum(o.amount)) AS total
  FROM customers c LEFT JOIN orders o ON o.cust = c.id GROUP BY c.city ORDER BY total DESC, c.city;
SELECT c.name, printf('%.2f', sum(o.amount)) AS spent, count(*) AS n
  FROM customers c JOIN orders o ON o.cust = c.id GROUP BY c.id ORDER BY sum(o.amount) DESC, c.id LIMIT 20;
SELECT i.sku, sum(i.qty) AS qty, count(DISTINCT o.cust) AS buyers
  FROM items i JOIN orders o ON o.id = i.oid JOIN customers c ON c.id = o.cust
  WHERE c.since BETWEEN 2005 AND 2015 GROUP BY i.sku HAVING qty > 50 ORDER BY qty DESC, i.sku LIMIT 25;
SELECT day / 30 AS month, count(*), printf('%.2f', avg(amount)), max(note) FROM orders GROUP BY month ORDER BY month;
SELECT cust, amount, rank() OVER (PARTITION BY cust ORDER BY amount DESC, id) AS r FROM orders WHERE cust < 30 ORDER BY cust, r LIMIT 60;
SELECT group_concat(name, ';') FROM (SELECT name FROM customers WHERE name LIKE 'cust1%' ORDER BY name LIMIT 300);
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 50000)
  SELECT count(*), sum(length(printf('%d-%s', x, hex(x)))) FROM n;
UPDATE orders SET note = note || '-' || id WHERE id % 7 = 0;
DELETE FROM items WHERE qty = 1;
SELECT count(*), sum(length(note)) FROM orders; SELECT count(*) FROM items;
VACUUM;
PRAGMA integrity_check;
EOF
    ;;
  esac
}

# -------------------------------------------------------------- scenarios ---

scenario_python3() {
  local py
  py=$(find_python)
  show "$py" "$work/in/alloc.py"
  PYTHONMALLOC=malloc show "$py" "$work/in/alloc.py" # every object through malloc
}

scenario_sort() {
  cp "$work/in/data.txt" data.txt
  mkdir -p t
  show sort -o s1.txt data.txt
  show sort -n -k3,3 -k1,1 -o s2.txt data.txt
  show sort -u -k2,2 -o s3.txt data.txt
  show sort -r -s -k4,4 -o s4.txt data.txt
  show sort -S 256K -T t -o s5.txt data.txt          # small buffer: temporary files, merges
  show sort --parallel=2 -S 2M -T t -k2,2 -k3,3n -o s6.txt data.txt
  run sort -m s1.txt s1.txt > s7.txt 2>&1; echo "[merge exit $?]"
  show sort -c s1.txt
  sums data.txt s1.txt s2.txt s3.txt s4.txt s5.txt s6.txt s7.txt
  head -3 s2.txt; tail -2 s6.txt
}

scenario_git() {
  local i t
  export GIT_AUTHOR_NAME="A U Thor" GIT_AUTHOR_EMAIL=author@example.com
  export GIT_COMMITTER_NAME="C O Mitter" GIT_COMMITTER_EMAIL=committer@example.com
  commit() { # MESSAGE: commit with the next fixed date
    t=$((t + 3600))
    GIT_AUTHOR_DATE="@$t +0000" GIT_COMMITTER_DATE="@$t +0000" show git commit -q -m "$1"
  }
  t=1600000000
  show git init -q -b main repo
  cd repo || return
  run git config core.autocrlf false
  run git config gc.auto 0
  cp "$work/in/big.txt" big.txt
  mkdir -p src docs
  for i in $(seq 1 12); do
    awk -v i="$i" 'NR % 97 == i { $0 = $0 " edit" i } { print }' big.txt > big.tmp && mv big.tmp big.txt
    printf 'int f%d(void) { return %d; }\n' "$i" "$i" >> src/code.c
    printf 'line %d\n' "$i" > "docs/note$i.txt"
    show git add -A
    commit "commit $i on main"
  done
  show git switch -q -c feature
  for i in $(seq 1 6); do
    printf 'feature %d\n' "$i" >> docs/feature.txt
    sed -i "s/return $i;/return $i * 2;/" src/code.c
    show git add -A
    commit "feature $i"
  done
  show git switch -q main
  for i in $(seq 13 16); do
    printf 'int g%d(void) { return -%d; }\n' "$i" "$i" >> src/other.c
    show git add -A
    commit "commit $i on main"
  done
  t=$((t + 3600))
  GIT_AUTHOR_DATE="@$t +0000" GIT_COMMITTER_DATE="@$t +0000" show git merge --no-ff -q -m "merge feature" feature
  show git log --graph --format='%H %an %ad %s' --date=raw
  show git log --stat --format='%h %s' -n 8
  show git diff main~6 main --stat
  run git diff main~10 main > ../diff.txt 2>&1; echo "[diff exit $?]"
  show git blame -s src/code.c
  show git grep -n 'return 1' -- src
  show git rev-list --count --all
  show git branch -v
  show git tag -a v1 -m "version one" main~3
  show git describe main
  show git gc -q --aggressive
  show git fsck --full --strict
  show git repack -a -d -f -q --window=20
  show git fsck --full --strict
  run git count-objects -v | grep -E '^(count|in-pack|packs|garbage):'
  run git archive --format=tar HEAD > ../archive.tar; echo "[archive exit $?]"
  run git cat-file -p HEAD
  show git show --stat HEAD~2
  cd ..
  sums diff.txt archive.tar
}

scenario_gcc() {
  cp "$work/in/prog.c" "$work/in/gen.c" .
  show gcc -O2 -S -o prog.s prog.c
  show gcc -O3 -S -o gen.s gen.c
  show gcc -O0 -g -S -o gen0.s gen.c
  show gcc -O2 -Wall -o prog prog.c
  show gcc -O2 -c -o gen.o gen.c
  sums prog.s gen.s gen0.s
  echo "\$ ./prog (not preloaded)"
  ./prog 2>&1
  echo "[exit $?]"
}

scenario_sqlite3() {
  show sqlite3 db.sqlite < "$work/in/load.sql"
  show sqlite3 db.sqlite < "$work/in/queries.sql"
  run sqlite3 db.sqlite .dump > dump.sql 2>&1; echo "[dump exit $?]"
  sums dump.sql
  show sqlite3 :memory: < "$work/in/load.sql"
}

# ------------------------------------------------------------------ main ---

case $prog in
  python3) [ -n "$(find_python)" ] || skip "python3 is not installed" ;;
  sort|git|gcc|sqlite3) command -v "$prog" > /dev/null 2>&1 || skip "$prog is not installed" ;;
  *) fail "unknown program $prog (expected python3, sort, git, gcc or sqlite3)" ;;
esac

prepare || fail "preparing the inputs failed"

start=$(date +%s.%N)
for side in plain hakmem; do
  if [ $side = hakmem ]; then RUN=(env "LD_PRELOAD=$lib"); else RUN=(); fi
  # both sides in the same fresh directory: absolute paths (gcc -g records
  # the working directory) are the same
  rm -rf "$work/run" && mkdir "$work/run" || fail "cannot make $work/run"
  (cd "$work/run" && "scenario_$prog") > "$work/$side.transcript" 2>&1
done
end=$(date +%s.%N)

if ! cmp -s "$work/plain.transcript" "$work/hakmem.transcript"; then
  echo "$name: FAIL: output under HAKMEM differs from glibc's (diff plain hakmem):" >&2
  diff "$work/plain.transcript" "$work/hakmem.transcript" | head -40 >&2
  # keep the evidence
  keep=$(mktemp -d "/tmp/hakmem-real-$prog-failed.XXXXXX")
  cp -r "$work/plain.transcript" "$work/hakmem.transcript" "$keep"/ 2>/dev/null
  echo "$name: transcripts kept in $keep" >&2
  exit 1
fi
grep -q "hakmem: [a-z_]*: invalid pointer" "$work/hakmem.transcript" && fail "HAKMEM reported an invalid pointer"
lines=$(wc -l < "$work/plain.transcript")
printf '%s: OK: %s under HAKMEM gives the same %s-line transcript (outputs, exit codes, file checksums) as on glibc; both runs %.1f s\n' \
  "$name" "$prog" "$lines" "$(echo "$end - $start" | awk '{ print $1 - $3 }')"
exit 0
