#!/usr/bin/env bash
# security-table.sh — which bug classes (tests/security/) each allocator
# detects: glibc, the standard build (libhakmem.so) and the secure build
# (libhakmem-secure.so; "n/a" until it exists).
#
#   scripts/security-table.sh [BUILD_DIR]        print the table (markdown)
#   scripts/security-table.sh --check VARIANT EXPECTED [BUILD_DIR]
#        run one column (glibc, standard or secure) and compare it with the
#        file EXPECTED ("<case> <verdict>" lines, a verdict may be "yes|no":
#        either); exit 1 on any difference
#
# The HAKMEM columns run write-after-free with HAKMEM_ZERO_ON_FREE=1 (case_env).
# Verdicts (tests/security/sec_harness.h): yes = detected (abort with a
# message, a report line, or NULL+ENOMEM for impossible requests), crash =
# died on a signal without a message, no = not detected, hang.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

check_variant= expected=
if [ "${1:-}" = --check ]; then
  check_variant=${2:?variant}; expected=${3:?expected file}; shift 3
fi
build=${1:-$here/build}
progs="sec_double_free sec_invalid_free sec_overflow sec_misc sec_cxx"
for p in $progs; do
  [ -x "$build/tests/security/$p" ] || { echo "security-table: $build/tests/security/$p not built" >&2; exit 2; }
done

lib_of() {
  case $1 in
    glibc) echo "" ;;
    standard) echo "$build/libhakmem.so" ;;
    secure) echo "$build/libhakmem-secure.so" ;;
  esac
}

# Environment a case runs with under HAKMEM: write-after-free is looked for
# only with HAKMEM_ZERO_ON_FREE=1 (off by default: it turns the caches off).
case_env() {
  case $1 in
    write-after-free) echo HAKMEM_ZERO_ON_FREE=1 ;;
  esac
}

# column VARIANT: "<case> <verdict>" lines, or nothing if the library is missing
column() {
  local lib; lib=$(lib_of "$1")
  if [ -n "$lib" ] && [ ! -f "$lib" ]; then return 0; fi
  for p in $progs; do
    if [ -z "$lib" ]; then "$build/tests/security/$p"; continue; fi
    for c in $("$build/tests/security/$p" --list); do
      env $(case_env "$c") LD_PRELOAD="$lib" "$build/tests/security/$p" "$c"
    done
  done | awk '{ v = $2; if (v == "detected") v = "yes"; else if (v == "not-detected") v = "no"; else if (v == "crashed") v = "crash"; print $1, v }'
}

if [ -n "$check_variant" ]; then
  got=$(column "$check_variant")
  [ -n "$got" ] || { echo "security-table: no $check_variant library in $build" >&2; exit 2; }
  # An expected verdict may list alternatives ("yes|no"): a case whose
  # outcome depends on the secure build's random block order.
  want=$(grep -v '^#' "$expected" | sed '/^$/d')
  got=$(paste -d' ' <(echo "$want") <(echo "$got") |
        awk 'NF == 4 && $1 == $3 && index("|" $2 "|", "|" $4 "|") { print $1, $2; next } NF >= 3 { print $3, $4; next } { print }')
  if diff <(echo "$want") <(echo "$got") >/dev/null; then
    echo "security-table: $check_variant column as expected ($(echo "$got" | grep -c ' yes$') of $(echo "$got" | wc -l) classes detected)"
    exit 0
  fi
  echo "security-table: $check_variant column differs from $expected (< expected, > now):"
  diff <(echo "$want") <(echo "$got")
  exit 1
fi

g=$(column glibc); s=$(column standard); x=$(column secure)
echo "| bug class | glibc | standard | secure |"
echo "|---|---|---|---|"
echo "$g" | while read -r name v; do
  sv=$(echo "$s" | awk -v n="$name" '$1 == n { print $2 }')
  xv=$(echo "$x" | awk -v n="$name" '$1 == n { print $2 }')
  echo "| $name | $v | ${sv:-n/a} | ${xv:-n/a} |"
done
