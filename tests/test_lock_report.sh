#!/bin/sh
# test_lock_report.sh OBSERVE_LIB STANDARD_LIB PROGRAM [ARGS...]
# The observe build's HAKMEM_STATS=1 report has one `lock <name> <count>` line
# per process-wide lock taken (os/lock.h); scripts parse exactly that form.
# PROGRAM (multi-threaded, starting and ending threads, allocating) must
# never take a process-wide segment lock (segments are sharded, and a
# shard's lock is not process-wide: segment/segment.c) nor a heap pool lock
# (thread start and exit are lock-free: heap/pool.c). The standard build
# prints no lock lines.
set -u
obs=$1 std=$2; shift 2
out=$(mktemp); trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; cat "$out"; exit 1; }

LD_PRELOAD=$obs HAKMEM_STATS=1 "$@" >/dev/null 2>"$out" || fail "program failed under the observe build"
grep -q '^locks counted$' "$out" || fail "no 'locks counted' line in the observe report"
grep '^lock ' "$out" | grep -Ev '^lock [a-z_]+ [0-9]+$' && fail "a lock line is not 'lock <name> <count>'"
grep -q '^lock segment ' "$out" && fail "a process-wide segment lock was taken"
grep -q '^lock heap_pool ' "$out" && fail "thread start or exit took a heap pool lock"
grep -q '^lock unnamed ' "$out" && fail "a process-wide lock has no name (use HAK_LOCK_NAMED)"
n=$(grep -c '^lock ' "$out")
names=$(grep '^lock ' "$out" | cut -d' ' -f2 | sort)
[ "$(echo "$names" | uniq -d)" = "" ] || fail "a lock name appears twice"

LD_PRELOAD=$std HAKMEM_STATS=1 "$@" >/dev/null 2>"$out" || fail "program failed under the tested build"
if [ "$std" != "$obs" ] && grep -q '^lock' "$out"; then fail "lock lines outside the observe build"; fi
echo "ok: $n lock lines in the observe report:" $names
