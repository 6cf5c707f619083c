#!/bin/sh
# test_valgrind.sh LIB PROGRAM: run PROGRAM (vg_errors) under valgrind's
# memcheck with LIB (libhakmem-valgrind.so) preloaded, once per case, and
# check memcheck's verdict: nothing for correct use, and each bug reported.
# Exit 77 (skipped) when valgrind is not installed.
set -u
lib=$1 prog=$2
command -v valgrind >/dev/null 2>&1 || { echo "valgrind not installed: skipped"; exit 77; }
out=${TMPDIR:-/tmp}/test_valgrind.$$
trap 'rm -f "$out"' EXIT
fail=0

# expect CASE PATTERN...: every PATTERN (grep -E) must be in memcheck's output
expect() {
  case_=$1; shift
  # valgrind passes LD_PRELOAD on to the program, after its own preloads;
  # without nouserintercepts it would replace HAKMEM's malloc by its own
  LD_PRELOAD="$lib" valgrind --tool=memcheck --soname-synonyms=somalloc=nouserintercepts \
    --leak-check=full --errors-for-leak-kinds=definite \
    --error-exitcode=99 "$prog" "$case_" >"$out" 2>&1
  rc=$?
  for pat in "$@"; do
    if ! grep -Eq "$pat" "$out"; then
      echo "FAIL: case $case_: memcheck did not report /$pat/ (exit $rc)"; cat "$out"; fail=1; return
    fi
  done
  echo "ok: $case_: $(grep -E 'ERROR SUMMARY' "$out" | sed 's/^==[0-9]*== //')"
}

expect clean  "ERROR SUMMARY: 0 errors"
expect leak   "4,000 bytes in 1 blocks are definitely lost" "7,000 bytes in 1 blocks are definitely lost" "ERROR SUMMARY: 2 errors"
expect uaf    "Invalid write of size 1" "Invalid read of size 1" "inside a block of size 48 free'd"
expect uninit "Conditional jump or move depends on uninitialised value"
expect overflow "Invalid write of size 1" "0 bytes after a block of size 100 alloc'd"
expect double "Invalid free"
[ $fail -eq 0 ] && echo "test_valgrind: OK: memcheck sees HAKMEM's blocks (clean run, leak, use after free, uninitialised read, overflow, double free)"
exit $fail
